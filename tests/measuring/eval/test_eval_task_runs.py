"""``posenc eval --tasks`` end to end on a tiny Llama with a BPE tokenizer: every family runs,
the folder resumes, stored cells are checked, chat templates frame the prompts; and greedy decoding
with the key-value cache equals decoding without it."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

import task_support  # noqa: E402

from posenc.cli import main  # noqa: E402
from posenc.measuring.eval import taskrun  # noqa: E402
from posenc.measuring.eval.tasks import TASKS  # noqa: E402


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bpe")
    text = task_support.sample_text()
    (tmp / "text.txt").write_text(text)
    return {
        "chat": task_support.bpe_llama(tmp / "chat", text, chat=True, trained=192),
        "plain": task_support.bpe_llama(tmp / "plain", text, chat=False, trained=192),
        "text": tmp / "text.txt",
    }


def _argv(model, text, out, *extra):
    return ["eval", str(model), "--text", str(text), "--scalings", "none,yarn:2", "--lengths", "192,384",
            "--windows", "2", "--passkey-trials", "1", "--task-trials", "1", "--depths", "0,1",
            "--no-plots", "--out", str(out), *extra]  # fmt: skip


@pytest.mark.slow  # every family under two scalings at two lengths, twice: about 40 s of CPU
def test_every_family_runs_resumes_and_records_its_trials(bpe, tmp_path, monkeypatch):
    out = tmp_path / "run"
    assert main(_argv(bpe["plain"], bpe["text"], out, "--tasks", "ruler")) == 0
    res = json.loads((out / "results.json").read_text())
    assert set(res["tasks"]) == set(TASKS)  # every family, at the lengths it fits
    for by_label in res["tasks"].values():
        assert set(by_label) == {"none", "yarn:2"}
        entry = by_label["none"]["384"]
        records = [r for d in entry["depths"].values() for r in d["records"]] if "depths" in entry else entry["records"]
        assert len(records) == 2 == entry["trials"]
        for r in records:
            assert isinstance(r["prediction"], str) and r["answers"] and r["prompt_tokens"] <= 384
            assert r["correct"] == float(all(a.lower() in r["prediction"].lower() for a in r["answers"]))
    summary = res["task_summary"]
    assert "passkey" in summary["pooled"] and set(summary["scalings"]) == {"none", "yarn:2"}
    assert summary["scalings"]["yarn:2"]["retention"]["length"] == 192
    for name in TASKS:
        assert name in summary["pooled"] or f"{name}@192" in res["skipped"]
    # the same command again measures nothing: every cell comes from progress.json
    monkeypatch.setattr(taskrun, "measure_cell", lambda *a, **k: pytest.fail("a finished cell was measured again"))
    assert main(_argv(bpe["plain"], bpe["text"], out, "--tasks", "ruler")) == 0
    assert json.loads((out / "results.json").read_text())["tasks"] == res["tasks"]


def test_a_damaged_task_cell_is_refused_with_its_key(bpe, tmp_path, capsys):
    out = tmp_path / "run"
    argv = _argv(bpe["plain"], bpe["text"], out, "--tasks", "vt", "--scalings", "none")
    assert main(argv) == 0
    progress = json.loads((out / "progress.json").read_text())
    key = "task:vt|none|384"
    for bad in ([2.0, 0.0], ["1", 0.0], [1.0]):
        progress["cells"][key]["correct"] = bad
        (out / "progress.json").write_text(json.dumps(progress))
        assert main(argv) == 2
        assert key in capsys.readouterr().err


def test_chat_templates_frame_the_prompts_and_a_checkpoint_without_one_is_refused(bpe, tmp_path, capsys):
    out = tmp_path / "chat"
    assert main(_argv(bpe["chat"], bpe["text"], out, "--tasks", "niah_single_1", "--chat")) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["settings"]["chat"] is True and "niah_single_1" in res["tasks"]
    assert main(_argv(bpe["plain"], bpe["text"], tmp_path / "no", "--tasks", "niah_single_1", "--chat")) == 2
    assert "no chat template" in capsys.readouterr().err


@pytest.mark.parametrize("flags,message", [
    (["--tasks", "nope"], "unknown task 'nope'"),
    (["--task-trials", "-1"], "--task-trials must be an integer"),
    (["--threshold", "2"], "--threshold must be a number from 0 to 1"),
])  # fmt: skip
def test_bad_task_flags_are_one_line(bpe, tmp_path, capsys, flags, message):
    assert main(_argv(bpe["plain"], bpe["text"], tmp_path / "o", *flags)) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and not (tmp_path / "o").exists()


def test_greedy_with_the_cache_equals_greedy_without_it():
    from posenc.testing import tiny_model_of_type

    model = tiny_model_of_type("llama", vocab_size=64, max_position_embeddings=64)
    rows = np.random.default_rng(0).integers(0, 64, size=(3, 20))
    got = taskrun.greedy(model, rows, 6, torch.device("cpu"))
    x = torch.from_numpy(rows)
    for _ in range(6):  # the whole sequence read again for every token
        with torch.no_grad():
            logits = model(input_ids=x, use_cache=False).logits[:, -1]
        x = torch.cat([x, logits.argmax(-1)[:, None]], dim=1)
    assert got.tolist() == x[:, 20:].tolist()


def test_check_cell_accepts_the_keys_eval_writes_and_refuses_others():
    settings = {
        "tasks": ["niah_single_1", "vt"],
        "scalings": [{"label": "none"}],
        "lengths": [64],
        "depths": [0.0, 1.0],
    }
    settings["task_trials"] = 1

    def cell(n, **over):
        return {
            "correct": [1.0] * n,
            "recall": [1.0] * n,
            "trials": [{"prediction": "x", "answers": ["x"]}] * n,
            **over,
        }

    assert taskrun.check_cell("task:niah_single_1|none|64|0", cell(1), settings) is None
    assert taskrun.check_cell("task:vt|none|64", cell(2), settings) is None  # trials x depths
    assert "not a task cell" in taskrun.check_cell("task:vt|none|64|0", cell(2), settings)
    assert "depth" in taskrun.check_cell("task:niah_single_1|none|64|0.5", cell(1), settings)
    assert "not a task cell" in taskrun.check_cell("task:cwe|none|64", cell(2), settings)
    assert "recall" in taskrun.check_cell("task:vt|none|64", cell(2, recall=[1.5, 0.0]), settings)
    assert "trials" in taskrun.check_cell("task:vt|none|64", cell(2, trials=[{"prediction": 3}] * 2), settings)
