"""What ``posenc eval`` measures on a ``transformers`` model: perplexity over fixed windows and
passkey retrieval, as pure functions of the model, the token stream and the plan.

**Perplexity.** ``n_windows`` windows, evenly spaced through the token stream, each holding ``span``
(the longest evaluation length) target tokens. At length ``L`` every window is cut into ``span / L``
consecutive pieces of ``L`` tokens, each read from scratch at positions ``0 .. L - 1`` (the lab's
method, :mod:`posenc.measuring.lab.evaluate`). Every length scores **the same tokens**; only how much context
each one gets differs. When the tokenizer puts a BOS token first, each piece starts with it in place
of the token before the piece, so the model sees the start it was trained on and the same tokens are
still scored.

**Passkey retrieval** (Mohtashami and Jaggi 2023; Kamradt's needle in a haystack; RULER): ``L + 1``
tokens of real filler text; a *plant* saying the key is overwritten at a *depth* (0 = first, 1 = as
late as fits), and the sequence ends with the *query* and the key's tokens. The model reads the first
``L`` tokens. Greedy decoding reproduces the key exactly when at every key position the arg-max,
given the true key tokens before it, is the true token (induction over the key's tokens), so one
teacher-forced pass decides it; ``log2 p(key)`` is the sum over the key's tokens.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F

LN2 = math.log(2.0)


def backbone(model: Any) -> Any:
    """The decoder under a causal LM's output head: ``model.base_model``, or ``model.model`` where the
    class's ``base_model_prefix`` names no attribute (Llama 4's text model says ``language_model``
    and holds its decoder at ``.model``, so ``base_model`` is the whole causal LM)."""
    base = model.base_model
    if base is model and isinstance(getattr(model, "model", None), torch.nn.Module):
        return model.model
    return base


# -- perplexity ---------------------------------------------------------------------------------------
def window_ends(n_tokens: int, span: int, n_windows: int) -> np.ndarray:
    """End offsets (exclusive) of ``n_windows`` windows of ``span + 1`` tokens, evenly spaced."""
    first = span + 1
    if n_tokens < first + n_windows - 1:
        raise ValueError(
            f"the text has {n_tokens} tokens, too few for {n_windows} windows of {span + 1} tokens; "
            f"give a longer --text, fewer --windows or shorter --lengths"
        )
    return np.linspace(first, n_tokens, n_windows).astype(np.int64)


def causal_lm_nats(model: Any, input_ids: torch.Tensor, targets: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
    """Cross-entropy in nats of ``targets`` (B, L) given ``input_ids`` (B, L): shape (B, L), float64.

    The output head is applied ``chunk`` positions at a time, in float32, so the (B, L, vocab) logits
    of a long input are never held at once.
    """
    hidden = backbone(model)(input_ids=input_ids, use_cache=False).last_hidden_state  # (B, L, D)
    head = model.get_output_embeddings()
    out = torch.empty(targets.shape, dtype=torch.float64, device=targets.device)
    for i in range(0, hidden.shape[1], chunk):
        logits = head(hidden[:, i : i + chunk]).float()  # (B, c, V)
        nats = F.cross_entropy(logits.transpose(1, 2), targets[:, i : i + chunk], reduction="none")
        out[:, i : i + chunk] = nats.to(torch.float64)
    return out


def piece_rows(tokens: np.ndarray, ends: np.ndarray, span: int, length: int, bos: Optional[int]) -> Tuple:
    """``(inputs, targets)``, each (n_windows * span / length, length): every piece of every window."""
    if span % length:
        raise ValueError(f"the longest length {span} must be a multiple of every length, got {length}")
    inputs, targets = [], []
    for end in ends:
        for c in range(span // length):
            s = int(end) - span + c * length  # first target token of the piece
            row = np.array(tokens[s - 1 : s + length], dtype=np.int64)  # (L + 1,)
            if bos is not None:
                row[0] = bos
            inputs.append(row[:-1])
            targets.append(row[1:])
    return np.stack(inputs), np.stack(targets)


@torch.no_grad()
def window_nats(
    model: Any,
    tokens: np.ndarray,
    ends: np.ndarray,
    span: int,
    length: int,
    *,
    batch: int,
    device: torch.device,
    bos: Optional[int] = None,
    on_batch: Optional[Callable[[int], None]] = None,
) -> np.ndarray:
    """Per-token cross-entropy in nats of every window read in pieces of ``length``: (n_windows, span).

    ``batch`` is in windows: each forward pass reads ``batch * span`` tokens whatever the length.
    """
    inputs, targets = piece_rows(tokens, ends, span, length, bos)
    per_pass = max(1, batch * (span // length))
    out = np.empty(targets.shape, dtype=np.float64)
    for i in range(0, len(inputs), per_pass):
        x = torch.from_numpy(inputs[i : i + per_pass]).to(device)
        y = torch.from_numpy(targets[i : i + per_pass]).to(device)
        out[i : i + per_pass] = causal_lm_nats(model, x, y).cpu().numpy()
        if on_batch is not None:
            on_batch(len(x))
    return out.reshape(len(ends), span)


# -- passkey ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PasskeyFormat:
    """The words of the passkey task. ``{key}`` is replaced by the key's digits.

    ``plant`` is overwritten into the filler; the sequence ends with ``query`` and then ``answer``,
    whose tokens are the scored key.
    """

    name: str
    plant: str
    query: str
    answer: str
    digits: int = 5


#: Natural-language prompt of the passkey papers (Mohtashami and Jaggi 2023, used by YaRN and LongRoPE).
WORDS = PasskeyFormat(
    "words",
    " The pass key is {key}. Remember it. {key} is the pass key. ",
    " What is the pass key? The pass key is",
    " {key}",
)
#: The lab's byte-level plant ``<key:DDDDD>`` and query ``<key:`` (:mod:`posenc.measuring.lab.passkey`).
LAB = PasskeyFormat("lab", "<key:{key}>", "<key:", "{key}")
FORMATS = {f.name: f for f in (WORDS, LAB)}


def encode(tokenizer: Any, text: str) -> List[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def key_tokens(tokenizer: Any, fmt: PasskeyFormat, key: int) -> Tuple[List[int], List[int], List[int]]:
    """``(plant, query, answer)`` token ids of ``key``. The answer is what the tokenizer makes of
    it *after the query* (``encode(query + answer)`` minus the query's tokens), so its first token is
    the one a model continuing the query would produce."""
    k = str(key)
    plant = encode(tokenizer, fmt.plant.format(key=k))
    query = encode(tokenizer, fmt.query)
    both = encode(tokenizer, fmt.query + fmt.answer.format(key=k))
    if both[: len(query)] == query and len(both) > len(query):
        return plant, query, both[len(query) :]
    return plant, query, encode(tokenizer, fmt.answer.format(key=k))


def passkey_row(filler: np.ndarray, plant: Sequence[int], tail: Sequence[int], start: int) -> np.ndarray:
    """``filler`` (``L + 1`` tokens) with ``plant`` written at ``start`` and ``tail`` (query + key)
    at the end. Inputs are ``[:-1]``."""
    row = np.array(filler, dtype=np.int64, copy=True)
    if start < 0 or start + len(plant) > row.size - len(tail):
        raise ValueError(
            f"a plant of {len(plant)} tokens at {start} does not fit before a tail of {len(tail)} in {row.size} tokens"
        )
    row[start : start + len(plant)] = plant
    row[row.size - len(tail) :] = tail
    return row


def plant_start(depth: float, length: int, plant: int, tail: int, first: int) -> int:
    """Where a plant of ``plant`` tokens goes at ``depth`` in ``[0, 1]``: from ``first`` (after a BOS)
    to the last start that leaves the tail in place, in a sequence of ``length + 1`` tokens."""
    last = length + 1 - tail - plant
    if last < first:
        raise ValueError(f"length {length} is too short for the plant ({plant} tokens) and the query ({tail})")
    return first + int(round(depth * (last - first)))


@torch.no_grad()
def score_rows(model: Any, rows: np.ndarray, answer_lengths: Sequence[int], device: torch.device) -> Tuple:
    """``(correct, logp_bits)`` of each row (n, L + 1) whose last ``answer_lengths[i]`` tokens are
    the key: greedy exact match (by the one-pass rule above) and ``log2 p(key)``."""
    x = torch.from_numpy(rows[:, :-1]).to(device)
    y = torch.from_numpy(rows[:, 1:]).to(device)
    width = max(answer_lengths)
    hidden = backbone(model)(input_ids=x, use_cache=False).last_hidden_state[:, -width:]  # (n, w, D)
    logits = model.get_output_embeddings()(hidden).float()  # (n, w, V)
    logprobs = F.log_softmax(logits, dim=-1).gather(-1, y[:, -width:, None])[..., 0]  # (n, w)
    hits = logits.argmax(-1) == y[:, -width:]  # (n, w)
    correct, logp = [], []
    for i, n in enumerate(answer_lengths):
        correct.append(bool(hits[i, width - n :].all()))
        logp.append(float(logprobs[i, width - n :].sum().double()) / LN2)
    return np.array(correct, dtype=np.float64), np.array(logp, dtype=np.float64)


def passkey_plan(length: int, depth: float, trials: int, n_tokens: int, seed: int) -> List[Tuple[int, int]]:
    """``(filler offset, key)`` of each trial of one cell; a pure function of its arguments, so every
    scaling is asked the same questions about the same text, and a depth's trials depend on its value
    (its float's 64 bits), not on where it stands in a list of depths."""
    bits = struct.unpack("<Q", struct.pack("<d", float(depth)))[0]
    rng = np.random.default_rng([seed, length, bits, 104729])
    if n_tokens < length + 2:
        raise ValueError(f"the text has {n_tokens} tokens, fewer than one passkey sequence of {length + 1}")
    offsets = rng.integers(0, n_tokens - length - 1, size=trials)
    keys = rng.integers(10 ** (5 - 1), 10**5, size=trials)
    return [(int(o), int(k)) for o, k in zip(offsets, keys)]


# -- intervals ----------------------------------------------------------------------------------------
def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> Tuple[float, float]:
    """Wilson score interval (95% by default) of a proportion: exact at 0 and n, never outside [0, 1]."""
    if n <= 0:
        raise ValueError(f"n must be >= 1, got {n}")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in [0, {n}], got {successes}")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if successes == 0 else max(0.0, centre - half)  # exact ends, free of rounding
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return lo, hi


def bootstrap_interval(values: np.ndarray, *, samples: int, seed: int) -> Tuple[float, float]:
    """95% percentile bootstrap interval of the mean over windows (windows are the unit: tokens inside
    one window are correlated)."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 1:
        return float(values[0]), float(values[0])
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, values.size, size=(samples, values.size))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(lo), float(hi)


def ratio_interval(numerator: np.ndarray, denominator: np.ndarray, *, samples: int, seed: int) -> Tuple[float, float]:
    """95% percentile bootstrap interval of ``sum(numerator) / sum(denominator)`` over windows (bits
    per byte as total bits over total bytes): windows are resampled whole, each keeping its own bytes."""
    num = np.asarray(numerator, dtype=np.float64)
    den = np.asarray(denominator, dtype=np.float64)
    if num.shape != den.shape or num.ndim != 1 or num.size == 0:
        raise ValueError(f"numerator and denominator must be two equal 1-d arrays, got {num.shape} and {den.shape}")
    if num.size == 1:
        return float(num[0] / den[0]), float(num[0] / den[0])
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, num.size, size=(samples, num.size))
    ratios = num[idx].sum(axis=1) / den[idx].sum(axis=1)
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    return float(lo), float(hi)
