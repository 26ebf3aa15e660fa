"""``posenc tour``: how a transformer knows word order, with every number computed live.

The tour is a list of sections run in order. Each section is a function ``section(ctx)`` that prints
to ``ctx.console``, writes any figure into ``ctx.out_dir``, and records every number it prints in
``ctx.facts`` under a stable key, so the test suite can recompute each one independently from the
library and the mathematics and compare.

The sections come from the lesson's manifest (:mod:`posenc.teaching.lesson.manifest`): one per name in a
chapter's ``tour``, in reading order, titled by :attr:`~posenc.teaching.lesson.manifest.Chapter.section_titles`.
Every section tells its chapter (:mod:`posenc.teaching.lesson.chapters`): it records the chapter's numbers and
prints its text, which opens in everyday words (the chapter's "plain" block), with
:func:`posenc.teaching.tour.telling.tell`, so the tour and the explorer's page carry the same sentences. A
section that does only that is a :class:`posenc.teaching.tour.telling.Telling`, and needs no code here: a new
chapter is told as soon as the manifest lists it. A section that also draws a figure or prints a live
table has its own module in this package and its function in :data:`DRAWN`. Such a section records any
further numbers with ``ctx.record(key, value)`` (it refuses a key used twice) and writes figures with
:func:`posenc.teaching.tour._plot.save`, which records their paths under ``figure.<name>``. Sections draw their
random numbers from a generator of their own seeded 0, never from torch's global one, so their numbers
are reproducible.

The drawn sections: :mod:`~posenc.teaching.tour.waves` (the sinusoidal table's three rules),
:mod:`~posenc.teaching.tour.rotary` (RoPE's turn), :mod:`~posenc.teaching.tour.extension` (three
scalings' frequencies), :mod:`~posenc.teaching.tour.configs` (two real models' configs) and
:mod:`~posenc.teaching.tour.comparison` (the methods side by side). :mod:`~posenc.teaching.tour._show`
prints a chapter's blocks and tables; ``_plot`` draws the figures without pyplot.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import time
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple, Union

import rich.console
from rich.panel import Panel

from ...model import local_random
from ..lesson.manifest import CHAPTERS, Chapter

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
            raise ValueError(
                f"fact key {key!r} is already recorded (value {self.facts[key]!r}); "
                "every printed number needs its own key"
            )
        self.facts[key] = value
        return value

    def figure_path(self, name: str) -> pathlib.Path:
        """Path of the PNG figure ``name`` (without extension) inside :attr:`out_dir`."""
        if not name or "/" in name or "\\" in name:
            raise ValueError(f"figure name must be a plain file stem, got {name!r}")
        return self.out_dir / f"{name}.png"


@dataclass(frozen=True)
class Section:
    """One section of the tour.

    Attributes:
        name: short name for ``posenc tour --section NAME``.
        title: the heading printed above the section.
        run: the function that prints the section (it takes a :class:`TourContext`).
    """

    name: str
    title: str
    run: Callable[[TourContext], None]


from . import comparison, configs, extension, rotary, waves  # noqa: E402
from .telling import Telling  # noqa: E402

#: section name -> the function of a section that prints more than its chapter's text (a figure, a live
#: table); every other section of the manifest is a :class:`Telling`
DRAWN: dict[str, Callable[[TourContext], None]] = {
    "rules": waves.three_rules,
    "rope": rotary.rope_demo,
    "extension": extension.context_extension,
    "configs": configs.real_configs,
    "compare": comparison.comparison,
}


def sections_of(chapters: Sequence[Chapter], drawn: Optional[dict] = None) -> List[Section]:
    """The tour's sections for ``chapters`` (the manifest's, in their order): one per name in each
    chapter's ``tour``, titled by the chapter's ``section_titles``, run by its function in ``drawn``
    (:data:`DRAWN` when ``None``) or else told as a :class:`Telling`.

    Raises:
        ValueError: when a name of ``drawn`` is no section of ``chapters`` (a function nothing runs).
    """
    drawn = DRAWN if drawn is None else drawn
    sections = [
        Section(name, title, drawn.get(name) or Telling(name))
        for chapter in chapters
        for name, title in zip(chapter.tour, chapter.section_titles)
    ]
    unknown = sorted(set(drawn) - {s.name for s in sections})
    if unknown:
        raise ValueError(
            f"drawn sections {unknown} are listed under no chapter of the manifest; "
            f"its sections are {[s.name for s in sections]}"
        )
    return sections


#: The tour, in the lesson's order, made from the manifest. Numbers in titles are added when printed.
SECTIONS: List[Section] = sections_of(CHAPTERS)


def section_names(sections: Optional[Sequence[Section]] = None) -> List[str]:
    """The names ``--section`` accepts, in tour order."""
    return [s.name for s in (SECTIONS if sections is None else sections)]


def select_sections(choices: Sequence[str], sections: Optional[Sequence[Section]] = None) -> List[Section]:
    """The sections named by ``choices``: 1-based numbers (``"3"``) or names (``"rope"``), in the order given.

    Raises:
        ValueError: naming the choice that matches nothing, and every valid number and name.
    """
    pool = list(SECTIONS if sections is None else sections)
    chosen = []
    for choice in choices:
        text = str(choice).strip().lower()
        if text.isdigit() and 1 <= int(text) <= len(pool):
            chosen.append(pool[int(text) - 1])
            continue
        match = [s for s in pool if s.name == text]
        if not match:
            valid = ", ".join(f"{i} or {s.name}" for i, s in enumerate(pool, 1))
            raise ValueError(
                f"--section must be a section number 1-{len(pool)} or a name, got {choice!r}; valid sections: {valid}"
            )
        chosen.append(match[0])
    return chosen


def numbered(section: Section, sections: Optional[Sequence[Section]] = None) -> str:
    """``"7. RoPE: turn, don't add"``: the title with the section's place in the tour."""
    pool = list(SECTIONS if sections is None else sections)
    return f"{pool.index(section) + 1}. {section.title}" if section in pool else section.title


def run_tour(
    out_dir=DEFAULT_OUT,
    console: Optional[rich.console.Console] = None,
    sections: Optional[Sequence[Union[Section, Tuple[str, Callable]]]] = None,
) -> TourContext:
    """Run every section (or the given ones) and return the context holding the recorded facts.

    Args:
        out_dir: folder for the figures (created if missing).
        console: where to print; ``None`` prints to the terminal.
        sections: :class:`Section` objects, or ``(title, function)`` pairs, to run instead of
            :data:`SECTIONS`.

    Each section draws any random numbers it asks for without a generator from a generator of its own
    seeded 0 (:func:`posenc.model.local_random`), so the tour neither depends on nor disturbs torch's
    global random state, in this thread or any other.
    """
    if not isinstance(out_dir, (str, os.PathLike)):
        raise TypeError(f"out_dir must be a path (str or os.PathLike), got {out_dir!r} ({type(out_dir).__name__})")
    out = pathlib.Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir must be a folder, but {str(out)!r} exists and is a file")
    if console is not None and not isinstance(console, rich.console.Console):
        raise TypeError(f"console must be a rich.console.Console or None, got {type(console).__name__}")
    chosen = SECTIONS if sections is None else sections
    out.mkdir(parents=True, exist_ok=True)
    ctx = TourContext(console=console or rich.console.Console(), out_dir=out, facts={})
    for item in chosen:
        if isinstance(item, Section):
            title, function = numbered(item), item.run
        else:
            title, function = item
        ctx.console.rule(f"[bold]{title}")
        with local_random(0):
            function(ctx)
        ctx.console.print()
    return ctx


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", metavar="DIR", default=str(DEFAULT_OUT), help=f"folder for the tour's figures (default: {DEFAULT_OUT})"
    )
    parser.add_argument("--list", action="store_true", help="list the sections and exit")
    parser.add_argument(
        "--section",
        metavar="N|NAME",
        action="append",
        default=None,
        help="run only this section, by number or name (repeat for several; see --list)",
    )


def print_list(console: rich.console.Console) -> None:
    """The table of contents: number, name for --section, title."""
    console.print("[bold]posenc tour[/]: sections (run one with [cyan]posenc tour --section N[/] or by name)")
    for i, section in enumerate(SECTIONS, 1):
        console.print(f"  {i:>2}  [cyan]{section.name:<12}[/] {section.title}", highlight=False)
    console.print()
    console.print(
        "[bold]The lesson[/] ([cyan]posenc explore[/]), chapter by chapter, with the sections above that tell it:"
    )
    for i, chapter in enumerate(CHAPTERS, 1):
        told = ", ".join(chapter.tour) if chapter.tour else "in the browser only"
        console.print(f"  {i:>2}  {chapter.title} [dim]#{chapter.id}[/] [cyan]({told})[/]", highlight=False)


def run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    console = rich.console.Console()
    if args.list:
        print_list(console)
        return 0
    try:
        chosen = select_sections(args.section) if args.section else SECTIONS
    except ValueError as err:
        console.print(f"[bold red]posenc tour:[/] {err}", highlight=False)
        return 2
    out = pathlib.Path(args.out)
    if out.exists() and not out.is_dir():
        console.print(f"[bold red]posenc tour:[/] --out must be a folder (existing or new), but {str(out)!r} is a file")
        return 2
    console.print(
        Panel(
            "[bold]How does a transformer know word order?[/]\n"
            "Attention reads every token at once, so position has to be put in on purpose. This tour "
            "shows why, and how each common scheme does it. Every number is computed now by posenc "
            f"itself; the figures go to [cyan]{out}[/].",
            title="posenc tour",
        )
    )
    ctx = run_tour(out, console=console, sections=chosen)
    figures = sorted(pathlib.Path(v).name for k, v in ctx.facts.items() if k.startswith("figure."))
    console.print(
        f"[bold green]Tour finished[/] in {time.perf_counter() - start:.1f} s: "
        f"{len(ctx.facts)} facts computed live; figures in "
        f"[cyan]{ctx.out_dir.resolve()}[/]: {', '.join(figures)}"
    )
    return 0
