"""Section: a learned position table ends at its last row; a sinusoidal one never ends.

The text and numbers are the lesson's chapter "Learned tables and the 512 wall"
(:mod:`posenc.lesson.chapters.learned_tables`); this section prints them and records the numbers.
"""

from __future__ import annotations

from ..lesson import chapters
from ..lesson.chapters.learned_tables import D_MODEL, EXTENDED, ROWS, interpolation_source  # noqa: F401
from ._show import chapter

CHAPTER = "learned-tables"


def learned_overflow(ctx) -> None:
    for key, value in chapters.numbers(CHAPTER).items():
        ctx.record(key, value)
    chapter(ctx, chapters.blocks(CHAPTER), CHAPTER)
