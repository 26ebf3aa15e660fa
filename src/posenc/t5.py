"""T5's relative position bias (Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a
Unified Text-to-Text Transformer", section 2.1).

No position vectors: every head adds one learned scalar to the logit of query ``i`` attending to key
``j``, and which scalar depends only on the relative position ``r = j - i`` (key minus query), put
into one of ``num_buckets`` buckets. The table is ``nn.Embedding(num_buckets, num_heads)``, named
``relative_attention_bias`` as in T5's code, so a T5 checkpoint's weights load into it unchanged. T5
computes the bias once, in the first layer, and every layer adds the same matrix.

Buckets (Mesh TensorFlow's ``_relative_position_bucket``, which ``transformers``' ``T5Attention``
follows; config keys ``relative_attention_num_buckets`` and ``relative_attention_max_distance``):

* bidirectional (the encoder): half the buckets are for keys before or at the query (``r <= 0``),
  half for keys after it (``r > 0``, offset by ``num_buckets // 2``); ``d = |r|``.
* causal (the decoder): every bucket is for the past, ``d = max(-r, 0)``; keys after the query share
  bucket 0 with ``r = 0`` (the causal mask hides them).

With ``n`` the buckets of one direction (``num_buckets // 2`` bidirectional, else ``num_buckets``)
and ``e = n // 2``: a distance ``d < e`` has a bucket of its own (exact near), and a larger one goes to
``e + floor(log(d / e) / log(max_distance / e) * (n - e))``, capped at ``n - 1``, so the buckets widen
logarithmically and every ``d >= max_distance`` shares the last one. With T5's defaults (32 buckets,
128) an encoder has 8 exact buckets per direction and 8 logarithmic ones covering 8..127.

Which bucket a distance falls in is T5's float32 evaluation of that formula (Mesh TensorFlow's code,
which ``transformers`` follows). It usually equals the real-number value, but not always: with 300
buckets and ``max_distance`` 1117 the encoder's distance 454 gives ``49.9999989`` in real numbers and
``50.0`` in float32, one bucket further. A checkpoint was trained with float32's answer, so posenc
keeps it: the first distance of each logarithmic bucket is found once, from T5's float32 expression
evaluated on the CPU at every distance up to ``max_distance`` (at most ``2**20``), and a distance's
bucket is then the number of those thresholds it reaches, counted in int64 on the tensors' device.
Every int64 distance, on every device, gets the bucket ``transformers`` computes on the CPU
(``tests/test_t5.py`` compares them over a grid of settings).
"""

from __future__ import annotations

import math
from typing import Any, Optional, Tuple

import torch
from torch import nn

from ._buffers import ambient_device
from ._checks import PositionsLike, as_positions, check_int, check_tensor
from .schemes import PositionScheme


def _direction_buckets(num_buckets: int, bidirectional: bool) -> int:
    return num_buckets // 2 if bidirectional else num_buckets


def check_t5_buckets(num_buckets: object, max_distance: object, bidirectional: object) -> Tuple[int, int, bool]:
    """Check T5's bucket settings; return them. Raises naming the argument, the value and the rule.

    Each direction needs at least one exact and one logarithmic bucket (``num_buckets >= 4``
    bidirectional, ``>= 2`` causal), and ``max_distance`` must lie past the exact range
    (``max_distance > e``, with ``e`` the exact buckets of one direction): at or below it the
    logarithm's base ``max_distance / e`` is at most 1 and the formula divides by zero or flips sign.
    """
    if not isinstance(bidirectional, bool):
        raise TypeError(f"bidirectional must be True or False, got {bidirectional!r}")
    buckets = check_int("num_buckets", num_buckets)
    least = 4 if bidirectional else 2
    if buckets < least:
        raise ValueError(
            f"num_buckets must be >= {least} with bidirectional={bidirectional} (each direction needs at least "
            f"one exact and one logarithmic bucket), got {buckets}"
        )
    exact = _direction_buckets(buckets, bidirectional) // 2
    distance = check_int("max_distance", max_distance)
    if distance > MAX_DISTANCE:
        raise ValueError(
            f"max_distance must be <= 2**20 ({MAX_DISTANCE}): the buckets come from T5's float32 formula "
            f"evaluated once at every distance up to it; got {distance}"
        )
    if distance <= exact:
        raise ValueError(
            f"max_distance must be > {exact}, the exact buckets of one direction (num_buckets={buckets}, "
            f"bidirectional={bidirectional}), so that the logarithmic buckets have a range; got {distance}"
        )
    return buckets, distance, bidirectional


#: The largest ``max_distance``: its thresholds come from T5's float32 formula at every distance up to
#: it (about a second at 2**20; T5, mT5 and UL2 use 128).
MAX_DISTANCE = 2**20
_CHUNK = 1 << 16


def t5_bucket_thresholds(num_buckets: int, max_distance: int, bidirectional: bool = True) -> torch.Tensor:
    """The smallest distance of each logarithmic bucket after the first: int64, shape (n - e - 1,).

    ``n`` and ``e`` as in the module notes. Distance ``d >= e`` falls in bucket
    ``e + (number of thresholds <= d)``; distances below ``e`` are their own bucket. The thresholds
    are those of T5's own float32 evaluation of the formula (Mesh TensorFlow's and ``transformers``'),
    evaluated once on the CPU for every distance from ``e`` to ``max_distance``.
    """
    num_buckets, max_distance, bidirectional = check_t5_buckets(num_buckets, max_distance, bidirectional)
    n = _direction_buckets(num_buckets, bidirectional)
    e = n // 2
    wanted = torch.arange(1, n - e, dtype=torch.int64)  # log steps 1 .. n - e - 1
    thresholds = torch.full_like(wanted, max_distance)
    reached = torch.zeros((), dtype=torch.int64)
    log_base = math.log(max_distance / e)
    for first in range(e, max_distance + 1, _CHUNK):
        d = torch.arange(first, min(first + _CHUNK, max_distance + 1), dtype=torch.int64, device="cpu")
        step = (torch.log(d.float() / e) / log_base * (n - e)).to(torch.int64)  # T5's expression
        step = torch.maximum(step.cummax(0).values, reached)  # a farther key never gets a nearer bucket
        found = (wanted > reached) & (wanted <= step[-1])
        thresholds[found] = d[torch.searchsorted(step, wanted[found])]
        reached = step[-1]
    return thresholds


def t5_relative_buckets(
    relative_position: torch.Tensor, thresholds: torch.Tensor, num_buckets: int, bidirectional: bool = True
) -> torch.Tensor:
    """T5's bucket of each relative position ``r = key - query``: int64, same shape.

    Args:
        relative_position: integer tensor, any shape.
        thresholds: :func:`t5_bucket_thresholds` of the same settings, on the positions' device.
        num_buckets: the table's rows.
        bidirectional: encoder (True) or decoder (False) buckets.
    """
    r = relative_position
    n = _direction_buckets(num_buckets, bidirectional)
    e = n // 2
    if bidirectional:
        offset = (r > 0).to(torch.int64) * n
        d = r.abs()
    else:
        offset = torch.zeros_like(r)
        d = (-r).clamp(min=0)
    far = e + torch.searchsorted(thresholds, d.contiguous(), right=True)  # thresholds reached
    return offset + torch.where(d < e, d, far)


def t5_buckets(
    q_positions: torch.Tensor,
    k_positions: torch.Tensor,
    num_buckets: int = 32,
    max_distance: int = 128,
    bidirectional: bool = True,
) -> torch.Tensor:
    """The bucket of every (query, key) pair: (Lq,), (Lk,) integer positions -> (Lq, Lk) int64."""
    q = as_positions("q_positions", check_tensor("q_positions", q_positions, ndim=1)).ids
    k = as_positions("k_positions", check_tensor("k_positions", k_positions, ndim=1)).ids
    thresholds = t5_bucket_thresholds(num_buckets, max_distance, bidirectional).to(q.device)
    return t5_relative_buckets(k.unsqueeze(0) - q.unsqueeze(-1), thresholds, num_buckets, bidirectional)


class T5RelativeBias(PositionScheme):
    """T5's learned relative position bias as a position scheme: acts only on the attention logits.

    Args:
        num_heads: attention heads (``num_heads`` of a ``T5Config``).
        num_buckets: rows of the table (``relative_attention_num_buckets``; 32 in T5, mT5, UL2).
        max_distance: the distance from which every farther key shares the last bucket
            (``relative_attention_max_distance``; 128).
        bidirectional: encoder buckets (keys before and after the query apart, True) or decoder
            buckets (False), as ``not config.is_decoder``.

    Shape:
        ``bias(q_positions, k_positions)``: (Lq,), (Lk,) -> (num_heads, Lq, Lk), in the table's dtype.
        ``forward(q_len, k_len=None, offset=0)``: the bias of queries at ``offset .. offset + q_len - 1``
        over keys ``0 .. k_len - 1`` (``transformers``' ``compute_bias(q_len, k_len, past_seen_tokens)``),
        (num_heads, q_len, k_len). No causal mask is added: the attention applies causality by token
        order (:class:`posenc.model.CausalSelfAttention` does).

    Attributes:
        relative_attention_bias: ``nn.Embedding(num_buckets, num_heads)``; its ``state_dict`` key
            ``relative_attention_bias.weight`` is T5Attention's.
        thresholds: int64 buffer (not saved), the first distance of each logarithmic bucket.
    """

    name = "t5"
    accepts_positions = True
    thresholds: torch.Tensor

    def __init__(self, num_heads: int, num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = True):
        super().__init__()
        self.num_heads = check_int("num_heads", num_heads, minimum=1)
        self.num_buckets, self.max_distance, self.bidirectional = check_t5_buckets(
            num_buckets, max_distance, bidirectional
        )
        self.relative_attention_bias = nn.Embedding(self.num_buckets, self.num_heads)
        thresholds = t5_bucket_thresholds(self.num_buckets, self.max_distance, self.bidirectional)
        self.register_buffer("thresholds", thresholds.to(ambient_device()), persistent=False)

    @classmethod
    def from_hf_config(cls, config: Any, *, is_decoder: Optional[bool] = None) -> "T5RelativeBias":
        """From a ``T5Config`` (or mT5, UMT5, ... or their ``config.json`` dict): ``num_heads``,
        ``relative_attention_num_buckets``, ``relative_attention_max_distance``; bidirectional unless
        ``is_decoder`` (given, or the config's ``is_decoder``)."""
        data = config if isinstance(config, dict) else config.to_dict()
        if "num_heads" not in data:
            raise ValueError(
                "the config has no num_heads; T5RelativeBias.from_hf_config reads a T5-style config "
                "(num_heads, relative_attention_num_buckets, relative_attention_max_distance)"
            )
        decoder = bool(data.get("is_decoder", False)) if is_decoder is None else is_decoder
        return cls(
            data["num_heads"],
            num_buckets=data.get("relative_attention_num_buckets", 32),
            max_distance=data.get("relative_attention_max_distance", 128),
            bidirectional=not decoder,
        )

    def buckets(self, q_positions: PositionsLike, k_positions: PositionsLike) -> torch.Tensor:
        """(Lq,), (Lk,) positions -> (Lq, Lk) int64 buckets in ``[0, num_buckets)``."""
        q = as_positions("q_positions", q_positions).ids
        k = as_positions("k_positions", k_positions).ids
        for name, ids in (("q_positions", q), ("k_positions", k)):
            if ids.dim() != 1:
                raise ValueError(f"{name} must have shape (L,), one position per token, got {tuple(ids.shape)}")
        relative = k.unsqueeze(0) - q.unsqueeze(-1)  # (Lq, Lk): key minus query, as T5 measures
        return t5_relative_buckets(relative, self.thresholds, self.num_buckets, self.bidirectional)

    def bias(self, q_positions: PositionsLike, k_positions: PositionsLike) -> Optional[torch.Tensor]:
        return self._bias(q_positions, k_positions)

    def _bias(self, q_positions: PositionsLike, k_positions: PositionsLike) -> torch.Tensor:
        buckets = self.buckets(q_positions, k_positions).to(self.relative_attention_bias.weight.device)
        values: torch.Tensor = self.relative_attention_bias(buckets)  # (Lq, Lk, H)
        return values.permute(2, 0, 1)  # (H, Lq, Lk)

    def forward(self, q_len: int, k_len: Optional[int] = None, offset: int = 0) -> torch.Tensor:
        """The bias of ``q_len`` queries from position ``offset`` over keys ``0 .. k_len - 1``."""
        check_int("q_len", q_len, minimum=0)
        k_len = q_len if k_len is None else check_int("k_len", k_len, minimum=0)
        check_int("offset", offset, minimum=0, maximum=2**62)
        device = self.thresholds.device
        q = torch.arange(q_len, device=device) + offset
        return self._bias(q, torch.arange(k_len, device=device))

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, num_buckets={self.num_buckets}, max_distance={self.max_distance}, "
            f"bidirectional={self.bidirectional}"
        )
