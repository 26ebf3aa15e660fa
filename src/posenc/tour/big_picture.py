"""Section: the key points of the tour, each with one number measured again now, and the big picture.

The text and numbers are the lesson's chapter "Key points and the big picture"
(:mod:`posenc.lesson.chapters.big_picture`), which recomputes its own evidence, so
``posenc tour --section big-picture`` stands on its own.
"""

from __future__ import annotations

from ..lesson import chapters
from ..lesson.chapters.big_picture import BOUND_SEATS, LEARNED_ROWS  # noqa: F401
from ._show import chapter

CHAPTER = "big-picture"


def big_picture(ctx) -> None:
    for key, value in chapters.numbers(CHAPTER).items():
        ctx.record(key, value)
    chapter(ctx, chapters.blocks(CHAPTER), CHAPTER)
