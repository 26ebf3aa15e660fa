"""``posenc tour``: how a transformer knows word order, with every number computed live.

The tour is a list of sections run in order. Each section is a function ``section(ctx)`` that prints
to ``ctx.console``, writes any figure into ``ctx.out_dir``, and records every number it prints in
``ctx.facts`` under a stable key, so the test suite can recompute each one independently from the
library and the mathematics and compare.

Adding a section: write a module in this package with a function taking a :class:`TourContext`, and
append ``(title, function)`` to :data:`SECTIONS`. Record numbers with ``ctx.record(key, value)``
(it refuses a key used twice) and write figures with :func:`posenc.tour._plot.save`, which records
their paths under ``figure.<name>``. Sections run with the torch seed set to 0 inside a forked
random state, so their numbers are reproducible.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import time
from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

import rich.console
import torch
from rich.panel import Panel

DEFAULT_OUT = pathlib.Path("posenc-out") / "tour"


@dataclass
class TourContext:
    """What every section gets.

    Attributes:
        console: where the section prints (rich markup allowed).
        out_dir: folder for the section's figures; it exists when the section runs.
        facts: every number the tour prints, under a stable dotted key (``"rope.demo.score_near"``).
    """

    console: rich.console.Console
    out_dir: pathlib.Path
    facts: dict

    def record(self, key: str, value):
        """Store ``value`` under ``key`` in :attr:`facts` and return it (keys are never reused)."""
        if not isinstance(key, str) or not key:
            raise ValueError(f"fact key must be a non-empty string, got {key!r}")
        if key in self.facts:
            raise ValueError(f"fact key {key!r} is already recorded (value {self.facts[key]!r}); "
                             "every printed number needs its own key")
        self.facts[key] = value
        return value

    def figure_path(self, name: str) -> pathlib.Path:
        """Path of the PNG figure ``name`` (without extension) inside :attr:`out_dir`."""
        if not name or "/" in name or "\\" in name:
            raise ValueError(f"figure name must be a plain file stem, got {name!r}")
        return self.out_dir / f"{name}.png"


Section = Tuple[str, Callable[[TourContext], None]]

from . import bag, configs, extension, learned_limit, mistakes, naive, rotary, waves  # noqa: E402

#: The tour, in order: (title, function).
SECTIONS: List[Section] = [
    ("1. A bag of tiles", bag.bag_of_tiles),
    ("2. Why plain seat numbers fail", naive.plain_seat_numbers),
    ("3. Sine waves: three rules, measured", waves.three_rules),
    ("4. The wave fingerprint of seats 0-3", waves.fingerprint),
    ("5. A learned table has a last row", learned_limit.learned_overflow),
    ("6. RoPE: rotate queries and keys", rotary.rope_demo),
    ("7. Three common mistakes", mistakes.common_mistakes),
    ("8. Preview: stretching RoPE to longer contexts", extension.context_extension),
    ("9. Real configs: Llama 3.1 and Phi-3.5 read from config.json", configs.real_configs),
]


def run_tour(out_dir=DEFAULT_OUT, console: Optional[rich.console.Console] = None,
             sections: Optional[List[Section]] = None) -> TourContext:
    """Run every section (or the given ones) and return the context holding the recorded facts.

    Args:
        out_dir: folder for the figures (created if missing).
        console: where to print; ``None`` prints to the terminal.
        sections: ``(title, function)`` pairs to run instead of :data:`SECTIONS`.

    Each section runs with a forked random-number state, so the tour neither depends on nor
    disturbs the caller's torch seed.
    """
    if not isinstance(out_dir, (str, os.PathLike)):
        raise TypeError(f"out_dir must be a path (str or os.PathLike), got {out_dir!r} "
                        f"({type(out_dir).__name__})")
    out = pathlib.Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir must be a folder, but {str(out)!r} exists and is a file")
    if console is not None and not isinstance(console, rich.console.Console):
        raise TypeError(f"console must be a rich.console.Console or None, got {type(console).__name__}")
    chosen = SECTIONS if sections is None else sections
    out.mkdir(parents=True, exist_ok=True)
    ctx = TourContext(console=console or rich.console.Console(), out_dir=out, facts={})
    for title, section in chosen:
        ctx.console.rule(f"[bold]{title}")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            section(ctx)
        ctx.console.print()
    return ctx


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", metavar="DIR", default=str(DEFAULT_OUT),
                        help=f"folder for the tour's figures (default: {DEFAULT_OUT})")


def run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    console = rich.console.Console()
    out = pathlib.Path(args.out)
    if out.exists() and not out.is_dir():
        console.print(f"[bold red]posenc tour:[/] --out must be a folder (existing or new), but "
                      f"{str(out)!r} is a file")
        return 2
    console.print(Panel(
        "[bold]How does a transformer know word order?[/]\n"
        "Attention reads every token at once, so position has to be put in on purpose. This tour "
        "shows why, and how each common scheme does it. Every number is computed now by posenc "
        f"itself; the figures go to [cyan]{out}[/].", title="posenc tour"))
    ctx = run_tour(out, console=console)
    figures = sorted(pathlib.Path(v).name for k, v in ctx.facts.items() if k.startswith("figure."))
    console.print(f"[bold green]Tour finished[/] in {time.perf_counter() - start:.1f} s: "
                  f"{len(ctx.facts)} facts computed live; figures in "
                  f"[cyan]{ctx.out_dir.resolve()}[/]: {', '.join(figures)}")
    return 0
