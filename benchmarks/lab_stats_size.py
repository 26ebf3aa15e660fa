"""False-alarm rates of the lab's tests under "no difference", by seeded simulation, and how strongly
the seeds' per-window differences correlate in the committed run summaries.

* per run: the paired t-test against the earlier normal p-value from a bootstrap standard error (its
  bootstrap-free limit, the spread with ddof 0), at the level of Holm's first step among 30
  comparisons, for 32 and 64 windows;
* across seeds: the test of :func:`posenc.measuring.lab.stats.across_seeds` (windows paired across seeds)
  against Stouffer's combination of the per-seed tests and the earlier rule (the larger p of a
  t-test between seeds and Stouffer's), at a nominal 5%, with windows whose differences correlate
  ``--rho`` across seeds::

    python benchmarks/lab_stats_size.py [--reps 4000] [--rho 0.6]

Rates are ratios to the nominal level (1.0 = exact); one run's numbers, seeded, so they repeat.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy import stats as st

from posenc.measuring.lab.stats import across_seeds, t_quantile
from posenc.measuring.lab.summary import load_summaries


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python benchmarks/lab_stats_size.py", description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=4000, help="simulated runs per across-seed setting")
    p.add_argument("--rho", type=float, default=0.6, help="correlation of a window's differences across seeds")
    return p


def per_run(n: int, reps: int = 200_000, seed: int = 0) -> tuple:
    alpha = 0.05 / 30
    d = np.random.default_rng(seed).standard_normal((reps, n))  # (runs, windows)
    mean = d.mean(axis=1)
    t_test = np.abs(mean / (d.std(axis=1, ddof=1) / math.sqrt(n))) >= t_quantile(1 - alpha / 2, n - 1)
    earlier = np.abs(mean / (d.std(axis=1, ddof=0) / math.sqrt(n))) >= st.norm.isf(alpha / 2)
    return t_test.mean() / alpha, earlier.mean() / alpha


def across(seeds: int, rho: float, reps: int, windows: int = 64, seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    chol = np.linalg.cholesky(np.full((seeds, seeds), rho) + np.eye(seeds) * (1 - rho))
    new = stouffer = earlier = 0
    for _ in range(reps):
        table = (rng.standard_normal((windows, seeds)) @ chol.T).T  # (seeds, windows), no true effect
        effects = table.mean(axis=1)
        new += across_seeds(effects, windows=table)["p"] <= 0.05
        z = effects / (table.std(axis=1, ddof=1) / math.sqrt(windows))
        p_within = 2 * st.norm.sf(abs(z.sum()) / math.sqrt(seeds))
        t = effects.mean() / (effects.std(ddof=1) / math.sqrt(seeds))
        p_between = 2 * st.t.sf(abs(t), seeds - 1)
        stouffer += p_within <= 0.05
        earlier += max(p_within, p_between) <= 0.05
    return new / reps / 0.05, stouffer / reps / 0.05, earlier / reps / 0.05


def correlations() -> dict:
    """Per committed summary: the mean pairwise correlation across seeds of each bits-per-byte
    claim's per-window differences, as (min, median, max) over the claims."""
    out = {}
    for name, summary in load_summaries().items():
        by_claim: dict = {}
        for records in summary.get("verdicts_by_seed", {}).values():
            for v in records:
                if v.get("unit_diffs"):
                    by_claim.setdefault(v["claim"], []).append(v["unit_diffs"])
        means = []
        for rows in by_claim.values():
            if len(rows) > 1 and len({len(r) for r in rows}) == 1:
                c = np.corrcoef(np.array(rows))
                means.append(float(c[np.triu_indices(len(rows), 1)].mean()))
        if means:
            out[name] = (min(means), float(np.median(means)), max(means), len(means))
    return out


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    print("per run, Holm's first step of 30 (rate / nominal):")
    for n in (32, 64):
        new, old = per_run(n)
        print(f"  {n} windows: paired t {new:.2f}, earlier bootstrap-normal {old:.2f}")
    print(f"across seeds, nominal 5%, 64 windows correlated {args.rho} across seeds (rate / nominal):")
    for seeds in (3, 8):
        new, stouffer, earlier = across(seeds, args.rho, args.reps)
        print(f"  {seeds} seeds: windows paired {new:.2f}, Stouffer alone {stouffer:.2f}, earlier rule {earlier:.2f}")
    print("correlation across seeds of per-window differences in the committed summaries (min / median / max):")
    for name, (lo, mid, hi, k) in correlations().items():
        print(f"  {name}: {lo:.2f} / {mid:.2f} / {hi:.2f} over {k} claims")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
