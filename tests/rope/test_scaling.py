"""The scalings: validators that raise with names and ranges, and properties of the formulas."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc.rope import RotaryEmbedding
from posenc.rope.scaling import (
    REGISTRY,
    DefaultScaling,
    DynamicNTKScaling,
    LinearScaling,
    Llama3Scaling,
    LongRoPEScaling,
    NTKScaling,
    ProportionalScaling,
    YaRNScaling,
    rope_frequencies,
    scaling_from_dict,
    scaling_to_dict,
    yarn_softmax_scale,
)
from posenc.rope.tables import rope_inv_freq

SETTINGS = settings(max_examples=25, deadline=None)
rotary_dims = st.integers(2, 64).map(lambda n: 2 * n)
bases = st.floats(2.0, 6.5).map(lambda e: 10**e)
factors = st.floats(1.0, 64.0)
lengths = st.integers(16, 32768)


# -- validators ----------------------------------------------------------------------------------
def _longrope(**kw):
    return LongRoPEScaling(
        **{"short_factor": [1.0] * 4, "long_factor": [2.0] * 4, "original_max_position_embeddings": 64, **kw}
    )


BAD_FIELDS = [
    # (rope type, constructor, field, bad value, words the message must contain)
    ("linear", lambda v: LinearScaling(v), "factor", 0.5, ">= 1"),
    ("linear", lambda v: LinearScaling(v), "factor", float("nan"), ">= 1"),
    ("linear", lambda v: LinearScaling(v), "factor", "8", ">= 1"),
    ("ntk", lambda v: NTKScaling(v), "factor", -2.0, ">= 1"),
    ("dynamic", lambda v: DynamicNTKScaling(v, 2048), "factor", 0.9, ">= 1"),
    ("dynamic", lambda v: DynamicNTKScaling(2.0, v), "original_max_position_embeddings", 0, "integer >= 1"),
    ("dynamic", lambda v: DynamicNTKScaling(2.0, v), "original_max_position_embeddings", 2048.0, "integer >= 1"),
    ("yarn", lambda v: YaRNScaling(v, 4096), "factor", 0.0, ">= 1"),
    ("yarn", lambda v: YaRNScaling(4.0, v), "original_max_position_embeddings", -1, "integer >= 1"),
    ("yarn", lambda v: YaRNScaling(4.0, 4096, beta_fast=v), "beta_fast", 1.0, "> beta_slow=1.0"),
    ("yarn", lambda v: YaRNScaling(4.0, 4096, beta_slow=v), "beta_slow", 0.0, "> 0"),
    ("yarn", lambda v: YaRNScaling(4.0, 4096, mscale=v, mscale_all_dim=1.0), "mscale", -1.0, "> 0"),
    ("yarn", lambda v: YaRNScaling(4.0, 4096, mscale=1.0, mscale_all_dim=v), "mscale_all_dim", 0.0, "> 0"),
    ("yarn", lambda v: YaRNScaling(4.0, 4096, mscale=v), "mscale_all_dim", 1.0, "both or neither"),
    ("yarn", lambda v: YaRNScaling(4.0, 4096, attention_factor=v), "attention_factor", 0.0, "> 0"),
    ("yarn", lambda v: YaRNScaling(4.0, 4096, truncate=v), "truncate", 1, "True or False"),
    ("llama3", lambda v: Llama3Scaling(v, 1.0, 4.0, 8192), "factor", 0.5, ">= 1"),
    ("llama3", lambda v: Llama3Scaling(8.0, v, 4.0, 8192), "low_freq_factor", 0.0, "> 0"),
    ("llama3", lambda v: Llama3Scaling(8.0, 1.0, v, 8192), "high_freq_factor", 1.0, "> low_freq_factor=1.0"),
    ("llama3", lambda v: Llama3Scaling(8.0, 1.0, 4.0, v), "original_max_position_embeddings", 0, "integer >= 1"),
    ("longrope", lambda v: _longrope(short_factor=v), "short_factor", [], "non-empty list"),
    ("longrope", lambda v: _longrope(short_factor=v), "short_factor[1]", [1.0, -1.0, 1.0, 1.0], ">= 1e-06"),
    ("longrope", lambda v: _longrope(long_factor=v), "long_factor[0]", [float("inf")] * 4, ">= 1e-06"),
    ("longrope", lambda v: _longrope(long_factor=v), "long_factor", 2.0, "non-empty list"),
    (
        "longrope",
        lambda v: _longrope(original_max_position_embeddings=v),
        "original_max_position_embeddings",
        0,
        "integer >= 1",
    ),
    ("longrope", lambda v: _longrope(attention_factor=v), "attention_factor", -0.5, "> 0"),
    ("longrope", lambda v: _longrope(factor=v), "factor", 0.5, ">= 1"),
    ("proportional", lambda v: ProportionalScaling(partial_rotary_factor=v), "partial_rotary_factor", 0.0, "(0, 1]"),
    ("proportional", lambda v: ProportionalScaling(partial_rotary_factor=v), "partial_rotary_factor", 1.5, "(0, 1]"),
    ("proportional", lambda v: ProportionalScaling(factor=v), "factor", 0.25, ">= 1"),
]


@pytest.mark.parametrize(
    "rope_type, build, field, value, allowed", BAD_FIELDS, ids=[f"{t}-{f}-{v!r}" for t, _, f, v, _ in BAD_FIELDS]
)
def test_bad_field_raises_with_type_field_value_and_range(rope_type, build, field, value, allowed):
    with pytest.raises(ValueError) as info:
        build(value)
    message = str(info.value)
    assert f"{rope_type!r} scaling" in message
    assert f"{field} must be" in message
    assert allowed in message
    assert "got " in message
    if isinstance(value, (int, float, str)) and not (field == "mscale_all_dim" and value == 1.0):
        assert repr(value) in message or repr(float(value)) in message


def test_every_registered_type_has_bad_field_tests():
    assert {t for t, *_ in BAD_FIELDS} == set(REGISTRY) - {"default"}


@pytest.mark.parametrize("rope_type", sorted(REGISTRY))
def test_rotary_dim_is_validated_by_every_type(rope_type):
    config = scaling_from_dict(_EXAMPLES[rope_type])
    for bad in (0, 7, -4, 3.0):
        with pytest.raises(ValueError, match=rf"'{rope_type}' scaling: rotary_dim must be an even integer >= 2"):
            rope_frequencies(config, bad, 10000.0)


def test_longrope_length_is_checked_against_rotary_dim():
    with pytest.raises(ValueError, match=r"len\(short_factor\) must be rotary_dim // 2 = 8 .* got 4"):
        rope_frequencies(_longrope(), 16, 10000.0)
    with pytest.raises(ValueError, match="longrope"):
        RotaryEmbedding(32, scaling=_longrope())


def test_seq_len_and_foreign_configs_are_refused():
    with pytest.raises(ValueError, match="seq_len must be None or an integer >= 1, got 0"):
        rope_frequencies(LinearScaling(2.0), 8, 10000.0, seq_len=0)
    with pytest.raises(ValueError, match="registered rope type"):
        rope_frequencies({"rope_type": "linear", "factor": 2.0}, 8, 10000.0)


# -- dict round trip -------------------------------------------------------------------------------
_EXAMPLES = {
    "default": {"rope_type": "default"},
    "linear": {"rope_type": "linear", "factor": 4.0},
    "ntk": {"rope_type": "ntk", "factor": 2.0},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 2048},
    "yarn": {
        "rope_type": "yarn",
        "factor": 40.0,
        "original_max_position_embeddings": 4096,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "mscale": 0.707,
        "mscale_all_dim": 0.707,
        "truncate": True,
    },
    "llama3": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
    "longrope": {
        "rope_type": "longrope",
        "short_factor": [1.0, 1.5],
        "long_factor": [3.0, 9.0],
        "original_max_position_embeddings": 4096,
        "factor": 32.0,
    },
    "proportional": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "factor": 1.0},
}


@pytest.mark.parametrize("rope_type", sorted(_EXAMPLES))
def test_dict_round_trip(rope_type):
    config = scaling_from_dict(_EXAMPLES[rope_type])
    assert config.rope_type == rope_type
    assert scaling_from_dict(scaling_to_dict(config)) == config
    assert {k: v for k, v in scaling_to_dict(config).items()} == {k: v for k, v in _EXAMPLES[rope_type].items()} | (
        {"beta_fast": 32.0, "beta_slow": 1.0, "truncate": True} if rope_type == "yarn" else {}
    )


def test_dict_accepts_legacy_type_key_and_su_alias_and_rejects_unknown_keys():
    assert scaling_from_dict({"type": "linear", "factor": 2.0}) == LinearScaling(2.0)
    assert scaling_from_dict(None) == DefaultScaling() == scaling_from_dict({})
    su = scaling_from_dict(
        {"type": "su", "short_factor": [1.0], "long_factor": [2.0], "original_max_position_embeddings": 8}
    )
    assert isinstance(su, LongRoPEScaling)
    with pytest.raises(ValueError, match=r"unknown keys \['factr'\]"):
        scaling_from_dict({"rope_type": "linear", "factr": 2.0})
    with pytest.raises(ValueError, match=r"missing required keys \['factor'\]"):
        scaling_from_dict({"rope_type": "linear"})
    with pytest.raises(ValueError, match="rope_type must be one of"):
        scaling_from_dict({"rope_type": "zigzag"})


# -- properties of the formulas ----------------------------------------------------------------------
@SETTINGS
@given(d=rotary_dims, base=bases, s=factors)
def test_linear_is_default_divided_by_factor(d, base, s):
    inv, factor = rope_frequencies(LinearScaling(s), d, base)
    torch.testing.assert_close(inv, rope_inv_freq(d, base) / s, rtol=1e-15, atol=0)
    assert factor == 1.0


@SETTINGS
@given(d=rotary_dims.filter(lambda d: d >= 4), base=bases, s=factors)
def test_ntk_keeps_fastest_pair_and_slows_slowest_by_factor(d, base, s):
    inv, _ = rope_frequencies(NTKScaling(s), d, base)
    default = rope_inv_freq(d, base)
    assert inv[0].item() == 1.0
    assert math.isclose(inv[-1].item(), default[-1].item() / s, rel_tol=1e-12)
    assert bool((inv <= default * (1 + 1e-15)).all()) and bool((inv >= default / s * (1 - 1e-12)).all())


@SETTINGS
@given(d=rotary_dims.filter(lambda d: d >= 4), base=bases, s=factors, original=lengths, grow=st.floats(0.0, 8.0))
def test_dynamic_is_default_up_to_the_trained_length_then_ntk_of_the_effective_scale(d, base, s, original, grow):
    config = DynamicNTKScaling(s, original)
    for seq_len in (None, 1, original):
        torch.testing.assert_close(
            rope_frequencies(config, d, base, seq_len)[0], rope_inv_freq(d, base), rtol=1e-15, atol=0
        )
    length = original + 1 + int(grow * original)
    effective = s * length / original - (s - 1)
    torch.testing.assert_close(
        rope_frequencies(config, d, base, length)[0],
        rope_frequencies(NTKScaling(effective), d, base)[0],
        rtol=1e-13,
        atol=0,
    )


@SETTINGS
@given(
    d=rotary_dims,
    base=bases,
    s=factors,
    original=lengths,
    truncate=st.booleans(),
    beta_slow=st.floats(0.25, 4.0),
    gap=st.floats(0.5, 64.0),
)
def test_yarn_lies_between_interpolation_and_default(d, base, s, original, truncate, beta_slow, gap):
    config = YaRNScaling(s, original, beta_fast=beta_slow + gap, beta_slow=beta_slow, truncate=truncate)
    inv, _ = rope_frequencies(config, d, base)
    default = rope_inv_freq(d, base)
    assert bool((inv <= default * (1 + 1e-14)).all())
    assert bool((inv >= default / s * (1 - 1e-14)).all())
    ratio = default / inv  # 1 = kept, s = interpolated; never decreasing in i
    assert bool((ratio[1:] >= ratio[:-1] * (1 - 1e-12)).all())


def test_yarn_fast_pairs_kept_slow_pairs_interpolated():
    d, base, s, original = 128, 10000.0, 16.0, 4096
    inv, factor = rope_frequencies(YaRNScaling(s, original), d, base)
    default = rope_inv_freq(d, base)
    turns = original * default / (2 * math.pi)  # full rotations over the trained length
    assert torch.equal(inv[turns > 33], default[turns > 33])
    torch.testing.assert_close(inv[turns < 0.99], default[turns < 0.99] / s, rtol=1e-15, atol=0)
    assert math.isclose(factor, 0.1 * math.log(s) + 1.0, rel_tol=1e-15)


def test_yarn_attention_factor_rules_and_deepseek_softmax_scale():
    s = 40.0
    m = lambda k: 0.1 * k * math.log(s) + 1.0
    plain = YaRNScaling(s, 4096)
    deepseek = YaRNScaling(s, 4096, mscale=0.707, mscale_all_dim=0.707)
    mixed = YaRNScaling(s, 4096, mscale=1.0, mscale_all_dim=0.5)
    explicit = YaRNScaling(s, 4096, attention_factor=1.25, mscale=1.0, mscale_all_dim=0.5)
    assert rope_frequencies(plain, 64, 1e4)[1] == pytest.approx(m(1.0), rel=1e-15)
    assert rope_frequencies(deepseek, 64, 1e4)[1] == 1.0  # the table factor collapses ...
    assert yarn_softmax_scale(deepseek) == pytest.approx(m(0.707) ** 2, rel=1e-15)  # ... into softmax
    assert yarn_softmax_scale(plain) == 1.0
    assert rope_frequencies(mixed, 64, 1e4)[1] == pytest.approx(m(1.0) / m(0.5), rel=1e-15)
    assert rope_frequencies(explicit, 64, 1e4)[1] == 1.25
    assert rope_frequencies(YaRNScaling(1.0, 4096), 64, 1e4)[1] == 1.0


@SETTINGS
@given(d=rotary_dims, base=bases, s=factors, low=st.floats(0.5, 2.0), gap=st.floats(0.5, 8.0), original=lengths)
def test_llama3_bands(d, base, s, low, gap, original):
    high = low + gap
    inv, factor = rope_frequencies(Llama3Scaling(s, low, high, original), d, base)
    default = rope_inv_freq(d, base)
    wavelength = 2 * math.pi / default
    fast, slow = wavelength < original / high, wavelength > original / low
    assert torch.equal(inv[fast], default[fast])  # high frequencies unchanged
    torch.testing.assert_close(inv[slow], default[slow] / s, rtol=1e-15, atol=0)
    assert bool((inv <= default * (1 + 1e-14)).all()) and bool((inv >= default / s * (1 - 1e-14)).all())
    assert factor == 1.0


def test_llama3_is_continuous_at_the_band_edges():
    # rotary_dim 2 has one pair, theta = 1, wavelength 2 pi. Put that wavelength a hair on either side
    # of each band edge: the library's frequency must be the kept theta at the fast edge and theta / s
    # at the slow edge, from both sides (the blend meets both pieces without a jump).
    original, s = 8192, 8.0
    at = original / (2 * math.pi)  # L0 / lambda for the one pair
    for side in (1 - 1e-9, 1 + 1e-9):
        inv, _ = rope_frequencies(Llama3Scaling(s, 1.0, at * side, original), 2, 10000.0)
        assert math.isclose(float(inv[0]), 1.0, rel_tol=1e-8)
        inv, _ = rope_frequencies(Llama3Scaling(s, at * side, 2 * at, original), 2, 10000.0)
        assert math.isclose(float(inv[0]), 1.0 / s, rel_tol=1e-8)
    # and halfway through the band (g = 1/2) it is the mean of the two
    inv, _ = rope_frequencies(Llama3Scaling(s, at / 2, 3 * at / 2, original), 2, 10000.0)
    assert math.isclose(float(inv[0]), 0.5 / s + 0.5, rel_tol=1e-12)


@SETTINGS
@given(n=st.integers(1, 32), base=bases, original=lengths, data=st.data())
def test_longrope_divides_by_short_or_long_factor(n, base, original, data):
    short = data.draw(st.lists(st.floats(1.0, 4.0), min_size=n, max_size=n))
    long = data.draw(st.lists(st.floats(1.0, 64.0), min_size=n, max_size=n))
    s = data.draw(st.floats(1.0, 64.0))
    config = LongRoPEScaling(short, long, original, factor=s)
    default = rope_inv_freq(2 * n, base)
    for seq_len, chosen in ((None, short), (original, short), (original + 1, long)):
        inv, factor = rope_frequencies(config, 2 * n, base, seq_len)
        torch.testing.assert_close(inv, default / torch.tensor(chosen, dtype=torch.float64), rtol=1e-15, atol=0)
        expected = math.sqrt(1 + math.log(s) / math.log(original)) if s > 1 else 1.0
        assert math.isclose(factor, expected, rel_tol=1e-15)


def test_proportional_rotates_a_fraction_with_the_full_denominator():
    inv, _ = rope_frequencies(ProportionalScaling(0.25, factor=2.0), 16, 10000.0)
    expected = rope_inv_freq(16, 10000.0) / 2.0
    assert torch.equal(inv[:2], expected[:2]) and inv[2:].abs().sum().item() == 0.0


@pytest.mark.parametrize("rope_type", ["linear", "ntk", "yarn", "llama3"])  # dynamic: s_eff = L / L0 at s = 1
def test_factor_one_is_the_default_rope(rope_type):
    example = dict(_EXAMPLES[rope_type], factor=1.0)
    inv, factor = rope_frequencies(scaling_from_dict(example), 64, 10000.0, seq_len=100_000)
    torch.testing.assert_close(inv, rope_inv_freq(64, 10000.0), rtol=1e-15, atol=0)
    assert factor == 1.0


# -- exact tables and precision under casts, for every scaling ------------------------------------------
@pytest.mark.parametrize("rope_type", sorted(_EXAMPLES))
def test_tables_are_exact_and_survive_half_precision_casts(rope_type):
    example = dict(_EXAMPLES[rope_type])
    if rope_type == "longrope":
        example.update(
            short_factor=[1.0 + i / 10 for i in range(16)],
            long_factor=[2.0 + i for i in range(16)],
            original_max_position_embeddings=64,
        )
    if rope_type == "dynamic":
        example["original_max_position_embeddings"] = 64
    rope = RotaryEmbedding(32, base=10000.0, scaling=scaling_from_dict(example), max_position_embeddings=64)
    positions = torch.tensor([[0, 1, 63, 1_000_003]])
    inv, factor = rope_frequencies(rope.scaling, 32, 10000.0, 1_000_004)
    angles = torch.remainder(positions.double()[..., None] * inv, 2 * math.pi)
    before = rope.cos_sin(positions)
    for dtype in (torch.bfloat16, torch.float16):
        rope.to(dtype)
        cos, sin = rope.cos_sin(positions)
        assert cos.dtype == torch.float32 and rope.inv_freq.dtype == torch.float32
        torch.testing.assert_close(cos.double(), angles.cos() * factor, atol=2e-7, rtol=0)
        torch.testing.assert_close(sin.double(), angles.sin() * factor, atol=2e-7, rtol=0)
        assert torch.equal(cos, before[0]) and torch.equal(sin, before[1])


# -- numbers at the edge of float64 ------------------------------------------------------------------
def test_huge_numbers_are_refused_by_name_or_computed_exactly():
    # an int beyond float64 is not a finite number
    with pytest.raises(ValueError, match="factor must be a finite number >= 1"):
        LinearScaling(10**400)
    with pytest.raises(ValueError, match="original_max_position_embeddings must be an integer >= 1 and <= 2"):
        DynamicNTKScaling(2.0, 2**53 + 1)
    # a large int that float64 holds divides the frequencies like its float
    inv, _ = rope_frequencies(LinearScaling(10**30), 8, 10000.0)
    assert torch.equal(inv, rope_inv_freq(8, 10000.0) / 1e30)
    long = LongRoPEScaling([10**20] * 4, [1] * 4, 64)
    assert torch.equal(rope_frequencies(long, 8, 10000.0)[0], rope_inv_freq(8, 10000.0) / 1e20)
    # NTK's new base past float64 is a clear error, not an OverflowError
    with pytest.raises(ValueError, match="beyond float64"):
        rope_frequencies(NTKScaling(1e300), 4, 10000.0)
    with pytest.raises(ValueError, match="beyond float64"):
        RotaryEmbedding(4, scaling=DynamicNTKScaling(1e300, 16)).frequencies(32)


def test_ntk_base_is_public_and_keeps_the_fastest_pair():
    from posenc.rope.scaling import ntk_base

    for d in (4, 16, 128):
        new = ntk_base(10000.0, 8.0, d)
        assert new == pytest.approx(10000.0 * 8.0 ** (d / (d - 2)), rel=1e-15)
        slowest_old, slowest_new = 10000.0 ** (-(d - 2) / d), new ** (-(d - 2) / d)
        assert slowest_old / slowest_new == pytest.approx(8.0, rel=1e-12)
    assert ntk_base(500.0, 8.0, 2) == 500.0
