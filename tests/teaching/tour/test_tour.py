"""``posenc tour`` as a whole: every section prints its title and opens in plain words, tells a chapter of
the manifest, names its figures (valid PNGs) and records each number once; sections are pluggable and
chosen by number or name on the command line, and bad arguments are refused in words.

The tour runs once per session into a temporary folder, printed at 80 columns as in a pipe
(``conftest``'s ``ran``); ``test_tour_chapter_numbers`` checks what each chapter prints.
"""

from __future__ import annotations

import io
import math
import re
import struct

import pytest
import rich.console
import torch

import posenc.teaching.tour as tour
from posenc.cli import main as cli_main
from posenc.teaching.lesson.chapters import bag_of_tiles as bag
from posenc.teaching.lesson.prose import plain as plain_words
from posenc.teaching.tour._show import PLAIN_PREFIX
from posenc.teaching.tour.telling import Telling, tell

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


FIGURES = ("sinusoidal_heatmap", "rope_clock_dials", "rope_scaling_wavelengths", "real_config_wavelengths")

#: What ``posenc tour | cat`` gets: rich's default width when stdout is not a terminal (``conftest``'s
#: ``ran`` prints at this width).
NARROW = 80


def test_every_section_prints_its_title(ran):
    _, text = ran
    for i, section in enumerate(tour.SECTIONS, 1):
        assert f"{i}. {section.title}" in text


def section_texts(text: str) -> dict:
    """The printed tour cut at each section's title rule: section name -> its text."""
    rules = [(text.index(f" {i}. {s.title} "), s.name) for i, s in enumerate(tour.SECTIONS, 1)]
    rules.sort()
    out = {}
    for (start, name), (stop, _) in zip(rules, rules[1:] + [(len(text), None)]):
        out[name] = text[start:stop].split("\n", 1)[1]
    return out


#: Technical terms, and the everyday words the tour must print before each one's first use.
JARGON = {
    "block-diagonal": "turns every clock hand by the same amount",
    "non-persistent": "the optimizer never touches it",
    '"meta" device': "a shape but no memory",
}


def test_every_section_opens_in_plain_words(ran):
    _, text = ran
    for name, body in section_texts(text).items():
        first = body.lstrip().splitlines()[0]
        assert first.startswith(PLAIN_PREFIX), (name, first)
        opening = " ".join(body.lstrip().split("\n\n")[0].split())
        for term in ("buffer", "block diagonal", "meta device", "theta", "sqrt", "R_k", "dtype"):
            assert term not in opening, (name, term)


def test_every_section_opens_with_its_chapters_own_plain_words(ran):
    """The tour holds no text of its own: the first line of every section is the first "plain" block of
    the part of the chapter it tells, the one the page shows too."""
    from posenc.teaching.lesson import chapters
    from posenc.teaching.lesson.manifest import chapter_of_section

    texts = section_texts(ran[1])
    for name in tour.section_names():
        told = chapters.blocks(chapter_of_section(name).id)
        if name == "configs":  # the second part of its chapter opens at its own plain block
            told = [b for b in told if b.slot.startswith("configs")]
        first_block = next(b for b in told if b.kind == "plain")
        first = " ".join(texts[name].lstrip().split("\n\n")[0].split())
        assert first == f"{PLAIN_PREFIX} {plain_words(first_block.text)}", (name, first)


def test_the_tour_records_every_number_of_every_chapter_once(facts):
    """Sections that tell part of a chapter (extension, configs) split its numbers between them:
    together the tour records each chapter's every number, with the chapter's value."""
    from posenc.teaching.lesson import chapters

    for chapter_id in chapters.MODULES:
        for key, value in chapters.numbers(chapter_id).items():
            assert key in facts, (chapter_id, key)
            assert repr(facts[key]) == repr(value), (chapter_id, key)


def test_a_section_tells_a_chapter_of_the_manifest(tmp_path):
    with pytest.raises(ValueError, match="'no-such-section'.*no chapter"):
        Telling("no-such-section")
    assert Telling("alibi").chapter == "alibi-penalty" and Telling("big-picture").chapter == "big-picture"
    ctx = tour.TourContext(console=rich.console.Console(file=io.StringIO()), out_dir=tmp_path, facts={})
    with pytest.raises(ValueError, match="chapter_id.*'no-such-chapter'.*written: bag-of-tiles"):
        tell(ctx, "no-such-chapter")
    assert ctx.facts == {}


def test_jargon_is_explained_before_its_first_use(flowing):
    for term, words in JARGON.items():
        assert term in flowing and words in flowing, term
        assert flowing.index(words) < flowing.index(term), term


def test_figures_are_named_in_the_prose_that_discusses_them(ran):
    _, text = ran
    for name in FIGURES:
        owner = [
            body
            for body in section_texts(text).values()
            if "figure written: " in body and f"{name}.png" in body.split("figure written:")[-1]
        ]
        assert len(owner) == 1, name
        prose = " ".join(owner[0].split("figure written:")[0].split())
        assert f"Figure {name}.png" in prose, name


@pytest.mark.parametrize("name", FIGURES)
def test_figures_are_valid_pngs(ran, name):
    ctx, _ = ran
    path = ctx.out_dir / f"{name}.png"
    assert path.is_file() and ctx.facts[f"figure.{name}"] == str(path)
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 300 and height > 200
    assert data.rstrip(b"\0")[-8:-4] == b"IEND"


def printed_intact(text: str, number: str) -> bool:
    """``number`` appears as a whole token: not split over two lines, not part of a longer number."""
    return re.search(rf"(?<![\d,.]){re.escape(number)}(?![\d,]|\.\d)", text) is not None


def test_printed_intact_helper():
    assert printed_intact("context 131,072 tokens", "131,072")
    assert not printed_intact(" 131,07 \n 2 ", "131,072")
    assert not printed_intact("1,131,072", "131,072") and not printed_intact("131,0721", "131,072")
    assert not printed_intact("131,072.5", "131,072") and printed_intact("131,072.", "131,072")


def test_no_large_integer_is_split_at_80_columns(ran):
    ctx, text = ran
    assert max(len(line) for line in text.splitlines()) <= NARROW
    for key, value in ctx.facts.items():
        if isinstance(value, int) and not isinstance(value, bool) and value >= 100:
            assert printed_intact(text, f"{value:,}") or printed_intact(text, str(value)), (key, value)


def test_facts_are_plain_numbers_or_data(facts):
    for key, value in facts.items():
        assert isinstance(value, (int, float, str, bool, list, dict, type(None))), key
        if isinstance(value, float):
            assert math.isfinite(value), key


def test_run_tour_rejects_bad_output(tmp_path):
    with pytest.raises(TypeError, match="out_dir"):
        tour.run_tour(123)
    target = tmp_path / "a-file"
    target.write_text("x")
    with pytest.raises(ValueError, match="a-file"):
        tour.run_tour(target)
    with pytest.raises(TypeError, match="console"):
        tour.run_tour(tmp_path, console="stdout")


def test_sections_are_pluggable(tmp_path):
    seen = []

    def custom(ctx):
        seen.append(ctx.out_dir)
        ctx.record("custom.answer", 42)
        with pytest.raises(ValueError, match="already recorded"):
            ctx.record("custom.answer", 43)
        with pytest.raises(ValueError, match="plain file stem"):
            ctx.figure_path("../escape")

    console = rich.console.Console(file=io.StringIO())
    ctx = tour.run_tour(tmp_path / "new" / "dir", console=console, sections=[("Custom", custom)])
    assert seen == [tmp_path / "new" / "dir"] and ctx.facts == {"custom.answer": 42}


def test_tour_leaves_the_callers_random_state_alone(tmp_path):
    torch.manual_seed(1234)
    expected = torch.rand(3)
    torch.manual_seed(1234)
    tour.run_tour(tmp_path, console=rich.console.Console(file=io.StringIO()), sections=[("bag", Telling("bag"))])
    assert torch.equal(torch.rand(3), expected)


def test_cli_runs_the_tour(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tour, "SECTIONS", [("1. A bag of tiles", Telling("bag"))])
    assert cli_main(["tour", "--out", str(tmp_path / "cli")]) == 0
    out = capsys.readouterr().out
    assert "A bag of tiles" in out and "Tour finished" in out


def test_bag_margin_over_nope(facts):
    smallest = min(facts[f"bag.{s}.pooled_max_diff"] for s in ("sinusoidal", "learned", "rope", "alibi"))
    ratio = facts["bag.smallest_scheme_over_nope"]
    if facts["bag.nope.pooled_max_diff"] > 0:
        assert ratio == pytest.approx(smallest / facts["bag.nope.pooled_max_diff"])
    else:
        assert ratio is None
    assert 0.01 < facts["bag.token_std"] < 0.03  # TinyLM's N(0, 0.02) initialisation


def test_big_picture_closes_the_tour(ran, facts):
    _, text = ran
    assert tour.SECTIONS[-1].name == "big-picture"
    body = section_texts(text)["big-picture"]
    assert "Key points" in body and "The big picture." in body
    assert facts["big.nope_difference"] < bag.NOPE_TOLERANCE < bag.SCHEME_MARGIN < facts["big.rope_difference"]
    assert facts["big.sine_max_abs"] <= 1.0 and facts["big.learned_refuses_last_plus_one"] is True
    assert facts["big.rope_score_near"] == pytest.approx(facts["rope.demo.score.1.3"], abs=1e-12)
    assert facts["big.rope_score_far"] == pytest.approx(facts["big.rope_score_near"], abs=1e-9)


def test_select_sections_by_number_and_name():
    names = tour.section_names()
    assert len(names) == len(set(names)) == len(tour.SECTIONS)
    rope = str(names.index("rope") + 1)
    assert [s.name for s in tour.select_sections([rope, "bag", " Big-Picture "])] == ["rope", "bag", "big-picture"]
    for bad in ("0", str(len(names) + 1), "ropee", "", "-1"):
        with pytest.raises(ValueError) as err:
            tour.select_sections([bad])
        message = str(err.value)
        assert repr(bad) in message and all(name in message for name in names)


def test_cli_lists_the_sections(capsys):
    assert cli_main(["tour", "--list"]) == 0
    out = capsys.readouterr().out
    for i, section in enumerate(tour.SECTIONS, 1):
        assert re.search(rf"^\s*{i}\s+{re.escape(section.name)}\s+{re.escape(section.title)}", out, re.MULTILINE)


SEATS_NUMBER = tour.section_names().index("seats") + 1


@pytest.mark.parametrize("choice", [str(SEATS_NUMBER), "seats"])
def test_cli_runs_one_section_by_number_or_name(tmp_path, capsys, choice):
    assert cli_main(["tour", "--section", choice, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    seats, following = tour.SECTIONS[SEATS_NUMBER - 1], tour.SECTIONS[SEATS_NUMBER]
    assert f"{SEATS_NUMBER}. {seats.title}" in out and "1. A bag of tiles" not in out
    assert f"{SEATS_NUMBER + 1}. {following.title}" not in out and "Tour finished" in out


def test_cli_names_the_valid_sections_for_a_bad_one(tmp_path, capsys):
    assert cli_main(["tour", "--section", "clocks", "--out", str(tmp_path)]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert "'clocks'" in out
    for i, section in enumerate(tour.SECTIONS, 1):
        assert f"{i} or {section.name}" in out


def test_cli_refuses_a_file_as_output_folder(tmp_path, capsys):
    target = tmp_path / "taken"
    target.write_text("x")
    assert cli_main(["tour", "--out", str(target)]) == 2
    assert "--out must be a folder" in capsys.readouterr().out


def test_the_lesson_manifest_drives_the_list_and_maps_every_section(capsys):
    """`posenc tour --list` prints the lesson's chapters from its one manifest, in order, each with the
    tour sections that tell it; every section tells exactly one chapter, and every name is a section."""
    from posenc.teaching.lesson.manifest import CHAPTERS, chapter_of_section

    names = [s.name for s in tour.SECTIONS]
    told = [name for chapter in CHAPTERS for name in chapter.tour]
    assert sorted(told) == sorted(names)  # each section once, and nothing else
    assert [chapter_of_section(n).tour.index(n) >= 0 for n in names] == [True] * len(names)
    # in reading order: the tour tells the chapters in the order the lesson has them
    assert told == names
    assert cli_main(["tour", "--list"]) == 0
    out = capsys.readouterr().out
    places = []
    for i, chapter in enumerate(CHAPTERS, 1):
        shown = ", ".join(chapter.tour) if chapter.tour else "in the browser only"
        match = re.search(
            rf"^\s*{i}\s+{re.escape(chapter.title)} #{chapter.id} \({re.escape(shown)}\)$", out, re.MULTILINE
        )
        assert match, (chapter, out)
        places.append(match.start())
    assert places == sorted(places)


def test_the_comparison_table_prints_each_cells_status_whole(ran):
    """The live table's cells, at 80 columns: each scheme's status at each length, as the chapter's
    compare() finds it, written whole (the page's longer sentences were cut to '✓ within the 5…' and
    named seats the page, set to another length, did not print)."""
    from posenc.teaching.lesson.chapters.comparison import LENGTHS, SCHEMES, compare
    from posenc.teaching.tour.comparison import STATUS

    body = section_texts(ran[1])["compare"]
    assert "…" not in body
    found = {length: {r["scheme"]: r["status"] for r in compare(length)["schemes"]} for length in LENGTHS}
    for scheme in SCHEMES:
        cells = [STATUS[found[length][scheme]][0] for length in LENGTHS]
        row = rf"^\s*{scheme}\s+" + r"\s+".join(re.escape(c) for c in cells) + r"\s*$"
        assert re.search(row, body, re.MULTILINE), (scheme, cells)
    assert found[576]["learned"] == "refused" and found[512]["learned"] == "trained"
