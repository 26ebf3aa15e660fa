"""Position ids as users have them: padded batches, packed documents, decoding offsets.

RoPE rotates each token by its *position*, and the position is not always its column index:

* **Left padding** (batched generation): ``[pad, pad, The, cat]`` must rotate ``The`` as position 0,
  not 2. Cache positions (``arange``) would shift the whole prompt by the padding length; because
  RoPE scores depend on distances only this is harmless within a row for plain RoPE, but it changes
  which length a dynamic scaling sees and what a learned/absolute scheme reads. Derive positions
  from the attention mask: :func:`position_ids_from_attention_mask`.
* **Packing** (training): several documents share one row; each restarts at position 0 so that no
  document sees another's length. :func:`position_ids_from_cu_seqlens` takes the ``cu_seqlens``
  vector that variable-length attention kernels use; :func:`position_ids_from_document_ids` takes a
  per-token document index.
* **Decoding** with a KV cache: the new tokens start where the cache ends,
  :func:`position_ids_from_offsets`.

Every function returns int64 positions.
"""

from __future__ import annotations

from typing import Union

import torch

from .._checks import check_tensor, offset_positions


def _integer_tensor(name: str, value: object) -> torch.Tensor:
    tensor = check_tensor(name, value)
    if tensor.is_floating_point() or tensor.is_complex():
        raise TypeError(f"{name} must be an integer or bool tensor, got dtype {tensor.dtype}")
    return tensor


def position_ids_from_attention_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions counting only the real tokens of each row: (batch, seq) mask -> (batch, seq) int64.

    Args:
        attention_mask: 1 (or True) for real tokens, 0 for padding; padding may be on the left (as
            for generation) or the right.

    Returns:
        ``cumsum(mask) - 1`` on real tokens; padding gets position 0 (it is masked out of attention,
        so any valid position does).
    """
    mask = _integer_tensor("attention_mask", attention_mask)
    if mask.dim() != 2:
        raise ValueError(f"attention_mask must have shape (batch, seq), got {tuple(mask.shape)}")
    if mask.numel() and not bool(((mask == 0) | (mask == 1)).all()):
        raise ValueError(
            f"attention_mask must hold only 0/1 (or False/True) values, got {sorted(set(mask.unique().tolist()))[:8]}"
        )
    mask = mask.long()
    return ((mask.cumsum(-1) - 1) * mask).clamp_min(0)


def position_ids_from_cu_seqlens(cu_seqlens: torch.Tensor) -> torch.Tensor:
    """Positions of packed documents given cumulative lengths: (n_docs + 1,) -> (total,) int64.

    Args:
        cu_seqlens: ``[0, len_0, len_0 + len_1, ..., total]``, non-decreasing, starting at 0 (the
            format of FlashAttention's varlen kernels).

    Returns:
        ``[0, 1, ..., len_0 - 1, 0, 1, ..., len_1 - 1, ...]``: every document restarts at 0.
    """
    cu = _integer_tensor("cu_seqlens", cu_seqlens)
    if cu.dim() != 1 or cu.numel() < 1:
        raise ValueError(f"cu_seqlens must be 1-D with at least one entry, got shape {tuple(cu.shape)}")
    cu = cu.long()
    if int(cu[0]) != 0:
        raise ValueError(f"cu_seqlens must start at 0, got {int(cu[0])}")
    lengths = cu[1:] - cu[:-1]
    if lengths.numel() and int(lengths.min()) < 0:
        raise ValueError(f"cu_seqlens must be non-decreasing, got {cu.tolist()}")
    total = int(cu[-1])
    starts = torch.repeat_interleave(cu[:-1], lengths, output_size=total)
    return torch.arange(total, device=cu.device) - starts


def position_ids_from_document_ids(document_ids: torch.Tensor) -> torch.Tensor:
    """Positions restarting wherever the document index changes: (..., seq) -> (..., seq) int64.

    Args:
        document_ids: any integer label per token; a new document starts at every change of label
            along the last dimension (and at the start of each row).
    """
    doc = _integer_tensor("document_ids", document_ids)
    if doc.dim() < 1:
        raise ValueError("document_ids must have at least one dimension (seq)")
    seq = doc.shape[-1]
    if seq == 0:
        return torch.zeros(doc.shape, dtype=torch.long, device=doc.device)
    index = torch.arange(seq, device=doc.device).expand(doc.shape)
    new_doc = torch.ones(doc.shape, dtype=torch.bool, device=doc.device)
    new_doc[..., 1:] = doc[..., 1:] != doc[..., :-1]
    starts = torch.where(new_doc, index, torch.zeros_like(index)).cummax(-1).values
    return index - starts


def position_ids_from_offsets(offsets: Union[int, torch.Tensor], seq_len: int) -> torch.Tensor:
    """``offset + arange(seq_len)`` per row: int or (batch,) offsets -> (1 or batch, seq_len) int64.

    ``offsets`` is the number of tokens each row already has in its KV cache (with left padding:
    the number of *real* tokens, ``attention_mask.sum(-1)``). Checked as
    :meth:`posenc.RotaryEmbedding.forward` checks its ``offset``: exactly, so no position wraps.
    """
    device = offsets.device if isinstance(offsets, torch.Tensor) else torch.device("cpu")
    return offset_positions(seq_len, offsets, device, name="offsets").ids
