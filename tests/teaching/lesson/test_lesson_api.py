"""The lesson's JSON endpoints: the numbers match posenc and an independent float64 reference, every
parameter is bounded, and bad input gets HTTP 422 naming the parameter and the value."""

from __future__ import annotations

import cmath
import math
import re
from pathlib import Path

import pytest
import torch
from fastapi.testclient import TestClient
from lesson_page import chapter_markup

from posenc.learned import PositionOutOfRangeError
from posenc.rope.tables import rope_inv_freq
from posenc.sinusoidal import sinusoidal_table
from posenc.teaching.explorer import lesson
from posenc.teaching.explorer.app import create_app
from posenc.teaching.lesson.chapters import (
    bad_ideas,
    bag_of_tiles,
    big_picture,
    clock_hands,
    common_mistakes,
    comparison,
    learned_tables,
    pytorch_demo,
    rope,
    stretching_rope,
    three_rules,
    word_plus_position,
)
from posenc.teaching.lesson.manifest import CHAPTERS
from posenc.teaching.lesson.mistakes import ROUNDING_LEVEL

INDEX = Path(lesson.__file__).with_name("static") / "index.html"


@pytest.fixture(scope="module")
def client():
    return TestClient(create_app(), base_url="http://127.0.0.1")


def get(client, path, **params):
    response = client.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


# -- chapters ---------------------------------------------------------------------------------------
def test_chapters_are_listed_in_order_and_on_the_page(client):
    d = get(client, "/api/lesson/chapters")
    ids = [c["id"] for c in d["chapters"]]
    assert ids == [c.id for c in CHAPTERS] and len(set(ids)) == len(ids)
    # the page builds each chapter's kicker and imports its script from these
    assert [(c["title"], c["level"], c["module"]) for c in d["chapters"]] == [
        (c.title, c.level, c.module) for c in CHAPTERS
    ]
    assert all(c["level"] for c in d["chapters"])
    # the page writes the articles itself, from this list (the browser tests read them in its order)
    assert "<article" not in INDEX.read_text(encoding="utf-8")
    assert set(d["sources"].values()) <= set(ids)
    assert d["limits"]["tokens"]["maximum"] == lesson.LESSON_LIMITS["tokens"].maximum


def test_every_inline_check_exists_in_the_quiz():
    from posenc.teaching.explorer.quiz import BY_ID

    named = [check for chapter in CHAPTERS for check in chapter.checks]
    assert sorted(named) == sorted(BY_ID)  # each check is placed exactly once
    for chapter in CHAPTERS:
        for check in chapter.checks:
            block = chapter_markup(chapter.id)
            assert re.search(rf'data-checks="[^"]*\b{check}\b', block), (chapter.id, check)


# -- 1. bag of tiles ----------------------------------------------------------------------------------
def test_without_positions_a_shuffle_changes_no_output(client):
    d = get(client, "/api/lesson/bag", text="the dog bit the man", shuffle=3, scheme="nope")
    assert d["order"] != list(range(5)) and sorted(d["order"]) == list(range(5))
    assert d["shuffled"] == [d["words"][i] for i in d["order"]]
    assert d["largest_difference"] < 1e-12
    assert torch.allclose(torch.tensor(d["outputs"]), torch.tensor(d["outputs_shuffled"]), atol=1e-12)


@pytest.mark.parametrize("scheme", ["sinusoidal", "learned", "rope", "alibi"])
def test_with_positions_a_shuffle_changes_the_outputs(client, scheme):
    d = get(client, "/api/lesson/bag", text="the dog bit the man", shuffle=3, scheme=scheme)
    assert d["largest_difference"] > 1e-4


def test_shuffle_zero_keeps_the_sentence(client):
    d = get(client, "/api/lesson/bag", text="a b c", shuffle=0, scheme="rope")
    assert d["order"] == [0, 1, 2] and d["largest_difference"] == 0.0


# -- 2. word + position ---------------------------------------------------------------------------------
@pytest.mark.parametrize("d_model, std", [(8, 1.0), (16, 0.02), (32, 0.02 * math.sqrt(32))])
def test_input_is_word_plus_the_sinusoidal_row(client, d_model, std):
    d = get(client, "/api/lesson/input", word="dog", seat=7, d_model=d_model, embed_std=std)
    word, pos, x = (torch.tensor(d[k], dtype=torch.float64) for k in ("word_vector", "position_vector", "input"))
    assert len(word) == len(pos) == len(x) == d_model
    torch.testing.assert_close(pos, sinusoidal_table(8, d_model)[7].double(), atol=1e-6, rtol=0)
    torch.testing.assert_close(x, word + pos, atol=1e-12, rtol=0)
    assert d["position_norm"] == pytest.approx(math.sqrt(d_model / 2), rel=1e-6)
    assert d["ratio"] == pytest.approx(d["position_norm"] / d["word_norm"])


# -- 3. bad ideas -------------------------------------------------------------------------------------------
def test_raw_integers_drown_the_word_and_fractions_change_step(client):
    d = get(client, "/api/lesson/bad-ideas", raw_seat=500, sentence_len=100)
    assert d["stamped"] == pytest.approx([500.42, 499.85])
    assert d["cosine_raw"] > 0.9999 > d["cosine_words"]  # two words, one direction
    assert abs(d["cosine_sine"]) < 0.99
    assert d["step"] == pytest.approx(0.01) and d["step_4_words"] == pytest.approx(0.25)
    assert d["fractions"][:3] == pytest.approx([0.0, 0.01, 0.02])


# -- 4. three rules ---------------------------------------------------------------------------------------
def test_only_the_sine_code_passes_all_three_rules(client):
    d = get(client, "/api/lesson/rules", length=1000, d_model=64)
    rows = {r["code"]: r for r in d["codes"]}
    sinusoidal = rows["sinusoidal"]
    assert (sinusoidal["bounded"], sinusoidal["consistent"], sinusoidal["unique"]) == (True, True, True)
    assert rows["raw integers"]["bounded"] is False and rows["raw integers"]["largest"] == 999.0
    assert rows["fractions"]["bounded"] is True and rows["fractions"]["consistent"] is False
    assert rows["fractions"]["step_this_sentence"] == pytest.approx(8.0 / 1000)  # 1/1000 in 64 columns
    # at exactly five words the fractions are consistent with themselves
    assert {r["code"]: r for r in get(client, "/api/lesson/rules", length=5, d_model=16)["codes"]}["fractions"][
        "consistent"
    ] is True


# -- 5. clock hands -------------------------------------------------------------------------------------
def test_the_hands_are_the_table_columns_of_the_seat(client):
    d = get(client, "/api/lesson/clock", seat=5, d_model=64)
    assert (
        "fingerprint" not in d
    )  # the four-seat table is the chapter's text (posenc.teaching.lesson.chapters.clock_hands)
    table = sinusoidal_table(6, 64)
    for hand in d["hands"]:
        assert (hand["sin"], hand["cos"]) == pytest.approx(
            (float(table[5, hand["columns"][0]]), float(table[5, hand["columns"][1]])), abs=1e-7
        )
    for hand in d["hands"]:
        assert hand["angle"] == pytest.approx(5 * hand["frequency"])
        assert hand["sin"] == pytest.approx(math.sin(hand["angle"]), abs=1e-6)
        assert hand["cos"] == pytest.approx(math.cos(hand["angle"]), abs=1e-6)
        # the drawn wave passes through the table's value at every whole seat
        at_seats = hand["curve"][::8]
        column = sinusoidal_table(65, 64)[:, hand["columns"][0]]
        assert at_seats == pytest.approx(column.tolist(), abs=1e-6)
        assert at_seats == pytest.approx(hand["wave"], abs=1e-6)
    speeds = [h["frequency"] for h in d["hands"]]
    assert speeds == sorted(speeds, reverse=True) and speeds[0] == 1.0


# -- 6. learned tables --------------------------------------------------------------------------------------
def test_512_tokens_read_and_513_hit_the_wall(client):
    ok = get(client, "/api/lesson/learned", tokens=512, stretch_to=1024)
    assert ok["ok"] is True and ok["shape"] == [1, 512, learned_tables.FIGURE_WIDTH]
    wall = get(client, "/api/lesson/learned", tokens=513, stretch_to=1024)
    assert wall["ok"] is False and wall["first_missing"] == 512
    assert wall["error"] == str(PositionOutOfRangeError(512, 512))
    assert wall["error_type"] == "PositionOutOfRangeError" and wall["stretched_reads_tokens"] is True
    # interpolated rows lie on the segments between trained rows, and every row drawn has both of them drawn
    # (the first new row once sat before the first trained row drawn, with nothing on its left)
    old = dict(zip(wall["old_positions"], wall["old_values"]))
    for at, value in zip(wall["new_at_old_scale"], wall["new_values"]):
        lo, hi = math.floor(at), min(math.ceil(at), 511)
        assert lo in old and hi in old, (at, sorted(old))
        assert min(old[lo], old[hi]) - 1e-6 <= value <= max(old[lo], old[hi]) + 1e-6


# -- 7. RoPE --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("a, b, seat, theta", [(1.0, 0.5, 1, 30.0), (-2.0, 3.0, 7, -45.0), (0.3, -0.1, 1000, 179.0)])
def test_rotation_matches_the_matrix_counter_clockwise(client, a, b, seat, theta):
    d = get(client, "/api/lesson/rotate", a=a, b=b, seat=seat, theta_deg=theta)
    turned = complex(a, b) * cmath.exp(1j * math.radians(theta) * seat)  # independent reference
    assert d["rotated"] == pytest.approx([turned.real, turned.imag], abs=1e-12)
    assert d["rotated_length"] == pytest.approx(math.hypot(a, b), rel=1e-12)
    assert d["matrix"][1][0] == pytest.approx(math.sin(math.radians(theta * seat)))  # sin below the diagonal


def test_positive_angles_turn_counter_clockwise(client):
    d = get(client, "/api/lesson/rotate", a=1.0, b=0.0, seat=1, theta_deg=30.0)
    assert d["rotated"][1] > 0  # (1, 0) turns up: counter-clockwise


def test_rope_scores_depend_only_on_the_gap(client):
    d = get(client, "/api/lesson/rope", head_dim=8, m=13, n=4, shift=777)
    assert d["score"] == pytest.approx(d["score_shifted"], abs=1e-12)
    assert d["score"] == pytest.approx(d["score_gap_only"], abs=1e-12)
    assert d["gap"] == 13 - 4  # query seat minus key seat
    assert abs(d["score"] - d["score_unrotated"]) > 1e-6
    inv = rope_inv_freq(8).tolist()
    ref = 0.0
    for p, theta in zip(d["pairs"], inv):  # complex-number reference per pair
        q = complex(*p["q"]) * cmath.exp(1j * 13 * theta)
        k = complex(*p["k"]) * cmath.exp(1j * 4 * theta)
        assert p["q_rotated"] == pytest.approx([q.real, q.imag], abs=1e-12)
        assert p["q_turn_deg"] == pytest.approx(math.degrees(13 * theta))
        assert p["gap_deg"] == pytest.approx(math.degrees(9 * theta))
        moved = complex(*p["k"]) * cmath.exp(1j * (4 + 777) * theta)  # what the dials draw
        assert p["k_moved"] == pytest.approx([moved.real, moved.imag], abs=1e-9)
        ref += (q * k.conjugate()).real
    assert d["score"] == pytest.approx(ref, abs=1e-12)


def test_swapping_dog_and_man_flips_the_turn(client):
    a = get(client, "/api/lesson/order", sentence=0, degrees=30.0)
    b = get(client, "/api/lesson/order", sentence=1, degrees=30.0)
    # the seed's numbers: "dog" at 30 and "bit" at 60 degrees in A, "dog" at 90 in B
    assert a["turn_dog_to_bit_deg"] == 30.0 and b["turn_dog_to_bit_deg"] == -30.0
    assert a["angles_deg"] == [0.0, 30.0, 60.0, 90.0]
    assert (a["dog_seat"], a["bit_seat"], b["dog_seat"]) == (1, 2, 3)
    assert a["score_nope"] == b["score_nope"]
    assert abs(a["score_rope"] - b["score_rope"]) > 0.1


# -- 8. stretching ---------------------------------------------------------------------------------------------
def test_pairs_past_training_point_the_right_way(client):
    d = get(client, "/api/lesson/stretch", factor=8.0, train_len=8192, head_dim=128)
    by = {m["method"]: m for m in d["methods"]}
    plain = torch.tensor(by["rope"]["wavelengths"])
    torch.testing.assert_close(torch.tensor(by["linear"]["wavelengths"]), plain * 8, rtol=1e-12, atol=0)
    assert by["ntk"]["fastest_theta"] == pytest.approx(1.0) and by["yarn"]["fastest_theta"] == pytest.approx(1.0)
    assert by["yarn"]["wavelengths"][-1] == pytest.approx(plain[-1].item() * 8)
    # independent count: pairs with less than a full turn in training whose last angle goes past it
    theta = 2 * math.pi / plain.double()
    partial = 8192 * theta < 2 * math.pi
    assert d["partial_turn_pairs"] == int(partial.sum()) > 0
    for name, m in by.items():
        now = 2 * math.pi / torch.tensor(m["wavelengths"], dtype=torch.float64)
        expected = partial & ((8 * 8192 - 1) * now > 8192 * theta)
        assert m["past_training"] == expected.tolist(), name
        assert m["pairs_past_training"] == int(expected.sum())
    # plain RoPE: every partial-turn pair; linear and YaRN: none; NTK in between
    assert by["rope"]["pairs_past_training"] == d["partial_turn_pairs"]
    assert by["linear"]["pairs_past_training"] == 0 == by["yarn"]["pairs_past_training"]
    assert 0 < by["ntk"]["pairs_past_training"] < by["rope"]["pairs_past_training"]
    middle = len(plain) // 2  # NTK slows the middle pairs less than linear does
    assert plain[middle] < by["ntk"]["wavelengths"][middle] < by["linear"]["wavelengths"][middle]
    assert by["yarn"]["attention_factor"] > 1.0 == by["linear"]["attention_factor"]


def test_the_tour_and_the_lesson_count_pairs_past_training_alike():
    from posenc.teaching.tour import extension

    d = stretching_rope.stretching(extension.FACTOR, extension.TRAINED, extension.ROTARY_DIM)
    by = {m["method"]: m["pairs_past_training"] for m in d["methods"]}
    default, _ = extension.rope_frequencies(None, extension.ROTARY_DIM, extension.BASE)
    length = int(extension.TRAINED * extension.FACTOR)
    for tour_name, lesson_name in (("default", "rope"), ("linear", "linear"), ("ntk", "ntk"), ("yarn", "yarn")):
        inv_freq, _ = extension.rope_frequencies(extension.scalings()[tour_name], extension.ROTARY_DIM, extension.BASE)
        assert int(extension.unseen_mask(inv_freq, default, extension.TRAINED, length).sum()) == by[lesson_name]


# -- 9. comparison ---------------------------------------------------------------------------------------------
def test_only_the_learned_table_stops_past_512(client):
    fits = {r["scheme"]: r for r in get(client, "/api/lesson/compare", length=512)["schemes"]}
    assert all(r["reads"] and r["finite"] for r in fits.values())
    past = {r["scheme"]: r for r in get(client, "/api/lesson/compare", length=513)["schemes"]}
    assert [s for s, r in past.items() if not r["reads"]] == ["learned"]
    assert past["learned"]["error"] == str(PositionOutOfRangeError(512, 512))
    assert past["learned"]["extra_parameters"] == 512 * 32
    assert past["t5"]["extra_parameters"] == 32 * 4  # T5's table: 32 buckets for each of 4 heads
    assert all(r["extra_parameters"] == 0 for s, r in past.items() if s not in ("learned", "t5"))


# -- 10. demo ----------------------------------------------------------------------------------------------------
def test_demo_writes_the_seed_out_from_scratch_and_reproduces_its_numbers(client):
    d = get(client, "/api/lesson/demo", shift=100, d_model=4)
    source, out = d["source"], d["output"]
    assert source.startswith("def pytorch_demo")
    # from scratch: the frequency formula and the 2-D rotation are written out, before posenc is used
    assert "torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))" in source
    assert "x1 * cos_a - x2 * sin_a, x1 * sin_a + x2 * cos_a" in source
    assert "theta: float = 0.5" in source
    assert out[0] == "seat 0 wave vector: [0.0, 1.0, 0.0, 1.0]"
    assert out[1] == "seat 1 wave vector: [0.841, 0.54, 0.01, 1.0]"  # the seed's second row
    # the seed's printed score, at seats 1 and 3 and at 101 and 103, from scratch and from posenc
    assert out[2] == "score, seats 1 and 3: 0.65457"
    assert out[3] == "score, seats 101 and 103: 0.65457"
    assert out[4] == "posenc's table matches: True"
    assert out[5] == "posenc, seats 1 and 3: 0.65457" and out[6] == "posenc, seats 101 and 103: 0.65457"
    ref = (complex(1.0, 0.5) * cmath.exp(0.5j) * (complex(0.8, 0.2) * cmath.exp(1.5j)).conjugate()).real
    assert round(ref, 5) == 0.65457


def test_the_demo_prints_the_tours_score():
    from posenc.teaching.tour import rotary

    d = pytorch_demo.run_demo(100, 4)
    tour = rotary.pair_score(rotary.QUERY, rotary.KEY, 1, 3)  # what the tour prints for seats 1 and 3
    assert (rotary.THETA, rotary.QUERY, rotary.KEY) == (0.5, (1.0, 0.5), (0.8, 0.2))
    assert d["output"][2] == f"score, seats 1 and 3: {tour:.5f}"


# -- 12. mistakes ------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_each_mistake_is_measured(client):
    d = get(client, "/api/lesson/mistakes", steps=2, d_model=512, shift=100)
    assert d["parameter"]["buffer"]["largest_change"] == 0.0 and d["parameter"]["buffer"]["trainable"] == 0
    assert d["parameter"]["parameter"]["largest_change"] > 1e-3 and d["parameter"]["parameter"]["trainable"] == 32 * 32
    assert 3.9 < d["concat"]["ratio"] < 4.0
    assert d["values"]["qk_only"] < 1e-12
    assert d["values"]["with_v"] > 0.1


# -- 13. big picture ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("scheme", ["nope", "sinusoidal", "rope", "alibi", "learned"])
@pytest.mark.parametrize("model", ["trained", "untrained"])
def test_only_nopes_first_block_cannot_tell_who_bit_whom(client, scheme, model):
    d = get(client, "/api/lesson/big-picture", scheme=scheme, model=model)
    assert d["first_rounding"] is (scheme == "nope") and d["last_rounding"] is False
    assert max(d["first_difference"], d["last_difference"]) <= d["scale"]  # one axis for every scheme and model


# -- bad input -------------------------------------------------------------------------------------------------
BAD = [
    ("/api/lesson/bag", {"shuffle": 10_000}, "shuffle", "10000"),
    ("/api/lesson/bag", {"scheme": "t5"}, "scheme", "t5"),
    ("/api/lesson/bag", {"text": "   "}, "text", "'   '"),
    ("/api/lesson/bag", {"text": " ".join(["w"] * 30)}, "text", "30"),
    ("/api/lesson/input", {"seat": -1}, "seat", "-1"),
    ("/api/lesson/input", {"d_model": 15}, "d_model", "15"),
    ("/api/lesson/input", {"embed_std": "nan"}, "embed_std", "nan"),
    ("/api/lesson/bad-ideas", {"raw_seat": 100_001}, "raw_seat", "100001"),
    ("/api/lesson/bad-ideas", {"sentence_len": 1}, "sentence_len", "1"),
    ("/api/lesson/rules", {"length": 2049}, "length", "2049"),
    ("/api/lesson/rules", {"d_model": 7}, "d_model", "7"),
    ("/api/lesson/clock", {"d_model": 2}, "d_model", "2"),
    ("/api/lesson/clock", {"seat": "ten"}, "seat", "ten"),
    ("/api/lesson/learned", {"tokens": 0}, "tokens", "0"),
    ("/api/lesson/learned", {"stretch_to": 512}, "stretch_to", "512"),
    ("/api/lesson/rotate", {"a": "inf"}, "a", "inf"),
    ("/api/lesson/rotate", {"theta_deg": 181}, "theta_deg", "181"),
    ("/api/lesson/rope", {"head_dim": 7}, "head_dim", "7"),
    ("/api/lesson/rope", {"head_dim": 18}, "head_dim", "18"),
    ("/api/lesson/rope", {"shift": 10**9}, "shift", "1000000000"),
    ("/api/lesson/order", {"sentence": 2}, "sentence", "2"),
    ("/api/lesson/stretch", {"factor": 0.5}, "factor", "0.5"),
    ("/api/lesson/stretch", {"head_dim": 131}, "head_dim", "131"),
    ("/api/lesson/compare", {"length": 9000}, "length", "9000"),
    ("/api/lesson/demo", {"d_model": 3}, "d_model", "3"),
    ("/api/lesson/mistakes", {"steps": 11}, "steps", "11"),
    ("/api/lesson/big-picture", {"scheme": "NoPE"}, "scheme", "NoPE"),
]


@pytest.mark.parametrize("path, params, name, value", BAD, ids=[f"{p.rsplit('/', 1)[1]}-{n}-{v}" for p, _, n, v in BAD])
def test_bad_input_is_refused_with_the_parameter_and_value(client, path, params, name, value):
    response = client.get(path, params=params)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert name in detail and value in detail, detail


DIRECT = [
    (bag_of_tiles.bag_of_tiles, ("the dog", -1, "nope"), "shuffle"),
    (word_plus_position.word_plus_position, ("dog", 4096, 16, 1.0), "seat"),
    (word_plus_position.word_plus_position, ("dog", 3, 16, 0.0), "embed_std"),
    (bad_ideas.bad_ideas, (500, 100_001), "sentence_len"),
    (three_rules.three_rules, (1, 16), "rules_len"),
    (clock_hands.clock_hands, (3, 258), "d_model"),
    (learned_tables.learned_wall, (4097, 1024), "tokens"),
    (rope.rotate_vector, (1.0, math.nan, 1, 30.0), "b"),
    (rope.rope_clock, (8, 3, 100_001, 0), "n"),
    (rope.word_order, (0, 180.0), "order_deg"),
    (stretching_rope.stretching, (65.0, 8192, 128), "factor"),
    (comparison.compare, (0,), "compare_len"),
    (pytorch_demo.run_demo, (-5, 4), "shift"),
    (common_mistakes.mistakes, (1, 4096, 10), "concat_d_model"),
    (big_picture.big_picture, ("rotary",), "scheme"),
]


@pytest.mark.parametrize("function, args, name", DIRECT, ids=[f"{f.__name__}-{n}" for f, _, n in DIRECT])
def test_functions_refuse_bad_values_themselves(function, args, name):
    """The pure functions check their inputs too, not only behind the API."""
    with pytest.raises(ValueError, match=re.escape(name)):
        function(*args)


def test_the_apis_limits_are_the_chapters_figure_ranges():
    """Every range a chapter module declares is the API's limit, and nothing else is."""
    from posenc.teaching.lesson.chapters import MODULES

    declared = {}
    for module in MODULES.values():
        declared.update(getattr(module, "FIGURE_RANGES", {}))
    assert set(lesson.LESSON_LIMITS) == set(declared)
    for name, (minimum, maximum, default, help_) in declared.items():
        assert lesson.LESSON_LIMITS[name].to_dict() == {
            "minimum": minimum,
            "maximum": maximum,
            "default": default,
            "help": help_,
        }


def test_two_chapters_giving_one_parameter_two_ranges_is_refused(monkeypatch):
    from posenc.teaching.lesson.chapters import figure_ranges

    changed = dict(pytorch_demo.FIGURE_RANGES, shift=(0, 5, 1, "another shift"))
    monkeypatch.setattr(pytorch_demo, "FIGURE_RANGES", changed)
    with pytest.raises(ValueError, match=r"'shift' has two ranges.*'rope'.*'pytorch-demo'"):
        figure_ranges()


# -- one source: the tour and the lesson print the same numbers ----------------------------------------------
def test_the_tour_and_the_lesson_print_the_same_mistakes_from_one_source(tmp_path):
    """``posenc tour --section mistakes`` and the lesson's chapter take their numbers from
    posenc.teaching.lesson.mistakes: the same drift, block sizes and changes, and the tour prints them."""
    import rich.console

    from posenc.teaching import tour

    console = rich.console.Console(record=True, width=200)
    section = next(s for s in tour.SECTIONS if s.name == "mistakes")
    facts = tour.run_tour(tmp_path, console=console, sections=[section]).facts
    printed = console.export_text()
    page = common_mistakes.mistakes(1, common_mistakes.WIDE, common_mistakes.SHIFT)
    assert facts["mistakes.parameter.parameter_change"] == page["parameter"]["parameter"]["largest_change"] > 1e-3
    assert facts["mistakes.parameter.buffer_change"] == page["parameter"]["buffer"]["largest_change"] == 0.0
    assert facts["mistakes.concat.block.concatenated"] == page["concat"]["concatenated"]
    assert facts["mistakes.rotate_v.rotated_shift_diff"] == page["values"]["with_v"] > 0.1
    assert facts["mistakes.rotate_v.correct_shift_diff"] == page["values"]["qk_only"] <= ROUNDING_LEVEL
    assert common_mistakes.sci(page["parameter"]["parameter"]["largest_change"]) in printed
    assert f"{page['values']['with_v']:.3f}" in printed
    assert f"{page['concat']['concatenated']:,}" in printed


def test_each_mistake_and_the_rotate_values_demo_is_written_once():
    """The Parameter-table class and the rotated-values demo exist once, in posenc.teaching.lesson.mistakes;
    the tour, the lesson and the knowledge check use that one."""
    from posenc.teaching.explorer import quiz
    from posenc.teaching.lesson import mistakes as one

    src = Path(one.__file__).parents[1]
    defined = [
        str(p.relative_to(src))
        for p in src.rglob("*.py")
        for line in p.read_text().splitlines()
        if re.match(r"\s*class \w*AsParameter\b|\s*def values_rotated\(|\s*def last_output\(", line)
    ]
    assert sorted(defined) == ["lesson/mistakes.py", "lesson/mistakes.py"], defined
    assert common_mistakes.SinusoidalAsParameter is one.SinusoidalAsParameter  # the chapter the tour prints
    values = quiz.answer("qk-only", 0)["values"]
    change = one.rotated_values_change(values["shift"])
    assert values["change_with_v"] == change["with_v"] and values["change_qk_only"] == change["qk_only"]


def test_the_written_out_adam_is_torch_adam():
    """posenc.teaching.lesson.mistakes.adam_steps (no torch.optim import on a first call) moves parameters as
    torch.optim.Adam does."""
    from posenc.teaching.lesson.mistakes import adam_steps

    g = torch.Generator().manual_seed(0)
    target = torch.randn(5, 3, generator=g)
    start = [torch.randn(5, 3, generator=g), torch.randn(3, generator=g)]
    mine = [p.clone().requires_grad_() for p in start]
    theirs = [p.clone().requires_grad_() for p in start]

    def loss(ps):
        return ((ps[0] * ps[1] - target) ** 2).sum()

    adam_steps(mine, lambda: loss(mine), 7, 0.05)
    optimizer = torch.optim.Adam(theirs, lr=0.05)
    for _ in range(7):
        optimizer.zero_grad()
        loss(theirs).backward()
        optimizer.step()
    for a, b in zip(mine, theirs):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
        assert not torch.equal(a, start[0] if a.ndim == 2 else start[1])


@pytest.mark.parametrize("m, n", [(3, 1), (103, 101), (0, 40)])
def test_both_pair_conventions_the_complex_view_and_the_gap_give_one_score(client, m, n):
    d = get(client, "/api/lesson/pairs", m=m, n=n)
    assert d["pairs_half"] == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert d["pairs_interleaved"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    scores = [d[k] for k in ("score_half", "score_interleaved", "score_complex", "score_gap_only")]
    assert max(scores) - min(scores) < 1e-12 and d["complex_vs_matrix"] < 1e-12
    shifted = rope.pair_layouts(m + 500, n + 500)
    assert shifted["score_half"] == pytest.approx(d["score_half"], abs=1e-12)
