"""The words and sentences the lesson's seed asks for, each said where it belongs and held to what posenc
computes: "permutation-equivariant" in chapter 1 with its claim, chapter 1's check about the chapter's own
sentences, and the exact pair "the man bit the dog" one button away."""

from __future__ import annotations

import pytest
import torch

from posenc.teaching.lesson import chapters
from posenc.teaching.lesson.chapters import bag_of_tiles as bag
from posenc.teaching.lesson.mistakes import ROUNDING_LEVEL


def _text(chapter: str) -> str:
    return " ".join(" ".join(b.text.split()) for b in chapters.blocks(chapter))


def test_chapter_one_names_permutation_equivariance_and_the_figure_holds_it():
    """Defect: "permutation-equivariant" never appeared. The text says: permute the words going in and the
    outputs come out permuted the same way, each one unchanged; without positions the block does exactly
    that for every shuffle, and with positions it does not."""
    text = _text("bag-of-tiles")
    assert "*permutation-equivariant*" in text
    assert "permute the words going in, and the outputs come out permuted the same way" in text
    words = bag.SENTENCE_A.split()
    for shuffle in (1, 2, bag.SWAP_SHUFFLE, 77):
        order = bag.shuffled_order(len(words), shuffle)
        out = bag.run_block(words, "nope")
        permuted = bag.run_block([words[i] for i in order], "nope")
        assert float((permuted - out[torch.tensor(order)]).abs().max()) <= ROUNDING_LEVEL
        assert bag.bag_of_tiles(bag.SENTENCE_A, shuffle, "nope")["largest_difference"] <= ROUNDING_LEVEL
        assert bag.bag_of_tiles(bag.SENTENCE_A, shuffle, "sinusoidal")["largest_difference"] > 1e-3


def test_the_exact_pair_is_one_shuffle_the_page_is_given():
    """Defect: ch. 1 had no way to show the exact pair "the man bit the dog"; only random shuffles. The
    figure's answer carries the shuffle that swaps the nouns, and it gives exactly the chapter's sentence."""
    d = bag.bag_of_tiles(bag.SENTENCE_A, 3, "rope")
    pair = d["pair"]
    assert pair == {"text": bag.SENTENCE_A, "shuffle": bag.SWAP_SHUFFLE, "shuffled": bag.SENTENCE_B}
    swapped = bag.bag_of_tiles(pair["text"], pair["shuffle"], "nope")
    assert " ".join(swapped["shuffled"]) == "the man bit the dog" == bag.SENTENCE_B
    with pytest.raises(ValueError, match="wanted must be a shuffle of the words"):
        bag.shuffle_giving("the dog bit the man", "the cat bit the man")


def test_chapter_ones_check_reads_the_chapters_sentences():
    """Defect: the check said "dog bites man" where the chapter says "dog bit man"."""
    (check,) = bag.CHECKS
    assert "bites" not in check.prompt and "bites" not in " ".join(check.evidence()[0])
    a, b = bag.CHECK_SENTENCES
    assert (a, b) == ("dog bit man", "man bit dog")
    assert f'"{a}" and "{b}"' in check.prompt
    assert f"“{a}”" in _text("bag-of-tiles") and f"“{a}” from “{b}”" in _text("big-picture")


def test_chapter_seven_derives_the_turn_from_a_score_that_sees_only_the_gap():
    """The issue's EleutherAI point: the text derives rotation from <f(q, m), f(k, n)> = g(q, k, m - n) in a
    few lines. The derivation's identity holds for the chapter's own pair turn (posenc's rotation)."""
    import cmath
    import random

    from posenc.teaching.lesson.rotation import THETA, pair_score

    text = _text("rope")
    assert "⟨f(q, m), f(k, n)⟩ = g(q, k, m − n)" in text
    assert "Re(q e^(imθ) · conj(k e^(inθ))) = Re(q · conj(k) · e^(i(m − n)θ))" in text
    rng = random.Random(0)
    for _ in range(20):
        q, k = [rng.uniform(-1, 1) for _ in range(2)], [rng.uniform(-1, 1) for _ in range(2)]
        m, n = rng.randrange(0, 5000), rng.randrange(0, 5000)
        via_gap = (complex(*q) * complex(*k).conjugate() * cmath.exp(1j * (m - n) * THETA)).real
        assert pair_score(q, k, m, n) == pytest.approx(via_gap, abs=1e-9)
        assert pair_score(q, k, m + 37, n + 37) == pytest.approx(pair_score(q, k, m, n), abs=1e-9)
