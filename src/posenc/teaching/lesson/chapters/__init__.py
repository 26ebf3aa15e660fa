"""The lesson's chapters written once: one module of pure functions per chapter.

Every chapter module has the two functions both faces read:

- ``numbers() -> dict``: every number the chapter's text states, computed live by posenc (seeded, so
  the same on every call), under the stable keys the tour records them by;
- ``prose(n: dict) -> list[Block]``: the chapter's text, each sentence written here once, with the
  numbers of ``n`` formatted into it (:class:`posenc.teaching.lesson.prose.Block`).

The tour prints :func:`blocks` in the terminal and records :func:`numbers`; the explorer fetches the
same blocks (``/api/lesson/prose/{chapter}``) and draws them into the chapter's ``data-prose`` slots
beside its interactive figures. A chapter module also holds its figure functions (what its sliders
ask for: pure functions returning the figure's data), listed in ``FIGURES`` (route name -> function,
:mod:`._figures`), with ``FIGURE_RANGES``, the range of every numeric figure parameter (:mod:`._ranges`);
:data:`FIGURES` gathers the figures (the explorer serves each at ``/api/lesson/<route>``) and
:func:`figure_ranges` the ranges (the API's limits). A module lists its knowledge checks in ``CHECKS``
(:class:`Check`, exported here for the explorer's quiz), the ones the manifest names under its chapter.

Adding a chapter: its entry in :mod:`posenc.teaching.lesson.manifest`, a module here named by the entry's id
(``bag-of-tiles`` is ``bag_of_tiles.py``; :data:`MODULES` imports it from the manifest) with ``numbers``
and ``prose``, its figure functions in ``FIGURES`` with ``FIGURE_RANGES`` (each becomes an API route,
with no code in the explorer) and ``CHECKS`` for the checks its entry names; one page script named
the same, ``posenc/teaching/explorer/static/lesson/chapters/bag_of_tiles.js``, exporting ``markup`` (its
article's figures, controls and error box, with one ``data-prose`` element per slot its blocks name)
and ``setup()`` (which defines each figure once with ``core.js``'s ``figures``: its route, controls,
drawing and text); and its tests. The tour tells it with no code of its own. Nothing else: the page
writes the article with its kicker and heading, the table of contents and the pager from the manifest
and imports the script by the module's name; ``tests/teaching/lesson/test_lesson_one_source.py`` then holds the
tour's and the page's text to the module's, and every chapter to exactly one script.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from types import ModuleType
from typing import Mapping

from ..manifest import CHAPTERS, Chapter
from ..prose import Block
from ._check import Check, Evidence
from ._figures import LAB_RUN, Choice, Figure, Parameter, ResolvedFigure, Text, Word, resolve
from ._ranges import Range


def _modules(chapters: tuple[Chapter, ...]) -> dict[str, ModuleType]:
    """Chapter id -> its module (:attr:`Chapter.module <posenc.teaching.lesson.manifest.Chapter.module>`, here),
    for each of ``chapters`` in their order.

    Raises ``ImportError`` naming the chapter and the module if a chapter's module is not written (an
    import that fails inside a written module is raised as it is).
    """
    modules: dict[str, ModuleType] = {}
    for chapter in chapters:
        name = f"{__name__}.{chapter.module}"
        try:
            modules[chapter.id] = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name != name:
                raise
            raise ImportError(
                f"chapter {chapter.id!r} of the lesson's manifest has no module: expected {name} "
                f"(the chapter's id with '_' for '-'), a module with numbers() and prose()",
                name=name,
            ) from error
    return modules


#: chapter id -> its module, for every chapter of the manifest, in reading order
MODULES: dict[str, ModuleType] = _modules(CHAPTERS)


def _module(chapter: str) -> ModuleType:
    if chapter not in MODULES:
        raise KeyError(f"chapter must be one of {[c.id for c in CHAPTERS]}, got {chapter!r}")
    return MODULES[chapter]


@lru_cache(maxsize=None)
def _numbers(chapter: str) -> dict:
    return _module(chapter).numbers()


def numbers(chapter: str) -> dict:
    """The numbers chapter ``chapter``'s text states (computed once per process; a copy)."""
    return dict(_numbers(chapter))


def blocks(chapter: str) -> list[Block]:
    """The text of chapter ``chapter``, in reading order."""
    return list(_module(chapter).prose(numbers(chapter)))


def figure_ranges() -> dict[str, Range]:
    """Every chapter's ``FIGURE_RANGES`` in one table, in the manifest's order (a parameter that two
    chapters share, such as the RoPE chapter's ``shift``, once, where it first appears).

    Raises ``ValueError`` if two chapters give one parameter name different ranges.
    """
    table: dict[str, Range] = {}
    owner: dict[str, str] = {}
    for chapter in CHAPTERS:
        for name, declared in getattr(_module(chapter.id), "FIGURE_RANGES", {}).items():
            if name in table and table[name] != declared:
                raise ValueError(
                    f"figure parameter {name!r} has two ranges: {table[name]} in chapter {owner[name]!r} and "
                    f"{declared} in chapter {chapter.id!r}"
                )
            table.setdefault(name, declared)
            owner.setdefault(name, chapter.id)
    return table


def collect_figures(modules: Mapping[str, ModuleType]) -> dict[str, ResolvedFigure]:
    """Route name -> figure, for every figure the chapter ``modules`` (chapter id -> module) declare in
    ``FIGURES``, in their order, each parameter placed against its module's ``FIGURE_RANGES``
    (:func:`._figures.resolve`). Run on every chapter when this package is imported (:data:`FIGURES`).

    Raises ``ValueError`` naming the chapter, the figure and the parameter for a parameter it cannot
    place, and naming both chapters for a route two of them declare.
    """
    table: dict[str, ResolvedFigure] = {}
    for chapter, module in modules.items():
        declared = getattr(module, "FIGURES", {})
        if not isinstance(declared, Mapping):
            raise ValueError(f"chapter {chapter!r}: FIGURES must map route names to figures, got {declared!r}")
        ranges = getattr(module, "FIGURE_RANGES", {})
        for route, figure in declared.items():
            if route in table:
                raise ValueError(
                    f"figure {route!r} is declared twice: in chapter {table[route].chapter!r} and in "
                    f"chapter {chapter!r}"
                )
            table[route] = resolve(chapter, route, figure, ranges)
    return table


#: route name -> figure, for every figure of every chapter, in reading order (the explorer serves each
#: at ``/api/lesson/<route>``)
FIGURES: dict[str, ResolvedFigure] = collect_figures(MODULES)


__all__ = [
    "FIGURES",
    "LAB_RUN",
    "MODULES",
    "Check",
    "Choice",
    "Evidence",
    "Figure",
    "Parameter",
    "Range",
    "ResolvedFigure",
    "Text",
    "Word",
    "blocks",
    "collect_figures",
    "figure_ranges",
    "numbers",
]
