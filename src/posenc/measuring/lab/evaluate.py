"""Evaluation on fixed validation windows at several multiples of the training length.

The validation text is read through ``eval_windows`` fixed windows, evenly spaced through the
stream (no randomness), each holding ``span`` = the longest evaluation length of target bytes. At
evaluation length ``L`` every window is cut into ``span / L`` consecutive pieces of ``L`` bytes and
each piece is read from scratch, with positions ``0 .. L - 1`` (as Press et al. 2022 evaluate on
non-overlapping chunks). So every length scores **the same bytes**; only how much context each byte
gets, and at which positions, differs:

* ``bpb``: all bytes of the windows, identical text at every length;
* ``bpb_last_quarter``: bytes in the last quarter of their piece (positions ``3L/4 .. L - 1``),
  the ones read furthest past the training length;
* ``bpb_final32``: the final 32 bytes of each window, the last positions of the last piece.
"""

from __future__ import annotations

import copy
from typing import Optional, cast

import numpy as np
import torch
import torch.nn.functional as F

from ..._checks import check_int
from ...learned import LearnedPositionalEmbedding
from ...model import TinyLM
from .distributed import Dist, all_reduce_sum
from .metrics import bits_per_byte, summarize_losses
from .passkey import evaluate_passkey


def window_ends(n_bytes: int, max_length: int, n_windows: int) -> np.ndarray:
    """End offsets (exclusive) of ``n_windows`` windows that each fit ``max_length + 1`` bytes.

    Returns shape (n_windows,), evenly spaced over the stream.
    """
    check_int("n_windows", n_windows, minimum=1)
    first = max_length + 1
    if n_bytes < first + n_windows - 1:
        raise ValueError(
            f"the validation text has {n_bytes} bytes, too few for {n_windows} windows "
            f"of {max_length + 1} bytes; use more data, fewer eval_windows or shorter "
            f"eval lengths"
        )
    return np.linspace(first, n_bytes, n_windows).astype(np.int64)


@torch.no_grad()
def per_position_nats(
    model: TinyLM,
    data: np.ndarray,
    ends: np.ndarray,
    length: int,
    *,
    batch: int,
    device,
    d: Dist = Dist(),
    span: Optional[int] = None,
) -> np.ndarray:
    """Cross-entropy in nats of every byte of every window, read in pieces of ``length``.

    Args:
        ends: window ends (exclusive), shape (n_windows,); each must be >= ``span + 1``.
        length: evaluation length; ``span`` must be a multiple of it.
        batch: sequences of ``span`` bytes per forward pass (shorter pieces are packed up to the
            same number of bytes).
        span: target bytes per window (default ``length``).

    Returns shape (n_windows, span): entry ``[w, t]`` is the loss on byte ``ends[w] - span + t``
    given the bytes before it in its piece. Under torchrun, window ``w`` is computed by process
    ``w % world`` and the rows are summed across processes, so every process gets the whole array.
    """
    span = length if span is None else span
    check_int("length", length, minimum=1)
    if span % length:
        raise ValueError(f"span={span} must be a multiple of length={length}")
    model.eval()
    pieces = span // length
    out = torch.zeros(len(ends), span, dtype=torch.float64, device=device)
    jobs = [(w, c) for w in range(len(ends)) if w % d.world == d.rank for c in range(pieces)]
    rows_per_pass = max(1, batch * pieces)
    for i in range(0, len(jobs), rows_per_pass):
        part = jobs[i : i + rows_per_pass]
        starts = [int(ends[w]) - span + c * length for w, c in part]
        rows = np.stack([data[s - 1 : s + length] for s in starts]).astype(np.int64)
        t = torch.from_numpy(rows).to(device)  # (b, L+1)
        logits = model(t[:, :-1])  # (b, L, 256)
        nats = F.cross_entropy(logits.float().transpose(1, 2), t[:, 1:], reduction="none")
        for row, (w, c) in enumerate(part):
            out[w, c * length : (c + 1) * length] = nats[row].to(torch.float64)
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
    # The deep copy's scheme has the type checked above: a LearnedPositionalEmbedding.
    cast(LearnedPositionalEmbedding, stretched.scheme).extend(length, method="interpolate")
    return stretched, (
        f"table interpolated from {scheme.max_len} to {length} rows (LearnedPositionalEmbedding.extend), no retraining"
    )


def evaluate_at(
    model: TinyLM,
    data: np.ndarray,
    ends: np.ndarray,
    length: int,
    *,
    batch: int,
    final_bytes: int,
    bootstrap_samples: int,
    seed: int,
    device,
    d: Dist = Dist(),
    learned_beyond: str = "interpolate",
    span: Optional[int] = None,
    train_len: Optional[int] = None,
    retrieval_trials: int = 0,
) -> dict:
    """All reported numbers of one model at one length, plus the mean loss at every position.

    ``span`` is the number of target bytes per window (the longest evaluation length; default
    ``length``). Returns the :func:`summarize_losses` dict plus ``loss_by_position`` (bits per byte at
    each position of a piece, averaged over all pieces, shape (length,)) and, when
    ``retrieval_trials`` > 0, ``retrieval`` (:func:`~posenc.measuring.lab.passkey.evaluate_passkey` per
    distance bin, with filler from ``data``; ``train_len`` sets the bins). For a learned table that
    cannot be used, ``{"cannot": True, "note": ...}``.
    """
    target, note = model_for_length(model, length, learned_beyond)
    if target is None:
        return {"cannot": True, "note": note}
    nats = per_position_nats(target, data, ends, length, batch=batch, device=device, d=d, span=span)
    result = summarize_losses(
        nats, piece=length, final_bytes=final_bytes, bootstrap_samples=bootstrap_samples, seed=seed
    )
    by_position = bits_per_byte(nats).reshape(len(ends), -1, length).mean(axis=(0, 1))  # (L,)
    result["loss_by_position"] = [round(float(v), 5) for v in by_position]
    if retrieval_trials:
        result["retrieval"] = evaluate_passkey(
            target,
            data,
            length,
            train_len=train_len or length,
            trials=retrieval_trials,
            batch=batch,
            bootstrap_samples=bootstrap_samples,
            seed=seed,
            device=device,
            d=d,
        )
    if note:
        result["note"] = note
    return result
