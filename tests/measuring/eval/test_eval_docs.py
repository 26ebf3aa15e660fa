"""docs/eval.md's worked example: its tables are what ``posenc eval`` rendered from the committed
results files (``docs/eval-runs/``), and its lab tables hold the same means, as the text says."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from posenc.measuring.eval.report import markdown
from posenc.teaching.explorer.eval_results import read_eval_results

ROOT = Path(__file__).resolve().parents[3]
DOC = (ROOT / "docs" / "eval.md").read_text(encoding="utf-8")
RUNS = ROOT / "docs" / "eval-runs"


def _results(name: str) -> dict:
    return json.loads((RUNS / f"{name}.json").read_text(encoding="utf-8"))


def _section(start: str, end: str) -> str:
    return DOC[DOC.index(start) : DOC.index(end)]


def _rows(text: str, first: str) -> list:
    return [line for line in text.splitlines() if line.startswith(first)]


def test_the_worked_example_tables_are_the_committed_runs_rendered():
    worked = _section("### A worked example", "## What a needle-in-a-haystack")
    rendered = markdown(_results("small-rope")).splitlines()
    rows = [r for r in _rows(worked, "| ") if "plain RoPE" in r or "as posenc lab extends" in r]
    assert len(rows) == 6 and all(r in rendered for r in rows)
    search = _section("## `--search`", "## Outputs, progress")
    rendered = markdown(_results("small-rope-search")).splitlines()
    rows = [r for r in _rows(search, "| ") if not r.startswith("|---") and not r.startswith("| |")]
    rows = [r for r in rows if not r.startswith("| scaling |")]
    assert len(rows) == 6 and all(r in rendered for r in rows), [r for r in rows if r not in rendered]
    assert next(line for line in search.splitlines() if line.startswith("Best minus default")) in rendered


def test_the_lab_tables_of_the_worked_example_hold_evals_means():
    worked = _section("### A worked example", "```python")
    ev = _results("small-rope")["perplexity"]
    lengths = ["64", "128", "256"]
    for method in ("none", "linear", "ntk", "dynamic", "yarn", "llama3"):
        (row,) = [r for r in _rows(worked, f"| {method} |") if "(" not in r]
        shown = [float(v) for v in re.findall(r"\d+\.\d+", row)]
        assert shown == [round(ev[method][n]["bpb"], 3) for n in lengths], method
    (rope,) = _rows(worked, "| rope |")
    means = [float(v) for v in re.findall(r"(\d+\.\d+) \[", rope)]
    assert means == [round(ev["none"][n]["bpb"], 3) for n in ("32", "64", "128", "256")]


@pytest.mark.parametrize("name", ["small-rope", "small-rope-search"])
def test_the_committed_runs_open_in_the_explorer(name, tmp_path):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "results.json").write_text((RUNS / f"{name}.json").read_text(encoding="utf-8"), encoding="utf-8")
    got = read_eval_results(folder)
    assert got["available"] and got["notes"] == [] and got["trained_context"] == 32
    assert (got["search"] is not None) == (name == "small-rope-search")
