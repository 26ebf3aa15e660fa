"""M-RoPE as a core scheme: stream layouts, exact angles, input checks, parity with transformers."""

from __future__ import annotations

import math

import pytest
import torch

from posenc.rope import RotaryEmbedding
from posenc.rope.mrope import (
    MRotaryEmbedding,
    image_stream_positions,
    mrope_angles,
    mrope_streams,
    text_stream_positions,
)
from posenc.rope.scaling import YaRNScaling


def image_prompt(text_before: int = 3, grid=(1, 2, 3), text_after: int = 4, batch: int = 1) -> torch.Tensor:
    """(3, batch, seq) streams of text, one image (or video) of ``grid`` tokens, then text again."""
    before = text_stream_positions(text_before)[:, 0]
    image = image_stream_positions(text_before, *grid)
    after = text_stream_positions(text_after)[:, 0] + text_before + max(grid)
    return torch.cat((before, image, after), dim=1).unsqueeze(1).expand(3, batch, -1)


# -- the layouts --------------------------------------------------------------------------------------
def test_chunked_streams_are_contiguous_bands():
    assert mrope_streams([2, 1, 3], 6, "chunked").tolist() == [0, 0, 1, 2, 2, 2]


def test_interleaved_streams_cycle_then_leave_the_rest_to_time():
    # Qwen3-VL: h at i % 3 == 1 (i < 3 n_h), w at i % 3 == 2 (i < 3 n_w), t elsewhere
    assert mrope_streams([4, 2, 2], 8, "interleaved").tolist() == [0, 1, 2, 0, 1, 2, 0, 0]
    assert mrope_streams([24, 20, 20], 64, "interleaved").bincount().tolist() == [24, 20, 20]


@pytest.mark.parametrize(
    "section, pairs, layout, match",
    [
        ([4, 4], 8, "chunked", "3 entries"),
        ([4, 4, 4, 4], 16, "chunked", "3 entries"),
        ([4, 4, 4], 16, "chunked", "sums to 12"),
        ([4, 4, 4], 10, "interleaved", "sums to 12"),
        ([-1, 5, 4], 8, "chunked", "mrope_section\\[0\\]"),
        ([4, 2.5, 2], 8, "chunked", "mrope_section\\[1\\]"),
        ([0, 4, 4], 8, "interleaved", "height section of 4 pairs"),
        ([2, 4, 4], 10, "diagonal", "section_layout"),
    ],
)
def test_bad_sections_are_refused_by_name(section, pairs, layout, match):
    with pytest.raises(ValueError, match=match):
        mrope_streams(section, pairs, layout)


def test_sections_must_be_a_sequence():
    with pytest.raises(TypeError, match="mrope_section"):
        mrope_streams(8, 8)
    with pytest.raises(ValueError, match="sums to 12, but the rotary width has 8 pairs"):
        MRotaryEmbedding(16, [4, 4, 4])


# -- position checks ----------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(2, 1, 5), (4, 1, 5), (1, 5), (3, 5), (3, 1, 1, 5)])
def test_stream_count_and_shape_are_checked(shape):
    rope = MRotaryEmbedding(16, [2, 3, 3])
    q = torch.randn(1, 2, 5, 16)
    with pytest.raises(ValueError, match=r"shape \(3, batch, seq\)"):
        rope(q, q, torch.zeros(shape, dtype=torch.long))


def test_text_positions_get_a_hint():
    rope = MRotaryEmbedding(16, [2, 3, 3])
    with pytest.raises(ValueError, match=r"expand\(3, -1, -1\)"):
        rope.cos_sin(torch.arange(5).unsqueeze(0))


def test_positions_are_integers_and_non_negative():
    rope = MRotaryEmbedding(16, [2, 3, 3])
    with pytest.raises(TypeError, match="integer dtype"):
        rope.cos_sin(torch.zeros(3, 1, 4))
    with pytest.raises(TypeError, match="bool"):
        rope.cos_sin(torch.zeros(3, 1, 4, dtype=torch.bool))
    bad = image_prompt()
    bad[2, 0, 4] = -7
    with pytest.raises(ValueError, match="-7"):
        rope.cos_sin(bad)


def test_positions_must_match_q():
    rope = MRotaryEmbedding(16, [2, 3, 3])
    q = torch.randn(2, 2, 5, 16)
    with pytest.raises(ValueError, match=r"\(3, 2 or 1, 5\)"):
        rope(q, q, torch.zeros(3, 2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\(3, 2 or 1, 5\)"):
        rope(q, q, torch.zeros(3, 3, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="head_dim=16"):
        rope(torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8), torch.zeros(3, 2, 5, dtype=torch.long))


# -- the mathematics ----------------------------------------------------------------------------------
def test_equal_streams_are_plain_rope_bit_for_bit():
    mrope = MRotaryEmbedding(32, [6, 5, 5], base=1e6)
    rope = RotaryEmbedding(32, base=1e6)
    positions = torch.tensor([[0, 5, 9, 2**20 + 3, 3 * 10**6], [7, 7, 8, 9, 10]])
    for layout in ("chunked", "interleaved"):
        mrope = MRotaryEmbedding(32, [6, 5, 5], base=1e6, section_layout=layout)
        got, want = mrope.cos_sin(text_stream_positions(positions)), rope.cos_sin(positions)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    q, k = torch.randn(2, 3, 5, 32), torch.randn(2, 1, 5, 32)
    assert all(torch.equal(a, b) for a, b in zip(mrope(q, k, text_stream_positions(positions)), rope(q, k, positions)))


@pytest.mark.parametrize("layout", ["chunked", "interleaved"])
def test_each_pair_reads_its_own_stream_exactly(layout):
    """Against a float64 loop: pair i at (t, h, w) has angle p[stream(i)] * theta_i, even past 2**24."""
    mrope = MRotaryEmbedding(24, [4, 4, 4], base=5e5, section_layout=layout)
    streams = mrope_streams([4, 4, 4], 12, layout).tolist()
    positions = torch.tensor([[[0, 1, 2**24 + 1]], [[3, 2**20, 7]], [[11, 5, 2**23 + 5]]])
    cos, sin = mrope.cos_sin(positions)
    for i in range(12):
        theta = 5e5 ** (-2 * i / 24)
        for j in range(3):
            angle = math.fmod(int(positions[streams[i], 0, j]) * theta, 2 * math.pi)
            assert cos[0, j, i].item() == pytest.approx(math.cos(angle), abs=2e-7)
            assert sin[0, j, i].item() == pytest.approx(math.sin(angle), abs=2e-7)
    angles = mrope_angles(positions, mrope.rope.frequencies()[0], mrope.streams)
    assert torch.allclose(angles.cos().float(), cos, atol=2e-7)


def test_layouts_and_streams_matter():
    """Negative controls: with an image the two layouts differ, and so does swapping height and width."""
    pos = image_prompt(grid=(1, 8, 16))
    chunked = MRotaryEmbedding(32, [6, 5, 5]).cos_sin(pos)[1]
    interleaved = MRotaryEmbedding(32, [6, 5, 5], section_layout="interleaved").cos_sin(pos)[1]
    swapped = MRotaryEmbedding(32, [6, 5, 5]).cos_sin(pos[[0, 2, 1]])[1]
    assert (chunked - interleaved).abs().max() > 0.1
    assert (chunked - swapped).abs().max() > 0.1


@pytest.mark.parametrize("layout", ["chunked", "interleaved"])
def test_scores_depend_on_stream_differences_only(layout):
    torch.manual_seed(0)
    mrope = MRotaryEmbedding(32, [6, 5, 5], section_layout=layout).double()
    q, k = torch.randn(1, 2, 13, 32, dtype=torch.float64), torch.randn(1, 2, 13, 32, dtype=torch.float64)
    pos = image_prompt()
    shifted = pos + torch.tensor([5, 1000, 37]).view(3, 1, 1)  # a different shift per stream
    scores = [qr @ kr.transpose(-1, -2) for qr, kr in (mrope(q, k, pos), mrope(q, k, shifted))]
    assert torch.allclose(scores[0], scores[1], atol=1e-9)
    # but not under a change of the height differences
    bent = pos.clone()
    bent[1, 0, 3:9] = bent[1, 0, 3:9] * 2
    qr, kr = mrope(q, k, bent)
    assert not torch.allclose(scores[0], qr @ kr.transpose(-1, -2), atol=1e-3)


def test_heads_last_and_casts():
    mrope = MRotaryEmbedding(16, [2, 3, 3])
    q, k = torch.randn(2, 3, 7, 16), torch.randn(2, 1, 7, 16)
    pos = image_prompt(text_before=1, grid=(1, 2, 2), text_after=2, batch=2)
    want = mrope(q, k, pos)
    got = mrope(q.transpose(1, 2), k.transpose(1, 2), pos, heads_first=False)
    assert torch.equal(got[0].transpose(1, 2), want[0]) and torch.equal(got[1].transpose(1, 2), want[1])
    half = MRotaryEmbedding(16, [2, 3, 3]).to(torch.bfloat16)
    assert half.streams.dtype == torch.int64
    assert torch.equal(half.cos_sin(pos)[0], mrope.cos_sin(pos)[0])  # tables keep float32


def test_image_stream_positions_follow_qwen2_vl():
    assert image_stream_positions(5, 2, 2, 3).tolist() == [
        [5] * 6 + [6] * 6,
        [5, 5, 5, 6, 6, 6] * 2,
        [5, 6, 7] * 4,
    ]
    with pytest.raises(ValueError, match="grid_h"):
        image_stream_positions(0, 1, 0, 2)


# -- parity with transformers -------------------------------------------------------------------------
transformers = pytest.importorskip("transformers")


def _qwen2_vl(rope_parameters):
    from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLTextConfig
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLRotaryEmbedding

    config = Qwen2VLTextConfig(hidden_size=64, num_attention_heads=2, rope_parameters=rope_parameters)
    return config, Qwen2VLRotaryEmbedding(config)


def _qwen2_5_vl(rope_parameters):
    from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLTextConfig
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLRotaryEmbedding

    config = Qwen2_5_VLTextConfig(hidden_size=64, num_attention_heads=2, rope_parameters=rope_parameters)
    return config, Qwen2_5_VLRotaryEmbedding(config)


def _qwen3_vl(rope_parameters):
    from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextRotaryEmbedding

    config = Qwen3VLTextConfig(hidden_size=64, num_attention_heads=2, head_dim=32, rope_parameters=rope_parameters)
    return config, Qwen3VLTextRotaryEmbedding(config)


def _qwen3_5(rope_parameters):
    from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5TextRotaryEmbedding

    rope_parameters = {**rope_parameters, "partial_rotary_factor": 0.5}
    config = Qwen3_5TextConfig(hidden_size=128, num_attention_heads=2, head_dim=64, rope_parameters=rope_parameters)
    return config, Qwen3_5TextRotaryEmbedding(config)


FAMILIES = {
    "qwen2_vl": (_qwen2_vl, "chunked"),
    "qwen2_5_vl": (_qwen2_5_vl, "chunked"),
    "qwen3_vl": (_qwen3_vl, "interleaved"),
    "qwen3_5": (_qwen3_5, "interleaved"),
}
ROPES = {
    "default": {"rope_type": "default", "rope_theta": 1e6},
    "yarn": {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0, "original_max_position_embeddings": 64},
    "linear": {"rope_type": "linear", "rope_theta": 1e4, "factor": 2.0},
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("rope_kind", sorted(ROPES))
def test_parity_with_transformers_rotary_modules(family, rope_kind):
    """cos/sin of each family's own rotary module, with an image and a video (streams that differ)."""
    build, layout = FAMILIES[family]
    config, hf = build({**ROPES[rope_kind], "mrope_section": [6, 5, 5]})
    mrope = MRotaryEmbedding.from_hf_config(config)
    assert mrope.section_layout == layout and mrope.mrope_section == [6, 5, 5]
    pos = torch.cat(
        (image_prompt(grid=(1, 4, 6), batch=2), image_prompt(text_before=2, grid=(3, 2, 2), batch=2)[:, :, 2:]), dim=2
    )
    pos[:, 1] += 17  # a second row further on
    with torch.no_grad():
        cos_hf, sin_hf = hf(torch.zeros(1), pos)
    cos, sin = mrope.cos_sin(pos)
    width = 2 * cos.shape[-1]
    assert cos_hf.shape[-1] == width
    tol = 64 * torch.finfo(torch.float32).eps * float(pos.max())  # transformers' float32 angles
    for ours, theirs in ((cos, cos_hf), (sin, sin_hf)):
        assert torch.equal(theirs[..., : width // 2], theirs[..., width // 2 :])
        assert (ours - theirs[..., : width // 2]).abs().max() <= tol
    # the other layout is far off: the parity above tells the layouts apart
    other = MRotaryEmbedding.from_hf_config(config, section_layout="interleaved" if layout == "chunked" else "chunked")
    assert (other.cos_sin(pos)[0] - cos_hf[..., : width // 2]).abs().max() > 100 * tol


def test_from_hf_config_reads_the_flag_and_needs_the_sections():
    cfg = {"hidden_size": 64, "num_attention_heads": 2, "rope_theta": 1e6, "model_type": "qwen2_vl"}
    with pytest.raises(ValueError, match="no mrope_section"):
        MRotaryEmbedding.from_hf_config({**cfg, "rope_scaling": {"rope_type": "default"}})
    flagged = {**cfg, "rope_scaling": {"rope_type": "default", "mrope_section": [6, 5, 5], "mrope_interleaved": True}}
    assert MRotaryEmbedding.from_hf_config(flagged).section_layout == "interleaved"
    flagged["rope_scaling"]["mrope_interleaved"] = "yes"
    with pytest.raises(ValueError, match="mrope_interleaved"):
        MRotaryEmbedding.from_hf_config(flagged)
    # a vision-language config: the text config's fields, as transformers' text model reads them
    vl = {
        "model_type": "qwen2_5_vl",
        "text_config": {**cfg, "rope_scaling": {"type": "mrope", "mrope_section": [6, 5, 5]}},
    }
    assert MRotaryEmbedding.from_hf_config(vl).rope.base == 1e6


def test_yarn_scaling_is_shared_by_the_streams():
    mrope = MRotaryEmbedding(32, [6, 5, 5], scaling=YaRNScaling(factor=4.0, original_max_position_embeddings=64))
    rope = RotaryEmbedding(32, scaling=YaRNScaling(factor=4.0, original_max_position_embeddings=64))
    pos = torch.arange(100).unsqueeze(0)
    assert torch.equal(mrope.cos_sin(text_stream_positions(pos))[0], rope.cos_sin(pos)[0])
    assert mrope.rope.attention_factor > 1


def test_qwen2_vl_config_json_reads_as_the_default_frequencies():
    """Qwen2-VL's and Qwen2.5-VL's config.json say {"type": "mrope"}: the default frequencies with
    M-RoPE's streams, as transformers reads it; for other families "mrope" is not a rope type."""
    from posenc.rope.hfconfig import rotary_kwargs_from_hf

    fields = {"hidden_size": 64, "num_attention_heads": 2, "rope_theta": 1e6}
    rope = {"type": "mrope", "mrope_section": [6, 5, 5]}
    for model_type in ("qwen2_vl", "qwen2_5_vl"):
        kwargs = rotary_kwargs_from_hf({**fields, "model_type": model_type, "rope_scaling": rope}, strict=False)
        assert kwargs["scaling"] is None and kwargs["base"] == 1e6
    with pytest.raises(ValueError, match="got 'mrope'"):
        rotary_kwargs_from_hf({**fields, "model_type": "llama", "rope_scaling": rope}, strict=False)


def test_inspect_reads_a_qwen2_vl_config_and_does_not_call_its_sections_unused():
    from posenc.inspect import inspect_config

    config = {
        "model_type": "qwen2_vl",
        "hidden_size": 64,
        "num_attention_heads": 2,
        "rope_theta": 1e6,
        "rope_scaling": {"type": "mrope", "mrope_section": [6, 5, 5], "mrope_typo": 1},
    }
    risks = [r["detail"] for r in inspect_config(config)["risks"] if r["risk"] == "rope keys the type does not use"]
    assert len(risks) == 1 and "mrope_typo" in risks[0] and "mrope_section" not in risks[0]
