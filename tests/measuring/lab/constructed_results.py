"""Results of a lab run built from made-up measurements whose verdicts are known, for the tests of
the verdicts, the statistics, the report and the explorer's lab view.

Two schemes (RoPE, ALiBi) at 1x and 8x the training length, and RoPE at 8x with no extension, PI and
YaRN, each with and without a fine-tune. Each measurement is per-window bits per byte around a
chosen mean (the text's own difficulty, shared by every model as in a real run, plus a little noise
of the model's own) and passkey cells of 64 trials at a chosen accuracy.
"""

from __future__ import annotations

import numpy as np

from posenc.measuring.lab.config import preset_config
from posenc.measuring.lab.report import build_results
from posenc.measuring.lab.stats import clopper_pearson

WINDOWS = 64
SHARED = np.random.default_rng(0).normal(0.0, 0.3, WINDOWS)  # what every model finds hard in a window


def windows(bpb, seed):
    """Per-window bits per byte around ``bpb``: the text's own difficulty (shared by every model, as
    in a real run) plus a little noise of the model's own."""
    return list(bpb + SHARED + np.random.default_rng(seed).normal(0.0, 0.05, WINDOWS))


def cell(acc, logp=-3.0, trials=64, seed=0):
    k = round(acc * trials)
    lp = logp + np.random.default_rng(seed).normal(0.0, 1.0, trials)
    return {
        "accuracy": k / trials,
        "accuracy_ci": list(clopper_pearson(k, trials)),
        "logp_bits": float(lp.mean()),
        "logp_bits_ci": [float(lp.mean()) - 0.3, float(lp.mean()) + 0.3],
        "trials": trials,
        "correct": [1] * k + [0] * (trials - k),
        "logp": list(lp),
        "distance": [0, 1],
    }


def entry(bpb, seed, **retrieval):
    out = {"n_windows": WINDOWS}
    for key in ("bpb", "bpb_last_quarter", "bpb_final32"):
        w = windows(bpb, seed)
        out[key], out[key + "_ci"], out[key + "_windows"] = float(np.mean(w)), [np.mean(w) - 0.1, np.mean(w) + 0.1], w
    out["retrieval"] = {k: cell(*v, seed=seed + i) for i, (k, v) in enumerate(retrieval.items())}
    return out


def constructed_results():
    """A complete run's results (``build_results``) from the measurements above."""
    cfg = preset_config(
        "quick", schemes=["rope", "alibi"], extension_methods=["linear", "yarn"], eval_multipliers=[1, 8], finetune=True
    ).to_dict()
    progress = {
        "eval": {
            "rope": {
                "64": entry(2.7, 1, near=(0.9,), mid=(0.8,)),
                "512": entry(3.3, 2, near=(0.2,), far=(0.02,)),
            },
            "alibi": {
                "64": entry(2.9, 3, near=(0.85, -1.5), mid=(0.5,)),
                "512": entry(2.9, 4, near=(0.8, -1.5), far=(0.0, -15.2)),
            },
        },
        "extension": {
            "none": {"512": dict(entry(3.3, 2, far=(0.02,)), finetuned=entry(2.7, 5, far=(0.1,)))},
            "linear": {"512": dict(entry(4.0, 6, far=(0.0,)), finetuned=entry(2.95, 7, far=(0.6,)))},
            "yarn": {"512": dict(entry(3.3, 8, far=(0.1,)), finetuned=entry(2.7, 9, far=(0.15, -3.0)))},
        },
        "lr_sweep": {},
    }
    return build_results(
        cfg, {"train_files": 1, "val_files": 1, "train_bytes": 1, "val_bytes": 1}, {}, progress, complete=True
    )
