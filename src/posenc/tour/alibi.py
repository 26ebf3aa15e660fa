"""Section: ALiBi subtracts slope x distance from every attention score, one slope per head.

The text and numbers are the lesson's chapter "ALiBi: a penalty for distance"
(:mod:`posenc.lesson.chapters.alibi_penalty`); this section prints them and records the numbers.
"""

from __future__ import annotations

from ..lesson import chapters
from ._show import chapter, plain

CHAPTER = "alibi-penalty"
#: the section's opening, in everyday words (the chapter's own text follows it)
OPENING = "A word pays a small fine for every seat it sits away from the word that is reading, so far words count less."


def alibi_penalty(ctx) -> None:
    for key, value in chapters.numbers(CHAPTER).items():
        ctx.record(key, value)
    plain(ctx, OPENING)
    chapter(ctx, chapters.blocks(CHAPTER), CHAPTER)
