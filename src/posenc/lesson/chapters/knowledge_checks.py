"""Chapter "Check yourself": the page that keeps the score of every knowledge check, and one more check."""

from __future__ import annotations

import torch

from ..prose import Block

#: the seat the precision check is about (RoPE's fastest pair turns 1 radian per seat)
SEAT = 1_000_000


def numbers() -> dict:
    """How finely float32 and float64 can hold RoPE's fastest angle, seat x 1 radian, at :data:`SEAT`."""
    n: dict = {"checks.seat": SEAT}
    for dtype in (torch.float32, torch.float64):
        angle = torch.tensor(float(SEAT), dtype=dtype)
        step = torch.nextafter(angle, torch.tensor(float("inf"), dtype=dtype)) - angle
        n[f"checks.spacing.{str(dtype).removeprefix('torch.')}"] = float(step)
    return n


def prose(n: dict) -> list[Block]:
    """The chapter's text with the numbers of :func:`numbers`."""
    return [
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
    ]
