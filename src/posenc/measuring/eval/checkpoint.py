"""The packaged trained checkpoint and what training made true of it.

``checkpoints/rope-passkey/`` holds a small RoPE model (GPT-NeoX, 2 layers, width 64, 4 heads,
byte-level tokenizer, about 115k parameters) trained by ``posenc lab`` (:data:`LAB_ARGS`: 4000 steps
at 64 bytes, half of them on passkey sequences ``<key:DDDDD>`` ... ``<key:``) and exported with
``posenc lab export``. It is the one checkpoint in posenc with a long-context behaviour to find:
it copies the key at its trained length, loses it past that length without a scaling, and the
scalings recover part of it at 2x. It reads Python source and nothing else, and knows no RULER task:
its RULER scores are 0 and say only that the tasks run on it.

``checkpoints/rope-passkey.summary.json`` is what :data:`EVAL_ARGS` measured on it, and the claims
(:func:`claims`) that hold there with their intervals:

* **within**: under ``none`` at the trained length the passkey's exact matches have a 95% Wilson
  interval whose lower end is above one half (chance is one in 90,000 for a 5-digit key);
* **past**: under ``none`` at the longest length, the interval lies wholly below the trained length's;
* **orderings** at 2x and 4x: each pair of scalings whose order is decided, in bits per byte (a paired
  bootstrap interval over the same windows that excludes 0) and in passkey exact matches (Wilson
  intervals that do not overlap).

``python benchmarks/retrieval_checkpoint.py`` regenerates the summary (``--train`` also retrains and
repackages the model); ``tests/measuring/eval/test_eval_checkpoint.py`` runs :data:`EVAL_ARGS` again
and checks that every claim of the committed summary holds in what it measures.
"""

from __future__ import annotations

from itertools import combinations
from pathlib import Path
from typing import Any, Dict, List

import numpy as np

from .files import depth_key
from .measure import LN2, ratio_interval, wilson_interval

FOLDER = Path(__file__).resolve().parent / "checkpoints" / "rope-passkey"
SUMMARY = FOLDER.parent / "rope-passkey.summary.json"
#: what ``posenc lab`` trains (seed 0); a few CPU minutes on one thread
LAB_ARGS = [
    "--preset", "smoke", "--schemes", "rope", "--no-extension", "--d-model", "64", "--n-layers", "2",
    "--n-heads", "4", "--train-len", "64", "--batch-size", "16", "--steps", "4000", "--lr", "3e-3",
    "--warmup-steps", "100", "--retrieval-share", "0.5", "--retrieval-answer-weight", "5",
    "--eval-windows", "32", "--retrieval-trials", "64", "--seed", "0",
]  # fmt: skip
#: what the summary and the test measure, after ``posenc eval CHECKPOINT``
EVAL_ARGS = [
    "--scalings", "none,linear,ntk,yarn", "--lengths", "64,128,256", "--windows", "8",
    "--passkey-trials", "16", "--depths", "0,0.5,1", "--passkey-format", "lab", "--tasks", "none",
    "--bootstrap-samples", "400", "--seed", "0", "--no-plots",
]  # fmt: skip
#: a 5-digit key (10000 to 99999) guessed uniformly
CHANCE = 1 / 90000
BOOTSTRAP = 2000


def passkey_counts(results: Dict[str, Any], label: str, n: int) -> List[int]:
    """``[exact matches, trials]`` of one scaling at one length, over every depth."""
    cells = results["passkey"][label][str(n)]
    hits = sum(round(c["accuracy"] * c["trials"]) for c in cells.values())
    return [int(hits), int(sum(c["trials"] for c in cells.values()))]


def claims(results: Dict[str, Any], cells: Dict[str, Any]) -> Dict[str, Any]:
    """The claims (see the module docstring) that hold in ``results`` (``results.json``) and
    ``cells`` (``progress.json``'s cells, for the per-window numbers of the paired intervals)."""
    lengths, trained = results["lengths"], results["trained_context"]
    labels = [s["label"] for s in results["scalings"]]
    k, n = passkey_counts(results, "none", trained)
    within = {"scaling": "none", "length": trained, "hits": k, "trials": n, "ci": list(wilson_interval(k, n))}
    k2, n2 = passkey_counts(results, "none", lengths[-1])
    past = {"scaling": "none", "length": lengths[-1], "hits": k2, "trials": n2, "ci": list(wilson_interval(k2, n2))}
    out: Dict[str, Any] = {
        "within": {**within, "holds": within["ci"][0] > 0.5},
        "past": {**past, "holds": past["ci"][1] < within["ci"][0]},
        "orderings": {},
    }
    for m in (2, 4):
        length = trained * m
        if length not in lengths:
            continue
        decided: Dict[str, List[Dict[str, Any]]] = {"bpb": [], "passkey": []}
        for a, b in combinations(labels, 2):
            bits_a = np.asarray(cells[f"ppl|{a}|{length}"]["nats"]) / LN2
            bits_b = np.asarray(cells[f"ppl|{b}|{length}"]["nats"]) / LN2
            tokens = np.full(bits_a.shape, float(cells[f"ppl|{a}|{length}"]["tokens"]))
            lo, hi = ratio_interval(bits_a - bits_b, tokens, samples=BOOTSTRAP, seed=0)
            if lo > 0 or hi < 0:
                better, worse = (a, b) if hi < 0 else (b, a)
                decided["bpb"].append({"better": better, "worse": worse, "difference_ci": sorted([abs(lo), abs(hi)])})
            ca, cb = passkey_counts(results, a, length), passkey_counts(results, b, length)
            ia, ib = wilson_interval(*ca), wilson_interval(*cb)
            if ia[0] > ib[1] or ib[0] > ia[1]:
                better, worse = (a, b) if ia[0] > ib[1] else (b, a)
                decided["passkey"].append({"better": better, "worse": worse})
        out["orderings"][f"{m}x"] = {"length": length, **decided}
    return out


def broken(committed: Dict[str, Any], measured: Dict[str, Any]) -> List[str]:
    """The committed claims that do not hold in ``measured`` (both from :func:`claims`)."""
    problems = []
    for name in ("within", "past"):
        if committed[name]["holds"] and not measured[name]["holds"]:
            problems.append(f"{name}: {measured[name]}")
    for m, entry in committed["orderings"].items():
        got = measured["orderings"].get(m, {})
        for kind in ("bpb", "passkey"):
            pairs = {(p["better"], p["worse"]) for p in got.get(kind, [])}
            for p in entry[kind]:
                if (p["better"], p["worse"]) not in pairs:
                    problems.append(f"{m} {kind}: {p['better']} better than {p['worse']} is not decided")
    return problems


def table(results: Dict[str, Any]) -> Dict[str, Any]:
    """The numbers behind the claims: bits per byte and passkey exact matches per scaling and length."""
    out: Dict[str, Any] = {}
    for s in results["scalings"]:
        label = s["label"]
        out[label] = {
            str(n): {
                "bpb": round(results["perplexity"][label][str(n)]["bpb"], 6),
                "passkey": passkey_counts(results, label, n),
                "passkey_by_depth": {
                    depth_key(d): round(results["passkey"][label][str(n)][depth_key(d)]["accuracy"], 6)
                    for d in results["depths"]
                },
            }
            for n in results["lengths"]
        }
    return out


def markdown(summary: Dict[str, Any]) -> str:
    """The summary's numbers as the table docs/eval.md shows: bits per byte; passkey exact matches."""
    numbers, trained = summary["numbers"], summary["trained_context"]
    lengths = list(next(iter(numbers.values())))
    lines = [
        "| scaling | " + " | ".join(f"{n} ({int(n) // trained}x)" for n in lengths) + " |",
        "|---|" + "---|" * len(lengths),
    ]
    for label, row in numbers.items():
        cells = [f"{row[n]['bpb']:.3f}; {row[n]['passkey'][0]}/{row[n]['passkey'][1]}" for n in lengths]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
