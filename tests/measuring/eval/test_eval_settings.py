"""``posenc eval``'s settings: one frozen :class:`EvalRun` made once from the command line, holding
every flag parsed and what the checkpoint decides; each bad value is one :class:`EvalError` naming
the flag, the value and what is allowed. And the shape that object allows: no function of
``posenc.measuring.eval`` over 80 lines or taking more than six positional parameters."""

from __future__ import annotations

import argparse
import ast
import dataclasses
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("transformers")

import posenc.measuring.eval  # noqa: E402
from posenc.measuring.eval.cli import add_arguments  # noqa: E402
from posenc.measuring.eval.files import EvalError  # noqa: E402
from posenc.measuring.eval.settings import MAX_BOOTSTRAP_SAMPLES, EvalRun  # noqa: E402
from posenc.measuring.lab.export import export_model  # noqa: E402
from posenc.model import ModelConfig, TinyLM  # noqa: E402

MAX_FUNCTION_LINES = 80
MAX_POSITIONAL = 6


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """A tiny exported checkpoint: trained context 16, rotary width 8, no scaling of its own."""
    folder = tmp_path_factory.mktemp("evalsettings") / "m"
    export_model(
        TinyLM(ModelConfig(d_model=32, n_layers=1, n_heads=2, rotary_dim=8)), folder, max_position_embeddings=16
    )
    return folder


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="posenc eval")
    add_arguments(parser)
    return parser


def settings_of(*argv: str) -> EvalRun:
    return EvalRun.from_args(_parser().parse_args(list(argv)))


def test_every_flag_is_a_field_of_the_settings():
    fields = {f.name for f in dataclasses.fields(EvalRun)}
    dests = {a.dest for a in _parser()._actions if a.dest != "help"}
    # --scalings becomes the parsed specs; every other flag keeps its name
    assert dests - fields == {"scalings"} and "specs" in fields


def test_defaults_are_resolved_once_from_the_checkpoint(checkpoint):
    ev = settings_of(str(checkpoint), "--final-tokens", "8")  # the default 32 is past the shortest length
    assert ev.model == checkpoint and ev.trained == 16 and ev.rotary_dim == 8
    assert ev.lengths == (16, 32, 64, 128) and ev.span == 128  # 1, 2, 4 and 8 x L0
    assert [s.label for s in ev.specs][0] == "none"  # no scaling of its own: no 'model' spec
    assert ev.depths == (0.0, 0.25, 0.5, 0.75, 1.0) and ev.windows == 16 and ev.final_tokens == 8
    assert ev.passkey_trials == 10 and ev.seed == 0 and ev.bootstrap_samples == 1000 and ev.plots
    assert ev.search is None and ev.search_length is None and ev.write_config is None
    assert ev.out.parent == Path("runs") and ev.out.name.startswith("eval-m-")
    with pytest.raises(dataclasses.FrozenInstanceError):
        ev.windows = 3  # type: ignore[misc]


def test_given_values_are_parsed_sorted_and_typed(checkpoint, tmp_path):
    ev = settings_of(
        str(checkpoint),
        *("--lengths", "64,16,32,16", "--depths", "1,0,0.5", "--final-tokens", "8", "--passkey-trials", "0"),
        *("--memory-limit", "1.5", "--seed", "7", "--search", "yarn", "--search-length", "32"),
        *("--scalings", "none,linear:4", "--out", str(tmp_path / "o"), "--no-plots"),
    )
    assert ev.lengths == (16, 32, 64) and ev.depths == (0.0, 0.5, 1.0) and ev.passkey_trials == 0
    assert ev.memory_limit == 1.5 and isinstance(ev.memory_limit, float) and ev.seed == 7 and not ev.plots
    assert ev.search == "yarn" and ev.search_length == 32  # one of the lengths, past L0
    assert [s.label for s in ev.specs] == ["none", "linear:4"] and ev.out == tmp_path / "o"
    # without --search-length the search targets the longest length; a folder gets config.json
    assert settings_of(str(checkpoint), "--search", "linear", "--final-tokens", "8").search_length == 128
    written = settings_of(str(checkpoint), "--scalings", "yarn:4", "--write-config", str(tmp_path / "c"))
    assert written.write_config == tmp_path / "c" / "config.json"


# Flags that take one positive integer, with the smallest value each allows.
INTEGER_FLAGS = {"--windows": 2, "--batch-size": 1, "--bootstrap-samples": 1, "--search-windows": 1}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flag=st.sampled_from(sorted(INTEGER_FLAGS)), text=st.one_of(st.integers(-5, 200_000).map(str), st.text()))
def test_an_integer_flag_is_its_value_or_one_error_naming_flag_and_value(checkpoint, flag, text):
    try:
        ev = settings_of(str(checkpoint), flag, text, "--lengths", "16,32", "--final-tokens", "8")
    except EvalError as err:
        message = str(err)
        assert message.startswith(f"{flag} must be") and "\n" not in message
        assert repr(text) in message or message.endswith(f"got {int(text):,}")  # the text, or the number read
        return
    except SystemExit:  # argparse refuses a value that looks like a flag before the settings see it
        assert text.startswith("-")
        return
    value = getattr(ev, flag[2:].replace("-", "_"))
    assert value == int(text) and INTEGER_FLAGS[flag] <= value
    assert flag != "--bootstrap-samples" or value <= MAX_BOOTSTRAP_SAMPLES


def test_checks_that_need_the_checkpoint_name_the_flag(checkpoint, tmp_path):
    cases = [
        (["--lengths", "16,24,64"], "--lengths: every length must divide the longest (64); [24] do not"),
        (["--lengths", "16,32", "--final-tokens", "17"], "--final-tokens 17 must be at most the shortest length 16"),
        (["--search", "yarn", "--search-length", "16"], "--search-length 16 must exceed the trained context 16"),
        (["--scalings", "model"], "scaling 'model': MODEL"),
        (["--search", "yarn", "--write-config", str(tmp_path / "c")], "--search and --write-config"),
    ]
    for extra, words in cases:
        with pytest.raises(EvalError) as err:
            settings_of(str(checkpoint), *extra)
        assert words in str(err.value), (extra, str(err.value))
    # writing a config never reads the text, so the windows' fit is not asked of it
    ev = settings_of(str(checkpoint), "--final-tokens", "999", "--scalings", "yarn:4", "--write-config", "c.json")
    assert ev.final_tokens == 999 and ev.write_config == Path("c.json")


def _functions(source: str):
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            positional = len(node.args.posonlyargs) + len(node.args.args)
            yield node.name, node.end_lineno - node.lineno + 1, positional


def test_the_counter_sees_a_long_function_and_a_long_parameter_list():
    body = "\n".join(f"    x{i} = {i}" for i in range(85))
    source = (
        f"def long(a, b, c, d, e, f, g, *, h=1):\n{body}\n\n\nclass C:\n    def short(self, a):\n        return a\n"
    )
    assert sorted(_functions(source)) == [("long", 86, 7), ("short", 2, 2)]


def test_no_function_of_eval_is_over_80_lines_or_takes_more_than_six_positional_parameters():
    folder = Path(posenc.measuring.eval.__file__).parent
    long, wide = [], []
    for path in sorted(folder.glob("*.py")):
        for name, lines, positional in _functions(path.read_text(encoding="utf-8")):
            if lines > MAX_FUNCTION_LINES:
                long.append(f"{path.name}:{name} ({lines} lines)")
            if positional > MAX_POSITIONAL:
                wide.append(f"{path.name}:{name} ({positional} positional parameters)")
    assert not long, "split these functions: " + ", ".join(long)
    assert not wide, "pass the EvalRun (and the loaded Inputs) instead: " + ", ".join(wide)
