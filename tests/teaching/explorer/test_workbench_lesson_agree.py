"""The workbench and the lesson give the same numbers for the same inputs.

Each workbench view that shows something a chapter also shows computes it through the lesson's one
function (:mod:`posenc.teaching.lesson.rotation`, :mod:`posenc.teaching.lesson.stretching`, the chapters' own helpers).
These tests call both sides with the same inputs and compare every number they share, so a formula
changed on one side only fails here. Where the two pick different example vectors (the workbench's come
from a seed or the learner's words, the chapter's are fixed), the workbench is handed the chapter's.
"""

from __future__ import annotations

import math

import pytest
import torch

from posenc.teaching.explorer import scaling_view, views
from posenc.teaching.lesson.chapters import clock_hands, rope, stretching_rope


def same_angle_deg(a: float, b: float) -> bool:
    """Two angles in degrees that name the same direction."""
    return abs(math.remainder(a - b, 360.0)) < 1e-9


@pytest.mark.parametrize(("head_dim", "m", "n", "shift"), [(8, 3, 1, 100), (16, 2, 9, 5000), (2, 0, 7, 0)])
def test_the_dials_and_the_chapter_clock_agree(monkeypatch, head_dim, m, n, shift):
    monkeypatch.setattr(views, "dial_vectors", lambda dim, seed: rope.clock_vectors(dim))
    bench = views.rope_dials(head_dim, 10000.0, m, n, shift, seed=0)
    clock = rope.rope_clock(head_dim, m, n, shift)
    assert bench["theta"] == [p["theta"] for p in clock["pairs"]]
    for i, pair in enumerate(clock["pairs"]):
        assert bench["q_pairs_unrotated"][i] == pair["q"] and bench["k_pairs_unrotated"][i] == pair["k"]
        assert bench["q_pairs"][i] == pair["q_rotated"] and bench["k_pairs"][i] == pair["k_rotated"]
        assert bench["q_pairs_moved"][i] == pair["q_moved"] and bench["k_pairs_moved"][i] == pair["k_moved"]
        assert same_angle_deg(bench["q_turn_deg"][i], pair["q_turn_moved_deg"])
        assert same_angle_deg(bench["k_turn_deg"][i], pair["k_turn_moved_deg"])
        assert same_angle_deg(bench["relative_angle_deg"][i], pair["gap_deg"])
    assert bench["score"] == clock["score"]
    assert bench["score_moved"] == clock["score_shifted"]
    assert bench["score_unrotated"] == clock["score_unrotated"]


@pytest.mark.parametrize("degrees", [30.0, 77.0, 179.0])
def test_the_word_order_view_and_the_chapter_clock_agree(monkeypatch, degrees):
    query, key = (torch.tensor(v, dtype=torch.float64) for v in rope.ORDER_VECTORS)
    monkeypatch.setattr(views, "order_vectors", lambda q_word, k_word: (query, key))
    bench = views.word_order_view(*rope.ORDER_SENTENCES, "bit", "dog", degrees)
    for sentence, row in enumerate(bench["sentences"]):
        chapter = rope.word_order(sentence, degrees)
        assert row["words"] == chapter["words"]
        assert (row["query_seat"], row["key_seat"]) == (chapter["bit_seat"], chapter["dog_seat"])
        assert row["relative_angle_deg"] == chapter["turn_dog_to_bit_deg"]
        assert all(same_angle_deg(a, b) for a, b in zip(row["seat_angles_deg"], chapter["angles_deg"]))
        assert row["score_rope"] == chapter["score_rope"]
        assert row["score_nope"] == chapter["score_nope"]
    assert bench["sentences"][0]["relative_angle_deg"] == -bench["sentences"][1]["relative_angle_deg"] == degrees


@pytest.mark.parametrize(("seat", "d_model"), [(3, 64), (10_000, 4), (77, 256)])
def test_the_table_cell_and_the_chapter_clock_hands_agree(seat, d_model):
    for hand in clock_hands.clock_hands(seat, d_model)["hands"]:
        sin_cell = views.sinusoidal_cell(seat, 2 * hand["pair"], d_model, 10000.0)
        cos_cell = views.sinusoidal_cell(seat, 2 * hand["pair"] + 1, d_model, 10000.0)
        for cell in (sin_cell, cos_cell):
            assert cell["pair"] == hand["pair"]
            assert (cell["frequency"], cell["wavelength"], cell["angle"]) == (
                hand["frequency"],
                hand["wavelength"],
                hand["angle"],
            )
            assert math.degrees(cell["angle_reduced"]) == hand["angle_deg_mod_360"]
        assert (sin_cell["value"], cos_cell["value"]) == (hand["sin"], hand["cos"])


def test_the_llama3_fixture_has_the_same_pair_bands_in_the_workbench_and_the_chapter():
    facts = stretching_rope.numbers()
    curve = scaling_view.fixture_view(stretching_rope.LLAMA3_FIXTURE)["curves"]["configured"]
    chapter = (facts["configs.llama31.kept"], facts["configs.llama31.slowed"], facts["configs.llama31.blended"])
    assert (curve["kept"], curve["divided"], curve["blended"]) == chapter
    evidence = stretching_rope._llama3_bands()[1]
    assert (evidence["kept"], evidence["divided"], evidence["blended"]) == chapter
    assert 0 < chapter[0] and 0 < chapter[1] and 0 < chapter[2]  # all three bands are there to compare


def test_yarn_has_the_same_pair_bands_in_the_workbench_and_the_chapter():
    facts = stretching_rope.numbers()
    d = scaling_view.wavelengths_view(
        stretching_rope.ROTARY_DIM,
        stretching_rope.BASE,
        stretching_rope.TRAINED,
        ["yarn"],
        seq_len=stretching_rope.TRAINED,
        settings={"factor": stretching_rope.FACTOR},
    )
    yarn = d["methods"]["yarn"]
    assert (yarn["kept"], yarn["divided"]) == (facts["extension.yarn.kept_pairs"], facts["extension.yarn.slowed_pairs"])
    assert yarn["kept"] > 0 and yarn["divided"] > 0


@pytest.mark.parametrize(("factor", "train_len", "head_dim"), [(4.0, 8192, 128), (8.0, 4096, 64), (2.0, 256, 16)])
def test_the_wavelength_view_and_the_stretching_chapter_agree(factor, train_len, head_dim):
    chapter = stretching_rope.stretching(factor, train_len, head_dim)
    methods = ["linear", "ntk", "yarn"]
    bench = scaling_view.wavelengths_view(
        head_dim, 10000.0, train_len, methods, seq_len=train_len, settings={"factor": factor}
    )
    assert chapter["partial_turn_pairs"] + bench["full_turns_in_training"] == head_dim // 2
    by_name = {m["method"]: m for m in chapter["methods"]}
    assert by_name["rope"]["wavelengths"] == bench["default"]["wavelength"]
    for name in methods:
        assert by_name[name]["wavelengths"] == pytest.approx(bench["methods"][name]["wavelength"], rel=1e-12), name
        assert by_name[name]["attention_factor"] == pytest.approx(bench["methods"][name]["attention_factor"]), name


def test_the_precision_view_and_the_precision_check_agree_on_the_checks_head():
    """The workbench's precision readout and the knowledge check's evidence give one float32 error at seat
    1,000,000 when they read one head: the check names its head (128 wide, base 10,000), and the view,
    which shows the head of the RoPE settings, says which head it shows (the number differs by head)."""
    from posenc.teaching.lesson.chapters import knowledge_checks as kc

    lines, values = kc._precision()
    assert f"in a {kc.CHECK_HEAD_DIM}-wide head with base {kc.CHECK_BASE:,.0f}" in lines[0]
    bench = views.precision_view(kc.CHECK_HEAD_DIM, kc.CHECK_BASE, kc.SEAT, kc.SEAT)
    assert max(bench["at_pos"]["float32"]) == pytest.approx(values["float32"], rel=1e-12)
    assert f"{values['float32']:.4f} rad" in lines[0]
    narrower = views.precision_view(64, kc.CHECK_BASE, kc.SEAT, kc.SEAT)
    assert abs(max(narrower["at_pos"]["float32"]) - values["float32"]) > 0.01  # why the view names its head
