"""Chapter "Check yourself": the page that keeps the score of every knowledge check, and one more check."""

from __future__ import annotations

from typing import Tuple

import torch

from ....rope.tables import rope_inv_freq
from ..prose import Block, see_also
from ..vectors import angle_errors
from ._check import Check, Evidence

#: the seat the precision check is about (RoPE's fastest pair turns 1 radian per seat)
SEAT = 1_000_000


def spacing(dtype: torch.dtype, value: float = float(SEAT)) -> float:
    """The gap between ``value`` and the next number ``dtype`` can hold above it."""
    at = torch.tensor(value, dtype=dtype)
    return float(torch.nextafter(at, torch.tensor(float("inf"), dtype=dtype)) - at)


def numbers() -> dict:
    """How finely float32 and float64 can hold RoPE's fastest angle, seat x 1 radian, at :data:`SEAT`."""
    n: dict = {"checks.seat": SEAT}
    for dtype in (torch.float32, torch.float64):
        n[f"checks.spacing.{str(dtype).removeprefix('torch.')}"] = spacing(dtype)
    return n


def prose(n: dict) -> list[Block]:
    """The chapter's text with the numbers of :func:`numbers`."""
    return [
        Block(
            "plain",
            """Every chapter ends with a question or two to check yourself. One more here: a computer keeps only
            so many digits, so a very large seat number times a small turn loses its fine detail.""",
            "intro",
        ),
        Block(
            "p",
            """The knowledge checks sit in the chapters they test; this page keeps the score and lists them all.
            Every explanation comes with numbers posenc computes when you answer.""",
            "intro",
        ),
        Block("h3", "One more: precision", "precision"),
        Block(
            "p",
            f"""RoPE angles are seat × θ. Near a million seats that product needs more digits than float32 keeps:
            at seat {n["checks.seat"]:,} the nearest angles float32 can hold are {n["checks.spacing.float32"]:g}
            radians apart (float64: {n["checks.spacing.float64"]:.2g}).""",
            "precision",
        ),
        Block("try", "answer a check in any chapter and come back: the score here follows.", "after"),
        see_also("Workbench: [precision](#precision) plots the angle error by position and dtype."),
    ]


# -- the knowledge check the manifest lists under this chapter (the quiz collects it) --
#: the head the precision check measures: the error at a seat depends on the head's width and base (the
#: workbench's precision view says which head it shows)
CHECK_HEAD_DIM, CHECK_BASE = 128, 10000.0


def _precision() -> Evidence:
    inv_freq = rope_inv_freq(CHECK_HEAD_DIM, CHECK_BASE)
    errors = angle_errors(torch.tensor([SEAT]), inv_freq)
    naive = float(errors["float32"].max())
    exact = float(errors["posenc"].max())
    return (
        [
            f"At position {SEAT:,}, in a {CHECK_HEAD_DIM}-wide head with base {CHECK_BASE:,.0f} (its worst pair), "
            f"the angle pos*theta formed in float32 is off by up to {naive:.4f} rad.",
            f"posenc's float32 tables (angles formed in float64 first) are off by at most {exact:.1e} rad.",
        ],
        {"float32": naive, "posenc": exact},
    )


CHECKS: Tuple[Check, ...] = (
    Check(
        "precision",
        "precision",
        "Why does posenc form RoPE angles in float64 before building float32 tables?",
        (
            "Because float64 kernels are faster.",
            "It only matters for bfloat16 models.",
            "At positions near a million, position * theta in float32 is off by hundredths of a radian.",
        ),
        2,
        (
            "The rotation itself still runs in the model's dtype; only the table is built in float64, once.",
            "float32 itself is not precise enough for the product at long positions.",
            f"Float32's spacing near a million is {spacing(torch.float32):g} rad, so the product is off by "
            f"hundredths; float64's is {spacing(torch.float64):.2g} rad, so the angle is formed almost exactly and "
            "only its cosine and sine, numbers in [−1, 1] where float32's spacing is at most "
            f"{spacing(torch.float32, 1.0):.2g}, are rounded to float32.",
        ),
        _precision,
    ),
)
