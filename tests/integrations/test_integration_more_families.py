"""Families that were refused and are patched exactly now, and a refusal that says why.

- CodeGen runs GPT-J's code: a (sin, cos) table module and ``f(x, sin, cos)`` on the rotated slice.
- Beam alternates rotary sliding-window layers with NoPE full-attention layers whose rope dict is
  ``None`` (``{"sliding_attention": {...}, "full_attention": None}``), which transformers accepts.
- Zamba 2 builds no rotary module unless ``use_mem_rope=True``: refused, naming the flag.
"""

from __future__ import annotations

import copy

import pytest
import torch

transformers = pytest.importorskip("transformers")

from integration_support import patched_exactly  # noqa: E402

from posenc import RotaryEmbedding, testing  # noqa: E402
from posenc.integrations import discovery  # noqa: E402
from posenc.integrations.transformers import patch, patch_of  # noqa: E402
from posenc.rope.hfconfig import rope_dicts, rotary_kwargs_from_hf  # noqa: E402

transformers.logging.set_verbosity_error()


def _ids(seq=12, batch=2, vocab=testing.VOCAB):
    return torch.randint(3, vocab, (batch, seq), generator=torch.Generator().manual_seed(1))


def _logits(model, ids):
    with torch.no_grad():
        return model(ids).logits


def test_codegen_is_patched_exactly_with_its_partial_rotary_slice():
    from transformers import CodeGenConfig, CodeGenForCausalLM

    config = CodeGenConfig(vocab_size=testing.VOCAB, n_embd=64, n_head=4, rotary_dim=8, n_layer=2, n_positions=64)
    torch.manual_seed(0)
    model = CodeGenForCausalLM(config).eval()
    with patched_exactly(model, _ids()) as handle:
        assert handle.rope.rotary_dim == 8 and handle.rope.head_dim == 16
    before = _logits(model, _ids())
    with patch(model, layout="half"):  # the negative control: the wrong pairs give another model
        assert float((_logits(model, _ids()) - before).abs().max()) > 1e-3


def test_a_layer_type_whose_rope_dict_is_none_is_a_nope_layer():
    config = {
        "model_type": "beam",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": None,
        },
    }
    kwargs = rotary_kwargs_from_hf(config, layer_type="sliding_attention")
    assert kwargs["base"] == 10000.0 and kwargs["head_dim"] == 16
    assert list(rope_dicts(config)) == ["sliding_attention"]
    with pytest.raises(ValueError, match="'full_attention' has no rope dict"):
        rotary_kwargs_from_hf(config, layer_type="full_attention")
    mixed = dict(config, rope_parameters={"sliding_attention": {"rope_theta": 1e4}, "rope_theta": 1e6})
    with pytest.raises(ValueError, match="mixes per-layer-type dicts"):  # a plain value is still refused
        rotary_kwargs_from_hf(mixed, layer_type="sliding_attention")


def test_beam_rotary_and_nope_layers_are_patched_exactly():
    model = testing.tiny_model_of_type("beam")
    assert set(model.config.layer_types) == {"sliding_attention", "full_attention"}
    assert model.config.rope_parameters["full_attention"] is None
    with patched_exactly(model, _ids()) as handle:
        assert isinstance(handle.rope, RotaryEmbedding)


def test_zamba2_without_its_rotary_module_is_refused_naming_the_flag():
    model = testing.tiny_model_of_type("zamba2", use_mem_rope=False)
    ids = _ids()
    before = _logits(model, ids)
    with pytest.raises(discovery.UnsupportedModelError, match=r"use_mem_rope=False.*nothing to patch"):
        patch(model)
    assert patch_of(model) is None and torch.equal(_logits(model, ids), before)


@pytest.mark.parametrize("model_type", ["cohere", "gemma3_text", "llama4_text"])
def test_a_found_family_built_on_the_meta_device_is_patched(model_type):
    """Found from its code, a model built on the meta device (``init_empty_weights``, transformers' own
    tests) is checked against its rotary module as the family's code rebuilds it on the CPU and patched,
    not refused; after ``to_empty()`` + ``init_weights()`` + the weights it equals the patched model."""
    from transformers import AutoModelForCausalLM

    reference = testing.tiny_model_of_type(model_type)
    with torch.device("meta"):  # patched inside the meta context, as when it is patched as it is built
        model = AutoModelForCausalLM.from_config(reference.config, attn_implementation="eager")
        handle = patch(model)
    assert handle.active
    model.to_empty(device="cpu")
    model.init_weights()
    model.load_state_dict(reference.state_dict())
    model.eval()
    patch(reference)
    ids = _ids()
    assert torch.equal(_logits(model, ids), _logits(reference, ids))
    assert sorted(dict(model.named_buffers())) == sorted(dict(reference.named_buffers()))


def test_the_replacement_is_found_and_rebuilt_as_transformers_tests_find_a_rotary_class():
    """transformers' ``test_model_rope_scaling_frequencies`` takes the class of a module named ``rotary_emb``
    whose ``__init__``'s first parameter is ``config``, builds it from configs with other rope dicts and
    reads its ``inv_freq``: the replacement is found the same way and behaves as a rotary module."""
    import inspect

    model = testing.tiny_model_of_type("cohere")
    patch(model)
    module = model.model.rotary_emb
    assert list(inspect.signature(module.__init__).parameters)[0] == "config"
    config = copy.deepcopy(model.config)
    config.rope_parameters = {"rope_type": "default", "rope_theta": 10000.0}
    original = type(module)(config=config)
    config.rope_parameters = {"rope_type": "linear", "rope_theta": 10000.0, "factor": 10.0}
    linear = type(module)(config=config)
    torch.testing.assert_close(linear.inv_freq, original.inv_freq / 10)
    x = torch.zeros(1)
    cos_linear, _ = linear(x, torch.arange(0, 100, 10)[None])
    cos_original, _ = original(x, torch.arange(10)[None])
    torch.testing.assert_close(cos_linear, cos_original)


def test_a_rotation_of_the_last_features_is_refused_saying_so():
    """DeepSeek-V4 lays a head out as ``[nope | rope]`` and rotates the trailing slice; posenc's stand-in
    rotates the leading features, so the probe refuses it, and says which features it rotates."""
    deepseek_v4 = pytest.importorskip("transformers.models.deepseek_v4.modeling_deepseek_v4")

    def trailing(x, cos, sin, unsqueeze_dim=1):  # half-split pairs on the last 2 * cos.shape[-1] features
        cos, sin = (
            torch.cat((cos, cos), -1).unsqueeze(unsqueeze_dim),
            torch.cat((sin, sin), -1).unsqueeze(unsqueeze_dim),
        )
        r = cos.shape[-1]
        rope = x[..., -r:]
        half = torch.cat((-rope[..., r // 2 :], rope[..., : r // 2]), dim=-1)
        return torch.cat((x[..., :-r], rope * cos + half * sin), dim=-1)

    for fn, layout in ((trailing, "half"), (deepseek_v4.apply_rotary_pos_emb, "interleaved")):
        found, why = discovery.classify_function(fn)
        assert found is None and f"rotates the last features of the head ({layout} pairs" in why


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_model_built_under_a_half_precision_default_dtype_is_patched(dtype):
    """transformers builds a model with ``dtype=`` under that default dtype (its own tests patch
    Gemma 2 in there: ``test_keep_in_fp32_modules_strict_also_hardcode_fp32``). The probe that
    identifies the family's rotation must not run in float16, whose rounding matches no rotation:
    the model is patched, and exactly."""
    from transformers import Gemma2ForCausalLM

    fn = vars(__import__("transformers.models.gemma2.modeling_gemma2", fromlist=["x"]))["apply_rotary_pos_emb"]
    config = testing.tiny_config_of_type("gemma2")
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        found, why = discovery.classify_function(fn)
        torch.manual_seed(0)
        model = Gemma2ForCausalLM(config).eval()
        reference = copy.deepcopy(model)
        handle = patch(model)
    finally:
        torch.set_default_dtype(previous)
    assert found is not None and (found.form, found.layout, found.sign) == ("cat", "half", 1), why
    assert handle.active and next(model.parameters()).dtype == dtype
    ids = _ids()
    got, expected = _logits(model.float(), ids), _logits(reference.float(), ids)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
