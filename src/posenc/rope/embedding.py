"""``RotaryEmbedding``: RoPE as a module with exact cached tables."""

from __future__ import annotations

from typing import Optional, Tuple

import torch

from .._buffers import PreciseTables, ambient_device
from .._checks import check_choice, check_float, check_int, check_tensor, resolve_positions
from ..schemes import PositionScheme
from .apply import apply_rotary
from .layout import LAYOUTS
from .scaling import rope_frequencies
from .tables import rope_cos_sin


class RotaryEmbedding(PreciseTables, PositionScheme):
    """Rotary position embedding (Su et al. 2021) for queries and keys.

    Pair ``i`` of the query at position ``m`` and of the key at position ``n`` are rotated by
    ``m * theta_i`` and ``n * theta_i``; their dot product then depends on ``m - n`` only. Values are
    never rotated: they carry content, and rotating them would make each output depend on absolute
    position again.

    Args:
        head_dim: features per attention head (even).
        base: ``rope_theta``; 10000 in the paper and Llama 2, 500000 in Llama 3, 1e6 in Qwen 2.
        rotary_dim: features rotated per head (even, <= head_dim); ``None`` rotates all. Hugging Face
            configs give ``partial_rotary_factor`` = rotary_dim / head_dim.
        layout: ``"half"`` (GPT-NeoX / HF) or ``"interleaved"`` (GPT-J / Meta), see
            :mod:`posenc.rope.layout`.
        scaling: a scaling config from :mod:`posenc.rope.scaling` (``None``: no scaling).
        max_position_embeddings: positions cached up front; longer inputs grow the cache.

    Shape:
        ``forward(q, k)``: q (batch, q_heads, seq, head_dim), k (batch, kv_heads, seq, head_dim);
        returns rotated ``(q, k)`` of the same shapes.

    Buffers ``inv_freq``, ``cos_cached`` and ``sin_cached`` are non-persistent float32 and are rebuilt
    from float64 after any dtype cast, so ``model.to(torch.bfloat16)`` never rounds them.
    """

    name = "rope"

    def __init__(self, head_dim: int, base: float = 10000.0, rotary_dim: Optional[int] = None,
                 layout: str = "half", scaling=None, max_position_embeddings: int = 2048):
        super().__init__()
        self.head_dim = check_int("head_dim", head_dim, minimum=2, even=True)
        self.rotary_dim = head_dim if rotary_dim is None else check_int(
            "rotary_dim", rotary_dim, minimum=2, maximum=head_dim, even=True)
        self.base = check_float("base", base, greater_than=1.0)
        self.layout = check_choice("layout", layout, set(LAYOUTS))
        self.scaling = scaling
        self.max_position_embeddings = check_int("max_position_embeddings", max_position_embeddings,
                                                 minimum=1)
        inv_freq, attention_factor = rope_frequencies(scaling, self.rotary_dim, self.base)
        self._inv_freq64 = inv_freq.to(torch.float64).cpu()
        self.attention_factor = float(attention_factor)
        device = ambient_device()
        self.register_buffer("inv_freq", self._inv_freq64.to(device=device, dtype=self.table_dtype),
                             persistent=False)
        cos, sin = self._tables(0, self.max_position_embeddings, device)
        self.register_buffer("cos_cached", cos, persistent=False)
        self.register_buffer("sin_cached", sin, persistent=False)

    # -- caching ---------------------------------------------------------------------------------
    def _tables(self, start: int, stop: int, device) -> Tuple[torch.Tensor, torch.Tensor]:
        positions = torch.arange(start, stop, dtype=torch.float64, device="cpu")
        cos, sin = rope_cos_sin(positions, self._inv_freq64, self.attention_factor, self.table_dtype)
        return cos.to(device), sin.to(device)

    def _precise_buffer_names(self):
        return ("inv_freq", "cos_cached", "sin_cached")

    def _rebuild_tables(self, device):
        self.inv_freq = self._inv_freq64.to(device=device, dtype=self.table_dtype)
        self.cos_cached, self.sin_cached = self._tables(0, self.cos_cached.shape[0], device)

    @property
    def cached_length(self) -> int:
        return self.cos_cached.shape[0]

    def extend(self, length: int) -> None:
        """Grow the cos/sin cache to cover positions ``0 .. length - 1`` (at least doubling)."""
        check_int("length", length, minimum=1)
        rows = self.cached_length
        if length <= rows:
            return
        new_rows = max(length, 2 * rows)
        cos, sin = self._tables(rows, new_rows, self.cos_cached.device)
        self.cos_cached = torch.cat((self.cos_cached, cos))
        self.sin_cached = torch.cat((self.sin_cached, sin))

    # -- lookup and rotation -----------------------------------------------------------------------
    def cos_sin(self, position_ids: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Half-width cos/sin for ``position_ids`` of shape (batch, seq) -> (batch, seq, rotary_dim // 2)."""
        if position_ids.numel():
            self.extend(int(position_ids.max()) + 1)
        return self.cos_cached[position_ids], self.sin_cached[position_ids]

    def rotate(self, q, k, position_ids):
        cos, sin = self.cos_sin(position_ids)
        return apply_rotary(q, k, cos, sin, layout=self.layout, rotary_dim=self.rotary_dim)

    def forward(self, q: torch.Tensor, k: torch.Tensor, position_ids: Optional[torch.Tensor] = None,
                offset: int = 0) -> Tuple[torch.Tensor, torch.Tensor]:
        """Rotate q and k. Positions: explicit ``position_ids`` (batch, seq), or ``offset + arange(seq)``
        where ``offset`` is the number of tokens already in a KV cache."""
        check_tensor("q", q, ndim=4, floating=True)
        check_tensor("k", k, ndim=4, floating=True)
        if q.shape[-1] != self.head_dim:
            raise ValueError(f"q has head_dim {q.shape[-1]} but this RotaryEmbedding was built for "
                             f"head_dim={self.head_dim}")
        pos = resolve_positions(q.shape[2], position_ids, offset, q.device, batch=q.shape[0])
        return self.rotate(q, k, pos)

    def extra_repr(self) -> str:
        return (f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, base={self.base:g}, "
                f"layout={self.layout!r}, scaling={type(self.scaling).__name__ if self.scaling else None}")
