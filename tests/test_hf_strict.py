"""Strict Hugging Face config reading, and the round trip ``to_hf_dict`` -> ``from_hf_config``.

* Each reproduction of a silently accepted or badly reported config is a regression test.
* A hypothesis suite builds modules of every registered rope type (partial rotary, both layouts, both
  config styles, through JSON) and checks that they come back exactly.
* Another feeds configs with hostile values and asserts "correct, or a clear ValueError/TypeError that
  names the field": a hostile value in a field the reader uses must never be accepted.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import warnings

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import posenc
from posenc.hf import MAX_HEAD_DIM, rotary_kwargs_from_hf, scaling_from_hf, to_hf_dict
from posenc.rope import REGISTRY, RotaryEmbedding, rope_frequencies, softmax_scale
from posenc.rope.scaling import longrope_attention_factor

BUILTIN_TYPES = ("default", "linear", "ntk", "dynamic", "yarn", "llama3", "longrope", "proportional")


def refused(config, *words, error=ValueError):
    """The reader raises ``error`` and its message contains every one of ``words``."""
    with pytest.raises(error) as info:
        rotary_kwargs_from_hf(config)
    message = str(info.value)
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"
    return message


def longrope_dict(n=16, **extra):
    return {
        "rope_type": "longrope",
        "short_factor": [1.0] * n,
        "long_factor": [2.0] * n,
        "original_max_position_embeddings": 1024,
        **extra,
    }


# -- the reproductions -----------------------------------------------------------------------------------
def test_strings_are_not_numbers():
    refused({"head_dim": "64"}, "head_dim", "'64'")
    refused({"head_dim": 64, "rope_theta": "500000"}, "rope_theta", "'500000'")
    refused({"head_dim": 64, "rope_parameters": {"rope_type": "default", "rope_theta": "1e4"}}, "rope_theta", "'1e4'")
    refused({"hidden_size": "4096", "num_attention_heads": 32}, "hidden_size", "'4096'")
    refused({"head_dim": 64, "max_position_embeddings": "4096"}, "max_position_embeddings", "'4096'")
    refused({"head_dim": 64, "partial_rotary_factor": "0.5"}, "partial_rotary_factor", "'0.5'")
    refused({"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": "8"}}, "factor", "'8'")


def test_bools_are_not_numbers():
    refused({"head_dim": True}, "head_dim", "True")
    refused({"head_dim": 64, "rope_theta": True}, "rope_theta", "True")
    refused({"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": True}}, "factor", "True")
    refused(
        {"head_dim": 64, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "mscale": False, "mscale_all_dim": 1.0}},
        "mscale",
        "False",
    )


def test_fractional_integers_are_refused_not_truncated():
    refused({"head_dim": 64.9}, "head_dim", "64.9")
    refused({"head_dim": 64, "max_position_embeddings": 4096.5}, "max_position_embeddings", "4096.5")
    refused(
        {
            "head_dim": 64,
            "original_max_position_embeddings": 8191.5,
            "rope_scaling": {"rope_type": "yarn", "factor": 4.0},
        },
        "original_max_position_embeddings",
        "8191.5",
    )
    # a whole number written as a float is that number
    assert rotary_kwargs_from_hf({"head_dim": 64.0})["head_dim"] == 64


def test_non_positive_lengths_are_refused_not_replaced():
    for rope in (
        {"rope_type": "yarn", "factor": 4.0},
        {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0},
        longrope_dict(),
    ):
        refused(
            {"head_dim": 32, "original_max_position_embeddings": 0, "rope_scaling": rope},
            "original_max_position_embeddings",
            "0",
        )
        refused(
            {"head_dim": 32, "rope_scaling": {**rope, "original_max_position_embeddings": 0}},
            "original_max_position_embeddings",
            "0",
        )
    refused({"head_dim": 32, "max_position_embeddings": 0}, "max_position_embeddings", "0")
    refused(
        {"head_dim": 32, "max_position_embeddings": -5, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}},
        "max_position_embeddings",
        "-5",
    )


def test_longrope_derived_attention_factor_needs_a_trained_length_of_two():
    """Regression: a LongRoPE config with factor > 1, no attention_factor and
    original_max_position_embeddings 1 divided by log(1) = 0 (a raw ZeroDivisionError)."""
    with pytest.raises(ValueError, match=r"original_max_position_embeddings must be an integer >= 2.*got 1"):
        posenc.rope.LongRoPEScaling([1.0], [2.0], 1, factor=3.0).validate(2)
    refused(
        {
            "head_dim": 2,
            "max_position_embeddings": 4,
            "original_max_position_embeddings": 1,
            "rope_scaling": {"rope_type": "longrope", "short_factor": [1.0], "long_factor": [2.0]},
        },
        "original_max_position_embeddings",
        "1",
    )
    # with the attention factor given, nothing divides by log(1)
    posenc.rope.LongRoPEScaling([1.0], [2.0], 1, factor=3.0, attention_factor=1.2).validate(2)


def test_longrope_negative_factor_is_refused_not_clamped():
    refused({"head_dim": 32, "max_position_embeddings": 4096, "rope_scaling": longrope_dict(factor=-3)}, "factor", "-3")
    refused({"head_dim": 32, "rope_scaling": longrope_dict(factor=0.5)}, "factor", "0.5")
    # only a factor the reader derives itself (a context no longer than the trained one) becomes 1
    derived = scaling_from_hf({"head_dim": 32, "max_position_embeddings": 512, "rope_scaling": longrope_dict()})
    assert derived.factor == 1.0


def test_nan_inf_and_zero_give_named_value_errors_not_raw_ones():
    for value in (float("nan"), float("inf"), -float("inf")):
        refused({"head_dim": 64, "rope_theta": value}, "rope_theta")
        refused({"head_dim": value}, "head_dim")
        refused({"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": value}}, "factor")
        refused({"head_dim": 64, "partial_rotary_factor": value}, "partial_rotary_factor")
        refused(
            {
                "head_dim": 64,
                "original_max_position_embeddings": value,
                "rope_scaling": {"rope_type": "yarn", "factor": 2.0},
            },
            "original_max_position_embeddings",
        )
    # formerly ZeroDivisionError (hidden_size % 0) and int()/float() errors
    refused({"hidden_size": 64, "num_attention_heads": 0}, "num_attention_heads", "0")
    refused({"hidden_size": 64, "num_attention_heads": 3}, "not divisible")
    refused({"head_dim": 64, "rotary_dim": "32"}, "rotary_dim", "'32'")
    refused({"head_dim": 64, "rotary_dim": 31}, "rotary_dim", "31")
    refused({"head_dim": 64, "rope_theta": 1.0}, "rope_theta", "1.0")
    refused({"head_dim": 64, "partial_rotary_factor": 1.5}, "partial_rotary_factor", "1.5")
    refused({"head_dim": 64, "rope_interleave": "yes"}, "rope_interleave", "'yes'")
    refused({"head_dim": MAX_HEAD_DIM + 2}, "head_dim", str(MAX_HEAD_DIM + 2))
    refused({"head_dim": 64, "rope_scaling": [1, 2]}, "rope_scaling", "[1, 2]")
    refused({"head_dim": 64, "rope_scaling": {"rope_type": 3}}, "rope_type", "3")
    refused(["head_dim", 64], "dict", error=TypeError)


def test_conflicting_rope_parameters_and_rope_scaling_are_refused():
    both = {
        "head_dim": 64,
        "rope_scaling": {"type": "linear", "factor": 2.0},
        "rope_parameters": {"rope_type": "linear", "factor": 4.0},
    }
    refused(both, "rope_parameters", "rope_scaling", "'factor'", "4.0", "2.0")
    refused({**both, "rope_parameters": {"rope_type": "default", "rope_theta": 5e5}}, "'rope_type'")
    # theta in one dict and at the top level for the other: the same model, so no conflict
    same = {
        "head_dim": 64,
        "rope_theta": 5e5,
        "rope_scaling": {"type": "linear", "factor": 2.0},
        "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 5e5},
    }
    assert rotary_kwargs_from_hf(same)["scaling"] == posenc.rope.LinearScaling(2.0)
    refused({**same, "rope_theta": 1e4}, "'rope_theta'", "500000.0", "10000.0")


@pytest.mark.slow  # importing transformers takes seconds
def test_transformers_itself_keeps_rope_scaling_silently():
    """Why a conflict raises instead of warning: the reference silently drops rope_parameters (the
    behaviour docs/scalings.md describes; this fails if a transformers release changes it)."""
    transformers = pytest.importorskip("transformers")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = transformers.LlamaConfig(
            rope_scaling={"rope_type": "linear", "factor": 2.0}, rope_parameters={"rope_type": "linear", "factor": 4.0}
        )
    assert config.rope_parameters["factor"] == 2.0


def test_proportional_on_part_of_the_head_round_trips():
    rope = RotaryEmbedding(64, rotary_dim=32, scaling=posenc.rope.ProportionalScaling(0.5))
    for style in ("rope_parameters", "rope_scaling"):
        back = RotaryEmbedding.from_hf_config(
            json.loads(json.dumps(rope.to_hf_dict() if style == "rope_parameters" else to_hf_dict(rope, style=style)))
        )
        assert (back.head_dim, back.rotary_dim, back.scaling) == (64, 32, posenc.rope.ProportionalScaling(0.5))
        assert torch.equal(back.frequencies()[0], rope.frequencies()[0])


def test_interleaved_layout_round_trips():
    rope = RotaryEmbedding(64, layout="interleaved", scaling=posenc.rope.LinearScaling(2.0))
    assert rope.to_hf_dict()["rope_interleave"] is True
    assert RotaryEmbedding.from_hf_config(rope.to_hf_dict()).layout == "interleaved"


def test_strict_false_ignores_unknown_keys_but_never_bad_values():
    config = {"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": 2.0, "finetuned": True}}
    refused(config, "finetuned")
    assert rotary_kwargs_from_hf(config, strict=False)["scaling"] == posenc.rope.LinearScaling(2.0)
    with pytest.raises(ValueError, match="factor"):
        rotary_kwargs_from_hf({"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": "2"}}, strict=False)


@pytest.mark.slow
def test_transformers_config_objects_read_like_their_dicts():
    transformers = pytest.importorskip("transformers")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = transformers.LlamaConfig(
            hidden_size=256,
            num_attention_heads=4,
            max_position_embeddings=4096,
            rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024},
        )
    assert rotary_kwargs_from_hf(config)["scaling"] == posenc.rope.YaRNScaling(4.0, 1024)


# -- property: every module round-trips exactly ------------------------------------------------------
positive = st.floats(1.0, 64.0, allow_nan=False)


@st.composite
def modules(draw, rope_type=None):
    """A RotaryEmbedding of any built-in rope type, width, layout and parameters."""
    rope_type = rope_type or draw(st.sampled_from(BUILTIN_TYPES))
    head_dim = 2 * draw(st.integers(1, 80))
    rotary_dim = 2 * draw(st.integers(1, head_dim // 2))
    if rope_type == "dynamic" and rotary_dim == 2 and head_dim > 2:
        rotary_dim = 4
    layout = draw(st.sampled_from(["half", "interleaved"]))
    base = draw(st.floats(1.5, 1e7, allow_nan=False))
    # LongRoPE's derived attention factor divides by log(original): 1 is refused (tested below)
    original = draw(st.integers(2 if rope_type == "longrope" else 1, 200_000))
    max_positions = draw(st.integers(1, 1_000_000))
    factor = draw(positive)
    optional = lambda s: draw(st.one_of(st.none(), s))
    scaling = {
        "default": lambda: None,
        "linear": lambda: posenc.rope.LinearScaling(factor),
        "ntk": lambda: posenc.rope.NTKScaling(factor),
        "dynamic": lambda: posenc.rope.DynamicNTKScaling(factor, original),
        "yarn": lambda: posenc.rope.YaRNScaling(
            # beta_slow stays below 2.0 <= beta_fast: YaRN requires beta_fast > beta_slow
            factor,
            original,
            beta_fast=2.0 + draw(st.floats(0.0, 62.0)),
            beta_slow=draw(st.floats(0.1, 2.0, exclude_max=True)),
            **(
                dict(mscale=draw(st.floats(0.1, 2.0)), mscale_all_dim=draw(st.floats(0.1, 2.0)))
                if draw(st.booleans())
                else {}
            ),
            attention_factor=optional(st.floats(0.1, 4.0)),
            truncate=draw(st.booleans()),
        ),
        "llama3": lambda: posenc.rope.Llama3Scaling(
            factor, 1.0 + draw(st.floats(-0.5, 1.0)), 2.5 + draw(st.floats(0.0, 8.0)), original
        ),
        "longrope": lambda: posenc.rope.LongRoPEScaling(
            draw(st.lists(st.floats(0.5, 8.0), min_size=rotary_dim // 2, max_size=rotary_dim // 2)),
            draw(st.lists(st.floats(1.0, 64.0), min_size=rotary_dim // 2, max_size=rotary_dim // 2)),
            original,
            attention_factor=optional(st.floats(0.1, 4.0)),
            factor=optional(positive),
        ),
        "proportional": lambda: posenc.rope.ProportionalScaling(draw(st.floats(0.01, 1.0)), factor),
    }[rope_type]()
    return RotaryEmbedding(
        head_dim,
        base=base,
        rotary_dim=rotary_dim,
        layout=layout,
        scaling=scaling,
        max_position_embeddings=max_positions,
    )


def expected_after_round_trip(rope: RotaryEmbedding):
    """The documented normalisations (see posenc.rope.hfconfig.to_hf_dict); everything else is kept."""
    scaling, max_positions = rope.scaling, rope.max_position_embeddings
    if isinstance(scaling, posenc.rope.DynamicNTKScaling):
        max_positions = scaling.original_max_position_embeddings
    if isinstance(scaling, posenc.rope.LongRoPEScaling) and scaling.factor is None and scaling.attention_factor is None:
        scaling = dataclasses.replace(scaling, attention_factor=longrope_attention_factor(scaling))
    return scaling, max_positions


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rope=modules(), style=st.sampled_from(["rope_parameters", "rope_scaling"]))
def test_every_module_round_trips_exactly(rope, style):
    written = to_hf_dict(rope, style=style)
    config = json.loads(json.dumps(written))  # what a config.json file holds
    back = RotaryEmbedding.from_hf_config(config)
    scaling, max_positions = expected_after_round_trip(rope)
    assert (back.head_dim, back.rotary_dim, back.base, back.layout) == (
        rope.head_dim,
        rope.rotary_dim,
        rope.base,
        rope.layout,
    )
    assert back.scaling == scaling
    assert back.max_position_embeddings == max_positions
    assert back.attention_factor == rope.attention_factor
    assert softmax_scale(back.scaling) == softmax_scale(rope.scaling)
    longer = 4 * max(rope.max_position_embeddings, getattr(rope.scaling, "original_max_position_embeddings", 1))
    for seq_len in (None, longer):
        ours, theirs = rope.frequencies(seq_len), back.frequencies(seq_len)
        assert torch.equal(ours[0], theirs[0]) and ours[1] == theirs[1]
    assert to_hf_dict(back, style=style) == written  # a fixed point


@pytest.mark.parametrize("rope_type", BUILTIN_TYPES)
@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_each_type_round_trips(rope_type, data):
    rope = data.draw(modules(rope_type))
    back = RotaryEmbedding.from_hf_config(json.loads(json.dumps(rope.to_hf_dict())))
    assert (back.rotary_dim, back.layout, back.scaling) == (
        rope.rotary_dim,
        rope.layout,
        expected_after_round_trip(rope)[0],
    )


def test_the_generator_reaches_every_registered_builtin_type():
    assert set(BUILTIN_TYPES) <= set(REGISTRY)


# -- property: hostile configs ----------------------------------------------------------------------
#: values that are never a valid number
NOT_NUMBERS = [
    "64",
    "1e4",
    "",
    "nan",
    True,
    False,
    float("nan"),
    float("inf"),
    -float("inf"),
    [1.0],
    {"a": 1},
    [],
    (2,),
]
#: fields a type's reader always uses (top level, then rope dict), given the base configs below
CONSUMED_TOP = ("head_dim", "rope_theta", "partial_rotary_factor", "max_position_embeddings")
CONSUMED_ROPE = {
    "default": (),
    "linear": ("factor",),
    "ntk": ("factor",),
    "dynamic": ("factor",),
    "yarn": ("factor", "beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim"),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor"),
    "longrope": ("factor", "attention_factor"),
    "proportional": ("factor",),
}
#: fields that must be > 0 (lengths, factors) and whole-number fields
POSITIVE = {
    "head_dim",
    "max_position_embeddings",
    "original_max_position_embeddings",
    "factor",
    "beta_slow",
    "low_freq_factor",
    "attention_factor",
    "mscale",
    "mscale_all_dim",
    "partial_rotary_factor",
}
WHOLE = {"head_dim", "max_position_embeddings", "original_max_position_embeddings"}


def base_config(rng: random.Random, rope_type: str) -> dict:
    """A valid legacy-style config.json dict of ``rope_type`` with top-level theta and lengths."""
    head_dim = 2 * rng.randint(2, 64)
    partial = rng.choice([1.0, 0.5, 0.25]) if rope_type != "proportional" else rng.uniform(0.1, 1.0)
    if int(head_dim * partial) % 2 or int(head_dim * partial) < 4:
        partial = 1.0
    rotary = head_dim if rope_type == "proportional" else int(head_dim * partial)
    config = {
        "head_dim": head_dim,
        "rope_theta": 10 ** rng.uniform(2, 6),
        "partial_rotary_factor": partial,
        "max_position_embeddings": rng.randint(64, 100_000),
    }
    factor = rng.uniform(1.0, 32.0)
    rope = {"rope_type": rope_type}
    if rope_type in ("linear", "ntk", "dynamic", "proportional"):
        rope["factor"] = factor
    elif rope_type == "yarn":
        rope.update(factor=factor, beta_fast=32.0, beta_slow=1.0, attention_factor=1.1, mscale=1.0, mscale_all_dim=0.8)
    elif rope_type == "llama3":
        rope.update(factor=factor, low_freq_factor=1.0, high_freq_factor=4.0)
    elif rope_type == "longrope":
        rope.update(
            short_factor=[1.0] * (rotary // 2), long_factor=[4.0] * (rotary // 2), factor=factor, attention_factor=1.2
        )
    if rope_type in ("yarn", "llama3", "longrope"):
        config["original_max_position_embeddings"] = rng.randint(16, 8192)
    config["rope_scaling"] = None if rope_type == "default" else rope
    return config


def hostile_value(rng: random.Random, field: str):
    """A value that field must refuse."""
    choices = list(NOT_NUMBERS)
    if field in POSITIVE:
        # (transformers reads mscale 0 as "not given", and so does posenc: not hostile there)
        choices += [-1, -3.5, -1e300] + ([] if field.startswith("mscale") else [0, 0.0])
    if field in WHOLE:
        choices += [64.5, 1e-9 + 100, 2.5]
    if field == "partial_rotary_factor":
        choices += [1.0000001, 2, 1e9]
    if field == "rope_theta":
        choices += [1.0, 0.5, 0, -1e4]
    if field == "head_dim":
        choices += [MAX_HEAD_DIM + 2, 10**12]
    return rng.choice(choices)


def check_hostile(rng: random.Random) -> str:
    """One hostile case: a valid config with one consumed field set to a value it must refuse.
    Returns "refused"; anything else fails the test."""
    rope_type = rng.choice(BUILTIN_TYPES)
    config = base_config(rng, rope_type)
    top = list(CONSUMED_TOP) + (
        ["original_max_position_embeddings"] if "original_max_position_embeddings" in config else []
    )
    inside = list(CONSUMED_ROPE[rope_type])
    where = rng.choice(["top"] * len(top) + ["rope"] * len(inside))
    field = rng.choice(top if where == "top" else inside)
    value = hostile_value(rng, field)
    if where == "top":
        config[field] = value
    else:
        config["rope_scaling"][field] = value
    try:
        result = rotary_kwargs_from_hf(config)
    except (ValueError, TypeError) as err:
        message = str(err)
        assert field in message, f"{field}={value!r}: the message does not name the field: {message}"
        return "refused"
    raise AssertionError(f"{rope_type}: {where} field {field}={value!r} was accepted: {result}")


@settings(max_examples=200, deadline=None)
@given(rng=st.randoms(use_true_random=False))
def test_hostile_values_in_used_fields_are_refused_by_name(rng):
    assert check_hostile(rng) == "refused"


ANY_VALUE = NOT_NUMBERS + [
    None,
    0,
    1,
    2,
    3.0,
    0.5,
    1e-300,
    1e300,
    -7,
    10**30,
    4096,
    "linear",
    "yarn",
    {"rope_type": "linear", "factor": 2.0},
]


def check_anything(rng: random.Random) -> str:
    """A valid config with one to three fields (used or not, at any level) replaced by anything.

    Returns "accepted" or "refused"; an accepted config must be correct: its numbers are the ones the
    config states, the module builds, its frequencies are finite, and writing it back reads the same.
    """
    rope_type = rng.choice(BUILTIN_TYPES)
    config = base_config(rng, rope_type)
    for _ in range(rng.randint(1, 3)):
        inner = config.get("rope_scaling")
        target = config if rng.random() < 0.5 or not isinstance(inner, dict) else inner
        key = rng.choice(
            list(target)
            + [
                "rope_parameters",
                "hidden_size",
                "rotary_dim",
                "rope_interleave",
                "num_attention_heads",
                "type",
                "truncate",
                "short_factor",
            ]
        )
        if rng.random() < 0.15:
            target.pop(key, None)
        else:
            target[key] = rng.choice(ANY_VALUE)
    try:
        kwargs = rotary_kwargs_from_hf(config)
    except (ValueError, TypeError) as err:
        assert str(err), "an error without a message"
        return "refused"
    head_dim, base, rotary_dim = kwargs["head_dim"], kwargs["base"], kwargs["rotary_dim"]
    assert type(head_dim) is int and 2 <= head_dim <= MAX_HEAD_DIM
    assert type(base) is float and math.isfinite(base) and base > 1
    assert type(rotary_dim) is int and 2 <= rotary_dim <= head_dim and rotary_dim % 2 == 0
    assert type(kwargs["max_position_embeddings"]) is int and kwargs["max_position_embeddings"] >= 1
    if "head_dim" in config and config["head_dim"] is not None:
        assert head_dim == config["head_dim"]
    scaling = kwargs["scaling"]
    for f in dataclasses.fields(scaling) if scaling is not None else ():
        value = getattr(scaling, f.name)
        values = value if isinstance(value, tuple) else (value,)
        for v in values:
            assert (
                v is None
                or (isinstance(v, bool) and f.name == "truncate")
                or (not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v))
            ), (f.name, v)
    inv_freq, attention = rope_frequencies(scaling, rotary_dim, base, 10**6)
    assert bool(torch.isfinite(inv_freq).all()) and bool((inv_freq >= 0).all())
    assert math.isfinite(attention) and attention > 0
    rope = RotaryEmbedding(**{**kwargs, "max_position_embeddings": 1})
    again = rotary_kwargs_from_hf(json.loads(json.dumps(to_hf_dict(rope))))
    assert (again["head_dim"], again["rotary_dim"], again["base"], again["layout"]) == (
        head_dim,
        rotary_dim,
        base,
        kwargs["layout"],
    )
    return "accepted"


@settings(max_examples=200, deadline=None)
@given(rng=st.randoms(use_true_random=False))
def test_any_config_is_read_correctly_or_refused_clearly(rng):
    assert check_anything(rng) in ("accepted", "refused")


def test_hostile_sweep_counts(capsys):
    """A seeded sweep of both generators, for the counts quoted in reports (run with -s to see them)."""
    counts = {"hostile": {"refused": 0}, "anything": {"accepted": 0, "refused": 0}}
    rng = random.Random(2026)
    for _ in range(3000):
        counts["hostile"][check_hostile(rng)] += 1
        counts["anything"][check_anything(rng)] += 1
    with capsys.disabled():
        print(f"\nhostile configs: {counts}")
    assert counts["hostile"]["refused"] == 3000
    assert counts["anything"]["accepted"] > 0 and counts["anything"]["refused"] > 0


def test_a_factor_derived_below_one_is_explained():
    refused(
        {
            "head_dim": 32,
            "max_position_embeddings": 1024,
            "original_max_position_embeddings": 4096,
            "rope_scaling": {"rope_type": "yarn"},
        },
        "no factor",
        "1024 / 4096",
        "below 1",
    )
    assert (
        scaling_from_hf(
            {
                "head_dim": 32,
                "max_position_embeddings": 8192,
                "original_max_position_embeddings": 4096,
                "rope_scaling": {"rope_type": "yarn"},
            }
        ).factor
        == 2.0
    )
