"""``RotaryEmbedding``: RoPE as a module with exact cached tables, every scaling, and HF interop."""

from __future__ import annotations

from typing import Optional, Tuple, Union

import torch

from .._buffers import PreciseTables, ambient_device
from .._checks import check_choice, check_float, check_int, check_positions, check_tensor, resolve_positions
from ..schemes import PositionScheme
from .apply import apply_rotary, apply_rotary_at
from .layout import LAYOUTS
from .positions import position_ids_from_offsets
from .scaling import DYNAMIC_TYPES, YaRNScaling, rope_frequencies, yarn_softmax_scale
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
        max_position_embeddings: the context length the model was built for (Hugging Face
            ``max_position_embeddings``); the first ``min(max_position_embeddings, 8192)`` positions
            are cached up front and longer inputs grow the cache.

    Shape:
        ``forward(q, k)``: q (batch, q_heads, seq, head_dim), k (batch, kv_heads, seq, head_dim), or
        both with ``heads_first=False`` as (batch, seq, heads, head_dim); q_heads may differ from
        kv_heads (GQA/MQA). Returns rotated ``(q, k)`` of the same shapes.

    Length-dependent scalings (``dynamic`` NTK and ``longrope``). Their frequencies depend on the
    current length ``L = max(position_ids) + 1`` of each call, exactly as in ``transformers``: up to
    ``original_max_position_embeddings`` the cached default (dynamic) or short-factor (longrope) tables
    are used; past it, the tables for ``L`` are computed in float64 for that call. With a KV cache this
    means keys written at one length and queries at another were rotated with *different* frequencies,
    so their scores no longer depend on distance alone (the decode steps past ``L0`` each see a new
    base). For generation call :meth:`freeze_frequencies` with the final length first: every call then
    uses that one set of frequencies, and cached keys and new queries agree. (``transformers`` keeps
    the largest length seen so far instead of the current one; both drift the same way while
    decoding.)

    Buffers ``inv_freq``, ``cos_cached`` and ``sin_cached`` are non-persistent float32 and are rebuilt
    from float64 after any dtype cast, so ``model.to(torch.bfloat16)`` never rounds them; the
    per-call tables of the dynamic types are built from float64 too.

    Attributes:
        attention_factor: the factor on the cos/sin tables (YaRN's mscale, LongRoPE's factor).
        softmax_scale_factor: what DeepSeek-style YaRN multiplies ``1/sqrt(d)`` by outside the tables
            (``yarn_softmax_scale``); 1 for every other configuration.
        frozen_seq_len: the length the frequencies are frozen at, or ``None``.
    """

    name = "rope"
    #: most positions tabulated at construction (a 128k-context config would otherwise cost ~100 MB)
    INITIAL_CACHE = 8192

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
        self.softmax_scale_factor = yarn_softmax_scale(scaling) if isinstance(scaling, YaRNScaling) else 1.0
        self.frozen_seq_len: Optional[int] = None
        device = ambient_device()
        self.register_buffer("inv_freq", self._inv_freq64.to(device=device, dtype=self.table_dtype),
                             persistent=False)
        cos, sin = self._tables(0, min(self.max_position_embeddings, self.INITIAL_CACHE), device)
        self.register_buffer("cos_cached", cos, persistent=False)
        self.register_buffer("sin_cached", sin, persistent=False)

    # -- Hugging Face interop ------------------------------------------------------------------------
    @classmethod
    def from_hf_config(cls, config, **kwargs) -> "RotaryEmbedding":
        """Build from a ``transformers`` config object or a ``config.json`` dict.

        See :func:`posenc.rope.hfconfig.rotary_kwargs_from_hf` (also :mod:`posenc.hf`); ``kwargs``
        (e.g. ``layout``) override the values read from the config.
        """
        from .hfconfig import rotary_kwargs_from_hf        # a sibling in the core, imported where used
        return cls(**{**rotary_kwargs_from_hf(config), **kwargs})

    def to_hf_dict(self) -> dict:
        """The rope-related ``config.json`` fields that describe this module (see
        :func:`posenc.rope.hfconfig.to_hf_dict`); :meth:`from_hf_config` reads them back."""
        from .hfconfig import to_hf_dict
        return to_hf_dict(self)

    # -- frequencies ---------------------------------------------------------------------------------
    @property
    def is_dynamic(self) -> bool:
        """True for scalings whose frequencies depend on the current length (dynamic, longrope)."""
        return getattr(self.scaling, "rope_type", "default") in DYNAMIC_TYPES

    def frequencies(self, seq_len: Optional[int] = None) -> Tuple[torch.Tensor, float]:
        """float64 ``(inv_freq, attention_factor)`` this module uses for a call of length ``seq_len``."""
        if self.frozen_seq_len is not None or not self.is_dynamic or seq_len is None:
            return self._inv_freq64.clone(), self.attention_factor
        return rope_frequencies(self.scaling, self.rotary_dim, self.base, seq_len)

    def _uses_cached_tables(self, seq_len: int) -> bool:
        if self.frozen_seq_len is not None or not self.is_dynamic:
            return True
        return seq_len <= self.scaling.original_max_position_embeddings

    def freeze_frequencies(self, seq_len: int) -> "RotaryEmbedding":
        """Use the frequencies for length ``seq_len`` for every call until :meth:`unfreeze_frequencies`.

        For generation with a KV cache, pass the final length (prompt + new tokens): the prompt's keys
        and every later query are then rotated with the same frequencies, so scores depend on distance
        only. Static scalings are unaffected. Returns ``self``.
        """
        check_int("seq_len", seq_len, minimum=1)
        inv_freq, attention_factor = rope_frequencies(self.scaling, self.rotary_dim, self.base, seq_len)
        self._set_frequencies(inv_freq, attention_factor)
        self.frozen_seq_len = seq_len
        return self

    def unfreeze_frequencies(self) -> "RotaryEmbedding":
        """Go back to choosing frequencies by each call's length. Returns ``self``."""
        inv_freq, attention_factor = rope_frequencies(self.scaling, self.rotary_dim, self.base)
        self._set_frequencies(inv_freq, attention_factor)
        self.frozen_seq_len = None
        return self

    def _set_frequencies(self, inv_freq: torch.Tensor, attention_factor: float) -> None:
        self._inv_freq64 = inv_freq.to(torch.float64).cpu()
        self.attention_factor = float(attention_factor)
        if self.cos_cached.device.type == "meta":
            return
        self._rebuild_tables(self.cos_cached.device)

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
        """Half-width cos/sin for ``position_ids`` of shape (batch, seq) -> (batch, seq, rotary_dim // 2).

        For the dynamic types the call's length is ``max(position_ids) + 1`` (see the class notes).
        """
        check_positions("position_ids", position_ids)
        if not position_ids.numel():
            return self.cos_cached[position_ids], self.sin_cached[position_ids]
        seq_len = int(position_ids.max()) + 1
        if self._uses_cached_tables(seq_len):
            self.extend(seq_len)
            return self.cos_cached[position_ids], self.sin_cached[position_ids]
        inv_freq, attention_factor = rope_frequencies(self.scaling, self.rotary_dim, self.base, seq_len)
        where = self.cos_cached.device
        cos, sin = rope_cos_sin(position_ids.to("cpu"), inv_freq, attention_factor, self.table_dtype)
        return cos.to(where), sin.to(where)

    def rotate(self, q, k, position_ids):
        if torch.compiler.is_compiling() and not self.is_dynamic:
            # No data-dependent growth inside a compiled graph (it would break the graph at .item()):
            # the cache must already cover the positions. Call extend(max_len) before compiling.
            return apply_rotary(q, k, self.cos_cached[position_ids], self.sin_cached[position_ids],
                                layout=self.layout, rotary_dim=self.rotary_dim)
        check_positions("position_ids", position_ids)
        length = int(position_ids.max()) + 1 if position_ids.numel() else 0
        if length and self._uses_cached_tables(length):
            self.extend(length)
            # the fused kernels read the rows named by position_ids straight from the shared tables
            return apply_rotary_at(q, k, self.cos_cached, self.sin_cached, position_ids,
                                   layout=self.layout, rotary_dim=self.rotary_dim)
        cos, sin = self.cos_sin(position_ids)
        return apply_rotary(q, k, cos, sin, layout=self.layout, rotary_dim=self.rotary_dim)

    def forward(self, q: torch.Tensor, k: torch.Tensor, position_ids: Optional[torch.Tensor] = None,
                offset: Union[int, torch.Tensor] = 0, *,
                heads_first: bool = True) -> Tuple[torch.Tensor, torch.Tensor]:
        """Rotate q and k.

        Args:
            q: (batch, q_heads, seq, head_dim), or (batch, seq, q_heads, head_dim) if not heads_first.
            k: the same with kv_heads (GQA/MQA allowed).
            position_ids: (batch, seq) or (seq,) integer positions, e.g. from
                :func:`posenc.rope.positions.position_ids_from_attention_mask` (left padding) or
                :func:`~posenc.rope.positions.position_ids_from_cu_seqlens` (packed documents).
            offset: instead of ``position_ids``: positions ``offset + arange(seq)``, ``offset`` being
                the number of tokens already in a KV cache; an int, or a (batch,) tensor of per-row
                offsets.
            heads_first: whether the heads dimension comes before the sequence dimension.

        Returns:
            ``(q, k)`` rotated, in the input layout, shapes and dtypes.
        """
        check_tensor("q", q, ndim=4, floating=True)
        check_tensor("k", k, ndim=4, floating=True)
        if not isinstance(heads_first, bool):
            raise TypeError(f"heads_first must be True or False, got {heads_first!r}")
        if q.shape[-1] != self.head_dim:
            raise ValueError(f"q has head_dim {q.shape[-1]} but this RotaryEmbedding was built for "
                             f"head_dim={self.head_dim}")
        if not heads_first:
            q, k = q.transpose(1, 2), k.transpose(1, 2)         # (B, H, S, D) views
        seq = q.shape[2]
        if isinstance(offset, torch.Tensor):
            if position_ids is not None:
                raise ValueError("give either position_ids or offset, not both")
            position_ids = position_ids_from_offsets(offset, seq)
            offset = 0
        pos = resolve_positions(seq, position_ids, offset, q.device, batch=q.shape[0])
        q, k = self.rotate(q, k, pos)
        if not heads_first:
            q, k = q.transpose(1, 2), k.transpose(1, 2)
        return q, k

    def extra_repr(self) -> str:
        text = (f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, base={self.base:g}, "
                f"layout={self.layout!r}, scaling={type(self.scaling).__name__ if self.scaling else None}")
        if self.frozen_seq_len is not None:
            text += f", frozen_seq_len={self.frozen_seq_len}"
        return text
