"""The lesson's one RoPE pair: a 2-D query and key turned by the library's own rotation.

The chapters and the tour's RoPE section share these helpers (the tour's "RoPE" section, its key points,
the explorer's PyTorch demo): every turn goes through :func:`posenc.rope.apply_rotary` with tables
from :func:`posenc.rope.rope_cos_sin`, so each number can be checked by hand.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

from ..rope import apply_rotary, rope_cos_sin

#: The lesson's demonstration: one 2-D pair turned by theta = 0.5 radians per seat.
THETA = 0.5
QUERY = (1.0, 0.5)
KEY = (0.8, 0.2)
SEAT_PAIRS = ((1, 3), (101, 103), (10_001, 10_003), (1, 4))
#: The clock-dial picture: +30 degrees per seat.
DIAL_THETA = math.pi / 6


def rotate_2d(vectors: torch.Tensor, seats: Sequence[int], theta: float) -> torch.Tensor:
    """Rotate 2-D vectors, one per seat, by ``seat * theta`` with the library's RoPE code.

    Args:
        vectors: shape (n, 2); row ``j`` sits at ``seats[j]``.
        seats: n non-negative integer positions.
        theta: the pair's frequency in radians per seat.

    Returns:
        float64 tensor of shape (n, 2).
    """
    if vectors.dim() != 2 or vectors.shape[-1] != 2 or vectors.shape[0] != len(seats):
        raise ValueError(f"vectors must have shape ({len(seats)}, 2) to match seats, got {tuple(vectors.shape)}")
    positions = torch.tensor(list(seats), dtype=torch.float64)  # (n,)
    inv_freq = torch.tensor([theta], dtype=torch.float64)  # one pair
    cos, sin = rope_cos_sin(positions, inv_freq, dtype=torch.float64)  # (n, 1) each
    x = vectors.to(torch.float64).view(1, 1, -1, 2)  # (batch, heads, seq, 2)
    rotated, _ = apply_rotary(x, x, cos, sin)
    return rotated.view(-1, 2)


def pair_score(q, k, q_seat: int, k_seat: int, theta: float = THETA) -> float:
    """Dot product of ``q`` turned to ``q_seat`` and ``k`` turned to ``k_seat``."""
    vectors = torch.tensor([q, k], dtype=torch.float64)
    rq, rk = rotate_2d(vectors, [q_seat, k_seat], theta)
    return float(rq @ rk)


def hand_angles(seats: Sequence[int], theta: float = DIAL_THETA) -> torch.Tensor:
    """Angle in degrees (0..360) of the unit vector (1, 0) after RoPE turns it to each seat."""
    hands = rotate_2d(torch.tensor([[1.0, 0.0]] * len(seats)), seats, theta)  # (n, 2)
    return torch.remainder(torch.rad2deg(torch.atan2(hands[:, 1], hands[:, 0])), 360.0)


__all__ = ["DIAL_THETA", "KEY", "QUERY", "SEAT_PAIRS", "THETA", "hand_angles", "pair_score", "rotate_2d"]
