"""A number the lesson states in two chapters is measured once, and a sentence's number is the one its
figure or table shows. Each test recomputes the claim from posenc (or from a closed form), never from
text copied off the page."""

from __future__ import annotations

import math
import re

import pytest
import torch

from posenc.alibi import alibi_bias, alibi_slopes
from posenc.teaching.lesson import chapters
from posenc.teaching.lesson.chapters import bad_ideas, bag_of_tiles, word_plus_position
from posenc.teaching.lesson.mistakes import ROUNDING_LEVEL
from posenc.teaching.lesson.vectors import split_words


def text_of(chapter: str, block_id: str = "", contains: str = "") -> str:
    """The one-line text of the block of ``chapter`` with id ``block_id`` (or the first containing ``contains``)."""
    for block in chapters.blocks(chapter):
        if (block_id and block.id == block_id) or (contains and contains in block.text):
            return " ".join(block.text.split())
    raise AssertionError(f"chapter {chapter!r} has no block {block_id or contains!r}")


def test_chapter_four_states_chapter_twos_ratio_which_matches_its_closed_form():
    """Rule 1's "about N times longer at GPT-2's scale" (ch. 4) is ch. 2's measurement, and that
    measurement is the closed form: the sine code's length sqrt(d/2) over the mean length of a d-wide
    N(0, 0.02^2) vector, 0.02 * sqrt(2) * Gamma((d+1)/2) / Gamma(d/2)."""
    ratio = chapters.numbers("word-plus-position")["input.scale.1.ratio"]
    d = word_plus_position.WIDTH
    mean_length = 0.02 * math.sqrt(2) * math.exp(math.lgamma((d + 1) / 2) - math.lgamma(d / 2))
    assert ratio == pytest.approx(math.sqrt(d / 2) / mean_length, rel=0.02)
    stated = re.search(r"starts about (\d+) times longer", text_of("three-rules", contains="GPT-2's initial scale"))
    assert stated is not None
    assert int(stated.group(1)) == round(ratio)
    said_in_two = re.search(r"about (\d+) times the word", text_of("word-plus-position", contains="GPT-2's scale"))
    assert said_in_two is not None and int(said_in_two.group(1)) == int(stated.group(1))


def test_chapter_three_states_the_sine_pull_its_table_shows():
    """Ch. 3 says the sine code pulls "dog" and "man" from their own cosine into a band; the band's ends
    are the table's smallest and largest sine cosine, and the band is far from both the words' own
    cosine (the pull is real) and from 1 (the raw integer's end)."""
    n = chapters.numbers("bad-ideas")
    cosines = [n[f"naive.sinusoidal.cosine.{pos}"] for pos in bad_ideas.POSITIONS]
    sentence = text_of("bad-ideas", contains="pull “dog” and “man” together, from")
    found = re.search(r"from ([+-]\d\.\d{3}) to between ([+-]\d\.\d{3}) and ([+-]\d\.\d{3})", sentence)
    assert found is not None, sentence
    alone, low, high = (float(g) for g in found.groups())
    assert alone == pytest.approx(n["naive.cosine.no_position"], abs=5e-4)
    assert low == pytest.approx(min(cosines), abs=5e-4) and high == pytest.approx(max(cosines), abs=5e-4)
    assert high - low < 0.1 < low - alone  # one narrow band, well above the words alone
    assert n["naive.raw.cosine.1000"] > 0.999 > high  # the raw integer goes all the way
    assert "clearly apart" not in sentence


def reversed_order(count: int) -> list[int]:
    return list(range(count))[::-1]


def test_unmasked_alibi_cannot_tell_a_sentence_from_its_mirror_and_the_page_says_so():
    """Ch. 1's note: with no causal mask ALiBi's bias -slope*|i - j| is the same read backwards, so the
    figure gives every word of "dog bit man" and "man bit dog" the same output (rounding), while RoPE, the
    sine code and a learned table tell them apart. The shuffle the note names is the reversal."""
    n = chapters.numbers("bag-of-tiles")
    words = split_words(bag_of_tiles.MIRROR_TEXT)
    figure = bag_of_tiles.bag_of_tiles(bag_of_tiles.MIRROR_TEXT, n["bag.mirror.shuffle"], "alibi")
    assert figure["order"] == reversed_order(len(words))
    assert figure["largest_difference"] < ROUNDING_LEVEL
    for scheme in ("sinusoidal", "learned", "rope"):
        assert (
            bag_of_tiles.bag_of_tiles(bag_of_tiles.MIRROR_TEXT, n["bag.mirror.shuffle"], scheme)["largest_difference"]
            > 1e-3
        )
    note = text_of("bag-of-tiles", "bag-alibi-mirror")
    assert f"reads “{' '.join(reversed(words))}”" in note and "causal mask" in note


@pytest.mark.parametrize("text", ["the dog bit the man", "a b c d e f g", "dog bit man"])
def test_unmasked_alibi_is_blind_to_reversal_but_not_to_other_shuffles(text):
    """Why: the unmasked bias matrix is symmetric and depends on |i - j| only, so reversing the seats maps
    it onto itself; a shuffle that is not a reversal or the identity changes some distance."""
    count = len(split_words(text))
    seats = torch.arange(count)
    bias = alibi_bias(alibi_slopes(2), seats, seats, causal=False)  # (H, S, S)
    flip = torch.arange(count - 1, -1, -1)
    assert torch.equal(bias, bias[:, flip][:, :, flip])
    for shuffle in range(1, 40):
        figure = bag_of_tiles.bag_of_tiles(text, shuffle, "alibi")
        if figure["order"] == reversed_order(count):
            assert figure["largest_difference"] < ROUNDING_LEVEL
        else:
            assert figure["largest_difference"] > 1e-6, figure["order"]


@pytest.mark.parametrize("lr", [1e-2, 1e-3])
def test_a_table_held_as_a_parameter_drifts_by_the_learning_rate_in_adams_first_step(lr):
    """Ch. 13: Adam's first step moves every weight that has a gradient by about the learning rate,
    whatever the gradient's size (m/sqrt(v) is the gradient's sign), so the largest drift is the rate."""
    from posenc.teaching.lesson.mistakes import table_drift

    drift = table_drift(1, lr)
    assert drift["parameter"]["largest_change"] == pytest.approx(lr, rel=1e-3)
    assert drift["buffer"]["largest_change"] == 0.0
    n = chapters.numbers("common-mistakes")
    sentence = text_of("common-mistakes", contains="drifted by up to")
    assert f"drifted by up to {n['mistakes.parameter.parameter_change']:.2e} in one step, the learning rate" in sentence
    assert n["mistakes.parameter.parameter_change"] == pytest.approx(n["mistakes.parameter.lr"], rel=1e-3)


def test_the_fingerprint_table_prints_negative_values_with_the_minus_sign():
    """Ch. 5's table prints a negative value as the page's other numbers do, with "−", never "-"."""
    cells = [cell for b in chapters.blocks("clock-hands") if b.kind == "table" for row in b.rows[1:] for cell in row]
    assert any("−" in cell for cell in cells)
    assert not any(re.search(r"(^|\s)-\d", cell) for cell in cells)


def test_chapters_two_and_four_say_bounded_values_are_necessary_not_sufficient():
    """Defect: ch. 2 said the position vector "about 36 times the word ... does not break rule 1" beside a
    "Try this" that shows the word drowned, and ch. 4 quietly redefined rule 1. Both now say that bounded
    values are necessary but not sufficient, and that the balance comes from the word vectors' scale (√d)."""
    two = text_of("word-plus-position", contains="GPT-2's scale")
    four = text_of("three-rules", contains="GPT-2's initial scale")
    assert "does not break rule 1" not in two and "the word is drowned" in two
    assert "Bounded values are necessary, not sufficient" in two and "√d_model" in two
    assert "necessary, not sufficient" in four and "can still drown the word" in four
    assert "comes from the scale of the word vectors" in four and "√d" in four


def test_chapter_three_reads_one_dog_and_man_and_measures_the_raw_code_against_the_pair_shown():
    """Defect: ch. 3 had three baselines for cos(dog, man) (the text's −0.031, the figure's 0.218 from other
    vectors, the note's "about 0.2"), and the figure's "730.6 times longer" sat under [0.42, −0.15] but was
    measured against a 16-number word. The figure now reads the text's pair, and its ratio is against the
    pair it shows (1,586 times at seat 500)."""
    n = chapters.numbers("bad-ideas")
    for seat in (0, 500, 2000):
        d = bad_ideas.bad_ideas(seat, 4)
        assert d["cosine_words"] == pytest.approx(n["naive.cosine.no_position"], abs=1e-12)
        assert d["cosine_sine_range"] == pytest.approx([n["naive.sine_band.low"], n["naive.sine_band.high"]])
        assert d["raw_ratio"] == pytest.approx(math.hypot(seat, seat) / math.hypot(*bad_ideas.EXAMPLE_WORD))
        dog = bad_ideas.word_vectors()[0]
        assert d["raw_ratio_dog"] == pytest.approx(seat * math.sqrt(d["d_model"]) / float(dog.norm()))
    note = " ".join(next(b.text for b in chapters.blocks("bad-ideas") if b.id == "sine-pull").split())
    assert "about 0.2" not in note
    assert f"from {n['naive.cosine.no_position']:+.3f} to between {n['naive.sine_band.low']:+.3f}" in note
    assert round(bad_ideas.bad_ideas(500, 4)["raw_ratio"]) == 1586


def test_the_precision_checks_feedback_gives_float64_the_spacing_the_chapter_gives():
    """Defect: ch. 12 gives float64's spacing near a million as 1.2e-10, while the check's feedback said
    "float64 keeps the angle exact". The feedback now states the chapter's spacings, and its claim that
    only the cosine and sine are rounded holds: posenc's tables are off by no more than float32's spacing
    in [−1, 1]."""
    from posenc.teaching.lesson.chapters import knowledge_checks as checks

    n = chapters.numbers("knowledge-checks")
    (check,) = checks.CHECKS
    right = check.feedback[check.answer]
    assert "keeps the angle exact" not in right
    assert f"{n['checks.spacing.float32']:g} rad" in right and f"{n['checks.spacing.float64']:.2g} rad" in right
    assert f"{n['checks.spacing.float64']:.2g}" in text_of("knowledge-checks", contains="float64:")
    bound = checks.spacing(torch.float32, 1.0)
    assert f"at most {bound:.2g}" in right and bound == pytest.approx(2.0**-23)
    _, measured = check.evidence()
    assert measured["posenc"] <= bound < measured["float32"]
