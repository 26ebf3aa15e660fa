"""Run files of ``posenc lab``: one schema for writer and reader, versions, safe checkpoints, and one
clear line (never a traceback) for every broken file or bad flag."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from lab_cli import one_line, tiny_lab_flags

from posenc.cli import main
from posenc.measuring.lab.schema import SCHEMA_VERSION, Progress, RunFileError, load_json_file, stamp
from posenc.measuring.lab.store import RunDir, load_checkpoint, save_checkpoint, write_run_file
from posenc.teaching.explorer.lab_results import read_lab_results

SMOKE = ["lab", "--preset", "smoke", "--threads", "1"]
#: The smallest real run: one scheme, two lengths, no extension, a few steps.
TINY = tiny_lab_flags("rope")


# -- the schema ----------------------------------------------------------------------------------
def test_stamp_round_trip_and_versions(tmp_path):
    path = tmp_path / "progress.json"
    write_run_file(path, "progress", {"eval": {}, "extension": {}, "lr_sweep": {}})
    raw = json.loads(path.read_text())
    assert raw["schema_version"] == SCHEMA_VERSION and raw["kind"] == "progress"
    assert load_json_file(path, "progress") == {"eval": {}, "extension": {}, "lr_sweep": {}}
    assert load_json_file(tmp_path / "absent.json", "progress") is None

    path.write_text(json.dumps({"eval": {}, "extension": {}}))  # unstamped: version 1
    with pytest.raises(
        RunFileError,
        match=r"progress.json: was written by an older posenc \(run-file "
        r"version 1; this posenc reads version 2\); delete it",
    ):
        load_json_file(path, "progress")
    path.write_text(json.dumps(dict(stamp("progress", {}), schema_version=SCHEMA_VERSION + 1)))
    with pytest.raises(RunFileError, match="newer posenc .* upgrade posenc"):
        load_json_file(path, "progress")
    path.write_text(json.dumps(stamp("results", {})))
    with pytest.raises(RunFileError, match="is a 'results' file, expected 'progress'"):
        load_json_file(path, "progress")
    path.write_text('{"schema_version": 2, "kind": "progress", "eval": {')  # a truncated write
    with pytest.raises(RunFileError, match="is not valid JSON \\(truncated or corrupt"):
        load_json_file(path, "progress")
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(RunFileError, match="not UTF-8"):
        load_json_file(path, "progress")
    path.write_text("[1, 2]")
    with pytest.raises(RunFileError, match="does not hold a JSON object"):
        load_json_file(path, "progress")
    with pytest.raises(RunFileError, match="unknown field 'evals'"):
        Progress.from_dict({"evals": {}}, path)


# -- checkpoints ---------------------------------------------------------------------------------
class _Payload:
    """Unpickling this object would create a file: what a hostile checkpoint could do."""

    def __init__(self, target: str):
        self.target = target

    def __reduce__(self):
        return (open, (self.target, "w"))


def test_a_crafted_checkpoint_runs_nothing_and_is_refused(tmp_path):
    target = tmp_path / "pwned"
    path = tmp_path / "checkpoints" / "rope.pt"
    path.parent.mkdir()
    torch.save(
        {
            "schema_version": SCHEMA_VERSION,
            "model": {},
            "optimizer": {},
            "step": 1,
            "losses": [],
            "model_config": {},
            "payload": _Payload(str(target)),
        },
        path,
    )
    assert not target.exists()
    with pytest.raises(
        RunFileError, match="rope.pt: is not a plain-data checkpoint and was not loaded \\(nothing in it ran\\)"
    ):
        load_checkpoint(path)
    assert not target.exists()
    # Sanity check of the test itself: the unrestricted loader would have run it.
    torch.load(path, weights_only=False)
    assert target.exists()


def test_a_checkpoint_write_that_fails_leaves_the_old_checkpoint(tmp_path, monkeypatch):
    """A checkpoint is written whole or not at all: a failure before the rename (here the flush to
    disk) leaves the previous checkpoint loadable and no temporary file behind."""
    import posenc.runs.files as run_files

    path = tmp_path / "checkpoints" / "rope.pt"
    state = {"model": {"w": torch.ones(2)}, "optimizer": {}, "step": 1, "losses": [2.0], "model_config": {}}
    save_checkpoint(path, state)
    before = path.read_bytes()

    def failing_fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(run_files.os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="No space left"):
        save_checkpoint(path, {**state, "step": 2, "model": {"w": torch.zeros(2)}})
    monkeypatch.undo()
    assert path.read_bytes() == before and load_checkpoint(path)["step"] == 1
    assert sorted(p.name for p in path.parent.iterdir()) == ["rope.pt"]


def test_checkpoints_hold_plain_data_and_broken_ones_are_named(tmp_path):
    path = tmp_path / "ckpt.pt"
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)  # has per-parameter state
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    save_checkpoint(
        path,
        {
            "model": model.state_dict(),
            "optimizer": opt.state_dict(),
            "step": 3,
            "losses": [1.0, 0.5],
            "model_config": {"d_model": 3},
            "seconds": 0.1,
            "lr": 3e-3,
        },
    )
    back = load_checkpoint(path)  # weights_only=True inside
    assert back["step"] == 3 and torch.equal(back["model"]["weight"], model.weight)
    with pytest.raises(ValueError, match="keys \\['extra'\\]"):
        save_checkpoint(path, {"extra": 1})
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(RunFileError, match="ckpt.pt: is truncated or corrupt .* delete it to retrain"):
        load_checkpoint(path)
    torch.save({"model": {}, "optimizer": {}, "step": 1, "losses": [], "model_config": {}}, path)
    with pytest.raises(RunFileError, match="run-file version 1 checkpoint"):
        load_checkpoint(path)


# -- the command line: one line, exit status 2, before any long work -----------------------------
@pytest.mark.parametrize(
    "flags, fragment",
    [
        (["--lr", "nan"], "lr must be finite, got nan"),
        (["--lr", "inf"], "lr must be finite"),
        (["--steps", "0"], "steps must be >= 1, got 0"),
        (["--retrieval-share", "0.9"], "retrieval_share must be <= 0.5, got 0.9"),
        (["--retrieval-answer-weight", "1e308"], "retrieval_answer_weight must be <= 100.0, got 1e+308"),
        (["--finetune-retrieval-share", "0.9"], "finetune_retrieval_share must be <= 0.5, got 0.9"),
        (["--lr-sweep", "1e-3,-1"], "lr_sweep must be > 0.0, got -1.0"),
        (["--train-len", "16"], "train_len must be >= 22 for passkey retrieval"),
        (["--threads", "0"], "--threads must be >= 1, got 0"),
    ],
)
def test_bad_numbers_give_one_clean_line(flags, fragment, tmp_path, capsys):
    assert main(SMOKE + flags + ["--out", str(tmp_path / "run")]) == 2
    assert fragment in one_line(capsys.readouterr().err)
    assert not (tmp_path / "run" / "config.json").exists()


@pytest.mark.slow
def test_no_traceback_from_the_real_command(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[3] / "src"))
    for flags in (["--steps", "-3"], ["--lr", "nan"], ["--steps", "many"]):
        done = subprocess.run(
            [sys.executable, "-m", "posenc", *SMOKE, *flags, "--out", str(tmp_path / "r")],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.strip().splitlines()[-1].startswith("posenc lab:"), done.stderr


def test_unwritable_output_fails_before_training(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert main(SMOKE + ["--out", str(blocker / "run")]) == 2
    assert "--out" in one_line(capsys.readouterr().err)
    assert main(SMOKE + ["--out", str(blocker)]) == 2
    assert "is a file, not a folder" in one_line(capsys.readouterr().err)
    if os.geteuid() != 0:  # root may write anywhere
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        try:
            assert main(SMOKE + ["--out", str(locked / "run")]) == 2
            assert "cannot write there" in one_line(capsys.readouterr().err)
        finally:
            locked.chmod(0o700)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("lab") / "tiny"
    assert main(TINY + ["--out", str(run)]) == 0
    return run


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, damage, fragment",
    [
        ("progress.json", lambda p: p.write_text(p.read_text()[:40]), "is not valid JSON"),
        ("config.json", lambda p: p.write_text("{"), "is not valid JSON"),
        ("corpus.json", lambda p: p.write_bytes(b"\xff\xff"), "not UTF-8"),
        (
            "config.json",
            lambda p: p.write_text(json.dumps(json.loads(p.read_text()) | {"schema_version": 9})),
            "newer posenc",
        ),
        ("checkpoints/rope.pt", lambda p: p.write_bytes(p.read_bytes()[:100]), "truncated or corrupt"),
        ("checkpoints/rope.pt", lambda p: p.write_bytes(b"not a zip at all"), "truncated or corrupt"),
    ],
)
def test_broken_run_files_give_one_line_naming_the_file(tiny_run, tmp_path, capsys, name, damage, fragment):
    import shutil

    run = tmp_path / "copy"
    shutil.copytree(tiny_run, run)
    damage(run / name)
    assert main(["lab", "--resume", str(run)]) == 2
    line = one_line(capsys.readouterr().err)
    assert str(run / name) in line and fragment in line
    assert "delete it" in line


@pytest.mark.slow
def test_fresh_starts_a_run_over_and_resume_rewrites_nothing(tiny_run, tmp_path, capsys):
    import shutil

    run = tmp_path / "again"
    shutil.copytree(tiny_run, run)
    (run / "progress.json").write_text("{")
    (run / "notes.txt").write_text("mine")  # not a lab file: kept
    assert main(TINY + ["--out", str(run), "--fresh"]) == 0
    assert (run / "notes.txt").read_text() == "mine"
    assert json.loads((run / "results.json").read_text())["complete"] is True
    before = (run / "results.json").read_text()
    assert main(["lab", "--resume", str(run)]) == 0  # nothing left to do
    assert json.loads((run / "results.json").read_text()) == json.loads(before)
    err = capsys.readouterr().err
    assert f"posenc explore --lab-run {run}" in err and "results.md" in err
    assert "machinery check: numbers carry no meaning" in err
    assert "scheme 1 of 1" in err


# -- the explorer reads the same schema ------------------------------------------------------------
@pytest.mark.slow
def test_explorer_reads_what_the_lab_writes(tiny_run, tmp_path):
    d = read_lab_results(tiny_run)
    assert d["available"] and d["notes"] == [] and d["machinery_check"] is True
    assert d["stamp"] == "machinery check: numbers carry no meaning"
    cell = d["schemes"]["rope"]["eval"]["64"]["retrieval"]["far"]
    assert cell["trials"] == 2 and 0 <= cell["accuracy"] <= 1 and len(cell["accuracy_ci"]) == 2
    assert {v["verdict"] for v in d["verdicts"]} <= {"seen", "within noise", "not seen", "not measured"}
    newer = tmp_path / "newer"
    newer.mkdir()
    data = json.loads((tiny_run / "results.json").read_text())
    (newer / "results.json").write_text(json.dumps(dict(data, schema_version=SCHEMA_VERSION + 1)))
    d = read_lab_results(newer)
    assert d["available"] is False and "newer posenc" in d["notes"][0] and "upgrade" in d["notes"][0]
    older = tmp_path / "older"
    older.mkdir()
    old = {k: v for k, v in data.items() if k not in ("schema_version", "kind")}
    (older / "results.json").write_text(json.dumps(old))
    d = read_lab_results(older)
    assert d["available"] is True and "older posenc (run-file version 1" in d["notes"][0]
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "results.json").write_text('{"schema_version": 2, "kind": "results", "schemes": {')
    d = read_lab_results(broken)
    assert d["available"] is False and "not valid JSON" in d["notes"][0]


def test_run_dir_progress_defaults(tmp_path):
    assert RunDir(tmp_path).progress() == Progress()


@pytest.mark.slow
def test_lr_sweep_trains_each_scheme_at_its_best_rate(tmp_path):
    run = tmp_path / "sweep"
    flags = list(TINY)
    flags[flags.index("--schemes") + 1] = "rope,alibi"
    assert main(flags + ["--lr-sweep", "1e-4,3e-3", "--sweep-steps", "3", "--out", str(run)]) == 0
    res = json.loads((run / "results.json").read_text())
    progress = json.loads((run / "progress.json").read_text())["lr_sweep"]
    for scheme in ("rope", "alibi"):
        scores = progress[scheme]
        assert set(scores) == {"0.0001", "0.003"}
        best = min(scores, key=scores.get)
        assert res["lr_sweep"][scheme]["chosen"] == float(best)
        assert res["schemes"][scheme]["train"]["lr"] == float(best)
        assert torch.load(run / "checkpoints" / f"{scheme}.pt", weights_only=True)["lr"] == float(best)
    table = (run / "results.md").read_text()
    assert "Learning rate chosen per scheme" in table and "| rope | " in table
    assert "--lr-sweep 0.0001,0.003" in table  # the command reproduces the sweep


# -- divergence: a loss that is not finite stops the run by name, never a table of nan ---------------
def poison(model: torch.nn.Module) -> None:
    with torch.no_grad():
        next(model.parameters()).fill_(float("nan"))


def test_a_diverged_scheme_stops_the_run_with_one_line(tmp_path, capsys, monkeypatch):
    import posenc.measuring.lab.cli as lab_cli

    real = lab_cli.build_model

    def build(cfg, scheme):
        model = real(cfg, scheme)
        if scheme == "alibi":
            poison(model)
        return model

    monkeypatch.setattr(lab_cli, "build_model", build)
    flags = list(TINY)
    flags[flags.index("--schemes") + 1] = "rope,alibi"
    run = tmp_path / "run"
    assert main(flags + ["--out", str(run)]) == 2
    err = one_line(capsys.readouterr().err)
    assert "training alibi diverged at step 1 of 6 (loss nan)" in err and "--fresh" in err
    assert not (run / "checkpoints" / "alibi.pt").exists()  # no checkpoint of the broken weights
    rope = torch.load(run / "checkpoints" / "rope.pt", weights_only=True)
    assert rope["step"] == 6 and all(torch.isfinite(t).all() for t in rope["model"].values())
    assert not (run / "results.json").exists() or "nan" not in (run / "results.json").read_text()


def test_a_diverged_sweep_rate_is_recorded_and_never_chosen(tmp_path, monkeypatch):
    import posenc.measuring.lab.cli as lab_cli

    real = lab_cli.make_optimizer

    def make(model, lr, weight_decay):
        if lr == 3e-3:
            poison(model)
        return real(model, lr, weight_decay)

    monkeypatch.setattr(lab_cli, "make_optimizer", make)
    run = tmp_path / "sweep"
    assert main(TINY + ["--lr-sweep", "1e-4,3e-3", "--sweep-steps", "3", "--out", str(run)]) == 0
    scores = json.loads((run / "progress.json").read_text())["lr_sweep"]["rope"]
    assert scores["0.003"] is None and isinstance(scores["0.0001"], float) and 0 < scores["0.0001"] < 9
    res = json.loads((run / "results.json").read_text())
    assert res["lr_sweep"]["rope"]["chosen"] == 1e-4
    assert "diverged" in (run / "results.md").read_text()


def test_run_folders_that_stored_dynamic_ntk_resume_under_its_rope_type_name(tmp_path):
    """Before the method took its rope type's name, config.json and progress.json said "dynamic_ntk"."""
    from posenc.measuring.lab.config import LabConfig, preset_config

    stored = preset_config("smoke", extension_methods=["linear", "dynamic"]).to_dict()
    stored["extension_methods"] = ["linear", "dynamic_ntk"]
    assert LabConfig.from_dict(stored).extension_methods == ["linear", "dynamic"]
    stored["extension_methods"] = ["linear", "dynamic_sideways"]  # anything else is still refused
    with pytest.raises(ValueError, match="extension_methods must be one of"):
        LabConfig.from_dict(stored)

    def cell(bpb):  # a finished evaluation as the lab stores it (every cell is checked on reading)
        fields = {f"bpb{part}": bpb for part in ("", "_last_quarter", "_final32")}
        fields.update({f"{k}_ci": [bpb, bpb] for k in list(fields)})
        return {**fields, "n_windows": 2, "loss_by_position": [bpb]}

    old = Progress.from_dict({"extension": {"dynamic_ntk": {"64": cell(3.0)}}}, tmp_path / "progress.json")
    assert old.extension == {"dynamic": {"64": cell(3.0)}}
    both = Progress.from_dict(
        {"extension": {"dynamic_ntk": {"64": cell(3.0)}, "dynamic": {"64": cell(2.0)}}}, tmp_path / "p.json"
    )
    assert both.extension == {"dynamic": {"64": cell(2.0)}}  # the newer record wins


def test_results_drop_keys_that_are_not_lengths_with_a_note_each():
    """A scheme's and an extension method's evaluations are read the same way: entries by length, a key
    that is not a length dropped with a note naming where it was."""
    from posenc.runs.lab_schema import Results

    entry = {"bpb": 1.5, "bpb_ci": [1.4, 1.6]}
    data = {
        "config": {"steps": 1},
        "train_len": 64,
        "eval_lengths": [64, 128],
        "schemes": {"rope": {"train": {}, "eval": {"64": entry, "x": entry}, "loss_by_position": {}}},
        "extension": {"yarn": {"128": entry, "y": entry}},
    }
    results, notes = Results.parse(data)
    assert list(results.schemes["rope"].eval) == ["64"] and results.schemes["rope"].eval["64"].bpb == 1.5
    assert list(results.extension["yarn"]) == ["128"] and results.extension["yarn"]["128"].bpb == 1.5
    assert "scheme 'rope': entry 'x' is not a length with results" in notes
    assert "extension 'yarn': entry 'y' is not a length" in notes


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs and /dev/zero as on POSIX")
def test_a_run_file_that_is_not_a_regular_file_is_refused_without_reading_it(tmp_path):
    """A link to /dev/zero (which never ends) and a FIFO (which would block) in place of a run file are
    refused in one line before any byte is read; before, /dev/zero was read to the size cap and the
    FIFO blocked the command."""
    from posenc.measuring.lab.schema import load_json_file

    zero, fifo = tmp_path / "results.json", tmp_path / "progress.json"
    zero.symlink_to("/dev/zero")
    os.mkfifo(fifo)
    for path, kind in ((zero, "results"), (fifo, "progress")):
        with pytest.raises(RunFileError, match=f"{path.name}: is not a regular file; delete it"):
            load_json_file(path, kind)
