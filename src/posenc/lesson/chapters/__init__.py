"""The lesson's chapters written once: one module of pure functions per chapter.

Every chapter module has the two functions both faces read:

- ``numbers() -> dict``: every number the chapter's text states, computed live by posenc (seeded, so
  the same on every call), under the stable keys the tour records them by;
- ``prose(n: dict) -> list[Block]``: the chapter's text, each sentence written here once, with the
  numbers of ``n`` formatted into it (:class:`posenc.lesson.prose.Block`).

The tour prints :func:`blocks` in the terminal and records :func:`numbers`; the explorer fetches the
same blocks (``/api/lesson/prose/{chapter}``) and draws them into the chapter's ``data-prose`` slots
beside its interactive figures. A chapter module also holds its figure functions (what its sliders
ask for: pure functions returning the figure's data) with ``FIGURE_RANGES``, the range of every numeric
figure parameter (:mod:`._ranges`); :func:`figure_ranges` gathers them, and the explorer's API publishes
them as its limits. A module lists its knowledge checks in ``CHECKS`` (:mod:`._check`), the ones the
manifest names under its chapter.

Adding a chapter: its entry in :mod:`posenc.lesson.manifest`, a module here named by the entry's id
(``bag-of-tiles`` is ``bag_of_tiles.py``; :data:`MODULES` imports it from the manifest) with ``numbers``
and ``prose``, its figure functions with ``FIGURE_RANGES`` and ``CHECKS`` for the checks its entry
names, an API route per figure, its article on the page with one ``data-prose`` element per slot its
blocks name and a JS module for its figures, and its tests; ``tests/test_lesson_one_source.py`` then
holds the tour's and the page's text to the module's.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from types import ModuleType

from ..manifest import CHAPTERS, Chapter
from ..prose import Block
from ._ranges import Range


def _modules(chapters: tuple[Chapter, ...]) -> dict[str, ModuleType]:
    """Chapter id -> its module (:attr:`Chapter.module <posenc.lesson.manifest.Chapter.module>`, here),
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


__all__ = ["MODULES", "blocks", "figure_ranges", "numbers"]
