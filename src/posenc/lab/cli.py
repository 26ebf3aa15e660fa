"""``posenc lab``: train one small LM per position scheme, evaluate at longer lengths, extend RoPE,
and write the report. See ``docs/lab.md``.

The run is a sequence of small steps (a training checkpoint, one scheme at one length, one extension
method at one length), each recorded in the run folder as soon as it finishes. ``--resume RUN_DIR``
skips everything recorded; Ctrl-C stops after the current training step (saving a checkpoint) or
discards only the evaluation in flight.
"""

from __future__ import annotations

import argparse
import math
import shlex
import signal
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from ..rope.registry import lab_methods
from .config import EXTENSION_METHODS, LabConfig, PRESETS, preset_config
from .corpus import load_corpus
from .distributed import Dist, barrier, broadcast_flag, setup, teardown
from .evaluate import evaluate_at, window_ends
from .extend import extended_model, finetune
from .report import build_results, write_report
from .store import RunDir, load_checkpoint, read_json, save_checkpoint, write_json
from .train import build_model, make_optimizer, train_steps

#: (flag, config field, parser type): every config field the command line can override.
OVERRIDES = [
    ("--seed", "seed", int), ("--data", "data", str), ("--pattern", "pattern", str),
    ("--val-fraction", "val_fraction", float), ("--d-model", "d_model", int),
    ("--n-layers", "n_layers", int), ("--n-heads", "n_heads", int), ("--train-len", "train_len", int),
    ("--batch-size", "batch_size", int), ("--steps", "steps", int), ("--lr", "lr", float),
    ("--warmup-steps", "warmup_steps", int), ("--weight-decay", "weight_decay", float),
    ("--checkpoint-every", "checkpoint_every", int), ("--eval-windows", "eval_windows", int),
    ("--eval-batch", "eval_batch", int), ("--bootstrap-samples", "bootstrap_samples", int),
    ("--learned-beyond", "learned_beyond", str), ("--finetune-steps", "finetune_steps", int),
    ("--finetune-batch", "finetune_batch", int), ("--finetune-lr", "finetune_lr", float),
]


def _names(text: str) -> list:
    return [t.strip() for t in text.split(",") if t.strip()]


def _extension_methods(text: str) -> list:
    """Comma-separated extension methods: the rope types registered with a lab default."""
    names, allowed = _names(text), lab_methods()
    for name in names:
        if name not in allowed:
            hint = " ('dynamic_ntk' is now spelt 'dynamic')" if name == "dynamic_ntk" else ""
            raise argparse.ArgumentTypeError(f"unknown extension method {name!r}{hint}; choose from "
                                             f"{','.join(allowed)}")
    return names


def _ints(text: str) -> list:
    try:
        return [int(t) for t in _names(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", choices=sorted(PRESETS), default=None,
                        help="size of the run: smoke (seconds), quick (~10 min on 2 cores), "
                             "standard (~1 h on 2 cores); default quick")
    parser.add_argument("--schemes", type=_names, default=None,
                        help="comma-separated schemes (default: nope,sinusoidal,learned,rope,alibi)")
    parser.add_argument("--eval-multipliers", type=_ints, default=None,
                        help="evaluation lengths as multiples of the training length (default 1,2,4,8)")
    parser.add_argument("--extension-methods", type=_extension_methods, default=None,
                        help=f"RoPE extension methods, any of {','.join(lab_methods())} "
                             f"(default {','.join(EXTENSION_METHODS)})")
    parser.add_argument("--no-extension", dest="extension", action="store_false", default=None,
                        help="skip RoPE context extension")
    parser.add_argument("--finetune", action="store_true", default=None,
                        help="also fine-tune the RoPE model briefly at each longer length, per method")
    for flag, dest, kind in OVERRIDES:
        extra = {"choices": ["interpolate", "cannot"]} if dest == "learned_beyond" else {}
        parser.add_argument(flag, dest=dest, type=kind, default=None,
                            help=f"override the preset's {dest}", **extra)
    parser.add_argument("--out", default=None,
                        help="run folder to create (default runs/lab-<preset>-<time>)")
    parser.add_argument("--resume", metavar="RUN_DIR", default=None,
                        help="continue the run in RUN_DIR without redoing finished work")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads per process")
    parser.add_argument("--no-plots", dest="plots", action="store_false", default=True)


_CONFIG_DESTS = ["preset", "schemes", "eval_multipliers", "extension_methods", "extension",
                 "finetune"] + [dest for _, dest, _ in OVERRIDES]


def _overrides(args) -> dict:
    return {k: getattr(args, k) for k in _CONFIG_DESTS
            if k != "preset" and getattr(args, k, None) is not None}


def command_line(cfg: LabConfig) -> str:
    """A ``posenc lab`` command that reproduces ``cfg`` (preset plus the fields that differ)."""
    base = preset_config(cfg.preset)
    parts = ["posenc", "lab", "--preset", cfg.preset]
    for flag, dest, _ in OVERRIDES:
        value = getattr(cfg, dest)
        if value != getattr(base, dest):
            parts += [flag, str(value)]
    for dest, flag in (("schemes", "--schemes"), ("eval_multipliers", "--eval-multipliers"),
                       ("extension_methods", "--extension-methods")):
        if getattr(cfg, dest) != getattr(base, dest):
            parts += [flag, ",".join(map(str, getattr(cfg, dest)))]
    if not cfg.extension:
        parts.append("--no-extension")
    if cfg.finetune:
        parts.append("--finetune")
    return shlex.join(parts)


def resolve_config(args) -> tuple:
    """(config, run folder, resuming?) from the parsed arguments."""
    overrides = _overrides(args)
    if args.resume:
        run = RunDir(Path(args.resume))
        stored = read_json(run.config_path)
        if stored is None:
            raise FileNotFoundError(f"--resume {args.resume!r}: no config.json there; give a folder "
                                    f"made by an earlier `posenc lab` run")
        cfg = LabConfig.from_dict(stored)
        if args.preset is not None and args.preset != cfg.preset:
            overrides["preset"] = args.preset
        for key, value in overrides.items():
            if getattr(cfg, key) != value:
                raise ValueError(f"--resume continues the stored config; {key}={value!r} differs "
                                 f"from the run's {getattr(cfg, key)!r}. Drop the flag or start a "
                                 f"new run")
        return cfg, run, True
    cfg = preset_config(args.preset or "quick", **overrides)
    if args.out:
        root = Path(args.out)
    else:
        root = Path("runs") / f"lab-{cfg.preset}-{time.strftime('%Y%m%d-%H%M%S')}"
    if (root / "config.json").exists():
        raise FileExistsError(f"--out {str(root)!r} already holds a run; use --resume {str(root)!r} "
                              f"to continue it, or choose another folder")
    return cfg, RunDir(root), False


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
        except ValueError:            # not the main thread: leave Ctrl-C as it is
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
    """Rich progress bars with ETA on the main process; log lines for non-terminal output."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.bar = None
        if enabled:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)
            self.console = Console(stderr=True, log_path=False)
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                                console=self.console)

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

    def log(self, text: str) -> None:
        if self.enabled:
            self.console.log(text)


def _train_all(cfg, corpus, run: RunDir, d: Dist, device, progress: _Progress, interrupt) -> tuple:
    models, info = {}, {}
    for scheme in cfg.schemes:
        model = build_model(cfg, scheme).to(device)
        optimizer = make_optimizer(model, cfg.lr, cfg.weight_decay)
        ckpt = load_checkpoint(run.checkpoint_path(scheme))
        start, losses = 0, []
        if ckpt is not None:
            if ckpt.get("model_config") != model.config.to_dict():
                raise ValueError(
                    f"checkpoint {run.checkpoint_path(scheme)} was made with model config "
                    f"{ckpt.get('model_config')}, but this version of posenc builds "
                    f"{model.config.to_dict()}; resuming would mix two models. Delete that "
                    f"checkpoint to retrain {scheme}, or start a new run")
            model.load_state_dict(ckpt["model"])
            optimizer.load_state_dict(ckpt["optimizer"])
            start, losses = ckpt["step"], list(ckpt["losses"])
        task = progress.add(f"train {scheme:<10}", cfg.steps, start)
        began = time.time()

        def save(step_done):
            if d.main:
                save_checkpoint(run.checkpoint_path(scheme), {
                    "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "step": step_done, "losses": losses, "model_config": model.config.to_dict(),
                    "seconds": ckpt_seconds + time.time() - began})

        ckpt_seconds = ckpt.get("seconds", 0.0) if ckpt else 0.0

        def on_step(step, loss):
            losses.append(loss)
            progress.update(task, completed=step + 1,
                            description=f"train {scheme:<10} {loss / math.log(2):.3f} bpb")
            if (step + 1) % cfg.checkpoint_every == 0 or step + 1 == cfg.steps:
                save(step + 1)
                progress.log(f"{scheme}: step {step + 1}/{cfg.steps}, "
                             f"loss {loss / math.log(2):.3f} bits per byte")
            try:
                interrupt.check(d)
            except KeyboardInterrupt:
                save(step + 1)
                raise

        if start < cfg.steps:
            train_steps(model, optimizer, corpus.train, start=start, total=cfg.steps,
                        length=cfg.train_len, batch=cfg.batch_size, lr=cfg.lr,
                        warmup=cfg.warmup_steps, min_ratio=cfg.min_lr_ratio,
                        grad_clip=cfg.grad_clip, seed=cfg.seed, device=device, d=d,
                        on_step=on_step)
            barrier(d)
        model.eval()
        tail = losses[-max(1, len(losses) // 10):]
        seconds = load_checkpoint(run.checkpoint_path(scheme))["seconds"] if d.main else None
        info[scheme] = {"steps": len(losses), "final_bpb": float(np.mean(tail)) / math.log(2),
                        "parameters": model.num_parameters(), "train_seconds": seconds}
        models[scheme] = model
    return models, info


def _finish_step(cfg, corpus_info, info, record, run, d, complete, plots=False):
    if d.main:
        run.save_progress(record)
        results = build_results(cfg.to_dict(), corpus_info, info, record, complete)
        write_report(results, run.root, command_line(cfg), plots=plots)


def run(args) -> int:
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was given but torch.cuda.is_available() is False; "
                         "allowed here: --device cpu")
    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads must be >= 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    d = setup(args.device)
    try:
        return _run(args, d)
    finally:
        teardown(d)


def _run(args, d: Dist) -> int:
    cfg, run, resuming = resolve_config(args)
    device = torch.device("cuda", d.local_rank) if args.device == "cuda" else torch.device("cpu")
    if d.active and not args.resume and not args.out:
        import torch.distributed as dist
        shared = [str(run.root)]
        dist.broadcast_object_list(shared, src=0)
        run = RunDir(Path(shared[0]))
    corpus = load_corpus(cfg.data, pattern=cfg.pattern, val_fraction=cfg.val_fraction)
    corpus_info = corpus.summary()
    if d.main:
        run.root.mkdir(parents=True, exist_ok=True)
        if resuming:
            stored = read_json(run.root / "corpus.json")
            if stored and stored.get("val_split_sha256") != corpus_info["val_split_sha256"]:
                raise ValueError(f"the corpus changed since this run started (split fingerprint "
                                 f"{stored.get('val_split_sha256')} -> {corpus_info['val_split_sha256']}); "
                                 f"resume with the same data or start a new run")
        else:
            write_json(run.config_path, cfg.to_dict())
        write_json(run.root / "corpus.json", corpus_info)
    barrier(d)
    interrupt = _Interrupt()
    record = run.progress()
    record.setdefault("eval", {}), record.setdefault("extension", {})
    lengths = cfg.eval_lengths
    ends = window_ends(corpus.val.size, lengths[-1], cfg.eval_windows)
    eval_kw = dict(batch=cfg.eval_batch, final_bytes=cfg.final_bytes, span=lengths[-1],
                   bootstrap_samples=cfg.bootstrap_samples, seed=cfg.seed, device=device, d=d)
    progress = _Progress(d.main)
    progress.log(f"run folder {run.root} ({'resuming' if resuming else 'new'}); "
                 f"{corpus_info['train_bytes'] / 1e6:.1f} MB train, "
                 f"{corpus_info['val_bytes'] / 1e6:.1f} MB validation")
    with interrupt.catching(), progress:
        models, info = _train_all(cfg, corpus, run, d, device, progress, interrupt)

        todo = [(s, n) for s in cfg.schemes for n in lengths if str(n) not in record["eval"].get(s, {})]
        task = progress.add("evaluate", len(cfg.schemes) * len(lengths),
                            len(cfg.schemes) * len(lengths) - len(todo))
        for scheme, n in todo:
            interrupt.check(d)
            result = evaluate_at(models[scheme], corpus.val, ends, n,
                                 learned_beyond=cfg.learned_beyond, **eval_kw)
            record["eval"].setdefault(scheme, {})[str(n)] = result
            _finish_step(cfg, corpus_info, info, record, run, d, complete=False)
            progress.update(task, advance=1)
            if "bpb" in result:
                progress.log(f"{scheme} at {n}: {result['bpb']:.3f} bits per byte")

        if cfg.extension and "rope" in models and len(lengths) > 1:
            methods = ["none"] + list(cfg.extension_methods)
            steps = [(m, n, ft) for n in lengths[1:] for m in methods
                     for ft in ((False, True) if cfg.finetune else (False,))]
            if cfg.finetune:
                # Control: the same fine-tune at the training length. The models are small and
                # briefly trained, so part of any fine-tune's gain is simply more training.
                steps += [("none", lengths[0], False), ("none", lengths[0], True)]
            todo = [s for s in steps if not _have(record, *s)]
            task = progress.add("extend rope", len(steps), len(steps) - len(todo))
            for method, n, ft in todo:
                interrupt.check(d)
                model = extended_model(models["rope"], method, n, cfg.train_len)
                if ft:
                    finetune(model, corpus.train, cfg, n, device=device, d=d,
                             on_step=lambda step, loss: interrupt.check(d))
                result = evaluate_at(model, corpus.val, ends, n, **eval_kw)
                entry = record["extension"].setdefault(method, {}).setdefault(str(n), {})
                if ft:
                    entry["finetuned"] = result
                else:
                    entry.update(result)
                _finish_step(cfg, corpus_info, info, record, run, d, complete=False)
                progress.update(task, advance=1)
                progress.log(f"rope+{method} at {n}{' fine-tuned' if ft else ''}: "
                             f"{result['bpb']:.3f} bits per byte")
    _finish_step(cfg, corpus_info, info, record, run, d, complete=True, plots=args.plots)
    barrier(d)
    if d.main:
        progress.log(f"report: {run.root / 'results.md'}")
    return 0


def _have(record: dict, method: str, n: int, ft: bool) -> bool:
    entry = record["extension"].get(method, {}).get(str(n))
    if entry is None:
        return False
    return "finetuned" in entry if ft else "bpb" in entry
