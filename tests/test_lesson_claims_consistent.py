"""The lesson tells one story: a table that says it scores the dials' query and key scores them, a column
that says what it measures, one rule for the gap and one way to write an angle. Expected values come from
posenc's own functions or a computation written out here."""

from __future__ import annotations

import re

import pytest

from posenc.lesson.chapters import blocks
from posenc.lesson.chapters.comparison import SCHEMES, TRAINED, compare
from posenc.lesson.chapters.rope import SEAT_PAIRS, pair_layouts, rope_clock
from posenc.lesson.manifest import CHAPTERS
from posenc.lesson.stretching import past_training
from posenc.rope.tables import rope_inv_freq


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


def test_the_tour_prints_the_comparison_live_column_with_the_pages_sentences(tmp_path):
    import io

    import rich.console

    from posenc import tour
    from posenc.tour.comparison import comparison

    out = io.StringIO()
    console = rich.console.Console(file=out, width=200)
    tour.run_tour(tmp_path, console=console, sections=[("compare", comparison)])
    printed = out.getvalue()
    assert "⚠ placed, but 2 of its 4 pairs turn past training (chapter 8)" in printed
    assert "✗ refused: position 512 is outside the learned position table" in printed
    assert "reads" not in printed.split("Built for")[1]
