"""``posenc eval`` against a hostile output folder and hostile values: links planted in ``--out``,
crafted ``progress.json`` and ``search.json`` cells, flags of 400 digits, a lock path that is a folder,
and an interrupted write's temporaries.

Each test here lost data or ended in a traceback before: a ``ppl_vs_length.png`` linked to the
checkpoint's ``model.safetensors`` turned the weights into a PNG (exit 0); a 400-digit number in a
cell, or nats of 1e308, raised ``OverflowError``; ``--windows`` of 400 digits, ``--scalings
llama3:1e308`` and ``--device xla`` raised (the last two after creating ``--out``); a folder at the
lock path raised ``IsADirectoryError``; a temporary left by an interrupted write stayed for ever.
Tiny random checkpoints built here; nothing downloaded.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

transformers = pytest.importorskip("transformers")

from posenc.cli import main  # noqa: E402
from posenc.measuring.eval import settings as eval_settings  # noqa: E402
from posenc.measuring.eval.files import LOCK_NAME, EvalError  # noqa: E402
from posenc.measuring.lab.export import export_model  # noqa: E402
from posenc.model import ModelConfig, TinyLM  # noqa: E402

BIG = "1" + "0" * 400


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Path:
    """A folder with a tiny random checkpoint ``ckpt`` and a text ``text.txt``."""
    from posenc.measuring.corpus import stdlib_root

    root = tmp_path_factory.mktemp("eval_hostile")
    torch.manual_seed(0)
    export_model(TinyLM(ModelConfig(d_model=32, n_layers=1, n_heads=2)), root / "ckpt", max_position_embeddings=32)
    source = (stdlib_root() / "textwrap.py").read_text(encoding="utf-8")
    (root / "text.txt").write_bytes(source.encode("ascii", "ignore"))
    return root


@pytest.fixture()
def checkpoint(shared, tmp_path) -> Path:
    """A copy of the shared checkpoint (a test may plant links to its weights)."""
    shutil.copytree(shared / "ckpt", tmp_path / "ckpt")
    return tmp_path / "ckpt"


@pytest.fixture()
def text(shared) -> Path:
    return shared / "text.txt"


@pytest.fixture(scope="module")
def finished(shared) -> Path:
    """A finished evaluation's folder (no plots) of the shared checkpoint, with a search of two
    configurations; each test works on a copy (:func:`_copy`)."""
    out = shared / "finished"
    assert main(_argv(shared / "ckpt", shared / "text.txt", out, *SEARCH)) == 0
    return out


#: the flags of the finished evaluation beside :func:`_argv`'s
SEARCH = ("--no-plots", "--search", "linear", "--search-budget", "2", "--search-windows", "2")


def _copy(finished: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(finished, out, ignore=shutil.ignore_patterns(LOCK_NAME))
    return out


def _argv(model: Path, text: Path, out: Path, *extra: str) -> list:
    return [
        "eval",
        str(model),
        *("--lengths", "32,64", "--scalings", "none,linear:2", "--windows", "3"),
        *("--passkey-trials", "2", "--depths", "0,1", "--passkey-format", "lab"),
        *("--text", str(text), "--out", str(out), *extra),
    ]


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if line.startswith("posenc eval:")]
    assert "Traceback" not in err and lines, err
    return lines[-1]


# -- links and leftovers in --out ----------------------------------------------------------------------------
def test_a_plot_linked_to_the_weights_is_replaced_and_the_weights_kept(checkpoint, text, tmp_path):
    weights = checkpoint / "model.safetensors"
    before = weights.read_bytes()
    out = tmp_path / "out"
    out.mkdir()
    (out / "ppl_vs_length.png").symlink_to(weights.resolve())
    (out / "passkey_none.png").symlink_to(weights.resolve())
    assert main(_argv(checkpoint, text, out)) == 0
    assert weights.read_bytes() == before
    for name in ("ppl_vs_length.png", "passkey_none.png"):
        assert not (out / name).is_symlink() and (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_interrupted_writes_temporaries_are_removed_under_the_lock(checkpoint, text, tmp_path):
    out = tmp_path / "out"
    argv = _argv(checkpoint, text, out, "--no-plots")
    assert main(argv) == 0
    left = ["progress.json.k3j2x9.tmp", "results.json.ab_12c.tmp", "ppl_vs_length.png.x1y2z3.tmp"]
    for name in left:
        (out / name).write_bytes(b"half a file")
    assert main(argv) == 0
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]


def test_a_folder_at_the_lock_path_is_refused_in_one_line(checkpoint, text, tmp_path, capsys):
    out = tmp_path / "out"
    (out / LOCK_NAME).mkdir(parents=True)
    assert main(_argv(checkpoint, text, out, "--no-plots")) == 2
    line = _one_line(capsys)
    assert "is a folder" in line and LOCK_NAME in line
    assert [p.name for p in out.iterdir()] == [LOCK_NAME]


# -- crafted cells -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "key, field, value",
    [
        ("ppl|none|64", "nats", [int(BIG)] * 3),
        ("ppl|none|64", "nats", [1e308] * 3),
        ("ppl|none|64", "final_nats", [-1.0] * 3),
        ("passkey|none|64|1", "offsets", [int(BIG), 0]),
        ("passkey|none|64|1", "key_tokens", [int(BIG), 1]),
        ("passkey|none|64|1", "logp_bits", [-1e308, -1e308]),
        ("passkey|none|64|1", "keys", [int(BIG), 1]),
    ],
)
def test_crafted_progress_cells_are_refused_in_one_line(shared, finished, tmp_path, capsys, key, field, value):
    out = _copy(finished, tmp_path)
    argv = _argv(shared / "ckpt", shared / "text.txt", out, *SEARCH)
    progress = json.loads((out / "progress.json").read_text())
    progress["cells"][key][field] = value
    (out / "progress.json").write_text(json.dumps(progress))
    results = (out / "results.json").read_bytes()
    capsys.readouterr()
    assert main(argv) == 2
    line = _one_line(capsys)
    assert key in line and field in line
    assert (out / "results.json").read_bytes() == results  # nothing was rewritten


@pytest.mark.parametrize("value", [int(BIG), 1e308, -1.0, "1"])
def test_crafted_search_evaluations_are_refused_in_one_line(shared, finished, tmp_path, capsys, value):
    out = _copy(finished, tmp_path)
    argv = _argv(shared / "ckpt", shared / "text.txt", out, *SEARCH)
    search = json.loads((out / "search.json").read_text())
    first = next(iter(search["evaluations"].values()))
    first["nats"][0] = value
    (out / "search.json").write_text(json.dumps(search))
    capsys.readouterr()
    assert main(argv) == 2
    assert "needs nats as 2 finite numbers" in _one_line(capsys)


# -- flags ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "flags, words",
    [
        (["--windows", BIG], "--windows must be at most 2**53"),
        (["--final-tokens", BIG], "--final-tokens must be at most 2**53"),
        (["--batch-size", BIG], "--batch-size must be at most 2**53"),
        (["--passkey-trials", BIG], "--passkey-trials must be at most 100,000"),
        (["--bootstrap-samples", BIG], "--bootstrap-samples must be at most 100,000"),
        (["--search", "linear", "--search-budget", BIG], "--search-budget must be at most 100,000"),
        (["--search", "linear", "--search-windows", BIG], "--search-windows must be at most 2**53"),
        (["--lengths", f"32,{BIG}"], "--lengths must be comma-separated positive integers"),
        (["--seed", BIG], "--seed must be at most 2**53"),
        (["--memory-limit", BIG], "--memory-limit must be at most 2**53"),
        (["--scalings", "llama3:1e308"], "extends the trained context 32 past 2**53 positions"),
        (["--scalings", "linear:1e300"], "extends the trained context 32 past 2**53 positions"),
        (["--device", "xla"], "--device must be cpu, cuda or cuda:N, got 'xla'"),
    ],
)
def test_values_past_any_use_are_one_line_and_create_nothing(checkpoint, text, tmp_path, capsys, flags, words):
    out = tmp_path / "out"
    assert main(_argv(checkpoint, text, out, *flags)) == 2
    line = _one_line(capsys)
    assert words in line and len(line) < 400, line  # a 400-digit value is named, not printed
    assert not out.exists()


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.integers(min_value=-(10**450), max_value=10**450).map(str), st.text(max_size=30)))
def test_a_count_flag_is_a_count_or_a_clear_error(text):
    """Any text given to a count flag: a positive int at most 2**53, or one EvalError naming it."""
    try:
        value = eval_settings.positive("--windows", text)
    except EvalError as err:
        assert str(err).startswith("--windows must be") and len(str(err)) < 200
    else:
        assert type(value) is int and 1 <= value <= 2**53 and value == int(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=12))
def test_the_device_is_a_device_the_command_loads_on_or_a_clear_error(device):
    try:
        assert eval_settings.check_device(device) == device
    except EvalError as err:
        assert str(err).startswith("--device must be cpu, cuda or cuda:N")
    else:
        index = device[5:]
        assert device in ("cpu", "cuda") or (device[:5] == "cuda:" and index.isascii() and index.isdigit())
        torch.device(device)  # one torch knows
