"""Chapter "Sine waves as clock hands": the sinusoidal code as a set of hands turning at different
speeds, and the four-seat wave fingerprint."""

from __future__ import annotations

import math
from typing import Dict, Tuple

import torch

from ....sinusoidal import sinusoidal_frequencies, sinusoidal_table
from ..formats import signed
from ..prose import Block, see_also
from ..vectors import TWO_PI
from ._check import Check, Evidence
from ._figures import Figure
from ._ranges import Range, checked

#: The wave fingerprint explanations of the sine code often show: seat -> (fast, medium, slow), to two decimals.
LESSON_FINGERPRINT = {0: (0.00, 1.00, 0.00), 1: (0.84, 0.54, 0.01), 2: (0.91, -0.42, 0.02), 3: (0.14, -0.99, 0.03)}
LESSON_WORDS = ("The", "dog", "bit", "man")


def numbers() -> dict:
    """The four-seat table of width 4 beside the usual fingerprint, and the speeds of a wide table."""
    n: dict = {}
    pe = sinusoidal_table(4, 4, dtype=torch.float64)  # (4 seats, 4 columns)
    for seat in range(4):
        values = pe[seat].tolist()
        for col, name in enumerate(("fast", "medium", "slow", "col3")):
            n[f"fingerprint.{name}.{seat}"] = values[col]
        lesson = LESSON_FINGERPRINT[seat]
        n[f"fingerprint.same.{seat}"] = all(round(values[c], 2) == lesson[c] for c in range(3))
    n["fingerprint.slow_divisor"] = float(1 / sinusoidal_frequencies(4)[1])
    n["fingerprint.slow_step"] = float(pe[3, 2] - pe[0, 2]) / 3  # mean rise, seats 0-3
    paper = sinusoidal_frequencies(512)  # (256,) one per pair
    n["fingerprint.speed_ratio_512"] = float(1 / paper[-1])
    n["fingerprint.pairs_between_512"] = len(paper) - 2
    return n


def prose(n: dict) -> list[Block]:
    """The chapter's text with the numbers of :func:`numbers`."""
    rows: list[tuple[str, ...]] = [
        ("seat", "col 0", "col 1", "col 2", "col 3", "the usual fingerprint (fast medium slow)", "same?")
    ]
    for seat in range(4):
        values = [n[f"fingerprint.{name}.{seat}"] for name in ("fast", "medium", "slow", "col3")]
        rows.append(
            (
                f"{seat} {LESSON_WORDS[seat]}",
                *(signed(v) for v in values),
                " ".join(signed(v) for v in LESSON_FINGERPRINT[seat]),
                "yes" if n[f"fingerprint.same.{seat}"] else "no",
            )
        )
    period = n["fingerprint.slow_divisor"]
    return [
        Block(
            "plain",
            """Reading the waves at seats 0 to 3 gives each seat its own short list of numbers, a fingerprint
            that no other seat shares.""",
            "intro",
        ),
        Block(
            "p",
            """The 2017 Transformer (*Attention Is All You Need*) meets all three rules with a clock. A clock
            tells time with hands that turn at different speeds: the second hand changes every tick, the hour
            hand only over long stretches. The sinusoidal code gives each seat a set of hands, one per pair of
            numbers, and writes down where each hand points:""",
            "intro",
        ),
        Block("formula", "PE(pos, 2i) = sin(pos / 10000^(2i/d))", "intro"),
        Block("formula", "PE(pos, 2i+1) = cos(pos / 10000^(2i/d))", "intro"),
        Block(
            "p",
            """Pair i is a hand turning pos / 10000^(2i/d) radians: the first pair turns a full radian per seat
            (the second hand, telling neighbours apart), the last ones barely move (the hour hand, telling which
            paragraph a word is in). Sines and cosines never leave [−1, 1], at any seat.""",
            "intro",
        ),
        Block(
            "caption",
            """Three hands of the chosen seat, each drawn counter-clockwise from 3 o'clock by seat × frequency; the
            hand's tip is the pair's (cos, sin). Below, the sine wave of each hand over seats 0 to 64: the dots
            are the table's values at whole seats, the line the wave between them.""",
            "clock-caption",
        ),
        Block("h3", "The whole table", "table"),
        Block(
            "p",
            """Stack the codes of seats 0 to 64 as rows and you get the table the model adds to its words. Each
            column is one number of the code; the columns come in (sin, cos) pairs, fast on the left, slow on the
            right.""",
            "table",
        ),
        Block(
            "caption",
            """posenc's `sinusoidal_table` for seats 0 to 64 at the chosen width, one row per seat and one column
            per number, in the page's sign colours; the line marks the chosen seat.""",
            "heat-caption",
        ),
        Block(
            "try",
            """read the heatmap column by column. The leftmost columns change colour almost from one seat to the
            next (the fast hands); the rightmost keep one colour over all 65 seats (the slow hands). No two rows
            are the same pattern: rule 3, seen whole.""",
            "table-after",
        ),
        Block("h3", "The wave fingerprint of seats 0 to 3", "fingerprint"),
        Block(
            "p",
            """Explanations of the sine code often show a "wave fingerprint" for seats 0–3 of “The dog bit man”
            with a fast, a medium and a slow wave. Those numbers are the first three columns of the sinusoidal
            table with d_model = 4 (built here with `posenc.sinusoidal_table(4, 4)`): a table four numbers wide has two
            hands, one turning a radian per seat, one turning a hundredth of that. Column 0 is sin(pos),
            column 1 cos(pos), column 2 sin(pos/100) and column 3 cos(pos/100):""",
            "fingerprint",
        ),
        Block("table", "The sinusoidal table of width 4, seats 0 to 3", "fingerprint", rows=tuple(rows)),
        Block(
            "note",
            f"""Two honest remarks. The "medium" wave is *not* a slower wave: it is column 1, the cosine partner
            of the fast sine, turning at exactly the same speed (it just starts at 1 instead of 0): the same
            hand read on the other axis. A true medium hand needs a wider table, like the middle dial of the clock
            figure.
            With d_model = 4 there are only two speeds, 1 and 1/{period:.0f} (10000^(2/4) = {period:.0f}), so
            the "slow" wave is column 2, sin(pos/{period:.0f}), whose values grow by about
            {n["fingerprint.slow_step"]:.2f} per seat. In the paper's model (d_model = 512) the slowest pair
            turns {n["fingerprint.speed_ratio_512"]:,.0f} times more slowly than the fastest, and the
            {n["fingerprint.pairs_between_512"]} pairs in between fill in the speeds.""",
            "fingerprint",
        ),
        Block(
            "try",
            """step the seat one at a time: the fast hand jumps about 57° (one radian), the slow one creeps. Go
            to seat 64 and compare how far each hand has come.""",
            "fingerprint",
        ),
        see_also("Workbench: the [fingerprint view](#fingerprint), every cell of the table with its formula."),
    ]


# -- the figure: the hands of one seat and the waves they come from --
#: parameter -> (minimum, maximum, default, help) of the figure (the explorer's API publishes it)
FIGURE_RANGES: Dict[str, Range] = {
    "wave_seat": (0, 10_000, 3, "the seat whose clock hands are drawn"),
    "wave_d_model": (4, 256, 64, "width of the sinusoidal position vectors (even)"),
}


def wave_hand(seat: int, pair: int, d_model: int, base: float = 10000.0) -> dict:
    """Hand ``pair`` of the sinusoidal code of ``seat``: its frequency, wavelength and angle
    ``seat x frequency`` (float64, and reduced by whole turns into (-2 pi, 2 pi)), and the two table
    columns it writes, ``sin`` in column ``2 pair`` and ``cos`` in ``2 pair + 1`` (``None`` past an odd
    ``d_model``'s last column), read from posenc's own table (float32, as the module stores it).

    The clock-hands figure and the explorer's workbench (its table cell) both read a hand here.
    """
    row = sinusoidal_table(1, d_model, base, start=seat)[0]  # (d,)
    freq = float(sinusoidal_frequencies(d_model, base)[pair])
    angle = seat * freq
    return {
        "frequency": freq,
        "wavelength": TWO_PI / freq,
        "angle": angle,
        "angle_reduced": math.fmod(angle, TWO_PI),
        "sin": float(row[2 * pair]),
        "cos": float(row[2 * pair + 1]) if 2 * pair + 1 < d_model else None,
    }


def clock_hands(seat: int, d_model: int) -> dict:
    """The fast, medium and slow hands of ``seat`` and the waves they come from (the four-seat
    fingerprint is the chapter's text, :mod:`posenc.teaching.lesson.chapters.clock_hands`).

    Hands: pair 0 (fastest, one radian per seat), pair d/8 (middle) and the last pair (slowest);
    each hand's angle is seat x frequency, its tip (cos, sin) is the pair's two table columns.
    """
    checked(FIGURE_RANGES, "wave_seat", seat)
    checked(FIGURE_RANGES, "wave_d_model", d_model, argument="d_model", even=True)
    pairs = {"fast": 0, "medium": max(1, d_model // 8), "slow": d_model // 2 - 1}
    positions = torch.arange(0, 65)
    table = sinusoidal_table(65, d_model)  # (65, d)
    hands: list[dict] = []
    for speed, pair in pairs.items():
        hand = wave_hand(seat, pair, d_model)
        hands.append(
            {
                "speed": speed,
                "pair": pair,
                "columns": [2 * pair, 2 * pair + 1],
                "frequency": hand["frequency"],
                "wavelength": hand["wavelength"],
                "angle": hand["angle"],
                "angle_deg_mod_360": math.degrees(hand["angle_reduced"]),
                "sin": hand["sin"],
                "cos": hand["cos"],
                "wave": table[:, 2 * pair].tolist(),
            }
        )
    # the continuous waves the table samples: sin(x * frequency) between the seats, 8 points per seat
    between = torch.arange(0, 64 * 8 + 1, dtype=torch.float64) / 8  # (513,)
    for hand in hands:
        hand["curve"] = torch.sin(between * float(hand["frequency"])).tolist()
    return {
        "seat": seat,
        "d_model": d_model,
        "hands": hands,
        "positions": positions.tolist(),
        "curve_positions": between.tolist(),
        "table": table.tolist(),  # (65, d): the whole code of seats 0 to 64, for the heatmap
    }


#: route -> figure function (the explorer serves it at /api/lesson/<route>)
FIGURES = {"clock": Figure(clock_hands, seat="wave_seat", d_model="wave_d_model")}


# -- the knowledge checks the manifest lists under this chapter (the quiz collects them) --
def _fast_columns() -> Evidence:
    from ....sinusoidal import sinusoidal_table

    d_model = 64
    table = sinusoidal_table(6, d_model)
    change = (table[5] - table[4]).abs()  # (d,)
    return (
        [
            f"|PE[5] - PE[4]| in the first two columns (fastest wave): {float(change[0]):.4f}, {float(change[1]):.4f}.",
            f"In the last two columns (slowest wave): {float(change[-2]):.2e}, {float(change[-1]):.2e}.",
        ],
        {"first": change[:2].tolist(), "last": change[-2:].tolist()},
    )


CHECKS: Tuple[Check, ...] = (
    Check(
        "fast-columns",
        "sinusoidal",
        "Seats 4 and 5 are neighbours. Which columns of the sinusoidal table tell them apart best?",
        (
            "The last columns, the slow waves.",
            "The first columns, the fast waves.",
            "All columns change by the same amount.",
        ),
        1,
        (
            "Slow waves barely move between neighbours; they place a token in the larger stretch of text.",
            "The first pair turns a full radian per seat, like a second hand.",
            "Each pair turns at its own speed, from one radian per seat down to a tiny fraction.",
        ),
        _fast_columns,
    ),
)
