"""Evaluation on fixed validation windows at several multiples of the training length.

Window ``w`` ends at the same byte ``end[w]`` at every evaluation length ``L``: its targets are the
``L`` bytes before ``end[w]`` and its inputs the ``L`` bytes before those shifted by one. Longer
evaluations therefore add context to the left of the same text, and the final 32 targets are the
same bytes at every length: their bits per byte differ only by how well the model uses (or is
confused by) the extra context. Window ends are evenly spaced through the validation stream, so the
set is fixed by the corpus alone, with no randomness.
"""

from __future__ import annotations

import copy
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F

from .._checks import check_int
from ..learned import LearnedPositionalEmbedding
from ..model import TinyLM
from .distributed import Dist, all_reduce_sum
from .metrics import bits_per_byte, summarize_losses


def window_ends(n_bytes: int, max_length: int, n_windows: int) -> np.ndarray:
    """End offsets (exclusive) of ``n_windows`` windows that each fit ``max_length + 1`` bytes.

    Returns shape (n_windows,), evenly spaced over the stream.
    """
    check_int("n_windows", n_windows, minimum=1)
    first = max_length + 1
    if n_bytes < first + n_windows - 1:
        raise ValueError(f"the validation text has {n_bytes} bytes, too few for {n_windows} windows "
                         f"of {max_length + 1} bytes; use more data, fewer eval_windows or shorter "
                         f"eval lengths")
    return np.linspace(first, n_bytes, n_windows).astype(np.int64)


@torch.no_grad()
def per_position_nats(model: TinyLM, data: np.ndarray, ends: np.ndarray, length: int, *,
                      batch: int, device, d: Dist = Dist()) -> np.ndarray:
    """Cross-entropy in nats of every prediction in every window.

    Returns shape (n_windows, length). Under torchrun, window ``w`` is computed by process
    ``w % world`` and the rows are summed across processes, so every process gets the whole array.
    """
    model.eval()
    out = torch.zeros(len(ends), length, dtype=torch.float64, device=device)
    mine = [w for w in range(len(ends)) if w % d.world == d.rank]
    for i in range(0, len(mine), batch):
        idx = mine[i:i + batch]
        rows = np.stack([data[ends[w] - length - 1:ends[w]] for w in idx]).astype(np.int64)
        t = torch.from_numpy(rows).to(device)                                   # (b, L+1)
        logits = model(t[:, :-1])                                               # (b, L, 256)
        nats = F.cross_entropy(logits.float().transpose(1, 2), t[:, 1:], reduction="none")
        out[idx] = nats.to(torch.float64)                                       # (b, L)
    return all_reduce_sum(d, out).cpu().numpy()


def model_for_length(model: TinyLM, length: int, learned_beyond: str) -> tuple:
    """The model to evaluate at ``length`` and a note on how its position limit was handled.

    A learned table has no rows past its training length. With ``learned_beyond="cannot"`` that is
    reported as such (returns ``(None, note)``); with ``"interpolate"`` a copy of the model gets its
    table stretched by :meth:`LearnedPositionalEmbedding.extend` (linear interpolation of the trained
    rows), without retraining.
    """
    scheme = model.scheme
    if not isinstance(scheme, LearnedPositionalEmbedding) or length <= scheme.max_len:
        return model, None
    if learned_beyond == "cannot":
        return None, f"cannot: the learned table has {scheme.max_len} rows"
    stretched = copy.deepcopy(model)
    stretched.scheme.extend(length, method="interpolate")
    return stretched, (f"table interpolated from {scheme.max_len} to {length} rows "
                       f"(LearnedPositionalEmbedding.extend), no retraining")


def evaluate_at(model: TinyLM, data: np.ndarray, ends: np.ndarray, length: int, *, batch: int,
                final_bytes: int, bootstrap_samples: int, seed: int, device, d: Dist = Dist(),
                learned_beyond: str = "interpolate") -> dict:
    """All reported numbers of one model at one length, plus the mean loss at every position.

    Returns the :func:`summarize_losses` dict plus ``loss_by_position`` (bits per byte at each
    position, averaged over windows, shape (length,)); for a learned table that cannot be used,
    ``{"cannot": True, "note": ...}``.
    """
    target, note = model_for_length(model, length, learned_beyond)
    if target is None:
        return {"cannot": True, "note": note}
    nats = per_position_nats(target, data, ends, length, batch=batch, device=device, d=d)
    result = summarize_losses(nats, final_bytes=final_bytes, bootstrap_samples=bootstrap_samples,
                              seed=seed)
    result["loss_by_position"] = [round(float(v), 5) for v in bits_per_byte(nats).mean(axis=0)]
    if note:
        result["note"] = note
    return result
