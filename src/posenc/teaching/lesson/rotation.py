"""The lesson's one RoPE pair: a 2-D query and key turned by the library's own rotation.

The chapters and the tour's RoPE section share these helpers (the tour's "RoPE" section, its key points,
the explorer's PyTorch demo): every turn goes through :func:`posenc.rope.apply_rotary` with tables
from :func:`posenc.rope.rope_cos_sin`, so each number can be checked by hand.

:func:`turn_dials` (a query and a key of a whole head, every pair a dial) and :func:`order_turn` (one
pair, the "who bit whom" clock) are the one computation behind both the lesson's figures
(:mod:`posenc.teaching.lesson.chapters.rope`) and the explorer's workbench views, so the two cannot disagree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch

from ...rope import apply_rotary, rope_cos_sin
from .vectors import rotate_at, wrap_degrees

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


@dataclass(frozen=True)
class DialTurn:
    """A query at seat ``m`` and a key at seat ``n``, turned there and with both moved by ``shift``.

    Row 0 of ``q_rot``, ``k_rot``, ``pair_scores`` and ``scores`` is at the seats as given, row 1 at
    ``m + shift`` and ``n + shift``. Half-split layout: pair ``i`` is ``(x[i], x[i + d/2])``.
    """

    inv_freq: torch.Tensor  # (d/2,) radians per seat, float64
    q: torch.Tensor  # (d,) the query before any turn
    k: torch.Tensor  # (d,) the key before any turn
    q_rot: torch.Tensor  # (2, d)
    k_rot: torch.Tensor  # (2, d)
    pair_scores: torch.Tensor  # (2, d/2) each pair's share of q'.k'
    scores: tuple[float, float]  # q'.k' at the seats, and moved
    gap_angle: torch.Tensor  # (d/2,) (m - n) * theta_i, not wrapped
    score_gap_only: float  # q . (k turned back by the gap alone)
    score_unrotated: float  # q . k


def turn_dials(q: torch.Tensor, k: torch.Tensor, m: int, n: int, shift: int, inv_freq: torch.Tensor) -> DialTurn:
    """Turn ``q`` (shape (d,)) to seat ``m`` and ``k`` to seat ``n``, and both again ``shift`` seats
    further, with the library's rotation (:func:`posenc.teaching.lesson.vectors.rotate_at`, float64).

    The relative-angle proof rides along: (R(m t) q) . (R(n t) k) = q . R(-(m - n) t) k, because
    R(m t)^T R(n t) = R((n - m) t); ``score_gap_only`` is the right-hand side.
    """
    half = q.shape[-1] // 2
    q_rot = rotate_at(q, [m, m + shift], inv_freq)  # (2, d)
    k_rot = rotate_at(k, [n, n + shift], inv_freq)  # (2, d)
    gap = m - n
    gap_turn = rotate_at(k, [1], inv_freq * -gap)[0]  # (d,), turned -(m - n) theta
    contrib = q_rot[:, :half] * k_rot[:, :half] + q_rot[:, half:] * k_rot[:, half:]  # (2, d/2)
    return DialTurn(
        inv_freq=inv_freq,
        q=q,
        k=k,
        q_rot=q_rot,
        k_rot=k_rot,
        pair_scores=contrib,
        scores=(float(q_rot[0] @ k_rot[0]), float(q_rot[1] @ k_rot[1])),
        gap_angle=torch.tensor(float(gap), dtype=torch.float64) * inv_freq,
        score_gap_only=float(q @ gap_turn),
        score_unrotated=float(q @ k),
    )


def order_turn(q: torch.Tensor, k: torch.Tensor, q_seat: int, k_seat: int, degrees: float) -> dict:
    """One pair turning ``degrees`` per seat: the query ``q`` (shape (2,)) at ``q_seat`` against the key
    ``k`` at ``k_seat``.

    ``relative_angle_deg`` is the turn from the key's hand to the query's, ``(q_seat - k_seat) *
    degrees`` folded into (-180, 180], counter-clockwise positive; the scores are q'.k' with RoPE and
    q.k without positions.
    """
    inv_freq = torch.tensor([math.radians(degrees)], dtype=torch.float64)
    q_rot = rotate_at(q, [q_seat], inv_freq)[0]  # (2,)
    k_rot = rotate_at(k, [k_seat], inv_freq)[0]
    return {
        "relative_angle_deg": wrap_degrees((q_seat - k_seat) * degrees),
        "q_rotated": q_rot,
        "k_rotated": k_rot,
        "score_rope": float(q_rot @ k_rot),
        "score_nope": float(q @ k),
    }


__all__ = [
    "DIAL_THETA",
    "KEY",
    "QUERY",
    "SEAT_PAIRS",
    "THETA",
    "DialTurn",
    "hand_angles",
    "order_turn",
    "pair_score",
    "rotate_2d",
    "turn_dials",
]
