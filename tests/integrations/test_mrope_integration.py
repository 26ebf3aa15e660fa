"""patch() on Qwen vision-language models: M-RoPE with the image position ids the model makes.

Each family is a tiny random model built from its own config classes (a one-block vision tower),
fed a prompt with an image (random ``pixel_values``) and, for one family, a video, so that
``get_rope_index`` gives three position streams that differ. The patched model must give the
unpatched logits within the model's own float32 noise, the same greedy tokens with the KV cache,
and ``undo()`` must restore it bit for bit.
"""

from __future__ import annotations

import copy
import warnings

import pytest
import torch

transformers = pytest.importorskip("transformers")

from posenc.integrations.tables import StreamTables  # noqa: E402
from posenc.integrations.transformers import language_model_of, patch, patch_of  # noqa: E402
from posenc.rope.mrope import MRotaryEmbedding, mrope_streams  # noqa: E402

IMAGE, VIDEO, START, END = 120, 121, 122, 123
ROPE = {"rope_type": "default", "rope_theta": 1e4, "mrope_section": [6, 5, 5]}
#: a one-block vision tower; each family adds its patch sizes
VISION = dict(depth=1, hidden_size=32, intermediate_size=32, num_heads=2, out_hidden_size=64, spatial_merge_size=2)
QWEN3_VISION = {**VISION, "patch_size": 16, "temporal_patch_size": 2, "num_position_embeddings": 64}
#: a few routed experts, for the MoE families
EXPERTS = {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32}
#: Qwen 3.5's text layers: linear attention, then full attention rotating half of each head
QWEN3_5_TEXT = {
    "layer_types": ["linear_attention", "full_attention"],
    "rope_parameters": {**ROPE, "partial_rotary_factor": 0.5, "mrope_section": [4, 2, 2]},
}
FAMILIES = {
    # name: (config class, model class, vision config, text config overrides, section layout)
    "qwen2_vl": (
        "Qwen2VLConfig",
        "Qwen2VLForConditionalGeneration",
        dict(depth=1, embed_dim=32, hidden_size=64, num_heads=2, mlp_ratio=1, patch_size=14, spatial_merge_size=2),
        {},
        "chunked",
    ),
    "qwen2_5_vl": (
        "Qwen2_5_VLConfig",
        "Qwen2_5_VLForConditionalGeneration",
        {**VISION, "patch_size": 14, "window_size": 56, "fullatt_block_indexes": [0]},
        {},
        "chunked",
    ),
    "qwen3_vl": (
        "Qwen3VLConfig",
        "Qwen3VLForConditionalGeneration",
        {**QWEN3_VISION, "deepstack_visual_indexes": [0]},
        {},
        "interleaved",
    ),
    "qwen3_vl_moe": (
        "Qwen3VLMoeConfig",
        "Qwen3VLMoeForConditionalGeneration",
        {**QWEN3_VISION, "deepstack_visual_indexes": [0]},
        {**EXPERTS, "decoder_sparse_step": 1},
        "interleaved",
    ),
    "qwen3_5_moe": (
        "Qwen3_5MoeConfig",
        "Qwen3_5MoeForConditionalGeneration",
        QWEN3_VISION,
        {**QWEN3_5_TEXT, **EXPERTS, "shared_expert_intermediate_size": 32},
        "interleaved",
    ),
    "qwen3_5": ("Qwen3_5Config", "Qwen3_5ForConditionalGeneration", QWEN3_VISION, QWEN3_5_TEXT, "interleaved"),
}
#: the special tokens of the prompts below
TOKENS = dict(image_token_id=IMAGE, video_token_id=VIDEO, vision_start_token_id=START, vision_end_token_id=END)


def tiny_vl(name: str):
    config_class, model_class, vision, text_overrides, _ = FAMILIES[name]
    text = dict(hidden_size=64, intermediate_size=64, num_attention_heads=2, num_key_value_heads=1, head_dim=32)
    text.update(num_hidden_layers=2, vocab_size=128, max_position_embeddings=512, rope_parameters=ROPE)
    text.update(pad_token_id=0, bos_token_id=1, eos_token_id=2)
    text.update(copy.deepcopy(text_overrides))  # the families share their dicts: none sees another's changes
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = getattr(transformers, config_class)(text_config=text, vision_config=copy.deepcopy(vision), **TOKENS)
        model = getattr(transformers, model_class)(config).eval()
    for part in (model.config, model.config.text_config):
        if hasattr(part, "_experts_implementation"):
            part._experts_implementation = "eager"  # the grouped-mm experts refuse the float64 reference
    return model


def image_inputs(model, video: bool = False):
    """A prompt with one 4x4-patch image (2x2 tokens after merging), or a two-frame video, between text."""
    patch_size = model.config.vision_config.patch_size
    gen = torch.Generator().manual_seed(3)
    token, key_pixels, key_grid = (
        (VIDEO, "pixel_values_videos", "video_grid_thw") if video else (IMAGE, "pixel_values", "image_grid_thw")
    )
    frames = 2 if video else 1
    ids = torch.tensor([[5, 6, 7, START] + [token] * (4 * frames) + [END, 8, 9, 10]])
    pixels = torch.randn(16 * frames, 3 * 2 * patch_size * patch_size, generator=gen)
    types = torch.where(ids == token, 2 if video else 1, 0).int()
    return {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        key_pixels: pixels,
        key_grid: torch.tensor([[frames, 4, 4]]),
        "mm_token_type_ids": types,
    }


def logits(model, inputs):
    with torch.no_grad():
        return model(**inputs).logits


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_vision_language_model_patches_exactly_with_image_positions(name):
    model = tiny_vl(name)
    inputs = image_inputs(model)
    positions = model.model.get_rope_index(
        inputs["input_ids"],
        inputs["mm_token_type_ids"],
        image_grid_thw=inputs["image_grid_thw"],
        attention_mask=inputs["attention_mask"],
    )[0]
    assert not torch.equal(positions[0], positions[1])  # the image's streams differ: M-RoPE is not 1-D here
    before = logits(model, inputs)
    noise = float((logits(copy.deepcopy(model).double(), inputs) - before.double()).abs().max())
    settings = dict(max_new_tokens=5, do_sample=False, use_cache=True)
    with torch.no_grad():
        plain_tokens = model.generate(**inputs, **settings)

    handle = patch(model)
    assert patch_of(model) is handle
    text_model = language_model_of(model)
    assert text_model is not model and text_model.config.model_type.endswith("_text")
    rotary = text_model.rotary_emb
    assert isinstance(rotary, StreamTables)
    # the streams are the core scheme's for the model's sections and its family's layout
    layout = FAMILIES[name][4]
    section = text_model.config.rope_parameters["mrope_section"]
    assert rotary.streams.tolist() == mrope_streams(section, rotary.streams.numel(), layout).tolist()
    assert not any(isinstance(m, StreamTables) for m in model.model.visual.modules())  # vision untouched
    patched = logits(model, inputs)
    with torch.no_grad():
        patched_tokens = model.generate(**inputs, **settings)
    error = float((patched.double() - before.double()).abs().max())
    assert error <= 4 * noise + 1e-6, (error, noise)
    assert torch.equal(patched_tokens, plain_tokens)

    # negative control: the other section layout is a different model, far outside that tolerance
    other = "interleaved" if layout == "chunked" else "chunked"
    rotary.streams = mrope_streams(section, rotary.streams.numel(), other)
    assert float((logits(model, inputs) - before).abs().max()) > 100 * (4 * noise + 1e-6)
    rotary.streams = mrope_streams(section, rotary.streams.numel(), layout)

    handle.undo()
    assert torch.equal(logits(model, inputs), before)
    assert patch_of(model) is None


def test_video_positions_patch_exactly():
    model = tiny_vl("qwen2_5_vl")
    inputs = image_inputs(model, video=True)
    before = logits(model, inputs)
    with patch(model):
        patched = logits(model, inputs)
    assert float((patched - before).abs().max()) <= 1e-5
    assert torch.equal(logits(model, inputs), before)


def test_the_patched_tables_are_the_core_scheme():
    """The patch's cos/sin for a text model fed image position ids equal MRotaryEmbedding's."""
    model = tiny_vl("qwen3_vl")
    text_model = language_model_of(model)
    core = MRotaryEmbedding.from_hf_config(text_model.config)
    inputs = image_inputs(model)
    positions = model.model.get_rope_index(
        inputs["input_ids"], inputs["mm_token_type_ids"], image_grid_thw=inputs["image_grid_thw"]
    )[0]
    with patch(model):
        cos, sin = text_model.rotary_emb(torch.zeros(1), positions)
    want_cos, want_sin = core.cos_sin(positions)
    assert torch.equal(cos, want_cos) and torch.equal(sin, want_sin)


def test_stream_tables_refuse_a_wrong_stream_count():
    model = tiny_vl("qwen2_vl")
    with patch(model):
        with pytest.raises(ValueError, match=r"\(3, batch, seq\)"):
            language_model_of(model).rotary_emb(torch.zeros(1), torch.zeros(4, 1, 5, dtype=torch.long))


def test_compile_fullgraph_traces_image_positions():
    """The stream lookup has no data-dependent branch: the patched language model, fed an image's
    three streams, traces as one graph and gives the unpatched output."""
    model = tiny_vl("qwen2_vl")
    inputs = image_inputs(model)
    positions = model.model.get_rope_index(
        inputs["input_ids"], inputs["mm_token_type_ids"], image_grid_thw=inputs["image_grid_thw"]
    )[0]
    text_model = language_model_of(model)
    embeds = torch.randn(1, positions.shape[-1], 64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        before = text_model(inputs_embeds=embeds, position_ids=positions).last_hidden_state
        with patch(model):
            compiled = torch.compile(text_model, fullgraph=True, backend="eager")
            after = compiled(inputs_embeds=embeds, position_ids=positions).last_hidden_state
    torch._dynamo.reset()
    assert float((after - before).abs().max()) <= 1e-5
