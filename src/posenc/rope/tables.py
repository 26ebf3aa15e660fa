"""RoPE frequencies and cos/sin tables, with angles exact at long positions.

RoPE (Su et al. 2021, "RoFormer: Enhanced Transformer with Rotary Position Embedding") rotates pair
``i`` of a query or key at position ``m`` by the angle ``m * theta_i`` with
``theta_i = base ** (-2i / d)``, ``d`` the rotary dimension and ``0 <= i < d / 2``.

Precision. The usual code forms ``m * theta_i`` in float32. A float32 number near 1e6 has a spacing
of 0.0625, so at position 1,048,575 the fastest pair's angle is already off by up to ~0.03 radians and
cos/sin by ~2.5e-2. posenc forms and reduces the angles in float64 (spacing 1e-10 there), takes cos
and sin in float64, and only then casts to the table dtype: the error is float32 rounding, ~6e-8.
The tables are built once per length and cached, so the float64 work is not on the hot path.
"""

from __future__ import annotations

import math
from typing import Optional, Tuple

import torch

from .._checks import check_float, check_int, check_tensor


def rope_inv_freq(rotary_dim: int, base: float = 10000.0) -> torch.Tensor:
    """Unscaled RoPE frequencies ``base ** (-2i / rotary_dim)``, float64, shape (rotary_dim // 2,).

    This is the ``default`` rope type of Hugging Face ``transformers`` (config key ``rope_theta`` is
    ``base``). Note the exponent's denominator is the *rotary* dimension, not the head dimension: with
    partial rotary (``partial_rotary_factor < 1``) the frequencies span the full range over the
    rotated part only.
    """
    check_int("rotary_dim", rotary_dim, minimum=2, even=True)
    check_float("base", base, greater_than=1.0)
    exponents = torch.arange(0, rotary_dim, 2, dtype=torch.float64, device="cpu") / rotary_dim
    return base ** -exponents


def rope_angles(positions: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """Angles ``positions * inv_freq`` in float64, reduced to [0, 2*pi).

    Args:
        positions: integer or float positions, any shape ``P``.
        inv_freq: frequencies, shape (rotary_dim // 2,).

    Returns:
        float64 tensor of shape (*P, rotary_dim // 2).
    """
    check_tensor("positions", positions)
    check_tensor("inv_freq", inv_freq, ndim=1, floating=True)
    pos = positions.to(torch.float64)
    angles = pos.unsqueeze(-1) * inv_freq.to(device=pos.device, dtype=torch.float64)
    return torch.remainder(angles, 2 * math.pi)


def rope_cos_sin(positions: torch.Tensor, inv_freq: torch.Tensor, attention_factor: float = 1.0,
                 dtype: torch.dtype = torch.float32) -> Tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the RoPE angles, scaled by ``attention_factor``, in ``dtype``.

    ``attention_factor`` (YaRN's ``mscale``, LongRoPE's scaling factor) multiplies both tables, which
    scales q.k by its square, exactly as ``transformers`` does.

    Returns:
        ``(cos, sin)``, each of shape (*positions.shape, rotary_dim // 2). This is the half-width form:
        one value per rotation pair, used by both layouts.
    """
    angles = rope_angles(positions, inv_freq)
    return (angles.cos() * attention_factor).to(dtype), (angles.sin() * attention_factor).to(dtype)


def rope_table(length: int, inv_freq: torch.Tensor, attention_factor: float = 1.0,
               dtype: torch.dtype = torch.float32,
               device: Optional[torch.device] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables for positions ``0 .. length - 1``, each of shape (length, rotary_dim // 2)."""
    check_int("length", length, minimum=0)
    positions = torch.arange(length, dtype=torch.float64, device="cpu")
    cos, sin = rope_cos_sin(positions, inv_freq, attention_factor, dtype)
    return cos.to(device), sin.to(device)
