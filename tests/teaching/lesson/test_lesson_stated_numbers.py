"""Sentences of the lesson that state a bound or a number, checked against the function that counts it and a
computation written out here (never against text copied off the page)."""

from __future__ import annotations

import math

import pytest
import torch

from posenc.rope import LinearScaling, rope_frequencies, rope_inv_freq
from posenc.teaching.lesson import chapters
from posenc.teaching.lesson.chapters import rope, stretching_rope
from posenc.teaching.lesson.stretching import past_training


def text_of(chapter: str, block_id: str) -> str:
    """The one-line text of the block of ``chapter`` with id ``block_id``."""
    for block in chapters.blocks(chapter):
        if block.id == block_id:
            return " ".join(block.text.split())
    raise AssertionError(f"chapter {chapter!r} has no block {block_id!r}")


TRAINED = 4096
LENGTH = 16_384


def one_pair(theta: float) -> torch.Tensor:
    return torch.tensor([theta], dtype=torch.float64)


@pytest.mark.parametrize("theta", [1e-4, 1e-3])  # both turn less than once over 4,096 seats
def test_past_training_counts_an_angle_up_to_one_step_past_the_last_trained_seat_as_seen(theta):
    """The bound is L0*theta (one step past the last trained seat, L0 - 1): an angle just inside it is seen,
    one just outside it is past training, and one between (L0 - 1)*theta and L0*theta is seen."""
    trained = one_pair(theta)
    assert TRAINED * theta < 2 * math.pi  # a partial-turn pair, the only kind that can be past training
    bound = TRAINED * theta
    for scale, past in ((1 - 1e-9, False), (1 + 1e-9, True)):
        now = one_pair(bound * scale / (LENGTH - 1))  # the last seat's angle is bound * scale
        assert past_training(now, trained, TRAINED, LENGTH).tolist() == [past], scale
    # halfway between the last trained seat's angle and the bound: seen, though past (L0 - 1)*theta
    between = ((TRAINED - 1) * theta + TRAINED * theta) / 2
    assert (TRAINED - 1) * theta < between < bound
    assert past_training(one_pair(between / (LENGTH - 1)), trained, TRAINED, LENGTH).tolist() == [False]
    # read with the trained frequency, one more seat is the bound itself (seen), two more are past
    assert past_training(trained, trained, TRAINED, TRAINED + 1).tolist() == [False]
    assert past_training(trained, trained, TRAINED, TRAINED + 2).tolist() == [True]


def test_a_pair_that_went_round_in_training_is_never_past_it():
    theta = 2 * math.pi / TRAINED * 1.01  # L0 * theta is just over a full turn
    assert past_training(one_pair(theta), one_pair(theta), TRAINED, 100 * TRAINED).tolist() == [False]


def test_linear_scaling_ends_between_the_last_trained_seat_and_the_bound_for_every_pair():
    """What the definition says of linear scaling by L / L0: its last angle (L - 1)*theta*L0/L lies between
    (L0 - 1)*theta and L0*theta, so with (L0 - 1)*theta as the bound every partial-turn pair would count as
    past training, and with L0*theta none does."""
    default = rope_inv_freq(stretching_rope.ROTARY_DIM, stretching_rope.BASE)
    linear, _ = rope_frequencies(
        LinearScaling(factor=LENGTH / TRAINED), stretching_rope.ROTARY_DIM, stretching_rope.BASE
    )
    last = (LENGTH - 1) * linear
    assert bool(((TRAINED - 1) * default < last).all()) and bool((last < TRAINED * default).all())
    assert int(past_training(linear, default, TRAINED, LENGTH).sum()) == 0
    partial = TRAINED * default < 2 * math.pi
    stricter = partial & (last > (TRAINED - 1) * default)
    assert int(stricter.sum()) == int(partial.sum()) > 0


def test_the_definition_names_the_bound_the_function_counts_with():
    """The chapter's definition of "pairs past training" states the last trained seat, the bound one step past
    it and why, and what linear scaling does at that bound, as the tests above check them."""
    text = text_of("stretching-rope", "def-past-training")
    assert "from seat 0 to seat L₀ − 1" in text
    assert "from 0 to (L₀ − 1)θᵢ" in text
    assert "(L − 1)θ′ᵢ with the scaled frequency θ′, is larger than L₀θᵢ: one step past the last trained seat" in text
    assert "only ever saw whole seats" in text
    assert "(L − 1)θᵢ·L₀/L, lies between (L₀ − 1)θᵢ and L₀θᵢ" in text
    assert "posenc.teaching.lesson.stretching.past_training" in text


def test_who_bit_whoms_score_is_the_one_its_figure_prints():
    """Chapter 7's "the score is ... in A and ... in B" is the who-bit-whom figure's score for each sentence
    (one function), and both equal the score worked out by hand: "bit" at seat 2 queries "dog" at seat 1 (A)
    or 3 (B), the lesson's q and k turned 30 degrees per seat."""

    def turned(v, seat):
        a = math.radians(30.0) * seat
        return (v[0] * math.cos(a) - v[1] * math.sin(a), v[0] * math.sin(a) + v[1] * math.cos(a))

    n = chapters.numbers("rope")
    text = " ".join(" ".join(block.text for block in chapters.blocks("rope")).split())
    for sentence, (name, dog) in enumerate((("A", 1), ("B", 3))):
        q, k = turned(rope.QUERY, 2), turned(rope.KEY, dog)
        by_hand = q[0] * k[0] + q[1] * k[1]
        figure = rope.word_order(sentence, rope.ORDER_DEGREES)
        assert (figure["bit_seat"], figure["dog_seat"]) == (2, dog)
        assert figure["score_rope"] == pytest.approx(by_hand, abs=1e-12)
        assert n[f"rope.relative.score.{name}"] == figure["score_rope"]
    a, b = n["rope.relative.score.A"], n["rope.relative.score.B"]
    assert f"the score is {a:.5f} in A and {b:.5f} in B, the score the “Who bit whom?” dials print under them" in text


def test_the_layer_that_only_reads_the_wider_vector_doubles_in_the_table_the_sentence_names():
    """Chapter 13: "A layer that only reads the wider vector, such as the table's linear map back to the model
    width, doubles; a block ... grows fourfold". The table's linear row is nn.Linear counted by hand, W*W + W
    weights reading W numbers and 2W*W + W reading 2W, and its ratio is 2 to the table's two decimals."""
    from posenc.teaching.lesson.chapters import common_mistakes
    from posenc.teaching.lesson.mistakes import block_parameters

    width = common_mistakes.WIDE
    table = next(b for b in chapters.blocks("common-mistakes") if b.kind == "table" and b.slot == "m2-measured")
    rows = {row[0]: row[1:] for row in table.rows[1:]}
    linear = (width * width + width, 2 * width * width + width)
    assert rows["a linear map back to the model width"] == (f"{linear[0]:,}", f"{linear[1]:,}", "2.00x")
    block = block_parameters(width)
    assert rows["one transformer block (attention + MLP)"][:2] == (f"{block['added']:,}", f"{block['concatenated']:,}")
    assert 3.9 < block["concatenated"] / block["added"] <= 4.0
    text = " ".join(" ".join(b.text for b in chapters.blocks("common-mistakes") if b.slot == "m2-measured").split())
    assert "only reads the wider vector, such as the table's linear map back to the model width, doubles" in text
