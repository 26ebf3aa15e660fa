"""Section: the position vector is added to the word vector, and which is longer depends on the scale.

The text and numbers are the lesson's chapter "Word + position = input"
(:mod:`posenc.lesson.chapters.word_plus_position`); this section prints them and records the numbers.
"""

from __future__ import annotations

from ..lesson import chapters
from ._show import chapter, plain

CHAPTER = "word-plus-position"
#: the section's opening, in everyday words (the chapter's own text follows it)
OPENING = "Each word walks in carrying a list of numbers for what it means, and its seat adds a second list on top."


def word_plus_position(ctx) -> None:
    for key, value in chapters.numbers(CHAPTER).items():
        ctx.record(key, value)
    plain(ctx, OPENING)
    chapter(ctx, chapters.blocks(CHAPTER), CHAPTER)
