"""``posenc inspect`` on a config whose ``torch_dtype`` (or ``dtype``) is no floating dtype: it said
"the config gives no torch_dtype", as if the field were missing. It says the value is invalid, naming
it, and audits as float32; a plot through a link replaces the link, never the file it points at."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import cli
from posenc.fixtures import load_fixture
from posenc.inspect import EXACT_INTEGERS, format_report, inspect_config

LLAMA = {k: v for k, v in load_fixture("llama-3.1-8b").items() if k not in ("source", "note")}


@pytest.mark.parametrize(
    "key, value", [("torch_dtype", [1]), ("torch_dtype", "int8"), ("dtype", {"a": 1}), ("torch_dtype", 16)]
)
def test_an_invalid_dtype_is_named_not_reported_missing(key, value):
    report = inspect_config({**LLAMA, key: value})
    assert report["torch_dtype"] == "float32" and report["torch_dtype_given"] is False
    assert report["torch_dtype_invalid"] == f"{key}={value!r}"
    text = format_report(report)
    assert f"{key}={value!r} is not a floating dtype" in text and "gives no torch_dtype" not in text


def test_a_missing_dtype_is_still_missing_and_a_valid_one_wins():
    assert "gives no torch_dtype" in format_report(inspect_config(LLAMA))
    report = inspect_config({**LLAMA, "torch_dtype": "int8", "dtype": "bfloat16"})
    assert report["torch_dtype"] == "bfloat16" and report["torch_dtype_invalid"] is None


@settings(max_examples=60, deadline=None)
@given(
    st.one_of(
        st.text(max_size=12), st.integers(), st.lists(st.integers(), max_size=2), st.sampled_from(list(EXACT_INTEGERS))
    )
)
def test_any_dtype_is_audited_as_given_or_named_invalid(value):
    report = inspect_config({**LLAMA, "torch_dtype": value})
    name = value.replace("torch.", "") if isinstance(value, str) else None
    if name in EXACT_INTEGERS:
        assert report["torch_dtype"] == name and report["torch_dtype_invalid"] is None
    else:
        assert report["torch_dtype_invalid"] == f"torch_dtype={value!r}"[: len("torch_dtype=") + 60]


def test_the_cli_json_names_the_invalid_dtype(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA, "torch_dtype": "int8"}))
    assert cli.main(["inspect", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["torch_dtype_invalid"] == "torch_dtype='int8'"


def test_a_plot_linked_to_another_file_replaces_the_link(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    other = tmp_path / "model.safetensors"
    other.write_bytes(b"weights")
    (tmp_path / "plot.png").symlink_to(other)
    assert cli.main(["inspect", str(tmp_path), "--plot", str(tmp_path / "plot.png")]) == 0
    assert other.read_bytes() == b"weights" and not (tmp_path / "plot.png").is_symlink()
