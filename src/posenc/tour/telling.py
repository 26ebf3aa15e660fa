"""The tour's one way of telling a chapter of the lesson in the terminal.

Every section prints a chapter written in :mod:`posenc.lesson.chapters`: it records the chapter's
numbers in ``ctx.facts`` and prints its blocks with :func:`posenc.tour._show.chapter`, so the tour and
the explorer's page carry the same sentences. Most sections do only that; they are :class:`Telling`
sections, built from their name alone: the manifest (:mod:`posenc.lesson.manifest`) says which chapter
a section tells, and :data:`OPENINGS` holds the opening line of those whose chapter does not open in
everyday words itself. A section that prints more (a figure, a live table) keeps its own module and
calls :func:`tell` first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from ..lesson import chapters
from ..lesson.manifest import chapter_of_section
from ._show import chapter, plain

#: section name -> its opening, in everyday words, for the sections whose chapter's text does not
#: start with a "plain" block (the chapter's own text follows it)
OPENINGS: dict[str, str] = {
    "input": "Each word walks in carrying a list of numbers for what it means, and its seat adds a second list on top.",
    "alibi": "A word pays a small fine for every seat it sits away from the word that is reading, so far words "
    "count less.",
    "compare": "Five ways of telling a model where each word sits, asked the same question: can you read a "
    "longer text?",
    "demo": "The whole story in a few lines of code: two words two seats apart get the same match wherever they sit.",
    "checks": "A computer keeps only so many digits, so a very large seat number times a small turn loses its "
    "fine detail.",
}


def tell(ctx, chapter_id: str, opening: Optional[str] = None, only: Optional[Callable[[str], bool]] = None) -> dict:
    """Record chapter ``chapter_id``'s numbers, print ``opening`` (if any), then the chapter's blocks.

    Args:
        ctx: the :class:`posenc.tour.TourContext` to record in and print to.
        chapter_id: a chapter of :mod:`posenc.lesson.chapters` (its manifest id).
        opening: the section's first line, in everyday words, printed before the chapter's text.
        only: for a section that tells part of a chapter: keeps the numbers whose key and the blocks
            whose slot it accepts (``None`` keeps all).

    Returns:
        the numbers recorded, by key.
    """
    if chapter_id not in chapters.MODULES:
        raise ValueError(
            f"chapter_id must be a chapter written in posenc.lesson.chapters, got {chapter_id!r}; "
            f"written: {', '.join(chapters.MODULES)}"
        )
    numbers = {k: v for k, v in chapters.numbers(chapter_id).items() if only is None or only(k)}
    for key, value in numbers.items():
        ctx.record(key, value)
    if opening is not None:
        plain(ctx, opening)
    chapter(ctx, [b for b in chapters.blocks(chapter_id) if only is None or only(b.slot)], chapter_id)
    return numbers


@dataclass(frozen=True)
class Telling:
    """A section that only tells its chapter: ``Telling("alibi")(ctx)`` prints the ALiBi chapter.

    Attributes:
        section: the section's name (``posenc tour --section NAME``); the manifest lists it under
            the chapter it tells, and :data:`OPENINGS` may give its opening line.
        chapter: the id of that chapter (looked up in the manifest).
    """

    section: str
    chapter: str = field(init=False)

    def __post_init__(self):
        told = chapter_of_section(self.section)
        if told is None:
            raise ValueError(
                f"section {self.section!r} is listed under no chapter of posenc.lesson.manifest; "
                "add it to its chapter's tour names"
            )
        object.__setattr__(self, "chapter", told.id)

    def __call__(self, ctx) -> None:
        tell(ctx, self.chapter, OPENINGS.get(self.section))
