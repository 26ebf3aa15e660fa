"""FoPE: Fourier position embedding (Hua et al. 2024, "Fourier Position Embedding: Enhancing Attention's
Periodic Extension for Length Generalization").

RoPE gives each rotation pair one frequency. The paper observes that a trained model's linear layers
and activations mix the frequencies (spectral leakage), and that the slowest ones never complete a
period within the training length, so their angles past it were never seen. FoPE therefore

1. keeps only the frequencies that complete a period within the training length ``L``:
   ``theta_j > 2 pi / L`` (or, when ``num_inv_freq`` is given, the first ``num_inv_freq``). The pairs of
   the other frequencies are clipped to frequency 0: they pass through unrotated;
2. makes each kept pair's cos and sin a Fourier series over all the kept frequencies, with learned
   coefficients per head ``h`` (``C`` and ``S``, each (heads, F, F)):

       ``cos_h(m)_d = sum_j cos(m theta_j) C[h, j, d]``,  ``sin_h(m)_d = sum_j sin(m theta_j) S[h, j, d]``,

   and rotates pair ``d = (a, b)`` into ``(a cos_h(m)_d - b sin_h(m)_d, b cos_h(m)_d + a sin_h(m)_d)``.

With ``C = S = I`` this is RoPE on the kept pairs and the identity on the clipped ones. This is the
forward of vLLM's ``FourierRotaryEmbedding`` (``vllm/model_executor/layers/rotary_embedding/fope.py``;
config fields ``num_inv_freq``, ``fope_sep_head``, the ``cos_coef`` and ``sin_coef`` weights of shape
(kv heads, F, F), the clipped pairs padded with cos 1 and sin 0); vLLM only loads the coefficients,
and posenc initialises them as the paper describes, the dominant (own) frequency with weight 1 and
the others small: ``I + init_factor * N(0, 1)`` (vLLM's ``fope_init_factor`` is that factor).

Since ``cos_h(m)`` and ``sin_h(m)`` are no longer the cos and sin of one angle, FoPE neither keeps
norms nor makes scores a function of ``m - n`` alone; the paper's argument is about the spectrum, and
``tests/rope/test_fope.py`` checks the formula, its RoPE limit and its precision.

Precision: the angles ``m theta_j`` are RoPE's exact float64 angles (:func:`posenc.rope.tables.angles_mod_2pi`),
their cos and sin float64, the series summed in float64 and rounded once to the coefficients' dtype's
compute type (float32 for bf16/fp16). The rotation of each head group is :func:`~posenc.rope.apply.apply_rotary`.
"""

from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
from torch import nn

from .._buffers import ambient_device
from .._checks import (
    PositionsLike,
    as_positions,
    check_choice,
    check_float,
    check_int,
    check_tensor,
    checked_positions,
)
from ..schemes import PositionScheme
from .apply import apply_rotary
from .layout import LAYOUTS
from .tables import angles_from_limb_phases, limb_phases, rope_inv_freq


def fope_frequencies(
    rotary_dim: int, base: float, max_position_embeddings: int, num_inv_freq: Optional[int] = None
) -> torch.Tensor:
    """The frequencies FoPE keeps, float64, shape (F,): those with a period shorter than
    ``max_position_embeddings`` (``theta_j > 2 pi / L``), or the first ``num_inv_freq`` if given."""
    check_int("max_position_embeddings", max_position_embeddings, minimum=1)
    inv_freq = rope_inv_freq(rotary_dim, base)
    if num_inv_freq is not None:
        check_int("num_inv_freq", num_inv_freq, minimum=0, maximum=rotary_dim // 2)
        return inv_freq[:num_inv_freq]
    return inv_freq[inv_freq > 2 * math.pi / max_position_embeddings]


def fope_cos_sin(
    angles: torch.Tensor, cos_coef: torch.Tensor, sin_coef: torch.Tensor, pairs: int
) -> Tuple[torch.Tensor, torch.Tensor]:
    """FoPE's per-head cos and sin, float64: angles (B, S, F) -> two (B, heads, S, pairs).

    Args:
        angles: ``m * theta_j`` of the kept frequencies, float64 (B, S, F), as
            :func:`posenc.rope.tables.rope_angles` gives them.
        cos_coef, sin_coef: (heads, F, F) coefficients ``C[h, j, d]``, ``S[h, j, d]``.
        pairs: rotation pairs per head (``rotary_dim // 2``); pairs ``F ..`` get cos 1 and sin 0.
    """
    check_tensor("angles", angles, ndim=3, floating=True)
    cos = torch.einsum("bsj,hjd->bhsd", angles.cos(), cos_coef.to(torch.float64))
    sin = torch.einsum("bsj,hjd->bhsd", angles.sin(), sin_coef.to(torch.float64))
    clipped = pairs - angles.shape[-1]
    if clipped:
        ones = cos.new_ones((*cos.shape[:-1], clipped))
        cos = torch.cat((cos, ones), dim=-1)
        sin = torch.cat((sin, torch.zeros_like(ones)), dim=-1)
    return cos, sin


class FourierRotaryEmbedding(PositionScheme):
    """FoPE (see the module notes) on queries and keys, with learned coefficients per head.

    Args:
        head_dim: features per attention head (even).
        num_heads: coefficient sets, one per key/value head (``num_key_value_heads``); query head
            ``h`` uses set ``h // (q_heads // num_heads)``, as grouped-query attention shares keys.
        base: ``rope_theta``.
        rotary_dim: features rotated per head; ``None``: all.
        layout: ``"half"`` (vLLM's, the NeoX convention) or ``"interleaved"`` rotation pairs.
        max_position_embeddings: the training length ``L``; frequencies with a period of ``L`` or more
            are clipped to 0.
        num_inv_freq: keep the first ``num_inv_freq`` frequencies instead (vLLM's field).
        separate_heads: one coefficient set per head (``fope_sep_head``), else one set for all heads.
        init_factor: the spread of the off-identity coefficients at initialisation (``fope_init_factor``).

    Shape:
        ``rotate(q, k, position_ids)`` and ``forward(q, k, position_ids=None, offset=0)``: q (batch,
        q_heads, seq, head_dim), k (batch, num_heads, seq, head_dim), position_ids (batch or 1, seq).

    Attributes:
        cos_coef, sin_coef: (num_heads or 1, F, F) learned parameters, ``F`` the kept frequencies.
        inv_freq: (F,) float64 on the CPU, the kept frequencies (fixed, so neither saved nor cast).
    """

    name = "fope"
    accepts_positions = True

    def __init__(
        self,
        head_dim: int,
        num_heads: int = 1,
        base: float = 10000.0,
        rotary_dim: Optional[int] = None,
        layout: str = "half",
        max_position_embeddings: int = 2048,
        num_inv_freq: Optional[int] = None,
        separate_heads: bool = True,
        init_factor: float = 0.1,
    ) -> None:
        super().__init__()
        self.head_dim = check_int("head_dim", head_dim, minimum=2, even=True)
        self.rotary_dim = head_dim
        if rotary_dim is not None:
            self.rotary_dim = check_int("rotary_dim", rotary_dim, minimum=2, maximum=head_dim, even=True)
        self.num_heads = check_int("num_heads", num_heads, minimum=1)
        self.base = check_float("base", base, greater_than=1.0)
        self.layout = check_choice("layout", layout, set(LAYOUTS))
        if not isinstance(separate_heads, bool):
            raise TypeError(f"separate_heads must be True or False, got {separate_heads!r}")
        self.separate_heads = separate_heads
        self.init_factor = check_float("init_factor", init_factor, minimum=0.0)
        self.max_position_embeddings = check_int("max_position_embeddings", max_position_embeddings, minimum=1)
        self._inv_freq64 = fope_frequencies(self.rotary_dim, self.base, self.max_position_embeddings, num_inv_freq)
        # exact angles from a per-limb phase table made once (posenc.rope.tables.angles_mod_2pi)
        self._phases = limb_phases(self._inv_freq64)
        device = ambient_device()
        kept = self._inv_freq64.numel()
        sets = self.num_heads if separate_heads else 1
        eye = torch.eye(kept, device=device).expand(sets, kept, kept)
        self.cos_coef = nn.Parameter(eye + self.init_factor * torch.randn(sets, kept, kept, device=device))
        self.sin_coef = nn.Parameter(eye + self.init_factor * torch.randn(sets, kept, kept, device=device))

    @property
    def inv_freq(self) -> torch.Tensor:
        return self._inv_freq64

    @property
    def kept_frequencies(self) -> int:
        return int(self._inv_freq64.numel())

    def cos_sin(self, position_ids: PositionsLike) -> Tuple[torch.Tensor, torch.Tensor]:
        """Per-head tables (B|1, num_heads or 1, S, rotary_dim // 2) in float32 (float64 if the
        coefficients are), differentiable in the coefficients."""
        pos = as_positions("position_ids", position_ids)
        ids = pos.ids if pos.ids.dim() == 2 else pos.ids.view(1, -1)
        angles = angles_from_limb_phases(ids, self._phases.to(ids.device))  # (B|1, S, F) float64
        cos, sin = fope_cos_sin(angles, self.cos_coef, self.sin_coef, self.rotary_dim // 2)
        dtype = torch.float64 if self.cos_coef.dtype == torch.float64 else torch.float32
        return cos.to(dtype), sin.to(dtype)

    def rotate(
        self, q: torch.Tensor, k: torch.Tensor, position_ids: PositionsLike
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """FoPE of q and k, (batch, heads, seq, head_dim), at ``position_ids`` (batch or 1, seq)."""
        pos = as_positions("position_ids", position_ids)
        sets = self.cos_coef.shape[0]
        if sets > 1 and (k.shape[1] != sets or q.shape[1] % sets):
            raise ValueError(
                f"this FourierRotaryEmbedding has {sets} coefficient sets (num_heads): k must have {sets} heads "
                f"and q a multiple of {sets}, got q {q.shape[1]} and k {k.shape[1]} heads"
            )
        key = ("fope", id(self))
        if key not in pos.memo:  # one pair of tables per forward, shared by every layer
            pos.memo[key] = self.cos_sin(pos)
        cos, sin = pos.memo[key]  # (B|1, sets, S, r/2)
        group = q.shape[1] // sets
        q_parts, k_parts = [], []
        for h in range(sets):
            q_h, k_h = apply_rotary(
                q[:, h * group : (h + 1) * group] if sets > 1 else q,
                k[:, h : h + 1] if sets > 1 else k,
                cos[:, h].to(q.device),
                sin[:, h].to(q.device),
                layout=self.layout,
                rotary_dim=self.rotary_dim,
            )
            q_parts.append(q_h)
            k_parts.append(k_h)
        return torch.cat(q_parts, dim=1), torch.cat(k_parts, dim=1)

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, position_ids: Optional[PositionsLike] = None, offset: int = 0
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """FoPE of q and k at ``position_ids`` (batch or 1, seq), or at ``offset + arange(seq)``."""
        check_tensor("q", q, ndim=4, floating=True)
        check_tensor("k", k, ndim=4, floating=True)
        for name, t in (("q", q), ("k", k)):
            if t.shape[-1] != self.head_dim:
                raise ValueError(
                    f"{name} has head_dim {t.shape[-1]} but this FourierRotaryEmbedding was built for "
                    f"head_dim={self.head_dim}"
                )
        if k.shape[0] != q.shape[0] or k.shape[2] != q.shape[2]:
            raise ValueError(
                f"q and k must agree in batch and seq, got q {tuple(q.shape)} and k {tuple(k.shape)} "
                "(as (batch, heads, seq, head_dim))"
            )
        pos = checked_positions(q.shape[2], position_ids, offset, q.device, batch=q.shape[0])
        return self.rotate(q, k, pos)

    def extra_repr(self) -> str:
        return (
            f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, num_heads={self.num_heads}, "
            f"kept_frequencies={self.kept_frequencies}, max_position_embeddings={self.max_position_embeddings}"
        )
