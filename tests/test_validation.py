"""Edge cases across the public API: round trips, causality with restarting positions, bad input."""

import pytest
import torch

import posenc
from posenc import (
    ALiBi,
    CausalSelfAttention,
    LearnedPositionalEmbedding,
    ModelConfig,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    TinyLM,
    alibi_bias,
    make_scheme,
)
from posenc.hf import to_hf_dict
from posenc.rope import (
    REGISTRY,
    DynamicNTKScaling,
    LinearScaling,
    Llama3Scaling,
    LongRoPEScaling,
    NTKScaling,
    YaRNScaling,
    apply_rotary_at,
    rope_cos_sin,
    rope_frequencies,
)

SCALINGS = {
    "default": None,
    "linear": LinearScaling(4.0),
    "ntk": NTKScaling(4.0),
    "dynamic": DynamicNTKScaling(4.0, 64),
    "yarn": YaRNScaling(4.0, 64),
    "llama3": Llama3Scaling(8.0, 1.0, 4.0, 64),
    "longrope": LongRoPEScaling([1.0, 1.5, 2.0, 3.0], [2.0, 3.0, 4.0, 6.0], 64),
}


def test_every_registered_scaling_is_exercised_here():
    assert set(SCALINGS) <= set(REGISTRY)


# -- causality goes by token order -------------------------------------------------------------------
@pytest.mark.parametrize("name", posenc.SCHEMES)
@pytest.mark.parametrize("positions", [[0, 1, 2, 0, 1, 2], [0, 1, 2, 3, 0, 0]], ids=["packed", "right-padded"])
def test_no_scheme_sees_later_tokens_when_positions_restart(name, positions):
    torch.manual_seed(0)
    model = TinyLM(ModelConfig(scheme=name, d_model=32, n_heads=4, n_layers=2, max_len=16))
    pos = torch.tensor([positions])
    ids = torch.randint(0, 256, (1, 6))
    changed = ids.clone()
    changed[0, 5] = (changed[0, 5] + 7) % 256
    torch.testing.assert_close(model(ids, position_ids=pos)[:, :5], model(changed, position_ids=pos)[:, :5])


def test_alibi_hook_is_the_distance_penalty_and_forward_the_causal_matrix():
    alibi = ALiBi(4)
    pos = torch.arange(5)
    hook = alibi.bias(pos, pos)
    torch.testing.assert_close(hook, hook.transpose(-1, -2))  # -m |i - j|: symmetric, finite
    causal = alibi(5)
    lower = torch.ones(5, 5, dtype=torch.bool).tril()
    torch.testing.assert_close(causal[:, lower], hook[:, lower])
    assert torch.isinf(causal[:, ~lower]).all()


# -- meta-device construction, then real memory --------------------------------------------------------
@pytest.mark.parametrize("rope_type", sorted(SCALINGS))
def test_meta_init_then_to_empty_gives_exact_tables(rope_type):
    kwargs = dict(head_dim=8, scaling=SCALINGS[rope_type], max_position_embeddings=64)
    with torch.device("meta"):
        meta = RotaryEmbedding(**kwargs)
    assert meta.cos_cached.is_meta
    meta.to_empty(device="cpu")
    real = RotaryEmbedding(**kwargs)
    for name in ("inv_freq", "cos_cached", "sin_cached"):
        torch.testing.assert_close(getattr(meta, name), getattr(real, name), atol=0, rtol=0)


# -- Hugging Face round trips ----------------------------------------------------------------------------
@pytest.mark.parametrize("style", ["rope_parameters", "rope_scaling"])
@pytest.mark.parametrize("rope_type", sorted(SCALINGS))
def test_module_round_trips_through_hf_dict(rope_type, style):
    rope = RotaryEmbedding(8, base=5000.0, scaling=SCALINGS[rope_type], max_position_embeddings=256)
    back = RotaryEmbedding.from_hf_config(to_hf_dict(rope, style=style))
    assert back.attention_factor == pytest.approx(rope.attention_factor, rel=1e-12)
    assert back.rotary_dim == rope.rotary_dim and back.base == rope.base
    pos = torch.tensor([[0, 5, 63, 200]])
    for a, b in zip(rope.cos_sin(pos), back.cos_sin(pos)):
        torch.testing.assert_close(a, b, atol=0, rtol=0)


@pytest.mark.parametrize("head_dim,rotary_dim", [(44, 30), (24, 10), (64, 16), (80, 32), (128, 64), (6, 2)])
def test_partial_rotary_factor_reads_back_to_the_same_width(head_dim, rotary_dim):
    rope = RotaryEmbedding(head_dim, rotary_dim=rotary_dim, max_position_embeddings=8)
    for style in ("rope_parameters", "rope_scaling"):
        assert RotaryEmbedding.from_hf_config(to_hf_dict(rope, style=style)).rotary_dim == rotary_dim


# -- bad input is named -----------------------------------------------------------------------------------
def test_negative_positions_are_refused_by_every_hook():
    with pytest.raises(ValueError, match="position_ids must be >= 0"):
        SinusoidalPositionalEncoding(8).encodings(torch.tensor([-1, 3]))
    with pytest.raises(ValueError, match="position_ids must be >= 0"):
        LearnedPositionalEmbedding(4, 8).encodings(torch.tensor([-1, 2]))
    with pytest.raises(ValueError, match="position_ids must be >= 0"):
        RotaryEmbedding(8).cos_sin(torch.tensor([[-3]]))
    with pytest.raises(ValueError, match="position_ids must be >= 0"):
        SinusoidalPositionalEncoding(8).embed(torch.zeros(1, 2, 8), torch.tensor([[0, -1]]))


def test_bad_arguments_name_themselves():
    cases = [
        (
            lambda: apply_rotary_at(
                torch.randn(4, 8), torch.randn(4, 8), torch.ones(4, 4), torch.ones(4, 4), torch.arange(4)
            ),
            ValueError,
            "q must have 4 dimensions",
        ),
        (
            lambda: TinyLM(ModelConfig(d_model=16, n_heads=2, n_layers=1))(torch.tensor([[300]])),
            ValueError,
            r"idx must hold token ids in \[0, 256\)",
        ),
        (
            lambda: TinyLM(ModelConfig(d_model=16, n_heads=2, n_layers=1))(torch.tensor([[-1]])),
            ValueError,
            "idx must hold token ids",
        ),
        (
            lambda: CausalSelfAttention(8, 2)(torch.zeros(3, 8), posenc.NoPE(), torch.arange(3)[None]),
            ValueError,
            "x must have 3 dimensions",
        ),
        (
            lambda: CausalSelfAttention(8, 2)(torch.zeros(1, 3, 6), posenc.NoPE(), torch.arange(3)[None]),
            ValueError,
            "d_model=8",
        ),
        (lambda: LearnedPositionalEmbedding(4, 8, init_std=float("nan")), ValueError, "init_std"),
        (lambda: LearnedPositionalEmbedding(4, 8, init_std=-1.0), ValueError, "init_std"),
        (lambda: alibi_bias(torch.ones(2, 2), torch.arange(3), torch.arange(3)), ValueError, "slopes"),
        (lambda: rope_cos_sin(torch.arange(3), torch.ones(2, 2)), ValueError, "inv_freq"),
        (
            lambda: RotaryEmbedding.from_hf_config({"hidden_size": 64, "num_attention_heads": 0}),
            ValueError,
            "num_attention_heads",
        ),
        (lambda: rope_frequencies(None, 8, "1e4"), TypeError, "base"),
        (lambda: make_scheme("alibi", d_model=10, n_heads=4), ValueError, "divisible"),
        (lambda: TinyLM(ModelConfig(bias="yes")), TypeError, "bias"),
        (
            lambda: RotaryEmbedding.from_hf_config(
                {
                    "head_dim": 8,
                    "rope_scaling": {
                        "rope_type": "yarn",
                        "factor": 4.0,
                        "beta_fast": 0,
                        "original_max_position_embeddings": 64,
                    },
                }
            ),
            ValueError,
            "beta_fast",
        ),
    ]
    for make, error, pattern in cases:
        with pytest.raises(error, match=pattern):
            make()


@pytest.mark.parametrize("huge", [10**400, -(10**400)])
def test_an_int_beyond_float64_is_refused_by_name(huge):
    """An int too large for float64 is a number out of every range: each number check names it (the
    argument checks raised a bare OverflowError from float() before)."""
    with pytest.raises(ValueError, match="base must be finite, got an int beyond float64"):
        rope_frequencies(None, 8, huge)
    with pytest.raises(ValueError, match="init_std must be finite"):
        LearnedPositionalEmbedding(4, 8, init_std=huge)
    with pytest.raises(ValueError, match=r"'linear' scaling: factor must be a finite number >= 1, got -?1000"):
        LinearScaling(huge)
    with pytest.raises(ValueError, match=r"config field rope_theta must be a finite number > 1, got -?1000"):
        RotaryEmbedding.from_hf_config({"head_dim": 8, "rope_theta": huge})


def test_config_numbers_name_the_field_the_value_and_what_is_allowed():
    """The config voice of the number checks: one message shape for config.json fields and scaling
    fields, a whole-number float taken as its int only where a config file may write one."""
    with pytest.raises(ValueError, match=r"^config field head_dim must be an integer >= 2 and <= 8192, got 64.5$"):
        RotaryEmbedding.from_hf_config({"head_dim": 64.5})
    assert RotaryEmbedding.from_hf_config({"head_dim": 64.0}).head_dim == 64
    with pytest.raises(ValueError, match=r"^'yarn' scaling: original_max_position_embeddings must be an integer "):
        YaRNScaling(4.0, 64.0)
    with pytest.raises(ValueError, match=r"^'yarn' scaling: rotary_dim must be an even integer >= 2, got 7$"):
        YaRNScaling(4.0, 64).validate(7)
    with pytest.raises(ValueError, match=r"^'llama3' scaling: low_freq_factor must be a finite number > 0, got True$"):
        Llama3Scaling(8.0, True, 4.0, 64)
