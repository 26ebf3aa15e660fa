"""``posenc.runs``: the run-file machinery the measuring apps share (stamp, atomic writes, capped reads,
the folder lock, a checkpoint's content digest), and the import shape it exists for."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import posenc
from posenc import runs

SRC = Path(posenc.__file__).resolve().parent


def test_an_interrupted_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "progress.json"
    runs.write_json(path, {"cells": 1})

    def fail(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(KeyboardInterrupt):
        runs.write_json(path, {"cells": 2})
    assert runs.read_json(path, "advice") == {"cells": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["progress.json"]


def test_reads_are_capped_and_say_what_is_wrong(tmp_path):
    path = tmp_path / "f.json"
    path.write_text('{"a": [1, 2]}')
    assert runs.read_json(path, "x") == {"a": [1, 2]}
    for content, words in (
        (b"{" * 10, "is not valid JSON"),
        (b"\xff\xfe", "is not UTF-8 text"),
        (b"[" * 100_000 + b"]" * 100_000, "nests its JSON too deeply"),
        (b"[" + b"0," * 100 + b"0]", "is larger than 64 bytes"),
    ):
        path.write_bytes(content)
        with pytest.raises(runs.ReadError, match=words) as err:
            runs.read_json(path, "add --fresh", max_bytes=64 if b"0," in content else runs.MAX_RUN_FILE_BYTES)
        assert str(err.value).endswith("; add --fresh") and str(path) in str(err.value)
    with pytest.raises(runs.ReadError, match="is not a regular file"):
        runs.read_json(tmp_path, "x")


def test_stamp_puts_schema_and_version_first():
    assert list(runs.stamp("posenc.eval/results", 2, {"a": 1})) == ["schema", "schema_version", "a"]


def test_the_digest_follows_content_not_path_or_time(tmp_path):
    a = tmp_path / "a"
    a.mkdir()
    (a / "config.json").write_text("{}")
    (a / "model.safetensors").write_bytes(b"\0" * 1000)
    (a / "README.md").write_text("docs are not the model")
    (a / ".cache").write_text("hidden")
    first = runs.content_digest(a)
    assert runs.checkpoint_files(a) == ["config.json", "model.safetensors"]
    os.utime(a / "model.safetensors", (1, 1))
    b = tmp_path / "b"
    a.rename(b)
    assert runs.content_digest(b) == first  # moved, touched: the same model
    (b / "README.md").write_text("edited")
    assert runs.content_digest(b) == first
    (b / "model.safetensors").write_bytes(b"\0" * 999 + b"\1")
    assert runs.content_digest(b) != first  # one byte of the weights
    (b / "model.safetensors").write_bytes(b"\0" * 1000)
    (b / "config.json").rename(b / "config2.json")
    assert runs.content_digest(b) != first  # a renamed file


def test_the_lock_excludes_a_second_holder_until_released(tmp_path):
    with runs.RunLock(tmp_path, ".lock"):
        with pytest.raises(runs.FolderBusy, match=f"process {os.getpid()}"):
            runs.RunLock(tmp_path, ".lock").acquire()
        code = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from posenc.runs import RunLock, FolderBusy\n"
                "try:\n    RunLock(sys.argv[1], '.lock').acquire()\nexcept FolderBusy:\n    sys.exit(3)",
                str(tmp_path),
            ],
            timeout=60,
        ).returncode
        assert code == 3  # another process is refused too
    runs.RunLock(tmp_path, ".lock").acquire().release()


def _imports(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            yield node.level, node.module or ""
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield 0, alias.name


def test_runs_needs_only_the_standard_library_and_eval_search_does_not_import_eval_cli():
    for path in (SRC / "runs").glob("*.py"):
        # but the reader of a lab run's trained model, which builds it with torch and posenc's model
        model_reader = path.name == "lab_run.py"
        for level, module in _imports(path):
            top = module.split(".")[0]
            below = model_reader and (top == "torch" or (level == 2 and module in ("model", "_checks")))
            assert level == 1 or top in sys.stdlib_module_names or top == "__future__" or below, (path.name, module)
    search = [module for level, module in _imports(SRC / "measuring" / "eval" / "search.py") if level == 1]
    assert "cli" not in search and "files" in search  # the cycle eval.cli <-> eval.search is gone


def test_a_run_folders_model_is_read_from_its_config_as_it_stands_or_as_the_check_resolves_it(tmp_path):
    """``read_run_model`` without a check (the lesson's way) builds the model from the fields config.json
    holds and names the file and any model field it lacks; with a check (the lab export's way) it builds
    from what the check returns, a missing field's default included. The caller's RNG is left as it was."""
    import torch

    from posenc.model import TinyLM
    from posenc.runs.lab_run import RunModelError, lab_model_config, read_run_model, save_checkpoint, write_run_file

    fields = {
        "d_model": 16,
        "n_layers": 1,
        "n_heads": 2,
        "mlp_ratio": 2,
        "rope_base": 500.0,
        "train_len": 8,
        "steps": 3,
    }
    torch.manual_seed(1)
    trained = TinyLM(lab_model_config(fields, "rope"))
    state = {
        "model": trained.state_dict(),
        "optimizer": {},
        "step": 2,
        "losses": [],
        "model_config": trained.config.to_dict(),
    }
    save_checkpoint(tmp_path / "checkpoints" / "rope.pt", state)
    partial = {k: v for k, v in fields.items() if k != "rope_base"}
    write_run_file(tmp_path / "config.json", "config", partial)

    with pytest.raises(RunModelError, match=r"config\.json: config has no field rope_base$"):
        read_run_model(tmp_path, "rope")
    before = torch.get_rng_state()
    found = read_run_model(tmp_path, "rope", check_config=lambda stored: {"rope_base": 500.0, **stored})
    assert torch.equal(torch.get_rng_state(), before)
    assert (found.train_len, found.step, found.steps) == (8, 2, 3) and not found.model.training
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        assert torch.equal(found.model(ids), trained.eval()(ids))
    write_run_file(tmp_path / "config.json", "config", fields)
    assert read_run_model(tmp_path, "rope").model.config == trained.config
