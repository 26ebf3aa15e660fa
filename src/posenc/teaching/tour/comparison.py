"""Section: the methods side by side, and what each does with a length past training.

The text and numbers are the lesson's chapter "The methods side by side"
(:mod:`posenc.teaching.lesson.chapters.comparison`); this section prints them, records the numbers, and prints
the table's live column at each length of its "try this": whether each scheme places the tokens without
an error, and whether a model trained on that many tokens met them all, in one short status per cell
(the page's sentence for each cell names what was not met, at the length its slider is set to; here a
cell never wider than a terminal's column, and no number the page does not print).
"""

from __future__ import annotations

from rich.text import Text

from ..lesson.chapters.comparison import LENGTHS, SCHEMES, compare
from ._show import table
from .telling import tell

CHAPTER = "comparison"
#: the live column's status -> what a cell prints and its style in the terminal (the page's pass, warn and
#: fail shades)
STATUS = {
    "trained": ("✓ within training", "green"),
    "untrained": ("⚠ placed, past training", "bold"),
    "refused": ("✗ refused", "bold red"),
}


def comparison(ctx) -> None:
    n = tell(ctx, CHAPTER)
    rows = {length: {r["scheme"]: r for r in compare(length)["schemes"]} for length in LENGTHS}
    t = table(
        "scheme",
        *(f"{length} tokens" for length in LENGTHS),
        title=f"Built for {n['compare.trained']} tokens: placed without an error, and within training?",
    )
    for scheme in SCHEMES:
        t.add_row(
            scheme,
            *(Text(*STATUS[rows[length][scheme]["status"]]) for length in LENGTHS),
        )
    ctx.console.print(t)
