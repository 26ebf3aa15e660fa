"""``posenc eval MODEL``: perplexity and passkey retrieval of a local checkpoint at 1, 2, 4 and 8 times
its trained context, under every scaling side by side. See ``docs/eval.md``.

The command's settings are checked once into an :class:`~posenc.measuring.eval.settings.EvalRun`, which every
step below takes whole. The model is loaded once, offline (``local_files_only=True``,
``HF_HUB_OFFLINE=1``). Each scaling is installed through
:func:`posenc.integrations.transformers.patch` with exact tables, measured, and removed. Every finished
cell (one scaling at one length, or one passkey cell) is saved to ``progress.json`` in the output
folder as it finishes; running the same command again skips them. Mistakes (a missing folder, a
folder that is not a checkpoint, an unknown scaling, a bad number) end the command with one line on
stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ... import runs
from . import taskrun
from .files import (
    LOCK_NAME,
    MAX_NATS_PER_TOKEN,
    OWN_FILES,
    EvalError,
    depth_key,
    read_stamped,
    settings_changed,
    stamp,
    write_json,
)
from .measure import FORMATS
from .memory import available_bytes, estimate_bytes, size_text
from .scalings import ScalingSpec, SpecError, written_config
from .settings import DTYPES, EvalRun

#: The flags of ``posenc eval`` after MODEL with their argparse keywords, in ``--help``'s order. Every
#: value stays text here: :meth:`EvalRun.from_args` parses it, so a mistake is one line naming the flag.
OPTIONS: List[Tuple[str, Dict[str, Any]]] = [
    (
        "--scalings",
        dict(
            default=None,
            help="comma-separated scalings, e.g. none,linear:4,ntk:4,dynamic,yarn:4,llama3:4 (a name alone "
            "fits its factor to each length as posenc lab does; default: model (if it has one), none and every "
            "registered type with a lab default)",
        ),
    ),
    ("--lengths", dict(default=None, help="lengths in tokens (default 1,2,4,8 x L0)")),
    (
        "--text",
        dict(
            default=None,
            help="a UTF-8 text file (default: the Python standard library's validation split, the lab's corpus)",
        ),
    ),
    ("--windows", dict(default="16", help="perplexity windows (default 16)")),
    ("--final-tokens", dict(default="32", help="tail scored as 'final' (32)")),
    ("--passkey-trials", dict(default="10", help="trials per passkey cell (0: no passkey)")),
    ("--depths", dict(default="0,0.25,0.5,0.75,1", help="needle depths in [0, 1]")),
    (
        "--passkey-format",
        dict(
            default="words",
            help=f"one of {', '.join(sorted(FORMATS))}: the passkey papers' sentence (words, default) or the "
            "lab's <key:DDDDD> plant (lab)",
        ),
    ),
    (
        "--tasks",
        dict(
            default="small",
            help="RULER-style tasks, comma-separated names or groups: small (default: niah_single_2, niah_multikey_1, "
            "vt), ruler (all 11), none; see docs/eval.md",
        ),
    ),
    ("--task-trials", dict(default=None, help="trials per task cell (default: --passkey-trials; 0: no tasks)")),
    ("--chat", dict(action="store_true", help="frame each task prompt with the checkpoint's chat template")),
    (
        "--threshold",
        dict(default="0.856", help="score the effective length asks for (default 0.856, RULER's bar)"),
    ),
    (
        "--out",
        dict(
            default=None,
            help="output folder (default runs/eval-<model>-<time>); resumed when it holds the same evaluation",
        ),
    ),
    ("--fresh", dict(action="store_true", help="with --out: discard the folder's earlier cells")),
    (
        "--force",
        dict(
            action="store_true",
            help="with --write-config: replace an existing file (the checkpoint's own config.json included), "
            "keeping the replaced file as <name>.orig",
        ),
    ),
    (
        "--write-config",
        dict(
            metavar="OUT",
            default=None,
            help="write a copy of config.json with the one scaling of --scalings (transformers' own format) "
            "to OUT (a new folder, or a .json path) and exit; an existing file is replaced only with --force",
        ),
    ),
    (
        "--dtype",
        dict(default=None, help=f"weights dtype, one of {', '.join(DTYPES)} (float32 on CPU, else bfloat16)"),
    ),
    ("--device", dict(default="cpu", help="cpu, cuda or cuda:N")),
    (
        "--device-map",
        dict(default=None, help="auto: spread the model over devices (accelerate's convention; needs accelerate)"),
    ),
    ("--batch-size", dict(default="1", help="windows per forward pass (1)")),
    (
        "--memory-limit",
        dict(default=None, metavar="GB", help="memory to plan for instead of what the device reports free"),
    ),
    (
        "--search",
        dict(
            metavar="TYPE",
            default=None,
            help="tune this scaling's parameters (e.g. yarn, linear, ntk, llama3, longrope) for the lowest bits "
            "per byte at --search-length on windows apart from the report's, and report the best found beside "
            "the default",
        ),
    ),
    ("--search-length", dict(default=None, help="the search's target length (default: the longest)")),
    ("--search-windows", dict(default="8", help="windows the search scores (8), apart from the report's")),
    ("--search-budget", dict(default="40", help="configurations the search may evaluate (40)")),
    ("--seed", dict(default="0")),
    ("--bootstrap-samples", dict(default="1000")),
    ("--no-plots", dict(dest="plots", action="store_false", default=True)),
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="a local transformers checkpoint folder (never downloaded)")
    for flag, keywords in OPTIONS:
        parser.add_argument(flag, **keywords)


def run(args) -> int:
    try:
        return _run(EvalRun.from_args(args))
    except (EvalError, SpecError) as err:
        print(f"posenc eval: {err}", file=sys.stderr)
        return 2


def _run(ev: EvalRun) -> int:
    """Write the config ``--write-config`` asks for, or run the evaluation in its locked folder."""
    if ev.write_config is not None:
        new, note = written_config(ev.config, ev.specs[0], ev.trained)
        kept = write_config_file(ev.write_config, new, ev.model, ev.force)
        print(
            f"wrote {ev.write_config} with {ev.specs[0].label}"
            + (f"; the replaced file is kept as {kept}" if kept else "")
            + (f"; {note}" if note else "")
        )
        return 0
    text = load_text(ev.text)
    claim_out(ev.out, ev.model)
    try:
        lock = runs.RunLock(ev.out, LOCK_NAME).acquire()
    except runs.FolderBusy as busy:
        raise EvalError(
            f"--out {str(ev.out)!r} is in use by another posenc eval ({busy}); wait for it or choose another --out"
        ) from None
    except runs.LockRefused as refused:
        raise EvalError(f"--out {str(ev.out)!r}: {refused}") from None
    try:
        runs.remove_temporaries(ev.out, _eval_file)  # an interrupted write's; no writer of this folder runs now
        digest = checkpoint_digest(ev.model)
        return evaluate(ev, Inputs.read(ev, load(ev), digest, text))
    finally:
        lock.release()


# -- loading ----------------------------------------------------------------------------------------------
def _offline() -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


def load(ev: EvalRun) -> Tuple[Any, Any, Any]:
    """``(model, tokenizer, device of the inputs)`` of the checkpoint ``ev`` names, loaded once, offline,
    in ``--dtype`` on ``--device`` (or spread by ``--device-map``)."""
    import torch

    _offline()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if ev.device_map is not None and importlib.util.find_spec("accelerate") is None:
        raise EvalError("--device-map auto needs accelerate (pip install accelerate), which is not installed")
    if ev.device.startswith("cuda") and not torch.cuda.is_available():
        raise EvalError(f"--device {ev.device} was given but torch.cuda.is_available() is False; use --device cpu")
    try:
        torch.device(ev.device)
    except RuntimeError:
        raise EvalError(f"--device {ev.device!r} is not a device; use cpu, cuda or cuda:N") from None
    on_cpu = ev.device == "cpu" and ev.device_map is None
    kwargs: Dict[str, Any] = {
        "local_files_only": True,
        "dtype": getattr(torch, ev.dtype or ("float32" if on_cpu else "bfloat16")),
    }
    if ev.device_map is not None:
        kwargs["device_map"] = ev.device_map
    try:
        tokenizer = AutoTokenizer.from_pretrained(ev.model, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(ev.model, **kwargs)
    except (OSError, ValueError, KeyError) as err:
        raise EvalError(f"MODEL {str(ev.model)!r} could not be loaded: {str(err).splitlines()[0][:200]}") from None
    if ev.device_map is None:
        model.to(torch.device(ev.device))  # type: ignore[arg-type]  # transformers types its wrapped .to unbound
    model.eval()
    return model, tokenizer, model.get_input_embeddings().weight.device


def load_text(path: Optional[str]) -> str:
    """The evaluation text: a UTF-8 file, or the lab corpus's validation split."""
    if path is None:
        from ..corpus import load_corpus

        return bytes(load_corpus(None).val).decode("utf-8", errors="replace")
    p = Path(path)
    if not p.is_file():
        raise EvalError(f"--text {path!r}: no such file; give a UTF-8 text file")
    return p.read_bytes().decode("utf-8", errors="replace")


def tokenize(tokenizer, text: str, piece: int = 200_000):
    """Token ids of ``text`` (no special tokens), tokenized in pieces cut at line ends."""
    import numpy as np

    ids: List[int] = []
    start = 0
    while start < len(text):
        stop = min(len(text), start + piece)
        if stop < len(text):
            cut = text.rfind("\n", start, stop)
            stop = cut + 1 if cut > start else stop
        ids += tokenizer(text[start:stop], add_special_tokens=False)["input_ids"]
        start = stop
    return np.asarray(ids, dtype=np.int64)


def bos_id(tokenizer) -> Optional[int]:
    """The BOS id when the tokenizer puts one first by default (Llama), else ``None``."""
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is None:
        return None
    ids = tokenizer("a")["input_ids"]
    return int(bos) if ids and ids[0] == bos else None


@dataclass(frozen=True)
class Inputs:
    """What every cell of one evaluation reads, besides its :class:`EvalRun`: the loaded model, its
    tokenizer and the device its inputs go to, the checkpoint's digest, the text as token ids
    ``(N,)`` and its digest, the report windows' end offsets ``(W,)`` (exclusive; each window reads
    the ``span`` tokens before its end), the BOS id the tokenizer puts first (or ``None``) and the
    passkey's format."""

    model: Any
    tokenizer: Any
    device: Any  # torch.device
    digest: str
    tokens: Any  # np.ndarray (N,) int64
    text_sha: str
    ends: Any  # np.ndarray (W,) int64
    bos: Optional[int]
    fmt: Any  # posenc.measuring.eval.measure.PasskeyFormat

    @classmethod
    def read(cls, ev: EvalRun, loaded: Tuple[Any, Any, Any], digest: str, text: str) -> "Inputs":
        """The inputs of ``ev`` from the ``(model, tokenizer, device)`` :func:`load` gave and the text."""
        from . import measure

        model, tokenizer, device = loaded
        tokens = tokenize(tokenizer, text)
        try:
            ends = measure.window_ends(len(tokens), ev.span, ev.windows)
        except ValueError as err:
            raise EvalError(str(err)) from None
        text_sha = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
        fmt = measure.FORMATS[ev.passkey_format]
        return cls(model, tokenizer, device, digest, tokens, text_sha, ends, bos_id(tokenizer), fmt)


# -- the run ----------------------------------------------------------------------------------------------
def _settings(ev: EvalRun, inp: Inputs, specs: List[ScalingSpec]) -> Dict[str, Any]:
    """Everything the numbers depend on; a folder is resumed only under equal settings. ``model`` (the
    path) is recorded but not compared: the checkpoint is known by ``model_sha256``."""
    return {
        "model": str(ev.model.resolve()),
        "model_sha256": inp.digest,
        "text_sha256": inp.text_sha,
        "lengths": list(ev.lengths),
        "span": ev.span,
        "scalings": [s.to_dict() for s in specs],
        "windows": ev.windows,
        "window_ends": [int(e) for e in inp.ends],
        "final_tokens": ev.final_tokens,
        "passkey_trials": ev.passkey_trials,
        "depths": list(ev.depths),
        "passkey_format": ev.passkey_format,
        **({"tasks": list(ev.tasks), "task_trials": ev.task_trials, "chat": ev.chat} if ev.tasks else {}),
        "seed": ev.seed,
        "dtype": ev.dtype,
    }


def load_progress(path: Path, settings: Dict[str, Any], fresh: bool) -> Dict[str, Any]:
    """Finished cells of an earlier run of the same evaluation in this folder (``{}`` if none), each
    checked against ``settings`` (:func:`check_cell`)."""
    if fresh or not path.exists():
        return {}
    stored = read_stamped(path, "progress", "add --fresh to start over")
    changed = settings_changed(stored.get("settings"), settings)
    if changed:
        what = "another checkpoint (its files' digest differs)" if "model_sha256" in changed else "other settings"
        raise EvalError(
            f"--out {str(path.parent)!r} holds an evaluation of {what} ({', '.join(changed)}); "
            f"choose another --out or add --fresh to discard it"
        )
    cells = stored.get("cells")
    if not isinstance(cells, dict):
        raise EvalError(f"{path}: 'cells' is not a mapping; add --fresh to start over")
    for key, cell in cells.items():
        problem = check_cell(key, cell, settings)
        if problem is not None:
            raise EvalError(f"{path}: cell {str(key)[:80]!r} {problem}; add --fresh to start over")
    return cells


#: the bounds of a stored integer (a key, an offset, a count of tokens) and of ``log2 p(key)``'s size
MAX_STORED_INT = 2**53
MAX_LOGP_BITS = 1e12


def _finite_list(value: Any, size: int, kind=float, low: float = -MAX_LOGP_BITS, high: float = MAX_LOGP_BITS) -> bool:
    """Whether ``value`` is a list of ``size`` numbers from ``low`` to ``high`` (whole ones for ``int``);
    a bool, a string, NaN, infinity or a 400-digit int is not one."""
    if not isinstance(value, list) or len(value) != size:
        return False
    for v in value:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return False
        if not low <= v <= high:  # NaN compares False; an int of any size compares exactly
            return False
        if kind is int and v != int(v):
            return False
    return True


def check_cell(key: Any, cell: Any, settings: Dict[str, Any]) -> Optional[str]:
    """Why the stored ``cell`` cannot be one of this evaluation's (``None`` when it can): its key names
    a scaling, length and depth of ``settings``, and it holds one finite number per window or trial."""
    if str(key).startswith(taskrun.PREFIX):
        return taskrun.check_cell(str(key), cell, settings)
    parts = str(key).split("|")
    labels = {s["label"] for s in settings["scalings"]}
    lengths = {str(n) for n in settings["lengths"]}
    if not isinstance(cell, dict):
        return "is not a mapping"
    if len(parts) == 3 and parts[0] == "ppl" and parts[1] in labels and parts[2] in lengths:
        windows = settings["windows"]
        if cell.get("tokens") != settings["span"]:
            return f"scored {cell.get('tokens')!r} tokens per window, not {settings['span']}"
        for name, tokens in (("nats", settings["span"]), ("final_nats", settings["final_tokens"])):
            if not _finite_list(cell.get(name), windows, low=0.0, high=MAX_NATS_PER_TOKEN * tokens):
                return (
                    f"needs {name} as {windows} finite numbers (one per window) from 0 to "
                    f"{MAX_NATS_PER_TOKEN:g} nats per token scored"
                )
        return None
    depths = {depth_key(d) for d in settings["depths"]}
    if len(parts) == 4 and parts[0] == "passkey" and parts[1] in labels and parts[2] in lengths and parts[3] in depths:
        trials = settings["passkey_trials"]
        for name, kind, low in (("correct", float, 0), ("logp_bits", float, -MAX_LOGP_BITS)):
            if not _finite_list(cell.get(name), trials, kind, low=low, high=MAX_LOGP_BITS):
                return f"needs {name} as {trials} finite numbers (one per trial)"
        for name, low in (("key_tokens", 1), ("offsets", 0)):
            if not _finite_list(cell.get(name), trials, int, low=low, high=MAX_STORED_INT):
                return f"needs {name} as {trials} finite numbers (one per trial) from {low} to 2**53"
        if any(v not in (0, 1) for v in cell["correct"]):
            return "has an exact match other than 0 or 1"
        if not _finite_list(cell.get("keys"), trials, int, low=0, high=MAX_STORED_INT):
            return f"needs keys as {trials} integers (one per trial)"
        return None
    return "is not a cell of this evaluation (kind|scaling|length[|depth])"


def write_config_file(target: Path, config: Dict[str, Any], model: Path, force: bool) -> Optional[Path]:
    """Write ``config`` at ``target``; an existing file is replaced only with ``force``, and then kept
    first as ``<name>.orig`` (``.orig.1``, ... when taken). Returns where the replaced file went."""
    own = (model / "config.json").resolve()
    exists = target.exists() or target.is_symlink()
    if exists and not force:
        whose = "the checkpoint's own config.json" if target.resolve() == own else "an existing file"
        raise EvalError(
            f"--write-config {str(target)!r} is {whose}; write to a new folder and load the checkpoint with "
            "AutoModelForCausalLM.from_pretrained(MODEL, config=AutoConfig.from_pretrained(NEW)), or add --force "
            "to replace it (the old file is kept as <name>.orig)"
        )
    if exists and not target.is_file():
        raise EvalError(f"--write-config {str(target)!r} is not a regular file; choose a new path")
    kept = None
    try:
        if exists:
            kept = target.with_name(target.name + ".orig")
            n = 0
            while kept.exists() or kept.is_symlink():
                n += 1
                kept = target.with_name(f"{target.name}.orig.{n}")
            shutil.copy2(target, kept)
        write_json(target, config)
    except OSError as err:
        raise EvalError(f"--write-config {str(target)!r}: cannot write there ({err.strerror or err})") from None
    return kept


def claim_out(out: Path, model: Path) -> None:
    """Make ``out`` the output folder, or :class:`EvalError`: a file, the checkpoint itself, or a folder
    holding anything but an earlier evaluation's files is refused (nothing of it is touched)."""
    if out.exists() and not out.is_dir():
        raise EvalError(f"--out {str(out)!r} is a file; choose a folder")
    if out.is_dir():
        if out.resolve() == model.resolve():
            raise EvalError(f"--out {str(out)!r} is the checkpoint's folder; choose a folder of its own")
        foreign = sorted(p.name for p in out.iterdir() if not _eval_file(p.name))
        if foreign:
            shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
            raise EvalError(
                f"--out {str(out)!r} holds files posenc eval did not write ({shown}); choose a new or empty folder"
            )
        if (out / "results.json").exists():  # another app's results.json would be overwritten
            read_stamped(out / "results.json", "results", "choose another --out, or delete it to start over")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise EvalError(f"--out {str(out)!r}: cannot create it ({err.strerror or err})") from None


def _eval_file(name: str) -> bool:
    """Whether ``name`` is a file posenc eval writes in its folder (or a temporary one of an atomic write
    of such a file, which the next run removes under the lock)."""
    target = runs.temporary_target(name)
    if target is not None:
        return target != LOCK_NAME and _eval_file(target)
    if name in OWN_FILES:
        return True
    return name.endswith(".png") and (name == "ppl_vs_length.png" or name.startswith("passkey_"))


def checkpoint_digest(folder: Path) -> str:
    """SHA-256 of the checkpoint's files (weights, config, tokenizer): what resuming compares, so the
    same path with other weights or another config is another evaluation."""
    names = runs.checkpoint_files(folder)
    total = sum((folder / n).stat().st_size for n in names)
    if total > 1 << 30:
        print(
            f"posenc eval: hashing {total / 2**30:.1f} GiB of checkpoint files to identify the model", file=sys.stderr
        )
    try:
        return runs.digest_files(folder, names)
    except OSError as err:
        raise EvalError(f"MODEL {str(folder)!r}: its files cannot be read ({err.strerror or err})") from None


def evaluate(ev: EvalRun, inp: Inputs) -> int:
    """Measure every cell ``ev`` asks for that the folder does not hold yet, saving the progress and the
    report after each; the search (``--search``) runs first and adds its default and best as specs."""
    from . import report, taskreport

    _check_patchable(ev, inp)
    skipped = _skip_oversized(ev, inp)
    specs = list(ev.specs)
    search = None
    if ev.search is not None:
        search = _search(ev, inp, ev.search, ev.search_length or ev.span)
        specs += [search["default_spec"], search["best_spec"]]
    settings = _settings(ev, inp, specs)
    if search is not None:
        settings["search"] = search["settings"]
    progress_path = ev.out / "progress.json"
    cells = load_progress(progress_path, settings, ev.fresh)
    window_bytes, final_bytes = _window_bytes(inp, ev.span, ev.final_tokens)
    runnable = [n for n in ev.lengths if str(n) not in skipped]
    jobs = _jobs(ev, inp, specs, runnable, skipped)
    ctx = taskrun.context(inp.tokenizer, inp.tokens, inp.bos, ev.chat) if ev.tasks else None
    if ctx is not None:
        jobs += taskrun.jobs(ev, ctx, specs, runnable, skipped)

    def save(complete: bool) -> None:
        write_json(progress_path, stamp("progress", {"settings": settings, "cells": cells}))
        results = report.build(
            stamp("results", {}),
            settings,
            cells,
            specs=specs,
            lengths=list(ev.lengths),
            trained=ev.trained,
            depths=list(ev.depths),
            window_bytes=window_bytes,
            final_bytes=final_bytes,
            final_tokens=ev.final_tokens,
            bootstrap_samples=ev.bootstrap_samples,
            skipped=skipped,
            complete=complete,
            model_type=inp.model.config.model_type,
            search=search,
        )
        results.update(taskreport.build(cells, [s.label for s in specs], list(ev.lengths), list(ev.depths), ev))
        write_json(ev.out / "results.json", results)
        runs.atomic_write_text(ev.out / "results.md", report.markdown(results) + taskreport.markdown(results))
        if complete and ev.plots:
            report.plots(results, ev.out)

    _measure_jobs(ev, inp, jobs, cells, skipped, save, ctx=ctx)
    save(complete=True)
    print(f"report: {ev.out / 'results.md'}", file=sys.stderr)
    return 0


def _measure_jobs(ev: EvalRun, inp: Inputs, jobs: List[tuple], cells: Dict[str, Any], skipped, save, *, ctx=None):
    """Measure the ``jobs`` not in ``cells`` yet, each under its scaling, into ``cells``, calling
    ``save(complete=False)`` after each; a cell that runs out of memory is added to ``skipped``."""
    per_trial = max(ev.passkey_trials, ev.task_trials)
    work = {_key(*j): (len(inp.ends) * ev.span if j[0] == "ppl" else per_trial * j[2]) for j in jobs}
    todo = [j for j in jobs if _key(*j) not in cells]
    with _Bar(sum(work.values()), sum(work[k] for k in work if k in cells)) as bar:
        for kind, spec, n, depth in todo:
            bar.describe(f"{kind} {spec.label} at {n}" + (f" depth {depth_key(depth)}" if depth is not None else ""))
            try:
                with _scaled(inp.model, spec, n, ev.trained):
                    if kind.startswith(taskrun.PREFIX):
                        cells[_key(kind, spec, n, depth)] = taskrun.measure_cell(ev, inp, ctx, kind, n, depth)
                    else:
                        cells[_key(kind, spec, n, depth)] = _measure_cell(ev, inp, n, depth)
            except _OOM_ERRORS as err:
                if not _is_oom(err):
                    raise
                _free(inp.device)
                skipped[f"{spec.label}@{n}"] = "ran out of memory"
                print(f"posenc eval: {spec.label} at {n} ran out of memory; skipped", file=sys.stderr)
            bar.advance(work[_key(kind, spec, n, depth)])
            save(complete=False)


def _check_patchable(ev: EvalRun, inp: Inputs) -> None:
    """Install the first scaling at the first length, run a forward of a few tokens and take it off
    again, so a model posenc's patch cannot stand in for (or cannot run once patched) is refused in one
    line before anything is measured."""
    import torch

    from ...integrations.transformers import UnsupportedModelError
    from . import measure

    try:
        with torch.no_grad(), _scaled(inp.model, ev.specs[0], ev.lengths[0], ev.trained):
            ids = torch.zeros((1, 8), dtype=torch.long, device=inp.device)
            measure.backbone(inp.model)(input_ids=ids, use_cache=False)
    except UnsupportedModelError as err:
        raise EvalError(
            f"MODEL {str(ev.model)!r}: posenc cannot install its scalings in this model: {str(err).splitlines()[0]}"
        ) from None
    except RuntimeError as err:
        if _is_oom(err):
            raise
        raise EvalError(
            f"MODEL {str(ev.model)!r}: with posenc's patch installed its forward fails "
            f"({str(err).splitlines()[0][:200]}); posenc cannot measure this model"
        ) from None


def _window_bytes(inp: Inputs, span: int, final_tokens: int):
    """UTF-8 bytes of each window's scored text (for bits per byte) and of its final ``final_tokens``."""
    import numpy as np

    def nbytes(first: int, end: int) -> int:
        return len(inp.tokenizer.decode(inp.tokens[first:end]).encode("utf-8"))

    window = np.array([nbytes(e - span, e) for e in inp.ends], float)
    final = np.array([nbytes(e - final_tokens, e) for e in inp.ends], float)
    return window, final


def _skip_oversized(ev: EvalRun, inp: Inputs) -> Dict[str, str]:
    """Announce the memory plan on stderr; the lengths whose forward pass would not fit, with the reason."""
    import torch

    model = inp.model
    element = next(model.parameters()).element_size()
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    budget = available_bytes(inp.device, ev.memory_limit)
    half = next(model.parameters()).dtype == torch.float16

    def estimate(rows: int, n: int) -> int:
        return estimate_bytes(model.config, rows, n, element, inp.device.type, float16=half)

    need = {n: estimate(ev.batch_size * (ev.span // n), n) for n in ev.lengths}
    attention = getattr(model.config, "_attn_implementation", None) or "eager"
    print(
        f"posenc eval: {ev.model.name} ({model.config.model_type}, trained context {ev.trained}) on {inp.device}, "
        f"weights {size_text(weights)}; per forward pass ({attention} attention) at "
        + ", ".join(f"{n}: {size_text(need[n])}" for n in ev.lengths)
        + f"; available {size_text(budget)}",
        file=sys.stderr,
    )
    skipped: Dict[str, str] = {}
    for n in ev.lengths:
        if need[n] > 0.9 * budget:
            skipped[str(n)] = f"needs about {size_text(need[n])} per forward pass, {size_text(budget)} available"
            print(f"posenc eval: skipping length {n}: {skipped[str(n)]}", file=sys.stderr)
    if ev.search_length is not None:  # the search reads --batch-size windows of its target length per pass
        search_need = estimate(ev.batch_size, ev.search_length)
        if search_need > 0.9 * budget:
            raise EvalError(
                f"--search at {ev.search_length} needs about {size_text(search_need)} per forward pass, "
                f"{size_text(budget)} available; give a shorter --search-length or a smaller --batch-size"
            )
    return skipped


def _jobs(
    ev: EvalRun, inp: Inputs, specs: List[ScalingSpec], runnable: List[int], skipped: Dict[str, str]
) -> List[tuple]:
    """Every cell to measure, ``(kind, spec, length, depth)``; lengths too short for the passkey
    are added to ``skipped``."""
    from . import measure

    plant, query, answer = measure.key_tokens(inp.tokenizer, inp.fmt, 99999)
    needed = len(plant) + len(query) + len(answer) + (inp.bos is not None)
    for n in runnable:
        if ev.passkey_trials and n + 1 < needed:
            skipped[f"passkey@{n}"] = f"the {inp.fmt.name} passkey needs about {needed} tokens"
            print(f"posenc eval: no passkey at length {n}: {skipped[f'passkey@{n}']}", file=sys.stderr)
    jobs: List[tuple] = []
    for spec in specs:
        for n in runnable:
            jobs.append(("ppl", spec, n, None))
            if ev.passkey_trials and f"passkey@{n}" not in skipped:
                jobs += [("passkey", spec, n, depth) for depth in ev.depths]
    return jobs


def _measure_cell(ev: EvalRun, inp: Inputs, n: int, depth: Optional[float]) -> Dict[str, Any]:
    """One cell at length ``n`` under the scaling already installed: the perplexity windows (``depth``
    None) or the passkey at ``depth``."""
    from . import measure

    if depth is not None:
        return _passkey_cell(ev, inp, n, depth)
    nats = measure.window_nats(
        inp.model, inp.tokens, inp.ends, ev.span, n, batch=ev.batch_size, device=inp.device, bos=inp.bos
    )
    return {
        "nats": [float(v) for v in nats.sum(axis=1)],
        "final_nats": [float(v) for v in nats[:, -ev.final_tokens :].sum(axis=1)],
        "tokens": ev.span,
    }


def _search(ev: EvalRun, inp: Inputs, name: str, target: int) -> Dict[str, Any]:
    """Search ``name``'s parameters at ``target`` tokens (``--search``, see :mod:`posenc.measuring.eval.search`):
    the record, with the default and best as specs."""
    import numpy as np

    from .scalings import rope_of
    from .search import run_search, search_spec, search_window_ends, short

    try:
        search_ends = search_window_ends(len(inp.tokens), inp.ends, ev.span, target, ev.search_windows)
    except ValueError as err:
        raise EvalError(str(err)) from None
    decode = inp.tokenizer.decode
    nbytes = np.array([len(decode(inp.tokens[e - target : e]).encode("utf-8")) for e in search_ends], float)
    settings = {
        "model": str(ev.model.resolve()),
        "model_sha256": inp.digest,
        "text_sha256": inp.text_sha,
        "type": name,
        "target_length": target,
        "windows": ev.search_windows,
        "window_ends": [int(e) for e in search_ends],
        "budget": ev.search_budget,
        "seed": ev.seed,
        "dtype": ev.dtype,
    }
    rope = rope_of(inp.model.config)
    with _Bar(ev.search_budget, 0) as bar:
        bar.describe(f"search {name} at {target}")
        record = run_search(
            name=name,
            evaluate=_search_objective(ev, inp, search_ends, target),
            target=target,
            trained=ev.trained,
            rotary_dim=rope["rotary_dim"],
            base=rope["base"],
            budget=ev.search_budget,
            seed=ev.seed,
            window_bytes=nbytes,
            store=ev.out / "search.json",
            settings=settings,
            fresh=ev.fresh,
            on_evaluation=lambda done, total: bar.advance(1),
        )
    record["settings"] = settings
    record["window_bytes"] = nbytes
    record["default_spec"] = search_spec(name, record["default"]["candidate"], f"{name} default")
    record["best_spec"] = search_spec(name, record["best"]["candidate"], f"{name} searched")
    print(
        f"posenc eval: search {name} at {target}: {record['evaluations']} configurations; default "
        f"{short(record['default']['candidate'])}; best {short(record['best']['candidate'])}",
        file=sys.stderr,
    )
    return record


def _search_objective(ev: EvalRun, inp: Inputs, search_ends, target: int):
    """``spec -> (W,)`` nats of each search window (ending at ``search_ends``) read whole at ``target``
    tokens with ``spec`` installed; running out of memory ends the command."""
    from . import measure

    def evaluate(spec):
        try:
            with _scaled(inp.model, spec, target, ev.trained):
                nats = measure.window_nats(
                    inp.model,
                    inp.tokens,
                    search_ends,
                    target,
                    target,
                    batch=ev.batch_size,
                    device=inp.device,
                    bos=inp.bos,
                )
        except _OOM_ERRORS as err:
            if not _is_oom(err):
                raise
            _free(inp.device)
            raise EvalError(
                f"--search ran out of memory at {target} tokens (the evaluations so far are kept in search.json); "
                "give a shorter --search-length or a smaller --batch-size"
            ) from None
        return nats.sum(axis=1)

    return evaluate


def _passkey_cell(ev: EvalRun, inp: Inputs, n: int, depth: float) -> Dict[str, Any]:
    """One passkey cell: its trials' exact matches and ``log2 p(key)``, and what each trial asked (the
    filler's offset in the token stream, the key, where the plant starts), so it can be rebuilt."""
    import numpy as np

    from . import measure

    plan = measure.passkey_plan(n, depth, ev.passkey_trials, len(inp.tokens), ev.seed)
    rows, answers, starts = [], [], []
    for offset, key in plan:
        plant, query, answer = measure.key_tokens(inp.tokenizer, inp.fmt, key)
        filler = np.array(inp.tokens[offset : offset + n + 1], dtype=np.int64)
        first = 0
        if inp.bos is not None:
            filler[0], first = inp.bos, 1
        start = measure.plant_start(depth, n, len(plant), len(query) + len(answer), first)
        rows.append(measure.passkey_row(filler, plant, query + answer, start))
        answers.append(len(answer))
        starts.append(start)
    correct, logp = [], []
    per_pass = max(1, ev.batch_size * (ev.span // n))
    for i in range(0, len(rows), per_pass):
        c, lp = measure.score_rows(inp.model, np.stack(rows[i : i + per_pass]), answers[i : i + per_pass], inp.device)
        correct += [float(v) for v in c]
        logp += [float(v) for v in lp]
    return {
        "correct": correct,
        "logp_bits": logp,
        "key_tokens": answers,
        "offsets": [o for o, _ in plan],
        "keys": [k for _, k in plan],
        "plant_starts": starts,
    }


try:  # torch >= 2.5 names the CUDA OOM error; CPU allocation failures are RuntimeErrors
    import torch as _torch

    _OOM_ERRORS: tuple = (_torch.OutOfMemoryError, RuntimeError)
except AttributeError:  # pragma: no cover
    _OOM_ERRORS = (RuntimeError,)


def _is_oom(err: BaseException) -> bool:
    """Whether ``err`` is an allocation failure (CUDA's OutOfMemoryError, or the RuntimeError of a
    failed CPU allocation), as opposed to any other error of a forward pass."""
    return any(words in str(err).lower() for words in ("out of memory", "can't allocate memory"))


def _free(device) -> None:
    import gc

    import torch

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _key(kind: str, spec: ScalingSpec, n: int, depth: Optional[float]) -> str:
    return f"{kind}|{spec.label}|{n}" + (f"|{depth_key(depth)}" if depth is not None else "")


def _scaled(model, spec, n, trained):
    from .scalings import applied

    return applied(model, spec, n, trained)


class _Bar:
    """A rich progress bar with ETA over estimated work (tokens read), on stderr."""

    def __init__(self, total: float, done: float):
        self.total, self.done = total, done
        self.bar = None
        self.task = None

    def __enter__(self):
        try:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
        except ImportError:
            return self
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}%"),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
        )
        self.bar.start()
        self.task = self.bar.add_task("evaluate", total=max(1.0, self.total), completed=self.done)
        return self

    def describe(self, text: str) -> None:
        if self.bar is not None:
            self.bar.update(self.task, description=text)

    def advance(self, amount: float) -> None:
        if self.bar is not None:
            self.bar.update(self.task, advance=amount)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
