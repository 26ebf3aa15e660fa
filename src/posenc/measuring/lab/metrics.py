"""Bits per byte and bootstrap confidence intervals: pure functions of per-position losses.

A byte-level model's cross-entropy in nats divided by ``ln 2`` is the average number of bits it
needs per byte of text. A model that knows nothing (uniform over 256 bytes) needs exactly 8; gzip
manages about 2 on Python source.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from ..._checks import check_float, check_int

LN2 = math.log(2.0)


def bits_per_byte(nats: np.ndarray) -> np.ndarray:
    """Convert cross-entropy in nats (any shape) to bits."""
    return np.asarray(nats, dtype=np.float64) / LN2


def bootstrap_ci(
    per_window: Union[Sequence[float], np.ndarray], *, samples: int = 2000, level: float = 0.95, seed: int = 0
) -> Tuple[float, float]:
    """Percentile bootstrap interval of the mean over windows.

    Windows, not bytes, are resampled: bytes inside one window are strongly correlated, so
    treating them as independent would give intervals that are far too narrow.

    Args:
        per_window: one value per window, shape (n_windows,).
        samples: bootstrap resamples.
        level: coverage in (0, 1).
        seed: seed of the resampling generator (fixed, so reports are reproducible).
    """
    values = np.asarray(per_window, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"per_window must be a non-empty 1-D sequence, got shape {values.shape}")
    check_int("samples", samples, minimum=1)
    check_float("level", level, greater_than=0.0, maximum=0.999999)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, values.size, size=(samples, values.size))
    means = values[idx].mean(axis=1)  # (samples,)
    tail = (1.0 - level) / 2.0 * 100.0
    lo, hi = np.percentile(means, [tail, 100.0 - tail])
    return float(lo), float(hi)


def summarize_losses(
    nats: np.ndarray,
    *,
    piece: Optional[int] = None,
    final_bytes: int = 32,
    bootstrap_samples: int = 2000,
    seed: int = 0,
) -> dict:
    """All reported numbers for one scheme at one length.

    Args:
        nats: per-byte cross-entropy in nats, shape (n_windows, span). Each window was read as
            ``span / piece`` consecutive pieces of ``piece`` bytes, each from position 0.
        piece: the evaluation length (default ``span``: one piece per window).
        final_bytes: size of the window's tail that is the same text at every evaluation length.

    Returns:
        ``bpb`` (all bytes), ``bpb_last_quarter`` (bytes in the last quarter of their piece),
        ``bpb_final32`` (the last ``final_bytes`` of each window), each with a 95% bootstrap
        interval over windows (``*_ci``) and the value of every window (``*_windows``, for paired
        comparisons), plus ``n_windows``.
    """
    nats = np.asarray(nats, dtype=np.float64)
    if nats.ndim != 2 or nats.shape[0] == 0:
        raise ValueError(f"nats must have shape (n_windows, span) with n_windows >= 1, got {nats.shape}")
    span = nats.shape[1]
    piece = span if piece is None else check_int("piece", piece, minimum=1, maximum=span)
    if span % piece:
        raise ValueError(f"piece={piece} must divide the window span {span}")
    check_int("final_bytes", final_bytes, minimum=1, maximum=piece)
    bits = bits_per_byte(nats)  # (W, span)
    in_piece = np.arange(span) % piece  # (span,)
    parts = {
        "bpb": bits,
        "bpb_last_quarter": bits[:, in_piece >= piece - max(1, piece // 4)],
        "bpb_final32": bits[:, span - final_bytes :],
    }
    out: Dict[str, Any] = {}
    for key, part in parts.items():
        per_window = part.mean(axis=1)  # (W,)
        out[key] = float(per_window.mean())
        out[key + "_ci"] = list(bootstrap_ci(per_window, samples=bootstrap_samples, seed=seed))
        # Every window's value, so two models scored on the same windows are compared paired.
        out[key + "_windows"] = [round(float(v), 6) for v in per_window]
    out["n_windows"] = int(nats.shape[0])
    return out
