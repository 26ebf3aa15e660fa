"""Section: three common mistakes with position encodings, each run to show what it breaks.

The text and numbers are the lesson's chapter "Common mistakes"
(:mod:`posenc.lesson.chapters.common_mistakes`); this section prints them and records the numbers.
"""

from __future__ import annotations

from ..lesson import chapters
from ..lesson.chapters.common_mistakes import D_MODEL, ROWS, SHIFT, WIDE, parameter_count  # noqa: F401
from ..lesson.mistakes import SinusoidalAsParameter, values_rotated  # noqa: F401
from ._show import chapter

CHAPTER = "common-mistakes"

__all__ = ["SinusoidalAsParameter", "common_mistakes", "parameter_count", "values_rotated"]


def common_mistakes(ctx) -> None:
    for key, value in chapters.numbers(CHAPTER).items():
        ctx.record(key, value)
    chapter(ctx, chapters.blocks(CHAPTER), CHAPTER)
