"""docs/conformance.md's tables are rendered from the committed conform summaries, and say what they hold."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from posenc.integrations.conform import docs
from posenc.integrations.conform.schema import read_summary

ROOT = Path(__file__).resolve().parents[2]


def _summaries():
    return docs.load_summaries([ROOT / folder for folder in docs.RESULT_FOLDERS])


def test_the_page_matches_the_committed_summaries():
    page = (ROOT / docs.PAGE).read_text(encoding="utf-8")
    assert docs.page_with_tables(page, docs.render(_summaries())) == page, (
        "docs/conformance.md differs from the summaries; run python -m posenc.integrations.conform.docs"
    )


def test_every_committed_summary_is_on_the_page_with_its_version_and_date():
    page = (ROOT / docs.PAGE).read_text(encoding="utf-8")
    summaries = _summaries()
    assert {s["engine"]["name"] for s in summaries} >= {"posenc", "transformers"}
    for summary in summaries:
        engine = summary["engine"]
        assert f"| {engine['name']} {engine['version']} ({summary['date']}) |" in page


def test_a_changed_summary_changes_the_tables():
    """The check can fail: a wrong answer added to a summary shows in all three parts of the block."""
    summaries = copy.deepcopy(_summaries())
    before = docs.render(summaries)
    entry = next(c for c in summaries[0]["configs"] if c["rope_type"] == "yarn")
    entry["status"], entry["causes"] = "wrong", ["beta_fast/beta_slow swapped"]
    entry["worst"]["angle"] = {"error": 0.5, "unit": "rad", "status": "wrong", "group": "near", "dtype": "float32"}
    after = docs.render(summaries)
    assert after != before
    assert "**wrong** (1/" in after and "**wrong** in 1" in after
    assert f"`{entry['config']}` (wrong): beta_fast/beta_slow swapped" in after
    entry["skipped"] = ["1M: positions up to 1048575 are past the adapter's max_position 8191"]
    assert "`1M` in 1 config" in docs.render(summaries)


def test_the_pinned_transformers_summary_holds_what_the_docs_say():
    summary = read_summary(ROOT / "benchmarks" / "conform" / "transformers.json")
    wrong = {c["config"]: c["causes"] for c in summary["configs"] if c["status"] == "wrong"}
    assert wrong == {"default partial=0.5": ["partial rotary ignored: all 32 features rotated, not 16"]}
    fixtures = [c for c in summary["configs"] if c["source"] == "fixture"]
    assert fixtures and all(c["status"] == "precision" for c in fixtures)


def test_the_page_needs_its_markers():
    with pytest.raises(ValueError, match="no generated block"):
        docs.page_with_tables("no markers here", "x")
