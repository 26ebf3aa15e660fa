"""``posenc eval --search``: the search over a scaling's parameters, on an exported lab model and on
tiny random ones. Nothing is downloaded; every model is small and the budgets are a few evaluations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")

from posenc.cli import main  # noqa: E402
from posenc.measuring.corpus import load_corpus, stdlib_root  # noqa: E402
from posenc.measuring.eval import measure  # noqa: E402
from posenc.measuring.eval.search import (  # noqa: E402
    LONGROPE_MAX_STRETCH,
    Candidate,
    default_candidate,
    per_pair_seeds,
    search_window_ends,
    searchable,
)
from posenc.measuring.lab.export import export_model  # noqa: E402
from posenc.model import ModelConfig, TinyLM  # noqa: E402
from posenc.rope.registry import REGISTRY  # noqa: E402
from posenc.runs.extension import extension_config  # noqa: E402


def _text(tmp: Path) -> Path:
    root = stdlib_root()
    text = "\n\n".join((root / n).read_text(encoding="utf-8") for n in ("argparse.py", "textwrap.py", "dataclasses.py"))
    path = tmp / "source.txt"
    path.write_bytes(text.encode("ascii", "ignore"))
    return path


@pytest.fixture(scope="module")
def lab_model(tmp_path_factory):
    """A tiny trained lab run (RoPE, YaRN extension), exported, and its validation text."""
    tmp = tmp_path_factory.mktemp("searchlab")
    data, run, out = _text(tmp), tmp / "run", tmp / "exported"
    argv = ["lab", "--preset", "smoke", "--schemes", "rope", "--extension-methods", "yarn", "--steps", "40"]
    argv += ["--warmup-steps", "4", "--eval-windows", "4", "--retrieval-trials", "2", "--threads", "1"]
    assert main(argv + ["--no-plots", "--data", str(data), "--out", str(run)]) == 0
    assert main(["lab", "export", str(run), str(out)]) == 0
    val = tmp / "val.txt"
    val.write_bytes(bytes(load_corpus(str(data)).val))
    return {"model": out, "val": val, "results": json.loads((run / "results.json").read_text())}


def _eval_argv(model: dict, lengths: str) -> list:
    """``posenc eval`` of ``model`` on its text at ``lengths``, its last 8 tokens scored as the final ones."""
    return ["eval", str(model["model"]), "--text", str(model["text"]), "--lengths", lengths, "--final-tokens", "8"]


@pytest.fixture(scope="module")
def random_model(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("searchrandom")
    torch.manual_seed(0)
    model = TinyLM(ModelConfig(d_model=32, n_layers=1, n_heads=2, rotary_dim=8))
    export_model(model, tmp / "m", max_position_embeddings=16)
    return {"model": tmp / "m", "text": _text(tmp)}


@pytest.mark.slow  # a lab run, then an eval with a search: tens of seconds on 2 cores
def test_search_on_a_lab_model_is_no_worse_than_the_default_and_reports_held_out_intervals(lab_model, tmp_path):
    out = tmp_path / "eval"
    argv = ["eval", str(lab_model["model"]), "--text", str(lab_model["val"]), "--windows", "4", "--out", str(out)]
    argv += ["--scalings", "none", "--passkey-trials", "0", "--no-plots"]
    argv += ["--search", "yarn", "--search-windows", "3", "--search-budget", "7"]
    assert main(argv) == 0
    res = json.loads((out / "results.json").read_text())
    s = res["search"]
    assert s["type"] == "yarn" and s["target_length"] == 256 and s["evaluations"] == 7
    # the default is YaRN as the lab extends to 256: the lab's own number on the report's windows
    assert s["default"]["params"] == {"factor": 8.0, "beta_fast": 32.0, "beta_slow": 1.0}
    assert s["default"]["held_out_bpb"] == pytest.approx(
        lab_model["results"]["extension"]["yarn"]["256"]["bpb"], abs=1e-5
    )
    values = [h["bpb"] for h in s["history"]]
    assert s["history"][0]["params"] == s["default"]["params"] and len(set(values)) > 1  # it moved
    assert s["best"]["search_bpb"] == min(values) <= s["default"]["search_bpb"] == values[0]
    for role in ("default", "best"):
        lo, hi = s[role]["held_out_bpb_ci"]
        assert lo <= s[role]["held_out_bpb"] <= hi
        label = s[role]["label"]
        assert set(res["perplexity"][label]) == {"32", "64", "128", "256"}
        assert res["perplexity"][label]["256"]["bpb"] == s[role]["held_out_bpb"]
    d = s["held_out_difference"]
    assert d["bpb"] == pytest.approx(s["best"]["held_out_bpb"] - s["default"]["held_out_bpb"])
    assert d["bpb_ci"][0] <= d["bpb"] <= d["bpb_ci"][1]
    # the search windows are apart from the report's
    search_ends = json.loads((out / "search.json").read_text())["settings"]["window_ends"]
    report_ends = measure.window_ends(lab_model["val"].stat().st_size, 256, 4)
    for e in search_ends:
        assert all(e <= r - 257 or e - 257 >= r for r in report_ends)
    md = (out / "results.md").read_text()
    assert "## Search: yarn at 256 tokens" in md and "Best minus default on the report windows" in md


def test_an_interrupted_search_resumes_without_reevaluating(random_model, tmp_path, monkeypatch):
    argv = _eval_argv(random_model, "16,64")
    argv += ["--scalings", "none", "--windows", "2", "--passkey-trials", "0", "--no-plots"]
    argv += ["--search", "linear", "--search-windows", "2", "--search-budget", "5"]
    clean = tmp_path / "clean"
    assert main(argv + ["--out", str(clean)]) == 0
    real, calls, interrupted = measure.window_nats, [], []

    def flaky(*a, **k):
        calls.append(1)
        if len(calls) == 4 and not interrupted:
            interrupted.append(1)
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(measure, "window_nats", flaky)
    run = tmp_path / "resumed"
    assert main(argv + ["--out", str(run)]) == 130
    assert len(json.loads((run / "search.json").read_text())["evaluations"]) == 3
    calls.clear()
    assert main(argv + ["--out", str(run)]) == 0
    a, b = (json.loads((p / "results.json").read_text()) for p in (clean, run))
    assert a["search"] == b["search"] and a["perplexity"] == b["perplexity"]
    assert len(calls) == 2 + 3 * 2  # two search evaluations left, then the report's 3 scalings x 2 lengths
    assert main(argv[:-1] + ["6", "--out", str(run)]) == 2  # another budget: refused, not mixed


def test_longrope_search_keeps_factors_monotone_and_bounded(random_model, tmp_path):
    out = tmp_path / "lr"
    argv = _eval_argv(random_model, "16,64")
    argv += ["--scalings", "none", "--windows", "2", "--passkey-trials", "0", "--no-plots", "--out", str(out)]
    assert main(argv + ["--search", "longrope", "--search-windows", "2", "--search-budget", "8"]) == 0
    s = json.loads((out / "results.json").read_text())["search"]
    assert s["evaluations"] == 8
    assert s["default"]["params"]["long_factor"] == [4.0] * 4  # position interpolation, written per pair
    for h in s["history"]:
        f = h["params"]["long_factor"]
        assert all(1.0 <= a <= b <= LONGROPE_MAX_STRETCH * 4 + 1e-12 for a, b in zip(f, f[1:]))
        assert h["params"]["short_factor"] == [1.0] * 4
    assert s["best"]["search_bpb"] <= s["default"]["search_bpb"]
    assert len({h["bpb"] for h in s["history"]}) > 1  # the per-pair factors reach the model


def test_longrope_first_population_is_the_registered_methods_per_pair():
    seeds = per_pair_seeds("longrope", 256, 32, 16, 10000.0)
    factors = [c.params["long_factor"] for c in seeds]
    assert factors[0] == [8.0] * 8  # position interpolation
    yarn = extension_config(REGISTRY["yarn"], 256, 32)
    from posenc.rope import rope_frequencies

    plain, _ = rope_frequencies(None, 16, 10000.0)
    scaled, _ = rope_frequencies(yarn, 16, 10000.0)
    assert (plain / scaled).tolist() in factors  # YaRN as LongRoPE factors: 1 for fast pairs, 8 for slow
    assert len(factors) == len({json.dumps(f) for f in factors}) >= 3


def test_defaults_come_from_the_registry():
    assert set(searchable()) >= {"linear", "ntk", "dynamic", "yarn", "llama3", "longrope"}
    assert default_candidate("yarn", 512, 64, 16, 1e4) == Candidate(
        {"factor": 8.0, "beta_fast": 32.0, "beta_slow": 1.0}
    )
    assert default_candidate("llama3", 256, 64, 16, 1e4).params == {
        "factor": 4.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
    }


def test_search_windows_are_apart_from_the_report_windows():
    report = measure.window_ends(10_000, 256, 8)
    ends = search_window_ends(10_000, report, 256, 128, 12)
    assert len(set(ends.tolist())) == 12 and ends.min() >= 129 and ends.max() <= 10_000
    for e in ends:
        assert all(e <= r - 257 or e - 129 >= r for r in report)
    with pytest.raises(ValueError, match="room for"):
        search_window_ends(3000, measure.window_ends(3000, 256, 8), 256, 256, 5)


def test_search_mistakes_are_one_line(random_model, tmp_path, capsys):
    m = _eval_argv(random_model, "16,32,64")
    for extra, words in (
        (["--search", "warp"], "--search 'warp': choose one of"),
        (["--search", "proportional"], "choose one of"),
        (["--search", "yarn", "--search-length", "48"], "must be one of the lengths"),
        (["--search", "yarn", "--search-length", "16"], "must exceed the trained context 16"),
        (["--search", "yarn", "--search-budget", "0"], "--search-budget must be a positive int"),
        (["--search", "yarn", "--scalings", "yarn:2", "--write-config", str(tmp_path / "c")], "--write-config"),
        (["--search", "yarn", "--search-windows", "4000"], "search windows"),
    ):
        capsys.readouterr()
        assert main(m + extra + ["--out", str(tmp_path / "o"), "--passkey-trials", "0"]) == 2, extra
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith("posenc eval:") and words in err[-1], (extra, err)
