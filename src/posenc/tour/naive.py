"""Section: the two obvious position codes, raw integers and 0..1 fractions, and why both fail.

The text and numbers are the lesson's chapter "Two ideas that fail"
(:mod:`posenc.lesson.chapters.bad_ideas`); this section prints them and records the numbers.
"""

from __future__ import annotations

from ..input_sizes import D_MODEL  # noqa: F401  (the scale the section uses, for its callers)
from ..lesson import chapters
from ..lesson.chapters.bad_ideas import LENGTHS, POSITIONS, fraction_positions, word_vectors  # noqa: F401
from ._show import chapter

CHAPTER = "bad-ideas"


def plain_seat_numbers(ctx) -> None:
    for key, value in chapters.numbers(CHAPTER).items():
        ctx.record(key, value)
    chapter(ctx, chapters.blocks(CHAPTER), CHAPTER)
