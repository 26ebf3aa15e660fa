"""Every rotary causal-LM model type of the installed transformers: patched and equal, or refused.

The model types are enumerated, not listed: ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` filtered to those
whose modeling module defines a rotary embedding (:func:`posenc.integrations.discovery.rotary_causal_lm_types`).
Each gets a tiny random model from its own config class (:func:`posenc.testing.tiny_model_of_type`) and
:func:`posenc.testing.coverage` patches it. A supported type must give logits within 4x the model's
own float32 noise of the unpatched model (positions 0..11), the same greedy tokens with the KV
cache, and bit-identical logits after ``undo()``. A refused type must be refused with
``UnsupportedModelError`` and left exactly as it was.

The default run takes :data:`FAST` (one type per way of rotating, plus refusals); every type runs with
``POSENC_ALL_MODEL_TYPES=1`` (about 6 minutes on two cores). The coverage table in
docs/transformers.md is this enumeration's output (``benchmarks/transformers_coverage.py --write``);
:func:`test_docs_table_agrees_with_discovery` fails when the two disagree.
"""

from __future__ import annotations

import os
import pathlib

import pytest

transformers = pytest.importorskip("transformers")

from posenc import testing  # noqa: E402
from posenc.integrations import discovery  # noqa: E402

transformers.logging.set_verbosity_error()

ALL = os.environ.get("POSENC_ALL_MODEL_TYPES") == "1"
DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "transformers.md"
#: one type per way of rotating that discovery finds, one hand-listed family, and refusals
FAST = (
    "llama",  # hand-listed
    "mixtral",  # found: half-split, whole head
    "stablelm",  # found: partial rotary, sliced by the attention
    "cohere",  # found: interleaved pairs from an interleaved table
    "glm",  # found: partial interleaved rotary inside the function
    "gpt_oss",  # found: half-width table
    "codegen",  # refused: GPT-J's (x, sin, cos) form
)


@pytest.fixture(scope="module")
def census():
    return discovery.census()


def _types():
    found = discovery.rotary_causal_lm_types()
    return sorted(found) if ALL else [t for t in FAST if t in found]


def test_the_enumeration_is_the_causal_lm_types_with_a_rotary_module(census):
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    assert set(census) <= set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    assert {"llama", "mixtral", "cohere", "gemma2", "qwen3_moe", "olmo2"} <= set(census)
    assert "gpt2" not in census and "bloom" not in census  # learned positions, ALiBi


@pytest.mark.parametrize("model_type", _types())
def test_every_rotary_model_type_is_patched_exactly_or_refused(model_type):
    row = testing.coverage(model_type)
    if row.status == "untested":
        pytest.skip(f"the tiny config does not build for {model_type}: {row.detail}")
    assert row.status in ("supported", "refused"), row.detail
    if row.status == "refused":
        assert row.untouched, "a refused model must be left exactly as it was"
        assert row.detail
        return
    assert row.logit_error <= 4 * row.noise + 1e-6, (row.logit_error, row.noise)
    assert row.same_generation
    assert row.undo_exact


def test_docs_table_agrees_with_discovery(census):
    table = testing.read_coverage_table(DOC.read_text())
    assert set(table) == set(census), "regenerate: PYTHONPATH=src python benchmarks/transformers_coverage.py --write"
    for model_type, (_, rotation, _) in table.items():
        assert rotation == testing.rotation_found(model_type, census), model_type


@pytest.mark.skipif(not ALL, reason="builds every model type: POSENC_ALL_MODEL_TYPES=1")
def test_docs_table_statuses_are_this_enumeration():
    table = testing.read_coverage_table(DOC.read_text())
    for model_type, (status, _, why) in table.items():
        row = testing.coverage(model_type)
        assert (row.status, "" if row.status == "supported" else row.detail) == (status, why), model_type
