"""``torch.ops.posenc.rotary``: the rotation as one ``torch.library`` op, for code that wants it as a
single graph node (a compiled graph holding posenc's kernel launch, a CUDA-graph capture of it).

:func:`posenc.apply_rotary` does not go through it: eager calls reach the kernel directly (every
dispatcher hop is host time), and under ``torch.compile`` the entry traces the reference, which
Inductor fuses with its neighbours (measured faster than the op on an H200, ``docs/kernels.md``).
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

import torch

from . import kernels
from .apply import reference_rows, rotated

Pair = Tuple[torch.Tensor, torch.Tensor]


@torch.library.custom_op("posenc::rotary", mutates_args=())
def rotary_op(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    positions: Optional[torch.Tensor],
    row_offset: int,
    rotary_dim: int,
    interleaved: bool,
    inverse: bool,
) -> Pair:
    """The rotation of q and k, out of place.

    Args:
        q: (B, Hq, S, D); k: (B, Hk, S, D); one floating dtype, any strides.
        cos, sin: (B|1, rows, rotary_dim // 2) in float32 (float64 for float64 q).
        positions: (B|1, S) int64/int32 rows, or ``None`` for rows ``row_offset + s``.
        row_offset: the first row without positions.
        rotary_dim: rotated features per head; interleaved: the pair layout; inverse: rotate by
            the negated angles (the backward).

    Returns:
        ``(q_out, k_out)``, new tensors of the shapes, dtypes and strides ``torch.empty_like`` gives.

    The fused kernel of the device runs (the reference where there is none); the fake kernel gives
    the outputs' metadata, so ``torch.compile(fullgraph=True)`` traces one node and CUDA graphs
    capture the launch; its backward is this op with ``inverse`` flipped. Nothing is validated
    beyond what the kernels check: the public entry is :func:`posenc.apply_rotary`.
    """
    kernel = kernels.kernel_for(q.device)
    if kernel is None:
        s = -sin if inverse else sin
        layout = "interleaved" if interleaved else "half"
        q_ref, k_ref = reference_rows(q, k, cos, s, positions, row_offset, layout, rotary_dim, False)
        q_out, k_out = torch.empty_like(q), torch.empty_like(k)  # the fake kernel's strides; never aliased
        q_out.copy_(q_ref)
        k_out.copy_(k_ref)
        return q_out, k_out
    return rotated(kernel, q, k, cos, sin, positions, row_offset, interleaved, rotary_dim, inverse)


@rotary_op.register_fake
def _rotary_fake(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    positions: Optional[torch.Tensor],
    row_offset: int,
    rotary_dim: int,
    interleaved: bool,
    inverse: bool,
) -> Pair:
    return torch.empty_like(q), torch.empty_like(k)


def _rotary_setup(ctx: Any, inputs: Tuple[Any, ...], output: Any) -> None:
    _, _, cos, sin, positions, row_offset, rotary_dim, interleaved, inverse = inputs
    ctx.save_for_backward(cos, sin, positions)
    ctx.config = (row_offset, rotary_dim, interleaved, inverse)


def _rotary_backward(ctx: Any, grad_q: torch.Tensor, grad_k: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
    cos, sin, positions = ctx.saved_tensors
    row_offset, rotary_dim, interleaved, inverse = ctx.config
    # the transpose of a rotation is the rotation by the negated angles: the same op, inverse flipped
    gq, gk = rotary_op(grad_q, grad_k, cos, sin, positions, row_offset, rotary_dim, interleaved, not inverse)
    return gq, gk, None, None, None, None, None, None, None


rotary_op.register_autograd(_rotary_backward, setup_context=_rotary_setup)
