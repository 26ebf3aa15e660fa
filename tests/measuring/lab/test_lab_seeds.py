"""Training seeds as an axis of ``posenc lab``: one run folder per seed, resumable, in parallel
processes, and a summary whose verdicts hold across seeds."""

from __future__ import annotations

import json

import pytest
from lab_cli import one_line, tiny_lab_flags

from posenc.cli import main
from posenc.measuring.lab.summary import load_summaries, summarize

TINY = tiny_lab_flags("rope,alibi")


@pytest.mark.parametrize(
    "flags, fragment",
    [
        (["--seeds", "0,1", "--seed", "2", "--out", "x"], "--seeds does not take --seed"),
        (["--seeds", "0,1", "--resume", "x"], "--seeds does not take --resume"),
        (["--seeds", "0,1"], "--seeds needs --out"),
        (["--seeds", "0,0", "--out", "x"], "distinct seeds"),
        (["--seeds", "0,1", "--jobs", "0", "--out", "x"], "--jobs must be >= 1"),
    ],
)
def test_seed_flags_that_do_not_go_together_give_one_line(flags, fragment, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(TINY + flags) == 2
    assert fragment in one_line(capsys.readouterr().err)
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_every_seed_is_a_run_and_the_summary_holds_them_all(tmp_path, capsys):
    root = tmp_path / "seeds"
    assert main(TINY + ["--seeds", "0,1", "--jobs", "2", "--out", str(root)]) == 0
    single = tmp_path / "single"
    assert main(TINY + ["--seed", "1", "--out", str(single)]) == 0
    one = json.loads((root / "seed-1" / "results.json").read_text())
    alone = json.loads((single / "results.json").read_text())
    for res in (one, alone):  # the time it took is the only difference allowed
        assert res["cpu_seconds"] > 0
        for s in res["schemes"].values():
            s["train"].pop("train_seconds")
            assert s["train"].pop("train_cpu_seconds") > 0
            for e in s["eval"].values():
                assert e.pop("cpu_seconds") >= 0
    assert one["schemes"] == alone["schemes"]  # a seed in the seeds folder is exactly that seed's run
    summary = json.loads((root / "summary.json").read_text())
    assert summary["kind"] == "summary" and summary["seeds"] == [0, 1]
    assert summary["numbers"]["0"] != summary["numbers"]["1"]  # two different training runs
    assert set(summary["cpu_seconds"]) == {"0", "1"} and "recorded by the run itself" in summary["cpu_source"]
    assert set(summary["cpu_by_scheme"]["1"]) == {"rope", "alibi"}
    md = (root / "summary.md").read_text()
    assert "| 0 |" in md and "| 1 |" in md  # a row of every seed
    assert "No verdicts: a machinery check." in md  # so tiny a run compares nothing
    before = (root / "seed-0" / "results.json").read_text()
    assert main(TINY + ["--seeds", "0,1", "--out", str(root)]) == 0  # again: both resume, nothing redone
    assert (root / "seed-0" / "results.json").read_text() == before  # its CPU time included
    assert "--resume" in capsys.readouterr().err


def test_committed_summaries_read_back():
    for name, summary in load_summaries().items():
        assert summary["name"] == name and summary["seeds"] and summary["numbers"]
        assert set(summary["numbers"]) == {str(s) for s in summary["seeds"]}


def test_a_single_run_folder_summarizes_as_one_seed(tmp_path):
    from posenc.measuring.lab.config import preset_config
    from posenc.measuring.lab.report import build_results, write_report

    cfg = preset_config("quick", schemes=["rope"], eval_multipliers=[1, 2], seed=3).to_dict()
    progress = {"eval": {"rope": {"64": {"bpb": 3.0}, "128": {"bpb": 3.5}}}, "extension": {}, "lr_sweep": {}}
    write_report(build_results(cfg, {}, {}, progress, True), tmp_path, plots=False)
    s = summarize(tmp_path, "t", "posenc lab")
    assert s["seeds"] == [3] and s["numbers"]["3"]["rope"]["128"]["bpb"] == 3.5
