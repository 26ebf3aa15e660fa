"""The packaged trained checkpoint (``posenc.measuring.eval.checkpoint``): ``posenc eval`` on it
again, and every claim of its committed summary held to what this run measures, with intervals."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from posenc.cli import main  # noqa: E402
from posenc.measuring.eval import checkpoint  # noqa: E402


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    out = tmp_path_factory.mktemp("ckpt") / "eval"
    assert main(["eval", str(checkpoint.FOLDER), *checkpoint.EVAL_ARGS, "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    cells = json.loads((out / "progress.json").read_text())["cells"]
    return {"results": results, "cells": cells, "claims": checkpoint.claims(results, cells)}


@pytest.fixture(scope="module")
def committed():
    return json.loads(checkpoint.SUMMARY.read_text())


def test_the_summary_is_of_this_checkpoint_and_this_command(measured, committed):
    assert committed["model_sha256"] == measured["results"]["model_sha256"]
    assert committed["eval_command"] == "posenc eval CHECKPOINT " + " ".join(checkpoint.EVAL_ARGS)
    for label, row in committed["numbers"].items():
        for n, entry in row.items():
            assert measured["results"]["perplexity"][label][n]["bpb"] == pytest.approx(entry["bpb"], abs=1e-4)


def test_it_retrieves_within_its_trained_length_and_not_past_it_without_scaling(measured, committed):
    got = measured["claims"]
    assert committed["claims"]["within"]["holds"] and committed["claims"]["past"]["holds"]
    assert got["within"]["length"] == measured["results"]["trained_context"] == 64
    lo, hi = got["within"]["ci"]
    assert lo > 0.5 > checkpoint.CHANCE and got["within"]["holds"]  # most keys, where chance is 1 in 90,000
    assert got["past"]["ci"][1] < lo and got["past"]["holds"]  # at 4x, wholly below


def test_the_scalings_are_ordered_at_2x_and_4x_as_the_summary_says(measured, committed):
    orderings = committed["claims"]["orderings"]
    assert set(orderings) == {"2x", "4x"} and all(orderings[m]["bpb"] for m in orderings)
    assert checkpoint.broken(committed["claims"], measured["claims"]) == []


def test_a_claim_that_no_longer_holds_is_reported(measured, committed):
    flipped = copy.deepcopy(committed["claims"])
    pair = flipped["orderings"]["2x"]["bpb"][0]
    pair["better"], pair["worse"] = pair["worse"], pair["better"]
    assert len(checkpoint.broken(flipped, measured["claims"])) == 1
    weaker = copy.deepcopy(measured["claims"])
    weaker["within"]["holds"] = False
    assert checkpoint.broken(committed["claims"], weaker) == [f"within: {weaker['within']}"]


def test_the_docs_table_is_the_committed_summary_rendered(committed):
    doc = (Path(__file__).resolve().parents[3] / "docs" / "eval.md").read_text(encoding="utf-8")
    assert checkpoint.markdown(committed) in doc
