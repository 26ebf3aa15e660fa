"""Learned absolute position tables (BERT, GPT-2, GPT-3, RoBERTa).

A second ``nn.Embedding(max_len, d_model)`` whose row ``p`` is learned by backpropagation and added
to the token embedding at position ``p``. Simple and effective in distribution, but the table has
exactly ``max_len`` rows: there is no trained vector for position ``max_len`` or beyond (BERT: 512,
GPT-2: 1024). posenc raises :class:`PositionOutOfRangeError` there instead of letting torch fail
with a bare index error, and offers the two ways out: truncate the input, or stretch the table with
:meth:`LearnedPositionalEmbedding.extend`, which linearly interpolates the learned rows (the same
idea as position interpolation for RoPE; the new rows are estimates, so fine-tune afterwards).
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from ._checks import PositionsLike, as_positions, check_choice, check_float, check_int, check_positions
from .schemes import AdditiveEncoding


class PositionOutOfRangeError(IndexError):
    """A position at or past the end of a learned table. Subclass of ``IndexError``."""

    def __init__(self, position: int, max_len: int, largest: Optional[int] = None):
        self.position = position  # the first position asked for that has no row
        self.max_len = max_len
        self.largest = position if largest is None else largest
        asked = "" if self.largest == position else f" (positions up to {self.largest} were asked for)"
        super().__init__(
            f"position {position} is outside the learned position table{asked}, which has {max_len} rows "
            f"(positions 0..{max_len - 1}). A learned table has no trained vector past its last row. "
            f"Ways out: truncate the input to {max_len} tokens, or stretch the table with "
            f"LearnedPositionalEmbedding.extend(new_max_len) (interpolated rows; fine-tune after)."
        )


class LearnedPositionalEmbedding(AdditiveEncoding):
    """A trainable table of ``max_len`` position vectors, added to token embeddings.

    Args:
        max_len: number of rows, i.e. the longest input the model can read.
        d_model: width of each position vector (equal to the token embedding width).
        init_std: standard deviation of the normal initialisation (GPT-2 uses 0.02 for wpe; 0.01 in
            its paper's code). Kept small so positions do not swamp the token embeddings.

    Shape:
        ``forward(x)``: x is (batch, seq, d_model) -> same shape.
    """

    name = "learned"
    accepts_positions = True

    def __init__(self, max_len: int, d_model: int, init_std: float = 0.02):
        super().__init__()
        self.max_len = check_int("max_len", max_len, minimum=1)
        self.d_model = check_int("d_model", d_model, minimum=1)
        check_float("init_std", init_std, minimum=0.0)
        self.weight = nn.Parameter(torch.randn(max_len, d_model) * init_std)

    @property
    def max_positions(self) -> int:  # type: ignore[override]
        return self.max_len

    def encodings(self, position_ids: PositionsLike) -> torch.Tensor:
        """Rows for ``position_ids`` of any shape -> (*position_ids.shape, d_model).

        ``position_ids`` is an integer tensor or :class:`posenc._checks.Positions` checked once per
        forward (then nothing is read back here).
        """
        pos = as_positions("position_ids", position_ids)
        if pos.length is None:
            # inside torch.compile: the graph asserts the bound instead of reading the values back
            ids = check_positions(
                "position_ids", pos.ids, upper=self.max_len, hint=f" (the learned table has {self.max_len} rows)"
            )
            return F.embedding(ids, self.weight)
        if pos.length > self.max_len:
            ids = pos.ids
            first = int(ids[ids >= self.max_len].min())
            raise PositionOutOfRangeError(first, self.max_len, largest=pos.length - 1)
        return F.embedding(pos.ids, self.weight)

    @torch.no_grad()
    def extend(self, new_max_len: int, method: str = "interpolate") -> None:
        """Grow the table to ``new_max_len`` rows, in place.

        Args:
            new_max_len: the new number of rows (> current ``max_len``).
            method: ``"interpolate"`` resamples the learned rows linearly so that row ``j`` of the new
                table sits at old position ``j * (max_len - 1) / (new_max_len - 1)`` (every position
                is squeezed into the trained range, as RoPE position interpolation does);
                ``"repeat_last"`` keeps rows 0..max_len-1 and copies the last row to every new one.

        The parameter object is replaced, so re-create any optimizer that holds the old one.
        """
        check_int("new_max_len", new_max_len, minimum=self.max_len + 1)
        check_choice("method", method, {"interpolate", "repeat_last"})
        old = self.weight.detach()
        if method == "interpolate":
            grid = old.float().t().unsqueeze(0)  # (1, d, L)
            new = F.interpolate(grid, size=new_max_len, mode="linear", align_corners=True)
            new = new.squeeze(0).t().to(old.dtype)  # (L', d)
        else:
            new = torch.cat((old, old[-1:].expand(new_max_len - self.max_len, -1)), dim=0)
        self.weight = nn.Parameter(new.contiguous(), requires_grad=self.weight.requires_grad)
        self.max_len = new_max_len

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, d_model={self.d_model}"
