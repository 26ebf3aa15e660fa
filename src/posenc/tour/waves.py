"""Sections: the sinusoidal table's three rules, measured; and the lesson's wave fingerprint.

The three rules' text and numbers are the lesson's chapter "The three rules"
(:mod:`posenc.lesson.chapters.three_rules`); the section prints them, records the numbers and draws
the table's figure.
"""

from __future__ import annotations

import math

import torch

from ..lesson import chapters
from ..lesson.chapters.three_rules import (  # noqa: F401  (the chapter's helpers, for callers of the tour)
    D_MODEL,
    FAST_ONLY_LENGTH,
    HEATMAP_SEATS,
    LENGTH,
    OFFSETS,
    min_pairwise_distance,
    offset_map,
)
from ..sinusoidal import sinusoidal_frequencies, sinusoidal_table
from ._plot import new_figure, save
from ._show import chapter, plain, prose, signed, table, verdict

#: The lesson's wave fingerprint: seat -> (fast, medium, slow), to two decimals.
LESSON_FINGERPRINT = {0: (0.00, 1.00, 0.00), 1: (0.84, 0.54, 0.01), 2: (0.91, -0.42, 0.02), 3: (0.14, -0.99, 0.03)}
LESSON_WORDS = ("The", "dog", "bit", "man")
RULES_CHAPTER = "three-rules"


def three_rules(ctx) -> None:
    for key, value in chapters.numbers(RULES_CHAPTER).items():
        ctx.record(key, value)
    chapter(ctx, chapters.blocks(RULES_CHAPTER), RULES_CHAPTER)
    _heatmap(ctx)


def _heatmap(ctx, seats: int = HEATMAP_SEATS) -> None:
    pe = sinusoidal_table(seats, D_MODEL).numpy()  # (seats, D_MODEL)
    fig = new_figure(11, 4.6)
    left, right = fig.subplots(1, 2, width_ratios=(1.35, 1))
    image = left.imshow(pe, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    left.set_xlabel("dimension (even: sin, odd: cos)")
    left.set_ylabel("position (seat)")
    left.set_title(f"Sinusoidal table, d_model={D_MODEL}, base 10000")
    for col, label, color in ((0, "fast", "black"), (D_MODEL - 2, "slow", "darkgreen")):
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
    for pair, style in ((0, "-"), (24, "-."), (D_MODEL // 2 - 1, "--")):
        wavelength = 2 * math.pi / freqs[pair]
        right.plot(
            pe[:, 2 * pair], style, linewidth=1.2, label=f"column {2 * pair}: wavelength {wavelength:,.0f} seats"
        )
    right.set_xlabel("position (seat)")
    right.set_ylabel("value")
    right.set_ylim(-1.1, 1.1)
    right.set_title("Three sine columns: fast, medium, slow")
    right.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    save(ctx, fig, "sinusoidal_heatmap")


def fingerprint(ctx) -> None:
    plain(
        ctx,
        """Reading the waves at seats 0 to 3 gives each seat its own short list of numbers, a
    fingerprint that no other seat shares.""",
    )
    pe = sinusoidal_table(4, 4, dtype=torch.float64)  # (4 seats, 4 columns)
    prose(
        ctx,
        """The lesson shows a "wave fingerprint" for seats 0-3 with a fast, a medium and a
    slow wave. Those numbers are the first three columns of the sinusoidal table with d_model = 4
    (built here with [cyan]posenc.sinusoidal_table(4, 4)[/]). Column 0 is sin(pos), column 1 cos(pos),
    column 2 sin(pos/100) and column 3 cos(pos/100):""",
    )
    t = table("seat", "col 0", "col 1", "col 2", "col 3", "lesson (fast medium slow)", "same?")
    for seat in range(4):
        values = pe[seat].tolist()
        for col, name in enumerate(("fast", "medium", "slow", "col3")):
            ctx.record(f"fingerprint.{name}.{seat}", values[col])
        lesson = LESSON_FINGERPRINT[seat]
        same = all(round(values[c], 2) == lesson[c] for c in range(3))
        t.add_row(
            f"{seat} {LESSON_WORDS[seat]}",
            *(signed(v) for v in values),
            " ".join(signed(v) for v in lesson),
            verdict(same, "yes", "no"),
        )
    ctx.console.print(t)
    period = ctx.record("fingerprint.slow_divisor", float(1 / sinusoidal_frequencies(4)[1]))
    slow_step = ctx.record("fingerprint.slow_step", float(pe[3, 2] - pe[0, 2]) / 3)  # mean rise, seats 0-3
    paper = sinusoidal_frequencies(512)  # (256,) one per pair
    spread = ctx.record("fingerprint.speed_ratio_512", float(1 / paper[-1]))
    between = ctx.record("fingerprint.pairs_between_512", len(paper) - 2)
    prose(
        ctx,
        f"""Two honest remarks. The "medium" wave is not a slower wave: it is column 1, the
    cosine partner of the fast sine, turning at exactly the same speed (it just starts at 1 instead
    of 0). With d_model = 4 there are only two speeds, 1 and 1/{period:.0f} (10000^(2/4) =
    {period:.0f}), so the "slow" wave is column 2, sin(pos/{period:.0f}), whose values grow by
    about {slow_step:.2f} per seat. In the paper's model (d_model = 512) the slowest pair turns
    {spread:,.0f} times more slowly than the fastest, and the {between} pairs in between fill in the
    speeds.""",
    )
