"""The lab's statistics against independent references (binomial and hypergeometric sums written out
here with math.comb), and the verdict rule on the inputs that broke it: NaN, None, empty, 0/100."""

from __future__ import annotations

import math

import numpy as np
import pytest

from posenc.lab.report import build_results, markdown
from posenc.lab.stats import (
    across_seeds,
    betainc,
    binom_test,
    clopper_pearson,
    fisher_exact,
    holm,
    mcnemar_exact,
    paired_difference,
    signed_z,
    t_quantile,
    t_two_sided_p,
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


# -- across training seeds -------------------------------------------------------------------------
@pytest.mark.parametrize("t", [0.0, 0.5, 2.0, 7.3, -3.0])
def test_student_t_tail_against_closed_forms(t):
    # df = 1 is Cauchy, df = 2 has P(|T| >= t) = 1 - t / sqrt(2 + t^2); a large df is the normal.
    assert t_two_sided_p(t, 1) == pytest.approx(1 - 2 * math.atan(abs(t)) / math.pi, abs=1e-12)
    assert t_two_sided_p(t, 2) == pytest.approx(1 - abs(t) / math.sqrt(2 + t * t), abs=1e-12)
    assert t_two_sided_p(t, 100000) == pytest.approx(math.erfc(abs(t) / math.sqrt(2)), abs=1e-4)
    assert t_two_sided_p(math.inf, 3) == 0.0


def test_student_t_quantiles_by_table():
    assert t_quantile(0.975, 1) == pytest.approx(12.7062, abs=1e-4)
    assert t_quantile(0.975, 2) == pytest.approx(4.3027, abs=1e-4)
    assert t_quantile(0.975, 10) == pytest.approx(2.2281, abs=1e-4)
    assert betainc(2.0, 3.0, 0.4) == pytest.approx(0.5248, abs=1e-12)  # 1 - sum_{j<2} C(4,j) .4^j .6^(4-j)
    with pytest.raises(ValueError, match="x must be in"):
        betainc(1.0, 1.0, 1.5)


def test_signed_z_inverts_the_two_sided_normal_tail():
    for p in (0.5, 0.05, 1e-10, 1e-100, 1e-300):
        z = signed_z(-1.0, p)
        assert z < 0 and math.erfc(-z / math.sqrt(2)) == pytest.approx(p, rel=1e-6)
    assert signed_z(1.0, 1.0) == 0.0 and signed_z(0.0, 1e-9) == 0.0 and signed_z(2.0, 0.0) == 37.5


def test_across_seeds_by_hand():
    out = across_seeds([0.3, 0.5, 0.4], [1e-6, 1e-6, 1e-6])
    assert out["effect"] == pytest.approx(0.4) and out["effect_sd"] == pytest.approx(0.1)
    t = 0.4 / (0.1 / math.sqrt(3))
    assert out["p_between"] == pytest.approx(1 - t / math.sqrt(2 + t * t), abs=1e-12)
    half = 4.302653 * 0.1 / math.sqrt(3)
    assert out["effect_ci"] == pytest.approx([0.4 - half, 0.4 + half], abs=1e-6)
    z = 3 * 4.891638 / math.sqrt(3)  # the normal score of p = 1e-6 is 4.891638
    assert out["z_within"] == pytest.approx(z, abs=1e-5) and out["p"] == max(out["p_between"], out["p_within"])
    assert out["direction"] == 1
    # Every run's sampling says nothing: the t-test alone cannot make it an effect.
    quiet = across_seeds([0.3, 0.31, 0.29], [0.9, 0.9, 0.9])
    assert quiet["p_between"] < 1e-3 and quiet["p"] == quiet["p_within"] > 0.05
    with pytest.raises(ValueError, match="at least 2 seeds"):
        across_seeds([0.3], [0.01])
    with pytest.raises(ValueError, match="one p-value per seed"):
        across_seeds([0.3, 0.2], [0.01])


def _seed_record(effect, p, verdict=SEEN, claim="c", relation=">"):
    return {
        "claim": claim,
        "group": "perplexity",
        "scheme": "rope",
        "unit": "bpb",
        "relation": relation,
        "verdict": verdict,
        "effect": effect,
        "p": p,
    }


def test_a_consistent_small_effect_with_a_tiny_spread_is_seen():
    # 0.02 bits per byte in every seed, spread 0.0005: small, but beyond both noises.
    got = combine_seeds({s: [_seed_record(0.02 + 0.0005 * (s - 1), 1e-5)] for s in range(3)})[0]
    assert got["verdict"] == SEEN and got["seeds"] == 3 and not got["one_seed"]
    assert got["effect_ci"][0] > 0 and got["holm_tests"] == 1
    assert "t-test" in got["evidence"] and "Stouffer" in got["evidence"]


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
    assert got["p_between"] > 0.05 and got["p_within"] < 1e-30


def test_the_wrong_side_is_not_seen_and_holm_runs_over_the_claims():
    wrong = [_seed_record(-0.3 - 0.001 * s, 1e-8, verdict="not seen", claim="w") for s in range(3)]
    faint = [_seed_record(0.1 + 0.01 * s, 1e-4, claim="f") for s in range(3)]
    got = combine_seeds({s: [wrong[s], faint[s]] for s in range(3)})
    assert got[0]["verdict"] == "not seen"
    # The faint claim (t about 19, p about 0.003) passes Holm's rule over 2 claims (0.025 for the
    # smallest p, 0.05 for the other); among 40 claims its p would have to be under 0.05 / 40.
    assert got[1]["p"] < 0.025 and got[1]["verdict"] == SEEN
    many = {
        s: [faint[s]] + [_seed_record(0.0, 1.0, verdict=WITHIN_NOISE, claim=f"x{i}") for i in range(39)]
        for s in range(3)
    }
    assert combine_seeds(many)[0]["verdict"] == WITHIN_NOISE and combine_seeds(many)[0]["holm_tests"] == 40


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
