"""Section: the methods side by side, and which of them stops at a length past training.

The text and numbers are the lesson's chapter "The methods side by side"
(:mod:`posenc.lesson.chapters.comparison`); this section prints them, records the numbers, and prints
the table's live columns: which scheme places each length.
"""

from __future__ import annotations

from ..lesson.chapters.comparison import LENGTHS, SCHEMES
from ._show import table, verdict
from .telling import tell

CHAPTER = "comparison"


def comparison(ctx) -> None:
    n = tell(ctx, CHAPTER)
    t = table(
        "scheme",
        *(f"{length} tokens" for length in LENGTHS),
        title=f"Built for {n['compare.trained']} tokens: does each scheme place a longer text?",
    )
    for scheme in SCHEMES:
        t.add_row(scheme, *(verdict(scheme in n[f"compare.reads.{length}"], "reads", "stops") for length in LENGTHS))
    ctx.console.print(t)
