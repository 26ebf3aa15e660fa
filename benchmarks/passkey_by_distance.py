"""How far back can a trained lab model fetch the key? Retrieval by distance in finer bins.

The lab reports three distance bins (near, mid, far); "far" at 8x spans everything from the
training length to the end of the window. This reads a finished run's checkpoint and asks the
passkey question at one evaluation length in bins of ``--bin`` positions, so a slope can be seen
inside "far"::

    python benchmarks/passkey_by_distance.py RUN_DIR --scheme alibi --length 1024 --bin 128
    python benchmarks/passkey_by_distance.py RUN_DIR --scheme rope --length 256 --bin 32

Filler comes from the run's validation text, keys and offsets from a fixed seed, exactly as the lab
builds its trials. Prints accuracy with a 95% bootstrap interval and mean log2 p(key) per bin. A
measurement, not a test: nothing asserts.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from posenc.measuring.corpus import load_corpus
from posenc.measuring.lab import passkey
from posenc.measuring.lab.config import LabConfig
from posenc.measuring.lab.evaluate import model_for_length
from posenc.measuring.lab.metrics import bootstrap_ci
from posenc.measuring.lab.store import RunDir, load_checkpoint, read_run_file
from posenc.measuring.lab.train import build_model


def parser() -> argparse.ArgumentParser:
    """The command line (the docs' commands are checked against it)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="a finished `posenc lab` run folder")
    ap.add_argument("--scheme", default="alibi")
    ap.add_argument("--length", type=int, default=None, help="evaluation length (default: 8x the training length)")
    ap.add_argument("--bin", type=int, default=128, help="bin width in positions")
    ap.add_argument("--trials", type=int, default=100, help="trials per bin")
    ap.add_argument("--seed", type=int, default=0)
    return ap


def main() -> int:
    ap = parser()
    a = ap.parse_args()
    run = RunDir(a.run)
    stored = read_run_file(run.config_path, "config")
    if stored is None:
        ap.error(f"{a.run} has no config.json: not a lab run folder")
    try:
        cfg = LabConfig.from_dict(stored)
    except ValueError as e:
        ap.error(f"{run.config_path}: {e}")
    if a.scheme not in cfg.schemes:
        ap.error(f"--scheme must be one of the run's schemes {cfg.schemes}, got {a.scheme!r}")
    length = a.length or 8 * cfg.train_len
    top = passkey.max_distance(length)
    if length < passkey.MIN_LENGTH or a.bin < 1 or a.trials < 1:
        ap.error(f"need --length >= {passkey.MIN_LENGTH}, --bin >= 1 and --trials >= 1")
    ckpt = load_checkpoint(run.checkpoint_path(a.scheme))
    if ckpt is None:
        ap.error(f"{a.run} has no checkpoint for {a.scheme}")
    torch.set_num_threads(1)
    trained = build_model(cfg, a.scheme)
    trained.load_state_dict(ckpt["model"])
    model, note = model_for_length(trained, length, cfg.learned_beyond)  # as the lab does
    if model is None:
        ap.error(f"{a.scheme} {note}")
    model.eval()
    corpus = load_corpus(cfg.data, pattern=cfg.pattern, val_fraction=cfg.val_fraction)
    print(f"{a.scheme} of {a.run} (trained at {cfg.train_len} bytes), read at {length} bytes:")
    lo = passkey.MIN_DISTANCE
    while lo <= top:
        hi = min(top, (lo // a.bin + 1) * a.bin - 1)
        rng = np.random.default_rng([a.seed, length, lo, 611953])
        offsets = rng.integers(0, corpus.val.size - length - 1, size=a.trials)
        keys = rng.integers(10 ** (passkey.KEY_DIGITS - 1), 10**passkey.KEY_DIGITS, size=a.trials)
        dists = rng.integers(lo, hi + 1, size=a.trials)
        plan = [("bin", int(o), int(k), int(d)) for o, k, d in zip(offsets, keys, dists)]
        correct, logp = passkey.score_trials(model, corpus.val, plan, length, batch=cfg.eval_batch, device="cpu")
        ci = bootstrap_ci(correct, samples=1000, seed=a.seed)
        beyond = " (beyond the training length)" if lo >= cfg.train_len else ""
        print(
            f"  distance {lo:5d}-{hi:5d}{beyond}: {correct.mean():.0%} [{ci[0]:.0%}, {ci[1]:.0%}], "
            f"log2 p(key) {logp.mean():.1f} bits"
        )
        lo = hi + 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
