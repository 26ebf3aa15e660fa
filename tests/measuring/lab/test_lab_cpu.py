"""The lab records its own CPU time: per scheme (training, evaluation) and for the whole run, summed
over every session that resumed it; the report, the summary and its table show it."""

from __future__ import annotations

import pytest

from posenc.measuring.lab import cli as lab_cli
from posenc.measuring.lab.config import preset_config
from posenc.measuring.lab.report import build_results, cpu_by_scheme, markdown, write_report
from posenc.measuring.lab.schema import Progress, RunFileError
from posenc.measuring.lab.store import RunDir
from posenc.measuring.lab.summary import summarize, table_time


def test_the_clock_adds_this_session_to_the_earlier_ones(monkeypatch):
    now = {"t": 100.0}
    monkeypatch.setattr(lab_cli.time, "process_time", lambda: now["t"])
    clock = lab_cli.CpuClock(12.5)  # what earlier sessions of the run recorded
    now["t"] = 103.0
    assert clock.total() == pytest.approx(15.5)


def test_timed_records_the_cpu_seconds_of_the_call(monkeypatch):
    ticks = iter([7.0, 9.25])
    monkeypatch.setattr(lab_cli.time, "process_time", lambda: next(ticks))
    assert lab_cli._timed(lambda x: {"bpb": x}, 3.0) == {"bpb": 3.0, "cpu_seconds": 2.25}


def test_the_run_total_survives_a_resume(tmp_path):
    run = RunDir(tmp_path)
    record = run.progress()
    assert record.cpu_seconds == 0.0  # a new run, or one written before the lab recorded it
    record.cpu_seconds = 42.0
    run.save_progress(record)
    assert run.progress().cpu_seconds == 42.0
    for bad in (-1.0, "12", None, float("nan")):
        with pytest.raises(RunFileError, match="cpu_seconds"):
            Progress.from_dict({"cpu_seconds": bad}, tmp_path / "progress.json")


def _results(seed: int = 0) -> dict:
    cfg = preset_config("quick", schemes=["rope", "alibi"], eval_multipliers=[1, 2], seed=seed).to_dict()
    progress = {
        "eval": {
            "rope": {"64": {"bpb": 3.0, "cpu_seconds": 4.0}, "128": {"bpb": 3.4, "cpu_seconds": 6.0}},
            "alibi": {"64": {"bpb": 3.1, "cpu_seconds": 5.0}, "128": {"bpb": 3.2}},
        },
        "extension": {"linear": {"128": {"bpb": 3.3, "cpu_seconds": 2.0, "finetuned": {"bpb": 3.1, "cpu_seconds": 9}}}},
        "lr_sweep": {},
        "cpu_seconds": 321.0,
    }
    info = {
        "rope": {"train_seconds": 110.0, "train_cpu_seconds": 100.0, "steps": 300},
        "alibi": {"train_seconds": 90.0, "train_cpu_seconds": 80.0, "steps": 300},
    }
    return build_results(cfg, {}, info, progress, True)


def test_the_report_shows_cpu_per_scheme_and_for_the_run():
    res = _results()
    assert res["cpu_seconds"] == 321.0
    assert cpu_by_scheme(res) == {
        "rope": {"train": 100.0, "eval": 10.0},
        "alibi": {"train": 80.0, "eval": 5.0},  # one length did not record it: the sum of those that did
        "rope extension": {"train": None, "eval": 11.0},
    }
    md = markdown(res)
    assert "## CPU time" in md and "| rope | 100.0 | 10.0 | 110.0 |" in md
    assert "| rope extension | — | 11.0 | — |" in md and "the whole run so far: 321.0 s" in md
    res["cpu_seconds"] = None  # a run written before the lab recorded it: no CPU section
    assert "## CPU time" not in markdown(res)


def test_the_summary_takes_each_seeds_own_record_unless_measured_outside(tmp_path):
    for seed in (0, 1):
        folder = tmp_path / f"seed-{seed}"
        folder.mkdir()
        write_report(_results(seed), folder, plots=False)
    s = summarize(tmp_path, "t", "posenc lab", cpu_seconds={1: 400.0}, cpu_source="/usr/bin/time -v")
    assert s["cpu_seconds"] == {"0": 321.0, "1": 400.0}
    assert s["cpu_source"].startswith("/usr/bin/time -v; seed 0: recorded by the run itself")
    assert s["cpu_by_scheme"]["0"]["rope"] == {"train": 100.0, "eval": 10.0}
    assert s["cpu_recorded"] == {"0": 321.0, "1": 321.0}  # beside the outside measurement
    table = table_time(s).splitlines()
    assert table[0].endswith("| CPU time of the whole run | CPU time the run recorded |")
    assert table[2] == "| 0 | 110 / 100 | 90.0 / 80.0 | 200 / 180 | 321 | 321 |"
    assert table[3] == "| 1 | 110 / 100 | 90.0 / 80.0 | 200 / 180 | 400 | 321 |"
    assert "wall / CPU" in table[-1]
    alone = summarize(tmp_path, "t", "posenc lab")  # nothing measured outside: the runs' own record
    assert alone["cpu_seconds"] == {"0": 321.0, "1": 321.0} and alone["cpu_recorded"] == {}


def test_a_frozen_clock_adds_nothing(monkeypatch):
    now = {"t": 1.0}
    monkeypatch.setattr(lab_cli.time, "process_time", lambda: now["t"])
    clock = lab_cli.CpuClock(8.0, frozen=True)  # a resume that finds the run finished
    now["t"] = 50.0
    assert clock.total() == 8.0
