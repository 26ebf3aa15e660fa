"""The tour's one way of telling a chapter of the lesson in the terminal.

Every section prints a chapter written in :mod:`posenc.teaching.lesson.chapters`: it records the chapter's
numbers in ``ctx.facts`` and prints its blocks with :func:`posenc.teaching.tour._show.chapter`, so the tour and
the explorer's page carry the same sentences. Most sections do only that; they are :class:`Telling`
sections, built from their name alone: the manifest (:mod:`posenc.teaching.lesson.manifest`) says which chapter
a section tells, and the chapter's text opens in everyday words itself (its "plain" block, which the
page shows too). A section that prints more (a figure, a live table) keeps its own module and calls
:func:`tell` first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from ..lesson import chapters
from ..lesson.manifest import chapter_of_section
from ._show import chapter


def tell(ctx, chapter_id: str, only: Optional[Callable[[str], bool]] = None) -> dict:
    """Record chapter ``chapter_id``'s numbers, then print the chapter's blocks.

    Args:
        ctx: the :class:`posenc.teaching.tour.TourContext` to record in and print to.
        chapter_id: a chapter of :mod:`posenc.teaching.lesson.chapters` (its manifest id).
        only: for a section that tells part of a chapter: keeps the numbers whose key and the blocks
            whose slot it accepts (``None`` keeps all).

    Returns:
        the numbers recorded, by key.
    """
    if chapter_id not in chapters.MODULES:
        raise ValueError(
            f"chapter_id must be a chapter written in posenc.teaching.lesson.chapters, got {chapter_id!r}; "
            f"written: {', '.join(chapters.MODULES)}"
        )
    numbers = {k: v for k, v in chapters.numbers(chapter_id).items() if only is None or only(k)}
    for key, value in numbers.items():
        ctx.record(key, value)
    chapter(ctx, [b for b in chapters.blocks(chapter_id) if only is None or only(b.slot)], chapter_id)
    return numbers


@dataclass(frozen=True)
class Telling:
    """A section that only tells its chapter: ``Telling("alibi")(ctx)`` prints the ALiBi chapter.

    Attributes:
        section: the section's name (``posenc tour --section NAME``); the manifest lists it under
            the chapter it tells.
        chapter: the id of that chapter (looked up in the manifest).
    """

    section: str
    chapter: str = field(init=False)

    def __post_init__(self):
        told = chapter_of_section(self.section)
        if told is None:
            raise ValueError(
                f"section {self.section!r} is listed under no chapter of posenc.teaching.lesson.manifest; "
                "add it to its chapter's tour names"
            )
        object.__setattr__(self, "chapter", told.id)

    def __call__(self, ctx) -> None:
        tell(ctx, self.chapter)
