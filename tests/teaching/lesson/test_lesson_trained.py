"""The lesson's packaged trained models: they load offline without touching the global random state,
reproduce the numbers of their committed summary, agree with the lab's own metric, and every broken or
crafted file is refused with a clear error naming it."""

from __future__ import annotations

import io
import json
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from posenc.measuring.lab.evaluate import per_position_nats
from posenc.measuring.lab.metrics import bits_per_byte as lab_bits
from posenc.teaching.lesson import trained
from posenc.teaching.lesson.chapters.bag_of_tiles import SCHEMES

SUMMARY = trained.read_summary()
LENGTHS = SUMMARY["eval_lengths"]
#: float32 forwards summed in another order differ around the sixth digit; the summary keeps six
NOISE = 2e-5


def test_one_model_per_scheme_the_lesson_compares_under_a_few_megabytes():
    assert set(SUMMARY["models"]) == set(SCHEMES)
    total = sum(p.stat().st_size for p in trained.MODELS_DIR.iterdir() if p.is_file())
    assert total < 3_000_000, total
    for name, entry in SUMMARY["models"].items():
        assert (trained.MODELS_DIR / entry["file"]).is_file()
        assert entry["file"] == f"{name}.pt"
    assert SUMMARY["command"] == trained.REGENERATE
    assert SUMMARY["config"]["preset"] == "lesson"


@pytest.mark.parametrize("scheme", SCHEMES)
def test_each_model_reproduces_its_summary_on_the_packaged_windows(scheme):
    """The summary's bits per byte, measured again from the shipped files (float32, as the lab measured)."""
    model = trained.read_model(scheme)
    windows = trained.read_windows()
    for length in LENGTHS:
        stated = SUMMARY["models"][scheme]["bpb"][str(length)]
        if scheme == "learned" and length > model.config.max_len:
            assert stated is None  # a learned table has no rows there, and the summary says so
            with pytest.raises(ValueError, match="learned table"):
                trained.bits_per_byte(model, windows, length)
            continue
        assert stated == pytest.approx(trained.bits_per_byte(model, windows, length), abs=NOISE), (scheme, length)


@pytest.mark.parametrize("scheme", ["alibi"])
def test_the_lessons_metric_is_the_labs(scheme):
    """The same windows through posenc.measuring.lab.evaluate (the lab's code, which packs pieces into batches)
    give the lesson's number: the summary measures what `posenc lab` reports."""
    model = trained.read_model(scheme)
    windows = trained.read_windows()
    span = windows.shape[1] - 1
    data = windows.numpy().reshape(-1)  # the windows end to end
    ends = np.arange(1, windows.shape[0] + 1) * (span + 1)
    for length in LENGTHS:
        nats = per_position_nats(model, data, ends, length, batch=32, device="cpu", span=span)  # (W, span)
        theirs = float(lab_bits(nats).mean(axis=1).mean())
        assert theirs == pytest.approx(trained.bits_per_byte(model, windows, length), abs=NOISE)


def test_the_models_have_learned_and_a_learned_table_has_no_number_past_its_rows():
    """Every model needs far fewer than the 8 bits of a uniform guess; the summary's numbers past the
    training length are what the lab measured, none where a learned table has no rows."""
    for name, entry in SUMMARY["models"].items():
        assert entry["bpb"][str(LENGTHS[0])] < 4.0, (name, entry["bpb"])
    for length in LENGTHS[1:]:
        assert SUMMARY["models"]["learned"]["bpb"][str(length)] is None


def test_reading_draws_no_random_number_even_from_many_threads():
    trained._cached_model.cache_clear()
    trained._cached_initial.cache_clear()
    before = torch.get_rng_state()
    results: list = []

    def read(name: str) -> None:
        results.append((name, trained.model(name), trained.initial_model(name)))

    threads = [threading.Thread(target=read, args=(name,)) for name in SCHEMES for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert torch.equal(torch.get_rng_state(), before)
    assert len(results) == 2 * len(SCHEMES)
    first = {}
    for name, model, initial in results:
        state = {k: v.clone() for k, v in model.state_dict().items()}
        if name in first:
            assert all(torch.equal(state[k], first[name][k]) for k in state)
        first[name] = state
        assert model.head.weight.data_ptr() == model.tok.weight.data_ptr()  # tied, as TinyLM is
        assert not any(t.is_meta for t in model.state_dict().values())
        assert not torch.equal(initial.blocks[0].attn.qkv.weight, model.blocks[0].attn.qkv.weight)


def test_the_initial_weights_are_drawn_as_tinylm_draws_them():
    initial = trained.initial_model("rope")
    assert float(initial.blocks[0].attn.qkv.weight.detach().std()) == pytest.approx(0.02, rel=0.05)
    assert torch.equal(initial.blocks[0].norm1.weight, torch.ones_like(initial.blocks[0].norm1.weight))
    assert torch.equal(trained.initial_model("rope").tok.weight, initial.tok.weight)  # the same every time


# -- broken and crafted files ---------------------------------------------------------------------------------
@pytest.fixture
def copy(tmp_path) -> Path:
    folder = tmp_path / "models"
    shutil.copytree(trained.MODELS_DIR, folder)
    return folder


def _rehash(folder: Path, scheme: str) -> None:
    path = folder / trained.SUMMARY_NAME
    summary = json.loads(path.read_text())
    summary["models"][scheme]["sha256"] = trained.sha256_of(folder / f"{scheme}.pt")
    path.write_text(json.dumps(summary))


def _write(folder: Path, scheme: str, payload) -> None:
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    (folder / f"{scheme}.pt").write_bytes(buffer.getvalue())
    _rehash(folder, scheme)


def test_a_changed_file_is_refused_by_its_hash(copy):
    path = copy / "rope.pt"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(trained.TrainedModelError, match=r"rope\.pt: has SHA-256 .* summary\.json lists"):
        trained.read_model("rope", copy)


def test_a_truncated_file_is_refused_as_corrupt(copy):
    path = copy / "alibi.pt"
    path.write_bytes(path.read_bytes()[:1000])
    _rehash(copy, "alibi")
    with pytest.raises(trained.TrainedModelError, match=r"alibi\.pt: is truncated or corrupt") as info:
        trained.read_model("alibi", copy)
    assert "benchmarks/lesson_models.py" in str(info.value)


class _Payload:
    """Would write a file if it were ever unpickled."""

    target = ""

    def __reduce__(self):
        return (Path.write_text, (Path(self.target), "ran"))


def test_a_crafted_pickle_is_refused_and_nothing_in_it_runs(copy, tmp_path):
    flag = tmp_path / "flag"
    payload = _Payload()
    payload.target = str(flag)
    _write(copy, "rope", {"format": trained.MODEL_FORMAT, "version": 1, "scheme": "rope", "x": payload})
    with pytest.raises(trained.TrainedModelError, match=r"not a plain-data file .*nothing in it ran"):
        trained.read_model("rope", copy)
    assert not flag.exists()


def _payload(scheme: str) -> dict:
    return trained.model_payload(trained.read_model(scheme), trained.train_len())


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda p: p.update(format="something-else"), "has format 'something-else'"),
        (lambda p: p.update(version=9), "is version 9"),
        (lambda p: p.update(scheme="alibi"), "holds scheme 'alibi', not 'rope'"),
        (lambda p: p["model_config"].update(d_model=-1), "invalid model_config .*d_model"),
        (lambda p: p["state"].pop("norm.weight"), r"missing \['norm.weight'\]"),
        (lambda p: p["state"].update({"norm.weight": torch.ones(3)}), "'norm.weight' has shape \\(3,\\)"),
        (lambda p: p["state"].update({"norm.weight": torch.full((64,), float("nan"))}), "non-finite"),
        (lambda p: p["state"].update({"norm.weight": torch.ones(64, dtype=torch.float64)}), "float64, not float32"),
        (lambda p: p.update(state=[1, 2]), "has no weights"),
    ],
)
def test_a_file_of_the_wrong_content_is_refused_naming_what_is_wrong(copy, change, message):
    payload = _payload("rope")
    change(payload)
    _write(copy, "rope", payload)
    with pytest.raises(trained.TrainedModelError, match=message):
        trained.read_model("rope", copy)


def test_a_missing_file_or_summary_is_named(copy):
    (copy / "nope.pt").unlink()
    with pytest.raises(trained.TrainedModelError, match=r"nope\.pt: no such file"):
        trained.read_model("nope", copy)
    (copy / "summary.json").write_text("{not json")
    with pytest.raises(trained.TrainedModelError, match=r"summary\.json: is not valid JSON"):
        trained.read_model("rope", copy)


def test_an_unknown_scheme_is_refused_by_name():
    with pytest.raises(ValueError, match="scheme must be one of .* got 'rotary'"):
        trained.read_model("rotary")
