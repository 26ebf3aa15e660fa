"""ALiBi: attention with linear biases (Press, Smith, Lewis 2022, "Train Short, Test Long").

No position vectors at all: head ``h`` adds ``-m_h * (i - j)`` to the logit of query ``i`` attending
to key ``j <= i``. Every head penalises distance linearly, each with its own slope, so far tokens
fade smoothly, and nothing in the model depends on having seen a position during training. That is
why ALiBi models trained on short inputs keep their quality on much longer ones.

Slopes. For ``n`` heads with ``n`` a power of two, the slopes are the geometric sequence
``2 ** (-8/n), 2 ** (-16/n), ..., 2 ** (-8)`` (8 heads: 1/2, 1/4, ..., 1/256). For other ``n``, the
paper's code takes the ``p`` slopes for ``p``, the largest power of two below ``n``, and then every
other slope of the ``2p`` sequence until it has ``n``.
"""

from __future__ import annotations

import math
from typing import List, Optional, Tuple

import torch

from ._buffers import PreciseTables, ambient_device
from ._checks import PositionsLike, as_positions, check_int, check_position_dtype, check_tensor
from .schemes import PositionScheme


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """Per-head slopes of Press et al., float64, shape (num_heads,)."""
    check_int("num_heads", num_heads, minimum=1)

    def power_of_two(n: int) -> List[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    p = 2 ** int(math.floor(math.log2(num_heads)))
    slopes = power_of_two(p)
    if p != num_heads:
        slopes += power_of_two(2 * p)[0::2][: num_heads - p]
    return torch.tensor(slopes, dtype=torch.float64, device="cpu")


def alibi_bias(
    slopes: torch.Tensor, q_positions: torch.Tensor, k_positions: torch.Tensor, causal: bool = True
) -> torch.Tensor:
    """The additive bias ``-slope * (i - j)``, shape (heads, Lq, Lk), in ``slopes.dtype``.

    With ``causal=True`` keys after the query (``j > i``) get ``-inf`` (the causal mask). With
    ``causal=False`` the bias is symmetric, ``-slope * |i - j|`` (the paper's encoder variant).
    """
    check_tensor("slopes", slopes, ndim=1, floating=True)
    check_tensor("q_positions", q_positions, ndim=1)
    check_tensor("k_positions", k_positions, ndim=1)
    q_positions = check_position_dtype("q_positions", q_positions)  # int64: exact differences
    k_positions = check_position_dtype("k_positions", k_positions)
    dist = (q_positions.unsqueeze(-1) - k_positions.unsqueeze(0)).to(slopes.dtype)  # (Lq, Lk)
    bias = -slopes.view(-1, 1, 1) * dist.abs()  # (H, Lq, Lk)
    if causal:
        bias = bias.masked_fill((dist < 0).unsqueeze(0), float("-inf"))
    return bias


class ALiBi(PreciseTables, PositionScheme):
    """ALiBi as a position scheme: acts only on the attention logits.

    Args:
        num_heads: attention heads; each gets its own slope (any positive count).

    Shape:
        ``bias(q_positions, k_positions)``: (Lq,), (Lk,) -> (num_heads, Lq, Lk), float32: the distance
        penalty ``-slope * |i - j|`` alone. The attention that adds it applies causality by token order
        (:class:`posenc.model.CausalSelfAttention` does), which stays right when positions restart
        inside a row (packed documents) or repeat (padding). ``forward`` returns the causal matrix.
    """

    name = "alibi"
    accepts_positions = True

    def __init__(self, num_heads: int):
        super().__init__()
        self.num_heads = check_int("num_heads", num_heads, minimum=1)
        slopes = alibi_slopes(num_heads).to(device=ambient_device(), dtype=self.table_dtype)
        self.register_buffer("slopes", slopes, persistent=False)

    def _precise_buffer_names(self) -> Tuple[str, ...]:
        return ("slopes",)

    def _rebuild_tables(self, device: torch.device) -> None:
        self.slopes = alibi_slopes(self.num_heads).to(device=device, dtype=self.table_dtype)

    def bias(self, q_positions: PositionsLike, k_positions: PositionsLike) -> Optional[torch.Tensor]:
        # tensors are checked here; Positions were checked once by the model
        q_ids = as_positions("q_positions", q_positions).ids
        k_ids = as_positions("k_positions", k_positions).ids
        return alibi_bias(self.slopes, q_ids, k_ids, causal=False)

    def forward(self, q_len: int, k_len: Optional[int] = None) -> torch.Tensor:
        """Causal bias for ``q_len`` queries that are the last ``q_len`` of ``k_len`` keys."""
        check_int("q_len", q_len, minimum=1)
        k_len = q_len if k_len is None else check_int("k_len", k_len, minimum=q_len)
        k_pos = torch.arange(k_len, device=self.slopes.device)
        return alibi_bias(self.slopes, k_pos[k_len - q_len :], k_pos, causal=True)

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}"
