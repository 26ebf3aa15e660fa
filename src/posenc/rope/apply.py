"""Applying the rotation to queries and keys.

:func:`rotate_reference` is the plain PyTorch definition that every faster path is tested against.
:func:`apply_rotary` is the public entry point: it checks its inputs once and dispatches.

Conventions (see :mod:`posenc.rope.layout`): pair ``i`` is ``(x[i], x[i + r/2])`` for
``layout="half"`` and ``(x[2i], x[2i+1])`` for ``layout="interleaved"``; each pair ``(a, b)`` becomes
``(a*cos - b*sin, a*sin + b*cos)``, a counter-clockwise rotation by the pair's angle. Only the first
``rotary_dim`` features of each head are rotated (partial rotary, as in GPT-NeoX/Phi); the rest pass
through unchanged.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch

from .._checks import check_choice, check_int, check_tensor
from .layout import LAYOUTS


def rotate_reference(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, layout: str = "half",
                     rotary_dim: Optional[int] = None) -> torch.Tensor:
    """Rotate ``x`` by the angles whose cos/sin are given. Out of place.

    Args:
        x: (..., seq, head_dim) queries or keys.
        cos, sin: half-width tables broadcastable to (..., seq, rotary_dim // 2).
        layout: ``"half"`` or ``"interleaved"``.
        rotary_dim: rotated features per head (even, <= head_dim); ``None`` means all.

    bf16/fp16 inputs are rotated in float32 and rounded once at the end.
    """
    head_dim = x.shape[-1]
    r = head_dim if rotary_dim is None else rotary_dim
    compute = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    rot = x[..., :r].to(compute)
    c, s = cos.to(compute), sin.to(compute)
    if layout == "half":
        a, b = rot[..., : r // 2], rot[..., r // 2:]
        out = torch.cat((a * c - b * s, a * s + b * c), dim=-1)
    else:
        a, b = rot[..., 0::2], rot[..., 1::2]
        out = torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2)
    out = out.to(x.dtype)
    if r == head_dim:
        return out
    return torch.cat((out, x[..., r:]), dim=-1)


def check_rotary_inputs(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                        layout: str, rotary_dim: Optional[int]) -> int:
    """Validate the arguments of :func:`apply_rotary`; return the resolved rotary_dim."""
    check_tensor("q", q, ndim=4, floating=True)
    check_tensor("k", k, ndim=4, floating=True)
    check_tensor("cos", cos, ndim=(2, 3), floating=True)
    check_tensor("sin", sin, ndim=(2, 3), floating=True)
    check_choice("layout", layout, set(LAYOUTS))
    head_dim = q.shape[-1]
    if k.shape[-1] != head_dim:
        raise ValueError(f"q and k must have the same head_dim, got q {tuple(q.shape)} and k {tuple(k.shape)}")
    if k.shape[0] != q.shape[0] or k.shape[2] != q.shape[2]:
        raise ValueError(f"q and k must agree in batch and seq (dims 0 and 2), got q {tuple(q.shape)} "
                         f"and k {tuple(k.shape)}")
    r = head_dim if rotary_dim is None else rotary_dim
    check_int("rotary_dim", r, minimum=2, maximum=head_dim, even=True)
    if cos.shape != sin.shape:
        raise ValueError(f"cos and sin must have the same shape, got {tuple(cos.shape)} and {tuple(sin.shape)}")
    if cos.shape[-1] != r // 2:
        raise ValueError(f"cos/sin must have last dimension rotary_dim // 2 = {r // 2} (one value per "
                         f"rotation pair), got {cos.shape[-1]}")
    if cos.shape[-2] != q.shape[2]:
        raise ValueError(f"cos/sin cover {cos.shape[-2]} positions but q/k have seq={q.shape[2]}")
    if cos.dim() == 3 and cos.shape[0] not in (1, q.shape[0]):
        raise ValueError(f"cos/sin batch size {cos.shape[0]} must be 1 or q's batch size {q.shape[0]}")
    return r


def apply_rotary(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *,
                 layout: str = "half", rotary_dim: Optional[int] = None,
                 inplace: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    """Rotate queries and keys (never values) by their positions' angles.

    Args:
        q: (batch, q_heads, seq, head_dim).
        k: (batch, kv_heads, seq, head_dim); kv_heads may differ from q_heads (GQA/MQA).
        cos, sin: (batch or 1, seq, rotary_dim // 2) or (seq, rotary_dim // 2), the half-width
            tables from :func:`posenc.rope.tables.rope_cos_sin`, shared by all heads.
        layout: ``"half"`` (GPT-NeoX / Hugging Face) or ``"interleaved"`` (GPT-J / Meta).
        rotary_dim: rotated features per head; ``None`` means ``head_dim``.
        inplace: write the result into ``q`` and ``k`` and return them.

    Returns:
        ``(q_rotated, k_rotated)`` with the shapes and dtypes of ``q`` and ``k``.
    """
    r = check_rotary_inputs(q, k, cos, sin, layout, rotary_dim)
    if cos.dim() == 3:
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)     # (B|1, 1, S, r/2): broadcast over heads
    q_out = rotate_reference(q, cos, sin, layout=layout, rotary_dim=r)
    k_out = rotate_reference(k, cos, sin, layout=layout, rotary_dim=r)
    if inplace:
        q.copy_(q_out)
        k.copy_(k_out)
        return q, k
    return q_out, k_out
