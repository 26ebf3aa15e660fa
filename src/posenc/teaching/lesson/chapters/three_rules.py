"""Chapter "The three rules": what a good position code needs, measured on the sinusoidal table."""

from __future__ import annotations

import math
from typing import Dict, Tuple

import torch

from ....sinusoidal import sinusoidal_frequencies, sinusoidal_table
from ..formats import sci
from ..prose import Block, see_also
from ._figures import Figure
from ._ranges import Range, checked
from .word_plus_position import numbers as input_numbers

#: Table measured for the three rules: a modest width, 10,000 seats.
D_MODEL = 128
LENGTH = 10_000
#: Seats searched for near-repeats of the fastest pair of columns alone.
FAST_ONLY_LENGTH = 2_000
#: Offsets k for the "pos + k is a fixed linear map of pos" rule.
OFFSETS = (1, 7, 250)


def offset_map(k: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The (d_model, d_model) matrix ``R_k`` with ``PE[pos + k] = R_k @ PE[pos]`` for every pos.

    Pair ``i`` of the table is ``(sin(pos * w_i), cos(pos * w_i))``; the angle-addition formulas make
    its shift by ``k`` the 2x2 rotation ``[[cos(k w_i), sin(k w_i)], [-sin(k w_i), cos(k w_i)]]``.
    """
    if d_model % 2:
        raise ValueError(f"offset_map needs an even d_model (whole sin/cos pairs), got {d_model}")
    blocks = []
    for w in sinusoidal_frequencies(d_model, base).tolist():
        c, s = math.cos(k * w), math.sin(k * w)
        blocks.append(torch.tensor([[c, s], [-s, c]], dtype=torch.float64))
    return torch.block_diag(*blocks)


def min_pairwise_distance(rows: torch.Tensor, chunk: int = 2048) -> Tuple[float, int, int]:
    """Smallest Euclidean distance between two different rows, and the two row indices (i < j).

    Every pair is compared once. A float32 pass over ``|a|^2 + |b|^2 - 2 a.b`` (blocks of ``chunk``
    rows against the rows after them) finds the pairs within a safe margin of the smallest squared
    distance (the margin is ~40 times float32's rounding bound for these norms); those candidates
    are then measured again in float64, and the smallest float64 distance is returned.
    """
    n = rows.shape[0]
    if n < 2:
        raise ValueError(f"rows must hold at least 2 vectors to compare, got {n}")
    fast = rows.to(torch.float32)
    sq = (fast * fast).sum(-1)  # (n,)
    margin = 2e-5 * float(sq.max()) + 1e-30
    best = float("inf")
    firsts, seconds = [], []
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        d2 = sq[start:stop, None] + sq[None, start:]  # (c, n - start)
        d2.addmm_(fast[start:stop], fast[start:].T, alpha=-2.0)
        c = stop - start
        d2[:, :c].masked_fill_(torch.ones(c, c, dtype=torch.bool).tril(), float("inf"))  # keep j > i
        best = min(best, float(d2.min()))
        i, j = torch.nonzero(d2 <= best + margin, as_tuple=True)
        firsts.append(i + start)
        seconds.append(j + start)
    first, second = torch.cat(firsts), torch.cat(seconds)
    exact = rows.to(torch.float64)
    dist = (exact[first] - exact[second]).norm(dim=-1)  # (candidates,)
    k = int(dist.argmin())
    return float(dist[k]), int(first[k]), int(second[k])


#: seats of the table figure ``posenc tour`` draws
HEATMAP_SEATS = 200


def numbers() -> dict:
    """The three rules measured on posenc's sinusoidal table of :data:`LENGTH` seats."""
    n: dict = {}
    pe = sinusoidal_table(LENGTH, D_MODEL, dtype=torch.float64)  # (LENGTH, D_MODEL)
    n["waves.min"], n["waves.max"] = float(pe.min()), float(pe.max())
    for k in OFFSETS:
        rk = offset_map(k, D_MODEL)
        n[f"waves.offset.{k}.residual"] = float((pe[k:] - pe[:-k] @ rk.T).abs().max())
        eye = torch.eye(D_MODEL, dtype=torch.float64)
        n[f"waves.offset.{k}.orthogonality"] = float((rk @ rk.T - eye).abs().max())
    dist, i, j = min_pairwise_distance(pe)
    n["waves.unique.min_distance"], n["waves.unique.pair"] = dist, [i, j]
    fast_dist, fi, fj = min_pairwise_distance(pe[:FAST_ONLY_LENGTH, :2])
    n["waves.unique.fast_only.min_distance"], n["waves.unique.fast_only.pair"] = fast_dist, [fi, fj]
    n["waves.unique.fast_only.turns"] = (fj - fi) / (2 * math.pi)
    # chapter 2's measurement, stated here too: one number, measured once
    n["rules.gpt2_ratio"] = input_numbers()["input.scale.1.ratio"]
    return n


def prose(n: dict) -> list[Block]:
    """The chapter's text with the numbers of :func:`numbers`."""
    i, j = n["waves.unique.pair"]
    fi, fj = n["waves.unique.fast_only.pair"]
    rows = [("k", "seats checked", "max |PE(p+k) - R_k PE(p)|", "max |R_k R_k^T - I|")]
    rows += [
        (
            str(k),
            f"0..{LENGTH - 1 - k:,}",
            sci(n[f"waves.offset.{k}.residual"]),
            sci(n[f"waves.offset.{k}.orthogonality"]),
        )
        for k in OFFSETS
    ]
    return [
        Block(
            "plain",
            """Instead of one number that keeps growing, give every seat a set of waves, like the hands of a
            clock turning at different speeds. Wave values always stay between −1 and 1.""",
            "intro",
        ),
        Block("p", "The two failures tell us what a good position code needs:", "intro"),
        Block(
            "item",
            f"""**Small, bounded numbers.** Every value stays between −1 and +1, at any seat, so the code cannot
            grow with the seat and bury the word further into a text. This rule is necessary, not sufficient: a
            bounded code can still drown the word. At GPT-2's initial scale (0.02) the position vector starts
            about {n["rules.gpt2_ratio"]:.0f} times longer than the word at *every* seat
            ([chapter 2](#word-plus-position)). The balance between the two comes from the scale of the word
            vectors, which the 2017 Transformer sets by multiplying them by √d, and from training; being bounded
            only keeps that balance the same at every seat. Raw integers break the rule more at every seat.""",
            "rules",
        ),
        Block(
            "item",
            """**The same step everywhere.** Going from word 2 to word 3 looks the same in a 5-word sentence and
            in a 5,000-word one.""",
            "rules",
        ),
        Block(
            "item",
            """**A unique pattern per seat.** Each seat has its own vector of width d_model; no two seats share
            one.""",
            "rules",
        ),
        Block(
            "caption",
            """Each code checked on a sentence of the chosen length by posenc: the largest value (rule 1), the
            distance from seat 2 to seat 3 in a 5-word sentence and in this one (rule 2), and the smallest
            distance between the codes of two different seats (rule 3).""",
            "rules-caption",
        ),
        Block(
            "try",
            """drag the length. Raw integers break rule 1 more and more; fractions break rule 2 at every length
            but 5; the sine code passes all three at any length.""",
            "after",
        ),
        Block("h3", f"The sine code measured on {LENGTH:,} seats", "measured"),
        Block(
            "p",
            f"""The 2017 transformer codes seat *pos* with waves: column 2i holds sin(pos / 10000^(2i/d)) and
            column 2i+1 the cosine of the same angle. Early columns turn fast, late columns slowly, like the
            hands of a clock. We build the table with `posenc.sinusoidal_table` for {LENGTH:,} seats and
            d_model = {D_MODEL} and measure each rule on it.""",
            "measured",
        ),
        Block(
            "p",
            f"""**Rule 1, bounded.** Smallest value {n["waves.min"]:+.6f}, largest {n["waves.max"]:+.6f}: every
            entry lies in [−1, 1] at every seat, however long the text.""",
            "measured",
        ),
        Block(
            "p",
            """**Rule 2, a step is a step.** Moving k seats turns every clock hand by the same amount, whichever
            seat you start from: each (sin, cos) pair turns by the fixed angle k·w_i. In matrix form
            PE(pos + k) = R_k PE(pos), where R_k holds one small 2x2 turning matrix per pair along its diagonal
            and zeros everywhere else (a "block-diagonal" matrix); it does not depend on pos. We build R_k from
            the frequencies alone and check it against every seat of the table:""",
            "measured",
        ),
        Block("table", "One turning matrix per offset, checked at every seat", "measured", rows=tuple(rows)),
        Block(
            "p",
            """The residual is float64 rounding: one matrix per offset serves every seat, so a model can learn
            "two words back" once and use it anywhere.""",
            "measured",
        ),
        Block(
            "p",
            f"""**Rule 3, one fingerprint per seat.** Comparing all {LENGTH * (LENGTH - 1) // 2:,} pairs of seats
            0..{LENGTH - 1:,}, the smallest distance is {n["waves.unique.min_distance"]:.4f}, between seats {i}
            and {j} ({j - i} apart): no two seats share a code. (By rule 2 the distance depends only on how far
            apart two seats are, so every pair of neighbours ties with this one.) The many speeds matter: the
            fastest pair of columns on its own nearly repeats. Among seats 0..{FAST_ONLY_LENGTH - 1:,}, seats
            {fi} and {fj} are only {sci(n["waves.unique.fast_only.min_distance"])} apart in those two columns,
            because {fj - fi} radians is {n["waves.unique.fast_only.turns"]:.5f} turns, almost a whole number.
            The slower columns tell such seats apart.""",
            "measured",
        ),
        Block(
            "tour-figure",
            f"""Figure sinusoidal_heatmap.png, written by `posenc tour`, draws the table for seats
            0-{HEATMAP_SEATS - 1}: on the left every value as a colour (fast columns flicker, slow ones barely
            change), on the right three single columns, fast, medium and slow, as curves. The explorer draws
            the whole table in [chapter 5](#clock-hands).""",
            "measured",
        ),
        see_also("Workbench: the [wave fingerprint](#fingerprint) draws the distance between every two seats."),
    ]


# -- the figure: the three rules checked on raw integers, fractions and the sine code --
#: parameter -> (minimum, maximum, default, help) of the figure (the explorer's API publishes it)
FIGURE_RANGES: Dict[str, Range] = {
    "rules_len": (2, 2048, 512, "sentence length the three rules are checked on"),
    "rules_d_model": (2, 256, 64, "width of the codes (even)"),
}


def _codes(name: str, length: int, d_model: int) -> torch.Tensor:
    """Position codes (length, d_model) of a sentence of ``length`` words under each idea."""
    if name == "raw integers":
        return torch.arange(length, dtype=torch.float64).unsqueeze(1).expand(length, d_model)
    if name == "fractions":
        return (torch.arange(length, dtype=torch.float64) / length).unsqueeze(1).expand(length, d_model)
    return sinusoidal_table(length, d_model).double()


RULE_CODES = ("raw integers", "fractions", "sinusoidal")


def three_rules(length: int, d_model: int) -> dict:
    """Check the three rules on a sentence of ``length`` words for each coding idea.

    Rule 1, bounded: the largest |value|. Rule 2, consistent step: the distance from seat 2 to
    seat 3 in a 5-word sentence and in this one. Rule 3, unique: the smallest distance between the
    codes of two different seats.
    """
    checked(FIGURE_RANGES, "rules_len", length)
    checked(FIGURE_RANGES, "rules_d_model", d_model, argument="d_model", even=True)
    rows = []
    for name in RULE_CODES:
        codes = _codes(name, length, d_model)  # (L, d)
        short = _codes(name, 5, d_model)
        largest = float(codes.abs().max())
        step_short = float((short[3] - short[2]).norm())
        step_long = float((codes[3] - codes[2]).norm()) if length > 3 else None
        if length > 1:
            dist = torch.cdist(codes.unsqueeze(0), codes.unsqueeze(0))[0]  # (L, L)
            dist.fill_diagonal_(math.inf)
            closest = float(dist.min())
        else:
            closest = None
        rows.append(
            {
                "code": name,
                "largest": largest,
                "bounded": largest <= 1.0,
                "step_5_words": step_short,
                "step_this_sentence": step_long,
                "consistent": step_long is not None and math.isclose(step_short, step_long, rel_tol=1e-9),
                "closest_pair": closest,
                "unique": closest is not None and closest > 1e-9,
            }
        )
    return {"length": length, "d_model": d_model, "codes": rows}


#: route -> figure function (the explorer serves it at /api/lesson/<route>)
FIGURES = {"rules": Figure(three_rules, length="rules_len", d_model="rules_d_model")}
