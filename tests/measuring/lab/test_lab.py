"""Tests of ``posenc lab``: corpus split, metrics with known answers, training/evaluation
invariants, a smoke run end to end with an injected interruption and resume, and torchrun (DDP on
CPU) against one process."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from posenc.cli import main
from posenc.factory import SCHEMES
from posenc.measuring.corpus import find_files, load_corpus, split_paths, stdlib_root
from posenc.measuring.lab import cli as lab_cli
from posenc.measuring.lab import train as lab_train
from posenc.measuring.lab.config import preset_config
from posenc.measuring.lab.evaluate import per_position_nats, window_ends
from posenc.measuring.lab.extend import dynamic_effective_scaling, extended_model, scaling_for
from posenc.measuring.lab.metrics import bootstrap_ci, summarize_losses
from posenc.measuring.lab.train import batch_offsets, build_model, lr_at
from posenc.rope import DynamicNTKScaling, rope_frequencies

SMOKE = ["lab", "--preset", "smoke", "--threads", "1"]


# -- corpus --------------------------------------------------------------------------------------
def test_stdlib_split_is_deterministic_disjoint_and_complete():
    rels = find_files(stdlib_root(), "*.py")
    assert len(rels) > 100
    assert not any("site-packages" in r for r in rels)
    train, val = split_paths(rels, 0.1)
    shuffled = list(rels)
    random.Random(1).shuffle(shuffled)
    assert split_paths(shuffled, 0.1) == (train, val)  # order of discovery is irrelevant
    assert not set(train) & set(val)
    assert sorted(train + val) == sorted(rels)
    assert 0.05 < len(val) / len(rels) < 0.15
    # A path's side does not depend on which other files exist.
    assert split_paths(val[:5] + train[:5], 0.1) == (sorted(train[:5]), sorted(val[:5]))


def test_user_folder_and_single_file(tmp_path):
    for i in range(40):
        (tmp_path / f"doc{i}.txt").write_text(f"file {i}\n" * 50)
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01" * 100)
    corpus = load_corpus(str(tmp_path), val_fraction=0.2)
    assert "blob.bin" not in corpus.train_files + corpus.val_files
    assert not set(corpus.train_files) & set(corpus.val_files)
    assert len(corpus.train_files) + len(corpus.val_files) == 40
    single = load_corpus(str(tmp_path / "doc1.txt"), val_fraction=0.25)
    assert single.train.size + single.val.size == len((tmp_path / "doc1.txt").read_bytes())


def test_bad_data_and_config_are_refused_with_the_value(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_corpus(str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match="schemes must be one of .*'sinus'"):
        preset_config("smoke", schemes=["sinus"])
    with pytest.raises(ValueError, match="eval_multipliers .* got \\[2, 4\\]"):
        preset_config("smoke", eval_multipliers=[2, 4])
    with pytest.raises(ValueError, match="preset must be one of"):
        preset_config("huge")
    with pytest.raises(ValueError, match="val_fraction must be <= 0.5, got 0.9"):
        load_corpus(None, val_fraction=0.9)


# -- metrics with known answers ------------------------------------------------------------------
def test_uniform_model_costs_exactly_eight_bits_per_byte():
    model = build_model(preset_config("smoke"), "rope")
    with torch.no_grad():
        model.head.weight.zero_()  # tied to the token embedding: every logit is 0
    data = np.arange(5000, dtype=np.int64) % 256
    ends = window_ends(data.size, 64, 6)
    nats = per_position_nats(model, data, ends, 64, batch=4, device="cpu")
    assert nats.shape == (6, 64)
    summary = summarize_losses(nats, final_bytes=32, bootstrap_samples=100)
    for key in ("bpb", "bpb_last_quarter", "bpb_final32"):
        assert summary[key] == pytest.approx(8.0, abs=1e-6)
        assert summary[key + "_ci"] == pytest.approx([8.0, 8.0], abs=1e-6)


def test_metric_parts_and_bootstrap():
    nats = np.full((4, 8), math.log(2))  # 1 bit everywhere ...
    nats[:, -2:] = 2 * math.log(2)  # ... except 2 bits on the last two positions
    s = summarize_losses(nats, final_bytes=2, bootstrap_samples=50)
    assert s["bpb"] == pytest.approx(1.25)
    assert s["bpb_last_quarter"] == pytest.approx(2.0)
    assert s["bpb_final32"] == pytest.approx(2.0)
    lo, hi = bootstrap_ci([0.0, 1.0] * 50, samples=500)
    assert lo < 0.5 < hi and hi - lo < 0.3
    with pytest.raises(ValueError, match="per_window"):
        bootstrap_ci([])


# -- training and evaluation invariants --------------------------------------------------------
def test_schedule_and_data_order():
    lrs = [lr_at(s, lr=1.0, warmup=10, total=100, min_ratio=0.1) for s in range(100)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert lrs[-1] == pytest.approx(0.1) and all(a >= b for a, b in zip(lrs[9:], lrs[10:]))
    a = batch_offsets(10_000, 64, 8, seed=3, step=17)
    assert np.array_equal(a, batch_offsets(10_000, 64, 8, seed=3, step=17))
    assert not np.array_equal(a, batch_offsets(10_000, 64, 8, seed=3, step=18))


def test_schemes_share_every_other_initial_weight():
    cfg = preset_config("smoke")
    models = {name: build_model(cfg, name) for name in cfg.schemes}
    ref = models["nope"].state_dict()
    for name, model in models.items():
        for key, value in model.state_dict().items():
            if not key.startswith("scheme."):
                assert torch.equal(value, ref[key]), (name, key)


def test_every_length_scores_the_same_bytes_in_pieces():
    model = build_model(preset_config("smoke"), "rope")
    data = (np.arange(3000, dtype=np.int64) * 7) % 251
    ends = window_ends(data.size, 64, 3)
    whole = per_position_nats(model, data, ends, 16, batch=2, device="cpu", span=64)  # (3, 64)
    for c in range(4):  # piece c is a window of 16 ending 16*(3-c) earlier
        alone = per_position_nats(model, data, ends - 16 * (3 - c), 16, batch=2, device="cpu")
        assert np.allclose(whole[:, 16 * c : 16 * (c + 1)], alone, atol=1e-6)
    s = summarize_losses(whole, piece=16, final_bytes=8, bootstrap_samples=10)
    assert s["bpb_final32"] == pytest.approx(whole[:, -8:].mean() / math.log(2))
    assert s["bpb_last_quarter"] == pytest.approx(whole.reshape(3, 4, 16)[:, :, 12:].mean() / math.log(2))
    with pytest.raises(ValueError, match="multiple"):
        per_position_nats(model, data, ends, 24, batch=2, device="cpu", span=64)


def test_learned_table_past_its_rows_is_reported_or_interpolated():
    from posenc.measuring.lab.evaluate import evaluate_at
    from posenc.measuring.lab.report import markdown

    cfg = preset_config("smoke")
    model = build_model(cfg, "learned")  # 32 rows
    data = np.arange(4000, dtype=np.int64) % 256
    ends = window_ends(data.size, 64, 4)
    kw = dict(batch=2, final_bytes=8, bootstrap_samples=10, seed=0, device="cpu", span=64)
    cannot = evaluate_at(model, data, ends, 64, learned_beyond="cannot", **kw)
    assert cannot["cannot"] is True and "32 rows" in cannot["note"]
    stretched = evaluate_at(model, data, ends, 64, learned_beyond="interpolate", **kw)
    assert "interpolated from 32 to 64 rows" in stretched["note"]
    assert model.scheme.max_len == 32  # the trained model itself is untouched
    inside = evaluate_at(model, data, ends, 32, learned_beyond="cannot", **kw)
    results = {
        "config": cfg.to_dict(),
        "train_len": 32,
        "eval_lengths": [32, 64],
        "complete": True,
        "schemes": {"learned": {"train": {}, "eval": {"32": inside, "64": cannot}, "loss_by_position": {}}},
        "extension": {},
        "verdicts": [],
    }
    assert "| learned | " in markdown(results) and "| cannot |" in markdown(results)


def test_windows_end_at_the_same_bytes_at_every_length():
    ends = window_ends(10_000, 256, 5)
    assert ends[0] == 257 and ends[-1] == 10_000
    with pytest.raises(ValueError, match="too few"):
        window_ends(100, 256, 5)


def test_extension_configs():
    # Dynamic NTK evaluated in one pass of length L is NTK with the dynamic scale at L.
    for length in (64, 128, 512):
        want = rope_frequencies(DynamicNTKScaling(2.0, 64), 16, 10000.0, seq_len=length)[0]
        got = rope_frequencies(dynamic_effective_scaling(length, 64), 16, 10000.0)[0]
        assert torch.allclose(want, got, rtol=1e-12)
    assert scaling_for("none", 256, 64) is None
    with pytest.raises(ValueError, match="'pi'"):
        scaling_for("pi", 256, 64)
    model = build_model(preset_config("smoke"), "rope")
    x = torch.randint(0, 256, (1, 96))
    with torch.no_grad():
        same = extended_model(model, "none", 128, 32)(x)
        moved = extended_model(model, "linear", 128, 32)(x)
        assert torch.allclose(same, model(x))
        assert not torch.allclose(moved, model(x))
    with pytest.raises(TypeError, match="RoPE"):
        extended_model(build_model(preset_config("smoke"), "alibi"), "linear", 128, 32)


# -- end to end ----------------------------------------------------------------------------------
def _numbers(run: Path) -> dict:
    res = json.loads((run / "results.json").read_text())
    out = {}

    def add(key, e):
        out[key] = e.get("bpb")
        for b, cell in (e.get("retrieval") or {}).items():
            out[f"{key}/{b}"] = cell["logp_bits"]

    for name, s in res["schemes"].items():
        for n, e in s["eval"].items():
            add(f"{name}@{n}", e)
    for method, per_len in res["extension"].items():
        for n, e in per_len.items():
            add(f"{method}@{n}", e)
            if "finetuned" in e:
                add(f"{method}@{n}+ft", e["finetuned"])
    return out


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("lab") / "clean"
    assert main(SMOKE + ["--finetune", "--extension-methods", "linear,yarn", "--out", str(run)]) == 0
    return run


@pytest.mark.slow
def test_smoke_run_writes_the_agreed_report(smoke_run):
    res = json.loads((smoke_run / "results.json").read_text())
    assert res["schema_version"] == 2 and res["kind"] == "results"
    assert res["complete"] is True and res["machinery_check"] is True
    assert res["train_len"] == 32 and res["eval_lengths"] == [32, 64, 128, 256]
    assert set(res["schemes"]) == set(SCHEMES)  # every scheme by default
    for s in res["schemes"].values():
        for n in res["eval_lengths"]:
            e = s["eval"][str(n)]
            for key in ("bpb", "bpb_last_quarter", "bpb_final32"):
                assert 0.0 < e[key] < 9.0
                lo, hi = e[key + "_ci"]
                assert lo <= e[key] <= hi
            assert len(s["loss_by_position"][str(n)]) == n
            cells = e["retrieval"]
            assert list(cells) == (["near", "mid"] if n == 32 else ["near", "mid", "far"])
            for c in cells.values():
                assert c["trials"] == 12 and 0.0 <= c["accuracy"] <= 1.0
                assert c["accuracy_ci"][0] <= c["accuracy"] <= c["accuracy_ci"][1]
                assert c["logp_bits"] < 0
        assert s["train"]["steps"] == 40 and s["train"]["lr"] == 3e-3
    assert "interpolated" in res["schemes"]["learned"]["eval"]["256"]["note"]
    assert set(res["extension"]) == {"none", "linear", "yarn"}
    for method, per_len in res["extension"].items():
        assert set(per_len) == ({"32", "64", "128", "256"} if method == "none" else {"64", "128", "256"})
        assert all("bpb" in e and "bpb" in e["finetuned"] for e in per_len.values())
    # Plain RoPE in the extension table is the RoPE model itself.
    assert res["extension"]["none"]["128"]["bpb"] == pytest.approx(
        res["schemes"]["rope"]["eval"]["128"]["bpb"], abs=1e-9
    )
    assert res["extension"]["linear"]["256"]["finetuned"]["retrieval"]["far"]["trials"] == 12
    assert {v["verdict"] for v in res["verdicts"]} <= {"seen", "within noise", "not seen", "not measured"}
    table = (smoke_run / "results.md").read_text()
    assert "| rope |" in table and "None: machinery check" in table and "**seen**" not in table
    assert "posenc lab --preset smoke" in table
    assert "machinery check: numbers carry no meaning" in table.splitlines()[2]
    # the retrieval numbers are shown, but a machinery check draws no comparison from them
    assert "## Passkey retrieval" in table and "side by side" not in table
    for png in ("bpb_vs_length.png", "loss_by_position.png", "retrieval.png"):
        assert (smoke_run / png).read_bytes()[:4] == b"\x89PNG"
    for name in res["schemes"]:
        assert (smoke_run / "checkpoints" / f"{name}.pt").exists()
    assert not list(smoke_run.rglob("*.tmp"))


@pytest.mark.slow
def test_interrupted_run_resumes_to_the_same_numbers(smoke_run, tmp_path, monkeypatch):
    run = tmp_path / "interrupted"
    args = SMOKE + ["--finetune", "--extension-methods", "linear,yarn", "--out", str(run)]

    # 1. A crash in the middle of training the third scheme (step 25 of 40).
    real_lr_at, calls = lab_train.lr_at, {"n": 0}

    def crash_in_training(*a, **k):
        calls["n"] += 1
        if calls["n"] == 2 * 40 + 25:
            raise KeyboardInterrupt
        return real_lr_at(*a, **k)

    monkeypatch.setattr(lab_train, "lr_at", crash_in_training)
    assert main(args) == 130
    monkeypatch.setattr(lab_train, "lr_at", real_lr_at)
    assert torch.load(run / "checkpoints" / "learned.pt", weights_only=True)["step"] == 20
    assert not (run / "checkpoints" / "rope.pt").exists()

    # 2. Resume, and crash again during the seventh evaluation.
    real_eval, evals = lab_cli.evaluate_at, {"n": 0}

    def crash_in_eval(*a, **k):
        evals["n"] += 1
        if evals["n"] == 7:
            raise KeyboardInterrupt
        return real_eval(*a, **k)

    monkeypatch.setattr(lab_cli, "evaluate_at", crash_in_eval)
    assert main(SMOKE[:1] + ["--resume", str(run)]) == 130
    assert json.loads((run / "results.json").read_text())["complete"] is False

    # 3. Resume to the end: the six finished evaluations are not redone.
    evals["n"] = -10_000
    assert main(SMOKE[:1] + ["--resume", str(run)]) == 0
    total = len(SCHEMES) * 4 + 3 * 3 * 2 + 2  # + the fine-tune control at the training length
    assert evals["n"] + 10_000 == total - 6
    clean, resumed = _numbers(smoke_run), _numbers(run)
    assert clean.keys() == resumed.keys()
    for key in clean:
        assert resumed[key] == pytest.approx(clean[key], abs=1e-6), key


@pytest.mark.slow
def test_resume_refuses_a_checkpoint_of_another_model(smoke_run, tmp_path, capsys):
    import shutil

    run = tmp_path / "copy"
    shutil.copytree(smoke_run, run)
    path = run / "checkpoints" / "rope.pt"
    ckpt = torch.load(path, weights_only=True)
    ckpt["model_config"]["d_model"] = 64
    torch.save(ckpt, path)
    assert main(["lab", "--resume", str(run)]) == 2
    assert "rope.pt was made with model config" in capsys.readouterr().err


@pytest.mark.slow
def test_resume_refuses_a_different_config(smoke_run, capsys):
    assert main(["lab", "--resume", str(smoke_run), "--steps", "7"]) == 2
    assert "steps=7 differs" in capsys.readouterr().err
    assert main(SMOKE + ["--out", str(smoke_run)]) == 2
    err = capsys.readouterr().err
    assert "--resume" in err and "--fresh" in err


def test_cuda_request_without_gpu_is_explained(capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present, so --device cuda is valid here")
    assert main(SMOKE + ["--device", "cuda"]) == 2
    assert "--device cuda" in capsys.readouterr().err


@pytest.mark.slow
def test_torchrun_two_processes_match_one(tmp_path):
    flags = ["--schemes", "rope,alibi", "--extension-methods", "ntk", "--no-plots"]
    one, two = tmp_path / "one", tmp_path / "two"
    assert main(SMOKE + flags + ["--out", str(one)]) == 0
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "-m",
        "posenc",
        *SMOKE[:3],
        *flags,
        "--out",
        str(two),
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    # DDP is built with the torch's current argument: no FutureWarning from any rank
    assert "FutureWarning" not in done.stderr and "broadcast_buffers" not in done.stderr, done.stderr[-3000:]
    # each run records the processes it ran under
    assert json.loads((two / "results.json").read_text())["distributed"] == {"world_size": 2, "backend": "gloo"}
    assert json.loads((one / "results.json").read_text())["distributed"] == {"world_size": 1, "backend": None}
    a, b = _numbers(one), _numbers(two)
    assert a.keys() == b.keys()
    for key in a:
        assert b[key] == pytest.approx(a[key], abs=2e-3), key
