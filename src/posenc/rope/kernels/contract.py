"""The calling convention both fused kernels share (see :func:`.cpu.rotate`): the ranks of the
operands, the dtypes they read, and how a table of either rank is addressed.

q, k, q_out, k_out are (batch, heads, seq, head_dim) in one of :data:`DATA_DTYPES`; cos and sin are
(batch or 1, rows, rotary_dim // 2) or (rows, rotary_dim // 2) in :func:`table_dtype` of q's dtype.
A 2-d table is read as a 3-d one with one batch row of stride 0, so no caller has to make a view
of it first (a view is a dispatcher call, and at decode every call is host time).
"""

from __future__ import annotations

from typing import Tuple

import torch

#: The storage dtypes the kernels rotate.
DATA_DTYPES = frozenset((torch.float32, torch.bfloat16, torch.float16, torch.float64))


def table_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype of the cos/sin tables a kernel reads for q of ``dtype`` (its compute dtype)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def check_ranks(
    q: torch.Tensor, k: torch.Tensor, q_out: torch.Tensor, k_out: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> None:
    """Raise ``ValueError`` unless q, k, q_out, k_out are 4-d and cos, sin 2-d or 3-d."""
    ranks = (q.dim(), k.dim(), q_out.dim(), k_out.dim(), cos.dim(), sin.dim())
    if ranks[:4] != (4, 4, 4, 4) or ranks[4] not in (2, 3) or ranks[5] not in (2, 3):
        raise ValueError(
            "the fused kernel needs 4-d q, k, q_out, k_out (batch, heads, seq, head_dim) "
            "and 2-d or 3-d cos, sin ((batch or 1,) rows, rotary_dim // 2), got shapes "
            f"{[tuple(t.shape) for t in (q, k, q_out, k_out, cos, sin)]}"
        )


def table_geometry(t: torch.Tensor) -> Tuple[Tuple[int, int, int], Tuple[int, int, int]]:
    """``((batch, rows, half), (batch stride, row stride, pair stride))`` of a 2-d or 3-d table,
    in elements; a 2-d table has one batch row of stride 0."""
    if t.dim() == 2:
        rows, half = t.shape
        row_stride, pair_stride = t.stride()
        return (1, rows, half), (0, row_stride, pair_stride)
    batch, rows, half = t.shape
    batch_stride, row_stride, pair_stride = t.stride()
    return (batch, rows, half), (batch_stride, row_stride, pair_stride)
