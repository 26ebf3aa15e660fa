"""Section: without position information, attention sees a bag of tiles.

The text and numbers are the lesson's chapter "A bag of tiles"
(:mod:`posenc.lesson.chapters.bag_of_tiles`); this section prints them and records the numbers.
"""

from __future__ import annotations

from ..lesson import chapters
from ..lesson.chapters.bag_of_tiles import (  # noqa: F401  (the chapter's helpers, for callers of the tour)
    NOPE_TOLERANCE,
    SCHEME_MARGIN,
    SENTENCE_A,
    SENTENCE_B,
    VOCAB,
    WHERE,
    hidden,
    permutation,
    tiny_model,
    token_ids,
)
from ._show import chapter

CHAPTER = "bag-of-tiles"


def bag_of_tiles(ctx) -> None:
    numbers = chapters.numbers(CHAPTER)
    for key, value in numbers.items():
        ctx.record(key, value)
    chapter(ctx, chapters.blocks(CHAPTER), CHAPTER)
