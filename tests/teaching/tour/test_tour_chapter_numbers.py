"""``posenc tour``, chapter by chapter: every number it prints is checked against the library or the
mathematics.

The tour runs once per session into a temporary folder, printed at 80 columns as in a pipe
(``conftest``'s ``ran``); each test recomputes a recorded fact by an independent route (closed-form
formulas in float64, the fixture JSON, or the library called directly) and compares.
"""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import rich.console
import torch

import posenc.teaching.tour as tour
from posenc import (
    CausalSelfAttention,
    LearnedPositionalEmbedding,
    ModelConfig,
    PositionOutOfRangeError,
    RotaryEmbedding,
    TinyLM,
    apply_rotary,
)
from posenc.fixtures import load_fixture
from posenc.rope import YaRNScaling
from posenc.teaching.lesson import mistakes as lesson_mistakes
from posenc.teaching.lesson.chapters import bad_ideas as naive
from posenc.teaching.lesson.chapters import bag_of_tiles as bag
from posenc.teaching.lesson.chapters import clock_hands
from posenc.teaching.lesson.chapters import common_mistakes as mistakes
from posenc.teaching.tour import configs, extension, rotary, waves


def sin_freqs(d_model: int, base: float = 10000.0) -> np.ndarray:
    return base ** (-np.arange(0, d_model, 2, dtype=np.float64) / d_model)


def rot2(vec, angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s], [s, c]]) @ np.asarray(vec, dtype=np.float64)


def test_nope_is_a_bag_of_tiles(facts):
    assert facts["bag.nope.permuted_max_diff"] < bag.NOPE_TOLERANCE
    assert facts["bag.nope.pooled_max_diff"] < bag.NOPE_TOLERANCE


def test_the_bag_table_prints_nopes_rounding_as_its_level(facts):
    """NoPE's pooled difference is float32 noise whose digits differ between processes (2.38e-07 in one,
    5.07e-07 in another): the table names the level; every other scheme's row keeps its digits."""
    (table,) = [b for b in bag.prose(facts) if b.kind == "table"]
    cells = {row[0]: row for row in table.rows[1:]}
    assert cells["nope"][2] == f"rounding (below {bag.NOPE_TOLERANCE:.0e})"
    assert cells["nope"][3] == "no: identical bags"
    for scheme in ("sinusoidal", "learned", "rope", "alibi"):
        assert "rounding" not in cells[scheme][2]
        assert float(cells[scheme][2].replace("\u2212", "-")) == pytest.approx(
            facts[f"bag.{scheme}.pooled_max_diff"], rel=1e-2
        )


@pytest.mark.parametrize("scheme", ["sinusoidal", "learned", "rope", "alibi"])
def test_every_scheme_separates_the_sentences(facts, scheme):
    assert facts[f"bag.{scheme}.pooled_max_diff"] > bag.SCHEME_MARGIN


@pytest.mark.parametrize("scheme", ["nope", "sinusoidal", "learned", "rope", "alibi"])
def test_bag_numbers_match_the_model_run_directly(facts, scheme):
    torch.manual_seed(0)
    model = TinyLM(ModelConfig(scheme=scheme, vocab_size=4, d_model=32, n_layers=2, n_heads=4, max_len=16)).eval()
    ids = {"the": 0, "dog": 1, "bit": 2, "man": 3}
    a = torch.tensor([[ids[w] for w in "the dog bit the man".split()]])
    b = torch.tensor([[ids[w] for w in "the man bit the dog".split()]])
    with torch.no_grad():
        diff = (model.hidden_states(a, causal=False).mean(1) - model.hidden_states(b, causal=False).mean(1)).abs().max()
    assert facts[f"bag.{scheme}.pooled_max_diff"] == pytest.approx(float(diff), rel=1e-3, abs=1e-6)


def test_causal_mask_alone_breaks_the_symmetry(facts):
    assert facts["bag.nope_causal.pooled_max_diff"] > bag.SCHEME_MARGIN


def test_word_permutation_helper():
    assert bag.permutation("the dog bit the man", "the man bit the dog").tolist() == [0, 4, 2, 3, 1]
    with pytest.raises(ValueError, match="not a reordering"):
        bag.permutation("the dog", "the cat")
    with pytest.raises(ValueError, match="cat"):
        bag.token_ids("the cat")


def test_raw_integer_example(facts):
    assert facts["naive.example.stamped"] == pytest.approx([500.42, 499.85])


def tinylm_words(d_model: int):
    """TinyLM's scaled word vectors rebuilt by hand: its seeded init, times sqrt(d_model)."""
    torch.manual_seed(0)
    model = TinyLM(
        ModelConfig(scheme="sinusoidal", vocab_size=256, d_model=d_model, n_layers=1, n_heads=1, mlp_ratio=1, max_len=8)
    )
    assert model.embed_scale == pytest.approx(math.sqrt(d_model))
    return model.tok.weight.detach().double().numpy() * math.sqrt(d_model)


def test_raw_integers_outweigh_words(facts):
    all_words = tinylm_words(naive.D_MODEL)
    words = all_words[:2]
    word_norm = np.linalg.norm(all_words, axis=1).mean()
    assert naive.D_MODEL == 512 and facts["naive.d_model"] == 512
    assert facts["naive.word_norm"] == pytest.approx(word_norm)
    assert 0.02 * math.sqrt(naive.D_MODEL) * math.sqrt(naive.D_MODEL) == pytest.approx(word_norm, rel=0.05)
    assert facts["naive.scale_ratio"] == pytest.approx(math.sqrt(naive.D_MODEL / 2) / word_norm, rel=1e-6)
    for pos in naive.POSITIONS:
        assert facts[f"naive.raw.ratio.{pos}"] == pytest.approx(pos * math.sqrt(naive.D_MODEL) / word_norm)
        assert facts[f"naive.sinusoidal.ratio.{pos}"] == pytest.approx(
            math.sqrt(naive.D_MODEL / 2) / word_norm, rel=1e-6
        )
        a, b = words[0] + pos, words[1] + pos
        cosine = a @ b / (np.linalg.norm(a) * np.linalg.norm(b))
        assert facts[f"naive.raw.cosine.{pos}"] == pytest.approx(cosine, abs=1e-9)
    assert facts["naive.raw.cosine.1000"] > 0.9999
    assert facts["naive.raw.ratio.1000"] > 100
    assert max(facts[f"naive.sinusoidal.cosine.{pos}"] for pos in naive.POSITIONS) < 0.9


def test_tour_states_the_embedding_scale_it_uses(flowing, facts):
    assert f"TinyLM at width d_model = {naive.D_MODEL}" in flowing
    assert "N(0, 0.02^2)" in flowing and f"sqrt(d_model) = {math.sqrt(naive.D_MODEL):.1f}" in flowing
    assert f"{facts['naive.scale_ratio']:.2f} times that long" in flowing


def test_tour_and_knowledge_check_agree_on_the_position_to_word_ratio(facts):
    from posenc.teaching.explorer import quiz

    check = quiz.BY_ID["added"]
    lines, values = check.evidence()
    assert values["d_model"] == naive.D_MODEL
    assert values["embedding_std"] == facts["naive.embedding_std"] == 0.02
    assert values["embed_scale"] == pytest.approx(facts["naive.embed_scale"])
    assert values["ratio"] == pytest.approx(facts["naive.scale_ratio"], rel=1e-12)
    assert values["ratio"] == pytest.approx(facts["big.position_over_word"], rel=1e-12)
    assert any(f"{facts['naive.scale_ratio']:.2f}" in line for line in lines)


def test_fraction_steps_depend_on_length_but_sine_steps_do_not(facts):
    assert facts["naive.fraction.step.4"] == pytest.approx(0.25)
    assert facts["naive.fraction.step.100"] == pytest.approx(0.01)
    assert facts["naive.fraction.step_ratio"] == pytest.approx(25.0)
    w = sin_freqs(naive.D_MODEL)
    step = math.sqrt(np.sum(2 - 2 * np.cos(w)))  # |PE(p+1) - PE(p)| for any p
    assert facts["naive.sinusoidal.step.4"] == pytest.approx(step, rel=1e-6)
    assert facts["naive.sinusoidal.step.100"] == pytest.approx(step, rel=1e-6)


def test_bounded(facts):
    assert -1.0 <= facts["waves.min"] < -0.999
    assert 0.999 < facts["waves.max"] <= 1.0


@pytest.mark.parametrize("k", waves.OFFSETS)
def test_fixed_offset_is_one_rotation(facts, k):
    assert facts[f"waves.offset.{k}.residual"] < 1e-9
    assert facts[f"waves.offset.{k}.orthogonality"] < 1e-12


def test_offset_map_matches_angle_addition():
    rk = waves.offset_map(3, 8).numpy()
    w = sin_freqs(8)
    for pos in (0, 17, 12345):
        pe = np.stack([np.sin(pos * w), np.cos(pos * w)], -1).ravel()
        shifted = np.stack([np.sin((pos + 3) * w), np.cos((pos + 3) * w)], -1).ravel()
        np.testing.assert_allclose(rk @ pe, shifted, atol=1e-10)
    with pytest.raises(ValueError, match="even d_model"):
        waves.offset_map(1, 5)


def test_minimum_distance_equals_closed_form(facts):
    # |PE(a) - PE(b)|^2 = sum_i (2 - 2 cos((b - a) w_i)): minimise over every offset in the range.
    w = sin_freqs(waves.D_MODEL)
    offsets = np.arange(1, waves.LENGTH, dtype=np.float64)
    dist = np.sqrt(np.sum(2 - 2 * np.cos(np.outer(offsets, w)), axis=1))
    assert facts["waves.unique.min_distance"] == pytest.approx(dist.min(), abs=1e-9)
    assert facts["waves.unique.min_distance"] > 0.5
    i, j = facts["waves.unique.pair"]
    assert 0 <= i < j < waves.LENGTH
    assert dist[j - i - 1] == pytest.approx(dist.min(), abs=1e-9)


def test_fast_wave_alone_nearly_repeats(facts):
    offsets = np.arange(1, waves.FAST_ONLY_LENGTH)
    dist = 2 * np.abs(np.sin(offsets / 2))  # two columns: sin(p), cos(p)
    i, j = facts["waves.unique.fast_only.pair"]
    assert facts["waves.unique.fast_only.min_distance"] == pytest.approx(dist.min(), abs=1e-9)
    assert j - i == offsets[dist.argmin()]
    assert facts["waves.unique.fast_only.min_distance"] < 1e-3 < facts["waves.unique.min_distance"]
    assert facts["waves.unique.fast_only.turns"] == pytest.approx((j - i) / (2 * math.pi))


def test_min_pairwise_distance_helper():
    rows = torch.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]], dtype=torch.float64)
    assert waves.min_pairwise_distance(rows, chunk=2) == (1.0, 0, 2)
    generator = torch.Generator().manual_seed(0)
    for _ in range(3):
        x = torch.randn(300, 5, generator=generator, dtype=torch.float64)
        brute = torch.cdist(x, x).fill_diagonal_(float("inf"))
        dist, i, j = waves.min_pairwise_distance(x, chunk=64)
        assert dist == pytest.approx(float(brute.min()), abs=1e-12)
        assert i < j and brute[i, j] == pytest.approx(dist, abs=1e-12)
    with pytest.raises(ValueError, match="at least 2"):
        waves.min_pairwise_distance(rows[:1])


@pytest.mark.parametrize("seat", range(4))
def test_fingerprint_is_the_d4_table(facts, seat):
    assert facts[f"fingerprint.fast.{seat}"] == pytest.approx(math.sin(seat), abs=1e-12)
    assert facts[f"fingerprint.medium.{seat}"] == pytest.approx(math.cos(seat), abs=1e-12)
    assert facts[f"fingerprint.slow.{seat}"] == pytest.approx(math.sin(seat / 100), abs=1e-12)
    assert facts[f"fingerprint.col3.{seat}"] == pytest.approx(math.cos(seat / 100), abs=1e-12)
    lesson = clock_hands.LESSON_FINGERPRINT[seat]
    for name, value in zip(("fast", "medium", "slow"), lesson):
        assert round(facts[f"fingerprint.{name}.{seat}"], 2) == value


def test_fingerprint_speeds(facts, flowing):
    assert facts["fingerprint.slow_divisor"] == pytest.approx(100.0)
    assert facts["fingerprint.speed_ratio_512"] == pytest.approx(10000 ** (510 / 512))
    slow_step = math.sin(3 / 100) / 3  # column 2 rises from sin(0) to sin(3/100)
    assert facts["fingerprint.slow_step"] == pytest.approx(slow_step, rel=1e-12)
    assert f"grow by about {slow_step:.2f} per seat" in flowing
    assert facts["fingerprint.pairs_between_512"] == 512 // 2 - 2
    assert f"the {512 // 2 - 2} pairs in between" in flowing


def test_learned_table_overflow_error(facts):
    err = facts["learned.error"]
    assert err is not None and err["type"] == "PositionOutOfRangeError"
    assert err["position"] == 512 and err["max_len"] == 512
    with pytest.raises(PositionOutOfRangeError) as raised:
        LearnedPositionalEmbedding(512, 8).encodings(torch.tensor([512]))
    assert str(raised.value) == err["message"]
    assert "extend" in err["message"] and "512" in err["message"]


def test_learned_table_extension(facts):
    assert facts["learned.rows"] == 512
    assert facts["learned.extended.rows"] == 1024
    assert facts["learned.extended.source"] == pytest.approx(512 * 511 / 1023)
    assert facts["learned.extended.row512_interp_error"] < 1e-6
    assert facts["learned.extended.first_row_error"] == 0.0
    assert facts["learned.extended.last_row_error"] == 0.0


def test_sinusoidal_row_512(facts):
    w = sin_freqs(64)
    expected = np.stack([np.sin(512 * w), np.cos(512 * w)], -1).ravel()
    np.testing.assert_allclose(facts["learned.sinusoidal.row512"], expected, atol=1e-6)
    assert facts["learned.sinusoidal.row512_norm"] == pytest.approx(math.sqrt(32), rel=1e-6)
    assert facts["learned.sinusoidal.cached_before"] == 512
    assert facts["learned.sinusoidal.cached_after"] > 512


@pytest.mark.parametrize("m,n", rotary.SEAT_PAIRS)
def test_rope_scores_are_rotated_dot_products(facts, m, n):
    expected = rot2(rotary.QUERY, m * rotary.THETA) @ rot2(rotary.KEY, n * rotary.THETA)
    assert facts[f"rope.demo.score.{m}.{n}"] == pytest.approx(expected, abs=1e-9)


def test_rope_scores_depend_on_distance_only(facts):
    assert round(facts["rope.demo.score_near"], 5) == round(facts["rope.demo.score_far"], 5)
    assert round(facts["rope.demo.score.10001.10003"], 5) == round(facts["rope.demo.score_near"], 5)
    assert abs(facts["rope.demo.score.1.4"] - facts["rope.demo.score_near"]) > 0.1


def test_rope_verdict_follows_the_scores(facts, flowing):
    near = rot2(rotary.QUERY, rotary.THETA) @ rot2(rotary.KEY, 3 * rotary.THETA)
    same, other = [], []
    for m, n in rotary.SEAT_PAIRS:
        score = rot2(rotary.QUERY, m * rotary.THETA) @ rot2(rotary.KEY, n * rotary.THETA)
        (same if round(score, 5) == round(near, 5) else other).append([m, n])
    assert facts["rope.demo.same_score_pairs"] == same
    assert facts["rope.demo.other_score_pairs"] == other
    assert facts["rope.demo.distance_only"] is True
    assert (
        "Seats 1 vs 3, 101 vs 103 and 10,001 vs 10,003 give the same score; seats 1 vs 4, 3 apart, "
        "do not. Attention reads distance, not address." in flowing
    )


def test_rope_verdict_reports_a_failed_claim(tmp_path):
    scores = {(1, 3): 0.5, (101, 103): 0.7, (10_001, 10_003): 0.5, (1, 4): 0.2}
    ctx = tour.TourContext(
        console=rich.console.Console(file=io.StringIO()),
        out_dir=tmp_path,
        facts={f"rope.demo.score.{m}.{n}": v for (m, n), v in scores.items()},
    )
    text = rotary._distance_verdict(ctx)
    assert ctx.facts["rope.demo.distance_only"] is False
    assert ctx.facts["rope.demo.other_score_pairs"] == [[101, 103], [1, 4]]
    assert "NOT as claimed" in text and "not address" not in text
    assert text.startswith(
        "Seats 1 vs 3 and 10,001 vs 10,003 give the same score; seats 101 vs 103 and 1 vs 4, 2 or 3 apart, do not"
    )


def test_rope_module_scores(facts):
    scores = facts["rope.module.scores"]
    assert len(scores) == 3
    assert facts["rope.module.spread"] == pytest.approx(max(scores.values()) - min(scores.values()))
    assert facts["rope.module.spread"] < 1e-4 * max(1.0, max(abs(v) for v in scores.values()))


def test_sign_convention_is_counter_clockwise_as_apply_rotary(facts, flowing):
    theta = rotary.DIAL_THETA
    x = torch.tensor([1.0, 0.0], dtype=torch.float64).view(1, 1, 1, 2)
    cos = torch.tensor([[math.cos(theta)]], dtype=torch.float64)
    sin = torch.tensor([[math.sin(theta)]], dtype=torch.float64)
    turned, _ = apply_rotary(x, x, cos, sin)  # (a cos - b sin, a sin + b cos)
    assert facts["rope.sign.turned_x"] == pytest.approx(float(turned.flatten()[0]), abs=1e-12)
    assert facts["rope.sign.turned_y"] == pytest.approx(float(turned.flatten()[1]), abs=1e-12)
    assert facts["rope.sign.turned_y"] > 0 and facts["rope.sign.counter_clockwise"] is True
    assert float(rotary.hand_angles([1])[0]) == pytest.approx(30.0)  # positive angle, counter-clockwise
    assert "a positive angle turns counter-clockwise" in flowing
    assert flowing.count('"clockwise"') == 1  # said in one place
    # A positive relative angle means the query sits after the key: "bit" (seat 2) after "dog" (seat 1)
    assert facts["rope.relative.A"] > 0


def test_clock_dials(facts, flowing):
    step = math.degrees(rotary.DIAL_THETA)
    assert facts["rope.dial.step_degrees"] == pytest.approx(step)
    assert f"with θ = {step:.0f}° per seat" in flowing
    for seat in range(4):
        assert facts[f"rope.dial.{seat}"] == pytest.approx(30.0 * seat, abs=1e-9)
    assert facts["rope.relative.A"] == pytest.approx(30.0)
    assert facts["rope.relative.B"] == pytest.approx(-30.0)
    theta = math.pi / 6
    a = rot2(rotary.QUERY, 2 * theta) @ rot2(rotary.KEY, 1 * theta)
    b = rot2(rotary.QUERY, 2 * theta) @ rot2(rotary.KEY, 3 * theta)
    assert facts["rope.relative.score.A"] == pytest.approx(a, abs=1e-9)
    assert facts["rope.relative.score.B"] == pytest.approx(b, abs=1e-9)
    assert abs(a - b) > 0.1


def test_rotate_2d_checks_shapes():
    with pytest.raises(ValueError, match="vectors must have shape"):
        rotary.rotate_2d(torch.zeros(3, 2), [0, 1], 0.5)
    assert rotary.wrap_degrees(330.0) == -30.0 and rotary.wrap_degrees(-200.0) == 160.0


def test_parameter_table_drifts_buffer_does_not(facts):
    assert facts["mistakes.parameter.buffer_change"] == 0.0
    assert facts["mistakes.parameter.parameter_change"] > 1e-3
    assert facts["mistakes.parameter.rows_changed"] == facts["mistakes.parameter.rows_used"] == 18
    assert facts["mistakes.parameter.extra_trainable"] == mistakes.ROWS * mistakes.D_MODEL
    assert facts["mistakes.parameter.buffer_in_state_dict"] is False


def test_parameter_table_rounded_by_bf16_buffer_kept(facts):
    assert facts["mistakes.parameter.bf16_error_buffer"] == 0.0
    assert facts["mistakes.parameter.bf16_buffer_dtype"] == "torch.float32"
    assert 1e-4 < facts["mistakes.parameter.bf16_error_parameter"] <= 2.0**-8
    assert facts["mistakes.parameter.buffer_device_after_to"] == "meta"


def test_concatenation_parameter_counts(facts):
    d = mistakes.WIDE
    linear_added, linear_cat = d * d + d, 2 * d * d + d
    # Block without biases: qkv 3d^2, out d^2, MLP 8d^2, two LayerNorm weights 2d.
    block_added, block_cat = 12 * d * d + 2 * d, 12 * (2 * d) ** 2 + 2 * (2 * d)
    assert facts["mistakes.concat.linear.added"] == linear_added
    assert facts["mistakes.concat.linear.concatenated"] == linear_cat
    assert facts["mistakes.concat.block.added"] == block_added
    assert facts["mistakes.concat.block.concatenated"] == block_cat
    assert facts["mistakes.concat.linear.ratio"] == pytest.approx(2.0, rel=1e-2)
    assert facts["mistakes.concat.block.ratio"] == pytest.approx(4.0, rel=1e-2)


def test_rotating_values_breaks_shift_invariance(facts):
    assert facts["mistakes.rotate_v.correct_shift_diff"] < 1e-5
    assert facts["mistakes.rotate_v.rotated_shift_diff"] > 0.1


def test_values_rotated_hook_rotates_exactly_the_values():
    torch.manual_seed(1)
    d, heads = 16, 2
    hd = d // heads
    attention = CausalSelfAttention(d, heads).eval()
    rope = RotaryEmbedding(hd)
    x = torch.randn(1, 5, d, dtype=torch.float64)
    attention.double()
    pos = torch.arange(3, 8).unsqueeze(0)
    with torch.no_grad(), lesson_mistakes.values_rotated(attention, rope, pos):
        got = attention(x, rope, pos)
    # Reference: rotate q, k and v with RoPE's formula (half-split pairs), causal softmax attention.
    w = 10000.0 ** (-np.arange(0, hd, 2) / hd)
    ang = torch.tensor(np.outer(np.arange(3, 8), w))  # (S, hd/2)
    cos, sin = ang.cos(), ang.sin()

    def turn(t):
        a, b = t[..., : hd // 2], t[..., hd // 2 :]
        return torch.cat((a * cos - b * sin, a * sin + b * cos), -1)

    with torch.no_grad():
        q, k, v = (t.view(1, 5, heads, hd).transpose(1, 2) for t in attention.qkv(x).split(d, -1))
        q, k, v = turn(q), turn(k), turn(v)
        logits = q @ k.transpose(-1, -2) / math.sqrt(hd)
        logits = logits.masked_fill(torch.ones(5, 5, dtype=torch.bool).triu(1), float("-inf"))
        y = (logits.softmax(-1) @ v).transpose(1, 2).reshape(1, 5, d)
        expected = attention.out(y)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        plain = attention(x, rope, pos)
    assert (plain - got).abs().max() > 1e-3  # the hook is gone again


def test_scaling_frequencies(facts):
    s = extension.FACTOR
    assert facts["extension.default.fastest_ratio"] == 1.0
    assert facts["extension.linear.fastest_ratio"] == pytest.approx(1 / s)
    assert facts["extension.linear.slowest_ratio"] == pytest.approx(1 / s)
    assert facts["extension.ntk.fastest_ratio"] == pytest.approx(1.0)
    assert facts["extension.ntk.slowest_ratio"] == pytest.approx(1 / s)
    assert facts["extension.yarn.fastest_ratio"] == pytest.approx(1.0)
    assert facts["extension.yarn.slowest_ratio"] == pytest.approx(1 / s)
    assert facts["extension.yarn.attention_factor"] == pytest.approx(0.1 * math.log(s) + 1)
    assert facts["extension.linear.attention_factor"] == 1.0
    assert facts["extension.linear.fastest_step"] == pytest.approx(1 / s)


def test_unseen_angle_counts(facts):
    d, trained = extension.ROTARY_DIM, extension.TRAINED
    theta = 10000.0 ** (-np.arange(0, d, 2) / d)
    partial = trained * theta < 2 * math.pi  # wavelength longer than the training text
    assert facts["extension.partial_turn_pairs"] == int(partial.sum()) > 0
    assert facts["extension.default.unseen_pairs"] == int(partial.sum())
    assert facts["extension.linear.unseen_pairs"] == 0
    assert facts["extension.yarn.unseen_pairs"] == 0
    assert 0 < facts["extension.ntk.unseen_pairs"] < facts["extension.default.unseen_pairs"]
    assert facts["extension.linear.interpolation_error"] < 1e-6


def test_ntk_unseen_pairs_are_named_by_index(facts, flowing):
    d, trained, s = extension.ROTARY_DIM, extension.TRAINED, extension.FACTOR
    i = np.arange(0, d, 2) / d
    theta = extension.BASE**-i
    ntk = (extension.BASE * s ** (d / (d - 2))) ** -i  # NTK-aware: base * s^(d/(d-2))
    unseen = (trained * theta < 2 * math.pi) & ((trained * s - 1) * ntk > trained * theta)
    indices = np.nonzero(unseen)[0].tolist()
    assert facts["extension.ntk.unseen_indices"] == indices
    assert facts["extension.ntk.unseen_pairs"] == len(indices)
    assert indices == list(range(indices[0], indices[-1] + 1))  # one run, at the slow end
    assert indices[0] > d // 4 and indices[-1] == d // 2 - 2
    assert f"{len(indices)} pairs (pairs {indices[0]}-{indices[-1]}, counting 0 as the fastest" in flowing


def test_yarn_bands_follow_beta_fast_and_beta_slow(facts, flowing):
    d, trained = extension.ROTARY_DIM, extension.TRAINED
    yarn = extension.scalings()["yarn"]
    assert isinstance(yarn, YaRNScaling)

    def pair_index(turns):  # pair that turns `turns` times in L0
        return d * math.log(trained / (2 * math.pi * turns)) / (2 * math.log(extension.BASE))

    low, high = math.floor(pair_index(yarn.beta_fast)), math.ceil(pair_index(yarn.beta_slow))
    assert facts["extension.yarn.kept_pairs"] == low + 1
    assert facts["extension.yarn.slowed_pairs"] == d // 2 - high
    ramped = d // 2 - (low + 1) - (d // 2 - high)
    assert f"turn more than about {yarn.beta_fast:g} times in training (beta_fast)" in flowing
    slow = "once" if yarn.beta_slow == 1 else f"{yarn.beta_slow:g} times"
    assert f"turn less than {slow} (beta_slow)" in flowing
    assert (f"{low + 1} pairs kept, {d // 2 - high} fully slowed, {ramped} ramped") in flowing


def test_extension_wording_helpers():
    assert extension.index_ranges([9, 3, 4, 5, 11, 12]) == "3-5, 9, 11-12"
    assert extension.index_ranges([7]) == "7"
    assert extension.times(1) == "once" and extension.times(32.0) == "32 times"


def wavelengths(rotary_dim: int, base: float) -> np.ndarray:
    """2 pi / theta_i for every pair, theta_i = base^(-2i/d), in tokens."""
    return 2 * math.pi * base ** (np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim)


def head_of(fixture: dict):
    head = fixture.get("head_dim") or fixture["hidden_size"] // fixture["num_attention_heads"]
    return head, int(head * fixture.get("partial_rotary_factor", 1.0))


def test_llama31_bands_from_wavelengths(facts, ran, flowing):
    fixture = load_fixture("llama-3.1-8b")
    rs = fixture["rope_scaling"]
    head, rotary_dim = head_of(fixture)
    lam = wavelengths(rotary_dim, fixture["rope_theta"])
    original = rs["original_max_position_embeddings"]
    kept = int((lam < original / rs["high_freq_factor"]).sum())  # Meta's apply_scaling bands
    slowed = int((lam > original / rs["low_freq_factor"]).sum())
    blended = rotary_dim // 2 - kept - slowed
    key = "configs.llama31"
    assert (facts[f"{key}.kept"], facts[f"{key}.slowed"], facts[f"{key}.blended"]) == (kept, slowed, blended)
    assert kept > 0 and slowed > 0 and blended > 0
    assert facts[f"{key}.kept_below"] == original / rs["high_freq_factor"]
    assert facts[f"{key}.slowed_above"] == original / rs["low_freq_factor"]
    assert facts[f"{key}.factor"] == rs["factor"]
    assert facts[f"{key}.attention_factor"] == 1.0  # llama3 leaves the tables alone
    assert facts[f"{key}.slowest_wavelength_default"] == pytest.approx(lam[-1], rel=1e-12)
    assert lam[-1] > original / rs["low_freq_factor"]  # so the slowest pair is slowed fully
    assert facts[f"{key}.slowest_wavelength"] == pytest.approx(lam[-1] * rs["factor"], rel=1e-9)
    assert (facts[f"{key}.rotary_dim"], facts[f"{key}.head_dim"]) == (rotary_dim, head)
    assert (facts[f"{key}.base"], facts[f"{key}.rope_type"]) == (fixture["rope_theta"], rs["rope_type"])
    assert facts[f"{key}.trained"] == original
    assert facts[f"{key}.context"] == fixture["max_position_embeddings"]
    assert (
        f"keeps its {kept} fastest pairs exactly (wavelengths under {original:,} / high_freq_factor "
        f"= {original / rs['high_freq_factor']:,.0f} tokens), slows the {slowed} slowest by the full "
        f"factor {rs['factor']:g} (wavelengths over {original:,} / low_freq_factor = "
        f"{original / rs['low_freq_factor']:,.0f} tokens) and blends the {blended} in between; its "
        "tables are not rescaled (factor 1)"
    ) in flowing


def test_phi35_longrope_from_fixture(facts, flowing):
    fixture = load_fixture("phi-3.5-mini-instruct")
    rs = fixture["rope_scaling"]
    head, rotary_dim = head_of(fixture)
    original = fixture.get("original_max_position_embeddings") or rs["original_max_position_embeddings"]
    s = fixture["max_position_embeddings"] / original
    factor = math.sqrt(1 + math.log(s) / math.log(original))  # Phi-3's rule, s = context / L0
    key = "configs.phi35"
    assert facts[f"{key}.factor"] == pytest.approx(s)
    assert facts[f"{key}.attention_factor"] == pytest.approx(factor, rel=1e-12)
    for name in ("long_factor", "short_factor"):
        assert facts[f"{key}.{name}_range"] == pytest.approx([min(rs[name]), max(rs[name])])
    lam = wavelengths(rotary_dim, fixture["rope_theta"])
    assert facts[f"{key}.slowest_wavelength_default"] == pytest.approx(lam[-1], rel=1e-12)
    # Past L0 each pair is divided by its long factor, so its wavelength is multiplied by it.
    assert facts[f"{key}.slowest_wavelength"] == pytest.approx(lam[-1] * rs["long_factor"][-1], rel=1e-6)
    assert (facts[f"{key}.rotary_dim"], facts[f"{key}.head_dim"]) == (rotary_dim, head)
    assert facts[f"{key}.trained"] == original
    assert facts[f"{key}.context"] == fixture["max_position_embeddings"]
    long_lo, long_hi = min(rs["long_factor"]), max(rs["long_factor"])
    short_lo, short_hi = min(rs["short_factor"]), max(rs["short_factor"])
    assert (
        f"between {short_lo:.2f} and {short_hi:.2f} for inputs up to {original:,} tokens, between "
        f"{long_lo:.2f} and {long_hi:.2f} beyond, and scales its cos/sin tables by {factor:.4f} = "
        f"sqrt(1 + ln {s:g} / ln {original}) for every input"
    ) in flowing


@pytest.mark.parametrize("key,name", configs.MODELS)
def test_real_config_tables_print_whole_numbers(ran, facts, key, name):
    _, text = ran
    fixture = load_fixture(name)
    model = fixture["source"].split("/")[-1]
    rows = [line.split() for line in text.splitlines() if line.strip().startswith(model)]
    assert len(rows) == 2  # one row per table, name not folded
    said, does = rows
    head, rotary_dim = head_of(fixture)
    assert said[1:] == [
        facts[f"configs.{key}.rope_type"],
        str(rotary_dim),
        "of",
        str(head),
        f"{fixture['rope_theta']:g}",
        f"{facts[f'configs.{key}.trained']:,}",
        f"{fixture['max_position_embeddings']:,}",
    ]
    assert does[1:] == [
        f"{facts[f'configs.{key}.attention_factor']:.4f}",
        f"{facts[f'configs.{key}.slowest_wavelength_default']:,.0f}",
        f"{facts[f'configs.{key}.slowest_wavelength']:,.0f}",
    ]


def test_pair_bands_helper():
    default = torch.tensor([1.0, 0.5, 0.25, 0.125], dtype=torch.float64)
    scaled = default / torch.tensor([1.0, 2.0, 8.0, 8.0], dtype=torch.float64)
    assert configs.pair_bands(scaled, default, 8.0) == (1, 2, 1)


def test_position_vector_length_is_root_half_width(facts):
    """A sine/cosine row has d/2 (sin, cos) pairs of length 1, so its length is sqrt(d/2) at every seat."""
    width = facts["input.width"]
    assert facts["input.position_norm.min"] == pytest.approx(math.sqrt(width / 2), rel=1e-12)
    assert facts["input.position_norm.max"] == pytest.approx(math.sqrt(width / 2), rel=1e-12)
    for i in range(3):
        std = facts[f"input.scale.{i}.std"]
        # the mean length of a Gaussian vector is close to std * sqrt(d) (within 2% at d = 16)
        assert facts[f"input.scale.{i}.word_norm"] == pytest.approx(std * math.sqrt(width), rel=0.02)


def test_alibi_slopes_are_the_geometric_series(facts, flowing):
    heads = facts["alibi.heads"]
    expected = [2 ** (-8 * (h + 1) / heads) for h in range(heads)]
    assert facts["alibi.slopes"] == pytest.approx(expected, rel=1e-6)
    assert facts["alibi.head0.bias_at_distance"] == pytest.approx(-expected[0] * 10)


def test_alibi_attention_split_is_a_softmax_of_the_penalties(facts):
    """Equal matches: head h's weight on a key d back is exp(-slope d) / sum over d' of exp(-slope d')."""
    far, nearest = 64, 4
    for key, slope in (("steep", facts["alibi.slopes"][0]), ("shallow", facts["alibi.slopes"][-1])):
        weights = np.exp(-slope * np.arange(far + 1, dtype=np.float64))
        weights /= weights.sum()
        assert facts[f"alibi.far.{key}_nearest"] == pytest.approx(weights[:nearest].sum(), rel=1e-5)
    assert facts["alibi.far.even_nearest"] == pytest.approx(nearest / (far + 1))


def test_only_the_learned_table_stops_past_training(facts, flowing):
    assert facts["compare.trained"] == 512
    from posenc.teaching.lesson.chapters.comparison import SCHEMES

    assert "learned" in SCHEMES and len(SCHEMES) >= 5
    assert sorted(facts["compare.reads.512"]) == sorted(SCHEMES)
    assert sorted(facts["compare.reads.576"]) == sorted(s for s in SCHEMES if s != "learned")
    with pytest.raises(PositionOutOfRangeError):
        LearnedPositionalEmbedding(512, 8).encodings(torch.arange(576))


def test_demo_score_is_the_rotated_dot_product_wherever_the_pair_sits(facts):
    from posenc.teaching.lesson.rotation import KEY, QUERY

    theta = facts["demo.theta"]
    for shift, key in ((0, "demo.score"), (100, "demo.score.moved.100"), (10_000, "demo.score.moved.10000")):
        q, k = rot2(QUERY, (1 + shift) * theta), rot2(KEY, (3 + shift) * theta)
        assert facts[key] == pytest.approx(float(q @ k), abs=1e-9)
    assert facts["demo.score"] == pytest.approx(float(np.asarray(QUERY) @ rot2(KEY, 2 * theta)), abs=1e-9)


def test_precision_check_spacing_is_one_unit_in_the_last_place(facts):
    seat = facts["checks.seat"]
    assert facts["checks.spacing.float32"] == float(np.spacing(np.float32(seat)))
    assert facts["checks.spacing.float64"] == float(np.spacing(np.float64(seat)))
