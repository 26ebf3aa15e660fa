"""The packaged summary of the lesson's trained models, crafted: brackets nested past the JSON parser's
stack raised a bare ``RecursionError``, and ``true`` passed as an evaluation length (a bool is an int
in Python). Each is refused as a :class:`TrainedModelError` naming the file."""

from __future__ import annotations

import json

import pytest

from posenc.teaching.lesson import trained


@pytest.fixture
def summary(tmp_path):
    """A folder holding only a copy of the packaged summary.json (what read_summary reads)."""
    (tmp_path / trained.SUMMARY_NAME).write_bytes((trained.MODELS_DIR / trained.SUMMARY_NAME).read_bytes())
    return tmp_path


def test_a_deeply_nested_summary_is_a_clear_error(summary):
    (summary / trained.SUMMARY_NAME).write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(trained.TrainedModelError, match=r"summary\.json: nests its JSON too deeply"):
        trained.read_summary(summary)


@pytest.mark.parametrize("lengths", [[True, 256], [128, False], [128.0], [0], ["128"]])
def test_an_evaluation_length_that_is_no_length_is_refused(summary, lengths):
    path = summary / trained.SUMMARY_NAME
    content = json.loads(path.read_text())
    content["eval_lengths"] = lengths
    path.write_text(json.dumps(content))
    with pytest.raises(trained.TrainedModelError, match="eval_lengths must be positive integers"):
        trained.read_summary(summary)


def test_the_packaged_summary_reads(summary):
    assert trained.read_summary(summary)["eval_lengths"] == trained.read_summary()["eval_lengths"]
