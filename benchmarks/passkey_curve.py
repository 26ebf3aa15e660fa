"""When does a lab model learn to copy the passkey? Retrieval at 1x along one training run.

Trains one scheme of a lab preset exactly as ``posenc lab`` does (same model, batches, schedule and
passkey steps) and, every ``--every`` steps, asks the preset's retrieval questions at the training
length. It prints exact-match accuracy and mean log2 p(key) per distance bin, and the share of
answer positions whose arg-max is the true digit (teacher-forced), per digit. This is how the lab's
defaults for ``retrieval_share`` and ``retrieval_answer_weight`` were chosen (docs/lab.md)::

    python benchmarks/passkey_curve.py --preset standard          # its own mix: half the steps, weight 5
    python benchmarks/passkey_curve.py --preset quick --steps 1000 --share 0.5 --answer-weight 5

A measurement, not a test: nothing asserts. One torch thread; a few minutes of CPU per 1000 steps.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from posenc.measuring.corpus import load_corpus
from posenc.measuring.lab import passkey
from posenc.measuring.lab.config import PRESETS, preset_config
from posenc.measuring.lab.distributed import Dist
from posenc.measuring.lab.train import build_model, make_optimizer, run_kwargs, train_steps


def per_digit(model, data: np.ndarray, length: int, trials: int, seed: int) -> list:
    """Teacher-forced arg-max accuracy at each of the five answer positions, over the 1x plan."""
    plan = passkey.trial_plan(length, length, trials, data.size, seed)
    rows = np.stack([passkey.build_sequence(data[o : o + length + 1], k, d) for _, o, k, d in plan])
    t = torch.from_numpy(rows.astype(np.int64))
    with torch.no_grad():
        logits = model(t[:, :-1])[:, -passkey.KEY_DIGITS :]
    return (logits.argmax(-1) == t[:, -passkey.KEY_DIGITS :]).double().mean(0).tolist()


def parser() -> argparse.ArgumentParser:
    """The command line (the docs' commands are checked against it)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="standard", choices=sorted(PRESETS))
    ap.add_argument("--scheme", default="rope")
    ap.add_argument("--share", type=float, default=None, help="retrieval_share (default: the preset's)")
    ap.add_argument("--answer-weight", type=float, default=None, help="retrieval_answer_weight (default: the preset's)")
    ap.add_argument("--steps", type=int, default=None, help="training steps (default: the preset's)")
    ap.add_argument("--every", type=int, default=250)
    ap.add_argument("--trials", type=int, default=50, help="trials per distance bin")
    ap.add_argument("--seed", type=int, default=0)
    return ap


def main() -> int:
    ap = parser()
    a = ap.parse_args()
    overrides = dict(schemes=[a.scheme], seed=a.seed)
    for key, value in (("retrieval_share", a.share), ("retrieval_answer_weight", a.answer_weight), ("steps", a.steps)):
        if value is not None:
            overrides[key] = value
    try:
        cfg = preset_config(a.preset, **overrides)
    except ValueError as e:
        ap.error(str(e))
    if a.every < 1 or a.trials < 1:
        ap.error(f"--every and --trials must be >= 1, got {a.every} and {a.trials}")
    torch.set_num_threads(1)
    corpus = load_corpus()
    torch.manual_seed(cfg.seed)
    model = build_model(cfg, a.scheme)
    optimizer = make_optimizer(model, cfg.lr, cfg.weight_decay)
    print(
        f"{a.preset} preset, {a.scheme}, {cfg.steps} steps, retrieval_share {cfg.retrieval_share}, "
        f"answer weight {cfg.retrieval_answer_weight}, seed {cfg.seed}; at {cfg.train_len} bytes (1x):"
    )
    start, t0 = 0, time.process_time()
    while start < cfg.steps:
        stop = min(cfg.steps, start + a.every)
        train_steps(
            model,
            optimizer,
            corpus.train,
            start=start,
            total=cfg.steps,
            stop=stop,
            lr=cfg.lr,
            warmup=cfg.warmup_steps,
            device="cpu",
            d=Dist(),
            **run_kwargs(cfg),
        )
        start = stop
        cells = passkey.evaluate_passkey(
            model,
            corpus.val,
            cfg.train_len,
            train_len=cfg.train_len,
            trials=a.trials,
            batch=cfg.eval_batch,
            bootstrap_samples=200,
            seed=cfg.seed,
            device="cpu",
        )
        digits = per_digit(model, corpus.val, cfg.train_len, a.trials, cfg.seed)
        parts = [
            f"{name} {c['accuracy']:.0%} [{c['accuracy_ci'][0]:.0%}, {c['accuracy_ci'][1]:.0%}] "
            f"{c['logp_bits']:.1f} bits"
            for name, c in cells.items()
        ]
        print(
            f"step {stop:5d} ({time.process_time() - t0:.0f} s CPU): "
            + "; ".join(parts)
            + "; per digit "
            + " ".join(f"{x:.2f}" for x in digits),
            flush=True,
        )
        model.train()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
