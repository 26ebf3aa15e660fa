"""Regenerate the packaged trained checkpoint's summary (``posenc.measuring.eval.checkpoint``)::

    python benchmarks/retrieval_checkpoint.py            # measure the packaged checkpoint, write the summary
    python benchmarks/retrieval_checkpoint.py --train    # first train (or resume) and package it again

``--train`` runs ``posenc lab`` with :data:`~posenc.measuring.eval.checkpoint.LAB_ARGS` into
``--run`` (one torch thread; the same command resumes it), exports the RoPE model with ``posenc lab
export`` and copies the checkpoint's files into the package. Then ``posenc eval`` runs
:data:`~posenc.measuring.eval.checkpoint.EVAL_ARGS` on the packaged folder and the summary (the
claims that hold, and the numbers behind them) is written beside it; a claim that does not hold
(the model cannot retrieve at its trained length, say) stops the command instead.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from posenc.measuring.eval import checkpoint


def _posenc(*args: str, threads: int = 1) -> None:
    cmd = [sys.executable, "-m", "posenc", *args]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, env=dict(os.environ, OMP_NUM_THREADS=str(threads)))


def train(run: Path) -> None:
    where = ["--resume", str(run)] if (run / "config.json").is_file() else [*checkpoint.LAB_ARGS, "--out", str(run)]
    _posenc("lab", *where, "--no-plots", "--threads", "1")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "export"
        _posenc("lab", "export", str(run), "--scheme", "rope", str(out))
        shutil.rmtree(checkpoint.FOLDER, ignore_errors=True)
        checkpoint.FOLDER.mkdir(parents=True)
        for f in sorted(out.iterdir()):
            shutil.copyfile(f, checkpoint.FOLDER / f.name)
            (checkpoint.FOLDER / f.name).chmod(0o644)


def measure() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "eval"
        _posenc("eval", str(checkpoint.FOLDER), *checkpoint.EVAL_ARGS, "--out", str(out))
        results = json.loads((out / "results.json").read_text())
        cells = json.loads((out / "progress.json").read_text())["cells"]
    found = checkpoint.claims(results, cells)
    for name in ("within", "past"):
        if not found[name]["holds"]:
            raise SystemExit(f"the claim {name!r} does not hold: {found[name]}")
    return {
        "format": "posenc-eval-checkpoint",
        "version": 1,
        "command": "python benchmarks/retrieval_checkpoint.py",
        "lab_command": "posenc lab " + " ".join(checkpoint.LAB_ARGS),
        "eval_command": "posenc eval CHECKPOINT " + " ".join(checkpoint.EVAL_ARGS),
        "model_sha256": results["model_sha256"],
        "trained_context": results["trained_context"],
        "claims": found,
        "numbers": checkpoint.table(results),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", action="store_true", help="train (or resume) the lab run and package it first")
    p.add_argument("--run", default="runs/rope-passkey-lab", help="the lab run folder (made or resumed)")
    args = p.parse_args(argv)
    if args.train:
        train(Path(args.run))
    summary = measure()
    checkpoint.SUMMARY.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary["claims"], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
