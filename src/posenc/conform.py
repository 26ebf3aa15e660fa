"""``posenc conform``: check an engine's RoPE against posenc's exact answer, config by config.

The command line of :mod:`posenc.integrations.conform`, whose public names this module also
re-exports (``posenc.conform.conform``, ``posenc.conform.load_adapter``, ...)::

    posenc conform --adapter MODULE:FUNCTION [--config NAME_OR_PATH ...] [--dtype float32 float64]
                   [--json OUT] [--precision TOL] [--engine NAME] [--engine-version VERSION]

Exit status: 0 when every config the engine supports gets the exact answer (precision loss is
reported, and fails only under ``--precision``); 1 for a wrong answer, an error of the adapter or an
unreadable config, or precision loss past ``TOL``; 2 when the command cannot start (the adapter
cannot be loaded).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, List

from . import runs
from .integrations.conform import (
    CHECKS,
    ConfigResult,
    Report,
    check_summary,
    conform,
    load_adapter,
    read_summary,
)

__all__ = [
    "CHECKS",
    "ConfigResult",
    "Report",
    "add_arguments",
    "check_summary",
    "conform",
    "load_adapter",
    "read_summary",
    "run",
]

PROTOCOL = """\
the adapter protocol:
  An adapter is a Python callable, given as MODULE:FUNCTION (or the built-ins posenc, transformers):

      rotate(config: dict, q: Tensor, k: Tensor, positions: Tensor)
          -> (q_rot, k_rot)  or  (q_rot, k_rot, softmax_scale)

  config     a config.json as a dict
  q, k       (tokens, heads, head_dim), float32 or float64, in the layout the config implies
             (half-split; interleaved pairs for GPT-J and rope_interleave: true); head_dim is
             qk_rope_head_dim for multi-head latent attention
  positions  (tokens,) int64; q, k and positions are CPU tensors (an adapter may move them, and
             may return its results from any device)
  returns    q_rot, k_rot of the same shape and dtype, the attention factor included wherever the
             engine puts it; softmax_scale (optional) is what the engine multiplies its usual
             1/sqrt(head_dim) by (1.0 if absent)
  optional   rotate.supports(config) -> True | False | "reason" (the table then says
             "not supported", not "mismatch"); rotate.max_position(config) -> int | None (the
             largest position the engine can rotate: groups past it are skipped, and the table
             says so); rotate.engine and rotate.version (strings)

configs (--config, any number; default: all):
  all, fixtures, generated (every registered rope type at its parameters' edges), a fixture name,
  a config.json path, or a folder of them

what is checked, per config, in float32 and float64, at positions near 0, at the trained length, past
original_max_position_embeddings, at the model's maximum and at 1M: the angle of every pair (rad),
the attention factor wherever the engine puts it (a scale ratio), rotated q and k, and the scores
q.k (relative). A wrong answer is named by its cause where one misreading of the config matches.

exit status: 0 all supported configs right (precision loss is reported); 1 a wrong answer, an
adapter error, an unreadable config, or precision loss past --precision TOL; 2 the adapter cannot
be loaded.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = PROTOCOL
    parser.add_argument(
        "--adapter", required=True, metavar="MODULE:FUNCTION", help="the engine's adapter, or posenc / transformers"
    )
    parser.add_argument(
        "--config",
        nargs="+",
        action="extend",
        default=None,
        metavar="NAME_OR_PATH",
        help="configs to check (default: all fixtures and generated configs)",
    )
    parser.add_argument(
        "--dtype", nargs="+", choices=("float32", "float64"), default=None, help="dtypes of q and k (default: both)"
    )
    parser.add_argument("--json", metavar="OUT", default=None, help="write the whole table as a summary JSON file")
    parser.add_argument(
        "--precision",
        type=float,
        default=None,
        metavar="TOL",
        help="also fail on precision loss larger than TOL (in each check's unit: rad, relative)",
    )
    parser.add_argument("--engine", default=None, help="the engine's name in the table (default: the adapter's)")
    parser.add_argument("--engine-version", default=None, help="the engine's version (default: the adapter's)")
    parser.add_argument("--quiet", action="store_true", help="print only the counts")


def _line(result: ConfigResult) -> str:
    head = f"{result.status:<11} {result.config:<44} {result.rope_type or '-':<12}"
    if result.status in ("unsupported", "error"):
        return f"{head} {result.message}"
    worst = []
    for check in CHECKS:
        rows = [c for c in result.checks if c.check == check]
        if rows:
            top = max(rows, key=lambda c: c.error)
            worst.append(f"{check} {top.error:.1e}")
    text = f"{head} " + ", ".join(worst)
    if result.skipped:
        text += f" (not called: {', '.join(s.split(':')[0] for s in result.skipped)})"
    if result.causes:
        text += "\n" + " " * 12 + "cause: " + "; ".join(result.causes)
    return text


def summary_text(summary: Dict[str, Any]) -> str:
    """The summary as JSON text: the header indented, each config on one line (small, and a diff shows
    which configs changed)."""
    head = {k: v for k, v in summary.items() if k != "configs"}
    lines = json.dumps(head, indent=1)[:-2].rstrip()
    configs = ",\n".join("  " + json.dumps(c, separators=(",", ":")) for c in summary["configs"])
    return f'{lines},\n "configs": [\n{configs}\n ]\n}}\n'


def run(args: argparse.Namespace) -> int:
    try:
        adapter = load_adapter(args.adapter)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.precision is not None and not args.precision > 0:
        print(f"error: --precision must be a number > 0, got {args.precision!r}", file=sys.stderr)
        return 2
    printed: List[Any] = []

    def progress(result: ConfigResult) -> None:
        if not args.quiet:
            print(_line(result), flush=True)
        printed.append(result)

    report = conform(
        adapter,
        args.config or ["all"],
        dtypes=tuple(args.dtype or ("float32", "float64")),
        precision=args.precision,
        engine=args.engine,
        version=args.engine_version,
        progress=progress,
    )
    report.adapter = args.adapter
    counts = report.counts()
    print(
        f"{report.engine} {report.version}: "
        + ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        + (f"; {len(report.over_tolerance())} past --precision {args.precision:g}" if args.precision else "")
    )
    if args.json:
        # the one atomic write of every file posenc writes: a planted link is replaced, never written through
        runs.atomic_write_text(Path(args.json), summary_text(report.summary()))
    return report.exit_code
