"""The ``posenc lab`` command line: its flags, how they become config overrides, and the command that
reproduces a config. Parsing only; :mod:`posenc.measuring.lab.folder` resolves the run folder and
:mod:`posenc.measuring.lab.cli` runs it."""

from __future__ import annotations

import argparse
import shlex
from typing import Any, Dict

from ...factory import SCHEMES
from ...rope.registry import extension_types
from .config import EXTENSION_METHODS, PRESETS, LabConfig, preset_config

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
    """Comma-separated extension methods: the rope types an extension ratio sets."""
    names, allowed = _names(text), extension_types()
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
    # `posenc lab export RUN OUT`: the one subcommand (posenc.measuring.lab.export); without it, a run.
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
        help=f"comma-separated schemes (default: {','.join(SCHEMES)})",
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
        help=f"RoPE extension methods, any of {','.join(extension_types())} (default {','.join(EXTENSION_METHODS)})",
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


def config_overrides(args) -> dict:
    """The config fields the command line sets (all but ``--preset``), by field name."""
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
