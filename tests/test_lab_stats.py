"""The lab's statistics against independent references (binomial and hypergeometric sums written out
here with math.comb), and the verdict rule on the inputs that broke it: NaN, None, empty, 0/100."""

from __future__ import annotations

import math

import numpy as np
import pytest

from posenc.lab.report import build_results, markdown
from posenc.lab.stats import (
    binom_test,
    clopper_pearson,
    fisher_exact,
    holm,
    mcnemar_exact,
    paired_difference,
    unpaired_difference,
    wilson,
)
from posenc.lab.verdicts import NOT_MEASURED, SEEN, WITHIN_NOISE, combine_seeds, compare, judge_all, verdicts


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
    paired, unpaired = paired_difference(a, b, seed=0), unpaired_difference(a, b, seed=0)
    assert paired["effect"] == pytest.approx(unpaired["effect"]) == pytest.approx(float(np.mean(a - b)))
    assert paired["p"] < 1e-6 < 0.3 < unpaired["p"]
    lo, hi = paired["effect_ci"]
    assert lo < paired["effect"] < hi and lo > 0
    with pytest.raises(ValueError, match="finite"):
        paired_difference([1.0, math.nan], [1.0, 2.0])


def test_holm_by_hand():
    assert holm([0.01, 0.04, 0.03, 0.005]) == [True, False, False, True]  # 0.03 > 0.05 / 2 stops it
    assert holm([0.01, None, 0.02]) == [True, False, True]  # two comparisons, not three
    assert holm([0.2]) == [False] and holm([]) == []
    with pytest.raises(ValueError, match="pvalues"):
        holm([1.5])


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


def test_seeds_agree_or_the_claim_is_within_noise():
    def v(verdict, effect):
        return {"claim": "c", "group": "g", "scheme": "rope", "unit": "bpb", "verdict": verdict, "effect": effect}

    all_seen = combine_seeds({0: [v(SEEN, 0.3)], 1: [v(SEEN, 0.5)], 2: [v(SEEN, 0.4)]})[0]
    assert all_seen["verdict"] == SEEN and all_seen["effect_mean"] == pytest.approx(0.4)
    assert all_seen["effect_sd"] == pytest.approx(0.1)
    one_short = combine_seeds({0: [v(SEEN, 0.3)], 1: [v(WITHIN_NOISE, 0.01)], 2: [v(SEEN, 0.4)]})[0]
    assert one_short["verdict"] == WITHIN_NOISE and "seed 1: within noise" in one_short["evidence"]
    assert combine_seeds({0: [v(NOT_MEASURED, None)]})[0]["verdict"] == NOT_MEASURED
    missing = combine_seeds({0: [v(SEEN, 0.3)], 1: []})[0]
    assert missing["verdict"] == WITHIN_NOISE and missing["by_seed"] == {"0": SEEN, "1": NOT_MEASURED}
