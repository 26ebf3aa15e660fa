"""Input checks shared by every module.

Every failure raises an exception whose message names the argument, the value that was given and
what is allowed, so a user never has to read a traceback from deep inside torch to learn what went
wrong. Nothing here uses ``assert`` (asserts vanish under ``python -O``).
"""

from __future__ import annotations

import math
from typing import Optional

import torch


def check_int(name: str, value, *, minimum: Optional[int] = None, maximum: Optional[int] = None,
              even: bool = False) -> int:
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


def check_float(name: str, value, *, greater_than: Optional[float] = None,
                minimum: Optional[float] = None, maximum: Optional[float] = None) -> float:
    """Return ``value`` as a finite float after checking its range, else raise with details."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if greater_than is not None and not value > greater_than:
        raise ValueError(f"{name} must be > {greater_than}, got {value}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def check_choice(name: str, value, allowed) -> str:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {sorted(allowed)}, got {value!r}")
    return value


def check_tensor(name: str, value, *, ndim=None, floating: bool = False) -> torch.Tensor:
    """Check that ``value`` is a tensor with the given number of dims (int or tuple of ints)."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if value.dim() not in allowed:
            raise ValueError(f"{name} must have {' or '.join(map(str, allowed))} dimensions, "
                             f"got shape {tuple(value.shape)}")
    if floating and not value.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {value.dtype}")
    return value


def check_positions(name: str, positions: torch.Tensor) -> torch.Tensor:
    """Positions must be an integer tensor of non-negative values."""
    if not isinstance(positions, torch.Tensor):
        raise TypeError(f"{name} must be an integer torch.Tensor, got {type(positions).__name__}")
    if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
        raise TypeError(f"{name} must have an integer dtype (int32 or int64), got {positions.dtype}")
    if positions.numel() and not is_compiling() and int(positions.min()) < 0:
        raise ValueError(f"{name} must be >= 0, got a minimum of {int(positions.min())}")
    return positions


def is_compiling() -> bool:
    """True while torch.compile traces: data-dependent checks (``.item()``) are skipped there."""
    compiler = getattr(torch, "compiler", None)
    return bool(compiler is not None and hasattr(compiler, "is_compiling") and compiler.is_compiling())


def resolve_positions(seq_len: int, position_ids: Optional[torch.Tensor], offset: int,
                      device: torch.device, batch: Optional[int] = None) -> torch.Tensor:
    """Return positions of shape (batch or 1, seq_len) as int64.

    Either ``position_ids`` (shape (batch, seq) or (seq,)) is given, or positions are
    ``offset, offset + 1, ..., offset + seq_len - 1`` (``offset`` is the number of tokens already in a
    KV cache). Giving both a non-zero offset and explicit positions is ambiguous and refused.
    """
    if position_ids is None:
        check_int("offset", offset, minimum=0)
        return torch.arange(offset, offset + seq_len, device=device, dtype=torch.long).unsqueeze(0)
    if offset:
        raise ValueError(f"give either position_ids or offset, not both (offset={offset})")
    check_positions("position_ids", position_ids)
    if position_ids.dim() == 1:
        position_ids = position_ids.unsqueeze(0)
    if position_ids.dim() != 2 or position_ids.shape[-1] != seq_len:
        raise ValueError(f"position_ids must have shape (batch, {seq_len}) or ({seq_len},) to match the "
                         f"sequence length, got {tuple(position_ids.shape)}")
    if batch is not None and position_ids.shape[0] not in (1, batch):
        raise ValueError(f"position_ids has batch size {position_ids.shape[0]}, the input has {batch}; "
                         "allowed: 1 (shared) or the input's batch size")
    return position_ids.to(device=device, dtype=torch.long)
