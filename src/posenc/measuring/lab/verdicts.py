"""Verdicts: did the pattern the literature reports appear in this run, beyond its noise?

Every claim compares two measured quantities ``a`` and ``b`` in a stated direction (``a > b`` or
``a < b``) with a test that fits how they were measured (:mod:`posenc.measuring.lab.stats`):

* bits per byte of two models, or of one model at two lengths, are means over the **same**
  validation windows (every length scores the same bytes): the paired t-test over windows;
* ``log2 p(key)`` of two models on the **same** passkey trials: the paired t-test over trials;
* exact matches of two models on the **same** passkey trials: the exact McNemar test, with
  Newcombe's paired score interval of the difference;
* near against far keys at the **same** length (different trials): Fisher's exact test and
  Newcombe's score interval for exact matches, Welch's t-test for ``log2 p(key)``.

A t-test needs at least 2 units a side; a comparison with fewer is not measured.
A run makes many comparisons, so the rule is Holm's (family-wise 5%): the chance that *any*
"seen" or "not seen" of the run is a false alarm of trial or window sampling is at most 5%.

* **seen**: the test rejects "no difference" under Holm's rule, and ``a`` lies on the claimed side;
* **not seen**: it rejects, and ``a`` lies on the other side;
* **within noise**: it does not reject; this run cannot tell, which never means "equal";
* **not measured**: a number is missing, not finite, or lacks its per-window or per-trial values.

These cover the sampling of windows and trials within one training run. Training-seed spread is
covered by :func:`combine_seeds`, which tests each claim's mean effect over the seeds against the
spread between seeds plus the sampling of the units (the windows paired across seeds, since every
seed reads the same ones). A run too small to mean anything, judged from its own sizes
(:func:`machinery_check_reason`), gets no verdicts at all.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...runs.lab_schema import machinery_check_reason as machinery_check_reason  # defined with the files
from ...runs.labels import SCALING_LABELS
from .schema import VERDICTS
from .stats import (
    across_seeds,
    fisher_exact,
    holm_adjusted,
    mcnemar_exact,
    newcombe_paired,
    newcombe_unpaired,
    paired_t,
    welch_t,
)

SEEN, WITHIN_NOISE, NOT_SEEN, NOT_MEASURED = VERDICTS
#: Family-wise error rate of one run's verdicts (Holm's rule).
ALPHA = 0.05
#: What a verdict records of a t-test (:func:`~posenc.measuring.lab.stats.paired_t`, ``welch_t``), in order.
T_TEST_FIELDS = ("effect", "effect_ci", "p", "se", "df", "n")
#: Display names of the schemes and extension methods; a method is labelled as its RoPE scaling is on
#: every page (the palette's one label table: "none" is plain RoPE, "dynamic_ntk" the "dynamic" type).
LABELS = {
    "nope": "NoPE",
    "sinusoidal": "Sinusoidal",
    "learned": "Learned",
    "rope": "RoPE",
    "alibi": "ALiBi",
    "t5": "T5 bias",
    "xpos": "xPos",
    "fope": "FoPE",
    **{
        method: SCALING_LABELS[rope_type]
        for method, rope_type in (
            ("none", "default"),
            ("linear", "linear"),
            ("ntk", "ntk"),
            ("dynamic_ntk", "dynamic"),
            ("dynamic", "dynamic"),
            ("yarn", "yarn"),
            ("llama3", "llama3"),
        )
    },
}
#: What the literature reports, per scheme: perplexity past the training length, retrieval past it.
EXPECTED = {
    "sinusoidal": ("seen: loses quality (Press et al. 2022)", None),
    "rope": (
        "seen: loses quality (Press et al. 2022; Chen et al. 2023)",
        "seen: retrieval collapses past the training length (Chen et al. 2023)",
    ),
    "alibi": (
        "not seen: flat (Press et al. 2022)",
        "seen: ALiBi retrieves near keys, not far ones (its bias hides far tokens)",
    ),
}


def _finite(value) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:  # an int past float64
        return None
    return value if math.isfinite(value) else None


def _side(label: str, entry: Optional[dict], key: str) -> Optional[dict]:
    """``{label, value, ci}`` of ``entry[key]`` when the value and both ends of its interval are
    finite numbers; None (not measured) otherwise."""
    if not isinstance(entry, dict) or entry.get("cannot"):
        return None
    value, ci = _finite(entry.get(key)), entry.get(key + "_ci")
    if value is None or not isinstance(ci, (list, tuple)) or len(ci) != 2:
        return None
    lo, hi = _finite(ci[0]), _finite(ci[1])
    if lo is None or hi is None or lo > hi:
        return None
    return {"label": label, "value": value, "ci": [lo, hi]}


def _units(entry: Optional[dict], key: str) -> Optional[np.ndarray]:
    """The per-window or per-trial values ``entry[key]`` as a finite float array, else None."""
    if not isinstance(entry, dict) or entry.get("cannot"):
        return None
    raw = entry.get(key)
    if not isinstance(raw, list) or not raw:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in raw):
        return None
    try:
        values = np.asarray(raw, dtype=np.float64)
    except OverflowError:  # an int past float64
        return None
    return values if np.all(np.isfinite(values)) else None


def quote(side: dict, percent: bool = False, bits: bool = False) -> str:
    """``"2.031 [1.953, 2.115]"``; for accuracies ``"45% [30%, 60%]"``; for log-probabilities
    ``"-12.7 [-13.4, -12.0] bits"``."""
    if percent:
        return f"{side['value']:.0%} [{side['ci'][0]:.0%}, {side['ci'][1]:.0%}]"
    if bits:
        return f"{side['value']:.1f} [{side['ci'][0]:.1f}, {side['ci'][1]:.1f}] bits"
    return f"{side['value']:.3f} [{side['ci'][0]:.3f}, {side['ci'][1]:.3f}]"


def _record(claim, a, b, relation, *, group, scheme, expected, unit) -> Dict[str, Any]:
    if relation not in (">", "<"):
        raise ValueError(f"relation must be '>' or '<', got {relation!r}")
    return {
        "claim": claim,
        "group": group,
        "scheme": scheme,
        "expected": expected,
        "relation": relation,
        "unit": unit,
        "a": a,
        "b": b,
        "test": None,
        "effect": None,
        "effect_ci": None,
        "p": None,
        "verdict": NOT_MEASURED,
        "evidence": "",
    }


def _missing(record: dict, why: str) -> dict:
    record["evidence"] = f"not measured in this run ({why})"
    return record


def compare(
    claim: str,
    a_entry: Optional[dict],
    b_entry: Optional[dict],
    relation: str,
    *,
    kind: str,
    labels: Sequence[str],
    group: str,
    scheme: Optional[str] = None,
    expected: Optional[str] = None,
    paired: bool,
) -> dict:
    """One comparison record, before Holm's rule (:func:`judge_all` turns its ``p`` into a verdict).

    ``kind`` is ``"bpb"`` (entries are evaluation results; per-window values ``bpb_windows``),
    ``"accuracy"`` or ``"logp"`` (entries are retrieval cells; per-trial ``correct`` / ``logp``).
    ``paired`` says that both entries scored the same windows or trials.

    Beside ``effect``, ``effect_ci`` and ``p`` the record keeps what the test across seeds needs:
    ``n`` (units), ``se`` and ``df`` of the effect, ``units`` ("windows" or "trials"), for bits per
    byte the per-window differences ``unit_diffs``, and for exact matches the ``counts`` (paired:
    both right, only the first, only the second, neither; unpaired: k1, n1, k2, n2)."""
    key, units, unit = {
        "bpb": ("bpb", "bpb_windows", "bpb"),
        "accuracy": ("accuracy", "correct", "percent"),
        "logp": ("logp_bits", "logp", "bits"),
    }[kind]
    a, b = _side(labels[0], a_entry, key), _side(labels[1], b_entry, key)
    record = _record(claim, a, b, relation, group=group, scheme=scheme, expected=expected, unit=unit)
    missing = [name for name, side in (("first", a), ("second", b)) if side is None]
    if missing:
        return _missing(record, f"{' and '.join(missing)} number missing or not finite")
    x, y = _units(a_entry, units), _units(b_entry, units)
    what = "windows" if kind == "bpb" else "trials"
    if x is None or y is None:
        return _missing(record, f"no per-{what[:-1]} values to compare")
    if paired and x.size != y.size:
        return _missing(record, f"the two sides scored {x.size} and {y.size} units, not the same ones")
    if min(x.size, y.size) < 2:
        return _missing(record, f"{min(x.size, y.size)} {what[:-1]} on a side; a test needs at least 2")
    record["units"] = what
    if kind == "accuracy":
        if not (np.all((x == 0) | (x == 1)) and np.all((y == 0) | (y == 1))):
            return _missing(record, "exact-match outcomes other than 0 and 1")
        _exact_test(record, x, y, paired)
    else:
        try:
            out = paired_t(x, y) if paired else welch_t(x, y)
        except ValueError as err:  # values that overflow on the way: no test, never a rejection
            return _missing(record, str(err))
        test = f"paired t over {x.size} {what}" if paired else f"Welch t of {x.size} vs {y.size} {what}"
        record.update(test=test, **{name: out[name] for name in T_TEST_FIELDS})
        if kind == "bpb" and paired:
            record["unit_diffs"] = [round(float(v), 6) for v in x - y]
    return record


#: :func:`compare` of two evaluation results in bits per byte: always paired, since every model and
#: every length scores the same validation windows.
_compare_bpb = functools.partial(compare, kind="bpb", paired=True)


def _exact_test(record: dict, x: np.ndarray, y: np.ndarray, paired: bool) -> None:
    """Two sides' exact-match outcomes (0 or 1 per trial) compared exactly, into ``record``: McNemar's
    test on the same trials, Fisher's on independent ones, with Newcombe's interval of the difference."""
    if paired:
        a_only, b_only, p = mcnemar_exact(x, y)
        both = int(np.sum((x == 1) & (y == 1)))
        counts = [both, a_only, b_only, x.size - both - a_only - b_only]
        diff = x - y
        record.update(
            test=f"exact McNemar ({a_only} trials only the first right, {b_only} only the second)",
            effect=(a_only - b_only) / x.size,
            effect_ci=list(newcombe_paired(*counts)),
            se=float(diff.std(ddof=1)) / math.sqrt(x.size),
            df=float(x.size - 1),
        )
    else:
        k1, k2 = int(x.sum()), int(y.sum())
        counts = [k1, x.size, k2, y.size]
        p = fisher_exact(k1, x.size, k2, y.size)
        p1, p2 = k1 / x.size, k2 / y.size
        record.update(
            test=f"Fisher exact ({k1}/{x.size} vs {k2}/{y.size})",
            effect=p1 - p2,
            effect_ci=list(newcombe_unpaired(*counts)),
            se=math.sqrt(p1 * (1 - p1) / x.size + p2 * (1 - p2) / y.size),
            df=float(x.size + y.size - 2),
        )
    record.update(p=p, counts=counts, n=int(min(x.size, y.size)))


def judge_all(records: List[dict], alpha: float = ALPHA) -> List[dict]:
    """Apply Holm's rule over every measured record and fill ``verdict``, ``evidence``, ``p_holm``
    (the Holm-adjusted p: the claim is judged at ``alpha`` exactly when ``p_holm <= alpha``) and
    ``holm_tests`` (how many comparisons the rule covered)."""
    ps = [r["p"] if r["verdict"] == NOT_MEASURED and r["p"] is not None else None for r in records]
    adjusted = holm_adjusted(ps)
    m = sum(p is not None for p in ps)
    for r, p, p_holm in zip(records, ps, adjusted):
        if p is None or p_holm is None:
            continue
        r["holm_tests"] = m
        r["p_holm"] = p_holm
        effect = r["effect"]
        if p_holm <= alpha and effect != 0:
            right_side = effect > 0 if r["relation"] == ">" else effect < 0
            r["verdict"] = SEEN if right_side else NOT_SEEN
        else:
            r["verdict"] = WITHIN_NOISE
        r["evidence"] = evidence(r)
    return records


def evidence(r: dict) -> str:
    unit = r["unit"]
    opts = dict(percent=unit == "percent", bits=unit == "bits")
    text = f"{r['a']['label']} {quote(r['a'], **opts)} vs {r['b']['label']} {quote(r['b'], **opts)}"
    if unit == "percent":
        diff = f"{r['effect']:+.0%}"
    elif unit == "bits":
        diff = f"{r['effect']:+.1f} bits"
    else:
        diff = f"{r['effect']:+.3f}"
    if r.get("effect_ci"):
        lo, hi = r["effect_ci"]
        diff += f" [{lo:+.0%}, {hi:+.0%}]" if unit == "percent" else f" [{lo:+.3g}, {hi:+.3g}]"
    return (
        f"{text}; difference {diff}, {r['test']}, p = {r['p']:.2g}, "
        f"Holm-adjusted {r['p_holm']:.2g} over {r['holm_tests']} tests"
    )


def _retrieval(entry: Optional[dict], bin_name: str) -> Optional[dict]:
    if not isinstance(entry, dict):
        return None
    cell = (entry.get("retrieval") or {}).get(bin_name) if isinstance(entry.get("retrieval"), dict) else None
    return cell if isinstance(cell, dict) else None


def _get(table: Any, key: str) -> Optional[dict]:
    value = table.get(key) if isinstance(table, dict) else None
    return value if isinstance(value, dict) else None


def verdicts(results: dict) -> List[dict]:
    """Every verdict this run can give, from its ``results.json`` content (before the verdicts);
    none for a run too small to mean anything or with fewer than two evaluation lengths.

    Whether the run is too small is decided from its own config (steps, windows, trials:
    :func:`machinery_check_reason`), never from a stored flag, which an older or edited file may
    lack."""
    if machinery_check_reason(results.get("config") or {}) is not None:
        return []
    lengths = [n for n in (results.get("eval_lengths") or []) if isinstance(n, int) and n > 0]
    train_len = results.get("train_len")
    if len(lengths) < 2 or not isinstance(train_len, int) or train_len < 1:
        return []
    schemes = results.get("schemes") or {}
    ext = results.get("extension") or {}
    rope_eval = (schemes.get("rope") or {}).get("eval") or {}
    out: List[dict] = []
    for name, s in schemes.items():
        out += _scheme_claims(name, (s or {}).get("eval") or {}, lengths, train_len)
    out += _extension_claims(ext, rope_eval, lengths)
    out += _extension_retrieval_claims(ext, rope_eval, str(lengths[-1]))
    return judge_all(out)


def _scheme_claims(name: str, ev: dict, lengths: List[int], train_len: int) -> List[dict]:
    """One scheme's claims: it reads the longest length worse than the first, and (in exact matches
    and in log2 p(key)) it retrieves far keys less well than near keys, both at the longest length."""
    label = LABELS.get(name, name)
    ppl, ret = EXPECTED.get(name, (None, None))
    base, top = str(lengths[0]), str(lengths[-1])
    out = [
        _compare_bpb(
            f"{label} reads text at {top} bytes ({lengths[-1] // train_len}x) worse than at {base} (1x)",
            _get(ev, top),
            _get(ev, base),
            ">",
            labels=(f"bpb at {top}", f"bpb at {base}"),
            group="perplexity",
            scheme=name,
            expected=ppl,
        )
    ]
    far, near = _retrieval(_get(ev, top), "far"), _retrieval(_get(ev, top), "near")
    for kind, group, verb in (
        ("accuracy", "retrieval", "retrieves far keys (beyond the training length) less often than near keys"),
        ("logp", "retrieval-logp", "gives far keys (beyond the training length) less probability than near keys"),
    ):
        prefix = "log2 p(key), " if kind == "logp" else ""
        out.append(
            compare(
                f"{label} {verb}, both at {top} bytes",
                far,
                near,
                "<",
                kind=kind,
                labels=(f"{prefix}far keys at {top}", f"near keys at {top}"),
                group=group,
                scheme=name,
                expected=ret,
                paired=False,
            )
        )
    return out


def _extension_claims(ext: dict, rope_eval: dict, lengths: List[int]) -> List[dict]:
    """RoPE context extension in bits per byte: NTK-aware and YaRN beat plain RoPE at 4x and past
    without retraining; PI does not without a fine-tune, and does after one."""
    top = str(lengths[-1])
    out = []
    for method in ("ntk", "yarn"):
        for k in [str(n) for n in lengths if n >= 4 * lengths[0]]:
            out.append(
                _compare_bpb(
                    f"{LABELS[method]} reads {k} bytes better than plain RoPE without retraining",
                    _get(_get(ext, method), k),
                    _get(rope_eval, k),
                    "<",
                    labels=(f"{method} at {k}", f"plain RoPE at {k}"),
                    group="extension",
                    scheme=method,
                    expected="seen (bloc97 2023; Peng et al. 2023)",
                )
            )
    linear, none = _get(ext, "linear") or {}, _get(ext, "none") or {}
    pi_ft, none_ft = _get(_get(linear, top), "finetuned"), _get(_get(none, top), "finetuned")
    for claim, a, b, rel, labels, expected in (
        (
            f"PI without fine-tuning reads {top} bytes worse than plain RoPE",
            _get(linear, top),
            _get(rope_eval, top),
            ">",
            (f"PI at {top}", f"plain RoPE at {top}"),
            "seen (Chen et al. 2023)",
        ),
        (
            f"A short fine-tune improves PI at {top}",
            pi_ft,
            _get(linear, top),
            "<",
            (f"PI fine-tuned at {top}", f"PI at {top}"),
            "seen (Chen et al. 2023)",
        ),
        (
            f"After the same fine-tune, PI reads {top} bytes better than plain RoPE",
            pi_ft,
            none_ft,
            "<",
            (f"PI fine-tuned at {top}", f"plain RoPE fine-tuned at {top}"),
            "seen (Chen et al. 2023, against fine-tuned extrapolation)",
        ),
    ):
        out.append(
            _compare_bpb(
                claim,
                a,
                b,
                rel,
                labels=labels,
                group="extension",
                scheme="linear",
                expected=expected,
            )
        )
    return out


def _extension_retrieval_claims(ext: dict, rope_eval: dict, top: str) -> List[dict]:
    """Each extension method retrieves far keys at the longest length better than plain RoPE: after
    the same short fine-tune when the run fine-tuned, without retraining otherwise; in exact
    matches, then in log2 p(key), which moves long before exact matches do."""
    tuned = any(isinstance(e, dict) and "finetuned" in e for per in ext.values() for e in (per or {}).values())
    none_ft = _get(_get(_get(ext, "none") or {}, top), "finetuned")
    expected = "seen for interpolation with a fine-tune (Chen et al. 2023; Peng et al. 2023)"
    out = []
    for method in [m for m in ext if m != "none"]:
        label = LABELS.get(method, method)
        per = _get(ext, method) or {}
        if tuned:
            claim = f"{label} with a short fine-tune {{}} at {top}{{}} than plain RoPE fine-tuned the same way"
            cell_a = _retrieval(_get(_get(per, top), "finetuned"), "far")
            cell_b = _retrieval(none_ft, "far")
            label_a, label_b = f"{method} fine-tuned, far keys", "plain RoPE fine-tuned, far keys"
        else:
            claim = f"{label} {{}} at {top}{{}} than plain RoPE, no retraining"
            cell_a = _retrieval(_get(per, top), "far")
            cell_b = _retrieval(_get(rope_eval, top), "far")
            label_a, label_b = f"{method}, far keys", "plain RoPE, far keys"
        for verb, more, kind, group in (
            ("retrieves far keys", " more often", "accuracy", "extension-retrieval"),
            ("gives far keys more probability", "", "logp", "extension-retrieval-logp"),
        ):
            prefix = "log2 p(key), " if kind == "logp" else ""
            out.append(
                compare(
                    claim.format(verb, more),
                    cell_a,
                    cell_b,
                    ">",
                    kind=kind,
                    labels=(prefix + label_a, label_b),
                    group=group,
                    scheme=method,
                    expected=expected,
                    paired=True,
                )
            )
    return out


def combine_seeds(per_seed: Dict[int, List[dict]], alpha: float = ALPHA) -> List[dict]:
    """One verdict per claim across training seeds (``{seed: verdicts of that seed's run}``).

    A claim measured in two or more seeds is tested on its mean effect over the seeds
    (:func:`posenc.measuring.lab.stats.across_seeds`): against the spread between the seeds **plus** the
    sampling of the units, where the validation windows, which every seed reads, are paired across
    seeds (bits per byte), and the passkey trials, drawn afresh per seed, enter through each run's
    own standard error. Holm's rule at family-wise ``alpha`` then runs over every claim so tested:
    ``p_holm`` is the adjusted p, and a claim is **seen** when ``p_holm <= alpha`` and the mean
    effect lies on the claimed side, **not seen** when it lies on the other side, **within noise**
    otherwise (however many seeds saw it on their own).

    ``effect_ci`` is the t interval of the test; for exact matches, the hull of it and Newcombe's
    score interval of the counts pooled over the seeds (honest at 0% and 100%, where a t interval of
    identical effects has width zero). A claim measured in one seed only keeps that seed's verdict and says so
    (``seeds`` 1, ``one_seed`` True). **Not measured**: no seed measured it, or the seeds' records
    lack the per-unit sampling the test needs (summaries written before it was kept).

    Each record keeps every seed's verdict and effect (``by_seed``, ``effect_by_seed``), their mean
    and standard deviation (``effect_mean``, ``effect_sd``), the two parts of the standard error
    (``se_between``, ``se_units``), ``df``, ``p``, ``p_holm`` and ``holm_tests`` (claims under the
    across-seed rule)."""
    if not per_seed:
        return []
    seeds = sorted(per_seed)
    order: List[str] = []
    by_claim: Dict[str, Dict[int, dict]] = {}
    for s in seeds:
        for v in per_seed[s]:
            if v["claim"] not in by_claim:
                order.append(v["claim"])
            by_claim.setdefault(v["claim"], {})[s] = v
    out = [_across(claim, by_claim[claim], seeds) for claim in order]
    tested = [r for r in out if r["p"] is not None]
    for r, p_holm in zip(tested, holm_adjusted([r["p"] for r in tested])):
        r["holm_tests"] = len(tested)
        r["p_holm"] = p_holm
        side = r.pop("_direction")
        if p_holm is not None and p_holm <= alpha and side != 0:
            right_side = side > 0 if r["relation"] == ">" else side < 0
            r["verdict"] = SEEN if right_side else NOT_SEEN
        else:
            r["verdict"] = WITHIN_NOISE
        r["evidence"] += f"; Holm over {len(tested)} claims: adjusted p = {p_holm:.2g}, {r['verdict']}"
    for r in out:
        r.pop("_direction", None)
    return out


def _measured(v: Optional[dict]) -> bool:
    return (
        isinstance(v, dict)
        and v.get("verdict") != NOT_MEASURED
        and _finite(v.get("effect")) is not None
        and _finite(v.get("p")) is not None
        and 0.0 <= v["p"] <= 1.0
    )


def _counts_problem(counts: Any, paired: bool) -> Optional[str]:
    """Why ``counts`` are not one run's exact-match counts (``None`` when they are): four whole
    numbers >= 0, paired (both right, only the first, only the second, neither; at least one trial)
    or unpaired (``k1, n1, k2, n2`` with ``k <= n`` and ``n >= 1`` on each side)."""
    if not (
        isinstance(counts, list)
        and len(counts) == 4
        and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 2**53 for v in counts)
    ):
        return f"counts {str(counts)[:60]} are not four whole numbers >= 0"
    if paired and sum(counts) < 1:
        return "counts hold no trial"
    if not paired and not (1 <= counts[1] and counts[0] <= counts[1] and 1 <= counts[3] and counts[2] <= counts[3]):
        return f"counts {counts} give more exact matches than trials (k > n) or no trials"
    return None


def _pooled_counts(runs: Dict[int, dict], paired: bool) -> Tuple[Optional[List[int]], Optional[str]]:
    """``(counts summed over the seeds, None)`` when every run kept its counts alike, ``(None, None)``
    when some run kept none (summaries written before they were kept), and ``(None, problem)`` naming
    the seed whose counts are damaged (``k > n``, negative, not whole)."""
    counts: List[List[int]] = []
    for seed, r in runs.items():
        c = r.get("counts")
        if c is None:
            return None, None
        problem = _counts_problem(c, paired)
        if problem is not None:
            return None, f"seed {seed}'s {problem}"
        counts.append(c)
    return [sum(c[i] for c in counts) for i in range(4)], None


def _unit_diffs_problem(diffs: Any) -> Optional[str]:
    """Why ``diffs`` are not a run's per-window differences (``None`` when they are)."""
    if not isinstance(diffs, list) or len(diffs) < 2:
        return None  # not kept: the test cannot be made, said apart
    for v in diffs:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or _finite(v) is None:
            return f"per-window differences hold {str(v)[:40]!r}, not a finite number"
    return None


def _seed_test(runs: Dict[int, dict], effects: List[float]) -> Tuple[Optional[dict], Optional[str]]:
    """``(across_seeds on what the per-seed records kept, None)``; ``(None, None)`` when they lack it,
    and ``(None, problem)`` naming the seed whose record is damaged (a NaN or a string among its
    per-window differences, a standard error that is not a number) or what the test refused."""
    for seed, r in runs.items():
        problem = _unit_diffs_problem(r.get("unit_diffs")) if r.get("units") == "windows" else None
        if problem is not None:
            return None, f"seed {seed}'s {problem}"
    try:
        if all(r.get("units") == "windows" for r in runs.values()):
            diffs = [r.get("unit_diffs") for r in runs.values()]
            rows: List[List[float]] = [d for d in diffs if isinstance(d, list) and len(d) >= 2]
            if len(rows) != len(runs) or len({len(d) for d in rows}) != 1:
                return None, None  # not kept, or not the same windows in every seed: they cannot be paired
            return across_seeds(effects, windows=rows), None
        if all(r.get("units") == "trials" for r in runs.values()):
            se = [v for v in (_finite(r.get("se")) for r in runs.values()) if v is not None and v >= 0]
            df = [v for v in (_finite(r.get("df")) for r in runs.values()) if v is not None and v > 0]
            if len(se) == len(df) == len(runs):
                return across_seeds(effects, unit_se=se, unit_df=df), None
    except ValueError as err:  # effects that are not the means of their windows, values that overflow
        return None, f"the test across seeds refused the records ({err})"
    return None, None


def _seed_evidence(
    runs: Dict[int, dict], effects: Dict[int, float], unit: Optional[str]
) -> Tuple[Optional[dict], Optional[List[int]], bool, Optional[str]]:
    """``(test across seeds, pooled exact-match counts, whether they are paired, problem)`` of the
    measured ``runs``: the test (:func:`_seed_test`), and for exact matches the counts summed over the
    seeds (:func:`_pooled_counts`); ``problem`` names the seed whose record is damaged."""
    stats, problem = _seed_test(runs, list(effects.values()))
    paired = all(str(r.get("test", "")).startswith("exact McNemar") for r in runs.values())
    pooled = None
    if stats is not None and unit == "percent":
        pooled, problem = _pooled_counts(runs, paired)
    return stats, pooled, paired, problem


def _across(claim: str, runs: Dict[int, dict], seeds: List[int]) -> dict:
    """The across-seed record of one claim before Holm's rule (``p`` None when not tested)."""
    first = next(iter(runs.values()))
    got = [runs[s]["verdict"] if s in runs else NOT_MEASURED for s in seeds]
    measured = [s for s in seeds if _measured(runs.get(s))]
    effects = {s: float(runs[s]["effect"]) for s in measured}
    unit = first.get("unit")
    fmt = (lambda v: f"{v:+.1%}") if unit == "percent" else (lambda v: f"{v:+.3g}")
    record: Dict[str, Any] = {
        "claim": claim,
        "group": first.get("group"),
        "scheme": first.get("scheme"),
        "expected": first.get("expected"),
        "unit": unit,
        "relation": first.get("relation"),
        "verdict": NOT_MEASURED,
        "seeds": len(measured),
        "one_seed": len(measured) == 1,
        "by_seed": {str(s): g for s, g in zip(seeds, got)},
        "effect_by_seed": {str(s): e for s, e in effects.items()},
        "effect_mean": None,
        "effect_sd": None,
        "effect_ci": None,
        "se_between": None,
        "se_units": None,
        "df": None,
        "p": None,
        "p_holm": None,
        "evidence": "not measured in any seed",
    }
    of = f" of {len(seeds)}" if len(measured) < len(seeds) else ""
    if len(measured) == 1:
        (s,) = measured
        record.update(verdict=runs[s]["verdict"], effect_mean=effects[s])
        if isinstance(runs[s].get("effect_ci"), list):
            record["effect_ci"] = runs[s]["effect_ci"]
        record["evidence"] = (
            f"rests on one training seed (seed {s}{of and f', measured in 1{of}'}): {runs[s]['verdict']} under "
            f"that run's own rule, difference {fmt(effects[s])}; the spread between training seeds is not measured"
        )
        return record
    if len(measured) < 2:
        return record
    stats, pooled, paired, problem = _seed_evidence({s: runs[s] for s in measured}, effects, unit)
    if problem is not None:  # a damaged record: this claim is not measured, the others go on
        record["evidence"] = f"not measured across seeds: {problem}"
        return record
    if stats is None:
        record["evidence"] = (
            f"{len(measured)} seeds{of}, but their records lack the per-window or per-trial sampling that "
            f"the test across seeds needs (write the summary again from its run folders)"
        )
        return record
    ci, how = stats["effect_ci"], "t-interval"
    if pooled is not None:
        # Newcombe's interval of the pooled counts stays honest at 0% and 100%, where identical
        # per-seed effects give a t interval of width zero; the t interval carries the spread between
        # seeds, which pooling hides. The hull of the two keeps both.
        lo, hi = newcombe_paired(*pooled) if paired else newcombe_unpaired(*pooled)
        ci = [min(ci[0], lo), max(ci[1], hi)]
        how = "hull of the t-interval and Newcombe's interval of the pooled counts"
    record.update(
        effect_mean=stats["effect"],
        effect_sd=stats["effect_sd"],
        effect_ci=[float(ci[0]), float(ci[1])],
        se_between=stats["se_between"],
        se_units=stats["se_units"],
        df=stats["df"],
        p=stats["p"],
        _direction=stats["direction"],
    )
    record["evidence"] = (
        f"{len(measured)} seeds{of}: difference per seed {', '.join(fmt(v) for v in effects.values())}, "
        f"mean {fmt(stats['effect'])} (95% {how} [{fmt(ci[0])}, {fmt(ci[1])}]); standard error "
        f"{stats['se_between']:.2g} between seeds and {stats['se_units']:.2g} from {stats['units']}, "
        f"t-test with {stats['df']:.1f} degrees of freedom p = {stats['p']:.2g}"
    )
    return record


def rule_text_seeds(tests: int, seeds: int, claims: int = 0) -> str:
    """What the verdicts of ``seeds`` training seeds mean: ``tests`` comparisons per seed, ``claims``
    of them tested across seeds."""
    per_seed = (
        f"{tests} comparisons under Holm's rule at a family-wise {ALPHA:.0%} (at most a {ALPHA:.0%} chance "
        f"of any false alarm from window or trial sampling; each 95% interval printed is 95% on its own, "
        f"so about {0.05 * 2 * tests:.1f} of the {2 * tests} would miss by chance)"
    )
    if seeds < 2:
        return (
            f"One training seed: {per_seed}. The spread between training runs is not covered: these "
            f"verdicts rest on one seed."
        )
    text = (
        f"Each seed's own verdict (its column) comes from {per_seed}. The verdict across seeds tests "
        f"each claim's mean effect over the {seeds} seeds with a t-test whose standard error adds the "
        f"spread between the seeds to the sampling of the units: the validation windows, which every "
        f"seed reads, paired across seeds (each window's difference averaged over the seeds), and the "
        f"passkey trials, drawn afresh per seed, through each run's own standard error. The p column is "
        f"Holm-adjusted"
    )
    if claims:
        text += f" over the {claims} claims tested"
    return text + (
        f"; a claim is **seen** when that p is at most {ALPHA:.0%} and the mean effect lies on the claimed "
        f"side. However many seeds saw it alone, a claim that fails this is within noise. The interval "
        f"is the test's t interval; for exact matches it also covers Newcombe's score interval of the counts "
        f"pooled over the seeds, which stays honest at 0% and 100%. A claim measured in one seed only says so."
    )
