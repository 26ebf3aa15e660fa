"""RoPE per layer type (Gemma 3's local and global bases) as a core scheme, and parity with transformers."""

from __future__ import annotations

import pytest
import torch

from posenc.rope import LinearScaling, RotaryEmbedding
from posenc.rope.layer_types import LayerTypedRotaryEmbedding

LOCAL, GLOBAL = "sliding_attention", "full_attention"


def two_bases(layers: int = 6) -> LayerTypedRotaryEmbedding:
    ropes = {
        LOCAL: RotaryEmbedding(16, base=1e4),
        GLOBAL: RotaryEmbedding(16, base=1e6, scaling=LinearScaling(factor=8.0)),
    }
    return LayerTypedRotaryEmbedding(ropes, [LOCAL if (i + 1) % 3 else GLOBAL for i in range(layers)])


def test_each_layer_type_rotates_with_its_own_rope():
    rope = two_bases()
    assert [rope.layer(i).base for i in range(6)] == [1e4, 1e4, 1e6, 1e4, 1e4, 1e6]
    q, k = torch.randn(2, 4, 9, 16), torch.randn(2, 2, 9, 16)
    for kind, base, scaling in ((LOCAL, 1e4, None), (GLOBAL, 1e6, LinearScaling(factor=8.0))):
        alone = RotaryEmbedding(16, base=base, scaling=scaling)
        got, want = rope(q, k, offset=5, layer_type=kind), alone(q, k, offset=5)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
        positions = torch.arange(3, 12).unsqueeze(0)
        assert torch.equal(rope.cos_sin(positions, kind)[1], alone.cos_sin(positions)[1])
    # the two types really differ (a patch that gave every layer one base would be caught)
    local, full = rope(q, k, offset=5, layer_type=LOCAL), rope(q, k, offset=5, layer_type=GLOBAL)
    assert (local[0] - full[0]).abs().max() > 0.1


def test_bad_arguments_are_refused_by_name():
    ropes = {LOCAL: RotaryEmbedding(16), GLOBAL: RotaryEmbedding(16, base=1e6)}
    with pytest.raises(ValueError, match=r"\['chunk'\], which have no rope"):
        LayerTypedRotaryEmbedding(ropes, [LOCAL, "chunk"])
    with pytest.raises(ValueError, match="one head_dim"):
        LayerTypedRotaryEmbedding({LOCAL: RotaryEmbedding(16), GLOBAL: RotaryEmbedding(32)}, [LOCAL])
    with pytest.raises(ValueError, match="non-empty mapping"):
        LayerTypedRotaryEmbedding({}, [LOCAL])
    with pytest.raises(ValueError, match="layer_types"):
        LayerTypedRotaryEmbedding(ropes, [])
    with pytest.raises(TypeError, match="RotaryEmbedding"):
        LayerTypedRotaryEmbedding({LOCAL: torch.nn.Identity()}, [LOCAL])
    rope = LayerTypedRotaryEmbedding(ropes, [LOCAL, GLOBAL])
    q = torch.randn(1, 1, 3, 16)
    with pytest.raises(ValueError, match=r"layer_type must be one of \['full_attention', 'sliding_attention'\]"):
        rope(q, q, layer_type="global")
    with pytest.raises(ValueError, match="layer_type is required"):
        rope.rotate(q, q, torch.arange(3).unsqueeze(0))
    with pytest.raises(ValueError, match="index must be <= 1"):
        rope.layer(2)


def test_casts_keep_every_type_exact():
    rope = two_bases().to(torch.bfloat16)
    positions = torch.arange(5000, 5003).unsqueeze(0)
    exact = RotaryEmbedding(16, base=1e6, scaling=LinearScaling(factor=8.0)).cos_sin(positions)
    assert rope.cos_sin(positions, GLOBAL)[0].dtype == torch.float32
    assert torch.equal(rope.cos_sin(positions, GLOBAL)[0], exact[0])


# -- configs ------------------------------------------------------------------------------------------
GEMMA3_4B_JSON = {  # the rope fields of google/gemma-3-4b-it's text config, a smaller depth and width
    "model_type": "gemma3_text",
    "head_dim": 32,
    "hidden_size": 64,
    "num_attention_heads": 2,
    "num_hidden_layers": 12,
    "max_position_embeddings": 131072,
    "rope_local_base_freq": 10000.0,
    "rope_theta": 1000000.0,
    "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
    "sliding_window_pattern": 6,
}


def test_gemma3_config_json_reads_as_two_bases():
    rope = LayerTypedRotaryEmbedding.from_hf_config(GEMMA3_4B_JSON)
    assert rope.layer_types == ([LOCAL] * 5 + [GLOBAL]) * 2
    assert rope.rope_of(LOCAL).base == 1e4 and rope.rope_of(LOCAL).scaling is None
    assert rope.rope_of(GLOBAL).base == 1e6 and rope.rope_of(GLOBAL).scaling == LinearScaling(factor=8.0)


def test_gemma2_style_config_gives_both_types_one_rope():
    gemma2 = {"hidden_size": 64, "num_attention_heads": 2, "rope_theta": 1e4, "layer_types": [LOCAL, GLOBAL] * 2}
    rope = LayerTypedRotaryEmbedding.from_hf_config(gemma2)
    assert rope.rope_of(LOCAL).base == rope.rope_of(GLOBAL).base == 1e4


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match="no layer_types and no num_hidden_layers"):
        LayerTypedRotaryEmbedding.from_hf_config({"hidden_size": 64, "num_attention_heads": 2})
    nested = {
        "hidden_size": 64,
        "num_attention_heads": 2,
        "layer_types": [LOCAL, "chunked_attention"],
        "rope_parameters": {LOCAL: {"rope_type": "default"}, GLOBAL: {"rope_type": "default"}},
    }
    with pytest.raises(ValueError, match="'chunked_attention' has no rope dict"):
        LayerTypedRotaryEmbedding.from_hf_config(nested)
    with pytest.raises(ValueError, match=r"layer_types\[1\]"):
        LayerTypedRotaryEmbedding.from_hf_config({**nested, "layer_types": [LOCAL, 3]})


def test_plain_keys_beside_layer_type_dicts_are_ignored_only_when_not_strict():
    """transformers reads a layer type's rope from its own dict; plain keys set beside the
    per-layer-type dicts (``rope_parameters.update({...})`` on a Gemma 3 config) change nothing."""
    from posenc.rope.hfconfig import rope_keys_beside_layer_types, rotary_kwargs_from_hf, unused_rope_keys

    nested = {
        "hidden_size": 64,
        "num_attention_heads": 2,
        "layer_types": [LOCAL, GLOBAL],
        "rope_parameters": {LOCAL: {"rope_theta": 1e4}, GLOBAL: {"rope_type": "linear", "factor": 8.0}},
    }
    plain = {"rope_type": "yarn", "factor": 10.0, "rope_theta": 5e5}
    mixed = {**nested, "rope_parameters": {**nested["rope_parameters"], **plain}}
    assert rope_keys_beside_layer_types(mixed) == ["factor", "rope_theta", "rope_type"]
    assert rope_keys_beside_layer_types(nested) == []
    for layer_type in (LOCAL, GLOBAL):
        assert rotary_kwargs_from_hf(mixed, layer_type=layer_type, strict=False) == rotary_kwargs_from_hf(
            nested, layer_type=layer_type
        )
        assert unused_rope_keys(mixed, layer_type) == []
        with pytest.raises(ValueError, match=r"plain keys \['factor', 'rope_theta', 'rope_type'\].*strict=False"):
            rotary_kwargs_from_hf(mixed, layer_type=layer_type)
    with pytest.raises(ValueError, match="mixes per-layer-type dicts"):
        rotary_kwargs_from_hf(mixed, strict=False)  # no layer type: neither reading is the model's


# -- parity with transformers' Gemma 3 rotary module --------------------------------------------------
transformers = pytest.importorskip("transformers")


def _gemma3(**fields):
    from transformers.models.gemma3.configuration_gemma3 import Gemma3TextConfig
    from transformers.models.gemma3.modeling_gemma3 import Gemma3RotaryEmbedding

    config = Gemma3TextConfig(**fields)
    return config, Gemma3RotaryEmbedding(config)


PARITY_CONFIGS = {
    "config.json (linear x8 global)": {k: v for k, v in GEMMA3_4B_JSON.items() if k != "model_type"},
    "rope_parameters (yarn global)": {
        "head_dim": 32,
        "hidden_size": 64,
        "num_attention_heads": 2,
        "num_hidden_layers": 4,
        "layer_types": [LOCAL, LOCAL, LOCAL, GLOBAL],
        "rope_parameters": {
            LOCAL: {"rope_type": "default", "rope_theta": 5e4},
            GLOBAL: {"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0, "original_max_position_embeddings": 256},
        },
    },
}


@pytest.mark.parametrize("name", sorted(PARITY_CONFIGS))
def test_parity_with_transformers_gemma3_rotary_module(name):
    config, hf = _gemma3(**PARITY_CONFIGS[name])
    ours_from_object = LayerTypedRotaryEmbedding.from_hf_config(config)
    ours_from_json = LayerTypedRotaryEmbedding.from_hf_config({**PARITY_CONFIGS[name], "model_type": "gemma3_text"})
    assert ours_from_object.layer_types == ours_from_json.layer_types == list(config.layer_types)
    positions = torch.tensor([[0, 1, 2, 3, 100, 511, 1000, 4097], [7, 8, 9, 10, 11, 12, 13, 14]])
    tol = 8 * torch.finfo(torch.float32).eps * float(positions.max())  # transformers' float32 angles
    tables = {}
    for kind in (LOCAL, GLOBAL):
        with torch.no_grad():
            cos_hf, sin_hf = hf(torch.zeros(1), positions, kind)
        half = cos_hf.shape[-1] // 2
        for ours in (ours_from_object, ours_from_json):
            cos, sin = ours.cos_sin(positions, kind)
            assert (cos - cos_hf[..., :half]).abs().max() <= tol
            assert (sin - sin_hf[..., :half]).abs().max() <= tol
        tables[kind] = sin_hf[..., :half]
    assert (tables[LOCAL] - tables[GLOBAL]).abs().max() > 100 * tol  # the two bases are told apart
