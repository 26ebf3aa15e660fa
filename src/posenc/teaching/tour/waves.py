"""Section: the sinusoidal table's three rules, measured, and the table's figure.

The text and numbers are the lesson's chapter "The three rules"
(:mod:`posenc.teaching.lesson.chapters.three_rules`); the section tells it and draws the table's figure.
"""

from __future__ import annotations

import math

from ...sinusoidal import sinusoidal_frequencies, sinusoidal_table
from ..lesson.chapters.three_rules import (  # noqa: F401  (the chapter's helpers, for callers of the tour)
    D_MODEL,
    FAST_ONLY_LENGTH,
    HEATMAP_SEATS,
    LENGTH,
    OFFSETS,
    min_pairwise_distance,
    offset_map,
)
from ._plot import new_figure, save, sign_colormap
from .telling import tell

CHAPTER = "three-rules"


def three_rules(ctx) -> None:
    tell(ctx, CHAPTER)
    _heatmap(ctx)


def _heatmap(ctx, seats: int = HEATMAP_SEATS) -> None:
    pe = sinusoidal_table(seats, D_MODEL).numpy()  # (seats, D_MODEL)
    fig = new_figure(11, 4.6)
    left, right = fig.subplots(1, 2, width_ratios=(1.35, 1))
    image = left.imshow(pe, aspect="auto", cmap=sign_colormap(), vmin=-1, vmax=1, interpolation="nearest")
    left.set_xlabel("dimension (even: sin, odd: cos)")
    left.set_ylabel("position (seat)")
    left.set_title(f"Sinusoidal table, d_model={D_MODEL}, base 10000")
    # marks and sine columns in greys: a hue on these figures means a scheme or a scaling, as on the page
    for col, label, color in ((0, "fast", "0.15"), (D_MODEL - 2, "slow", "0.4")):
        left.axvline(col, color=color, linewidth=1.2, linestyle="--")
        left.text(
            col + (3 if col == 0 else -3),
            seats * 0.5,
            f"{label} wave\n(column {col})",
            ha="left" if col == 0 else "right",
            va="center",
            fontsize=9,
            color=color,
            bbox=dict(boxstyle="round", facecolor="white", alpha=0.85),
        )
    fig.colorbar(image, ax=left, shrink=0.85)
    freqs = sinusoidal_frequencies(D_MODEL).tolist()
    for pair, style, grey in ((0, "-", "0.1"), (24, "-.", "0.35"), (D_MODEL // 2 - 1, "--", "0.55")):
        wavelength = 2 * math.pi / freqs[pair]
        right.plot(
            pe[:, 2 * pair],
            style,
            color=grey,
            linewidth=1.2,
            label=f"column {2 * pair}: wavelength {wavelength:,.0f} seats",
        )
    right.set_xlabel("position (seat)")
    right.set_ylabel("value")
    right.set_ylim(-1.1, 1.1)
    right.set_title("Three sine columns: fast, medium, slow")
    right.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    save(ctx, fig, "sinusoidal_heatmap")
