"""Train the lesson's models with ``posenc lab`` and package them in ``posenc/teaching/lesson/models/``.

One command regenerates everything the lesson's trained figures read (``posenc.teaching.lesson.trained``)::

    python benchmarks/lesson_models.py              # train (or resume) runs/lesson-models, then package
    python benchmarks/lesson_models.py --run DIR    # another run folder

The models learn English: the prose of the standard library's ``pydoc_data.topics`` (the language
reference ``help()`` shows, some 0.5 MB), written to ``english.txt`` in the run folder and given to the
lab with ``--data``; ``--corpus stdlib`` trains on the standard library's sources instead.

It runs ``posenc lab --preset lesson`` in a child process with one torch thread (the same command
again resumes an interrupted run without redoing finished work), then writes, from that run folder:

* ``<scheme>.pt`` for every scheme: the trained weights (float32), the model config and the training
  length, tensors and plain data only;
* ``windows.pt``: the run's validation windows (the bytes the lab scored), so the numbers can be
  measured again on any Python whose standard library differs from the one trained on;
* ``summary.json``: how the models were trained and what each reaches, bits per byte on those windows
  at 1, 2 and 4 times the training length, measured on the packaged files by
  :func:`posenc.teaching.lesson.trained.bits_per_byte`; it refuses to write a number that differs from the
  lab's own ``results.json`` by more than :data:`AGREE`.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from posenc.measuring.corpus import load_corpus
from posenc.measuring.lab.config import LabConfig
from posenc.measuring.lab.evaluate import window_ends
from posenc.measuring.lab.export import load_run_model
from posenc.measuring.lab.store import atomic_write_bytes, read_run_file
from posenc.teaching.lesson import trained

#: Largest difference allowed between a packaged model's bits per byte and the lab's (float32 sums in
#: another batch order differ in the sixth digit).
AGREE = 1e-4
PRESET = "lesson"


#: the English text the models are trained on, written into the run folder: every entry of the standard
#: library's ``pydoc_data.topics`` (the language reference's prose that ``help()`` shows), in key order
ENGLISH_NAME = "english.txt"


def english_text() -> bytes:
    """The prose of ``pydoc_data.topics``, entries joined by blank lines in the order of their keys."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[key] for key in sorted(topics)).encode("utf-8")


def write_english(run: Path) -> Path:
    """``english.txt`` in ``run`` (kept if present, so that a resumed run reads the bytes it began with)."""
    path = run / ENGLISH_NAME
    if not path.is_file():
        run.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, english_text())
    return path


def train(run: Path, threads: int, data: Path | None = None) -> None:
    resuming = (run / "config.json").is_file()
    where = ["--resume", str(run)] if resuming else ["--preset", PRESET, "--out", str(run)]
    if data is not None and not resuming:
        where += ["--data", str(data)]
    cmd = [sys.executable, "-m", "posenc", "lab", *where, "--no-plots", "--threads", str(threads)]
    print("$", " ".join(cmd), flush=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    subprocess.run(cmd, check=True, env=env)


def _save(path: Path, payload: dict) -> str:
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    atomic_write_bytes(path, buffer.getvalue())
    path.chmod(0o644)  # package data, readable by everyone (the temporary file was private)
    return trained.sha256_of(path)


def package(run: Path, out: Path) -> dict:
    results = json.loads((run / "results.json").read_text())
    if not results.get("complete"):
        raise SystemExit(f"{run}: the lab run is not complete; run this command again to resume it")
    stored = read_run_file(run / "config.json", "config")
    if stored is None:
        raise SystemExit(f"{run}: no config.json")
    cfg = LabConfig.from_dict(stored)
    if cfg.preset != PRESET:
        raise SystemExit(f"{run}: a {cfg.preset!r} run, not the {PRESET!r} preset")
    corpus = load_corpus(cfg.data, pattern=cfg.pattern, val_fraction=cfg.val_fraction)
    if corpus.summary()["val_split_sha256"] != results["corpus"]["val_split_sha256"]:
        raise SystemExit(f"{run}: this Python's standard library is not the corpus the run was trained on")
    lengths = cfg.eval_lengths
    span = lengths[-1]
    ends = window_ends(corpus.val.size, span, cfg.eval_windows)  # as the lab scored them
    windows = torch.from_numpy(corpus.val[[range(int(e) - span - 1, int(e)) for e in ends]].copy())  # (W, span+1)
    out.mkdir(parents=True, exist_ok=True)
    summary: dict = {
        "format": trained.SUMMARY_FORMAT,
        "version": trained.FORMAT_VERSION,
        "command": trained.REGENERATE,
        "lab_command": f"posenc lab --preset {PRESET}",
        "config": cfg.to_dict(),
        "corpus": {k: v for k, v in results["corpus"].items() if k != "source"}
        | {"python": f"{sys.version_info.major}.{sys.version_info.minor}"},
        "train_len": cfg.train_len,
        "eval_lengths": lengths,
        "metric": "bits per byte on every byte of the windows, each window read in pieces of the length from "
        "position 0 (posenc.measuring.lab.evaluate); null where a learned table has no rows",
        "windows": {"file": trained.WINDOWS_NAME, "count": int(windows.shape[0]), "span": span},
        "models": {},
        "cpu_seconds": results.get("cpu_seconds"),
    }
    summary["windows"]["sha256"] = _save(out / trained.WINDOWS_NAME, trained.windows_payload(windows))
    for scheme in cfg.schemes:
        model, train_len = load_run_model(run, scheme)
        name = trained.model_file_name(scheme)
        sha = _save(out / name, trained.model_payload(model, train_len))
        train_info = results["schemes"][scheme]["train"]
        summary["models"][scheme] = {
            "file": name,
            "sha256": sha,
            "parameters": sum(p.numel() for p in model.parameters()),
            "final_train_bpb": train_info.get("final_bpb"),
            "bpb": {str(n): None for n in lengths},
        }
    path = out / trained.SUMMARY_NAME
    atomic_write_bytes(path, (json.dumps(summary, indent=2) + "\n").encode())
    for scheme in cfg.schemes:  # measured on the files just written, read back as the lesson reads them
        model = trained.read_model(scheme, out)
        for n in lengths:
            lab = results["schemes"][scheme]["eval"].get(str(n), {})
            if lab.get("cannot"):
                continue
            value = trained.bits_per_byte(model, windows, n)
            if abs(value - lab["bpb"]) > AGREE:
                raise SystemExit(
                    f"{scheme} at {n}: the packaged model gives {value:.6f} bits per byte, the lab {lab['bpb']:.6f}"
                )
            summary["models"][scheme]["bpb"][str(n)] = round(value, 6)
        print(f"{scheme}: " + ", ".join(f"{n}: {v}" for n, v in summary["models"][scheme]["bpb"].items()), flush=True)
    atomic_write_bytes(path, (json.dumps(summary, indent=2) + "\n").encode())
    path.chmod(0o644)
    trained.read_summary(out)  # the file the lesson will read, checked as it checks it
    return summary


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", default="runs/lesson-models", help="the lab run folder (made or resumed)")
    p.add_argument("--out", default=str(trained.MODELS_DIR), help="the package folder to write")
    p.add_argument("--threads", type=int, default=1, help="torch threads of the training process")
    p.add_argument("--package-only", action="store_true", help="package a finished run without running the lab")
    p.add_argument(
        "--corpus",
        choices=("english", "stdlib"),
        default="english",
        help="english: the prose of pydoc_data.topics (the default); stdlib: the standard library's sources",
    )
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    run = Path(args.run)
    if not args.package_only:
        train(run, args.threads, write_english(run) if args.corpus == "english" else None)
    package(run, Path(args.out))
    total = sum(p.stat().st_size for p in Path(args.out).iterdir() if p.is_file())
    print(f"wrote {args.out} ({total / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
