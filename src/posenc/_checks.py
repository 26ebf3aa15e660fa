"""Input checks shared by every module.

Every failure raises an exception whose message names the argument, the value that was given and
what is allowed, so a user never has to read a traceback from deep inside torch to learn what went
wrong. Nothing here uses ``assert`` (asserts vanish under ``python -O``).

Numbers have one family of checks, in two voices:

* arguments given in code: :func:`check_int` and :func:`check_float` raise ``TypeError`` for a value
  of the wrong type and ``ValueError`` naming the one bound it breaks (``steps must be >= 1, got 0``);
* values read from a config (a ``config.json`` field, a scaling config's field):
  :func:`check_config_int` and :func:`check_config_float` raise ``ValueError`` stating everything
  that is allowed (``config field head_dim must be an integer >= 2 and <= 8192, got 64.5``); a
  whole-number float (``64.0``, as JSON may write it) is accepted where asked for.

Both refuse a bool, a string, NaN, infinity and an int too large for float64 as a number.
"""

from __future__ import annotations

import math
from typing import Any, Collection, NoReturn, Optional, Sequence, Tuple, Union

import torch

#: the largest whole number float64 holds exactly: the upper bound of a whole-number config value
MAX_EXACT_INT = 2**53


def refuse(name: str, value: object, allowed: str) -> NoReturn:
    """Raise ``ValueError`` saying that ``name`` must be ``allowed`` and what it got instead."""
    raise ValueError(f"{name} must be {allowed}, got {value!r}")


def _finite(value: object) -> Optional[float]:
    """``value`` as a finite float; ``None`` for a bool, a non-number, NaN, infinity or an int past float64."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int beyond float64
        return None
    return number if math.isfinite(number) else None


def _bounds(greater_than: Optional[float], minimum: Optional[float], maximum: Optional[float]) -> str:
    """``"> 0 and <= 1"``: the bounds of a number in words (empty when there are none)."""
    named = ((">", greater_than), (">=", minimum), ("<=", maximum))
    return " and ".join(f"{op} {bound:g}" for op, bound in named if bound is not None)


def check_config_float(
    name: str,
    value: object,
    *,
    greater_than: Optional[float] = None,
    minimum: Optional[float] = None,
    maximum: Optional[float] = None,
    allowed: Optional[str] = None,
) -> float:
    """``value``, a number read from a config, as a finite float in range, else ``ValueError``.

    ``allowed`` replaces the words the message gives for what is allowed (default: ``"a finite
    number > 0 and <= 1"`` from the bounds).
    """
    number = _finite(value)
    if (
        number is None
        or (greater_than is not None and not number > greater_than)
        or (minimum is not None and number < minimum)
        or (maximum is not None and number > maximum)
    ):
        bounds = _bounds(greater_than, minimum, maximum)
        refuse(name, value, allowed or "a finite number" + (f" {bounds}" if bounds else ""))
    return number


def check_config_int(
    name: str,
    value: object,
    *,
    minimum: int = 1,
    maximum: Optional[int] = MAX_EXACT_INT,
    even: bool = False,
    whole_float: bool = False,
    allowed: Optional[str] = None,
) -> int:
    """``value``, a whole number read from a config, as an int in range, else ``ValueError``.

    With ``whole_float`` a float with no fractional part is taken as its int (``64.9`` is refused,
    not truncated); without it only an int is. ``allowed`` replaces the words for what is allowed
    (default: ``"an integer >= 1 and <= 2**53"`` from the bounds).
    """
    if allowed is None:
        top = "" if maximum is None else " and <= 2**53" if maximum == MAX_EXACT_INT else f" and <= {maximum}"
        allowed = f"{'an even' if even else 'an'} integer >= {minimum}{top}"
    given = value
    if whole_float and isinstance(value, float) and _finite(value) is not None and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        refuse(name, given, allowed)
    if value < minimum or (maximum is not None and value > maximum) or (even and value % 2):
        refuse(name, given, allowed)  # as given: 1e300, not its 301 digits as an int
    return value


def check_int(
    name: str, value: object, *, minimum: Optional[int] = None, maximum: Optional[int] = None, even: bool = False
) -> int:
    """Return ``value`` as an int after checking its type and range, else raise with details."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    if even and value % 2:
        raise ValueError(f"{name} must be even (sin/cos or rotation pairs need two numbers each), got {value}")
    return value


def check_float(
    name: str,
    value: object,
    *,
    greater_than: Optional[float] = None,
    minimum: Optional[float] = None,
    maximum: Optional[float] = None,
) -> float:
    """Return ``value`` as a finite float after checking its range, else raise with details."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    number = _finite(value)
    if number is None:
        raise ValueError(f"{name} must be finite, got {value if isinstance(value, float) else 'an int beyond float64'}")
    value = number
    if greater_than is not None and not value > greater_than:
        raise ValueError(f"{name} must be > {greater_than}, got {value}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def check_choice(name: str, value: object, allowed: Collection[str]) -> str:
    # Every choice is a string, so anything else (a list, a dict, unhashable or not) is simply not one.
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name} must be one of {sorted(allowed)}, got {value!r}")
    return value


def check_tensor(
    name: str, value: object, *, ndim: Union[int, Sequence[int], None] = None, floating: bool = False
) -> torch.Tensor:
    """Check that ``value`` is a tensor with the given number of dims (int or tuple of ints)."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if value.dim() not in allowed:
            raise ValueError(
                f"{name} must have {' or '.join(map(str, allowed))} dimensions, got shape {tuple(value.shape)}"
            )
    if floating and not value.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {value.dtype}")
    return value


# -- positions: one set of rules for every path -------------------------------------------------------
#
# Positions index tables, so they follow the rules of an index, checked here and nowhere else:
#   * an integer dtype (int8..int64, uint8..uint64); bool is refused by name, because torch reads a
#     bool (and, on some paths, a uint8) tensor used as an index as a *mask*, silently;
#   * every value >= 0, and < the number of rows where a table is bounded;
#   * the result is int64, so no later indexing can treat it as a mask.
# Eager code reads the extremes back once and names the offending value. Inside ``torch.compile`` a
# read-back would break the graph, so the same rules become runtime assertions in the graph
# (``torch._assert_async``): a compiled graph raises instead of wrapping a negative index around to
# the last row. Meta tensors have no values; only the dtype and shape rules apply to them.


def check_position_dtype(name: str, positions: object) -> torch.Tensor:
    """Return ``positions`` as int64 after checking that it is an integer tensor (bool refused)."""
    if not isinstance(positions, torch.Tensor):
        raise TypeError(f"{name} must be an integer torch.Tensor, got {type(positions).__name__}")
    dtype = positions.dtype
    if dtype == torch.bool:
        raise TypeError(
            f"{name} must have an integer dtype, got torch.bool: a bool tensor is a mask, "
            "not positions (convert with .long() if 0/1 positions were meant)"
        )
    if dtype.is_floating_point or dtype.is_complex:
        raise TypeError(f"{name} must have an integer dtype (int32 or int64), got {dtype}")
    return positions if dtype == torch.int64 else positions.to(torch.int64)


def _assert_in_graph(condition: torch.Tensor, message: str) -> None:
    assert_async = getattr(torch, "_assert_async", None)
    if assert_async is not None:
        assert_async(condition.all(), message)
    else:  # pragma: no cover - very old torch
        torch._check_tensor_all(condition, lambda: message)


def _first(positions: torch.Tensor, bad: torch.Tensor) -> str:
    """``"<value> at index (i, j)"`` for the first True entry of ``bad`` (an error path: reads back)."""
    index = tuple(int(i) for i in bad.nonzero()[0])
    return f"{int(positions[index])} at index {index}"


def check_positions(name: str, positions: object, *, upper: Optional[int] = None, hint: str = "") -> torch.Tensor:
    """Apply the position rules to ``positions``; return it as int64.

    Args:
        name: the argument name used in error messages.
        positions: an integer tensor of any shape.
        upper: if given, every position must be ``< upper`` (a bounded table's row count).
        hint: appended to the out-of-range message (what to do about it).

    Raises:
        TypeError: not a tensor, bool, floating or complex dtype.
        ValueError: a negative position, or one ``>= upper``; the message gives the value and its index.
    """
    return _checked(name, positions, upper, hint)[0]


def _checked(name: str, positions: object, upper: Optional[int], hint: str) -> Tuple[torch.Tensor, Optional[int]]:
    """``(int64 positions, max + 1 or 0 if empty, or None when the values cannot be read)``."""
    pos = check_position_dtype(name, positions)
    if not pos.numel():
        return pos, 0
    if pos.device.type == "meta":
        return pos, None
    if is_compiling():
        _assert_in_graph(pos >= 0, f"{name} must be >= 0 (a negative position would wrap to the last table row)")
        if upper is not None:
            _assert_in_graph(pos < upper, f"{name} must be < {upper}{hint}")
        return pos, None
    low, high = torch.stack(torch.aminmax(pos)).tolist()  # one read-back for both ends
    if low < 0:
        raise ValueError(f"{name} must be >= 0, got {_first(pos, pos < 0)}")
    if upper is not None and high >= upper:
        raise ValueError(f"{name} must be < {upper}, got {_first(pos, pos >= upper)}{hint}")
    return pos, high + 1


def _never_compiling() -> bool:
    return False


#: ``torch.compiler.is_compiling`` where this torch has it (2.3+), looked up once: it is on the
#: per-call path of every module.
_compiler_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or _never_compiling


def is_compiling() -> bool:
    """True while torch.compile traces: data-dependent checks become graph assertions there."""
    return _compiler_is_compiling()


class Positions:
    """Positions checked once, to be shared by every layer of one forward pass.

    Checking positions needs their smallest and largest value on the host, which on a GPU is a
    synchronisation. A model checks them once per forward (:func:`checked_positions`) and hands this
    object to every layer; position schemes then neither check nor read back again, and may keep
    per-forward work (gathered cos/sin rows, a bias matrix) in :attr:`memo`.

    Attributes:
        ids: int64 positions, shape (batch or 1, seq), all >= 0.
        length: ``max(ids) + 1`` (0 when empty), known on the host; ``None`` inside ``torch.compile``,
            where it is not read back.
        start: when the positions are ``start + arange(seq)`` in every row (a KV-cache offset), the
            ``start``; else ``None``.
        memo: per-forward scratch space for position schemes, keyed by the scheme.
    """

    __slots__ = ("ids", "length", "start", "memo")

    def __init__(self, ids: torch.Tensor, length: Optional[int], start: Optional[int] = None):
        self.ids = ids
        self.length = length
        self.start = start
        self.memo: dict[Any, Any] = {}

    def __repr__(self) -> str:
        return f"Positions(shape={tuple(self.ids.shape)}, length={self.length}, start={self.start})"


#: What a position hook accepts: an integer tensor, or :class:`Positions` a model checked once.
PositionsLike = Union[torch.Tensor, Positions]


def as_positions(name: str, positions: object) -> Positions:
    """``positions`` if already checked, else check a tensor once (any shape) and wrap it."""
    if isinstance(positions, Positions):
        return positions
    return Positions(*_checked(name, positions, None, ""))


#: The largest position: positions index tables through int64.
INT64_MAX = 2**63 - 1


def checked_positions(
    seq_len: int,
    position_ids: Optional[PositionsLike],
    offset: Union[int, torch.Tensor],
    device: torch.device,
    batch: Optional[int] = None,
) -> Positions:
    """The positions of one call, checked once: the one place where offsets and position ids are.

    Either ``position_ids`` (shape (batch, seq) or (seq,), or :class:`Positions` already checked) or
    ``offset``: an int, or a (batch,) integer tensor of per-row offsets, each the number of tokens
    already in that row's KV cache; the positions are then ``offset + arange(seq_len)``. Giving both
    a non-zero offset and explicit positions is ambiguous and refused.

    Offsets are checked in exact integer arithmetic: every position ``offset + seq_len - 1`` must fit
    int64, so an offset near ``2**63`` is either used exactly or refused by name, never wrapped.
    With ``offset`` the positions are known without reading anything back (a tensor offset is read
    back once); with ``position_ids`` the largest is read back once here.
    """
    if position_ids is not None:
        if isinstance(position_ids, Positions):
            _no_offset(offset)
            return position_ids
        # checked where the values are (a meta target device has none), then moved
        pos = as_positions("position_ids", _shaped_positions(seq_len, position_ids, offset, batch))
        if pos.ids.device != torch.device(device):
            pos = Positions(pos.ids.to(device), pos.length)
        return pos
    return offset_positions(seq_len, offset, device, batch)


def offset_positions(
    seq_len: int,
    offset: Union[int, torch.Tensor],
    device: torch.device,
    batch: Optional[int] = None,
    name: str = "offset",
) -> Positions:
    """``offset + arange(seq_len)``: an int gives (1, seq_len), a (batch,) tensor (batch, seq_len).

    Checked in exact integer arithmetic (Python ints): every offset ``>= 0`` and every position
    ``offset + seq_len - 1 <= 2**63 - 1``, so nothing wraps around. A tensor is read back once; a
    meta tensor has no values and only goes with a meta ``device``.
    """
    check_int("seq_len", seq_len, minimum=0)
    if not isinstance(offset, torch.Tensor):
        check_int(name, offset, minimum=0)
        _fits_int64(name, seq_len, offset, "")
        ids = (torch.arange(seq_len, device=device, dtype=torch.long) + offset).unsqueeze(0)  # (1, S)
        return Positions(ids, offset + seq_len if seq_len else 0, start=offset)
    off = check_position_dtype(name, offset)
    if off.dim() == 0:
        off = off.reshape(1)
    if off.dim() != 1 or (batch is not None and off.shape[0] not in (1, batch)):
        allowed = f"1 or the input's batch size {batch}" if batch is not None else "any"
        raise ValueError(
            f"{name} must be an int or a (batch,) tensor with batch {allowed}, got shape {tuple(off.shape)}"
        )
    if off.device.type == "meta" and torch.device(device).type != "meta":
        raise ValueError(
            f"{name} is a meta tensor, which has no values, but the input is on {device}; allowed: "
            "an int or a tensor with values (a meta tensor only together with meta inputs)"
        )
    length: Optional[int] = 0
    if off.device.type == "meta" or is_compiling():
        length = None  # no values to read: the rules apply where values exist
    elif off.numel():
        low, high = torch.stack(torch.aminmax(off)).tolist()  # one read-back, exact Python ints
        if low < 0:
            raise ValueError(f"{name} must be >= 0, got {_first(off, off < 0)}")
        _fits_int64(name, seq_len, high, f" at index {tuple(int(i) for i in (off == high).nonzero()[0])}")
        length = high + seq_len if seq_len else 0
    ids = off.to(device).unsqueeze(-1) + torch.arange(seq_len, device=device, dtype=torch.long)  # (B, S)
    return Positions(ids, length)


def _fits_int64(name: str, seq_len: int, offset: int, where: str) -> None:
    if seq_len and offset > INT64_MAX - (seq_len - 1):
        raise ValueError(
            f"{name} + seq_len - 1 must be <= 2**63 - 1 (positions are int64), got {name} {offset}{where} "
            f"with seq_len {seq_len}: the last position would be {offset + seq_len - 1}"
        )


def _no_offset(offset: object) -> None:
    if not (isinstance(offset, int) and not isinstance(offset, bool) and offset == 0):
        raise ValueError(f"give either position_ids or offset, not both (offset={offset!r})")


def _shaped_positions(seq_len: int, position_ids: object, offset: object, batch: Optional[int]) -> torch.Tensor:
    """Explicit ``position_ids`` with the dtype and shape rules applied (values not read)."""
    _no_offset(offset)
    position_ids = check_position_dtype("position_ids", position_ids)
    if position_ids.dim() == 1:
        position_ids = position_ids.unsqueeze(0)
    if position_ids.dim() != 2 or position_ids.shape[-1] != seq_len:
        raise ValueError(
            f"position_ids must have shape (batch, {seq_len}) or ({seq_len},) to match the "
            f"sequence length, got {tuple(position_ids.shape)}"
        )
    if batch is not None and position_ids.shape[0] not in (1, batch):
        raise ValueError(
            f"position_ids has batch size {position_ids.shape[0]}, the input has {batch}; "
            "allowed: 1 (shared) or the input's batch size"
        )
    return position_ids
