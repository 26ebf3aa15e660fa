"""Chapter "ALiBi: a penalty for distance": every score loses slope x distance, one slope per head."""

from __future__ import annotations

import math
from typing import Dict, Tuple

import torch

from ....alibi import alibi_bias, alibi_slopes
from ..formats import minus
from ..prose import Block, see_also
from ._check import Check, Evidence
from ._figures import Figure
from ._ranges import Range, checked

#: the figure's default: 8 heads, a query 10 seats after the key, and the longest look back it offers
HEADS = 8
DISTANCE = 10
FAR = 64
#: how many of the nearest keys (the query's own seat and the ones just behind) "the nearest words" are
NEAREST = 4


def _fraction(slope: float) -> str:
    return f"1/{round(1 / slope)}"


def numbers() -> dict:
    """ALiBi's slopes and biases, and the attention of its steepest and shallowest heads, from posenc."""
    n: dict = {"alibi.heads": HEADS}
    slopes = alibi_slopes(HEADS)
    n["alibi.slopes"] = slopes.tolist()
    query = torch.tensor([FAR])
    keys = torch.arange(FAR + 1)
    bias = alibi_bias(slopes, query, keys)[:, 0]  # (heads, FAR + 1): key j, FAR - j seats back
    n["alibi.head0.bias_at_distance"] = float(bias[0, FAR - DISTANCE])
    # every key matches the query equally well, so only the bias decides where attention goes
    weights = torch.softmax(bias, dim=-1)  # (heads, FAR + 1)
    nearest = weights[:, FAR - NEAREST + 1 :].sum(dim=-1)
    n["alibi.far.steep_nearest"] = float(nearest[0])
    n["alibi.far.shallow_nearest"] = float(nearest[-1])
    n["alibi.far.even_nearest"] = NEAREST / (FAR + 1)
    n["alibi.far.shallow_spread"] = float(weights[-1].max() / weights[-1].min())
    return n


def prose(n: dict) -> list[Block]:
    """The chapter's text with the numbers of :func:`numbers`."""
    slopes = n["alibi.slopes"]
    shown = ", ".join(_fraction(s) for s in slopes[:3])
    steep, shallow = _fraction(slopes[0]), _fraction(slopes[-1])
    bias = minus(f"{n['alibi.head0.bias_at_distance']:g}")
    return [
        Block(
            "plain",
            """A word pays a small fine for every seat it sits away from the word that is reading, so far words
            count less.""",
            "intro",
        ),
        Block(
            "p",
            """ALiBi (attention with linear biases, Press et al. 2022, *Train Short, Test Long*) changes no vector
            at all. It leaves queries, keys and word vectors alone and edits the attention score itself: before the
            softmax, every score loses *slope × distance*, where the distance is how many seats the key sits behind
            the query. The further back a word, the less attention it gets, by a rule that needs no table and goes
            on forever, which is why BLOOM and MPT could read texts longer than the ones they were trained on.""",
            "intro",
        ),
        Block("formula", "score(i, j) = q(i) · k(j) / √d − slope(h) × (i − j)", "intro"),
        Block(
            "p",
            f"""Each head h gets its own slope, a geometric series: with {n["alibi.heads"]} heads the slopes are
            {shown}, …, {shallow} (in general 2^(−8(h+1)/H)). A steep head ({steep}) looks at the last few words; a
            shallow one ({shallow}) still sees words hundreds of seats back. The distance i − j is the same gap as
            in RoPE: the query's seat minus the key's.""",
            "intro",
        ),
        Block(
            "caption",
            """Top: the bias each head adds to a key's score, against how far behind the query the key sits (linear
            axes), from posenc's `alibi_bias`. Bottom: the attention weights of the steepest and the shallowest
            head when every key matches the query equally well, so that only the bias decides.""",
            "alibi-caption",
        ),
        Block(
            "p",
            f"""With every key matching the query equally well and the query looking {FAR} seats back, the steep
            head puts {n["alibi.far.steep_nearest"]:.1%} of its attention on the {NEAREST} nearest words; the
            shallow head puts {n["alibi.far.shallow_nearest"]:.1%} there (an even spread would be
            {n["alibi.far.even_nearest"]:.1%}), and its largest weight is only
            {n["alibi.far.shallow_spread"]:.2f} times its smallest.""",
            "after",
        ),
        Block(
            "try",
            f"""with {n["alibi.heads"]} heads, read head 0's bias for a key {DISTANCE} seats back:
            {bias}, half a point per seat. Then stretch the distance to {FAR}: the
            steep head keeps nearly all its attention on the nearest words, the shallow one spreads it almost
            evenly.""",
            "after",
        ),
        see_also("Workbench: [ALiBi's bias beside RoPE's scores](#alibi) as heatmaps."),
    ]


# -- the figure: each head's slope and its penalty by distance --
#: parameter -> (minimum, maximum, default, help) of the figures (the explorer's API publishes it)
FIGURE_RANGES: Dict[str, Range] = {
    "alibi_heads": (1, 64, 8, "attention heads, one ALiBi slope each"),
    "alibi_distance": (1, 512, 10, "how far back the query looks (keys at distance 0 to this)"),
}


def slope_texts(slopes: list[float]) -> list[str]:
    """The slopes written one way for all heads: ``1/2 … 1/256`` when every slope is 1 over a power of two
    (a power-of-two head count), else every slope in four significant digits (``0.7071, 0.5000, …`` for
    16 heads, whose odd heads sit between the powers of two), never the two forms mixed."""
    exact = all(abs(math.log2(1 / s) - round(math.log2(1 / s))) < 1e-9 for s in slopes)
    return [f"1/{round(1 / s)}" if exact else f"{s:#.4g}" for s in slopes]


def alibi_penalty(heads: int, distance: int) -> dict:
    """ALiBi for a query that sees keys 0 to ``distance`` seats behind it, from posenc's own
    :func:`~posenc.alibi.alibi_slopes` and :func:`~posenc.alibi.alibi_bias`.

    For every head: its slope, the bias ``-slope * distance`` added to each key's score, and the
    attention weights the bias alone gives when every key matches the query equally well (so what
    is left is the position's share). Steep heads keep their attention on the nearest keys, shallow
    ones spread it out.
    """
    checked(FIGURE_RANGES, "alibi_heads", heads)
    checked(FIGURE_RANGES, "alibi_distance", distance)
    slopes = alibi_slopes(heads)  # (H,) float64
    keys = torch.arange(distance + 1)  # key seats 0..distance, the query at seat `distance`
    bias = alibi_bias(slopes, torch.tensor([distance]), keys)[:, 0]  # (H, distance + 1)
    weights = torch.softmax(bias, dim=-1)  # (H, distance + 1): equal content scores
    back = (distance - keys).tolist()  # how far behind the query each key sits
    rows = []
    texts = slope_texts(slopes.tolist())
    for h in range(heads):
        slope = float(slopes[h])
        rows.append(
            {
                "head": h,
                "slope": slope,
                "slope_text": texts[h],
                "bias": bias[h].tolist(),
                "weights": weights[h].tolist(),
                "bias_at_distance": float(bias[h, 0]),
                "weight_nearest": float(weights[h, -1]),
                "weight_farthest": float(weights[h, 0]),
            }
        )
    return {"heads": heads, "distance": distance, "keys_back": back, "rows": rows}


#: route -> figure function (the explorer serves it at /api/lesson/<route>)
FIGURES = {"alibi": Figure(alibi_penalty, heads="alibi_heads", distance="alibi_distance")}


# -- the knowledge checks the manifest lists under this chapter (the quiz collects them) --
def _alibi_head0() -> Evidence:
    from ....alibi import alibi_bias, alibi_slopes

    slopes = alibi_slopes(8)
    bias = alibi_bias(slopes, torch.tensor([10]), torch.arange(11))  # (8, 1, 11)
    return (
        [
            f"Slopes for 8 heads: {[f'1/{round(1 / s)}' for s in slopes.tolist()]}.",
            f"Head 0, query at 10, key at 0: bias {float(bias[0, 0, 0]):g}; head 7: {float(bias[7, 0, 0]):g}.",
        ],
        {"slopes": slopes.tolist(), "head0": float(bias[0, 0, 0]), "head7": float(bias[7, 0, 0])},
    )


CHECKS: Tuple[Check, ...] = (
    Check(
        "alibi-head0",
        "ALiBi",
        "In an 8-head ALiBi model, what does head 0 add to the score of a key 10 tokens behind the query?",
        (
            "-5, because head 0's slope is 1/2.",
            "-10/256, because every head uses the smallest slope.",
            "+5, nearer keys are penalised instead.",
        ),
        0,
        (
            "Slopes are 1/2, 1/4, ..., 1/256, and the penalty is slope times distance.",
            "1/256 is the slope of the last head, the one that looks furthest.",
            "The penalty grows with distance and is never positive.",
        ),
        _alibi_head0,
    ),
)
