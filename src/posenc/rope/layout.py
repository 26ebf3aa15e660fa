"""The two RoPE layouts and the weight permutation between them.

Which two numbers of a head vector form a rotation pair is a convention, and mixing conventions gives
garbage silently (every pair rotated by the wrong frequency):

* **half-split** (``layout="half"``; GPT-NeoX, Hugging Face ``rotate_half``): pair ``i`` is
  ``(x[i], x[i + d/2])``.
* **interleaved** (``layout="interleaved"``; GPT-J, Meta's original Llama, RoFormer): pair ``i`` is
  ``(x[2i], x[2i + 1])``.

Both rotate pair ``i`` by ``+m * theta_i`` (counter-clockwise: ``(a, b) -> (a cos - b sin,
a sin + b cos)``). A checkpoint trained with one layout runs with the other after permuting the rows
of its q and k projection weights within each head, so that interleaved pair ``(2i, 2i+1)`` lands at
``(i, i + d/2)``. Since q.k is a sum over pairs, the permuted model computes the same attention
scores. This is what Hugging Face's Llama conversion script does to Meta checkpoints.
"""

from __future__ import annotations

from typing import Optional

import torch

from .._checks import check_int, check_tensor

LAYOUTS = ("half", "interleaved")


def _head_row_order(head_dim: int, rotary_dim: int, to_half: bool) -> torch.Tensor:
    """Row order inside one head that maps interleaved -> half-split (or the inverse)."""
    interleaved_to_half = torch.cat((torch.arange(0, rotary_dim, 2), torch.arange(1, rotary_dim, 2)))
    if to_half:
        order = interleaved_to_half
    else:
        order = torch.empty(rotary_dim, dtype=torch.long)
        order[interleaved_to_half] = torch.arange(rotary_dim)
    return torch.cat((order, torch.arange(rotary_dim, head_dim)))


def _permute(weight: torch.Tensor, n_heads: int, rotary_dim: Optional[int], to_half: bool) -> torch.Tensor:
    check_tensor("weight", weight, ndim=(1, 2))
    check_int("n_heads", n_heads, minimum=1)
    rows = weight.shape[0]
    if rows % n_heads:
        raise ValueError(f"weight has {rows} output rows, which is not divisible by n_heads={n_heads}")
    head_dim = rows // n_heads
    rotary_dim = head_dim if rotary_dim is None else rotary_dim
    check_int("rotary_dim", rotary_dim, minimum=2, maximum=head_dim, even=True)
    order = _head_row_order(head_dim, rotary_dim, to_half).to(weight.device)
    per_head = weight.reshape(n_heads, head_dim, *weight.shape[1:])
    return per_head.index_select(1, order).reshape(weight.shape)


def permute_for_half_split(weight: torch.Tensor, n_heads: int, rotary_dim: Optional[int] = None) -> torch.Tensor:
    """Reorder q/k projection rows from the interleaved to the half-split convention.

    Args:
        weight: a q or k projection weight of shape (n_heads * head_dim, in_features), or its bias
            of shape (n_heads * head_dim,). Use the number of *key/value* heads for k under GQA.
        n_heads: number of heads the rows are split into.
        rotary_dim: rotated width per head (partial rotary); rows past it are left in place.

    Returns:
        A new tensor of the same shape: running ``layout="half"`` on it equals running
        ``layout="interleaved"`` on ``weight``.
    """
    return _permute(weight, n_heads, rotary_dim, to_half=True)


def permute_for_interleaved(weight: torch.Tensor, n_heads: int, rotary_dim: Optional[int] = None) -> torch.Tensor:
    """Inverse of :func:`permute_for_half_split` (half-split rows -> interleaved rows)."""
    return _permute(weight, n_heads, rotary_dim, to_half=False)
