"""The lesson tells one story: a table that says it scores the dials' query and key scores them, a column
that says what it measures, one rule for the gap and one way to write an angle. Expected values come from
posenc's own functions or a computation written out here."""

from __future__ import annotations

import re

import pytest
import torch

from posenc.rope.tables import rope_inv_freq
from posenc.t5 import t5_buckets
from posenc.teaching.lesson.chapters import blocks
from posenc.teaching.lesson.chapters.comparison import SCHEMES, TRAINED, compare
from posenc.teaching.lesson.chapters.rope import SEAT_PAIRS, pair_layouts, rope_clock
from posenc.teaching.lesson.manifest import CHAPTERS
from posenc.teaching.lesson.stretching import past_training


# -- chapter 7: "one query and key (seats m + move and n + move of the dials above) scored four ways" ---------
@pytest.mark.parametrize("m, n, shift", [(3, 1, 100), (0, 0, 0), (5, 30, 250), (40, 2, 500)])
def test_the_four_ways_score_the_dials_query_and_key_at_the_dials_seats(m, n, shift):
    dials = rope_clock(8, m, n, shift)
    four = pair_layouts(m + shift, n + shift)
    for way in ("score_half", "score_interleaved", "score_complex", "score_gap_only"):
        assert four[way] == pytest.approx(dials["score_shifted"], abs=1e-12), way
    # and the vectors themselves: the dials' pairs, read as complex numbers, are the table's query
    dial_q = [complex(*p["q"]) for p in dials["pairs"]]
    assert [complex(*z) for z in four["q_complex"]] == pytest.approx(dial_q, abs=0)


# -- chapter 10: the live column says what it measures, and agrees with chapter 8 ----------------------------
def pairs_past(length: int) -> int:
    """Chapter 8's count of plain RoPE's pairs past training, for the comparison's head (32 wide, 4 heads)."""
    inv_freq = rope_inv_freq(32 // 4, 10000.0)
    return int(past_training(inv_freq, inv_freq, TRAINED, length).sum())


@pytest.mark.parametrize("length", [1, 64, 512, 513, 514, 576, 1024, 4096, 8192])
def test_the_comparison_marks_a_length_as_within_training_only_when_it_is(length):
    rows = {r["scheme"]: r for r in compare(length)["schemes"]}
    assert list(rows) == list(SCHEMES)
    for scheme, row in rows.items():
        ticked = row["says"].startswith("✓")
        assert ticked == (row["status"] == "trained"), row
        if scheme == "learned" and length > TRAINED:
            assert row["status"] == "refused" and row["says"].startswith("✗ refused: position 512 is outside")
            continue
        assert row["reads"]  # placed without an error: that alone earns no tick past training
        if scheme == "rope":
            past = pairs_past(length)
            assert ticked == (past == 0)
            if past:
                assert f"{past} of its 4 pairs turn past training (chapter 8)" in row["says"]
        elif scheme == "t5":  # the decoder buckets a longer text reads are all buckets 512 tokens read
            read = set(t5_buckets(torch.tensor([length - 1]), torch.arange(length), 32, 128, False).tolist()[0])
            trained = set(t5_buckets(torch.tensor([TRAINED - 1]), torch.arange(TRAINED), 32, 128, False).tolist()[0])
            assert read <= trained and ticked, row
        else:
            assert ticked == (length <= TRAINED), row
    if length >= 1024:  # chapter 8 marks plain RoPE's slow pairs past training well before 8x
        assert rows["rope"]["status"] == "untrained" and pairs_past(length) >= 2


def test_the_comparison_no_longer_says_that_placing_is_reading():
    text = " ".join(b.text for b in blocks("comparison")) + " ".join(
        cell for b in blocks("comparison") if b.kind == "table" for row in b.rows for cell in row
    )
    assert "can you read a longer" not in text and "it reads any length" not in text
    assert "Placing a position without an error is not reading the text well" in text


# -- chapter 7 and the tour: the gap is m − n; angles are written with the degree sign ----------------------
def test_the_measured_table_prints_the_gap_as_query_seat_minus_key_seat():
    (table,) = [b for b in blocks("rope") if b.kind == "table" and b.text.startswith("The score of one pair")]
    header, *rows = table.rows
    assert header[:3] == ("query seat m", "key seat n", "gap m − n")
    assert [(int(m), int(n)) for m, n, *_ in rows] == list(SEAT_PAIRS)
    for m, n, gap, *_ in rows:
        assert int(gap.replace("−", "-")) == int(m) - int(n)
        assert "-" not in gap  # the page's minus sign, not a hyphen


def test_who_bit_whom_is_written_in_degrees_with_a_true_minus():
    (table,) = [b for b in blocks("rope") if b.kind == "table" and b.text.startswith("Who bit whom")]
    turns = [row[-1] for row in table.rows[1:]]
    assert turns == ["+30°", "−30°"]


@pytest.mark.parametrize("chapter", [c.id for c in CHAPTERS])
def test_no_chapter_writes_an_angle_as_deg(chapter):
    found = []
    for b in blocks(chapter):
        for text in (b.text, *(cell for row in b.rows for cell in row)):
            found += re.findall(r"[−+-]?\d+(?:\.\d+)? deg\b", text)
    assert found == []


def test_the_tour_prints_the_comparison_live_column_as_placed_past_training_not_read(tmp_path):
    """The tour's live column says what the page's does, one short status per cell (the page's full
    sentences name seats at its slider's length and do not fit a terminal column): past training a
    scheme is placed or refused, never said to read the text."""
    import io

    import rich.console

    from posenc.teaching import tour
    from posenc.teaching.tour.comparison import comparison

    out = io.StringIO()
    console = rich.console.Console(file=out, width=200)
    tour.run_tour(tmp_path, console=console, sections=[("compare", comparison)])
    printed = out.getvalue()
    assert "⚠ placed, past training" in printed
    assert "✗ refused" in printed
    assert "✓ within training" in printed
    assert "reads" not in printed.split("Built for")[1]


# -- words a learner meets: no "seed lesson", the right counts, the right growth ----------------------------
def _all_text(chapter: str) -> str:
    out = []
    for b in blocks(chapter):
        out.append(b.text)
        out.extend(cell for row in b.rows for cell in row)
    return "\n".join(out)


@pytest.mark.parametrize("chapter", [c.id for c in CHAPTERS])
def test_no_chapter_speaks_of_a_seed_lesson_the_learner_never_saw(chapter):
    text = _all_text(chapter).lower()
    assert not re.search(r"seed lesson|the seed's|seed picture|seed demo", text)


def test_the_demos_shown_source_speaks_of_no_seed():
    from posenc.teaching.lesson.chapters.pytorch_demo import run_demo

    source = run_demo(100, 4)["source"].lower()
    assert "seed's" not in source and "seed lesson" not in source


def test_the_concatenation_sentence_says_what_the_table_counts():
    """Ch. 13: a matrix that reads a 2d-wide vector and writes d doubles; 2d -> 2d grows fourfold; neither is
    "the square of the width" for a reader who doubles d."""
    from posenc.teaching.lesson.chapters.common_mistakes import numbers

    text = _all_text("common-mistakes")
    assert "grows with the square" not in text
    n = numbers()
    assert n["mistakes.concat.linear.ratio"] == pytest.approx(2, rel=1e-3)  # d*d -> 2d*d (+ no bias)
    assert n["mistakes.concat.block.ratio"] == pytest.approx(4, rel=2e-2)  # width x width matrices throughout
    assert "twice as many inputs, and four times the weights where the output is 2d" in " ".join(text.split())


def test_the_workbench_is_counted_as_many_views_as_it_has_tabs():
    from pathlib import Path

    import posenc.teaching.explorer as explorer

    page = (Path(explorer.__file__).parent / "static" / "index.html").read_text(encoding="utf-8")
    tabs = re.findall(r'<a href="#[a-z-]+" data-view="', page)
    words = {9: "nine", 10: "ten", 11: "eleven", 12: "twelve"}
    assert f"Workbench: the {words[len(tabs)]} expert views" in page
    assert f"the [workbench](#workbench), {words[len(tabs)]} views" in _all_text("big-picture")


def test_the_rotation_matrix_at_a_quarter_turn_is_exactly_zero_where_the_text_says_zero():
    from posenc.teaching.lesson.chapters.rope import rotate_vector

    quarter = rotate_vector(1.0, 0.5, 3, 30.0)  # 3 seats of 30 degrees
    assert quarter["matrix"] == [[0.0, -1.0], [1.0, 0.0]]
    assert quarter["rotated"] == pytest.approx([-0.5, 1.0], abs=1e-15) and 0.0 not in quarter["rotated"]
    half = rotate_vector(2.0, 0.0, 6, 30.0)
    assert half["matrix"] == [[-1.0, 0.0], [0.0, -1.0]] and half["rotated"][1] == 0.0
    # away from the quarter turns nothing is snapped: the entries are cos and sin of the angle
    some = rotate_vector(1.0, 0.5, 1, 25.0)
    assert some["matrix"][0][0] == pytest.approx(0.9063077870366499, abs=1e-15)


@pytest.mark.parametrize("chapter", [c.id for c in CHAPTERS])
def test_every_chapter_opens_in_plain_words_and_a_later_opening_has_its_heading(chapter):
    """The "In plain words" opening is the chapter's first block; a later one (ch. 8's real configs, which
    the tour tells as a section of its own) opens a part under a heading of its own, not mid-text."""
    told = blocks(chapter)
    assert told[0].kind == "plain", told[0]
    for before, block in zip(told, told[1:]):
        if block.kind == "plain":
            assert before.kind == "h3", (chapter, before, block)


@pytest.mark.parametrize("heads", [1, 2, 4, 8, 12, 16, 64])
def test_alibi_slopes_are_written_one_way_per_head_count(heads):
    from posenc.alibi import alibi_slopes
    from posenc.teaching.lesson.chapters.alibi_penalty import alibi_penalty

    texts = [r["slope_text"] for r in alibi_penalty(heads, 10)["rows"]]
    slopes = alibi_slopes(heads).tolist()
    fractions = [bool(re.fullmatch(r"1/\d+", t)) for t in texts]
    assert all(fractions) or not any(fractions), texts  # never "1/2" beside "0.7071"
    for text, slope in zip(texts, slopes):
        value = 1 / int(text[2:]) if text.startswith("1/") else float(text)
        assert value == pytest.approx(slope, rel=1e-3), (text, slope)


def test_chapter_one_says_what_each_of_its_rope_changes_measures():
    """Ch. 1 prints two sizes of RoPE's change (the mirror note's largest change of one word in the figure's
    block, the table's pooled change in TinyLM): the text names both measures, and its per-word figure is
    this model's own, recomputed here from posenc's TinyLM."""
    from posenc.teaching.lesson.chapters import bag_of_tiles as bag
    from posenc.teaching.lesson.formats import sci

    n = bag.numbers()
    model = bag.tiny_model("rope")
    perm = bag.permutation(bag.SENTENCE_A, bag.SENTENCE_B)
    a, b = bag.hidden(model, bag.SENTENCE_A, False), bag.hidden(model, bag.SENTENCE_B, False)
    per_word = float((a[perm] - b).abs().max())
    pooled = float((a.mean(0) - b.mean(0)).abs().max())
    assert n["bag.rope.word_max_diff"] == pytest.approx(per_word, rel=1e-6)
    assert pooled < per_word  # the average hides part of each word's change
    text = " ".join(_all_text("bag-of-tiles").split())
    assert (
        f"RoPE's {sci(pooled)} here and its {n['bag.mirror.rope.largest_difference']:.3f} in the mirror-image note "
        "above measure different things" in text
    )
    assert f"the largest change of one word's output is {sci(per_word)}" in text
