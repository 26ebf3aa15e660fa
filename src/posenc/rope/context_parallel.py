"""Positions across machines: which global positions a rank's shard of a context-parallel sequence holds.

Context parallelism splits one long sequence over ``cp_size`` ranks along the sequence dimension.
Each rank holds ``seq_len / cp_size`` tokens, and must rotate them by their *global* positions: a rank
that rotates its shard as if it started at 0 (or at the wrong chunk) gets attention scores that are off
by a chunk, silently. The splits in use:

* ``"head_tail"``: the sequence in ``2 * cp_size`` equal chunks; rank ``r`` holds chunks ``r`` and
  ``2 * cp_size - 1 - r``, in that order. Under a causal mask every rank then does the same work (the
  early chunk is cheap, the late one dear). This is TransformerEngine's and Megatron-LM's
  load-balanced split (``get_batch_on_this_cp_rank``; "zigzag" in ring attention code), and what PyTorch's
  ``torch.distributed.tensor.experimental.context_parallel`` does by default (its
  ``_HeadTailLoadBalancer``, which its comments call "round-robin load balance") whenever ``seq_len``
  is divisible by ``2 * cp_size``.
* ``"contiguous"``: rank ``r`` holds tokens ``r * n .. (r + 1) * n - 1`` (``n = seq_len / cp_size``):
  PyTorch's ``context_parallel`` without load balancing, which it falls back to when ``seq_len`` is
  not divisible by ``2 * cp_size``.
* ``"round_robin"``: token ``t`` on rank ``t mod cp_size`` (the striped split of Brandon et al. 2023,
  "Striped Attention"), balanced token by token.

:func:`context_parallel_positions` gives a rank's global positions; rotating the rank's shard at them
(``RotaryEmbedding(..., position_ids=...)`` or ``apply_rotary(..., positions=...)``) gives, bit for
bit, the same rows of the rotation of the whole sequence (``tests/rope/test_context_parallel.py``,
and under ``torchrun`` with gloo). A scaling whose frequencies follow the current length (dynamic
NTK, LongRoPE) reads the largest position it is given, which differs from rank to rank: freeze its
frequencies at the global length first (:meth:`posenc.rope.RotaryEmbedding.freeze_frequencies`).
"""

from __future__ import annotations

from typing import Optional

import torch

from .._checks import check_choice, check_int, check_tensor

#: the ways a sequence is split over context-parallel ranks (see the module notes)
CP_SPLITS = ("head_tail", "contiguous", "round_robin")


def _checked(seq_len: object, cp_size: object, cp_rank: object, split: object) -> int:
    """The shard length, after checking every argument by name."""
    seq_len = check_int("seq_len", seq_len, minimum=0)
    cp_size = check_int("cp_size", cp_size, minimum=1)
    cp_rank = check_int("cp_rank", cp_rank)
    split = check_choice("split", split, set(CP_SPLITS))
    if not 0 <= cp_rank < cp_size:
        raise ValueError(f"cp_rank must be in [0, cp_size) = [0, {cp_size}), got {cp_rank}")
    parts = 2 * cp_size if split == "head_tail" else cp_size
    if seq_len % parts:
        need = f"2 * cp_size = {parts} equal chunks" if split == "head_tail" else f"cp_size = {parts} equal shards"
        raise ValueError(
            f"seq_len {seq_len} is not divisible by {parts}: the {split} split needs {need}; "
            f"pad the sequence to a multiple of {parts} (e.g. {seq_len + parts - seq_len % parts})"
        )
    return seq_len // cp_size


def context_parallel_positions(
    seq_len: int, cp_size: int, cp_rank: int, split: str = "head_tail", *, device: Optional[torch.device] = None
) -> torch.Tensor:
    """The global positions of rank ``cp_rank``'s shard, in the order the shard holds its tokens.

    Args:
        seq_len: tokens of the whole sequence (before the split).
        cp_size: context-parallel ranks.
        cp_rank: this rank, ``0 <= cp_rank < cp_size``.
        split: ``"head_tail"``, ``"contiguous"`` or ``"round_robin"`` (see the module notes).

    Returns:
        int64 tensor of shape ``(seq_len // cp_size,)``; the ranks' positions together are
        ``0 .. seq_len - 1``, each once.

    Raises:
        ValueError: ``cp_rank`` outside ``[0, cp_size)``, an unknown ``split``, or ``seq_len`` not
            divisible as the split needs (``2 * cp_size`` for ``"head_tail"``, ``cp_size`` otherwise).
        TypeError: a non-integer count.
    """
    shard = _checked(seq_len, cp_size, cp_rank, split)
    if split == "contiguous":
        positions = torch.arange(cp_rank * shard, (cp_rank + 1) * shard, dtype=torch.int64)
    elif split == "round_robin":
        positions = torch.arange(cp_rank, seq_len, cp_size, dtype=torch.int64)
    else:
        chunk = shard // 2
        head = torch.arange(cp_rank * chunk, (cp_rank + 1) * chunk, dtype=torch.int64)
        tail_start = (2 * cp_size - 1 - cp_rank) * chunk
        positions = torch.cat((head, torch.arange(tail_start, tail_start + chunk, dtype=torch.int64)))
    return positions.to(device) if device is not None else positions


def context_parallel_shard(
    x: torch.Tensor, cp_size: int, cp_rank: int, split: str = "head_tail", *, dim: int = -2
) -> torch.Tensor:
    """Rank ``cp_rank``'s shard of ``x`` along its sequence dimension ``dim`` (a copy).

    ``x`` (..., seq, ...) -> (..., seq // cp_size, ...), the tokens at
    :func:`context_parallel_positions`. ``dim=-2`` is the sequence of (batch, heads, seq, head_dim).
    """
    check_tensor("x", x)
    d = check_int("dim", dim, minimum=-x.dim(), maximum=x.dim() - 1) % max(x.dim(), 1)
    positions = context_parallel_positions(x.shape[d], cp_size, cp_rank, split, device=x.device)
    return x.index_select(d, positions)


def context_parallel_unshard(
    gathered: torch.Tensor, cp_size: int, split: str = "head_tail", *, dim: int = -2
) -> torch.Tensor:
    """The whole sequence back in order from the ranks' shards concatenated in rank order along ``dim``
    (what an all-gather of the shards gives); the inverse of :func:`context_parallel_shard`."""
    check_tensor("gathered", gathered)
    d = check_int("dim", dim, minimum=-gathered.dim(), maximum=gathered.dim() - 1) % max(gathered.dim(), 1)
    seq_len = gathered.shape[d]
    order = torch.cat([context_parallel_positions(seq_len, cp_size, r, split) for r in range(cp_size)])
    return gathered.index_select(d, torch.argsort(order).to(gathered.device))
