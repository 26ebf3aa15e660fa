"""The verdicts one seed of a run would have got under the lab's earlier rule, stored in its summary.

The earlier rule (the lab before its paired tests, commit 118eb62's parent) called a claim "seen"
when the two 95% intervals did not overlap, with percentile-bootstrap intervals over trials for
exact matches (0 of 64 gives [0%, 0%]), no pairing, no correction for the number of claims, and
near keys at 1x against far keys at 8x. This script runs that rule's own code, read from git, on
one seed's ``results.json`` with the accuracy intervals recomputed the earlier way from the stored
per-trial outcomes (bits per byte and log2 p(key) intervals are unchanged), and writes the verdicts
into the committed summary as ``verdicts_before``, which ``python -m posenc.measuring.lab.summary render``
shows beside the current ones (table ``before-after``)::

    python benchmarks/lab_verdicts_before.py RUN_DIR/seed-0 quick-3-seeds

Run it from a git checkout of posenc (it reads the earlier rule with ``git show``).
"""

from __future__ import annotations

import argparse
import copy
import subprocess
import sys
import types
from pathlib import Path

import numpy as np

from posenc.measuring.lab.metrics import bootstrap_ci
from posenc.measuring.lab.schema import load_json_file
from posenc.measuring.lab.store import write_run_file
from posenc.runs.lab_schema import SUMMARIES_DIR

#: The commit whose verdict rule is "before".
RULE_COMMIT = "118eb62^"
RULE = (
    "Before: the earlier rule on one seed (seen when two 95% intervals do not overlap; "
    "percentile-bootstrap intervals over trials, so 0 of 64 is [0%, 0%]; no pairing; no correction "
    "for the number of claims)"
)


def earlier_rule(root: Path) -> types.ModuleType:
    source = subprocess.run(
        ["git", "show", f"{RULE_COMMIT}:src/posenc/measuring/lab/verdicts.py"],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    module = types.ModuleType("verdicts_before")
    exec(
        compile(source.replace("from .schema import", "from posenc.measuring.lab.schema import"), RULE_COMMIT, "exec"),
        module.__dict__,
    )
    return module


def with_bootstrap_accuracy(results: dict) -> dict:
    """``results`` with every retrieval cell's ``accuracy_ci`` the percentile bootstrap over its trials."""
    out = copy.deepcopy(results)
    samples, seed = out["config"]["bootstrap_samples"], out["config"]["seed"]

    def fix(entry):
        if not isinstance(entry, dict):
            return
        for cell in (entry.get("retrieval") or {}).values():
            correct = cell.get("correct")
            if isinstance(correct, list) and correct:
                cell["accuracy_ci"] = list(bootstrap_ci(np.asarray(correct, float), samples=samples, seed=seed))
        fix(entry.get("finetuned"))

    for s in out["schemes"].values():
        for entry in s["eval"].values():
            fix(entry)
    for per_len in out["extension"].values():
        for entry in per_len.values():
            fix(entry)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="one seed's run folder (holding results.json)")
    parser.add_argument("name", help="the committed summary to add the verdicts to")
    args = parser.parse_args(argv)
    results = load_json_file(Path(args.run) / "results.json", "results")
    path = SUMMARIES_DIR / f"{args.name}.json"
    summary = load_json_file(path, "summary")
    if results is None or summary is None:
        print(f"need {Path(args.run) / 'results.json'} and {path}", file=sys.stderr)
        return 2
    rule = earlier_rule(Path(__file__).resolve().parents[1])
    verdicts = rule.verdicts(with_bootstrap_accuracy(results))
    summary["verdicts_before"] = {
        "seed": results["config"]["seed"],
        "rule": RULE,
        "rule_short": "interval overlap",
        "verdicts": [{"claim": v["claim"], "verdict": v["verdict"], "evidence": v["evidence"]} for v in verdicts],
    }
    write_run_file(path, "summary", summary)
    print(f"{path}: {len(verdicts)} earlier-rule verdicts of seed {results['config']['seed']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
