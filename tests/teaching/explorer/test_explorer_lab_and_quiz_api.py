"""The explorer's lab and knowledge-check endpoints, in process: a lab run's results as the lab view reads
them, and the quiz: the manifest's checks in its order, each with evidence computed by the library."""

from __future__ import annotations

import json
import math

import pytest
import torch
from explorer_client import get
from fastapi.testclient import TestClient

from posenc.alibi import alibi_bias, alibi_slopes
from posenc.learned import LearnedPositionalEmbedding, PositionOutOfRangeError
from posenc.rope.scaling import (
    Llama3Scaling,
    rope_frequencies,
)
from posenc.rope.tables import rope_inv_freq
from posenc.teaching.explorer import lab_results, quiz
from posenc.teaching.explorer.app import create_app


def write_results(folder, data):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(data), encoding="utf-8")
    return folder


SYNTHETIC = {
    "schema_version": 2,
    "kind": "results",  # posenc.measuring.lab.schema's stamp
    "config": {"d_model": 64, "steps": 10},
    "train_len": 128,
    "eval_lengths": [128, 512],
    "schemes": {
        "rope": {
            "eval": {
                "128": {"bpb": 2.1, "bpb_ci": [2.0, 2.2], "bpb_last_quarter": 2.0, "bpb_final32": 1.9},
                "512": {"bpb": 2.9, "bpb_ci": [2.7, 3.1], "bpb_last_quarter": 3.3, "bpb_final32": 3.5},
            },
            "loss_by_position": {"128": [2.0] * 128, "512": [float(i) for i in range(2000)]},
        },
        "alibi": {"eval": {"128": {"bpb": 2.2}}, "loss_by_position": {"128": [2.1] * 128}},
    },
    "extension": {"yarn": {"512": {"bpb": 2.5}}},
}


def test_lab_view_reads_a_results_file(tmp_path):
    run = write_results(tmp_path / "run", SYNTHETIC)
    with TestClient(create_app(lab_run=run, allowed_hosts=None)) as c:
        d = get(c, "/api/lab")
        assert get(c, "/api/meta")["lab"] is True
    assert d["available"] and d["train_len"] == 128 and d["eval_lengths"] == [128, 512]
    assert d["schemes"]["rope"]["eval"]["512"]["bpb_ci"] == [2.7, 3.1]
    long_curve = d["schemes"]["rope"]["loss_by_position"]["512"]
    assert len(long_curve["loss"]) == lab_results.MAX_CURVE_POINTS and long_curve["points"] == 2000
    assert long_curve["loss"][0] == pytest.approx(sum(range(3)) / 3)  # 2000/512 -> first bucket 0..2
    assert d["schemes"]["alibi"]["eval"]["128"]["bpb_last_quarter"] is None
    assert d["extension"]["yarn"]["512"]["bpb"] == 2.5
    assert d["notes"] == []
    with TestClient(create_app(lab_run=run, allowed_hosts=None)) as c:
        smooth = get(c, "/api/lab", points=100)["schemes"]["rope"]["loss_by_position"]
        assert c.get("/api/lab", params={"points": 0}).status_code == 422
    assert len(smooth["512"]["loss"]) == 100 and smooth["512"]["loss"][0] == pytest.approx(sum(range(20)) / 20)
    assert len(smooth["128"]["loss"]) == 100


def test_lab_view_keeps_status_verdicts_and_unmeasurable_cells(tmp_path):
    data = dict(
        SYNTHETIC,
        complete=False,
        verdicts=[
            {"claim": "ALiBi stays flat", "seen": True, "evidence": "bpb 2.2 -> 2.25"},
            {"claim": "YaRN helps", "seen": None, "evidence": "not measured in this run"},
            "junk",
        ],
    )
    data["schemes"] = dict(
        SYNTHETIC["schemes"],
        learned={
            "eval": {"512": {"cannot": True, "note": "cannot: the learned table has 128 rows"}},
            "loss_by_position": {},
        },
    )
    data["extension"] = {"yarn": {"512": {"bpb": 2.5, "finetuned": {"bpb": 2.3, "loss_by_position": [1.0]}}}}
    d = lab_results.read_lab_results(write_results(tmp_path / "run", data))
    assert d["complete"] is False and "not complete" in " ".join(d["notes"])
    assert [v["seen"] for v in d["verdicts"]] == [True, None]
    cell = d["schemes"]["learned"]["eval"]["512"]
    assert cell["cannot"] is True and cell["bpb"] is None and "128 rows" in cell["note"]
    assert d["extension"]["yarn"]["512"]["finetuned_bpb"] == 2.3


def test_lab_view_says_what_is_missing(tmp_path):
    assert lab_results.read_lab_results(None)["available"] is False
    assert "not found" in lab_results.read_lab_results(tmp_path)["notes"][0]
    (tmp_path / "results.json").write_text("{broken", encoding="utf-8")
    assert "could not be read" in lab_results.read_lab_results(tmp_path)["notes"][0]
    partial = write_results(
        tmp_path / "partial",
        {
            "train_len": 64,
            "schemes": {
                "rope": {"eval": {"64": {"bpb": "NaN"}, "x": {}}, "loss_by_position": {"64": [1.0, None, "a"]}},
                "nope": 3,
            },
        },
    )
    d = lab_results.read_lab_results(partial)
    assert d["available"] is True
    joined = " | ".join(d["notes"])
    for fragment in (
        "eval_lengths is missing",
        "config is missing",
        "extension is missing",
        "scheme 'nope' has no results",
        "'x' is not a length",
    ):
        assert fragment in joined
    assert d["schemes"]["rope"]["eval"]["64"]["bpb"] is None
    assert d["schemes"]["rope"]["loss_by_position"]["64"]["loss"] == [1.0, None, None]
    assert d["eval_lengths"] == [64]


def test_quiz_lists_questions_without_answers(client):
    checks = get(client, "/api/quiz")["checks"]
    assert len(checks) >= 6
    for check in checks:
        assert set(check) == {"id", "topic", "prompt", "question", "choices"}
        assert len(check["choices"]) >= 2


def test_each_check_names_its_question_not_the_scene_its_prompt_sets_first(client):
    """Defect: the check index listed each prompt's first sentence ("Seats 4 and 5 are neighbours.")
    instead of the question. A check's question is the sentence of its prompt that asks."""
    checks = {c["id"]: c for c in get(client, "/api/quiz")["checks"]}
    for check in checks.values():
        question = check["question"]
        assert question.endswith("?") and question in " ".join(check["prompt"].split()), check
        assert question.count("?") == 1
    assert checks["fast-columns"]["question"] == "Which columns of the sinusoidal table tell them apart best?"


def _supports_added(v):
    d = v["d_model"]
    assert v["shape"][-1] == d and v["max_abs"] <= 1.0
    assert v["pe_norm"] == pytest.approx([math.sqrt(d / 2)] * 2, rel=1e-6)  # fixed size, every row
    # the stated scale: N(0, std^2) entries times sqrt(d_model), so about std * d long
    assert v["embed_scale"] == pytest.approx(math.sqrt(d))
    assert v["embedding_norm"] == pytest.approx(v["embedding_std"] * math.sqrt(d) * v["embed_scale"], rel=0.05)
    assert v["ratio"] == pytest.approx(v["pe_norm"][0] / v["embedding_norm"], rel=1e-6)
    assert 0.5 < v["ratio"] < 2  # the same size as the word: neither drowns the other
    assert v["ratio_unscaled"] == pytest.approx(v["ratio"] * math.sqrt(d), rel=1e-9)
    assert v["raw_ratio_1000"] == pytest.approx(1000 * math.sqrt(d) / v["embedding_norm"], rel=1e-9)


def test_the_basic_bag_of_words_check_comes_first(client):
    checks = get(client, "/api/quiz")["checks"]
    assert checks[0]["id"] == "bag-of-words" and quiz.CHECKS[0].id == "bag-of-words"


def test_quiz_lists_exactly_the_manifests_checks_in_its_order(client):
    from posenc.teaching.lesson.manifest import CHAPTERS

    manifest = [check_id for chapter in CHAPTERS for check_id in chapter.checks]
    assert [check["id"] for check in get(client, "/api/quiz")["checks"]] == manifest
    assert [check.id for check in quiz.CHECKS] == manifest
    # the reading order, not the order the workbench once listed them in (llama3-bands before fast-columns)
    assert manifest.index("fast-columns") < manifest.index("relative") < manifest.index("linear-vs-ntk")


def _fake_module(*ids):
    import types

    return types.SimpleNamespace(CHECKS=tuple(quiz.BY_ID[i] for i in ids))


def test_the_quiz_follows_a_reordered_manifest():
    from posenc.teaching.lesson.manifest import Chapter

    chapters = (Chapter("one", "One", ("relative", "added")), Chapter("two", "Two", ("bag-of-words",)))
    modules = {"one": _fake_module("added", "relative"), "two": _fake_module("bag-of-words")}
    assert [c.id for c in quiz.collect_checks(chapters, modules)] == ["relative", "added", "bag-of-words"]
    assert quiz.collect_checks(chapters, modules)[0] is quiz.BY_ID["relative"]


def test_the_quiz_refuses_a_manifest_that_disagrees_with_its_chapters():
    from posenc.teaching.lesson.manifest import Chapter

    listed = (Chapter("one", "One", ("relative", "added")),)
    with pytest.raises(
        ValueError, match=r"chapter 'one' lists the checks \['relative', 'added'\] .* writes \['added'\]"
    ):
        quiz.collect_checks(listed, {"one": _fake_module("added")})
    twice = (Chapter("one", "One", ("added",)), Chapter("two", "Two", ("added",)))
    modules = {"one": _fake_module("added"), "two": _fake_module("added")}
    with pytest.raises(ValueError, match=r"\['added'\] are listed twice"):
        quiz.collect_checks(twice, modules)


def test_added_check_states_the_scale_the_tour_uses(client):
    from posenc.teaching.input_sizes import position_word_lengths

    answer = get(client, "/api/quiz/added/answer", choice=1)
    sizes = position_word_lengths()
    assert answer["values"]["ratio"] == pytest.approx(sizes["ratio"], rel=1e-12)
    text = " ".join(answer["evidence"])
    assert "TinyLM" in text and "posenc tour" in text and f"{sizes['ratio']:.2f}x" in text


def _supports_llama3(v):
    # closed form: a pair is kept below original/high, divided above original/low, blended between
    wavelengths = [2 * math.pi * v["base"] ** (2 * i / v["rotary_dim"]) for i in range(v["rotary_dim"] // 2)]
    kept = sum(w < v["original"] / v["high_freq_factor"] for w in wavelengths)
    divided = sum(w > v["original"] / v["low_freq_factor"] for w in wavelengths)
    assert (v["kept"], v["blended"], v["divided"]) == (kept, len(wavelengths) - kept - divided, divided)
    assert (kept, divided) == (29, 29) and v["blended"] == 6


#: for each knowledge check, what its evidence must show for the keyed answer to be right
SUPPORTS = {
    "added": _supports_added,
    "learned-limit": lambda v: "512" in v["error"] and v["requested"] > v["max_len"] == 512,
    "relative": lambda v: v["score_near"] == pytest.approx(v["score_far"], abs=1e-12),
    "qk-only": lambda v: v["change_qk_only"] < 1e-12 and v["change_with_v"] > 1e-2,
    "llama3-bands": _supports_llama3,
    "fast-columns": lambda v: min(v["first"]) > 0.1 and max(v["last"]) < 1e-3,
    "bag-of-words": lambda v: v["nope_difference"] < 1e-12 and v["sinusoidal_difference"] > 1e-3,
    "alibi-head0": lambda v: v["head0"] == -5.0 and v["head7"] == -10 / 256 and v["slopes"][0] == 0.5,
    "precision": lambda v: 0.01 <= v["float32"] < 0.1 and v["posenc"] < 1e-6,
    "linear-vs-ntk": lambda v: (
        v["linear"] == pytest.approx([0.25, 0.25], rel=1e-12) and v["ntk"] == pytest.approx([1.0, 0.25], rel=1e-12)
    ),
}


def test_every_check_has_its_evidence_tested():
    assert set(SUPPORTS) == {check.id for check in quiz.CHECKS}


@pytest.mark.parametrize("check", quiz.CHECKS, ids=lambda c: c.id)
def test_every_check_explains_itself_with_a_computation(client, check):
    right = get(client, f"/api/quiz/{check.id}/answer", choice=check.answer)
    assert right["correct"] is True and right["evidence"] and right["values"]
    assert SUPPORTS[check.id](right["values"]) is not False, right["values"]
    wrong = (check.answer + 1) % len(check.choices)
    answer = get(client, f"/api/quiz/{check.id}/answer", choice=wrong)
    assert answer["correct"] is False and answer["answer"] == check.answer
    assert answer["feedback"] != right["feedback"]


def test_check_evidence_equals_the_library(client):
    alibi = get(client, "/api/quiz/alibi-head0/answer", choice=0)["values"]
    assert alibi["head0"] == float(alibi_bias(alibi_slopes(8), torch.tensor([10]), torch.arange(11))[0, 0, 0]) == -5.0
    learned = get(client, "/api/quiz/learned-limit/answer", choice=2)["values"]
    with pytest.raises(PositionOutOfRangeError) as err:
        LearnedPositionalEmbedding(512, 4).encodings(torch.arange(600))
    assert learned["error"] == str(err.value)
    # the check says what kind of error it is, and what plain PyTorch says instead
    assert learned["is_index_error"] is True and isinstance(err.value, IndexError)
    with pytest.raises(IndexError) as plain:
        torch.nn.Embedding(512, 4)(torch.arange(600))
    assert (learned["plain_error"], learned["plain_message"]) == ("IndexError", str(plain.value))
    answered = get(client, "/api/quiz/learned-limit/answer", choice=2)
    said = " ".join([answered["feedback"], *answered["evidence"]])
    assert "subclass of IndexError" in said and f"'{plain.value}'" in said and str(plain.value) in said
    relative = get(client, "/api/quiz/relative/answer", choice=0)["values"]
    assert relative["score_near"] == pytest.approx(relative["score_far"], abs=1e-12)
    bands = get(client, "/api/quiz/llama3-bands/answer", choice=2)
    values = bands["values"]
    ratio = rope_frequencies(Llama3Scaling(8.0, 1.0, 4.0, 8192), 128, 500000.0)[0] / rope_inv_freq(128, 500000.0)
    assert values["ratio"] == ratio.tolist()
    _supports_llama3(values)
    # the prose is formatted from the fixture, not typed in
    prose = " ".join(bands["evidence"])
    for fragment in (
        "rope_theta 500000",
        "128 rotated features",
        "factor 8",
        "original context 8192",
        "8192 / high_freq_factor 4 = 2048",
        "29 of 64",
        "6 are blended",
        "29 are divided by 8",
    ):
        assert fragment in prose
