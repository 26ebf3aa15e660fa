"""The lab's statistics against independent references (binomial and hypergeometric sums written out
here with math.comb, the incomplete beta function by its continued fraction, Newcombe's published
examples), the verdict rule on the inputs that broke it (NaN, None, empty, 0/100, one window), and
null simulations that show each test's false-alarm rate where the earlier tests ran high."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from posenc.measuring.lab.report import build_results, markdown
from posenc.measuring.lab.stats import (
    across_seeds,
    binom_test,
    clopper_pearson,
    fisher_exact,
    holm,
    holm_adjusted,
    mcnemar_exact,
    newcombe_paired,
    newcombe_unpaired,
    paired_t,
    t_quantile,
    t_two_sided_p,
    welch_t,
    wilson,
)
from posenc.measuring.lab.verdicts import NOT_MEASURED, SEEN, WITHIN_NOISE, combine_seeds, compare, judge_all, verdicts


def cdf(k, n, p):
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


# -- proportions -----------------------------------------------------------------------------------
def test_zero_of_a_hundred_is_zero_to_three_point_six_percent():
    lo, hi = clopper_pearson(0, 100)
    assert lo == 0.0 and hi == pytest.approx(1 - 0.025 ** (1 / 100), abs=1e-9)
    assert round(hi, 4) == 0.0362
    assert clopper_pearson(100, 100) == pytest.approx((0.025 ** (1 / 100), 1.0), abs=1e-9)


@pytest.mark.parametrize("k, n", [(1, 10), (5, 10), (37, 64), (99, 100), (3, 12)])
def test_clopper_pearson_ends_put_exactly_two_and_a_half_percent_in_each_tail(k, n):
    lo, hi = clopper_pearson(k, n)
    assert 1 - cdf(k - 1, n, lo) == pytest.approx(0.025, abs=1e-8)  # P(X >= k | lo)
    assert cdf(k, n, hi) == pytest.approx(0.025, abs=1e-8)  # P(X <= k | hi)
    assert lo < k / n < hi


def test_wilson_known_values():
    z = 1.959963984540054
    assert wilson(0, 100) == pytest.approx((0.0, z * z / (100 + z * z)), abs=1e-9)
    lo, hi = wilson(5, 10)
    half = z / (1 + z * z / 10) * math.sqrt(0.025 + z * z / 400)
    assert (lo + hi) / 2 == pytest.approx(0.5) and hi - lo == pytest.approx(2 * half)


def test_proportion_inputs_are_checked():
    with pytest.raises(ValueError, match="k must be <= 10, got 11"):
        clopper_pearson(11, 10)
    with pytest.raises(ValueError, match="n must be >= 1"):
        clopper_pearson(0, 0)


# -- tests -------------------------------------------------------------------------------------------
def test_zero_against_four_of_a_hundred_is_not_a_difference():
    """Regression: the percentile bootstrap gave 0/100 the interval [0, 0] and called this "seen"."""
    p = fisher_exact(0, 100, 4, 100)
    by_hand = 2 * math.comb(100, 4) / math.comb(200, 4)  # the two extreme tables, equally likely
    assert p == pytest.approx(by_hand, rel=1e-9) and round(p, 2) == 0.12
    a = {"accuracy": 0.0, "accuracy_ci": [0.0, 0.0], "correct": [0] * 100}  # the old interval
    b = {"accuracy": 0.04, "accuracy_ci": [0.01, 0.07], "correct": [1] * 4 + [0] * 96}
    r = judge_all([compare("far < near", a, b, "<", kind="accuracy", labels=("far", "near"), group="g", paired=False)])
    assert r[0]["verdict"] == WITHIN_NOISE


def test_exact_binomial_and_mcnemar_by_hand():
    assert binom_test(0, 6) == pytest.approx(2 * 0.5**6)
    assert binom_test(3, 10, 0.5) == pytest.approx(2 * cdf(3, 10, 0.5))
    # Asymmetric null: every outcome no more likely than the observed one.
    pmf = [math.comb(10, i) * 0.2**i * 0.8 ** (10 - i) for i in range(11)]
    assert binom_test(5, 10, 0.2) == pytest.approx(sum(q for q in pmf if q <= pmf[5] * (1 + 1e-7)))
    a = [1, 1, 1, 1, 1, 1, 0, 0, 1, 0]
    b = [0, 0, 0, 0, 0, 1, 0, 1, 1, 0]
    assert mcnemar_exact(a, b) == (5, 1, pytest.approx(binom_test(5, 6)))
    assert mcnemar_exact([1, 0], [1, 0]) == (0, 0, 1.0)
    with pytest.raises(ValueError, match="same trials"):
        mcnemar_exact([1, 0], [1])
    with pytest.raises(ValueError, match="only 0 and 1"):
        mcnemar_exact([2, 0], [1, 0])


def test_pairing_sees_a_shift_that_the_shared_noise_hides():
    rng = np.random.default_rng(1)
    text = rng.normal(3.0, 0.5, 128)  # how hard each window is, for every model
    a, b = text + 0.05 + rng.normal(0, 0.02, 128), text + rng.normal(0, 0.02, 128)
    paired, unpaired = paired_t(a, b), welch_t(a, b)
    assert paired["effect"] == pytest.approx(unpaired["effect"]) == pytest.approx(float(np.mean(a - b)))
    assert paired["p"] < 1e-6 < 0.3 < unpaired["p"]
    lo, hi = paired["effect_ci"]
    assert lo < paired["effect"] < hi and lo > 0
    with pytest.raises(ValueError, match="finite"):
        paired_t([1.0, math.nan], [1.0, 2.0])


def test_the_t_tests_by_their_formulas():
    a, b = [2.0, 3.5, 1.0, 4.0], [1.0, 1.5, 1.5, 2.0]
    d = np.subtract(a, b)
    se = d.std(ddof=1) / 2
    got = paired_t(a, b)
    assert got["effect"] == pytest.approx(d.mean(), abs=1e-15) and got["se"] == pytest.approx(se, abs=1e-15)
    assert got["df"] == 3 and got["n"] == 4
    assert got["p"] == pytest.approx(t_tail_reference(d.mean() / se, 3), abs=1e-12)
    half = t_quantile(0.975, 3) * se
    assert got["effect_ci"] == pytest.approx([d.mean() - half, d.mean() + half], abs=1e-12)
    # Welch: unequal variances, Welch–Satterthwaite degrees of freedom.
    x, y = np.array([1.0, 2.0, 4.0, 7.0, 11.0]), np.array([3.0, 3.5, 2.5])
    va, vb = x.var(ddof=1) / 5, y.var(ddof=1) / 3
    df = (va + vb) ** 2 / (va**2 / 4 + vb**2 / 2)
    w = welch_t(x, y)
    assert w["df"] == pytest.approx(df, abs=1e-12) and w["se"] == pytest.approx(math.sqrt(va + vb), abs=1e-15)
    assert w["p"] == pytest.approx(t_tail_reference((x.mean() - y.mean()) / math.sqrt(va + vb), df), abs=1e-12)
    # Every unit the same: no spread, p 1 for no difference and 0 for a difference.
    assert paired_t([1.0, 1.0], [1.0, 1.0])["p"] == 1.0 and paired_t([2.0, 2.0], [1.0, 1.0])["p"] == 0.0


def test_one_unit_a_side_is_refused_not_seen():
    """Regression: one window per side gave p = 0 and "seen" (a bootstrap of one value has no spread)."""
    with pytest.raises(ValueError, match="a must hold at least 2 values"):
        paired_t([3.5], [3.0])
    with pytest.raises(ValueError, match="b must hold at least 2 values"):
        welch_t([3.5, 3.6], [3.0])
    one = {"bpb": 3.5, "bpb_ci": [3.5, 3.5], "bpb_windows": [3.5]}
    other = {"bpb": 3.0, "bpb_ci": [3.0, 3.0], "bpb_windows": [3.0]}
    r = judge_all([compare("c", one, other, ">", kind="bpb", labels=("a", "b"), group="g", paired=True)])[0]
    assert r["verdict"] == NOT_MEASURED and "1 window on a side; a test needs at least 2" in r["evidence"]


@pytest.mark.parametrize("n", [32, 64])
@pytest.mark.parametrize("shape", ["normal", "heavy-tailed"])
def test_per_run_false_alarms_at_holms_first_step_are_near_nominal(n, shape):
    """A seeded null simulation (no difference at all) at the level of Holm's first step among 30
    comparisons: the paired t-test's false alarms stay near that level, where the earlier normal
    p-value from a bootstrap standard error (its bootstrap-free limit: the spread with ddof 0) raised
    1.2 to 2.2 times as many."""
    alpha, reps = 0.05 / 30, 60_000
    rng = np.random.default_rng(2026 + n)
    d = rng.standard_normal((reps, n)) if shape == "normal" else rng.standard_t(5, (reps, n))
    mean, sd = d.mean(axis=1), d.std(axis=1, ddof=1)
    t = mean / (sd / math.sqrt(n))
    new = float(np.mean(np.abs(t) >= t_quantile(1 - alpha / 2, n - 1))) / alpha
    z_crit = 3.1417066  # the normal quantile of 1 - alpha / 2 for alpha = 0.05 / 30
    old = float(np.mean(np.abs(mean / (d.std(axis=1, ddof=0) / math.sqrt(n))) >= z_crit)) / alpha
    assert 0.6 < new < 1.3, new  # 100 expected false alarms: 0.6 and 1.3 are 4 and 3 sd away
    if n == 32:
        assert old > 1.6, old
    assert old > new
    # The library's own p-values decide the same way as the statistic the simulation counts.
    for row, tv in zip(d[:50], t[:50]):
        assert (paired_t(row, np.zeros(n))["p"] <= alpha) == (abs(tv) >= t_quantile(1 - alpha / 2, n - 1))


def test_holm_by_hand():
    assert holm([0.01, 0.04, 0.03, 0.005]) == [True, False, False, True]  # 0.03 > 0.05 / 2 stops it
    assert holm([0.01, None, 0.02]) == [True, False, True]  # two comparisons, not three
    assert holm([0.2]) == [False] and holm([]) == []
    with pytest.raises(ValueError, match="pvalues"):
        holm([1.5])


def test_holm_adjusted_p_by_hand_and_against_the_rule():
    got = holm_adjusted([0.01, 0.04, 0.03, 0.005])
    assert got == pytest.approx([0.03, 0.06, 0.06, 0.02])  # 4*.005, 3*.01, max(2*.03, .03), max(.04, .06)
    assert holm_adjusted([0.2, None, 0.7]) == [pytest.approx(0.4), None, pytest.approx(0.7)]
    rng = np.random.default_rng(5)
    for _ in range(200):
        ps = list(rng.uniform(0, 0.1, rng.integers(1, 12)) ** 2)
        adjusted = holm_adjusted(ps)
        for alpha in (0.01, 0.05, 0.1):
            assert [q <= alpha for q in adjusted] == holm(ps, alpha)


# -- not measured, everywhere -------------------------------------------------------------------------
def _run(**rope_512):
    base = {"bpb": 3.0, "bpb_ci": [2.9, 3.1], "bpb_windows": [3.0] * 8}
    top = dict({"bpb": 3.5, "bpb_ci": [3.4, 3.6], "bpb_windows": [3.5] * 8}, **rope_512)
    return {
        "config": {"steps": 300, "eval_windows": 64, "retrieval_trials": 0},
        "train_len": 64,
        "eval_lengths": [64, 512],
        "schemes": {"rope": {"eval": {"64": base, "512": top}}},
        "extension": {},
    }


@pytest.mark.parametrize(
    "damage",
    [
        {"bpb_ci": [math.nan, math.nan]},  # was "within noise"
        {"bpb_ci": [3.4, math.nan]},  # was "seen"
        {"bpb_ci": [None, None]},  # was a TypeError
        {"bpb": math.nan},
        {"bpb": None},
        {"bpb_windows": [3.5] * 7 + [math.nan]},
        {"bpb_windows": []},
    ],
)
def test_a_number_that_is_not_there_is_not_measured(damage):
    ppl = verdicts(_run(**damage))[0]
    assert ppl["verdict"] == NOT_MEASURED and ppl["evidence"].startswith("not measured")
    assert verdicts(_run())[0]["verdict"] == SEEN


def test_empty_or_single_lengths_give_no_verdicts():
    """Regression: empty eval_lengths raised IndexError."""
    assert verdicts(dict(_run(), eval_lengths=[])) == []
    assert verdicts(dict(_run(), eval_lengths=[64])) == []
    assert verdicts({}) == []


def test_the_report_of_a_run_with_holes_says_not_measured():
    cfg = {
        "preset": "quick",
        "seed": 0,
        "n_layers": 1,
        "d_model": 8,
        "n_heads": 1,
        "train_len": 64,
        "steps": 300,
        "batch_size": 1,
        "lr": 1e-3,
        "warmup_steps": 1,
        "min_lr_ratio": 0.1,
        "eval_windows": 64,
        "eval_multipliers": [1, 8],
        "schemes": ["rope"],
        "final_bytes": 32,
        "retrieval_trials": 0,
        "bootstrap_samples": 100,
    }
    progress = {"eval": {"rope": {"64": {"bpb": math.nan, "bpb_ci": [None, None]}}}, "extension": {}, "lr_sweep": {}}
    res = build_results(cfg, {}, {}, progress, complete=False)
    assert "| rope | 1e-03 | — | not measured |".replace("1e-03", "0.001") in markdown(res)


# -- across training seeds -------------------------------------------------------------------------
def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz), written out here as the
    independent reference for scipy's Student t tail."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1000):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-16:
            break
    return h


def t_tail_reference(t: float, df: float) -> float:
    """P(|T| >= |t|) = I_{df / (df + t^2)}(df / 2, 1 / 2), by the continued fraction."""
    a, b, x = df / 2.0, 0.5, df / (df + t * t)
    if x in (0.0, 1.0):
        return x
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


@pytest.mark.parametrize("t", [0.0, 0.5, 2.0, 7.3, -3.0])
def test_student_t_tail_against_closed_forms(t):
    # df = 1 is Cauchy, df = 2 has P(|T| >= t) = 1 - t / sqrt(2 + t^2); a large df is the normal.
    assert t_two_sided_p(t, 1) == pytest.approx(1 - 2 * math.atan(abs(t)) / math.pi, abs=1e-12)
    assert t_two_sided_p(t, 2) == pytest.approx(1 - abs(t) / math.sqrt(2 + t * t), abs=1e-12)
    assert t_two_sided_p(t, 100000) == pytest.approx(math.erfc(abs(t) / math.sqrt(2)), abs=1e-4)
    assert t_two_sided_p(math.inf, 3) == 0.0


def test_student_t_tail_against_the_continued_fraction_on_many_inputs():
    rng = np.random.default_rng(7)
    for t, df in zip(rng.uniform(-12, 12, 1500), rng.uniform(0.5, 300, 1500)):
        assert t_two_sided_p(float(t), float(df)) == pytest.approx(t_tail_reference(float(t), float(df)), abs=1e-12)


def test_student_t_quantiles_by_table():
    assert t_quantile(0.975, 1) == pytest.approx(12.7062, abs=1e-4)
    assert t_quantile(0.975, 2) == pytest.approx(4.3027, abs=1e-4)
    assert t_quantile(0.975, 10) == pytest.approx(2.2281, abs=1e-4)
    for q, df in ((0.975, 2.5), (0.9995, 31.0), (0.6, 7.0)):
        assert t_tail_reference(t_quantile(q, df), df) == pytest.approx(2 * (1 - q), abs=1e-12)
    with pytest.raises(ValueError, match="q must be > 0.5"):
        t_quantile(0.4, 3)


def test_the_exact_tests_against_sums_written_out_on_many_inputs():
    rng = np.random.default_rng(11)
    for _ in range(300):
        n = int(rng.integers(1, 80))
        k = int(rng.integers(0, n + 1))
        p = float(rng.uniform(0.05, 0.95))
        pmf = [math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(n + 1)]
        by_hand = min(1.0, sum(q for q in pmf if q <= pmf[k] * (1 + 1e-7)))
        assert binom_test(k, n, p) == pytest.approx(by_hand, abs=1e-12)
        lo, hi = clopper_pearson(k, n)
        if k > 0:  # P(X >= k | lo), summed term by term
            assert sum(math.comb(n, i) * lo**i * (1 - lo) ** (n - i) for i in range(k, n + 1)) == pytest.approx(
                0.025, abs=1e-12
            )
        if k < n:
            assert cdf(k, n, hi) == pytest.approx(0.025, abs=1e-12)
        n2 = int(rng.integers(1, 60))
        k2 = int(rng.integers(0, n2 + 1))
        total = k + k2
        tables = {
            x: math.comb(n, x) * math.comb(n2, total - x) / math.comb(n + n2, total)
            for x in range(max(0, total - n2), min(total, n) + 1)
        }
        fisher = min(1.0, sum(q for q in tables.values() if q <= tables[k] * (1 + 1e-7)))
        assert fisher_exact(k, n, k2, n2) == pytest.approx(fisher, abs=1e-12)


# -- differences of proportions ----------------------------------------------------------------------
def test_newcombe_unpaired_against_the_papers_examples():
    # Newcombe (1998), Stat. Med. 17:873, Table II, method 10.
    for counts, (lo, hi) in (
        ((56, 70, 48, 80), (0.0524, 0.3339)),
        ((9, 10, 3, 10), (0.1705, 0.8090)),
        ((5, 56, 0, 29), (-0.0381, 0.1926)),
        ((0, 10, 0, 20), (-0.1611, 0.2775)),
    ):
        assert newcombe_unpaired(*counts) == pytest.approx((lo, hi), abs=5e-5)


def test_newcombe_is_honest_at_zero_and_one_hundred_percent():
    """Regression: every seed 0/64 against 0/64 printed "+0% [+0%, +0%]", a zero-width interval."""
    upper = wilson(0, 64)[1]
    assert newcombe_unpaired(0, 64, 0, 64) == pytest.approx((-upper, upper), abs=1e-15) and upper > 0.05
    assert newcombe_unpaired(64, 64, 64, 64) == pytest.approx((-upper, upper), abs=1e-15)
    assert newcombe_paired(0, 0, 0, 64) == pytest.approx((-upper, upper), abs=1e-15)
    lo, hi = newcombe_paired(64, 0, 0, 0)
    assert lo < 0 < hi


def test_newcombe_paired_by_its_parts():
    # With a margin empty phi is 0 and the paired interval is the square-and-add of the two Wilson
    # intervals on the same n, which is the unpaired formula at n1 = n2.
    assert newcombe_paired(0, 7, 0, 33) == pytest.approx(newcombe_unpaired(7, 40, 0, 40), abs=1e-15)
    # Positive dependence (ad > bc + n/2) narrows it: the same margins with more concordant trials.
    wide = newcombe_paired(5, 10, 5, 20)
    narrow = newcombe_paired(15, 0, 0, 25)  # p1 = p2 = 15/40, every trial concordant
    assert narrow[1] - narrow[0] < wide[1] - wide[0]
    assert newcombe_paired(10, 3, 3, 24) == pytest.approx(tuple(-v for v in reversed(newcombe_paired(10, 3, 3, 24))))
    with pytest.raises(ValueError, match="at least one trial"):
        newcombe_paired(0, 0, 0, 0)
    with pytest.raises(ValueError, match="second_only must be >= 0"):
        newcombe_paired(1, 1, -1, 1)


def test_newcombe_paired_covers_at_its_level():
    """A seeded simulation of 64 paired trials: the 95% interval holds the true difference in at
    least 93% of 1,500 draws, at a rare and at a middling success rate."""
    rng = np.random.default_rng(3)
    for probs in ((0.02, 0.03, 0.01, 0.94), (0.4, 0.15, 0.05, 0.4)):
        truth = probs[1] - probs[2]
        hits = 0
        for table in rng.multinomial(64, probs, size=1500):
            lo, hi = newcombe_paired(*(int(v) for v in table))
            hits += lo <= truth <= hi
        assert hits / 1500 >= 0.93, (probs, hits / 1500)


def test_an_accuracy_comparison_carries_its_newcombe_interval_and_counts():
    a = {"accuracy": 0.0, "accuracy_ci": [0.0, 0.06], "correct": [0] * 64}
    b = {"accuracy": 0.0, "accuracy_ci": [0.0, 0.06], "correct": [0] * 64}
    r = judge_all([compare("c", a, b, ">", kind="accuracy", labels=("a", "b"), group="g", paired=True)])[0]
    assert r["counts"] == [0, 0, 0, 64] and r["effect_ci"][0] < 0 < r["effect_ci"][1]
    assert "+0% [-6%, +6%]" in r["evidence"]


# -- across training seeds -------------------------------------------------------------------------
def test_across_seeds_with_shared_windows_by_hand():
    table = np.array([[0.1, 0.3, 0.2, 0.4], [0.2, 0.5, 0.1, 0.4], [0.3, 0.4, 0.3, 0.6]])  # (seeds, windows)
    effects = table.mean(axis=1)
    out = across_seeds(effects, windows=table)
    between = effects.var(ddof=1) / 3
    units = table.mean(axis=0).var(ddof=1) / 4
    se = math.sqrt(between + units)
    df = (between + units) ** 2 / (between**2 / 2 + units**2 / 3)
    assert out["se_between"] == pytest.approx(math.sqrt(between), abs=1e-15)
    assert out["se_units"] == pytest.approx(math.sqrt(units), abs=1e-15)
    assert out["df"] == pytest.approx(df, abs=1e-12) and out["se"] == pytest.approx(se, abs=1e-15)
    assert out["p"] == pytest.approx(t_tail_reference(effects.mean() / se, df), abs=1e-12)
    assert out["direction"] == 1 and out["seeds"] == 3
    with pytest.raises(ValueError, match="at least 2 seeds"):
        across_seeds([0.3], windows=[[0.3, 0.3]])
    with pytest.raises(ValueError, match="same units in every seed"):
        across_seeds([0.3, 0.2], windows=[[0.3, 0.3], [0.2, 0.2, 0.2]])
    with pytest.raises(ValueError, match="exactly one of windows"):
        across_seeds([0.3, 0.2])


def test_across_seeds_with_trials_drawn_per_seed_by_hand():
    out = across_seeds([0.3, 0.5, 0.4], unit_se=[0.1, 0.2, 0.1], unit_df=[63, 63, 63])
    between, units = 0.01 / 3, (0.01 + 0.04 + 0.01) / 9
    assert out["se"] == pytest.approx(math.sqrt(between + units), abs=1e-15)
    units_df = 0.06**2 / ((0.0001 + 0.0016 + 0.0001) / 63)
    df = (between + units) ** 2 / (between**2 / 2 + units**2 / units_df)
    assert out["df"] == pytest.approx(df, rel=1e-12)


def _correlated_windows(rng, seeds, windows, rho, seed_sd):
    """Per-window differences of ``seeds`` seeds on the same windows with no true effect: each
    window's errors correlate ``rho`` across seeds, and each seed adds its own offset."""
    cov = np.full((seeds, seeds), rho) + np.eye(seeds) * (1 - rho)
    errors = rng.standard_normal((windows, seeds)) @ np.linalg.cholesky(cov).T  # (windows, seeds)
    return errors.T + seed_sd / math.sqrt(windows) * rng.standard_normal((seeds, 1))  # (seeds, windows)


@pytest.mark.parametrize("seeds, seed_sd", [(3, 0.0), (8, 0.0), (3, 1.0)])
def test_across_seed_false_alarms_with_windows_shared_at_correlation_0_6(seeds, seed_sd):
    """Seeded null simulation: every seed reads the same 64 windows, whose per-window differences
    correlate 0.6 across seeds (the lab's measured range is 0.33 to 0.93). Pairing the windows across
    seeds keeps a nominal 5% test at or under 5%; Stouffer's combination of the per-seed tests, which
    takes the seeds for independent samples, rejects several times as often."""
    rng = np.random.default_rng(100 * seeds + int(seed_sd))
    reps, new, stouffer = 1500, 0, 0
    for _ in range(reps):
        table = _correlated_windows(rng, seeds, 64, 0.6, seed_sd)
        effects = table.mean(axis=1)
        new += across_seeds(effects, windows=table)["p"] <= 0.05
        z = effects / (table.std(axis=1, ddof=1) / 8.0)  # each seed's own test, 64 windows
        stouffer += abs(z.sum()) / math.sqrt(seeds) >= 1.959964
    assert new / reps <= 0.065, new / reps  # 0.05 plus 2.8 sd of 1,500 draws
    assert stouffer / reps > 2 * 0.05, stouffer / reps


def _seed_record(effect, p, verdict=SEEN, claim="c", relation=">", se=0.01):
    return {
        "claim": claim,
        "group": "retrieval-logp",
        "scheme": "rope",
        "unit": "bits",
        "relation": relation,
        "verdict": verdict,
        "effect": effect,
        "p": p,
        "units": "trials",
        "se": se,
        "df": 63.0,
    }


def test_a_consistent_small_effect_with_a_tiny_spread_is_seen():
    # 0.02 in every seed, spread 0.0005, each run's standard error 0.002: small, but beyond both noises.
    got = combine_seeds({s: [_seed_record(0.02 + 0.0005 * (s - 1), 1e-5, se=0.002)] for s in range(3)})[0]
    assert got["verdict"] == SEEN and got["seeds"] == 3 and not got["one_seed"]
    assert got["effect_ci"][0] > 0 and got["holm_tests"] == 1 and got["p_holm"] == got["p"]
    assert "between seeds" in got["evidence"] and "t-test" in got["evidence"]


def test_a_large_mean_effect_with_one_seed_reversing_is_not_seen():
    # Every seed's own test rejects; the mean (+0.5) is large, but one seed went the other way.
    got = combine_seeds(
        {
            0: [_seed_record(1.0, 1e-20)],
            1: [_seed_record(1.2, 1e-20)],
            2: [_seed_record(-0.7, 1e-20, verdict="not seen")],
        }
    )[0]
    assert got["effect_mean"] == pytest.approx(0.5) and got["verdict"] == WITHIN_NOISE


def test_every_seed_seeing_it_is_not_enough_when_the_seeds_spread():
    # The rule before: seen in every seed under each seed's own Holm rule. Now the spread counts.
    got = combine_seeds({s: [_seed_record(e, 1e-30)] for s, e in enumerate((0.05, 0.9, 0.3))})[0]
    assert set(got["by_seed"].values()) == {SEEN} and got["verdict"] == WITHIN_NOISE
    assert got["p"] > 0.05 and got["se_between"] > 10 * got["se_units"]


def test_a_small_spread_between_seeds_does_not_hide_the_sampling_of_each_run():
    # Three seeds agree to within 0.01, but each run's own standard error is 0.5: not an effect.
    got = combine_seeds({s: [_seed_record(0.30 + 0.01 * s, 0.5, se=0.5)] for s in range(3)})[0]
    assert got["se_between"] < 0.01 < got["se_units"] and got["verdict"] == WITHIN_NOISE


def test_the_wrong_side_is_not_seen_and_holm_runs_over_the_claims():
    wrong = [_seed_record(-0.3 - 0.001 * s, 1e-8, verdict="not seen", claim="w", se=0.001) for s in range(3)]
    faint = [_seed_record(0.1 + 0.01 * s, 1e-4, claim="f", se=0.001) for s in range(3)]
    got = combine_seeds({s: [wrong[s], faint[s]] for s in range(3)})
    assert got[0]["verdict"] == "not seen"
    # The faint claim (t about 19 on about 2 degrees of freedom, p about 0.003) passes Holm's rule
    # over 2 claims; the column shows the adjusted p, which among 40 claims is over 0.05.
    assert got[1]["p"] < 0.025 and got[1]["verdict"] == SEEN
    assert got[0]["p_holm"] == pytest.approx(2 * got[0]["p"]) and got[1]["p_holm"] == pytest.approx(got[1]["p"])
    many = {
        s: [faint[s]] + [_seed_record(0.0, 1.0, verdict=WITHIN_NOISE, claim=f"x{i}") for i in range(39)]
        for s in range(3)
    }
    first = combine_seeds(many)[0]
    assert first["verdict"] == WITHIN_NOISE and first["holm_tests"] == 40
    assert first["p_holm"] == pytest.approx(min(1.0, 40 * first["p"])) and first["p_holm"] > 0.05


def test_shared_windows_are_paired_across_seeds_in_the_combination():
    rng = np.random.default_rng(4)
    table = _correlated_windows(rng, 3, 64, 0.6, 0.0) + 0.5  # a true effect of 0.5 per window
    records = {
        s: [
            {
                **_seed_record(float(row.mean()), 1e-9),
                "group": "perplexity",
                "unit": "bpb",
                "units": "windows",
                "unit_diffs": [float(v) for v in row],
            }
        ]
        for s, row in enumerate(table)
    }
    got = combine_seeds(records)[0]
    direct = across_seeds(table.mean(axis=1), windows=table)
    assert got["p"] == pytest.approx(direct["p"], rel=1e-9) and got["verdict"] == SEEN
    assert got["se_units"] == pytest.approx(direct["se_units"], rel=1e-9)
    assert "64 windows paired across seeds" in got["evidence"]
    records[2][0]["unit_diffs"] = records[2][0]["unit_diffs"][:10]  # not the same windows: no pairing
    assert combine_seeds(records)[0]["verdict"] == NOT_MEASURED


def test_records_without_their_sampling_are_not_tested_across_seeds():
    """Summaries written before the per-unit sampling was kept: no test is made up for them."""
    bare = {s: [{k: v for k, v in _seed_record(0.3, 1e-9).items() if k not in ("se", "df", "units")}] for s in range(3)}
    got = combine_seeds(bare)[0]
    assert got["verdict"] == NOT_MEASURED and got["p"] is None and "lack the per-window or per-trial" in got["evidence"]


def test_exact_match_claims_across_seeds_get_an_honest_interval():
    """Regression: every seed 0/64 against 0/64 gave "+0% [+0%, +0%]"."""
    rec = {
        **_seed_record(0.0, 1.0, verdict=WITHIN_NOISE),
        "unit": "percent",
        "se": 0.0,
        "test": "exact McNemar (0 trials only the first right, 0 only the second)",
        "counts": [0, 0, 0, 64],
    }
    got = combine_seeds({s: [dict(rec)] for s in range(3)})[0]
    upper = wilson(0, 192)[1]
    assert got["effect_ci"] == pytest.approx([-upper, upper]) and got["verdict"] == WITHIN_NOISE
    # A spread between seeds wider than the pooled counts' interval widens it.
    spread = {
        s: [dict(rec, effect=e, counts=[0, k, 0, 64 - k], se=math.sqrt(k / 64 * (1 - k / 64) / 64))]
        for s, (e, k) in enumerate(((0.0, 0), (0.5, 32), (1.0, 64)))
    }
    wide = combine_seeds(spread)[0]
    assert wide["effect_ci"][1] - wide["effect_ci"][0] > 1.0


def test_one_seed_says_it_rests_on_one_seed():
    got = combine_seeds({0: [_seed_record(0.4, 1e-9)]})[0]
    assert got["verdict"] == SEEN and got["one_seed"] and got["seeds"] == 1 and got["p"] is None
    assert "rests on one training seed" in got["evidence"]
    # Measured in one seed of three (the others lack it): the same, and it says which.
    partial = combine_seeds({0: [_seed_record(0.4, 1e-9)], 1: [], 2: [_seed_record(None, None, NOT_MEASURED)]})[0]
    assert partial["one_seed"] and "measured in 1 of 3" in partial["evidence"]
    assert partial["by_seed"] == {"0": SEEN, "1": NOT_MEASURED, "2": NOT_MEASURED}
    assert combine_seeds({0: [_seed_record(None, None, NOT_MEASURED)]})[0]["verdict"] == NOT_MEASURED
    assert "not measured in any seed" in combine_seeds({0: [_seed_record(None, None, NOT_MEASURED)]})[0]["evidence"]


# -- too small to judge, decided from the run itself ---------------------------------------------------
def test_a_run_too_small_gets_no_verdicts_whatever_its_stored_flag_says():
    """Regression: verdicts() trusted a stored "machinery_check" flag; a small run without it got
    verdicts, and a file's flag could silence a full-size run."""
    small = dict(_run(), machinery_check=False)
    small["config"] = dict(small["config"], steps=40)  # sized like a smoke run, not flagged
    assert verdicts(small) == []
    small["config"] = dict(small["config"], steps=300, eval_windows=8)
    assert verdicts(small) == []
    assert verdicts(dict(_run(), config=None)) == [] and verdicts(dict(_run(), config=[1])) == []
    flagged = dict(_run(), machinery_check=True)  # full size, flagged by mistake: judged by its sizes
    assert verdicts(flagged)[0]["verdict"] == SEEN


def test_a_machinery_check_report_makes_no_claim():
    """Regression: every results.md, the smoke run's included, said "The standard preset's RoPE model
    learns it": a claim about other runs that no run of its own backs."""
    from constructed_results import constructed_results

    res = constructed_results()
    for scheme in res["schemes"].values():
        for c in scheme["eval"]["64"]["retrieval"].values():
            c["accuracy"], c["accuracy_ci"] = 0.0, [0.0, 0.0]
    full = markdown(res)
    assert "No model retrieved a single key at the training length (64 bytes)." in full
    assert "standard preset" not in full and "learns it" not in full
    res["machinery_check"] = True
    smoke = markdown(res)
    assert "No model retrieved" not in smoke and "standard preset" not in smoke
    assert "None: " in smoke  # the verdicts section says there are none


# -- properties: correct, or a clear typed error -------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(hs.lists(hs.integers(0, 40), min_size=4, max_size=4))
def test_newcombe_intervals_hold_the_estimate_inside_minus_one_to_one(table):
    both, first, second, neither = table
    if sum(table) == 0:
        with pytest.raises(ValueError, match="at least one trial"):
            newcombe_paired(*table)
        return
    n = sum(table)
    lo, hi = newcombe_paired(*table)
    assert -1.0 <= lo <= (first - second) / n <= hi <= 1.0 and hi > lo
    k1, n1, k2, n2 = both, both + first + 1, second, second + neither + 1
    lo, hi = newcombe_unpaired(k1, n1, k2, n2)
    assert -1.0 <= lo <= k1 / n1 - k2 / n2 <= hi <= 1.0 and hi > lo


@settings(max_examples=200, deadline=None)
@given(
    hs.lists(hs.floats(-1e6, 1e6, allow_nan=False), min_size=0, max_size=40),
    hs.lists(hs.floats(-1e6, 1e6, allow_nan=False), min_size=0, max_size=40),
)
def test_the_t_tests_answer_or_refuse_with_a_clear_error(a, b):
    for fn in (paired_t, welch_t):
        if fn is paired_t and len(a) != len(b) and min(len(a), len(b)) >= 2:
            with pytest.raises(ValueError, match="paired"):
                fn(a, b)
            continue
        if min(len(a), len(b)) < 2:
            with pytest.raises(ValueError, match="must (hold at least 2 values|be a non-empty)"):
                fn(a, b)
            continue
        out = fn(a, b)
        assert 0.0 <= out["p"] <= 1.0 and out["se"] >= 0
        assert out["effect_ci"][0] <= out["effect"] <= out["effect_ci"][1]
