"""The lab's statistics: intervals for proportions and their differences, paired tests, Holm's rule,
and the test of a claim across training seeds.

Pure functions of counts and per-unit values. The distributions and the exact tests are scipy's
(``scipy.stats``); this module decides which test fits how a number was measured, and refuses what
no test can judge.

* A proportion ``k / n`` (passkey exact matches) gets the exact Clopper–Pearson interval (Clopper and
  Pearson 1934): 0 of 100 gives [0%, 3.6%], never [0%, 0%] as a percentile bootstrap of 0/1 outcomes
  does. :func:`wilson` is the score interval (Wilson 1927).
* A **difference** of two proportions gets Newcombe's hybrid score interval, built from the two
  Wilson intervals: for independent samples (Newcombe 1998, *Stat. Med.* 17:873, method 10) and for
  paired outcomes on the same trials (Newcombe 1998, *Stat. Med.* 17:2635, method 10). Both stay
  honest at 0% and 100%: 0 of 64 against 0 of 64 gives about [-5.7%, +5.7%], not [0%, 0%].
* Two models scored on the **same** trials are compared with the exact McNemar test: under "no
  difference" each discordant trial (one model right, the other wrong) is a fair coin
  (:func:`mcnemar_exact`). Two proportions from **different** trials (near against far keys at one
  length) use Fisher's exact test (:func:`fisher_exact`).
* Two means over the **same** windows or trials are compared with the paired t-test on the per-unit
  differences (:func:`paired_t`); means over different units with Welch's t-test
  (:func:`welch_t`). Both need at least 2 units a side. With the lab's 32 to 128 windows the t
  distribution's tails matter: at Holm's first step (about 0.05 / 30) a normal p-value from a
  bootstrap standard error raises false alarms about twice as often as it says.
* A run makes many comparisons. :func:`holm` applies Holm's step-down rule (Holm 1979), which keeps
  the chance of *any* false rejection among them at ``alpha`` whatever their dependence;
  :func:`holm_adjusted` gives the adjusted p-values that rule compares with ``alpha``.
* Across training seeds (:func:`across_seeds`), a claim's mean effect is tested against the spread
  between seeds **plus** the sampling of the units. Every seed reads the same validation windows, so
  their sampling errors are shared: there the windows are paired across seeds (each window's
  difference averaged over the seeds) rather than treated as independent per seed.
"""

from __future__ import annotations

import math
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np
from scipy import stats as _st

from ..._checks import check_float, check_int

#: One value per unit (window or trial).
Values = Union[Sequence[float], np.ndarray]


def _count(name: str, value: object, *, minimum: int = 0, maximum: Optional[int] = None) -> int:
    """``value``, a count, as an int: a Python int or a numpy integer (``np.int64(10)``, what numpy's
    sums give) within the bounds; a bool (``True`` is no count), a float or anything else raises
    ``TypeError`` naming ``name`` (:func:`posenc._checks.check_int`)."""
    if isinstance(value, np.integer) and not isinstance(value, (bool, np.bool_)):
        value = int(value)
    return check_int(name, value, minimum=minimum, maximum=maximum)


def _counts(k: int, n: int) -> Tuple[int, int]:
    n = _count("n", n, minimum=1)
    return _count("k", k, minimum=0, maximum=n), n


def _level(level: float) -> None:
    check_float("level", level, greater_than=0.0, maximum=0.999999)


# -- proportions -----------------------------------------------------------------------------------
def clopper_pearson(k: int, n: int, level: float = 0.95) -> Tuple[float, float]:
    """Exact (Clopper–Pearson) interval of a proportion from ``k`` successes in ``n`` trials.

    The lower end is the ``p`` with P(X >= k | p) = (1 - level)/2, the upper end the ``p`` with
    P(X <= k | p) = (1 - level)/2; 0 of 100 gives [0, 0.0362] (``1 - 0.025 ** (1/100)``).
    """
    k, n = _counts(k, n)
    _level(level)
    tail = (1.0 - level) / 2.0
    # The binomial tails are beta distributions: P(X >= k | p) = I_p(k, n - k + 1).
    lo = 0.0 if k == 0 else float(_st.beta.ppf(tail, k, n - k + 1))
    hi = 1.0 if k == n else float(_st.beta.isf(tail, k + 1, n - k))
    return lo, hi


def wilson(k: int, n: int, level: float = 0.95) -> Tuple[float, float]:
    """Wilson score interval of a proportion (Wilson 1927), without continuity correction."""
    k, n = _counts(k, n)
    _level(level)
    ci = _st.binomtest(k, n).proportion_ci(confidence_level=level, method="wilson")
    return max(0.0, float(ci.low)), min(1.0, float(ci.high))


def newcombe_unpaired(k1: int, n1: int, k2: int, n2: int, level: float = 0.95) -> Tuple[float, float]:
    """Newcombe's hybrid score interval of ``k1/n1 - k2/n2`` for two independent samples.

    With ``(l_i, u_i)`` the Wilson interval of ``p_i``: ``d - sqrt((p1 - l1)^2 + (u2 - p2)^2)`` to
    ``d + sqrt((u1 - p1)^2 + (p2 - l2)^2)`` (Newcombe 1998, method 10)."""
    k1, n1 = _counts(k1, n1)
    k2, n2 = _counts(k2, n2)
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson(k1, n1, level)
    l2, u2 = wilson(k2, n2, level)
    d = p1 - p2
    return max(-1.0, d - math.hypot(p1 - l1, u2 - p2)), min(1.0, d + math.hypot(u1 - p1, p2 - l2))


def newcombe_paired(
    both: int, first_only: int, second_only: int, neither: int, level: float = 0.95
) -> Tuple[float, float]:
    """Newcombe's hybrid score interval of ``p1 - p2`` for two 0/1 outcomes on the same trials.

    The table counts trials where both are right, only the first, only the second, neither
    (``n`` in all); ``p1 = (both + first_only) / n``, ``p2 = (both + second_only) / n``. The two
    Wilson intervals are combined with the correlation ``phi`` of the outcomes, with Newcombe's
    correction (``ad - bc`` reduced by ``n / 2`` when positive, 0 when a margin is empty)
    (Newcombe 1998, paired data, method 10)."""
    a, b, c, d = (
        _count(name, v, minimum=0)
        for name, v in zip(("both", "first_only", "second_only", "neither"), (both, first_only, second_only, neither))
    )
    n = a + b + c + d
    if n < 1:
        raise ValueError("the paired table must count at least one trial, got all zeros")
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson(a + b, n, level)
    l2, u2 = wilson(a + c, n, level)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    phi = 0.0
    if margins > 0:
        cross = float(a * d - b * c)
        cross = cross - n / 2 if cross > n / 2 else (cross if cross < 0 else 0.0)
        phi = cross / math.sqrt(margins)
    diff = p1 - p2
    lo = diff - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    hi = diff + math.sqrt(max(0.0, (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2))
    return max(-1.0, lo), min(1.0, hi)


def binom_test(k: int, n: int, p: float = 0.5) -> float:
    """Two-sided exact binomial test of ``k`` successes in ``n`` trials against ``p``: the total
    probability of every outcome no more likely than the one observed (the usual definition)."""
    k, n = _counts(k, n)
    check_float("p", p, minimum=0.0, maximum=1.0)
    return float(_st.binomtest(k, n, p).pvalue)


def mcnemar_exact(a: Values, b: Values) -> Tuple[int, int, float]:
    """``(a_only, b_only, p)``: exact McNemar test of two 0/1 outcomes on the same trials.

    Only the discordant trials carry information; under "both models are equally good" each is a
    fair coin, so ``p`` is the two-sided binomial test of ``a_only`` in ``a_only + b_only`` against
    one half (1 when there is no discordant trial)."""
    x, y = _binary("a", a), _binary("b", b)
    if x.size != y.size:
        raise ValueError(f"a and b must score the same trials, got {x.size} and {y.size} outcomes")
    a_only, b_only = int(np.sum((x == 1) & (y == 0))), int(np.sum((x == 0) & (y == 1)))
    if a_only + b_only == 0:
        return a_only, b_only, 1.0
    return a_only, b_only, binom_test(a_only, a_only + b_only, 0.5)


def fisher_exact(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided Fisher exact test of ``k1 / n1`` against ``k2 / n2`` (independent trials): the
    probability, given the margins, of every table no more likely than the observed one."""
    k1, n1 = _counts(k1, n1)
    k2, n2 = _counts(k2, n2)
    return float(_st.fisher_exact([[k1, n1 - k1], [k2, n2 - k2]]).pvalue)


# -- distributions ---------------------------------------------------------------------------------
def normal_two_sided_p(z: float) -> float:
    """P(|Z| >= |z|) for a standard normal Z."""
    return float(2.0 * _st.norm.sf(abs(z)))


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's T with ``df`` degrees of freedom (1 for t = 0, 0 for |t| = inf);
    ``df`` may be fractional (Welch, Satterthwaite)."""
    check_float("df", df, greater_than=0.0)
    if math.isnan(t):
        raise ValueError("t must be a number, got nan")
    if math.isinf(t):
        return 0.0
    return float(min(1.0, 2.0 * _st.t.sf(abs(t), df)))


def t_quantile(q: float, df: float) -> float:
    """The ``q`` quantile of Student's T with ``df`` degrees of freedom (0.5 < q < 1)."""
    check_float("q", q, greater_than=0.5, maximum=1.0 - 1e-12)
    check_float("df", df, greater_than=0.0)
    return float(_st.t.ppf(q, df))


def _binary(name: str, values) -> np.ndarray:
    x = _finite(name, values)
    if not np.all((x == 0) | (x == 1)):
        raise ValueError(f"{name} must hold only 0 and 1 outcomes")
    return x


def _finite(name: str, values, minimum: int = 1) -> np.ndarray:
    try:
        x = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):  # a string, an object, an int past float64
        raise ValueError(f"{name} must hold only finite numbers") from None
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} must hold only finite numbers")
    if x.size < minimum:
        raise ValueError(
            f"{name} must hold at least {minimum} values (units) for a test, got {x.size}: "
            f"one unit has no spread to judge a difference by"
        )
    return x


# -- means -------------------------------------------------------------------------------------------
def _t_summary(effect: float, se: float, df: float, n: int, level: float) -> dict:
    """``effect``, its ``level`` t interval, ``se``, ``df``, ``n`` and the two-sided ``p`` of
    "no difference"; a zero standard error (every unit the same) gives p = 1 for a zero effect and
    p = 0 otherwise. An effect or standard error that is not finite (units whose values overflow
    float64 on the way) is no evidence of anything: ``ValueError``, never a p that a rule rejects."""
    _level(level)
    if not (math.isfinite(effect) and math.isfinite(se) and se >= 0):
        raise ValueError(
            f"the effect ({effect!r}) or its standard error ({se!r}) is not a finite number: the values "
            "overflow float64 on the way, so no test is made"
        )
    if se > 0:
        p = t_two_sided_p(effect / se, df)
        half = t_quantile(0.5 + level / 2.0, df) * se
    else:
        p, half = (1.0 if effect == 0 else 0.0), 0.0
    return {
        "effect": float(effect),
        "effect_ci": [float(effect - half), float(effect + half)],
        "se": float(se),
        "df": float(df),
        "n": int(n),
        "p": float(p),
    }


def paired_t(a: Values, b: Values, level: float = 0.95) -> dict:
    """Mean of ``a - b`` over units scored by both (windows or trials): the paired t-test.

    Returns ``effect`` (the mean difference), ``effect_ci`` (its t interval), ``se`` (``sd / sqrt
    n``), ``df`` (``n - 1``), ``n`` and ``p`` (two-sided). Pairing keeps what the two sides share (the
    same text, the same keys) out of the noise. At least 2 units: one unit has no spread."""
    x, y = _finite("a", a, 2), _finite("b", b, 2)
    if x.size != y.size:
        raise ValueError(f"a and b must be paired (the same units), got {x.size} and {y.size} values")
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused by _t_summary, in words
        diff = x - y
        effect, sd = float(diff.mean()), float(diff.std(ddof=1))
    return _t_summary(effect, sd / math.sqrt(diff.size), diff.size - 1, diff.size, level)


def welch_t(a: Values, b: Values, level: float = 0.95) -> dict:
    """Mean of ``a`` minus mean of ``b`` for two independent samples: Welch's t-test (unequal
    variances; Welch–Satterthwaite degrees of freedom). The fields of :func:`paired_t`, ``n`` the
    smaller sample; at least 2 units a side."""
    x, y = _finite("a", a, 2), _finite("b", b, 2)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused by _t_summary, in words
        va, vb = float(x.var(ddof=1)) / x.size, float(y.var(ddof=1)) / y.size
        effect = float(x.mean() - y.mean())
    se = math.sqrt(va + vb)
    if not (math.isfinite(se) and math.isfinite(effect)):
        return _t_summary(effect, se, 1.0, min(x.size, y.size), level)  # refused there
    if se > 0:
        try:
            df = (va + vb) ** 2 / (va**2 / (x.size - 1) + vb**2 / (y.size - 1))
        except (OverflowError, ZeroDivisionError):  # squares past float64 either way: the same ratio without them
            df = _satterthwaite([(va, x.size - 1.0), (vb, y.size - 1.0)])
    else:
        df = float(x.size + y.size - 2)
    return _t_summary(effect, se, df, min(x.size, y.size), level)


# -- many comparisons ------------------------------------------------------------------------------
def _pvalues(pvalues: Sequence[Optional[float]]) -> List[Tuple[float, int]]:
    present = [(p, i) for i, p in enumerate(pvalues) if p is not None]
    for p, _ in present:
        if isinstance(p, bool) or not (isinstance(p, (int, float)) and 0.0 <= p <= 1.0):
            raise ValueError(f"pvalues must be numbers in [0, 1] or None, got {p!r}")
    return present


def holm(pvalues: Sequence[Optional[float]], alpha: float = 0.05) -> List[bool]:
    """Holm's step-down rule: which of ``pvalues`` are rejected with family-wise error ``alpha``.

    Sorted ascending, the ``i``-th smallest (from 0) is compared with ``alpha / (m - i)``; rejection
    stops at the first that fails. ``None`` (a comparison not made) is never rejected and does not
    count in ``m``.
    """
    check_float("alpha", alpha, greater_than=0.0, maximum=1.0)
    present = _pvalues(pvalues)
    out = [False] * len(pvalues)
    m = len(present)
    for rank, (p, i) in enumerate(sorted(present)):
        if p > alpha / (m - rank):
            break
        out[i] = True
    return out


def holm_adjusted(pvalues: Sequence[Optional[float]]) -> List[Optional[float]]:
    """Holm-adjusted p-values: the smallest family-wise level at which Holm's rule rejects each
    (``max over j <= i of min(1, (m - j) p_(j))`` in ascending order, from 0); ``p_adj <= alpha``
    exactly when :func:`holm` rejects at ``alpha``. ``None`` stays None and does not count in ``m``."""
    present = _pvalues(pvalues)
    out: List[Optional[float]] = [None] * len(pvalues)
    m, running = len(present), 0.0
    for rank, (p, i) in enumerate(sorted(present)):
        running = max(running, min(1.0, (m - rank) * float(p)))
        out[i] = running
    return out


def holm_threshold(m: int, alpha: float = 0.05) -> float:
    """The strictest level Holm's rule applies among ``m`` comparisons (``alpha / m``, Bonferroni's)."""
    _count("m", m, minimum=1)
    check_float("alpha", alpha, greater_than=0.0, maximum=1.0)
    return alpha / m


# -- across training seeds ---------------------------------------------------------------------
def _satterthwaite(parts: Sequence[Tuple[float, float]]) -> float:
    """Degrees of freedom of a sum of variance estimates ``(v_i, df_i)`` (Satterthwaite 1946)."""
    total = sum(v for v, _ in parts)
    if not total > 0:
        return float(max(df for _, df in parts))
    denom = sum(v * v / df for v, df in parts if v > 0)
    dof = total * total / denom if denom > 0 else math.inf
    if math.isfinite(dof):
        return dof
    # a square overflowed or underflowed: (sum v)^2 / sum(v^2 / df), each v taken as its share of the sum
    return 1.0 / sum((v / total) ** 2 / df for v, df in parts if v > 0)


def across_seeds(
    effects: Values,
    *,
    windows: Optional[Sequence[Values]] = None,
    unit_se: Optional[Values] = None,
    unit_df: Optional[Values] = None,
    level: float = 0.95,
) -> dict:
    """Is a claim's mean effect over ``k >= 2`` training seeds there beyond both the spread between
    seeds and the sampling of the units each run measured?

    ``effects[i]`` is seed ``i``'s effect (the mean of its per-unit differences). The variance of
    their mean has two parts, estimated separately and **added** (a conservative sum, in the spirit
    of Clark's 1973 min F' for effects crossed with subjects and items):

    * **between seeds**: ``var(effects) / k``, with ``k - 1`` degrees of freedom;
    * **the units' sampling**, in one of two forms:

      - ``windows``: the per-unit differences of every seed on the **same** units (the lab's
        validation windows, which every seed reads): a ``(k, n)`` table. Each window's differences
        are averaged over the seeds and the variance of the mean is that of those ``n`` averages
        over ``n`` (``n - 1`` degrees of freedom). This holds whatever the correlation between the
        seeds' errors on a window, which treating the seeds as independent samples would not;
      - ``unit_se`` / ``unit_df``: each seed's standard error of its own effect, for units drawn
        afresh per seed (passkey trials): ``sum(se_i^2) / k^2``, Satterthwaite's degrees of freedom.

    ``t = mean / sqrt(between + units)`` against Student's t with Satterthwaite's degrees of
    freedom gives ``p`` (two-sided) and the ``level`` interval ``effect_ci``. Since the spread of the
    per-seed effects already carries part of the sampling noise, the sum counts that part twice: the
    test errs on the side of "within noise", never of a false "seen"."""
    x = _finite("effects", effects)
    k = x.size
    if k < 2:
        raise ValueError(f"effects must hold at least 2 seeds, got {k}")
    mean = float(x.mean())
    sd = float(x.std(ddof=1))
    between = sd * sd / k
    if (windows is None) == (unit_se is None):
        raise ValueError("give exactly one of windows (shared units) and unit_se (units drawn per seed)")
    if windows is not None:
        rows = [_finite(f"windows[{i}]", w, 2) for i, w in enumerate(windows)]
        if len(rows) != k:
            raise ValueError(f"windows must hold one row per seed ({k}), got {len(rows)}")
        sizes = {r.size for r in rows}
        if len(sizes) != 1:
            raise ValueError(f"windows must score the same units in every seed, got sizes {sorted(sizes)}")
        table = np.vstack(rows)  # (seeds, windows)
        # Summaries keep the differences to 6 decimals, so their means may differ from the effects by
        # half a unit of that: far less than any spread the test weighs.
        if not np.allclose(table.mean(axis=1), x, rtol=0.0, atol=1e-6):
            raise ValueError("effects must be the per-seed means of windows (to 1e-6)")
        per_window = table.mean(axis=0)  # (windows,): each window's difference averaged over seeds
        n = per_window.size
        units, units_df = float(per_window.var(ddof=1)) / n, float(n - 1)
        how = f"{n} windows paired across seeds"
    else:
        se = _finite("unit_se", unit_se)
        df = _finite("unit_df", unit_df if unit_df is not None else [])
        if se.size != k or df.size != k:
            raise ValueError(f"unit_se and unit_df must give one value per seed ({k}), got {se.size} and {df.size}")
        if np.any(se < 0) or np.any(df <= 0):
            raise ValueError("unit_se must be >= 0 and unit_df > 0")
        units = float(np.sum(se**2)) / (k * k)
        units_df = _satterthwaite([(float(s * s), float(d)) for s, d in zip(se, df)])
        how = "each seed's own units"
    dof = _satterthwaite([(between, float(k - 1)), (units, units_df)])
    out = _t_summary(mean, math.sqrt(between + units), dof, k, level)
    out.update(
        seeds=k,
        effect_sd=sd,
        se_between=math.sqrt(between),
        se_units=math.sqrt(units),
        units=how,
        direction=int(np.sign(mean)),
    )
    return out
