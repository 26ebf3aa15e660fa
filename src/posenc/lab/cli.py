"""``posenc lab``: train one small LM per position scheme, evaluate at longer lengths, extend RoPE,
and write the report. See ``docs/lab.md``.

The run is a sequence of small steps (a training checkpoint, one scheme at one length, one extension
method at one length), each recorded in the run folder as soon as it finishes. ``--resume RUN_DIR``
skips everything recorded; Ctrl-C stops after the current training step (saving a checkpoint) or
discards only the evaluation in flight.

Mistakes a user can make (a bad flag value, an unwritable ``--out``, a corrupt or foreign file in the
run folder) end the command with one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import signal
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

import numpy as np
import torch

from ..factory import SCHEMES
from ..rope.registry import lab_methods
from .config import EXTENSION_METHODS, PRESETS, LabConfig, preset_config
from .corpus import load_corpus
from .distributed import Dist, barrier, broadcast_flag, setup, teardown
from .evaluate import evaluate_at, per_position_nats, window_ends
from .extend import extended_model, finetune
from .metrics import bits_per_byte
from .passkey import bins as passkey_bins
from .report import MACHINERY_CHECK, build_results, write_report
from .schema import Progress, RunFileError
from .store import (
    FolderBusy,
    RunDir,
    RunLock,
    is_lab_run,
    load_checkpoint,
    read_run_file,
    save_checkpoint,
    write_run_file,
)
from .train import TrainingDiverged, build_model, make_optimizer, run_kwargs, train_steps
from .verdicts import machinery_check_reason

if TYPE_CHECKING:
    from rich.progress import TaskID


class LabError(Exception):
    """A mistake in the command line or the run folder, reported as one line without a traceback."""


#: (flag, config field, parser type): every config field the command line can override.
OVERRIDES = [
    ("--seed", "seed", int),
    ("--data", "data", str),
    ("--pattern", "pattern", str),
    ("--val-fraction", "val_fraction", float),
    ("--d-model", "d_model", int),
    ("--n-layers", "n_layers", int),
    ("--n-heads", "n_heads", int),
    ("--train-len", "train_len", int),
    ("--batch-size", "batch_size", int),
    ("--steps", "steps", int),
    ("--lr", "lr", float),
    ("--warmup-steps", "warmup_steps", int),
    ("--weight-decay", "weight_decay", float),
    ("--checkpoint-every", "checkpoint_every", int),
    ("--eval-windows", "eval_windows", int),
    ("--eval-batch", "eval_batch", int),
    ("--bootstrap-samples", "bootstrap_samples", int),
    ("--learned-beyond", "learned_beyond", str),
    ("--finetune-steps", "finetune_steps", int),
    ("--finetune-batch", "finetune_batch", int),
    ("--finetune-lr", "finetune_lr", float),
    ("--retrieval-share", "retrieval_share", float),
    ("--retrieval-trials", "retrieval_trials", int),
    ("--retrieval-answer-weight", "retrieval_answer_weight", float),
    ("--finetune-retrieval-share", "finetune_retrieval_share", float),
    ("--sweep-steps", "sweep_steps", int),
]


def _names(text: str) -> list:
    return [t.strip() for t in text.split(",") if t.strip()]


def _extension_methods(text: str) -> list:
    """Comma-separated extension methods: the rope types registered with a lab default."""
    names, allowed = _names(text), lab_methods()
    for name in names:
        if name not in allowed:
            hint = " ('dynamic_ntk' is now spelt 'dynamic')" if name == "dynamic_ntk" else ""
            raise argparse.ArgumentTypeError(
                f"unknown extension method {name!r}{hint}; choose from {','.join(allowed)}"
            )
    return names


def _ints(text: str) -> list:
    try:
        return [int(t) for t in _names(text)]
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from err


def _floats(text: str) -> list:
    try:
        return [float(t) for t in _names(text)]
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from err


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # `posenc lab export RUN OUT`: the one subcommand (posenc.lab.export); without it, a run.
    from . import export

    sub = parser.add_subparsers(dest="lab_command", metavar="{export}")
    summary = export.__doc__.splitlines()[0].split(": ", 1)[1].replace("``", "")  # plain text, not reST
    export.add_arguments(sub.add_parser("export", help=summary))
    parser.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default=None,
        help="size of the run: smoke (a machinery check; its numbers carry no meaning), "
        "quick (the small table), standard (the published-scale table); what each costs is "
        "stated in docs/lab.md (Time); default quick",
    )
    parser.add_argument(
        "--schemes",
        type=_names,
        default=None,
        help="comma-separated schemes (default: nope,sinusoidal,learned,rope,alibi)",
    )
    parser.add_argument(
        "--eval-multipliers",
        type=_ints,
        default=None,
        help="evaluation lengths as multiples of the training length (default 1,2,4,8)",
    )
    parser.add_argument(
        "--extension-methods",
        type=_extension_methods,
        default=None,
        help=f"RoPE extension methods, any of {','.join(lab_methods())} (default {','.join(EXTENSION_METHODS)})",
    )
    parser.add_argument(
        "--no-extension", dest="extension", action="store_false", default=None, help="skip RoPE context extension"
    )
    parser.add_argument(
        "--finetune",
        action="store_true",
        default=None,
        help="also fine-tune the RoPE model briefly at each longer length, per method",
    )
    parser.add_argument(
        "--lr-sweep",
        dest="lr_sweep",
        type=_floats,
        default=None,
        metavar="RATES",
        help="comma-separated peak learning rates to try per scheme on a short "
        "budget (--sweep-steps) before training each scheme at its best rate",
    )
    for flag, dest, kind in OVERRIDES:
        extra: Dict[str, Any] = {"choices": ["interpolate", "cannot"]} if dest == "learned_beyond" else {}
        parser.add_argument(flag, dest=dest, type=kind, default=None, help=f"override the preset's {dest}", **extra)
    parser.add_argument(
        "--seeds",
        type=_ints,
        default=None,
        metavar="SEEDS",
        help="comma-separated training seeds: one run per seed in OUT/seed-<n> (needs --out), then "
        "OUT/summary.md with the spread across seeds; the same command again resumes every seed",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="with --seeds: how many seeds train at once, one process each"
    )
    parser.add_argument("--out", default=None, help="run folder to create (default runs/lab-<preset>-<time>)")
    parser.add_argument(
        "--resume", metavar="RUN_DIR", default=None, help="continue the run in RUN_DIR without redoing finished work"
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="with --out: start over in a folder that holds an earlier run, "
        "deleting that run's files (only the lab's own files)",
    )
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads per process")
    parser.add_argument("--no-plots", dest="plots", action="store_false", default=True)


_CONFIG_DESTS = ["preset", "schemes", "eval_multipliers", "extension_methods", "extension", "finetune", "lr_sweep"] + [
    dest for _, dest, _ in OVERRIDES
]


def _overrides(args) -> dict:
    return {k: getattr(args, k) for k in _CONFIG_DESTS if k != "preset" and getattr(args, k, None) is not None}


def command_line(cfg: LabConfig) -> str:
    """A ``posenc lab`` command that reproduces ``cfg`` (preset plus the fields that differ)."""
    base = preset_config(cfg.preset)
    parts = ["posenc", "lab", "--preset", cfg.preset]
    for flag, dest, _ in OVERRIDES:
        value = getattr(cfg, dest)
        if value != getattr(base, dest):
            parts += [flag, str(value)]
    for dest, flag in (
        ("schemes", "--schemes"),
        ("eval_multipliers", "--eval-multipliers"),
        ("extension_methods", "--extension-methods"),
    ):
        if getattr(cfg, dest) != getattr(base, dest):
            parts += [flag, ",".join(map(str, getattr(cfg, dest)))]
    if cfg.lr_sweep != base.lr_sweep:
        parts += ["--lr-sweep", ",".join(map(str, cfg.lr_sweep))]
    if not cfg.extension:
        parts.append("--no-extension")
    if cfg.finetune:
        parts.append("--finetune")
    return shlex.join(parts)


#: Files and folders of a run folder that ``--fresh`` may delete (nothing else is touched).
RUN_FILES = (
    "config.json",
    "corpus.json",
    "progress.json",
    "results.json",
    "results.md",
    "bpb_vs_length.png",
    "loss_by_position.png",
    "retrieval.png",
)


def _config(make, what: str) -> LabConfig:
    try:
        return make()
    except (TypeError, ValueError) as err:
        raise LabError(f"{what}: {err}") from None


def check_writable(root: Path, flag: str) -> None:
    """Create ``root`` and write and delete a probe file in it, so a bad output path fails before
    any training instead of after it."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".posenc-probe-", dir=root)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise LabError(
            f"{flag} {str(root)!r}: cannot write there ({err.strerror or err}); choose a folder you can write to"
        ) from None


def _lab_paths(root: Path) -> List[Path]:
    """Paths in ``root`` that a lab run writes and that exist (links included, not followed)."""
    names = [root / n for n in RUN_FILES] + [root / "checkpoints"]
    return [p for p in names if p.is_symlink() or p.exists()]


def _refuse_links(root: Path, flag: str) -> None:
    """A run folder whose lab files or ``checkpoints`` are symbolic links would write (or delete)
    outside the folder: refused."""
    links = [p for p in _lab_paths(root) if p.is_symlink()]
    ckpt = root / "checkpoints"
    if ckpt.is_dir() and not ckpt.is_symlink():
        links += [p for p in ckpt.iterdir() if p.is_symlink()]
    if links:
        raise LabError(
            f"{flag} {str(root)!r}: {str(links[0])!r} is a symbolic link; the lab writes only real files "
            f"inside its run folder. Remove the link or choose another folder"
        )


def _clear_run(root: Path) -> None:
    """Delete the files of the lab run in ``root`` (a folder :func:`is_lab_run` accepted): the
    files named in :data:`RUN_FILES` and ``checkpoints/<scheme>.pt``, real files only. Links are
    refused before this runs; no folder is removed, and nothing else in ``root`` is touched."""
    for name in RUN_FILES:
        path = root / name
        if path.is_file() and not path.is_symlink():
            path.unlink()
    ckpt = root / "checkpoints"
    if ckpt.is_dir() and not ckpt.is_symlink():
        for scheme in SCHEMES:
            path = ckpt / f"{scheme}.pt"
            if path.is_file() and not path.is_symlink():
                path.unlink()


def resolve_config(args) -> tuple:
    """(config, run folder, resuming?) from the parsed arguments; a :class:`LabError` for mistakes."""
    overrides = _overrides(args)
    if args.resume:
        if getattr(args, "fresh", False):
            raise LabError(
                "--fresh starts a run over and --resume continues one; to start "
                f"{args.resume!r} over, use --out {args.resume!r} --fresh"
            )
        run = RunDir(Path(args.resume))
        if not run.root.is_dir():
            raise LabError(
                f"--resume {args.resume!r}: no such folder; give a folder made by an earlier `posenc lab` run"
            )
        stored = read_run_file(run.config_path, "config")
        if stored is None:
            raise LabError(
                f"--resume {args.resume!r}: no config.json there; give a folder made by an earlier `posenc lab` run"
            )
        cfg = _config(lambda: LabConfig.from_dict(stored), f"{run.config_path}")
        if args.preset is not None and args.preset != cfg.preset:
            overrides["preset"] = args.preset
        for key, value in overrides.items():
            if getattr(cfg, key) != value:
                raise LabError(
                    f"--resume continues the stored config; {key}={value!r} differs "
                    f"from the run's {getattr(cfg, key)!r}. Drop the flag or start a "
                    f"new run"
                )
        _refuse_links(run.root, "--resume")
        check_writable(run.root, "--resume")
        return cfg, run, True
    cfg = _config(lambda: preset_config(args.preset or "quick", **overrides), "invalid settings")
    if args.out:
        root = Path(args.out)
    else:
        root = Path("runs") / f"lab-{cfg.preset}-{time.strftime('%Y%m%d-%H%M%S')}"
    if root.exists() and not root.is_dir():
        raise LabError(f"--out {str(root)!r} is a file, not a folder; choose a folder")
    found = _lab_paths(root) if root.is_dir() else []
    if found:
        lab = is_lab_run(root)
        names = ", ".join(p.name for p in found)
        if not lab:
            raise LabError(
                f"--out {str(root)!r} holds {names} but no config.json written by posenc lab, so it is "
                f"not a lab run and nothing there is touched; choose an empty or new folder"
            )
        if not getattr(args, "fresh", False):
            raise LabError(
                f"--out {str(root)!r} already holds a run; use --resume {str(root)!r} "
                f"to continue it, add --fresh to start it over, or choose another folder"
            )
        _refuse_links(root, "--out")
        with _locked(root, "--out"):
            _clear_run(root)
    check_writable(root, "--out")
    return cfg, RunDir(root), False


@contextmanager
def _locked(root: Path, flag: str):
    """Hold ``root``'s run lock, or end with one line if another process holds it."""
    try:
        lock = RunLock(root).acquire()
    except FolderBusy as busy:
        raise LabError(
            f"{flag} {str(root)!r} is in use by {busy} (another posenc lab is running there); wait for "
            f"it to finish or choose another folder"
        ) from None
    try:
        yield lock
    finally:
        lock.release()


class _Interrupt:
    """Turns the first Ctrl-C into a request honoured at the next safe point."""

    requested = False

    @contextmanager
    def catching(self):
        def handler(signum, frame):
            if self.requested:
                raise KeyboardInterrupt
            self.requested = True

        try:
            previous = signal.signal(signal.SIGINT, handler)
        except ValueError:  # not the main thread: leave Ctrl-C as it is
            yield
            return
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    def check(self, d: Dist = Dist()) -> None:
        """Raise KeyboardInterrupt if a stop was asked for. Under torchrun rank 0 decides, so every
        process stops at the same step instead of leaving the others waiting in a collective."""
        if broadcast_flag(d, self.requested):
            raise KeyboardInterrupt


class _Progress:
    """What a person watching the run sees: rich progress bars with ETAs on the main process.

    One ``overall`` bar counts estimated work (bytes a model reads; training counts three times for
    the backward pass) so its ETA covers the whole run; the other bars show the current stage
    (``scheme k of N``), evaluation and each fine-tune.
    """

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.bar = None
        self.overall: Optional[TaskID] = None
        if enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.console = Console(stderr=True, log_path=False)
            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                console=self.console,
            )

    def __enter__(self):
        if self.bar:
            self.bar.start()
        return self

    def __exit__(self, *exc):
        if self.bar:
            self.bar.stop()

    def add(self, description: str, total: int, completed: int = 0):
        return self.bar.add_task(description, total=total, completed=completed) if self.bar else None

    def update(self, task, **kw):
        if self.bar is not None and task is not None:
            self.bar.update(task, **kw)

    def remove(self, task) -> None:
        if self.bar is not None and task is not None:
            self.bar.remove_task(task)

    def start_overall(self, total: float, done: float) -> None:
        if self.bar is not None:
            # Rich shows integer counts: work is counted in thousands of bytes read.
            self.overall = self.bar.add_task(
                "overall (kB read)", total=max(1, int(total / 1e3)), completed=int(done / 1e3)
            )

    def work(self, amount: float) -> None:
        if self.bar is not None and self.overall is not None:
            self.bar.update(self.overall, advance=amount / 1e3)

    def log(self, text: str) -> None:
        if self.enabled:
            self.console.log(text)


def _work(cfg: LabConfig) -> dict:
    """Estimated cost (bytes read; a training byte counts 3) of each kind of step."""
    lengths = cfg.eval_lengths
    span = lengths[-1]
    per_len = {}
    for n in lengths:
        cells = len(passkey_bins(n, cfg.train_len)) if cfg.retrieval_trials else 0
        per_len[n] = cfg.eval_windows * span + cells * cfg.retrieval_trials * n
    return {
        "train_step": 3 * cfg.batch_size * cfg.train_len,
        "eval": per_len,
        "finetune": {n: 3 * cfg.finetune_steps * cfg.finetune_batch * n for n in lengths},
    }


def _extension_steps(cfg: LabConfig) -> List[Tuple[str, int, bool]]:
    lengths = cfg.eval_lengths
    if not (cfg.extension and "rope" in cfg.schemes and len(lengths) > 1):
        return []
    methods = ["none"] + list(cfg.extension_methods)
    steps = [(m, n, ft) for n in lengths[1:] for m in methods for ft in ((False, True) if cfg.finetune else (False,))]
    if cfg.finetune:
        # Control: the same fine-tune at the training length. The models are small and briefly
        # trained, so part of any fine-tune's gain is simply more training.
        steps += [("none", lengths[0], False), ("none", lengths[0], True)]
    return steps


def _sweep_key(rate: float) -> str:
    return repr(float(rate))


def _sweep(cfg, corpus, run, record: Progress, d: Dist, device, progress: _Progress, interrupt) -> dict:
    """Each scheme's peak learning rate: ``cfg.lr`` for all, or the best of ``cfg.lr_sweep``.

    Every rate trains a fresh model for ``resolved_sweep_steps`` steps with the same schedule shape
    (warmup shortened in proportion) and retrieval share; it is scored by bits per byte on
    ``eval_windows`` fixed windows of the *training* text at the training length, so the
    validation text that the report measures plays no part in the choice.
    """
    if not cfg.lr_sweep:
        return {s: cfg.lr for s in cfg.schemes}
    steps = cfg.resolved_sweep_steps
    warmup = min(steps, max(1, round(cfg.warmup_steps * steps / cfg.steps)))
    ends = window_ends(corpus.train.size, cfg.train_len, cfg.eval_windows)
    unit = _work(cfg)["train_step"]
    jobs = [(s, r) for s in cfg.schemes for r in cfg.lr_sweep]
    done = sum(_sweep_key(r) in record.lr_sweep.get(s, {}) for s, r in jobs)
    task = progress.add("lr sweep", len(jobs), done)
    for k, (scheme, rate) in enumerate(jobs):
        if _sweep_key(rate) in record.lr_sweep.get(scheme, {}):
            continue
        progress.update(task, description=f"lr sweep: {scheme} at {rate:g} ({k + 1} of {len(jobs)})")
        model = build_model(cfg, scheme).to(device)
        optimizer = make_optimizer(model, rate, cfg.weight_decay)

        def on_step(step, loss):
            progress.work(unit)
            interrupt.check(d)

        try:
            train_steps(
                model,
                optimizer,
                corpus.train,
                start=0,
                total=steps,
                lr=rate,
                warmup=warmup,
                device=device,
                d=d,
                on_step=on_step,
                **run_kwargs(cfg),
            )
        except TrainingDiverged:
            score = math.nan  # recorded as diverged, never chosen
        else:
            nats = per_position_nats(model, corpus.train, ends, cfg.train_len, batch=cfg.eval_batch, device=device, d=d)
            score = float(bits_per_byte(nats).mean())
        record.lr_sweep.setdefault(scheme, {})[_sweep_key(rate)] = score if math.isfinite(score) else None
        if d.main:
            run.save_progress(record)
        progress.update(task, advance=1)
        progress.log(f"lr sweep {scheme} at {rate:g}: {score:.3f} bits per byte on training windows")
    chosen = {}
    for scheme in cfg.schemes:
        scores = {r: record.lr_sweep[scheme][_sweep_key(r)] for r in cfg.lr_sweep}
        finite = {r: v for r, v in scores.items() if v is not None}
        if not finite:
            raise LabError(f"every rate of --lr-sweep diverged for {scheme} ({scores}); try smaller rates")
        chosen[scheme] = min(finite, key=finite.__getitem__)
    return chosen


def _train_all(cfg, corpus, run: RunDir, d: Dist, device, progress: _Progress, interrupt, rates: dict) -> tuple:
    """({scheme: trained model}, {scheme: training info}) for every scheme of ``cfg``, each trained
    from its checkpoint where one exists (the same initial weights and data order for all)."""
    models, info = {}, {}
    for k, scheme in enumerate(cfg.schemes):
        models[scheme], info[scheme] = _train_one(
            cfg, corpus, run, d, device, progress, interrupt, scheme, k, rates[scheme]
        )
    return models, info


def _load_training_state(path: Path, scheme: str, model, optimizer) -> Tuple[int, List[float], Optional[dict]]:
    """(steps done, losses so far, checkpoint) of ``scheme`` from its checkpoint at ``path``, loaded
    into ``model`` and ``optimizer``; (0, [], None) without one. A checkpoint of another model is
    refused."""
    ckpt = load_checkpoint(path)
    if ckpt is None:
        return 0, [], None
    if ckpt.get("model_config") != model.config.to_dict():
        raise LabError(
            f"checkpoint {path} was made with model config "
            f"{ckpt.get('model_config')}, but this version of posenc builds "
            f"{model.config.to_dict()}; resuming would mix two models. Delete that "
            f"checkpoint to retrain {scheme}, or start a new run"
        )
    try:
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
    except (RuntimeError, ValueError, KeyError, TypeError) as err:
        raise RunFileError(
            path,
            f"does not fit the {scheme} model ({str(err).splitlines()[0][:160]})",
            "delete it to retrain that scheme",
        ) from None
    return ckpt["step"], [float(v) for v in ckpt["losses"]], ckpt


def _train_one(cfg, corpus, run: RunDir, d: Dist, device, progress: _Progress, interrupt, scheme, k, lr) -> tuple:
    """(model, info) of ``scheme`` (the ``k``-th) trained to ``cfg.steps`` at peak rate ``lr``,
    checkpointed every ``cfg.checkpoint_every`` steps and on Ctrl-C, with its wall and CPU time."""
    model = build_model(cfg, scheme).to(device)
    optimizer = make_optimizer(model, lr, cfg.weight_decay)
    path = run.checkpoint_path(scheme)
    start, losses, ckpt = _load_training_state(path, scheme, model, optimizer)
    stage = f"train {scheme:<10} (scheme {k + 1} of {len(cfg.schemes)}, lr {lr:g})"
    task = progress.add(stage, cfg.steps, start)
    unit = _work(cfg)["train_step"]
    began, cpu_began = time.time(), time.process_time()
    ckpt_seconds = float(ckpt.get("seconds", 0.0)) if ckpt else 0.0
    ckpt_cpu = float(ckpt.get("cpu_seconds", 0.0)) if ckpt else 0.0

    def save(step_done):
        if d.main:
            save_checkpoint(
                path,
                {
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "step": step_done,
                    "losses": losses,
                    "model_config": model.config.to_dict(),
                    "seconds": ckpt_seconds + time.time() - began,
                    "cpu_seconds": ckpt_cpu + time.process_time() - cpu_began,
                    "lr": lr,
                },
            )

    def on_step(step, loss):
        losses.append(loss)
        progress.update(task, completed=step + 1, description=f"{stage} {loss / math.log(2):.3f} bpb")
        progress.work(unit)
        if (step + 1) % cfg.checkpoint_every == 0 or step + 1 == cfg.steps:
            save(step + 1)
            progress.log(
                f"{scheme} (scheme {k + 1} of {len(cfg.schemes)}): step "
                f"{step + 1}/{cfg.steps}, loss {loss / math.log(2):.3f} bits per byte"
            )
        try:
            interrupt.check(d)
        except KeyboardInterrupt:
            save(step + 1)
            raise

    if start < cfg.steps:
        try:
            train_steps(
                model,
                optimizer,
                corpus.train,
                start=start,
                total=cfg.steps,
                lr=lr,
                warmup=cfg.warmup_steps,
                device=device,
                d=d,
                on_step=on_step,
                **run_kwargs(cfg),
            )
        except TrainingDiverged as e:
            raise LabError(
                f"training {scheme} diverged at step {e.step + 1} of {cfg.steps} (loss {e.loss}); "
                f"no checkpoint of the diverged weights was written. Start over with a smaller --lr, "
                f"--retrieval-answer-weight or --grad-clip and --fresh"
            ) from None
        barrier(d)
    progress.remove(task)
    model.eval()
    tail = losses[-max(1, len(losses) // 10) :]
    seconds, cpu = _saved_seconds(path, scheme) if d.main else (None, None)
    return model, {
        "steps": len(losses),
        "final_bpb": float(np.mean(tail)) / math.log(2),
        "parameters": model.num_parameters(),
        "train_seconds": seconds,
        "train_cpu_seconds": cpu,
        "lr": lr,
    }


def _saved_seconds(path: Path, scheme: str) -> Tuple[float, Optional[float]]:
    """Training (wall, CPU) seconds recorded in ``scheme``'s checkpoint, which the last training
    step wrote (CPU None for a checkpoint written before the lab recorded it)."""
    ckpt = load_checkpoint(path)
    if ckpt is None:
        raise LabError(
            f"checkpoint {path} of {scheme} is missing although training finished; "
            f"something removed it during the run. Resume to retrain {scheme}"
        )
    cpu = ckpt.get("cpu_seconds")
    return ckpt["seconds"], None if cpu is None else float(cpu)


class CpuClock:
    """The CPU time (user + system, every thread) of this process since the clock started, added to
    ``before`` (what earlier sessions of the same run recorded). Under torchrun it is the main
    process's; each rank spends about as much."""

    def __init__(self, before: float = 0.0, frozen: bool = False, start: Optional[float] = None):
        self.before, self.frozen = float(before), frozen
        self.start = time.process_time() if start is None else start

    def total(self) -> float:
        """CPU seconds of the run so far (``before`` alone when ``frozen``: a session that only
        finds the run finished adds nothing to it)."""
        return self.before if self.frozen else self.before + time.process_time() - self.start


def _timed(fn, *args, **kwargs) -> dict:
    """``fn(*args, **kwargs)`` (an evaluation dict) with the CPU seconds it took as ``cpu_seconds``."""
    began = time.process_time()
    result = fn(*args, **kwargs)
    result["cpu_seconds"] = time.process_time() - began
    return result


def run(args) -> int:
    if getattr(args, "lab_command", None) == "export":
        from .export import run as export_run

        return export_run(args)
    try:
        if getattr(args, "seeds", None) is not None:
            return _run_seeds(args)
        if args.device == "cuda" and not torch.cuda.is_available():
            raise LabError("--device cuda was given but torch.cuda.is_available() is False; allowed here: --device cpu")
        if args.threads is not None:
            if args.threads < 1:
                raise LabError(f"--threads must be >= 1, got {args.threads}")
            torch.set_num_threads(args.threads)
        d = setup(args.device)
        try:
            return _run(args, d)
        finally:
            teardown(d)
    except (LabError, RunFileError) as err:
        print(f"posenc lab: {err}", file=sys.stderr)
        return 2


def _seed_commands(args) -> Tuple[Path, List[Tuple[int, List[str]]], str]:
    """(seeds folder, [(seed, argv of its `posenc lab` run)], the command as typed) for ``--seeds``;
    a :class:`LabError` for flags that do not go with it."""
    from dataclasses import replace

    from .summary import seed_dir

    seeds = args.seeds
    if not seeds or len(set(seeds)) != len(seeds) or any(s < 0 for s in seeds):
        raise LabError(f"--seeds must list distinct seeds >= 0, got {seeds}")
    for flag, given in (("--seed", args.seed is not None), ("--resume", bool(args.resume)), ("--fresh", args.fresh)):
        if given:
            raise LabError(
                f"--seeds does not take {flag}: each seed trains in OUT/seed-<n>, and the same --seeds "
                f"command again resumes every seed folder that holds a run"
            )
    if not args.out:
        raise LabError("--seeds needs --out, the folder that holds one run folder per seed")
    if args.jobs < 1:
        raise LabError(f"--jobs must be >= 1, got {args.jobs}")
    cfg = _config(lambda: preset_config(args.preset or "quick", **_overrides(args)), "invalid settings")
    root = Path(args.out)
    if root.exists() and not root.is_dir():
        raise LabError(f"--out {str(root)!r} is a file, not a folder; choose a folder")
    if is_lab_run(root):
        raise LabError(f"--out {str(root)!r} holds a single run; give --seeds a folder of its own")
    threads = args.threads or max(1, (os.cpu_count() or 1) // args.jobs)
    common = ["--threads", str(threads), "--device", args.device] + ([] if args.plots else ["--no-plots"])
    commands = []
    for seed in seeds:
        folder = seed_dir(root, seed)
        if is_lab_run(folder):
            argv = ["lab", "--resume", str(folder)]
        else:
            argv = shlex.split(command_line(replace(cfg, seed=seed)))[1:] + ["--out", str(folder)]
        commands.append((seed, argv + common))
    typed = shlex.split(command_line(cfg)) + ["--seeds", ",".join(map(str, seeds)), "--out", str(root)]
    return root, commands, shlex.join(typed)


def _run_seeds(args) -> int:
    """``--seeds``: one ``posenc lab`` process per seed (``--jobs`` at a time), then the summary."""
    import subprocess

    from .summary import table_bpb, table_retrieval, table_time, table_verdicts, write_summary

    root, commands, typed = _seed_commands(args)
    check_writable(root, "--out")
    with _locked(root, "--out"):
        pending, failed = list(commands), []
        running: List[Tuple[int, Any, Any]] = []
        try:
            while pending or running:
                while pending and len(running) < args.jobs:
                    seed, argv = pending.pop(0)
                    log = open(root / f"seed-{seed}.log", "ab")
                    print(f"seed {seed}: posenc {shlex.join(argv)} (log: {log.name})", file=sys.stderr)
                    child = subprocess.Popen([sys.executable, "-m", "posenc.cli"] + argv, stdout=log, stderr=log)
                    running.append((seed, child, log))
                seed, child, log = running[0]
                for item in running:
                    if item[1].poll() is not None:
                        seed, child, log = item
                        break
                else:
                    time.sleep(0.5)
                    continue
                running.remove((seed, child, log))
                log.close()
                print(f"seed {seed}: finished with status {child.returncode}", file=sys.stderr)
                if child.returncode:
                    failed.append(seed)
        except KeyboardInterrupt:
            for _, child, log in running:
                child.wait()  # each saves its progress on the same Ctrl-C
                log.close()
            print("stopped; run the same command again to resume every seed", file=sys.stderr)
            return 130
        if failed:
            raise LabError(
                f"seed {', '.join(map(str, failed))} stopped with an error; see {root}/seed-<n>.log, fix it "
                f"and run the same command again to resume"
            )
        summary = write_summary(root, root / "summary.json", root.name, typed)
    parts = [
        f"# posenc lab: {len(summary['seeds'])} training seeds",
        "",
        f"Command: `{typed}`",
        "",
        "## Bits per byte",
        "",
        table_bpb(summary),
        "",
        "## RoPE context extension",
        "",
        table_bpb(summary, extension=True),
        "",
        "## Passkey retrieval",
        "",
        table_retrieval(summary),
        "",
        table_retrieval(summary, extension=True),
        "",
        "## Verdicts",
        "",
        table_verdicts(summary),
        "",
        "## Training time",
        "",
        table_time(summary),
        "",
    ]
    from .store import atomic_write_bytes

    atomic_write_bytes(root / "summary.md", "\n".join(parts).encode("utf-8"))
    print(f"report: {root / 'summary.md'}", file=sys.stderr)
    return 0


def _initial_work(cfg, run: RunDir, record: Progress, steps: list) -> tuple:
    """(total, done) estimated work of the whole run, for the overall ETA."""
    w = _work(cfg)
    total = done = 0.0
    sweep = cfg.resolved_sweep_steps * w["train_step"]
    for scheme in cfg.schemes:
        for rate in cfg.lr_sweep:
            total += sweep
            done += sweep if _sweep_key(rate) in record.lr_sweep.get(scheme, {}) else 0.0
        total += cfg.steps * w["train_step"]
        path = run.checkpoint_path(scheme)
        ckpt = load_checkpoint(path)
        if ckpt is not None:
            done += min(cfg.steps, ckpt["step"]) * w["train_step"]
        for n in cfg.eval_lengths:
            total += w["eval"][n]
            done += w["eval"][n] if str(n) in record.eval.get(scheme, {}) else 0.0
    for method, n, ft in steps:
        cost = w["eval"][n] + (w["finetune"][n] if ft else 0.0)
        total += cost
        done += cost if _have(record, method, n, ft) else 0.0
    return total, done


def _run(args, d: Dist) -> int:
    with ExitStack() as stack:
        return _run_locked(args, d, stack)


@dataclass
class _Session:
    """What every step of one ``posenc lab`` run shares: the config, the data, the run folder and
    its record, the evaluation windows and arguments, progress display, Ctrl-C and the CPU clock."""

    cfg: LabConfig
    corpus: Any
    corpus_info: dict
    run: RunDir
    d: Dist
    device: torch.device
    record: Progress
    ends: Any
    eval_kw: dict
    progress: _Progress
    interrupt: _Interrupt
    clock: CpuClock
    info: dict = field(default_factory=dict)

    def finish_step(self, complete: bool = False, plots: bool = False) -> None:
        """Record the finished work (and the CPU time so far) and rewrite the results and report."""
        if self.d.main:
            self.record.cpu_seconds = self.clock.total()
            self.run.save_progress(self.record)
            results = build_results(self.cfg.to_dict(), self.corpus_info, self.info, self.record.to_dict(), complete)
            write_report(results, self.run.root, command_line(self.cfg), plots=plots)


def _open_run(args, d: Dist, stack: ExitStack) -> Tuple[LabConfig, RunDir, Any, dict, bool]:
    """(config, run folder, corpus, corpus summary, resuming) of the run ``args`` asks for; on the
    main process the folder is made, locked (released by ``stack``) and its config and corpus
    files written or checked."""
    cfg, run, resuming = resolve_config(args)
    if d.active and not args.resume and not args.out:
        import torch.distributed as dist

        shared = [str(run.root)]
        dist.broadcast_object_list(shared, src=0)
        run = RunDir(Path(shared[0]))
    try:
        corpus = load_corpus(cfg.data, pattern=cfg.pattern, val_fraction=cfg.val_fraction)
    except (OSError, ValueError) as err:
        raise LabError(str(err)) from None
    corpus_info = corpus.summary()
    if d.main:
        run.root.mkdir(parents=True, exist_ok=True)
        stack.enter_context(_locked(run.root, "--resume" if resuming else "--out"))
        if resuming:
            stored = read_run_file(run.corpus_path, "corpus")
            if stored and stored.get("val_split_sha256") != corpus_info["val_split_sha256"]:
                raise LabError(
                    f"the corpus changed since this run started (split fingerprint "
                    f"{stored.get('val_split_sha256')} -> {corpus_info['val_split_sha256']}); "
                    f"resume with the same data or start a new run"
                )
        else:
            write_run_file(run.config_path, "config", cfg.to_dict())
        write_run_file(run.corpus_path, "corpus", corpus_info)
    barrier(d)
    return cfg, run, corpus, corpus_info, resuming


def _run_locked(args, d: Dist, stack: ExitStack) -> int:
    began = time.process_time()  # the run's CPU clock covers reading the corpus too
    cfg, run, corpus, corpus_info, resuming = _open_run(args, d, stack)
    device = torch.device("cuda", d.local_rank) if args.device == "cuda" else torch.device("cpu")
    record = run.progress()
    lengths = cfg.eval_lengths
    try:
        ends = window_ends(corpus.val.size, lengths[-1], cfg.eval_windows)
    except ValueError as err:
        raise LabError(str(err)) from None
    eval_kw = dict(
        batch=cfg.eval_batch,
        final_bytes=cfg.final_bytes,
        span=lengths[-1],
        bootstrap_samples=cfg.bootstrap_samples,
        seed=cfg.seed,
        device=device,
        d=d,
        train_len=cfg.train_len,
        retrieval_trials=cfg.retrieval_trials,
    )
    session = _Session(
        cfg,
        corpus,
        corpus_info,
        run,
        d,
        device,
        record,
        ends,
        eval_kw,
        _Progress(d.main),
        _Interrupt(),
        CpuClock(record.cpu_seconds, start=began),
    )
    progress = session.progress
    progress.log(
        f"run folder {run.root} ({'resuming' if resuming else 'new'}); "
        f"{corpus_info['train_bytes'] / 1e6:.1f} MB train, "
        f"{corpus_info['val_bytes'] / 1e6:.1f} MB validation"
    )
    small = machinery_check_reason(cfg.to_dict())
    if small:
        progress.log(f"{MACHINERY_CHECK} ({small})")
    ext_steps = _extension_steps(cfg)
    total, done = _initial_work(cfg, run, record, ext_steps)
    if done >= total:  # a finished run resumed: nothing is redone or rewritten, its CPU time included
        session.clock = CpuClock(record.cpu_seconds, frozen=True)
    with session.interrupt.catching(), progress:
        progress.start_overall(total, done)
        rates = _sweep(cfg, corpus, run, record, d, device, progress, session.interrupt)
        models, session.info = _train_all(cfg, corpus, run, d, device, progress, session.interrupt, rates)
        _evaluate_schemes(session, models)
        if ext_steps:
            _extend_rope(session, models["rope"], ext_steps)
    session.finish_step(complete=True, plots=args.plots)
    barrier(d)
    if d.main:
        # Plain lines (no wrapping, no timestamps), so the path and the command can be copied.
        if small:
            print(f"{MACHINERY_CHECK} ({small}): no verdicts", file=sys.stderr)
        print(
            f"report: {run.root / 'results.md'}  explore it: posenc explore --lab-run {shlex.quote(str(run.root))}",
            file=sys.stderr,
        )
    return 0


def _evaluate_schemes(session: _Session, models: dict) -> None:
    """Every scheme at every evaluation length not yet recorded, each recorded when it finishes."""
    cfg, record, progress = session.cfg, session.record, session.progress
    work = _work(cfg)
    todo = [(s, n) for s in cfg.schemes for n in cfg.eval_lengths if str(n) not in record.eval.get(s, {})]
    total = len(cfg.schemes) * len(cfg.eval_lengths)
    task = progress.add("evaluate", total, total - len(todo))
    for scheme, n in todo:
        session.interrupt.check(session.d)
        k = cfg.schemes.index(scheme) + 1
        progress.update(task, description=f"evaluate {scheme} at {n} (scheme {k} of {len(cfg.schemes)})")
        result = _timed(
            evaluate_at,
            models[scheme],
            session.corpus.val,
            session.ends,
            n,
            learned_beyond=cfg.learned_beyond,
            **session.eval_kw,
        )
        record.eval.setdefault(scheme, {})[str(n)] = result
        session.finish_step()
        progress.update(task, advance=1)
        progress.work(work["eval"][n])
        if "bpb" in result:
            progress.log(f"{scheme} at {n}: {result['bpb']:.3f} bits per byte" + _retrieval_summary(result))


def _extend_rope(session: _Session, rope, ext_steps: List[Tuple[str, int, bool]]) -> None:
    """Each RoPE extension step (method, length, fine-tuned) not yet recorded: extend the trained
    RoPE model, fine-tune it where asked, evaluate, record."""
    cfg, record, progress, d = session.cfg, session.record, session.progress, session.d
    work = _work(cfg)
    ext_todo = [s for s in ext_steps if not _have(record, *s)]
    task = progress.add("extend rope", len(ext_steps), len(ext_steps) - len(ext_todo))
    for method, n, ft in ext_todo:
        session.interrupt.check(d)
        progress.update(task, description=f"extend rope: {method} at {n}{' fine-tuned' if ft else ''}")
        began = time.process_time()
        model = extended_model(rope, method, n, cfg.train_len)
        if ft:
            _finetune(session, model, method, n, work["finetune"][n])
        result = evaluate_at(model, session.corpus.val, session.ends, n, **session.eval_kw)
        result["cpu_seconds"] = time.process_time() - began
        entry = record.extension.setdefault(method, {}).setdefault(str(n), {})
        if ft:
            entry["finetuned"] = result
        else:
            entry.update(result)
        session.finish_step()
        progress.update(task, advance=1)
        progress.work(work["eval"][n])
        progress.log(
            f"rope+{method} at {n}{' fine-tuned' if ft else ''}: "
            f"{result['bpb']:.3f} bits per byte" + _retrieval_summary(result)
        )


def _finetune(session: _Session, model, method: str, n: int, cost: float) -> None:
    """Fine-tune the extended ``model`` at length ``n`` (``cost``: its share of the overall work)."""
    progress, cfg = session.progress, session.cfg
    ft_task = progress.add(f"fine-tune {method} at {n}", cfg.finetune_steps)
    unit = cost / cfg.finetune_steps

    def on_ft_step(step, loss):
        progress.update(ft_task, completed=step + 1)
        progress.work(unit)
        session.interrupt.check(session.d)

    try:
        finetune(model, session.corpus.train, cfg, n, device=session.device, d=session.d, on_step=on_ft_step)
    except TrainingDiverged as e:
        raise LabError(
            f"the fine-tune of rope+{method} at {n} diverged at step {e.step + 1} (loss "
            f"{e.loss}); every finished result is saved. Start over with a smaller "
            f"--finetune-lr and --fresh"
        ) from None
    progress.remove(ft_task)


def _retrieval_summary(result: dict) -> str:
    cells = result.get("retrieval") or {}
    if not cells:
        return ""
    return "; passkey " + ", ".join(f"{name} {cell['accuracy']:.0%}" for name, cell in cells.items())


def _have(record: Progress, method: str, n: int, ft: bool) -> bool:
    entry = record.extension.get(method, {}).get(str(n))
    if entry is None:
        return False
    return "finetuned" in entry if ft else "bpb" in entry
