"""How ``posenc eval`` scores its tasks, apart from how they are generated (:mod:`.tasks`).

**A trial.** The model continues the prompt greedily for the trial's ``max_new`` tokens; the
continuation, decoded, is the *prediction*. ``recall`` is the share of the trial's answers that occur
in the prediction (case-insensitively): RULER's ``string_match_all`` for one sample (Hsieh et al.
2024). The trial is an **exact match** when ``recall == 1``: every answer is there. Answers are
numbers of 7 digits, UUIDs, five-letter names or words of 5 to 10 letters, never substrings of the
question, so an answer is in the prediction only when the model wrote it.

**A cell** (task x scaling x length, and depth for the needle tasks): exact matches over its trials
with a 95% Wilson score interval (:func:`~posenc.measuring.eval.measure.wilson_interval`).

**The score of a scaling at a length**: exact matches pooled over every trial of every task measured
there. Every task gets the same number of trials per length (trials x depths), so the pooled share
is the mean of the tasks' shares, as RULER averages its tasks. Its Wilson interval treats the pooled
trials as one binomial; trials of different tasks have different success rates, and the variance of
a sum of independent Bernoulli trials is at most that of a binomial with their mean rate, so the
interval is, if anything, too wide.

**Effective length** (RULER's rule): the longest evaluated length ``L`` such that the score at ``L``
*and at every shorter evaluated length* is at least the threshold. RULER's threshold is the score of
Llama-2-7B at 4k on its 13 tasks, 85.6%; a small model's own score at its trained length is often the
better bar (``--threshold``). ``effective_length`` uses the point estimate, ``effective_length_lower``
the Wilson interval's lower end (a length counted only when the data say it passes at 95%).

**Short-context retention** (LongRoPE2, Shang et al. 2025): a scaling's score divided by the
unscaled model's (``none``) at the trained length (the longest evaluated length not past it); the bar
is 98.5%.
"""

from __future__ import annotations

import math
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from .measure import wilson_interval

#: RULER's threshold: Llama-2-7B's mean score over its tasks at 4k tokens.
RULER_THRESHOLD = 0.856
#: LongRoPE2's bar for keeping short-context quality: at least 98.5% of the original score.
RETENTION_BAR = 0.985


def score(prediction: str, answers: Sequence[str]) -> Tuple[bool, float]:
    """``(exact match, recall)`` of one continuation against its answers (see the module docstring)."""
    if not answers:
        raise ValueError("answers must hold at least one answer, got none")
    text = prediction.lower()
    found = sum(1 for a in answers if str(a).lower() in text)
    recall = found / len(answers)
    return found == len(answers), recall


def share(correct: Sequence[float]) -> Dict[str, object]:
    """Exact matches of a list of 0/1 outcomes: ``{"accuracy", "accuracy_ci", "trials"}``."""
    n = len(correct)
    hits = int(round(sum(correct)))
    lo, hi = wilson_interval(hits, n)
    return {"accuracy": hits / n, "accuracy_ci": [lo, hi], "trials": n}


def effective_length(scores: Mapping[int, float], threshold: float) -> Optional[int]:
    """The longest length whose score, and every shorter length's, is at least ``threshold``;
    ``None`` when the shortest length already falls below it."""
    if not math.isfinite(threshold) or not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be a number in [0, 1], got {threshold!r}")
    best = None
    for n in sorted(scores):
        if not scores[n] >= threshold:
            break
        best = n
    return best


def retention(scaled: Optional[float], plain: Optional[float]) -> Optional[float]:
    """``scaled / plain``, the share of the unscaled score a scaling keeps; ``None`` when either is
    missing or the unscaled score is 0 (nothing to keep)."""
    if scaled is None or plain is None or plain <= 0:
        return None
    return scaled / plain


def retention_length(lengths: Sequence[int], trained: int) -> Optional[int]:
    """The length retention is read at: the trained context, or the longest evaluated length below it."""
    within = [n for n in lengths if n <= trained]
    return max(within) if within else None


def summary(
    outcomes: Mapping[str, Mapping[int, List[float]]],
    lengths: Sequence[int],
    trained: int,
    threshold: float,
    plain: Optional[str] = "none",
) -> Dict[str, Dict[str, object]]:
    """Per scaling: the pooled score at each length with its interval, the effective lengths and the
    retention. ``outcomes[scaling][length]`` lists the 0/1 exact matches of every trial there."""
    out: Dict[str, Dict[str, object]] = {}
    at = retention_length(lengths, trained)
    for label, by_length in outcomes.items():
        per = {n: share(by_length[n]) for n in lengths if by_length.get(n)}
        ladder = []  # the lengths measured from the shortest on: an unmeasured length ends the ladder
        for n in sorted(lengths):
            if n not in per:
                break
            ladder.append(n)
        points = {n: float(per[n]["accuracy"]) for n in ladder}  # type: ignore[arg-type]
        lower = {n: float(per[n]["accuracy_ci"][0]) for n in ladder}  # type: ignore[index]
        out[label] = {
            "lengths": {str(n): p for n, p in per.items()},
            "threshold": threshold,
            "effective_length": effective_length(points, threshold),
            "effective_length_lower": effective_length(lower, threshold),
        }
    for entry in out.values():
        mine = entry["lengths"].get(str(at)) if at is not None else None  # type: ignore[attr-defined]
        base = out.get(plain or "", {}).get("lengths", {}).get(str(at)) if at is not None else None  # type: ignore[attr-defined]
        value = retention(mine and mine["accuracy"], base and base["accuracy"])
        entry["retention"] = {
            "length": at,
            "ratio": value,
            "bar": RETENTION_BAR,
            "keeps": None if value is None else value >= RETENTION_BAR,
        }
    return out
