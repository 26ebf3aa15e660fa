"""Passkey retrieval: does a model *use* a distant part of its input, or only tolerate it?

Perplexity can stay flat past the training length simply because far tokens stop mattering (ALiBi's
bias makes them nearly invisible). Retrieval asks the opposite question: a key planted far back must
be copied at the end. The task follows the passkey tests of the position-interpolation paper (Chen et
al. 2023) and YaRN (Peng et al. 2023), at byte level:

* a sequence of ``n + 1`` bytes of **real corpus text** (the filler);
* somewhere inside it, the plant ``<key:DDDDD>`` with a random 5-digit key (10000-99999);
* the sequence ends with the query ``<key:`` followed by the same 5 digits, which are the last five
  next-byte targets.

The model reads the first ``n`` bytes (the filler, the plant and the query) and must predict the
digits. **Distance** is the number of positions from the first planted digit to the first answer
digit (``d`` in ``[MIN_DISTANCE, n - 9]``).

Training (``LabConfig.retrieval_share``): the steps chosen by :func:`is_retrieval_step` train on
passkey sequences at the training length (filler from the training text) instead of plain text. Their
loss is the usual next-byte loss over every byte **plus** ``retrieval_answer_weight`` times the mean
loss over the five answer bytes (five bytes in a hundred would otherwise be drowned by the filler).
The defaults (half the steps, weight 5) are the mix with which the standard preset's RoPE model
learns the copy within its 1000 steps; ``benchmarks/passkey_curve.py`` measures when it appears.

Evaluation (:func:`evaluate_passkey`): for each length and each distance bin (see :func:`bins`),
``trials`` sequences with filler from the validation text. A trial is **correct** when greedy decoding
reproduces all five digits. Greedy decoding equals the key exactly when, at each answer position, the
arg-max given the *true* preceding digits is the true digit (by induction over the five steps), so one
teacher-forced forward pass decides it. ``logp_bits`` is ``log2 p(key)``, the sum over the five
digits; a model that knows only "five digits follow" scores ``-5 log2 10 = -16.6``.
"""

from __future__ import annotations

import math
from typing import Dict, List, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from ..._checks import check_int
from ...model import TinyLM
from .distributed import Dist, all_reduce_sum
from .metrics import bootstrap_ci
from .stats import clopper_pearson

PLANT_OPEN = b"<key:"
PLANT_CLOSE = b">"
KEY_DIGITS = 5
#: Bytes of the plant ``<key:DDDDD>`` and of the tail ``<key:DDDDD`` (query plus answer).
PLANT_BYTES = len(PLANT_OPEN) + KEY_DIGITS + len(PLANT_CLOSE)
TAIL_BYTES = len(PLANT_OPEN) + KEY_DIGITS
#: Shortest distance (plant right before the query) and the shortest length that fits both.
MIN_DISTANCE = len(PLANT_CLOSE) + TAIL_BYTES
MIN_LENGTH = PLANT_BYTES + TAIL_BYTES + 1
#: Distance bins, in report order.
BIN_NAMES = ("near", "mid", "far")
#: log2 p(key) of a model that spreads its mass evenly over the ten digits.
CHANCE_LOGP_BITS = -KEY_DIGITS * math.log2(10)


def is_retrieval_step(step: int, share: float) -> bool:
    """Whether training step ``step`` (0-based) is a passkey step: exactly ``floor(s * share)`` of the
    first ``s`` steps are, spread evenly (with share 0.5 every other step, with 0.2 steps 4, 9, 14, ...)."""
    if share <= 0.0:
        return False
    return math.floor((step + 1) * share) > math.floor(step * share)


def bins(length: int, train_len: int) -> Dict[str, Tuple[int, int]]:
    """Distance ranges (inclusive) of each bin at evaluation length ``length``.

    ``near``: below half the training length; ``mid``: from half the training length to just under
    it; ``far``: the training length or more, which only exists past the training length. Bins that
    do not fit ``length`` are left out (``far`` at 1x).
    """
    check_int("length", length, minimum=MIN_LENGTH)
    check_int("train_len", train_len, minimum=MIN_LENGTH)
    top = max_distance(length)
    half = max(MIN_DISTANCE + 1, train_len // 2)
    ranges = {"near": (MIN_DISTANCE, half - 1), "mid": (half, train_len - 1), "far": (train_len, top)}
    return {name: (lo, min(hi, top)) for name, (lo, hi) in ranges.items() if lo <= min(hi, top)}


def max_distance(length: int) -> int:
    """Largest distance that fits a sequence read as ``length`` input bytes (plant at position 0)."""
    # The answer's first digit is byte n + 1 - KEY_DIGITS of the n + 1 bytes; the planted first
    # digit is byte len(PLANT_OPEN) when the plant starts the sequence.
    return length + 1 - KEY_DIGITS - len(PLANT_OPEN)


def build_sequence(filler: np.ndarray, key: int, distance: int) -> np.ndarray:
    """``filler`` (``n + 1`` bytes) with the plant at ``distance`` and the query and answer at the end.

    Returns a new uint8 array of shape (n + 1,): inputs are ``[:-1]``, the last ``KEY_DIGITS`` bytes
    are the answer.
    """
    total = filler.size
    if not MIN_DISTANCE <= distance <= max_distance(total - 1):
        raise ValueError(
            f"distance must be in [{MIN_DISTANCE}, {max_distance(total - 1)}] for a "
            f"sequence of {total - 1} input bytes, got {distance}"
        )
    if not 10 ** (KEY_DIGITS - 1) <= key < 10**KEY_DIGITS:
        raise ValueError(f"key must have exactly {KEY_DIGITS} digits, got {key}")
    digits = str(key).encode("ascii")
    seq = np.array(filler, dtype=np.uint8, copy=True)
    answer = total - KEY_DIGITS  # index of the first answer digit
    start = answer - distance - len(PLANT_OPEN)  # index of the plant's "<"
    plant = PLANT_OPEN + digits + PLANT_CLOSE
    seq[start : start + PLANT_BYTES] = np.frombuffer(plant, dtype=np.uint8)
    seq[total - TAIL_BYTES :] = np.frombuffer(PLANT_OPEN + digits, dtype=np.uint8)
    return seq


def training_rows(data: np.ndarray, offsets: np.ndarray, length: int, seed: int, step: int) -> np.ndarray:
    """The passkey rows of one training step: shape (len(offsets), length + 1) uint8.

    Filler starts at ``offsets`` in ``data``; keys and distances are a pure function of
    ``(seed, step)`` and of the row, so every process of a torchrun job builds the same global batch.
    """
    rng = np.random.default_rng([seed, step, 7919])
    keys = rng.integers(10 ** (KEY_DIGITS - 1), 10**KEY_DIGITS, size=len(offsets))
    dists = rng.integers(MIN_DISTANCE, max_distance(length) + 1, size=len(offsets))
    return np.stack(
        [build_sequence(data[o : o + length + 1], int(k), int(dd)) for o, k, dd in zip(offsets, keys, dists)]
    )


def answer_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the last ``KEY_DIGITS`` targets. logits (B, L, V), targets (B, L)."""
    tail = logits[:, -KEY_DIGITS:]
    return F.cross_entropy(tail.reshape(-1, tail.shape[-1]), targets[:, -KEY_DIGITS:].reshape(-1))


def trial_plan(length: int, train_len: int, trials: int, n_bytes: int, seed: int) -> List[Tuple[str, int, int, int]]:
    """``(bin, filler offset, key, distance)`` of every trial at ``length``; a pure function of the
    arguments, so every scheme and method is asked the same questions about the same text."""
    check_int("trials", trials, minimum=1)
    if n_bytes < length + 2:
        raise ValueError(f"the validation text has {n_bytes} bytes, fewer than one passkey sequence of {length + 1}")
    plan = []
    for b, (name, (lo, hi)) in enumerate(bins(length, train_len).items()):
        rng = np.random.default_rng([seed, length, b, 104729])
        offsets = rng.integers(0, n_bytes - length - 1, size=trials)
        keys = rng.integers(10 ** (KEY_DIGITS - 1), 10**KEY_DIGITS, size=trials)
        dists = rng.integers(lo, hi + 1, size=trials)
        plan += [(name, int(o), int(k), int(dd)) for o, k, dd in zip(offsets, keys, dists)]
    return plan


@torch.no_grad()
def score_trials(
    model: TinyLM, data: np.ndarray, plan, length: int, *, batch: int, device, d: Dist = Dist()
) -> Tuple[np.ndarray, np.ndarray]:
    """``(correct, logp_bits)``, each shape (len(plan),): greedy exact match (0/1) and log2 p(key)
    of every trial. Under torchrun trial ``i`` runs on process ``i % world`` and results are summed."""
    model.eval()
    correct = torch.zeros(len(plan), dtype=torch.float64, device=device)
    logp = torch.zeros(len(plan), dtype=torch.float64, device=device)
    mine = [i for i in range(len(plan)) if i % d.world == d.rank]
    for i in range(0, len(mine), max(1, batch)):
        part = mine[i : i + batch]
        rows = np.stack(
            [build_sequence(data[plan[j][1] : plan[j][1] + length + 1], plan[j][2], plan[j][3]) for j in part]
        ).astype(np.int64)
        t = torch.from_numpy(rows).to(device)  # (b, n + 1)
        logits = model(t[:, :-1])[:, -KEY_DIGITS:].float()  # (b, 5, 256)
        answer = t[:, -KEY_DIGITS:]  # (b, 5)
        logprobs = F.log_softmax(logits, dim=-1).gather(-1, answer[..., None])[..., 0]  # (b, 5)
        hit = (logits.argmax(-1) == answer).all(dim=-1)  # (b,)
        index = torch.tensor(part, device=device)
        correct[index] = hit.to(torch.float64)
        logp[index] = logprobs.sum(-1).to(torch.float64) / math.log(2.0)
    correct, logp = all_reduce_sum(d, correct), all_reduce_sum(d, logp)
    return correct.cpu().numpy(), logp.cpu().numpy()


def summarize_trials(
    plan, correct: np.ndarray, logp_bits: np.ndarray, *, length: int, train_len: int, bootstrap_samples: int, seed: int
) -> Dict[str, dict]:
    """Per bin: ``accuracy`` (share of exact matches, with the exact Clopper–Pearson 95% interval)
    and ``logp_bits`` (mean over trials, with a 95% bootstrap interval over trials), ``trials``,
    ``correct`` and ``logp`` (every trial's outcome, in plan order, so two models asked the same
    questions are compared paired), and the bin's ``distance`` range ``[lo, hi]``."""
    out = {}
    ranges = bins(length, train_len)
    for name in BIN_NAMES:
        idx = [i for i, p in enumerate(plan) if p[0] == name]
        if not idx:
            continue
        acc, lp = correct[idx], logp_bits[idx]
        out[name] = {
            "accuracy": float(acc.mean()),
            "accuracy_ci": list(clopper_pearson(int(acc.sum()), len(idx))),
            "logp_bits": float(lp.mean()),
            "logp_bits_ci": list(bootstrap_ci(lp, samples=bootstrap_samples, seed=seed)),
            "trials": len(idx),
            "correct": [int(v) for v in acc],
            "logp": [round(float(v), 4) for v in lp],
            "distance": list(ranges[name]),
        }
    return out


def evaluate_passkey(
    model: TinyLM,
    data: np.ndarray,
    length: int,
    *,
    train_len: int,
    trials: int,
    batch: int,
    bootstrap_samples: int,
    seed: int,
    device,
    d: Dist = Dist(),
) -> Dict[str, dict]:
    """Passkey retrieval of ``model`` at ``length``: :func:`summarize_trials` of the fixed plan."""
    plan = trial_plan(length, train_len, trials, data.size, seed)
    correct, logp = score_trials(model, data, plan, length, batch=batch, device=device, d=d)
    return summarize_trials(
        plan, correct, logp, length=length, train_len=train_len, bootstrap_samples=bootstrap_samples, seed=seed
    )
