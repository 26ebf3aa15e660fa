"""Llama 4 under posenc's patch: complex ``freqs_cis`` rotary, NoPE layers, attention temperature.

Llama 4's rotary module returns one complex tensor ``freqs_cis = cos + i sin`` and its attention
multiplies (batch, seq, heads, head_dim) q and k, read as complex pairs, by it
(``apply_rotary_emb(xq, xk, freqs_cis)``): interleaved pairs. Some layers skip the rotation
(``no_rope_layers[i] == 0``), and those layers scale their queries by a temperature that grows with
the position (``attn_temperature_tuning``, ``floor_scale``, ``attn_scale``); rotated layers apply an
L2 norm to q and k after the rotation. posenc stands in for the rotation only (exact tables, its
fused rotation); the NoPE layers, the temperature and the norm stay transformers' own code. The
tiny models here run the temperature at every few positions (``floor_scale=2``), so a patch that
lost it, rotated a NoPE layer or rotated in the wrong layout would move the logits far past the
model's own float32 noise.
"""

from __future__ import annotations

import copy
import io

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("transformers.models.llama4")

from integration_support import patched_exactly  # noqa: E402

from posenc import testing  # noqa: E402
from posenc.integrations import discovery  # noqa: E402
from posenc.integrations.transformers import patch, patch_of, stand_in  # noqa: E402

transformers.logging.set_verbosity_error()

LLAMA4 = "transformers.models.llama4.modeling_llama4"
DEEPSEEK_V2 = "transformers.models.deepseek_v2.modeling_deepseek_v2"
LLAMA3_ROPE = {
    "rope_type": "llama3",
    "rope_theta": 500000.0,
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}


def _tiny(rope=None, temperature=True, seed=0):
    """A 4-layer Llama 4 text model: layers 0 and 2 rotated (with the L2 qk norm), 1 and 3 NoPE."""
    overrides = dict(
        num_hidden_layers=4,
        no_rope_layers=[1, 0, 1, 0],
        layer_types=["chunked_attention", "full_attention"] * 2,
        floor_scale=2,
        attn_scale=0.5,
        attn_temperature_tuning=temperature,
    )
    if rope is not None:
        overrides["rope_parameters"] = rope
    return testing.tiny_model_of_type("llama4_text", seed=seed, **overrides)


def _ids(seq=12, batch=2):
    return torch.randint(3, testing.VOCAB, (batch, seq), generator=torch.Generator().manual_seed(1))


def _logits(model, ids):
    with torch.no_grad():
        return model(ids).logits


def test_discovery_reads_the_complex_rotation_and_its_orientation():
    found, why = discovery.classify_function(vars(__import__(LLAMA4, fromlist=["x"]))["apply_rotary_emb"])
    assert why == ""
    assert (found.arity, found.form, found.layout, found.sign, found.seq_first) == (
        "complex",
        "complex",
        "interleaved",
        1,
        True,
    )
    found, why = discovery.classify_function(vars(__import__(DEEPSEEK_V2, fromlist=["x"]))["apply_rotary_emb"])
    assert why == "" and (found.arity, found.layout, found.seq_first) == ("complex", "interleaved", False)
    # a complex function is never matched against a (cos, sin) table, nor a cos/sin function against freqs_cis
    found, why = discovery.classify_function(
        vars(__import__(LLAMA4, fromlist=["x"]))["apply_rotary_emb"], forms=("cat", "half")
    )
    assert found is None and "complex freqs_cis" in why


@pytest.mark.parametrize("module", [LLAMA4, DEEPSEEK_V2])
def test_the_complex_stand_in_rotates_as_the_function_does(module):
    fn = vars(__import__(module, fromlist=["x"]))["apply_rotary_emb"]
    found, _ = discovery.classify_function(fn)
    ours = stand_in(found, fn)
    gen = torch.Generator().manual_seed(3)
    shape_q, shape_k = ((2, 5, 3, 8), (2, 5, 1, 8)) if found.seq_first else ((2, 3, 5, 8), (2, 1, 5, 8))
    q, k = torch.randn(shape_q, generator=gen), torch.randn(shape_k, generator=gen)
    angles = torch.rand(2, 5, 4, generator=gen) * 6
    freqs_cis = torch.polar(torch.ones_like(angles), angles)
    for got, want in zip(ours(q, k, freqs_cis), fn(q, k, freqs_cis)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("rope", [None, LLAMA3_ROPE], ids=["default", "llama3"])
def test_llama4_text_patched_equals_unpatched_with_nope_layers_and_temperature(rope):
    # greedy decoding with the KV cache too: the temperature reads the cache's length, the keys were
    # rotated by posenc
    with patched_exactly(_tiny(rope), _ids(), new_tokens=8) as handle:
        assert len(handle.attention_modules) == 4 and handle.rotary_modules == ["model.rotary_emb"]


def test_the_checks_above_can_fail():
    """The temperature and the layout each move the logits far past the float32 noise the test allows."""
    ids = _ids()
    model = _tiny()
    before = _logits(model, ids)
    without_temperature = _logits(_tiny(temperature=False), ids)
    assert float((without_temperature - before).abs().max()) > 1e-2
    with patch(model, layout="half"):  # the wrong pair layout: a different model
        assert float((_logits(model, ids) - before).abs().max()) > 1e-2


def test_nope_layers_call_no_rotation_and_the_tables_are_complex():
    model = _tiny()
    calls = []
    handle = patch(model)
    for i, layer in enumerate(model.model.layers):
        layer.self_attn.register_forward_pre_hook(lambda m, a, kw, i=i: calls.append(i), with_kwargs=True)
    freqs = model.model.rotary_emb(torch.zeros(1), torch.arange(5).unsqueeze(0))
    assert freqs.dtype == torch.complex64 and freqs.shape == (1, 5, 8)
    angles = torch.arange(5, dtype=torch.float64)[:, None] * handle.rope.inv_freq.double()
    torch.testing.assert_close(freqs[0], torch.polar(torch.ones_like(angles), angles).to(torch.complex64))
    _logits(model, _ids())
    assert calls == [0, 1, 2, 3]
    assert [layer.self_attn.use_rope for layer in model.model.layers] == [1, 0, 1, 0]
    assert [hasattr(layer.self_attn, "qk_norm") for layer in model.model.layers] == [True, False, True, False]


def test_a_pickled_patched_llama4_loads_patched():
    model = _tiny()
    ids = _ids()
    patch(model)
    patched = _logits(model, ids)
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    assert patch_of(loaded) is not None and patch_of(loaded).active
    assert torch.equal(_logits(loaded, ids), patched)


def test_a_patched_llama4_compiles_to_one_graph():
    model = _tiny()
    ids = _ids()
    patch(model)
    eager = _logits(model, ids)
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    with torch.no_grad():
        assert torch.equal(compiled(ids).logits, eager)


def test_a_changed_rotary_module_is_refused_and_nothing_changes():
    model = _tiny()
    model.model.rotary_emb.inv_freq.mul_(1.5)  # frequencies the config does not say
    ids = _ids()
    before = _logits(model, ids)
    with pytest.raises(discovery.UnsupportedModelError, match="differ from posenc's tables"):
        patch(model)
    assert patch_of(model) is None and torch.equal(_logits(model, ids), before)


def test_the_vision_language_model_is_patched_in_its_text_model_and_its_vision_tower_untouched():
    """Llama4ForConditionalGeneration's vision tower has its own 2-D rotary module, called with the image
    patches rather than position ids: patch(model) leaves it as it is and patches the language model, a
    Llama4ForCausalLM, exactly (as patch(model.language_model) does)."""
    from transformers import Llama4Config, Llama4ForConditionalGeneration

    text = dict(
        vocab_size=testing.VOCAB, hidden_size=32, intermediate_size=37, intermediate_size_mlp=37,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8, num_local_experts=2,
        no_rope_layers=[1, 0], floor_scale=2, attn_scale=0.5, pad_token_id=0,
    )  # fmt: skip
    vision = dict(
        hidden_size=32, intermediate_size=37, num_hidden_layers=1, num_attention_heads=4, image_size=32,
        patch_size=8, vision_output_dim=32, projector_input_dim=32, projector_output_dim=32,
    )  # fmt: skip
    torch.manual_seed(0)
    model = Llama4ForConditionalGeneration(Llama4Config(text_config=text, vision_config=vision)).eval()
    language = model.language_model
    ids = _ids()
    before = _logits(language, ids)

    def vision_modules():
        return [(name, type(m), m.__dict__.get("forward")) for name, m in model.vision_model.named_modules()]

    vision = vision_modules()
    noise = float((before.double() - _logits(copy.deepcopy(language).double(), ids).double()).abs().max())
    for target in (model, language):
        with patch(target) as handle:
            assert patch_of(target) is handle and handle.attention_modules
            prefix = "language_model." if target is model else "model."
            assert all(name.startswith(prefix) for name in handle.rotary_modules + handle.attention_modules)
            assert vision_modules() == vision
            assert float((_logits(language, ids) - before).abs().max()) <= 4 * noise
        assert torch.equal(_logits(language, ids), before)


def test_the_replacement_module_rebuilt_from_the_config_returns_freqs_cis():
    """Code that re-creates the rotary module (``type(model.model.rotary_emb)(config=...)``) gets a module
    that returns what the Llama 4 attention takes: one complex tensor, the patched module's own."""
    model = _tiny(LLAMA3_ROPE)
    patch(model)
    rebuilt = type(model.model.rotary_emb)(config=model.config)
    x, positions = torch.zeros(1), torch.arange(7).unsqueeze(0)
    got, want = rebuilt(x, positions), model.model.rotary_emb(x, positions)
    assert got.is_complex() and torch.equal(got, want)
