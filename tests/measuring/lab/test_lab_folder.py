"""The run folder is the lab's and only the lab's: what counts as a run, what ``--fresh`` may delete,
links that lead out of the folder, one process per folder, and run files read with limits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from lab_cli import one_line

from posenc.cli import main
from posenc.measuring.lab.config import preset_config
from posenc.measuring.lab.schema import MAX_DEPTH, RunFileError, load_json_file
from posenc.measuring.lab.store import LOCK_NAME, FolderBusy, RunLock, is_lab_run, save_checkpoint, write_run_file
from posenc.teaching.explorer.lab_results import read_lab_results

SMOKE = ["lab", "--preset", "smoke", "--threads", "1", "--no-plots"]
HF_CONFIG = {"model_type": "llama", "hidden_size": 64, "rope_theta": 10000.0}


def lab_run(folder):
    """A folder holding the files a lab run writes (stamped config, a report, a checkpoint)."""
    folder.mkdir(parents=True, exist_ok=True)
    write_run_file(folder / "config.json", "config", preset_config("smoke").to_dict())
    (folder / "results.md").write_text("# posenc lab results\n")
    save_checkpoint(folder / "checkpoints" / "rope.pt", {"step": 1, "model": {}, "optimizer": {}, "losses": []})
    return folder


def test_a_folder_is_a_run_only_with_the_lab_stamp(tmp_path):
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps(HF_CONFIG))
    assert not is_lab_run(hf) and not is_lab_run(tmp_path / "absent")
    assert is_lab_run(lab_run(tmp_path / "run"))


def test_fresh_never_deletes_a_model_folder_it_did_not_write(tmp_path, capsys):
    """Regression: any config.json made a folder "a run", and --fresh deleted a Hugging Face
    model's config.json and the user's results.md."""
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps(HF_CONFIG))
    (hf / "results.md").write_text("my notes")
    assert main(SMOKE + ["--out", str(hf), "--fresh"]) == 2
    line = one_line(capsys.readouterr().err)
    assert "no config.json written by posenc lab" in line and "nothing there is touched" in line
    assert json.loads((hf / "config.json").read_text()) == HF_CONFIG
    assert (hf / "results.md").read_text() == "my notes"


def test_a_report_without_a_run_is_not_overwritten(tmp_path, capsys):
    """Regression: without config.json, an existing results.md was overwritten even without --fresh."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "results.md").write_text("my notes")
    assert main(SMOKE + ["--out", str(folder)]) == 2
    assert "results.md" in one_line(capsys.readouterr().err)
    assert (folder / "results.md").read_text() == "my notes"


def test_fresh_deletes_only_the_lab_files_and_no_folder(tmp_path):
    from posenc.measuring.lab.folder import _clear_run

    run = lab_run(tmp_path / "run")
    (run / "notes.txt").write_text("mine")
    (run / "checkpoints" / "mine.pt").write_bytes(b"user file")
    _clear_run(run)
    assert sorted(p.name for p in run.iterdir()) == ["checkpoints", "notes.txt"]
    assert [p.name for p in (run / "checkpoints").iterdir()] == ["mine.pt"]


def test_fresh_never_follows_a_link_out_of_the_folder(tmp_path, capsys):
    """Regression: --fresh followed a symlinked checkpoints/ outside the run and deleted there."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "rope.pt").write_bytes(b"someone else's")
    run = lab_run(tmp_path / "run")
    (run / "checkpoints" / "rope.pt").unlink()
    (run / "checkpoints").rmdir()
    (run / "checkpoints").symlink_to(outside, target_is_directory=True)
    assert main(SMOKE + ["--out", str(run), "--fresh"]) == 2
    assert "is a symbolic link" in one_line(capsys.readouterr().err)
    assert (outside / "rope.pt").read_bytes() == b"someone else's"
    assert (run / "config.json").exists()  # refused before deleting anything
    assert main(["lab", "--resume", str(run)]) == 2
    assert "is a symbolic link" in one_line(capsys.readouterr().err)


def test_a_second_process_on_the_same_folder_is_refused(tmp_path, capsys):
    """Regression: two runs on one --out both proceeded and mixed their numbers."""
    run = lab_run(tmp_path / "run")
    with RunLock(run):
        with pytest.raises(FolderBusy, match=f"process {os.getpid()}"):
            RunLock(run).acquire()
        assert main(SMOKE + ["--out", str(run), "--fresh"]) == 2
        assert "in use by process" in one_line(capsys.readouterr().err)
        assert (run / "results.md").exists()  # nothing deleted while the other holds it
    RunLock(run).acquire().release()  # free again


def test_a_crash_releases_the_lock(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    code = (
        "import sys, time; sys.path.insert(0, sys.argv[2]); from posenc.measuring.lab.store import RunLock; "
        "lock = RunLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(60)"
    )
    src = os.path.join(os.path.dirname(__file__), "..", "..", "..", "src")
    child = subprocess.Popen([sys.executable, "-c", code, str(run), src], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        with pytest.raises(FolderBusy):
            RunLock(run).acquire()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    for _ in range(50):  # the kernel drops the lock with the process
        try:
            RunLock(run).acquire().release()
            break
        except FolderBusy:
            time.sleep(0.1)
    else:
        pytest.fail("the lock outlived the killed process")
    assert (run / LOCK_NAME).exists()


def nested(depth: int) -> str:
    return '{"schema_version": 2, "kind": "progress", "eval": ' + "[" * depth + "]" * depth + "}"


def test_deeply_nested_run_files_give_one_line(tmp_path, capsys):
    """Regression: a nested run file of ~100 kB raised RecursionError in `lab --resume` and made
    `/api/lab` answer HTTP 500."""
    path = tmp_path / "progress.json"
    path.write_text(nested(50_000))
    with pytest.raises(RunFileError, match=f"deeper than {MAX_DEPTH} levels"):
        load_json_file(path, "progress")
    path.write_text(nested(MAX_DEPTH + 5))
    with pytest.raises(RunFileError, match="deeper than"):
        load_json_file(path, "progress")
    run = tmp_path / "run"
    run.mkdir()
    write_run_file(run / "config.json", "config", preset_config("smoke").to_dict())
    (run / "progress.json").write_text(nested(50_000))
    assert main(["lab", "--resume", str(run), "--threads", "1"]) == 2
    line = one_line(capsys.readouterr().err)
    assert str(run / "progress.json") in line and "deeper than" in line
    view = tmp_path / "view"
    view.mkdir()
    (view / "results.json").write_text(nested(50_000).replace('"progress"', '"results"'))
    d = read_lab_results(view)
    assert d["available"] is False and "deeper than" in d["notes"][0]


def test_oversized_run_files_are_not_read(tmp_path):
    path = tmp_path / "results.json"
    path.write_text('{"schema_version": 2, "kind": "results", "pad": "' + "x" * 3000 + '"}')
    with pytest.raises(RunFileError, match="larger than"):
        load_json_file(path, "results", max_bytes=2**20 // 1024)
