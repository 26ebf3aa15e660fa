"""xPos: RoPE with an exponential decay per pair (Sun et al. 2022, "A Length-Extrapolatable Transformer").

RoPE's score of a query at ``m`` and a key at ``n`` depends on ``m - n`` only, but does not fall off
with distance. xPos multiplies pair ``i`` of the query by ``zeta_i ** ((m - c) / scale_base)`` and pair
``i`` of the key by ``zeta_i ** (-(n - c) / scale_base)``, with

    ``zeta_i = (2 i + 0.4 r) / (1.4 r)``,  ``0 <= i < r / 2`` (``r`` the rotary dimension),

so every ``zeta_i`` lies in ``[0.4 / 1.4, 1)`` and pair ``i``'s part of the score is RoPE's times
``zeta_i ** ((m - n) / scale_base)``: still a function of ``m - n`` alone, now decaying with distance
(fastest in the fast pairs, which the paper's analysis finds least stable far out). The centre ``c``
cancels in every score; it only sets where the query and key factors are 1. This is the formula of
flash-attn's ``RotaryEmbedding(dim, scale_base=...)`` (``flash_attn/layers/rotary.py``: ``scale =
(arange(0, dim, 2) + 0.4 * dim) / (1.4 * dim)``, ``power = (arange(seqlen) - seqlen // 2) /
scale_base``, the queries' cos/sin times ``scale ** power``, the keys' divided by it), which centres
its table at ``seqlen // 2`` of the length it caches; posenc keeps one fixed centre (``center``, 0 by
default), so keys written to a KV cache at one length and queries at another still agree. The paper
and flash-attn recommend ``scale_base = 512``.

Range. The key factor grows as ``(1.4 / 0.4) ** (|n - c| / scale_base)``; past about
``70.3 * scale_base`` positions from the centre it overflows float32 (``scale_base = 512``: 35,977
positions), and the query factor underflows to 0. posenc refuses such positions with a
``ValueError`` naming the largest distance the table's dtype holds, instead of returning ``inf`` or
``nan`` scores.

Precision. The rotation is RoPE's (exact float64 angles, :mod:`posenc.rope.tables`, through
:func:`~posenc.rope.apply.apply_rotary`); the factors are ``exp(((m - c) / scale_base) * log
zeta_i)`` in float64 and rounded once to the computation's dtype (float32, float64 for float64
inputs), in which the rotation and the scaling each round once. bf16/fp16 inputs are rotated and
scaled in float32 and rounded once to their dtype. The range check uses float32's limit whatever the
dtype.
"""

from __future__ import annotations

import math
from typing import Optional, Tuple

import torch

from .._checks import PositionsLike, as_positions, check_float, check_int, check_tensor, checked_positions
from ..schemes import PositionScheme
from .apply import apply_rotary
from .embedding import RotaryEmbedding


def xpos_zeta(rotary_dim: int) -> torch.Tensor:
    """``zeta_i = (2 i + 0.4 r) / (1.4 r)``, float64, shape (rotary_dim // 2,)."""
    check_int("rotary_dim", rotary_dim, minimum=2, even=True)
    i2 = torch.arange(0, rotary_dim, 2, dtype=torch.float64, device="cpu")
    return (i2 + 0.4 * rotary_dim) / (1.4 * rotary_dim)


def xpos_max_distance(rotary_dim: int, scale_base: float, dtype: torch.dtype = torch.float32) -> int:
    """The largest ``|m - c|`` whose factors ``zeta_0 ** (+-|m - c| / scale_base)`` are finite and
    non-zero in ``dtype`` (with a factor-of-two margin below its largest finite value)."""
    log_zeta = -math.log(float(xpos_zeta(rotary_dim)[0]))  # the fastest pair decays most
    headroom = math.log(torch.finfo(dtype).max) - math.log(2.0)
    return int(math.floor(headroom / log_zeta * scale_base))


def xpos_scales(positions: torch.Tensor, rotary_dim: int, scale_base: float, center: int = 0) -> torch.Tensor:
    """The queries' factors ``zeta_i ** ((m - c) / scale_base)``, float64: positions ``P`` -> (*P, r/2).

    The keys' factors are the reciprocals. Formed as ``exp(power * log zeta)`` in float64.
    """
    check_tensor("positions", positions)
    log_zeta = xpos_zeta(rotary_dim).log().to(positions.device)  # (F,)
    power = (positions.to(torch.float64) - center) / scale_base  # (*P,)
    return torch.exp(power.unsqueeze(-1) * log_zeta)


class XPosEmbedding(PositionScheme):
    """xPos (see the module notes): RoPE on queries and keys, with the decay ``zeta_i ** ((m - n) / scale_base)``.

    Args:
        head_dim: features per attention head (even).
        base: ``rope_theta`` of the rotation (10000).
        rotary_dim: rotated (and scaled) features per head; ``None``: all. The rest pass unchanged.
        layout: ``"half"`` or ``"interleaved"`` rotation pairs (:mod:`posenc.rope.layout`).
        scale_base: the decay's length scale (flash-attn's ``scale_base``; 512 in the paper).
        center: the position where both factors are 1 (flash-attn: ``seqlen // 2`` of its table).
        max_position_embeddings: as for :class:`~posenc.rope.RotaryEmbedding` (its initial cache).

    Shape:
        ``rotate(q, k, position_ids)`` and ``forward(q, k, position_ids=None, offset=0)``: q
        (batch, q_heads, seq, head_dim), k (batch, kv_heads, seq, head_dim), position_ids (batch or 1,
        seq) -> ``(q', k')`` of the same shapes and dtypes.

    Attributes:
        rope: the :class:`~posenc.rope.RotaryEmbedding` whose exact cos/sin tables xPos rotates by.
    """

    name = "xpos"
    accepts_positions = True

    def __init__(
        self,
        head_dim: int,
        base: float = 10000.0,
        rotary_dim: Optional[int] = None,
        layout: str = "half",
        scale_base: float = 512.0,
        center: int = 0,
        max_position_embeddings: int = 2048,
    ) -> None:
        super().__init__()
        self.rope = RotaryEmbedding(
            head_dim, base=base, rotary_dim=rotary_dim, layout=layout, max_position_embeddings=max_position_embeddings
        )
        self.scale_base = check_float("scale_base", scale_base, greater_than=0.0)
        self.max_distance = xpos_max_distance(self.rope.rotary_dim, self.scale_base)
        self.center = check_int("center", center, minimum=0, maximum=self.max_distance)

    @property
    def head_dim(self) -> int:
        return self.rope.head_dim

    @property
    def rotary_dim(self) -> int:
        return self.rope.rotary_dim

    @property
    def layout(self) -> str:
        return self.rope.layout

    def _check_range(self, length: Optional[int]) -> None:
        # positions are >= 0, so the farthest from the centre is 0 (checked at construction) or the largest
        if length is not None and length - 1 - self.center > self.max_distance:
            raise ValueError(
                f"position_ids must be <= {self.center + self.max_distance} for this xPos (center={self.center}, "
                f"scale_base={self.scale_base:g}: its factors leave float32's range past {self.max_distance} "
                f"positions from the centre), got a largest position of {length - 1}"
            )

    def scales(self, position_ids: PositionsLike) -> torch.Tensor:
        """The queries' factors at ``position_ids``, float64, spread over the rotary width: (*P, rotary_dim)."""
        pos = as_positions("position_ids", position_ids)
        self._check_range(pos.length)
        half = xpos_scales(pos.ids, self.rotary_dim, self.scale_base, self.center)  # float64
        if self.layout == "half":
            return torch.cat((half, half), dim=-1)  # pair i is (x[i], x[i + r/2])
        return half.repeat_interleave(2, dim=-1)  # pair i is (x[2i], x[2i + 1])

    def rotate(
        self, q: torch.Tensor, k: torch.Tensor, position_ids: PositionsLike
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """xPos of q and k, each (batch, heads, seq, head_dim), at ``position_ids`` (batch or 1, seq)."""
        pos = as_positions("position_ids", position_ids)
        key = ("xpos", id(self))
        if key not in pos.memo:  # one factor table per forward, shared by every layer
            table = self.scales(pos)  # (B|1, S, r) or (S, r)
            pos.memo[key] = (table if table.dim() == 3 else table.unsqueeze(0)).unsqueeze(1)  # (B|1, 1, S, r)
        scale: torch.Tensor = pos.memo[key]
        cos, sin = self.rope.cos_sin(pos)
        dtype = q.dtype
        compute = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
        q_rot, k_rot = apply_rotary(
            q.to(compute), k.to(compute), cos, sin, layout=self.layout, rotary_dim=self.rotary_dim
        )
        r = self.rotary_dim
        scale = scale.to(device=q.device, dtype=compute)
        q_out = torch.cat((q_rot[..., :r] * scale, q_rot[..., r:]), dim=-1)
        k_out = torch.cat((k_rot[..., :r] / scale, k_rot[..., r:]), dim=-1)
        return q_out.to(dtype), k_out.to(k.dtype)

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, position_ids: Optional[PositionsLike] = None, offset: int = 0
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """xPos of q and k at ``position_ids`` (batch or 1, seq), or at ``offset + arange(seq)``."""
        check_tensor("q", q, ndim=4, floating=True)
        check_tensor("k", k, ndim=4, floating=True)
        for name, t in (("q", q), ("k", k)):
            if t.shape[-1] != self.head_dim:
                raise ValueError(
                    f"{name} has head_dim {t.shape[-1]} but this XPosEmbedding was built for head_dim={self.head_dim}"
                )
        if k.shape[0] != q.shape[0] or k.shape[2] != q.shape[2]:
            raise ValueError(
                f"q and k must agree in batch and seq, got q {tuple(q.shape)} and k {tuple(k.shape)} "
                "(as (batch, heads, seq, head_dim))"
            )
        pos = checked_positions(q.shape[2], position_ids, offset, q.device, batch=q.shape[0])
        return self.rotate(q, k, pos)

    def extra_repr(self) -> str:
        return f"scale_base={self.scale_base:g}, center={self.center}"
