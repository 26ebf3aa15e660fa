"""RoPE frequencies and cos/sin tables, with angles exact at long positions.

RoPE (Su et al. 2021, "RoFormer: Enhanced Transformer with Rotary Position Embedding") rotates pair
``i`` of a query or key at position ``m`` by the angle ``m * theta_i`` with
``theta_i = base ** (-2i / d)``, ``d`` the rotary dimension and ``0 <= i < d / 2``.

Precision. The usual code forms ``m * theta_i`` in float32. A float32 number near 1e6 has a spacing
of 0.0625, so at position 1,048,575 the fastest pair's angle is already off by up to ~0.03 radians and
cos/sin by ~2.5e-2. posenc forms and reduces the angles in float64 (spacing 1e-10 there), takes cos
and sin in float64, and only then casts to the table dtype: the error is float32 rounding, ~6e-8.
The tables are built once per length and cached, so the float64 work is not on the hot path.

Float64 alone is not enough far out: at position ``2**40`` the product ``m * theta_i`` has a spacing of
``2**-12`` radians. For integer positions :func:`angles_mod_2pi` therefore splits the position into
21-bit limbs, ``m = m0 + m1 * 2**21 + m2 * 2**42``, and multiplies each limb by ``2**(21 j) * theta_i``
already reduced modulo ``2*pi`` with exact rational arithmetic. Every partial product stays below
``2**21 * 2*pi``, so the angle is right to about 1e-8 radians for every non-negative int64 position.
Below ``2**21`` the limbs above the first are zero and the result is the plain float64 product.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
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
    return base**-exponents


#: 2*pi to 70 significant digits, for reducing ``2**(21 j) * theta`` exactly.
_TWO_PI = 2 * Fraction("3.141592653589793238462643383279502884197169399375105820974944592307816406")
_LIMB_BITS = 21
_LIMBS = 3  # 63 bits: every non-negative int64


@lru_cache(maxsize=256)
def _limb_phases(freqs: Tuple[float, ...]) -> Tuple[Tuple[float, ...], ...]:
    """``(2**(21 j) * f) mod 2*pi`` for each limb ``j`` and frequency ``f``, rounded once to float64."""
    phases = []
    for j in range(_LIMBS):
        row = []
        for f in freqs:
            x = Fraction(f) * (1 << (_LIMB_BITS * j))
            row.append(float(x - _TWO_PI * math.floor(x / _TWO_PI)))
        phases.append(tuple(row))
    return tuple(phases)


def limb_phases(freqs: torch.Tensor) -> torch.Tensor:
    """``(2**(21 j) * f) mod 2*pi`` for the limbs ``j = 0, 1, 2`` of :func:`angles_mod_2pi`.

    Args:
        freqs: angular frequencies, shape (F,), any floating dtype (read as float64).

    Returns:
        float64 tensor of shape (3, F) on the CPU. Computed once per set of frequencies (exact rational
        arithmetic, cached); :func:`angles_from_limb_phases` then needs only tensor operations, so a
        module can hold this table and form exact angles inside a ``torch.compile`` graph.
    """
    check_tensor("freqs", freqs, ndim=1, floating=True)
    f64 = freqs.detach().to(device="cpu", dtype=torch.float64)
    # device= explicitly: under a ``torch.device(...)`` context a bare factory would follow the context
    # (a meta context would leave no data to copy back).
    table = torch.tensor(_limb_phases(tuple(f64.tolist())), dtype=torch.float64, device="cpu")
    return table.reshape(_LIMBS, f64.numel())


def angles_from_limb_phases(positions: torch.Tensor, phases: torch.Tensor) -> torch.Tensor:
    """Angles of integer ``positions`` from a :func:`limb_phases` table, reduced to [0, 2*pi), float64.

    Only tensor operations (no read-back, no Python arithmetic on values), so this traces into one
    ``torch.compile`` graph. ``angle(-m) = -angle(m)`` for negative positions, ``-2**63`` included
    (it has no int64 negation; its magnitude ``2**63`` is read as the top limb ``2**21``).

    Args:
        positions: integer positions, any shape ``P``.
        phases: (3, F) float64 on ``positions``' device.

    Returns:
        float64 tensor of shape (*P, F).
    """
    signed = positions.to(torch.int64).unsqueeze(-1)  # (*P, 1)
    # |m| in int64; for m = -2**63 that wraps to -2**63 itself, whose low 63 bits are 0
    pos = signed.abs()
    mask = (1 << _LIMB_BITS) - 1
    angles = (pos & mask).to(torch.float64) * phases[0]
    for j in range(1, _LIMBS - 1):
        limb = (pos >> (_LIMB_BITS * j)) & mask
        angles = angles + limb.to(torch.float64) * phases[j]
    # The top limb unmasked, by magnitude: bits 42..62 for every |m| < 2**63, and exactly 2**21 for
    # m = -2**63 (an arithmetic shift gives -2**21). Masking it would drop bit 63 and give angle 0.
    top = (pos >> (_LIMB_BITS * (_LIMBS - 1))).abs()
    angles = angles + top.to(torch.float64) * phases[_LIMBS - 1]
    angles = torch.where(signed < 0, -angles, angles)
    return torch.remainder(angles, 2 * math.pi)


def angles_mod_2pi(positions: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """``positions * freqs`` reduced to [0, 2*pi), float64, exact to ~1e-8 rad at any position.

    Args:
        positions: any shape ``P``. Integer positions (int64 range, >= 0) are split into 21-bit limbs
            as described in the module notes; floating positions are multiplied in float64 directly.
        freqs: angular frequencies, shape (F,), any floating dtype (read as float64).

    Returns:
        float64 tensor of shape (*P, F), on ``positions``' device.
    """
    check_tensor("positions", positions)
    check_tensor("freqs", freqs, ndim=1, floating=True)
    device = positions.device
    f64 = freqs.detach().to(device="cpu", dtype=torch.float64)
    if positions.is_floating_point():
        angles = positions.to(torch.float64).unsqueeze(-1) * f64.to(device)
        return torch.remainder(angles, 2 * math.pi)
    if device.type == "meta":
        return torch.empty((*positions.shape, f64.numel()), dtype=torch.float64, device=device)
    return angles_from_limb_phases(positions, limb_phases(f64).to(device))


def rope_angles(positions: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """Angles ``positions * inv_freq`` in float64, reduced to [0, 2*pi) (see :func:`angles_mod_2pi`).

    Args:
        positions: integer or float positions, any shape ``P``.
        inv_freq: frequencies, shape (rotary_dim // 2,).

    Returns:
        float64 tensor of shape (*P, rotary_dim // 2).
    """
    check_tensor("positions", positions)
    check_tensor("inv_freq", inv_freq, ndim=1, floating=True)
    return angles_mod_2pi(positions, inv_freq)


def rope_cos_sin(
    positions: torch.Tensor, inv_freq: torch.Tensor, attention_factor: float = 1.0, dtype: torch.dtype = torch.float32
) -> Tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the RoPE angles, scaled by ``attention_factor``, in ``dtype``.

    ``attention_factor`` (YaRN's ``mscale``, LongRoPE's scaling factor) multiplies both tables, which
    scales q.k by its square, exactly as ``transformers`` does.

    Returns:
        ``(cos, sin)``, each of shape (*positions.shape, rotary_dim // 2). This is the half-width form:
        one value per rotation pair, used by both layouts.
    """
    return cos_sin_of_angles(rope_angles(positions, inv_freq), attention_factor, dtype)


def cos_sin_of_angles(
    angles: torch.Tensor, attention_factor: float = 1.0, dtype: torch.dtype = torch.float32
) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(cos(angles) * attention_factor, sin(angles) * attention_factor)`` taken in float64, rounded
    once to ``dtype``: the last step of :func:`rope_cos_sin`, shared by every path that forms angles."""
    return (angles.cos() * attention_factor).to(dtype), (angles.sin() * attention_factor).to(dtype)


def rope_table(
    length: int,
    inv_freq: torch.Tensor,
    attention_factor: float = 1.0,
    dtype: torch.dtype = torch.float32,
    device: Optional[torch.device] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables for positions ``0 .. length - 1``, each of shape (length, rotary_dim // 2)."""
    check_int("length", length, minimum=0)
    positions = torch.arange(length, dtype=torch.int64, device="cpu")
    cos, sin = rope_cos_sin(positions, inv_freq, attention_factor, dtype)
    return cos.to(device), sin.to(device)
