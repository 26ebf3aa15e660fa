"""Section: the knowledge checks' page, and its one more check, on float precision.

The text and numbers are the lesson's chapter "Check yourself"
(:mod:`posenc.lesson.chapters.knowledge_checks`); this section prints them and records the numbers.
"""

from __future__ import annotations

from ..lesson import chapters
from ._show import chapter, plain

CHAPTER = "knowledge-checks"
#: the section's opening, in everyday words (the chapter's own text follows it)
OPENING = "A computer keeps only so many digits, so a very large seat number times a small turn loses its fine detail."


def knowledge_checks(ctx) -> None:
    for key, value in chapters.numbers(CHAPTER).items():
        ctx.record(key, value)
    plain(ctx, OPENING)
    chapter(ctx, chapters.blocks(CHAPTER), CHAPTER)
