"""The lab's statistics: exact intervals for proportions, paired tests, and Holm's rule.

Pure functions of counts and per-unit values (numpy and the standard library only).

* A proportion ``k / n`` (passkey exact matches) gets the exact Clopper–Pearson interval (Clopper and
  Pearson 1934): 0 of 100 gives [0%, 3.6%], never [0%, 0%] as a percentile bootstrap of 0/1 outcomes
  does. :func:`wilson` is the score interval, for comparison.
* Two models scored on the **same** trials are compared with the exact McNemar test: under "no
  difference" each discordant trial (one model right, the other wrong) is a fair coin
  (:func:`mcnemar_exact`). Two proportions from **different** trials (near against far keys at one
  length) use Fisher's exact test (:func:`fisher_exact`).
* Two means over the **same** windows or trials are compared through the per-unit differences: a
  paired bootstrap gives the interval of the mean difference and its standard error; the p-value is
  the normal one of ``mean / se`` (:func:`paired_difference`). Means over different units use the
  same construction with each side resampled on its own (:func:`unpaired_difference`).
* A run makes many comparisons. :func:`holm` applies Holm's step-down rule (Holm 1979), which keeps
  the chance of *any* false rejection among them at ``alpha`` whatever their dependence.
"""

from __future__ import annotations

import math
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

from .._checks import check_float, check_int

#: One value per unit (window or trial).
Values = Union[Sequence[float], np.ndarray]


def _log_pmf(k: int, n: int, p: float) -> float:
    if p <= 0.0:
        return 0.0 if k == 0 else -math.inf
    if p >= 1.0:
        return 0.0 if k == n else -math.inf
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * math.log(p) + (n - k) * math.log1p(-p)


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed exactly term by term."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return min(1.0, sum(math.exp(_log_pmf(i, n, p)) for i in range(k + 1)))


def binom_sf(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    return min(1.0, sum(math.exp(_log_pmf(i, n, p)) for i in range(k, n + 1)))


def _counts(k: int, n: int) -> None:
    check_int("n", n, minimum=1)
    check_int("k", k, minimum=0, maximum=n)


def _bisect(f, lo: float, hi: float) -> float:
    """The root of the increasing function ``f`` on [lo, hi] (f(lo) <= 0 <= f(hi)), to 1e-12."""
    for _ in range(200):
        mid = (lo + hi) / 2
        if f(mid) > 0:
            hi = mid
        else:
            lo = mid
        if hi - lo < 1e-12:
            break
    return (lo + hi) / 2


def clopper_pearson(k: int, n: int, level: float = 0.95) -> Tuple[float, float]:
    """Exact (Clopper–Pearson) interval of a proportion from ``k`` successes in ``n`` trials.

    The lower end is the ``p`` with P(X >= k | p) = (1 - level)/2, the upper end the ``p`` with
    P(X <= k | p) = (1 - level)/2; 0 of 100 gives [0, 0.0362] (``1 - 0.025 ** (1/100)``).
    """
    _counts(k, n)
    check_float("level", level, greater_than=0.0, maximum=0.999999)
    tail = (1.0 - level) / 2.0
    lo = 0.0 if k == 0 else _bisect(lambda p: binom_sf(k, n, p) - tail, 0.0, 1.0)
    hi = 1.0 if k == n else _bisect(lambda p: tail - binom_cdf(k, n, p), 0.0, 1.0)
    return lo, hi


def wilson(k: int, n: int, level: float = 0.95) -> Tuple[float, float]:
    """Wilson score interval of a proportion (Wilson 1927)."""
    _counts(k, n)
    z = _normal_quantile(0.5 + level / 2.0)
    phat = k / n
    centre = (phat + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def binom_test(k: int, n: int, p: float = 0.5) -> float:
    """Two-sided exact binomial test of ``k`` successes in ``n`` trials against ``p``: the total
    probability of every outcome no more likely than the one observed (the usual definition)."""
    _counts(k, n)
    observed = _log_pmf(k, n, p)
    total = sum(math.exp(_log_pmf(i, n, p)) for i in range(n + 1) if _log_pmf(i, n, p) <= observed + 1e-7)
    return min(1.0, total)


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


def _log_hypergeom(x: int, k_total: int, n1: int, n2: int) -> float:
    """log P(X = x) for the successes X of sample 1 (size n1) given k_total successes in all."""

    def log_comb(n: int, r: int) -> float:
        return math.lgamma(n + 1) - math.lgamma(r + 1) - math.lgamma(n - r + 1)

    return log_comb(n1, x) + log_comb(n2, k_total - x) - log_comb(n1 + n2, k_total)


def fisher_exact(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided Fisher exact test of ``k1 / n1`` against ``k2 / n2`` (independent trials): the
    probability, given the margins, of every table no more likely than the observed one."""
    _counts(k1, n1)
    _counts(k2, n2)
    total = k1 + k2
    lo, hi = max(0, total - n2), min(total, n1)
    observed = _log_hypergeom(k1, total, n1, n2)
    p = sum(
        math.exp(_log_hypergeom(x, total, n1, n2))
        for x in range(lo, hi + 1)
        if _log_hypergeom(x, total, n1, n2) <= observed + 1e-7
    )
    return min(1.0, p)


def _normal_quantile(q: float) -> float:
    """Inverse of the standard normal CDF (bisection on ``erf``; exact to 1e-12)."""
    return _bisect(lambda x: 0.5 * (1 + math.erf(x / math.sqrt(2))) - q, -40.0, 40.0)


def normal_two_sided_p(z: float) -> float:
    """P(|Z| >= |z|) for a standard normal Z."""
    return math.erfc(abs(z) / math.sqrt(2))


def _binary(name: str, values) -> np.ndarray:
    x = _finite(name, values)
    if not np.all((x == 0) | (x == 1)):
        raise ValueError(f"{name} must hold only 0 and 1 outcomes")
    return x


def _finite(name: str, values) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} must hold only finite numbers")
    return x


def _summary(mean: float, boots: np.ndarray, level: float) -> dict:
    tail = (1.0 - level) / 2.0 * 100.0
    lo, hi = np.percentile(boots, [tail, 100.0 - tail])
    se = float(boots.std(ddof=1)) if boots.size > 1 else 0.0
    if se > 0:
        p = normal_two_sided_p(mean / se)
    else:  # every resample gave the same mean: the units all agree
        p = 1.0 if mean == 0 else 0.0
    return {"effect": float(mean), "effect_ci": [float(lo), float(hi)], "se": se, "p": float(p)}


def paired_difference(a: Values, b: Values, *, samples: int = 2000, level: float = 0.95, seed: int = 0) -> dict:
    """Mean of ``a - b`` over units scored by both (windows or trials), by a paired bootstrap.

    Returns ``effect`` (mean difference), ``effect_ci`` (percentile interval), ``se`` (the bootstrap
    standard error) and ``p`` (two-sided, normal approximation of ``effect / se``). Resampling the
    units, not each side on its own, keeps what the two sides share (the same text, the same keys)
    out of the noise.
    """
    x, y = _finite("a", a), _finite("b", b)
    if x.size != y.size:
        raise ValueError(f"a and b must be paired (the same units), got {x.size} and {y.size} values")
    check_int("samples", samples, minimum=2)
    diff = x - y
    rng = np.random.default_rng(seed)
    boots = diff[rng.integers(0, diff.size, size=(samples, diff.size))].mean(axis=1)
    return _summary(float(diff.mean()), boots, level)


def unpaired_difference(a: Values, b: Values, *, samples: int = 2000, level: float = 0.95, seed: int = 0) -> dict:
    """Mean of ``a`` minus mean of ``b`` for two independent samples, each resampled on its own;
    the same fields as :func:`paired_difference`."""
    x, y = _finite("a", a), _finite("b", b)
    check_int("samples", samples, minimum=2)
    rng = np.random.default_rng(seed)
    boots = x[rng.integers(0, x.size, size=(samples, x.size))].mean(axis=1) - y[
        rng.integers(0, y.size, size=(samples, y.size))
    ].mean(axis=1)
    return _summary(float(x.mean() - y.mean()), boots, level)


def holm(pvalues: Sequence[Optional[float]], alpha: float = 0.05) -> List[bool]:
    """Holm's step-down rule: which of ``pvalues`` are rejected with family-wise error ``alpha``.

    Sorted ascending, the ``i``-th smallest (from 0) is compared with ``alpha / (m - i)``; rejection
    stops at the first that fails. ``None`` (a comparison not made) is never rejected and does not
    count in ``m``.
    """
    check_float("alpha", alpha, greater_than=0.0, maximum=1.0)
    present = [(p, i) for i, p in enumerate(pvalues) if p is not None]
    for p, _ in present:
        if not (isinstance(p, (int, float)) and 0.0 <= p <= 1.0):
            raise ValueError(f"pvalues must be numbers in [0, 1] or None, got {p!r}")
    out = [False] * len(pvalues)
    m = len(present)
    for rank, (p, i) in enumerate(sorted(present)):
        if p > alpha / (m - rank):
            break
        out[i] = True
    return out


def holm_threshold(m: int, alpha: float = 0.05) -> float:
    """The strictest level Holm's rule applies among ``m`` comparisons (``alpha / m``, Bonferroni's)."""
    check_int("m", m, minimum=1)
    return alpha / m


# -- across training seeds ---------------------------------------------------------------------
def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz, Numerical Recipes 6.4)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) for a, b > 0 and 0 <= x <= 1."""
    if not (a > 0 and b > 0):
        raise ValueError(f"betainc needs a > 0 and b > 0, got a={a!r}, b={b!r}")
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"x must be in [0, 1], got {x!r}")
    if x in (0.0, 1.0):
        return x
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: int) -> float:
    """P(|T| >= |t|) for Student's T with ``df`` degrees of freedom (1 for t = 0, 0 for |t| = inf)."""
    check_int("df", df, minimum=1)
    if math.isnan(t):
        raise ValueError("t must be a number, got nan")
    if math.isinf(t):
        return 0.0
    return min(1.0, betainc(df / 2.0, 0.5, df / (df + t * t)))


def t_quantile(q: float, df: int) -> float:
    """The ``q`` quantile of Student's T with ``df`` degrees of freedom (0.5 < q < 1)."""
    check_float("q", q, greater_than=0.5, maximum=1.0 - 1e-12)
    hi = 1.0
    while t_two_sided_p(hi, df) > 2 * (1 - q):
        hi *= 2.0
    return _bisect(lambda t: 2 * (1 - q) - t_two_sided_p(t, df), 0.0, hi)


def signed_z(effect: float, p: float) -> float:
    """The standard normal score of a two-sided ``p`` with the sign of ``effect`` (0 for p = 1 or
    effect = 0; capped at 37.5, where a double's tail probability ends)."""
    if effect == 0 or p >= 1.0:
        return 0.0
    z = 37.5 if p <= 0.0 else min(37.5, _normal_quantile(1.0 - p / 2.0) if p > 1e-15 else _z_of_tiny(p))
    return math.copysign(z, effect)


def _z_of_tiny(p: float) -> float:
    """|z| with erfc(|z| / sqrt 2) = p for p too small for ``1 - p / 2`` to differ from 1."""
    return _bisect(lambda z: math.log(p) - math.log(max(normal_two_sided_p(z), 1e-320)), 0.0, 37.5)


def across_seeds(effects: Values, pvalues: Sequence[float], level: float = 0.95) -> dict:
    """Is a per-seed effect there beyond **both** the spread between training seeds and the
    sampling inside each seed's run? (at least 2 seeds)

    ``effects[i]`` is seed ``i``'s effect (a paired difference), ``pvalues[i]`` its two-sided
    p-value from its own run's test of "no difference" (window or trial sampling).

    * **between seeds**: a one-sample t-test of the per-seed effects against 0 with ``k - 1``
      degrees of freedom. The spread of the per-seed effects holds both the training-seed spread
      and each run's sampling noise, so this is the standard test of an effect across seeds
      (and ``effect_ci`` its t interval);
    * **within seeds**: Stouffer's signed combination of the per-seed p-values (their normal
      scores with the sign of each effect, summed over ``sqrt(k)``), a test that the runs' own
      sampling cannot explain the effects; with only a few seeds the sample spread can come out
      small by chance, and this test keeps each run's sampling in the verdict regardless.

    ``p`` is the larger of the two (an intersection–union test: "no effect" is rejected at level
    alpha only when both tests reject at alpha), ``direction`` the sign both tests agree on (0 if
    they disagree)."""
    x = _finite("effects", effects)
    if x.size < 2:
        raise ValueError(f"effects must hold at least 2 seeds, got {x.size}")
    if len(pvalues) != x.size:
        raise ValueError(f"pvalues must give one p-value per seed ({x.size}), got {len(pvalues)}")
    for p in pvalues:
        if not (isinstance(p, (int, float)) and 0.0 <= p <= 1.0):
            raise ValueError(f"pvalues must be numbers in [0, 1], got {p!r}")
    k, mean = x.size, float(x.mean())
    sd = float(x.std(ddof=1))
    se = sd / math.sqrt(k)
    if se > 0:
        p_between = t_two_sided_p(mean / se, k - 1)
    else:  # every seed gave the same effect
        p_between = 1.0 if mean == 0 else 0.0
    half = t_quantile(0.5 + level / 2.0, k - 1) * se
    z = sum(signed_z(float(e), float(p)) for e, p in zip(x, pvalues)) / math.sqrt(k)
    p_within = normal_two_sided_p(z)
    direction = int(np.sign(mean)) if np.sign(mean) == np.sign(z) else 0
    return {
        "seeds": k,
        "effect": mean,
        "effect_sd": sd,
        "effect_ci": [mean - half, mean + half],
        "p_between": float(p_between),
        "z_within": float(z),
        "p_within": float(p_within),
        "p": float(max(p_between, p_within)),
        "direction": direction,
    }
