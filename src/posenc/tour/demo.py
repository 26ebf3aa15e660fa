"""Section: the PyTorch demo's numbers: one query-key pair scored with RoPE, then moved along.

The text and numbers are the lesson's chapter "The PyTorch demo"
(:mod:`posenc.lesson.chapters.pytorch_demo`); this section prints them and records the numbers. (The
demo's code and its printed output are the browser's figure.)
"""

from __future__ import annotations

from ..lesson import chapters
from ._show import chapter, plain

CHAPTER = "pytorch-demo"
#: the section's opening, in everyday words (the chapter's own text follows it)
OPENING = "The whole story in a few lines of code: two words two seats apart get the same match wherever they sit."


def pytorch_demo(ctx) -> None:
    for key, value in chapters.numbers(CHAPTER).items():
        ctx.record(key, value)
    plain(ctx, OPENING)
    chapter(ctx, chapters.blocks(CHAPTER), CHAPTER)
