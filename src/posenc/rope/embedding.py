"""``RotaryEmbedding``: RoPE as a module with exact cached tables, every scaling, and HF interop."""

from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional, Tuple, Union

import torch

from .._buffers import PreciseTables, ambient_device
from .._checks import (
    Positions,
    PositionsLike,
    as_positions,
    check_choice,
    check_float,
    check_int,
    check_positions,
    check_tensor,
    checked_positions,
    is_compiling,
)
from ..schemes import PositionScheme
from .apply import apply_rotary, check_dense
from .layout import LAYOUTS
from .registry import is_length_dependent, softmax_scale
from .scaling import rope_frequencies
from .tables import rope_cos_sin


class _State(NamedTuple):
    """Everything a call reads, published as one object (see ``_publish``)."""

    cos: torch.Tensor  # (rows, rotary_dim // 2), table_dtype, on the module's device
    sin: torch.Tensor
    inv_freq64: torch.Tensor  # (rotary_dim // 2,) float64 on CPU: what the tables were built from
    attention_factor: float
    frozen_seq_len: Optional[int]


class _Gathered(NamedTuple):
    """cos/sin rows looked up for one :class:`Positions`, kept in its memo for every layer of a
    forward; ``state`` is the :class:`_State` they were read from (a grown cache invalidates them)."""

    state: _State
    cos: torch.Tensor  # (batch, seq, rotary_dim // 2)
    sin: torch.Tensor


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

    Bounded memory at any position. The cos/sin cache covers positions ``0 .. cache_limit - 1``, where
    ``cache_limit`` is what fits in ``cache_limit_bytes`` (64 MiB: 131,072 positions for
    rotary_dim 128 in float32, enough for a 128k context). A call that reaches past it gets cos/sin
    computed for just the positions it names, from the same float64 angles (exact to ~1e-8 rad for
    every int64 position, see :func:`posenc.rope.tables.angles_mod_2pi`): decoding one token at
    position ``2**40`` builds one row, not a table.

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

    Threads. One module may serve several threads: the cache grows by building new tables and
    publishing cos, sin and the frequencies they came from as one object under a lock; every call
    reads that object once.

    Attributes:
        attention_factor: the factor on the cos/sin tables (YaRN's mscale, LongRoPE's factor).
        softmax_scale_factor: what DeepSeek-style YaRN multiplies ``1/sqrt(d)`` by outside the tables
            (the descriptor's ``softmax_scale``); 1 for every other configuration.
        frozen_seq_len: the length the frequencies are frozen at, or ``None``.
    """

    name = "rope"
    accepts_positions = True
    #: most positions tabulated at construction (a 128k-context config would otherwise cost ~100 MB)
    INITIAL_CACHE = 8192
    inv_freq: torch.Tensor
    cos_cached: torch.Tensor
    sin_cached: torch.Tensor

    def __init__(
        self,
        head_dim: int,
        base: float = 10000.0,
        rotary_dim: Optional[int] = None,
        layout: str = "half",
        scaling: Any = None,
        max_position_embeddings: int = 2048,
    ) -> None:
        super().__init__()
        self.head_dim = check_int("head_dim", head_dim, minimum=2, even=True)
        self.rotary_dim = (
            head_dim
            if rotary_dim is None
            else check_int("rotary_dim", rotary_dim, minimum=2, maximum=head_dim, even=True)
        )
        self.base = check_float("base", base, greater_than=1.0)
        self.layout = check_choice("layout", layout, set(LAYOUTS))
        self.scaling = scaling
        self.max_position_embeddings = check_int("max_position_embeddings", max_position_embeddings, minimum=1)
        inv_freq, attention_factor = rope_frequencies(scaling, self.rotary_dim, self.base)
        self.softmax_scale_factor = softmax_scale(scaling)
        self._is_dynamic = is_length_dependent(scaling)
        inv64 = inv_freq.to(torch.float64).cpu()
        device = ambient_device()
        self.register_buffer("inv_freq", inv64.to(device=device, dtype=self.table_dtype), persistent=False)
        rows = min(self.max_position_embeddings, self.INITIAL_CACHE, self.cache_limit)
        cos, sin = self._table_rows(inv64, float(attention_factor), 0, rows, device)
        self.register_buffer("cos_cached", cos, persistent=False)
        self.register_buffer("sin_cached", sin, persistent=False)
        self._publish(_State(cos, sin, inv64, float(attention_factor), None))

    # -- Hugging Face interop ------------------------------------------------------------------------
    @classmethod
    def from_hf_config(cls, config: Any, **kwargs: Any) -> "RotaryEmbedding":
        """Build from a ``transformers`` config object or a ``config.json`` dict.

        See :func:`posenc.rope.hfconfig.rotary_kwargs_from_hf` (also :mod:`posenc.hf`); ``kwargs``
        (e.g. ``layout``) override the values read from the config.
        """
        from .hfconfig import rotary_kwargs_from_hf  # a sibling in the core, imported where used

        return cls(**{**rotary_kwargs_from_hf(config), **kwargs})

    def to_hf_dict(self) -> Dict[str, Any]:
        """The rope-related ``config.json`` fields that describe this module (see
        :func:`posenc.rope.hfconfig.to_hf_dict`); :meth:`from_hf_config` reads them back."""
        from .hfconfig import to_hf_dict

        return to_hf_dict(self)

    # -- published state -----------------------------------------------------------------------------
    @property
    def attention_factor(self) -> float:
        return self._state.attention_factor

    @property
    def frozen_seq_len(self) -> Optional[int]:
        return self._state.frozen_seq_len

    @property
    def _inv_freq64(self) -> torch.Tensor:
        return self._state.inv_freq64

    def _publish(self, state: _State) -> None:
        """Make ``state`` current in one assignment (callers hold the lock); mirror it in the buffers."""
        self._state = state
        self.cos_cached, self.sin_cached = state.cos, state.sin

    # -- frequencies ---------------------------------------------------------------------------------
    @property
    def is_dynamic(self) -> bool:
        """True for scalings whose frequencies depend on the current length (dynamic, longrope)."""
        return self._is_dynamic

    def frequencies(self, seq_len: Optional[int] = None) -> Tuple[torch.Tensor, float]:
        """float64 ``(inv_freq, attention_factor)`` this module uses for a call of length ``seq_len``."""
        state = self._state
        if state.frozen_seq_len is not None or not self.is_dynamic or seq_len is None:
            return state.inv_freq64.clone(), state.attention_factor
        return rope_frequencies(self.scaling, self.rotary_dim, self.base, seq_len)

    def _uses_cached_frequencies(self, state: _State, seq_len: int) -> bool:
        if state.frozen_seq_len is not None or not self.is_dynamic:
            return True
        return bool(seq_len <= self.scaling.original_max_position_embeddings)

    def freeze_frequencies(self, seq_len: int) -> "RotaryEmbedding":
        """Use the frequencies for length ``seq_len`` for every call until :meth:`unfreeze_frequencies`.

        For generation with a KV cache, pass the final length (prompt + new tokens): the prompt's keys
        and every later query are then rotated with the same frequencies, so scores depend on distance
        only. Static scalings are unaffected. Returns ``self``.
        """
        check_int("seq_len", seq_len, minimum=1)
        inv_freq, attention_factor = rope_frequencies(self.scaling, self.rotary_dim, self.base, seq_len)
        self._set_frequencies(inv_freq, attention_factor, seq_len)
        return self

    def unfreeze_frequencies(self) -> "RotaryEmbedding":
        """Go back to choosing frequencies by each call's length. Returns ``self``."""
        inv_freq, attention_factor = rope_frequencies(self.scaling, self.rotary_dim, self.base)
        self._set_frequencies(inv_freq, attention_factor, None)
        return self

    def _set_frequencies(self, inv_freq: torch.Tensor, attention_factor: float, frozen_seq_len: Optional[int]) -> None:
        inv64 = inv_freq.to(torch.float64).cpu()
        with self._table_lock:
            old = self._state
            device = old.cos.device
            self.inv_freq = inv64.to(device=device, dtype=self.table_dtype)
            if device.type == "meta":
                cos, sin = old.cos, old.sin
            else:
                cos, sin = self._table_rows(inv64, float(attention_factor), 0, old.cos.shape[0], device)
            self._publish(_State(cos, sin, inv64, float(attention_factor), frozen_seq_len))

    # -- caching ---------------------------------------------------------------------------------
    def _table_rows(
        self, inv64: torch.Tensor, attention_factor: float, start: int, stop: int, device: Union[torch.device, str]
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        positions = torch.arange(start, stop, dtype=torch.int64, device="cpu")
        cos, sin = rope_cos_sin(positions, inv64, attention_factor, self.table_dtype)
        return cos.to(device), sin.to(device)

    def _precise_buffer_names(self) -> Tuple[str, ...]:
        return ("inv_freq", "cos_cached", "sin_cached")

    def _rebuild_tables(self, device: torch.device) -> None:
        with self._table_lock:
            state = self._state
            self.inv_freq = state.inv_freq64.to(device=device, dtype=self.table_dtype)
            cos, sin = self._table_rows(state.inv_freq64, state.attention_factor, 0, state.cos.shape[0], device)
            self._publish(state._replace(cos=cos, sin=sin))

    def _tables_moved_to_meta(self) -> None:
        with self._table_lock:
            self._publish(self._state._replace(cos=self.cos_cached, sin=self.sin_cached))

    @property
    def cached_length(self) -> int:
        """Positions the cos/sin cache covers now (``0 .. cached_length - 1``)."""
        return self._state.cos.shape[0]

    @property
    def cache_limit(self) -> int:
        """Most positions the cache will ever cover: ``cache_limit_bytes`` over the bytes of one row."""
        row_bytes = 2 * (self.rotary_dim // 2) * (torch.finfo(self.table_dtype).bits // 8)
        return max(1, self.cache_limit_bytes // row_bytes)

    def extend(self, length: int) -> None:
        """Grow the cos/sin cache to cover positions ``0 .. length - 1`` (at least doubling).

        The cache never grows past :attr:`cache_limit`; positions beyond it are computed per call.
        """
        check_int("length", length, minimum=1)
        self._grow(min(length, self.cache_limit))

    def _grow(self, length: int) -> _State:
        """The current state, grown first if it covers fewer than ``length`` rows (length <= limit)."""
        state = self._state
        if length <= state.cos.shape[0]:
            return state
        with self._table_lock:
            state = self._state  # another thread may have grown it meanwhile
            rows = state.cos.shape[0]
            if length <= rows:
                return state
            new_rows = min(max(length, 2 * rows), self.cache_limit)
            device = state.cos.device
            if device.type == "meta":
                cos = torch.empty(new_rows, state.cos.shape[1], dtype=state.cos.dtype, device=device)
                sin = torch.empty_like(cos)
            else:
                cos, sin = self._table_rows(state.inv_freq64, state.attention_factor, rows, new_rows, device)
                cos, sin = torch.cat((state.cos, cos)), torch.cat((state.sin, sin))
            state = state._replace(cos=cos, sin=sin)
            self._publish(state)
            return state

    # -- lookup and rotation -----------------------------------------------------------------------
    def cos_sin(self, position_ids: PositionsLike) -> Tuple[torch.Tensor, torch.Tensor]:
        """Half-width cos/sin for ``position_ids`` of shape (batch, seq) -> (batch, seq, rotary_dim // 2).

        ``position_ids`` is an integer tensor of any shape, or :class:`posenc._checks.Positions`
        checked once per forward. For the dynamic types the call's length is ``max(position_ids) + 1``
        (see the class notes).
        """
        pos = as_positions("position_ids", position_ids)
        gathered: Optional[_Gathered] = pos.memo.get(id(self))
        if gathered is not None and gathered.state is self._state:
            return gathered.cos, gathered.sin
        cos, sin = self._lookup(pos)
        pos.memo[id(self)] = _Gathered(self._state, cos, sin)
        return cos, sin

    def _lookup(self, pos: Positions) -> Tuple[torch.Tensor, torch.Tensor]:
        ids, length = pos.ids, pos.length
        if length is None:
            # values unreadable (meta tensors; torch.compile): the cache as it stands, rows guarded
            state = self._state
            ids = check_positions(
                "position_ids",
                ids,
                upper=state.cos.shape[0],
                hint=" (the cached rows; call extend(max_len) before compiling)",
            )
            return state.cos[ids], state.sin[ids]
        state = self._state
        if not length or (self._uses_cached_frequencies(state, length) and length <= self.cache_limit):
            state = self._grow(length)
            if pos.start is not None and ids.shape[0] == 1:
                return (
                    state.cos[pos.start : length].unsqueeze(0),  # (1, S, r/2) views
                    state.sin[pos.start : length].unsqueeze(0),
                )
            return state.cos[ids], state.sin[ids]
        if self._uses_cached_frequencies(state, length):
            inv_freq, attention_factor = state.inv_freq64, state.attention_factor
        else:
            inv_freq, attention_factor = rope_frequencies(self.scaling, self.rotary_dim, self.base, length)
        # past the cache (or a per-length table): just the rows asked for, from float64 angles,
        # computed where the positions are (no copy back to the host)
        if ids.device.type not in ("cpu", "cuda"):
            ids = ids.cpu()  # float64 math needs a device that has it
        cos, sin = rope_cos_sin(ids, inv_freq, attention_factor, self.table_dtype)
        return cos.to(state.cos.device), sin.to(state.cos.device)

    def rotate(
        self, q: torch.Tensor, k: torch.Tensor, position_ids: PositionsLike
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """Rotate q and k, each (batch, heads, seq, head_dim), at ``position_ids`` (batch or 1, seq).

        ``position_ids`` may be a tensor (checked here, one read-back) or :class:`Positions` checked
        once per forward by the model; the cos/sin rows are then looked up once for all layers.
        """
        if is_compiling() and not self.is_dynamic and not isinstance(position_ids, Positions):
            # No data-dependent growth inside a compiled graph (it would break the graph at .item()):
            # the cache must already cover the positions, which the graph asserts.
            ids = check_positions(
                "position_ids",
                position_ids,
                upper=self.cos_cached.shape[0],
                hint=" (the cached rows; call extend(max_len) before compiling)",
            )
            return apply_rotary(
                q, k, self.cos_cached[ids], self.sin_cached[ids], layout=self.layout, rotary_dim=self.rotary_dim
            )
        cos, sin = self.cos_sin(position_ids)
        return apply_rotary(q, k, cos, sin, layout=self.layout, rotary_dim=self.rotary_dim)

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        position_ids: Optional[PositionsLike] = None,
        offset: Union[int, torch.Tensor] = 0,
        *,
        heads_first: bool = True,
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """Rotate q and k.

        Args:
            q: (batch, q_heads, seq, head_dim), or (batch, seq, q_heads, head_dim) if not heads_first.
            k: the same with kv_heads (GQA/MQA allowed).
            position_ids: (batch, seq) or (seq,) integer positions, e.g. from
                :func:`posenc.rope.positions.position_ids_from_attention_mask` (left padding) or
                :func:`~posenc.rope.positions.position_ids_from_cu_seqlens` (packed documents).
            offset: instead of ``position_ids``: positions ``offset + arange(seq)``, ``offset`` being
                the number of tokens already in a KV cache; an int, or a (batch,) tensor of per-row
                offsets. Every position must fit int64.
            heads_first: whether the heads dimension comes before the sequence dimension.

        Returns:
            ``(q, k)`` rotated, in the input layout, shapes and dtypes.

        One road: q and k are checked against the module, then an int ``offset`` (a decode step,
        or a prefill after a cached prefix) is the cached table and ``row_offset=offset`` for
        :func:`~posenc.rope.apply.apply_rotary`, which the fused kernel reads in place (no
        positions tensor, no slice). Positions, per-row offsets, rows past :attr:`cache_limit`,
        frequencies that depend on this call's length, and code being compiled are checked once
        by :func:`posenc._checks.checked_positions` (the one place offsets are checked) and go
        through :meth:`rotate`, which looks the rows up and calls the same entry.
        """
        if not (heads_first is True and self._fits(q) and self._fits(k)):  # apply_rotary checks the rest
            q, k = self._checked_heads_first(q, k, heads_first)  # (B, H, S, D) views
        if position_ids is None and type(offset) is int and not is_compiling():
            state: Optional[_State] = self._state
            if self._is_dynamic or not 0 <= offset <= self._state.cos.shape[0] - q.shape[2]:
                state = self._cached_rows(offset, q.shape[2])  # grown if needed, or None
            if state is not None:
                q, k = apply_rotary(
                    q, k, state.cos, state.sin, layout=self.layout, rotary_dim=self.rotary_dim, row_offset=offset
                )  # (B, H, S, D) each; cos/sin (rows, r/2), rows offset .. offset + S - 1 read in place
                return (q, k) if heads_first else (q.transpose(1, 2), k.transpose(1, 2))
        pos = checked_positions(q.shape[2], position_ids, offset, q.device, batch=q.shape[0])
        q, k = self.rotate(q, k, pos)
        if not heads_first:
            q, k = q.transpose(1, 2), k.transpose(1, 2)  # (B, S, H, D)
        return q, k

    def _cached_rows(self, offset: int, seq: int) -> Optional[_State]:
        """The published state whose tables hold rows ``offset .. offset + seq - 1`` (grown up to
        :attr:`cache_limit` if needed), or ``None`` when the rows are not the cache's: a negative
        offset (refused by the general path), rows past the limit, or frequencies that depend on
        this call's length."""
        stop = offset + seq
        state = self._state
        if offset < 0 or stop > state.cos.shape[0]:
            if offset < 0 or stop > self.cache_limit:
                return None
            state = self._grow(stop)
        if self._is_dynamic and not self._uses_cached_frequencies(state, stop):
            return None
        return state

    def _fits(self, t: Any) -> bool:
        """Whether ``t`` is a plain dense 4-d tensor with this module's head_dim (what the module
        adds to :func:`~posenc.rope.apply.apply_rotary`'s own checks)."""
        return (
            type(t) is torch.Tensor
            and t.layout is torch.strided
            and not t.is_nested
            and t.dim() == 4
            and t.shape[3] == self.head_dim
        )

    def _checked_heads_first(
        self, q: torch.Tensor, k: torch.Tensor, heads_first: bool
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """q and k checked against this module, as (batch, heads, seq, head_dim) views."""
        check_dense("q", q)
        check_dense("k", k)
        check_tensor("q", q, ndim=4, floating=True)
        check_tensor("k", k, ndim=4, floating=True)
        if not isinstance(heads_first, bool):
            raise TypeError(f"heads_first must be True or False, got {heads_first!r}")
        for name, t in (("q", q), ("k", k)):
            if t.shape[-1] != self.head_dim:
                raise ValueError(
                    f"{name} has head_dim {t.shape[-1]} but this RotaryEmbedding was built for head_dim={self.head_dim}"
                )
        if not heads_first:
            q, k = q.transpose(1, 2), k.transpose(1, 2)
        if k.shape[0] != q.shape[0] or k.shape[2] != q.shape[2]:
            raise ValueError(
                f"q and k must agree in batch and seq, got q {tuple(q.shape)} and k "
                f"{tuple(k.shape)} (as (batch, heads, seq, head_dim))"
            )
        return q, k

    def extra_repr(self) -> str:
        text = (
            f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, base={self.base:g}, "
            f"layout={self.layout!r}, scaling={type(self.scaling).__name__ if self.scaling else None}"
        )
        if self.frozen_seq_len is not None:
            text += f", frozen_seq_len={self.frozen_seq_len}"
        return text
