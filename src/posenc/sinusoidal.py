"""Additive sinusoidal encodings (Vaswani et al. 2017, "Attention Is All You Need", section 3.5).

For position ``pos`` and pair index ``i`` (``0 <= i < d_model / 2``)::

    PE[pos, 2i]     = sin(pos / base ** (2i / d_model))
    PE[pos, 2i + 1] = cos(pos / base ** (2i / d_model))

with ``base = 10000``. The first pairs are fast waves (wavelength ``2*pi`` positions), the last
ones slow (wavelength up to ``2*pi*base``). Three properties make this a good position code, and the
test suite checks each:

1. bounded: every value lies in [-1, 1], so it never drowns the token embedding it is added to;
2. a fixed offset is a fixed linear map: ``PE[pos + k] = R_k @ PE[pos]`` where ``R_k`` is block
   diagonal with 2x2 rotations by ``k / base ** (2i / d_model)`` and does not depend on ``pos``;
3. unique: distinct positions get distinct vectors over any practical length.

The table is a constant: it is a non-persistent buffer (never a ``Parameter``, never saved in a
``state_dict``), it grows on demand when a longer input arrives, and it stays float32 when the
model around it is cast to bf16/fp16. Its memory is bounded: the cache stops growing at
``cache_limit_bytes`` (64 MiB, 131,072 rows for d_model 128), and positions past it get their rows
computed for that call only, from the same float64 angles (exact at any int64 position).
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch

from ._buffers import PreciseTables, ambient_device
from ._checks import (
    PositionsLike,
    as_positions,
    check_float,
    check_int,
    check_positions,
    check_tensor,
    is_compiling,
)
from .rope.tables import angles_mod_2pi
from .schemes import AdditiveEncoding


def sinusoidal_frequencies(d_model: int, base: float = 10000.0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Angular frequency of each sin/cos pair, ``base ** (-2i / d_model)``, shape (ceil(d_model/2),)."""
    check_int("d_model", d_model, minimum=1)
    check_float("base", base, greater_than=1.0)
    exponents = torch.arange(0, d_model, 2, dtype=torch.float64, device="cpu") / d_model
    return (base**-exponents).to(dtype)


def sinusoidal_table(
    length: int,
    d_model: int,
    base: float = 10000.0,
    *,
    start: int = 0,
    dtype: torch.dtype = torch.float32,
    device: Optional[torch.device] = None,
) -> torch.Tensor:
    """The sinusoidal table for positions ``start .. start + length - 1``.

    Angles are formed and reduced in float64, so values are exact to float32 rounding even at
    positions in the millions (float32 ``pos * freq`` is off by ~1e-2 radians at pos ~ 1e6), and past
    ``2**21`` the position is split so that the product stays exact (see
    :func:`posenc.rope.tables.angles_mod_2pi`).

    Returns:
        Tensor of shape (length, d_model): even columns are sines, odd columns cosines.
        An odd ``d_model`` drops the final cosine column.
    """
    check_int("length", length, minimum=0)
    check_int("start", start, minimum=0)
    pos = torch.arange(start, start + length, dtype=torch.int64, device="cpu")  # (L,)
    return sinusoidal_at(pos, d_model, base, dtype=dtype, device=device)


def sinusoidal_at(
    positions: torch.Tensor,
    d_model: int,
    base: float = 10000.0,
    *,
    dtype: torch.dtype = torch.float32,
    device: Optional[torch.device] = None,
) -> torch.Tensor:
    """Sinusoidal vectors for integer ``positions`` of any shape ``P`` -> (*P, d_model).

    The rows :func:`sinusoidal_table` would hold at those positions, without building the table.
    """
    check_tensor("positions", positions)
    freqs = sinusoidal_frequencies(d_model, base)  # (d/2,)
    if positions.device.type not in ("cpu", "cuda"):
        positions = positions.cpu()  # float64 math needs a device that has it
    angles = angles_mod_2pi(positions, freqs)  # (*P, d/2)
    table = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # (*P, 2*(d/2))
    return table[..., :d_model].to(dtype=dtype, device=device)


class SinusoidalPositionalEncoding(PreciseTables, AdditiveEncoding):
    """Fixed sinusoidal position vectors added to token embeddings.

    Args:
        d_model: width of the token embeddings the table is added to.
        max_len: rows to build up front; ``None`` builds 2048 and grows on demand. The table is
            never a limit: a longer input simply extends it (the waves continue forever).
        base: the 10000 of the paper; larger bases give slower slowest waves.

    Shape:
        ``forward(x)``: x is (batch, seq, d_model) -> same shape, ``x + PE[positions]``.
    """

    name = "sinusoidal"
    accepts_positions = True
    pe: torch.Tensor
    _table: torch.Tensor

    def __init__(self, d_model: int, max_len: Optional[int] = None, base: float = 10000.0):
        super().__init__()
        self.d_model = check_int("d_model", d_model, minimum=1)
        self.base = check_float("base", base, greater_than=1.0)
        initial = 2048 if max_len is None else check_int("max_len", max_len, minimum=1)
        initial = min(initial, self.cache_limit)
        self.register_buffer(
            "pe",
            sinusoidal_table(initial, d_model, base, dtype=self.table_dtype, device=ambient_device()),
            persistent=False,
        )
        self._table = self.pe  # the published table: read once per call, replaced whole

    def _precise_buffer_names(self) -> Tuple[str, ...]:
        return ("pe",)

    def _rebuild_tables(self, device: torch.device) -> None:
        with self._table_lock:
            self.pe = self._table = sinusoidal_table(
                self._table.shape[0], self.d_model, self.base, dtype=self.table_dtype, device=device
            )

    def _tables_moved_to_meta(self) -> None:
        self._table = self.pe

    @property
    def cache_limit(self) -> int:
        """Most rows the cache will ever hold: ``cache_limit_bytes`` over the bytes of one row."""
        row_bytes = self.d_model * (torch.finfo(self.table_dtype).bits // 8)
        return max(1, self.cache_limit_bytes // row_bytes)

    def extend(self, length: int) -> None:
        """Grow the cached table to at least ``length`` rows (explicit growth, doubling).

        The cache never grows past :attr:`cache_limit`; rows beyond it are computed per call.
        """
        check_int("length", length, minimum=1)
        self._grow(min(length, self.cache_limit))

    def _grow(self, length: int) -> torch.Tensor:
        table = self._table
        if length <= table.shape[0]:
            return table
        with self._table_lock:
            table = self._table
            rows = table.shape[0]
            if length <= rows:
                return table
            new_rows = min(max(length, 2 * rows), self.cache_limit)
            if table.device.type == "meta":
                grown = torch.empty(new_rows, self.d_model, dtype=table.dtype, device=table.device)
            else:
                extra = sinusoidal_table(
                    new_rows - rows, self.d_model, self.base, start=rows, dtype=table.dtype, device=table.device
                )
                grown = torch.cat((table, extra), dim=0)
            self.pe = self._table = grown  # readers use _table: one assignment publishes it
            return grown

    def encodings(self, position_ids: PositionsLike) -> torch.Tensor:
        """Position vectors for ``position_ids`` of any shape -> shape (*position_ids.shape, d_model).

        ``position_ids`` is an integer tensor or :class:`posenc._checks.Positions` checked once.
        """
        pos = as_positions("position_ids", position_ids)
        if pos.length is None:
            # values unreadable (torch.compile, meta): the cache as it stands, rows guarded in-graph
            table = self._table if not is_compiling() else self.pe
            ids = check_positions(
                "position_ids",
                pos.ids,
                upper=table.shape[0],
                hint=" (the cached rows; call extend(max_len) before compiling)",
            )
            return table[ids]
        if pos.length <= self.cache_limit:
            return self._grow(max(pos.length, 1))[pos.ids]
        table = self._table
        return sinusoidal_at(pos.ids, self.d_model, self.base, dtype=table.dtype, device=table.device)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, base={self.base:g}, cached_rows={self._table.shape[0]}"
