"""``posenc eval MODEL``: perplexity and passkey retrieval of a local checkpoint at 1, 2, 4 and 8 times
its trained context, under every scaling side by side. See ``docs/eval.md``.

The model is loaded once, offline (``local_files_only=True``, ``HF_HUB_OFFLINE=1``). Each scaling is
installed through :func:`posenc.integrations.transformers.patch` with exact tables, measured, and
removed. Every finished cell (one scaling at one length, or one passkey cell) is saved to
``progress.json`` in the output folder as it finishes; running the same command again skips them.
Mistakes (a missing folder, a folder that is not a checkpoint, an unknown scaling, a bad number) end
the command with one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from .. import runs
from .files import (
    LOCK_NAME,
    OWN_FILES,
    EvalError,
    depth_key,
    read_json,
    read_stamped,
    settings_changed,
    stamp,
    write_json,
)
from .scalings import (
    MODEL,
    ScalingSpec,
    SpecError,
    check_spec,
    default_specs,
    parse_specs,
    rope_of,
    trained_context,
    written_config,
)

DTYPES = ("float32", "bfloat16", "float16")
#: bootstrap resamples per interval: intervals settle long before this, and memory grows with it
MAX_BOOTSTRAP_SAMPLES = 100_000
#: the most bytes read from a checkpoint's config.json (published ones are a few kilobytes)
MAX_CONFIG_BYTES = 1 << 24


# Values are parsed here rather than by argparse, so a mistake is one line naming the flag.
def positive_ints(flag: str, text: str) -> List[int]:
    """Comma-separated integers >= 1, sorted and unique, or :class:`EvalError`."""
    try:
        values = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        values = []
    if not values or any(v < 1 for v in values):
        raise EvalError(f"{flag} must be comma-separated positive integers, got {text!r}")
    return sorted(set(values))


def depths(text: str) -> List[float]:
    """Comma-separated needle depths in [0, 1], or :class:`EvalError`."""
    try:
        values = [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        values = []
    if not values or any(not 0.0 <= v <= 1.0 for v in values):
        raise EvalError(f"--depths must be comma-separated numbers from 0 to 1, got {text!r}")
    return sorted(set(values))


def positive(flag: str, text: str, kind=int):
    """One number > 0 of ``kind``, or :class:`EvalError`."""
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or not value > 0 or not math.isfinite(value):
        raise EvalError(f"{flag} must be a positive {kind.__name__}, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from .measure import FORMATS

    parser.add_argument("model", metavar="MODEL", help="a local transformers checkpoint folder (never downloaded)")
    parser.add_argument(
        "--scalings",
        default=None,
        help="comma-separated scalings, e.g. none,linear:4,ntk:4,dynamic,yarn:4,llama3:4 (a name alone "
        "fits its factor to each length as posenc lab does; default: model (if it has one), none and every "
        "registered type with a lab default)",
    )
    parser.add_argument("--lengths", default=None, help="lengths in tokens (default 1,2,4,8 x L0)")
    parser.add_argument(
        "--text",
        default=None,
        help="a UTF-8 text file (default: the Python standard library's validation split, the lab's corpus)",
    )
    parser.add_argument("--windows", default="16", help="perplexity windows (default 16)")
    parser.add_argument("--final-tokens", default="32", help="tail scored as 'final' (32)")
    parser.add_argument("--passkey-trials", default="10", help="trials per passkey cell (0: no passkey)")
    parser.add_argument("--depths", default="0,0.25,0.5,0.75,1", help="needle depths in [0, 1]")
    parser.add_argument(
        "--passkey-format",
        default="words",
        help=f"one of {', '.join(sorted(FORMATS))}: the passkey papers' sentence (words, default) or the lab's "
        "<key:DDDDD> plant (lab)",
    )
    parser.add_argument(
        "--out",
        default=None,
        help="output folder (default runs/eval-<model>-<time>); resumed when it holds the same evaluation",
    )
    parser.add_argument("--fresh", action="store_true", help="with --out: discard the folder's earlier cells")
    parser.add_argument(
        "--force",
        action="store_true",
        help="with --write-config: replace an existing file (the checkpoint's own config.json included), "
        "keeping the replaced file as <name>.orig",
    )
    parser.add_argument(
        "--write-config",
        metavar="OUT",
        default=None,
        help="write a copy of config.json with the one scaling of --scalings (transformers' own format) to OUT "
        "(a new folder, or a .json path) and exit; an existing file is replaced only with --force",
    )
    parser.add_argument(
        "--dtype", default=None, help=f"weights dtype, one of {', '.join(DTYPES)} (float32 on CPU, else bfloat16)"
    )
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument(
        "--device-map",
        default=None,
        help="auto: spread the model over devices (accelerate's convention; needs accelerate)",
    )
    parser.add_argument("--batch-size", default="1", help="windows per forward pass (1)")
    parser.add_argument(
        "--memory-limit",
        default=None,
        metavar="GB",
        help="memory to plan for instead of what the device reports free",
    )
    parser.add_argument(
        "--search",
        metavar="TYPE",
        default=None,
        help="tune this scaling's parameters (e.g. yarn, linear, ntk, llama3, longrope) for the lowest bits per "
        "byte at --search-length on windows apart from the report's, and report the best found beside the "
        "default",
    )
    parser.add_argument("--search-length", default=None, help="the search's target length (default: the longest)")
    parser.add_argument("--search-windows", default="8", help="windows the search scores (8), apart from the report's")
    parser.add_argument("--search-budget", default="40", help="configurations the search may evaluate (40)")
    parser.add_argument("--seed", default="0")
    parser.add_argument("--bootstrap-samples", default="1000")
    parser.add_argument("--no-plots", dest="plots", action="store_false", default=True)


def run(args) -> int:
    try:
        return _run(args)
    except (EvalError, SpecError) as err:
        print(f"posenc eval: {err}", file=sys.stderr)
        return 2


# -- loading ----------------------------------------------------------------------------------------------
def _offline() -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


def read_checkpoint_config(folder: Path) -> Dict[str, Any]:
    """The ``config.json`` of a checkpoint folder, or :class:`EvalError` naming what is wrong."""
    if not folder.exists():
        raise EvalError(f"MODEL {str(folder)!r}: no such folder; give a local transformers checkpoint folder")
    if not folder.is_dir():
        raise EvalError(f"MODEL {str(folder)!r} is a file; give the checkpoint's folder")
    path = folder / "config.json"
    if not path.exists():
        raise EvalError(f"MODEL {str(folder)!r} has no config.json, so it is not a transformers checkpoint")
    config = read_json(path, "give the checkpoint's own config.json", max_bytes=MAX_CONFIG_BYTES)
    if not isinstance(config, dict) or "model_type" not in config:
        raise EvalError(f"{path} has no model_type, so it is not a transformers model config")
    return config


def check_model_type(folder: Path, model_type: str) -> None:
    """Refuse a model type :func:`posenc.integrations.transformers.patch` cannot take: one neither in
    its hand list nor a rotary causal-LM type of the installed ``transformers`` (whose rotary functions
    patch reads from the family's own code, refusing with its reason those it cannot match)."""
    from ..integrations.discovery import rotary_causal_lm_module
    from ..integrations.transformers import supported_model_types

    if model_type in supported_model_types():
        return
    if isinstance(model_type, str) and rotary_causal_lm_module(model_type) is not None:
        return
    raise EvalError(
        f"MODEL {str(folder)!r} is a {model_type!r} model; posenc's patch supports "
        f"{', '.join(supported_model_types())} and the rotary causal-LM types of the installed transformers "
        "(docs/transformers.md lists them)"
    )


def load(folder: Path, dtype: Optional[str], device: str, device_map: Optional[str]):
    """``(model, tokenizer, device of the inputs)``, loaded once, offline."""
    import torch

    _offline()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config = read_checkpoint_config(folder)
    check_model_type(folder, config["model_type"])
    if device_map is not None and importlib.util.find_spec("accelerate") is None:
        raise EvalError("--device-map auto needs accelerate (pip install accelerate), which is not installed")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise EvalError(f"--device {device} was given but torch.cuda.is_available() is False; use --device cpu")
    try:
        torch.device(device)
    except RuntimeError:
        raise EvalError(f"--device {device!r} is not a device; use cpu, cuda or cuda:N") from None
    chosen = getattr(torch, dtype or ("float32" if device == "cpu" and device_map is None else "bfloat16"))
    kwargs: Dict[str, Any] = {"local_files_only": True, "dtype": chosen}
    if device_map is not None:
        kwargs["device_map"] = device_map
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(folder, **kwargs)
    except (OSError, ValueError, KeyError) as err:
        raise EvalError(f"MODEL {str(folder)!r} could not be loaded: {str(err).splitlines()[0][:200]}") from None
    if device_map is None:
        model.to(torch.device(device))  # type: ignore[arg-type]  # transformers types its wrapped .to unbound
    model.eval()
    return model, tokenizer, model.get_input_embeddings().weight.device


def load_text(path: Optional[str]) -> str:
    """The evaluation text: a UTF-8 file, or the lab corpus's validation split."""
    if path is None:
        from ..lab.corpus import load_corpus

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


# -- memory -----------------------------------------------------------------------------------------------
def available_bytes(device, limit_gb: Optional[float]) -> int:
    """Memory the evaluation may use on ``device`` besides the loaded weights."""
    import torch

    if limit_gb is not None:
        return int(limit_gb * 2**30)
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


#: attention implementations of transformers that never hold a (length x length) score matrix
FUSED_ATTENTION = ("flash_attention_2", "flash_attention_3", "flex_attention", "paged_attention")


def estimate_bytes(
    config,
    rows: int,
    length: int,
    element: int,
    device_type: str,
    chunk: int = 1024,
    attention: Optional[str] = None,
    float16: Optional[bool] = None,
) -> int:
    """Peak memory of one forward pass of ``rows`` sequences of ``length`` tokens, besides the weights.

    Hidden states and MLP activations of one layer at a time (no cache, no gradients), the float32
    logits of one chunk of the output head, and the attention scores where the backend holds them:
    ``eager`` attention (transformers' ``attn_implementation``) holds each layer's
    ``(rows, heads, length, length)`` scores, their float32 softmax and its cast back; ``sdpa`` on CUDA,
    and on CPU in float32 and bfloat16, runs PyTorch's fused kernels, which never do (CPU float16
    falls back to the math path and is counted like eager); the flash and flex backends never do.
    ``attention=None`` reads ``config._attn_implementation`` (``eager`` when absent), ``float16=None``
    ``config.dtype``. An upper bound:
    ``tests/test_eval_memory.py`` holds it between the measured peak and 3x it on CPU.
    """
    text = getattr(config, "text_config", None) or config
    hidden = int(getattr(text, "hidden_size", 0) or getattr(text, "n_embd", 0))
    inter = int(getattr(text, "intermediate_size", 0) or 4 * hidden)
    heads = int(getattr(text, "num_attention_heads", 0) or getattr(text, "n_head", 1))
    vocab = int(getattr(text, "vocab_size", 0))
    attention = attention or getattr(config, "_attn_implementation", None) or "eager"
    tokens = rows * length
    activations = tokens * (8 * hidden + 3 * inter) * element
    if float16 is None:
        dtype_name = str(getattr(config, "dtype", ""))
        float16 = dtype_name.endswith("float16") and not dtype_name.endswith("bfloat16")
    if attention in FUSED_ATTENTION:
        fused = True
    elif attention == "sdpa":
        fused = not (device_type == "cpu" and float16)
    else:
        fused = False
    scores = 0 if fused else rows * heads * length * length * (2 * element + 4)
    logits = rows * min(chunk, length) * vocab * 4 * 3
    return activations + scores + logits


def size_text(nbytes: float) -> str:
    """A size in the unit that shows it (``1.25 GiB``, ``310 MiB``, ``12 KiB``), never ``0.00 GiB``."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            value = nbytes / scale
            return (
                f"{value:.2f} {unit}"
                if value < 10
                else f"{value:.0f} {unit}"
                if value >= 100
                else f"{value:.1f} {unit}"
            )
    return f"{int(nbytes)} bytes"


# -- the run ----------------------------------------------------------------------------------------------
def _settings(args, folder: Path, digest: str, specs, lengths, text_sha: str, ends) -> Dict[str, Any]:
    """Everything the numbers depend on; a folder is resumed only under equal settings. ``model`` (the
    path) is recorded but not compared: the checkpoint is known by ``model_sha256``."""
    return {
        "model": str(folder.resolve()),
        "model_sha256": digest,
        "text_sha256": text_sha,
        "lengths": lengths,
        "span": lengths[-1],
        "scalings": [s.to_dict() for s in specs],
        "windows": args.windows,
        "window_ends": [int(e) for e in ends],
        "final_tokens": args.final_tokens,
        "passkey_trials": args.passkey_trials,
        "depths": args.depths,
        "passkey_format": args.passkey_format,
        "seed": args.seed,
        "dtype": args.dtype,
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


def _finite_list(value: Any, size: int, kind=float) -> bool:
    if not isinstance(value, list) or len(value) != size:
        return False
    for v in value:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            return False
        if kind is int and v != int(v):
            return False
    return True


def check_cell(key: Any, cell: Any, settings: Dict[str, Any]) -> Optional[str]:
    """Why the stored ``cell`` cannot be one of this evaluation's (``None`` when it can): its key names
    a scaling, length and depth of ``settings``, and it holds one finite number per window or trial."""
    parts = str(key).split("|")
    labels = {s["label"] for s in settings["scalings"]}
    lengths = {str(n) for n in settings["lengths"]}
    if not isinstance(cell, dict):
        return "is not a mapping"
    if len(parts) == 3 and parts[0] == "ppl" and parts[1] in labels and parts[2] in lengths:
        windows = settings["windows"]
        if cell.get("tokens") != settings["span"]:
            return f"scored {cell.get('tokens')!r} tokens per window, not {settings['span']}"
        for name in ("nats", "final_nats"):
            if not _finite_list(cell.get(name), windows):
                return f"needs {name} as {windows} finite numbers (one per window)"
        return None
    depths = {depth_key(d) for d in settings["depths"]}
    if len(parts) == 4 and parts[0] == "passkey" and parts[1] in labels and parts[2] in lengths and parts[3] in depths:
        trials = settings["passkey_trials"]
        for name, kind in (("correct", float), ("logp_bits", float), ("key_tokens", int), ("offsets", int)):
            if not _finite_list(cell.get(name), trials, kind):
                return f"needs {name} as {trials} finite numbers (one per trial)"
        if any(v not in (0, 1) for v in cell["correct"]):
            return "has an exact match other than 0 or 1"
        if not _finite_list(cell.get("keys"), trials, int):
            return f"needs keys as {trials} integers (one per trial)"
        return None
    return "is not a cell of this evaluation (kind|scaling|length[|depth])"


def _parse_numbers(args) -> None:
    from .measure import FORMATS

    if args.passkey_format not in FORMATS:
        raise EvalError(f"--passkey-format must be one of {', '.join(sorted(FORMATS))}, got {args.passkey_format!r}")
    if args.dtype is not None and args.dtype not in DTYPES:
        raise EvalError(f"--dtype must be one of {', '.join(DTYPES)}, got {args.dtype!r}")
    if args.device_map is not None and args.device_map != "auto":
        raise EvalError(f"--device-map takes only 'auto' (accelerate's convention), got {args.device_map!r}")
    args.lengths = positive_ints("--lengths", args.lengths) if args.lengths is not None else None
    args.windows = positive("--windows", args.windows)
    if args.windows < 2:  # an interval over windows needs two of them
        raise EvalError(f"--windows must be at least 2 (intervals are over windows), got {args.windows}")
    args.final_tokens = positive("--final-tokens", args.final_tokens)
    args.passkey_trials = (
        0 if str(args.passkey_trials).strip() == "0" else positive("--passkey-trials", args.passkey_trials)
    )
    args.depths = depths(args.depths)
    args.batch_size = positive("--batch-size", args.batch_size)
    args.bootstrap_samples = positive("--bootstrap-samples", args.bootstrap_samples)
    if args.bootstrap_samples > MAX_BOOTSTRAP_SAMPLES:  # one (samples, windows) index array per interval
        raise EvalError(
            f"--bootstrap-samples must be at most {MAX_BOOTSTRAP_SAMPLES:,}, got {args.bootstrap_samples:,}"
        )
    if args.memory_limit is not None:
        args.memory_limit = positive("--memory-limit", args.memory_limit, float)
    try:
        seed = int(args.seed)
    except ValueError:
        seed = -1
    if seed < 0:  # numpy's generators take non-negative seeds only
        raise EvalError(f"--seed must be an integer >= 0, got {args.seed!r}")
    args.seed = seed
    search = getattr(args, "search", None)
    args.search_length = positive("--search-length", args.search_length) if args.search_length else None
    args.search_windows = positive("--search-windows", getattr(args, "search_windows", "8"))
    args.search_budget = positive("--search-budget", getattr(args, "search_budget", "40"))
    if search is not None:
        from .search import search_type

        args.search = search_type(search)


def _run(args) -> int:
    _parse_numbers(args)
    folder = Path(args.model).expanduser()
    source = read_checkpoint_config(folder)
    check_model_type(folder, source["model_type"])
    try:
        rope = rope_of(source)
        trained = trained_context(source)
    except ValueError as err:
        raise EvalError(f"MODEL {str(folder)!r}: its rope config cannot be read: {err}") from None
    has_scaling = rope["scaling"] is not None
    specs = parse_specs(args.scalings) if args.scalings else parse_specs(",".join(default_specs(has_scaling)))
    if any(s.name == MODEL for s in specs) and not has_scaling:
        raise EvalError(f"scaling 'model': MODEL {str(folder)!r} has no rope scaling of its own; drop it")
    lengths = args.lengths or [trained * m for m in (1, 2, 4, 8)]
    for spec in specs:
        check_spec(spec, lengths, trained, rope["rotary_dim"])
    if args.search is not None:
        if args.write_config is not None:
            raise EvalError("--search and --write-config: run the search first, then write the spec it reports")
        target = args.search_length or lengths[-1]
        if target not in lengths:
            raise EvalError(f"--search-length {target} must be one of the lengths {lengths}")
        if target <= trained:
            raise EvalError(f"--search-length {target} must exceed the trained context {trained}")
        args.search_length = target

    if args.write_config is not None:
        if len(specs) != 1:
            raise EvalError(f"--write-config writes one scaling; --scalings names {len(specs)}")
        new, note = written_config(source, specs[0], trained)
        target = Path(args.write_config).expanduser()
        target = target / "config.json" if target.suffix != ".json" else target
        kept = write_config_file(target, new, folder, args.force)
        print(
            f"wrote {target} with {specs[0].label}"
            + (f"; the replaced file is kept as {kept}" if kept else "")
            + (f"; {note}" if note else "")
        )
        return 0

    span = lengths[-1]
    bad = [n for n in lengths if span % n]
    if bad:
        raise EvalError(f"--lengths: every length must divide the longest ({span}); {bad} do not")
    if args.final_tokens > lengths[0]:
        raise EvalError(f"--final-tokens {args.final_tokens} must be at most the shortest length {lengths[0]}")
    text = load_text(args.text)
    out = Path(args.out) if args.out else Path("runs") / f"eval-{folder.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    claim_out(out, folder)
    try:
        lock = runs.RunLock(out, LOCK_NAME).acquire()
    except runs.FolderBusy as busy:
        raise EvalError(
            f"--out {str(out)!r} is in use by another posenc eval ({busy}); wait for it or choose another --out"
        ) from None
    try:
        digest = checkpoint_digest(folder)
        model, tokenizer, device = load(folder, args.dtype, args.device, args.device_map)
        return evaluate(args, folder, digest, model, tokenizer, device, specs, lengths, trained, text, out)
    finally:
        lock.release()


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
    """Whether ``name`` is a file posenc eval writes in its folder (or a temporary one of an atomic write)."""
    if name in OWN_FILES:
        return True
    if name.endswith(".png") and (name == "ppl_vs_length.png" or name.startswith("passkey_")):
        return True
    return name.endswith(".tmp") and name.split(".", 1)[0] in {f.split(".", 1)[0] for f in OWN_FILES if f[0] != "."}


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


def evaluate(args, folder, digest, model, tokenizer, device, specs, lengths, trained, text, out) -> int:
    from . import measure, report

    tokens = tokenize(tokenizer, text)
    span = lengths[-1]
    try:
        ends = measure.window_ends(len(tokens), span, args.windows)
    except ValueError as err:
        raise EvalError(str(err)) from None
    text_sha = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    bos = bos_id(tokenizer)
    _check_patchable(folder, model, specs[0], lengths[0], trained, device)
    skipped = _skip_oversized(args, folder, model, device, lengths, span, trained)
    search = None
    if args.search is not None:
        search = _search(
            args, folder, digest, model, tokenizer, device, tokens, ends, span, trained, text_sha, bos, out
        )
        specs = specs + [search["default_spec"], search["best_spec"]]
    settings = _settings(args, folder, digest, specs, lengths, text_sha, ends)
    if search is not None:
        settings["search"] = search["settings"]
    progress_path = out / "progress.json"
    cells = load_progress(progress_path, settings, args.fresh)
    fmt = measure.FORMATS[args.passkey_format]
    window_bytes, final_bytes = _window_bytes(tokenizer, tokens, ends, span, args.final_tokens)
    runnable = [n for n in lengths if str(n) not in skipped]
    jobs = _jobs(args, tokenizer, fmt, bos, specs, runnable, skipped)
    todo = [j for j in jobs if _key(*j) not in cells]

    def save(complete: bool) -> None:
        write_json(progress_path, stamp("progress", {"settings": settings, "cells": cells}))
        results = report.build(
            stamp("results", {}),
            settings,
            cells,
            specs=specs,
            lengths=lengths,
            trained=trained,
            depths=args.depths,
            window_bytes=window_bytes,
            final_bytes=final_bytes,
            final_tokens=args.final_tokens,
            bootstrap_samples=args.bootstrap_samples,
            skipped=skipped,
            complete=complete,
            model_type=model.config.model_type,
            search=search,
        )
        write_json(out / "results.json", results)
        runs.atomic_write_text(out / "results.md", report.markdown(results))
        if complete and args.plots:
            report.plots(results, out)

    work = {_key(*j): (len(ends) * span if j[0] == "ppl" else args.passkey_trials * j[2]) for j in jobs}
    with _Bar(sum(work.values()), sum(work[k] for k in work if k in cells)) as bar:
        for kind, spec, n, depth in todo:
            bar.describe(f"{kind} {spec.label} at {n}" + (f" depth {depth_key(depth)}" if depth is not None else ""))
            try:
                with _scaled(model, spec, n, trained):
                    cells[_key(kind, spec, n, depth)] = _measure_cell(
                        kind, n, depth, args, model, tokenizer, fmt, tokens, ends, span, device, bos
                    )
            except _OOM_ERRORS as err:
                if not _is_oom(err):
                    raise
                _free(device)
                skipped[f"{spec.label}@{n}"] = "ran out of memory"
                print(f"posenc eval: {spec.label} at {n} ran out of memory; skipped", file=sys.stderr)
            bar.advance(work[_key(kind, spec, n, depth)])
            save(complete=False)
    save(complete=True)
    print(f"report: {out / 'results.md'}", file=sys.stderr)
    return 0


def _check_patchable(folder, model, spec, length, trained, device) -> None:
    """Install one scaling, run a forward of a few tokens and take it off again, so a model posenc's
    patch cannot stand in for (or cannot run once patched) is refused in one line before anything is
    measured."""
    import torch

    from ..integrations.transformers import UnsupportedModelError

    try:
        with torch.no_grad(), _scaled(model, spec, length, trained):
            model.base_model(input_ids=torch.zeros((1, 8), dtype=torch.long, device=device), use_cache=False)
    except UnsupportedModelError as err:
        raise EvalError(
            f"MODEL {str(folder)!r}: posenc cannot install its scalings in this model: {str(err).splitlines()[0]}"
        ) from None
    except RuntimeError as err:
        if _is_oom(err):
            raise
        raise EvalError(
            f"MODEL {str(folder)!r}: with posenc's patch installed its forward fails "
            f"({str(err).splitlines()[0][:200]}); posenc cannot measure this model"
        ) from None


def _window_bytes(tokenizer, tokens, ends, span, final_tokens):
    """UTF-8 bytes of each window's scored text (for bits per byte) and of its final ``final_tokens``."""
    import numpy as np

    def nbytes(first: int, end: int) -> int:
        return len(tokenizer.decode(tokens[first:end]).encode("utf-8"))

    window = np.array([nbytes(e - span, e) for e in ends], float)
    final = np.array([nbytes(e - final_tokens, e) for e in ends], float)
    return window, final


def _skip_oversized(args, folder, model, device, lengths, span, trained) -> Dict[str, str]:
    """Announce the memory plan on stderr; the lengths whose forward pass would not fit, with the reason."""
    element = next(model.parameters()).element_size()
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    budget = available_bytes(device, args.memory_limit)
    import torch

    half = next(model.parameters()).dtype == torch.float16

    def estimate(rows: int, n: int) -> int:
        return estimate_bytes(model.config, rows, n, element, device.type, float16=half)

    need = {n: estimate(args.batch_size * (span // n), n) for n in lengths}
    attention = getattr(model.config, "_attn_implementation", None) or "eager"
    print(
        f"posenc eval: {folder.name} ({model.config.model_type}, trained context {trained}) on {device}, "
        f"weights {size_text(weights)}; per forward pass ({attention} attention) at "
        + ", ".join(f"{n}: {size_text(need[n])}" for n in lengths)
        + f"; available {size_text(budget)}",
        file=sys.stderr,
    )
    skipped: Dict[str, str] = {}
    for n in lengths:
        if need[n] > 0.9 * budget:
            skipped[str(n)] = f"needs about {size_text(need[n])} per forward pass, {size_text(budget)} available"
            print(f"posenc eval: skipping length {n}: {skipped[str(n)]}", file=sys.stderr)
    if args.search is not None:  # the search reads --batch-size windows of its target length per pass
        search_need = estimate(args.batch_size, args.search_length)
        if search_need > 0.9 * budget:
            raise EvalError(
                f"--search at {args.search_length} needs about {size_text(search_need)} per forward pass, "
                f"{size_text(budget)} available; give a shorter --search-length or a smaller --batch-size"
            )
    return skipped


def _jobs(args, tokenizer, fmt, bos, specs, runnable, skipped) -> List[tuple]:
    """Every cell to measure, ``(kind, spec, length, depth)``; lengths too short for the passkey
    are added to ``skipped``."""
    from . import measure

    plant, query, answer = measure.key_tokens(tokenizer, fmt, 99999)
    needed = len(plant) + len(query) + len(answer) + (bos is not None)
    for n in runnable:
        if args.passkey_trials and n + 1 < needed:
            skipped[f"passkey@{n}"] = f"the {fmt.name} passkey needs about {needed} tokens"
            print(f"posenc eval: no passkey at length {n}: {skipped[f'passkey@{n}']}", file=sys.stderr)
    jobs: List[tuple] = []
    for spec in specs:
        for n in runnable:
            jobs.append(("ppl", spec, n, None))
            if args.passkey_trials and f"passkey@{n}" not in skipped:
                jobs += [("passkey", spec, n, depth) for depth in args.depths]
    return jobs


def _measure_cell(kind, n, depth, args, model, tokenizer, fmt, tokens, ends, span, device, bos) -> Dict[str, Any]:
    """One cell under the scaling already installed: perplexity windows or one passkey depth."""
    from . import measure

    if kind != "ppl":
        return _passkey_cell(model, tokenizer, fmt, tokens, n, depth, args, device, bos, span)
    nats = measure.window_nats(model, tokens, ends, span, n, batch=args.batch_size, device=device, bos=bos)
    return {
        "nats": [float(v) for v in nats.sum(axis=1)],
        "final_nats": [float(v) for v in nats[:, -args.final_tokens :].sum(axis=1)],
        "tokens": span,
    }


def _search(args, folder, digest, model, tokenizer, device, tokens, ends, span, trained, text_sha, bos, out):
    """Run ``--search`` (see :mod:`posenc.eval.search`): the record, with the default and best as specs."""
    import numpy as np

    from . import measure
    from .scalings import rope_of
    from .search import run_search, search_spec, search_window_ends, short

    target = args.search_length
    try:
        search_ends = search_window_ends(len(tokens), ends, span, target, args.search_windows)
    except ValueError as err:
        raise EvalError(str(err)) from None
    nbytes = np.array([len(tokenizer.decode(tokens[e - target : e]).encode("utf-8")) for e in search_ends], float)
    rope = rope_of(model.config)
    settings = {
        "model": str(folder.resolve()),
        "model_sha256": digest,
        "text_sha256": text_sha,
        "type": args.search,
        "target_length": target,
        "windows": args.search_windows,
        "window_ends": [int(e) for e in search_ends],
        "budget": args.search_budget,
        "seed": args.seed,
        "dtype": args.dtype,
    }

    def evaluate(spec):
        try:
            with _scaled(model, spec, target, trained):
                nats = measure.window_nats(
                    model, tokens, search_ends, target, target, batch=args.batch_size, device=device, bos=bos
                )
        except _OOM_ERRORS as err:
            if not _is_oom(err):
                raise
            _free(device)
            raise EvalError(
                f"--search ran out of memory at {target} tokens (the evaluations so far are kept in search.json); "
                "give a shorter --search-length or a smaller --batch-size"
            ) from None
        return nats.sum(axis=1)

    with _Bar(args.search_budget, 0) as bar:
        bar.describe(f"search {args.search} at {target}")

        def tick(done, total):
            bar.advance(1)

        record = run_search(
            name=args.search,
            evaluate=evaluate,
            target=target,
            trained=trained,
            rotary_dim=rope["rotary_dim"],
            base=rope["base"],
            budget=args.search_budget,
            seed=args.seed,
            window_bytes=nbytes,
            store=out / "search.json",
            settings=settings,
            fresh=args.fresh,
            on_evaluation=tick,
        )
    record["settings"] = settings
    record["window_bytes"] = nbytes
    record["default_spec"] = search_spec(args.search, record["default"]["candidate"], f"{args.search} default")
    record["best_spec"] = search_spec(args.search, record["best"]["candidate"], f"{args.search} searched")
    print(
        f"posenc eval: search {args.search} at {target}: {record['evaluations']} configurations; default "
        f"{short(record['default']['candidate'])}; best {short(record['best']['candidate'])}",
        file=sys.stderr,
    )
    return record


def _passkey_cell(model, tokenizer, fmt, tokens, n, depth, args, device, bos, span) -> Dict[str, Any]:
    """One passkey cell: its trials' exact matches and ``log2 p(key)``, and what each trial asked (the
    filler's offset in the token stream, the key, where the plant starts), so it can be rebuilt."""
    import numpy as np

    from . import measure

    plan = measure.passkey_plan(n, depth, args.passkey_trials, len(tokens), args.seed)
    rows, answers, starts = [], [], []
    for offset, key in plan:
        plant, query, answer = measure.key_tokens(tokenizer, fmt, key)
        filler = np.array(tokens[offset : offset + n + 1], dtype=np.int64)
        first = 0
        if bos is not None:
            filler[0], first = bos, 1
        start = measure.plant_start(depth, n, len(plant), len(query) + len(answer), first)
        rows.append(measure.passkey_row(filler, plant, query + answer, start))
        answers.append(len(answer))
        starts.append(start)
    correct, logp = [], []
    per_pass = max(1, args.batch_size * (span // n))
    for i in range(0, len(rows), per_pass):
        c, lp = measure.score_rows(model, np.stack(rows[i : i + per_pass]), answers[i : i + per_pass], device)
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
