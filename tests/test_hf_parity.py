"""Parity with the reference implementation in ``transformers`` (a test-only dependency).

For every rope type ``transformers`` implements, random head sizes, partial-rotary factors, bases,
scale factors, trained lengths and positions go through both libraries from one ``config.json``-style
dict: ``inv_freq`` and ``attention_factor`` must agree within 1e-6 relative, and q/k rotated by the
``transformers`` model classes (``GPTNeoXRotaryEmbedding`` + ``apply_rotary_pos_emb``, the family
that supports partial rotary) must agree within 1e-5 in float32.

Where the reference itself loses precision, posenc is compared against float64 instead:

* ``transformers`` forms the angle ``position * inv_freq`` in float32, so its rotated q/k drift from
  the exact values by about ``1e-7 * position * |q|`` (about 5e-6 at position 64, 4e-4 at 5000).
  Direct comparisons therefore use positions below 64; long positions are checked against float64.
* ``model.to(torch.bfloat16)`` rounds its ``inv_freq`` buffer to bf16 (up to 4e-3 relative).
"""

from __future__ import annotations

import importlib
import math

import pytest
import torch
import transformers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers import AutoConfig, GPTNeoXConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding
from transformers.models.gpt_neox.modeling_gpt_neox import apply_rotary_pos_emb as neox_apply

from posenc.fixtures import fixture_names, load_fixture
from posenc.hf import rotary_kwargs_from_hf, scaling_from_hf, to_hf_dict
from posenc.rope import REGISTRY, RotaryEmbedding, rope_frequencies

transformers.logging.set_verbosity_error()

SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: every registered rope type transformers implements (the registry says which)
HF_TYPES = tuple(name for name, d in REGISTRY.items() if d.transformers.known)
#: below this position the float32 angles of the reference are good to ~5e-6 (see module docstring)
EXACT_REFERENCE_POSITIONS = 64


def test_every_reference_rope_type_is_covered():
    assert set(ROPE_INIT_FUNCTIONS) | {"default"} == set(HF_TYPES)
    assert HF_TYPES == ("default", "linear", "dynamic", "yarn", "llama3", "longrope", "proportional")


# -- building one config for both libraries ----------------------------------------------------------
@st.composite
def configs(draw, rope_type: str, max_positions=st.integers(16, 4096)):
    """A config.json-style dict with random shape, base and scaling parameters for ``rope_type``."""
    head_dim = draw(st.sampled_from([8, 16, 32, 48, 64, 96, 128]))
    partial = draw(st.sampled_from([1.0, 0.5, 0.25]))
    if int(head_dim * partial) % 2 or (rope_type == "dynamic" and int(head_dim * partial) == 2):
        partial = 1.0  # the reference divides by d - 2 for dynamic: see test below
    rotary_dim = int(head_dim * partial)
    base = 10 ** draw(st.floats(2.0, 6.5))
    factor = draw(st.floats(1.0, 64.0))
    original = draw(max_positions)
    rope = {"rope_type": rope_type, "rope_theta": base, "partial_rotary_factor": partial}
    max_pos = original
    if rope_type in ("linear", "dynamic"):
        rope["factor"] = factor
    elif rope_type == "yarn":
        max_pos = int(original * factor)
        beta_slow = draw(st.floats(0.25, 4.0))
        beta_fast = beta_slow + draw(st.floats(0.5, 64.0))
        rope.update(factor=factor, original_max_position_embeddings=original, beta_slow=beta_slow, beta_fast=beta_fast)
        rope["truncate"] = draw(st.booleans())
        if draw(st.booleans()):
            rope.update(mscale=draw(st.floats(0.1, 2.0)), mscale_all_dim=draw(st.floats(0.1, 2.0)))
        if draw(st.booleans()):
            rope["attention_factor"] = draw(st.floats(0.5, 2.0))
    elif rope_type == "llama3":
        max_pos = int(original * factor) + 1
        low = draw(st.floats(0.5, 2.0))
        high = low + draw(st.floats(0.5, 8.0))
        rope.update(
            factor=factor, original_max_position_embeddings=original, low_freq_factor=low, high_freq_factor=high
        )
    elif rope_type == "longrope":
        max_pos = int(original * factor)
        n = rotary_dim // 2
        rope.update(
            original_max_position_embeddings=original,
            short_factor=draw(st.lists(st.floats(1.0, 4.0), min_size=n, max_size=n)),
            long_factor=draw(st.lists(st.floats(1.0, 64.0), min_size=n, max_size=n)),
        )
        if draw(st.booleans()):
            rope["factor"] = factor
        if draw(st.booleans()):
            rope["attention_factor"] = draw(st.floats(0.5, 2.0))
    elif rope_type == "proportional":
        rope["factor"] = factor
    return {
        "hidden_size": head_dim * 2,
        "num_attention_heads": 2,
        "max_position_embeddings": max_pos,
        "rope_parameters": rope,
    }


def hf_config(config: dict) -> GPTNeoXConfig:
    rope = dict(config["rope_parameters"])
    return GPTNeoXConfig(**{**config, "rope_parameters": rope})


def hf_frequencies(config: dict, seq_len=None):
    cfg = hf_config(config)
    rope_type = config["rope_parameters"]["rope_type"]
    if rope_type == "default":
        inv, factor = GPTNeoXRotaryEmbedding.compute_default_rope_parameters(cfg)
    else:
        inv, factor = ROPE_INIT_FUNCTIONS[rope_type](cfg, None, seq_len=seq_len)
    return inv.double(), float(factor)


def exact_frequencies(config: dict, seq_len=None):
    """The formulas of each rope type evaluated per pair with Python floats (float64), from the papers.

    Independent of both libraries; it arbitrates where the float32 reference loses digits.
    """
    rope = config["rope_parameters"]
    kind, base = rope["rope_type"], rope["rope_theta"]
    head_dim = config["hidden_size"] // config["num_attention_heads"]
    d = int(head_dim * rope["partial_rotary_factor"])
    max_pos = config["max_position_embeddings"]
    if kind == "proportional":
        d, n_rot = head_dim, int(rope["partial_rotary_factor"] * head_dim // 2)
        return [base ** (-2 * i / d) / rope["factor"] if i < n_rot else 0.0 for i in range(d // 2)], 1.0
    theta = [base ** (-2 * i / d) for i in range(d // 2)]
    s = rope.get("factor")
    if kind == "default":
        return theta, 1.0
    if kind == "linear":
        return [t / s for t in theta], 1.0
    if kind == "dynamic":
        length = max(seq_len or max_pos, max_pos)
        new_base = base * (s * length / max_pos - (s - 1)) ** (d / (d - 2))
        return [new_base ** (-2 * i / d) for i in range(d // 2)], 1.0
    orig = rope["original_max_position_embeddings"]
    if kind == "llama3":
        lo, hi = rope["low_freq_factor"], rope["high_freq_factor"]
        out = []
        for t in theta:
            wavelength = 2 * math.pi / t
            if wavelength < orig / hi:
                out.append(t)
            elif wavelength > orig / lo:
                out.append(t / s)
            else:
                g = (orig / wavelength - lo) / (hi - lo)
                out.append((1 - g) * t / s + g * t)
        return out, 1.0
    if kind == "yarn":

        def dim_of(rotations):
            return d * math.log(orig / (rotations * 2 * math.pi)) / (2 * math.log(base))

        low, high = dim_of(rope["beta_fast"]), dim_of(rope["beta_slow"])
        if rope["truncate"]:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, d - 1)
        high = high + 0.001 if low == high else high
        ramps = [min(max((i - low) / (high - low), 0.0), 1.0) for i in range(d // 2)]
        m = lambda k: 0.1 * k * math.log(s) + 1.0 if s > 1 else 1.0
        factor = rope.get("attention_factor") or (
            m(rope["mscale"]) / m(rope["mscale_all_dim"]) if "mscale" in rope else m(1.0)
        )
        return [t / s * r + t * (1 - r) for t, r in zip(theta, ramps)], factor
    # longrope
    chosen = rope["long_factor"] if seq_len and seq_len > orig else rope["short_factor"]
    s = rope.get("factor") or max_pos / orig
    factor = rope.get("attention_factor") or (math.sqrt(1 + math.log(s) / math.log(orig)) if s > 1 else 1.0)
    return [t / f for t, f in zip(theta, chosen)], factor


def assert_frequencies_match(config: dict, seq_len=None):
    """posenc equals the reference within 1e-6 relative; where the reference itself is off the exact
    float64 value by more than 5e-7 (float32 cancellation), posenc must equal the exact value."""
    rope = RotaryEmbedding.from_hf_config(config)
    ours, our_factor = rope_frequencies(rope.scaling, rope.rotary_dim, rope.base, seq_len)
    ref, ref_factor = hf_frequencies(config, seq_len)
    exact_list, exact_factor = exact_frequencies(config, seq_len)
    exact = torch.tensor(exact_list, dtype=torch.float64)
    assert ours.shape == ref.shape == exact.shape
    assert torch.equal(ours == 0, ref == 0)
    scale = exact.abs().clamp_min(1e-300)
    torch.testing.assert_close(ours, exact, rtol=1e-12, atol=0)
    ref_off = (ref - exact).abs() / scale > 5e-7
    agree = (ours - ref).abs() <= 1e-6 * ref.abs()
    assert bool((agree | ref_off).all()), "posenc and the reference differ where the reference is exact"
    assert math.isclose(our_factor, ref_factor, rel_tol=1e-6, abs_tol=0.0)
    assert math.isclose(our_factor, exact_factor, rel_tol=1e-12, abs_tol=0.0)
    return int(ref_off.sum())


# -- inv_freq and attention_factor ----------------------------------------------------------------------
@pytest.mark.parametrize("rope_type", HF_TYPES)
@SETTINGS
@given(data=st.data())
def test_frequencies_and_attention_factor_match(rope_type, data):
    config = data.draw(configs(rope_type))
    assert_frequencies_match(config)


@SETTINGS
@given(config=configs("dynamic"), extra=st.integers(1, 100_000))
def test_dynamic_frequencies_match_past_the_trained_length(config, extra):
    assert_frequencies_match(config, seq_len=config["max_position_embeddings"] + extra)


@SETTINGS
@given(config=configs("longrope"), extra=st.integers(1, 100_000))
def test_longrope_long_factor_matches_past_the_trained_length(config, extra):
    original = config["rope_parameters"]["original_max_position_embeddings"]
    assert_frequencies_match(config, seq_len=original + extra)
    assert_frequencies_match(config, seq_len=original)  # the boundary stays short


def test_reference_cannot_do_dynamic_ntk_on_one_pair():
    config = {
        "hidden_size": 16,
        "num_attention_heads": 2,
        "max_position_embeddings": 16,
        "rope_parameters": {"rope_type": "dynamic", "rope_theta": 100.0, "partial_rotary_factor": 0.25, "factor": 2.0},
    }
    with pytest.raises(ZeroDivisionError):  # base * s ** (d / (d - 2)) with d = 2
        hf_frequencies(config, seq_len=32)
    rope = RotaryEmbedding.from_hf_config(config)
    inv, _ = rope.frequencies(32)  # posenc: the one pair is the fastest, which NTK never changes
    assert inv.tolist() == [1.0]


# -- rotated q/k through the model classes ---------------------------------------------------------------
def rotate_both(config: dict, position_ids: torch.Tensor, seed: int):
    gen = torch.Generator().manual_seed(seed)
    head_dim = config["hidden_size"] // config["num_attention_heads"]
    batch, seq = position_ids.shape
    q = torch.randn(batch, 4, seq, head_dim, generator=gen)
    k = torch.randn(batch, 2, seq, head_dim, generator=gen)  # GQA: fewer kv heads
    ref_module = GPTNeoXRotaryEmbedding(hf_config(config))
    cos, sin = ref_module(q, position_ids)
    q_ref, k_ref = neox_apply(q, k, cos, sin)
    ours = RotaryEmbedding.from_hf_config(config)
    q_out, k_out = ours(q, k, position_ids)
    return (q_ref, k_ref), (q_out, k_out), (q, k)


def rotate_float64(
    x: torch.Tensor, position_ids: torch.Tensor, inv_freq: torch.Tensor, attention_factor: float, rotary_dim: int
) -> torch.Tensor:
    """Half-split RoPE written out in float64: the exact values the float32 results approximate."""
    x = x.double()
    angles = position_ids.double()[:, None, :, None] * inv_freq.double()  # (B, 1, S, r/2)
    cos, sin = angles.cos() * attention_factor, angles.sin() * attention_factor
    a, b = x[..., : rotary_dim // 2], x[..., rotary_dim // 2 : rotary_dim]
    return torch.cat((a * cos - b * sin, a * sin + b * cos, x[..., rotary_dim:]), dim=-1)


def exact_rotation(config: dict, x: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
    inv, factor = exact_frequencies(config, int(position_ids.max()) + 1)
    rotary_dim = 2 * len(inv)
    return rotate_float64(x, position_ids, torch.tensor(inv, dtype=torch.float64), factor, rotary_dim)


def assert_rotation_matches(config, ours: torch.Tensor, ref: torch.Tensor, exact: torch.Tensor):
    """posenc within 1e-5 of the reference wherever the reference is within 5e-6 of the exact value,
    and within 2e-6 of the exact value everywhere."""
    ours, ref = ours.double(), ref.double()
    assert (ours - exact).abs().max().item() <= 2e-6
    ref_ok = (ref - exact).abs() <= 5e-6
    diff = (ours - ref).abs()
    assert diff[ref_ok].max().item() <= 1e-5 if ref_ok.any() else True


@pytest.mark.parametrize("rope_type", HF_TYPES)
@SETTINGS
@given(data=st.data())
def test_rotated_qk_match_model_classes(rope_type, data):
    # Trained lengths small enough that the dynamic/long regimes start below EXACT_REFERENCE_POSITIONS.
    config = data.draw(configs(rope_type, max_positions=st.integers(8, 40)))
    seq = data.draw(st.integers(1, 24))
    positions = data.draw(st.lists(st.integers(0, EXACT_REFERENCE_POSITIONS - 1), min_size=2 * seq, max_size=2 * seq))
    position_ids = torch.tensor(positions).view(2, seq)
    (q_ref, k_ref), (q_out, k_out), (q, k) = rotate_both(config, position_ids, data.draw(st.integers(0, 9)))
    assert_rotation_matches(config, q_out, q_ref, exact_rotation(config, q, position_ids))
    assert_rotation_matches(config, k_out, k_ref, exact_rotation(config, k, position_ids))


@pytest.mark.parametrize("rope_type", ["default", "yarn", "llama3", "longrope"])
@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_long_positions_exact_where_the_reference_drifts(rope_type, data):
    config = data.draw(configs(rope_type))
    positions = data.draw(st.lists(st.integers(50_000, 2_000_000), min_size=6, max_size=6))
    position_ids = torch.tensor(positions).view(1, 6)
    _, (q_out, _), (q, _) = rotate_both(config, position_ids, 0)
    exact = exact_rotation(config, q, position_ids)
    assert (q_out.double() - exact).abs().max().item() <= 2e-6


def test_reference_angles_drift_with_position():
    """A Llama-2-like head at position one million: the reference's float32 angles are off by ~0.1
    rad (the noted precision loss), posenc's rotated q stays at float32 rounding."""
    config = {
        "hidden_size": 256,
        "num_attention_heads": 2,
        "max_position_embeddings": 4096,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0},
    }
    position_ids = torch.tensor([[999_999, 1_000_000, 1_048_575]])
    (q_ref, _), (q_out, _), (q, _) = rotate_both(config, position_ids, 0)
    exact = exact_rotation(config, q, position_ids)
    assert (q_out.double() - exact).abs().max().item() < 2e-6
    assert (q_ref.double() - exact).abs().max().item() > 1e-2


def test_reference_rounds_inv_freq_when_cast_to_bf16():
    config = {
        "hidden_size": 256,
        "num_attention_heads": 2,
        "max_position_embeddings": 64,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0},
    }
    ref = GPTNeoXRotaryEmbedding(hf_config(config))
    exact = ref.inv_freq.double().clone()
    ref_rel = ((ref.to(torch.bfloat16).inv_freq.double() - exact).abs() / exact).max().item()
    ours = RotaryEmbedding.from_hf_config(config)
    before = ours.inv_freq.clone()
    ours.to(torch.bfloat16)
    assert ref_rel > 1e-3  # the reference's buffer was rounded to bf16
    assert torch.equal(ours.inv_freq, before)  # posenc rebuilt it from float64


# -- real configs, through the model families they belong to ---------------------------------------------
def model_rotary(name: str):
    fixture = load_fixture(name)
    model_type = fixture["model_type"]
    fields = {k: v for k, v in fixture.items() if k not in ("source", "note", "model_type")}
    cfg = AutoConfig.for_model(model_type, **fields)
    module = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    (cls,) = [getattr(module, n) for n in dir(module) if n.endswith("RotaryEmbedding") and n[0] != "_"]
    return fixture, cfg, cls(cfg), module


@pytest.mark.parametrize("name", [n for n in fixture_names() if n != "gpt-j-6b"])
def test_fixture_matches_its_model_family(name):
    fixture, cfg, ref, _ = model_rotary(name)
    ours = RotaryEmbedding.from_hf_config(fixture)
    assert RotaryEmbedding.from_hf_config(cfg).scaling == ours.scaling  # object and dict agree
    inv = ref.inv_freq.double()
    rel = ((ours.inv_freq.double() - inv).abs() / inv).max().item()
    assert rel <= 1e-6
    assert math.isclose(ours.attention_factor, ref.attention_scaling, rel_tol=1e-6)
    if ours.is_dynamic:  # LongRoPE: the long factors past the trained length
        long_len = ours.scaling.original_max_position_embeddings + 1
        ref_module_inv = ref(torch.zeros(1), torch.tensor([[long_len - 1]])) and ref.inv_freq.double()
        rel = ((ours.frequencies(long_len)[0] - ref_module_inv).abs() / ref_module_inv).max().item()
        assert rel <= 1e-6


def test_gpt_j_fixture_matches_its_sinusoid_table():
    fixture, cfg, ref, _ = model_rotary("gpt-j-6b")
    ours = RotaryEmbedding.from_hf_config(fixture)
    assert (ours.head_dim, ours.rotary_dim, ours.layout) == (256, 64, "interleaved")
    table = ref.embed_positions if hasattr(ref, "embed_positions") else None
    positions = torch.arange(40)
    cos, sin = ours.cos_sin(positions.unsqueeze(0))
    if table is None:
        from transformers.models.gptj.modeling_gptj import create_sinusoidal_positions

        table = create_sinusoidal_positions(cfg.n_positions, cfg.rotary_dim)
    ref_sin, ref_cos = table[positions].chunk(2, dim=-1)
    torch.testing.assert_close(cos[0], ref_cos.float(), atol=1e-5, rtol=0)
    torch.testing.assert_close(sin[0], ref_sin.float(), atol=1e-5, rtol=0)


def test_deepseek_interleaved_scores_match_reference():
    fixture, cfg, ref, module = model_rotary("deepseek-v3")
    ours = RotaryEmbedding.from_hf_config(fixture)
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, 2, 24, 64, generator=gen)
    k = torch.randn(1, 2, 24, 64, generator=gen)
    pos = torch.arange(24).unsqueeze(0)
    cos, sin = ref(q, pos)
    q_ref, k_ref = module.apply_rotary_pos_emb_interleave(q, k, cos, sin)
    q_out, k_out = ours(q, k, pos)
    torch.testing.assert_close(q_out @ k_out.transpose(-1, -2), q_ref @ k_ref.transpose(-1, -2), atol=1e-4, rtol=0)
    # The rest of DeepSeek's YaRN temperature lives in its softmax scale.
    mscale = 0.1 * fixture["rope_scaling"]["mscale_all_dim"] * math.log(40) + 1.0
    qk_head_dim = fixture["qk_nope_head_dim"] + fixture["qk_rope_head_dim"]
    model_attention = module.DeepseekV3Attention(cfg, layer_idx=0)
    assert math.isclose(model_attention.scaling, qk_head_dim**-0.5 * ours.softmax_scale_factor, rel_tol=1e-12)
    assert math.isclose(ours.softmax_scale_factor, mscale**2, rel_tol=1e-12)


# -- the tour section on real configs: its numbers against the reference and closed forms ------------------
def test_tour_section_numbers_match_reference_and_closed_forms(tmp_path):
    import io

    import rich.console

    from posenc.teaching.tour import run_tour
    from posenc.teaching.tour.configs import real_configs

    console = rich.console.Console(file=io.StringIO(), width=110, color_system=None)
    facts = run_tour(tmp_path, console=console, sections=[("configs", real_configs)]).facts
    assert (tmp_path / "real_config_wavelengths.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # Llama 3.1 8B: bands from the published rule, wavelengths from the reference's own frequencies.
    _, _, llama_ref, _ = model_rotary("llama-3.1-8b")
    theta = [500000.0 ** (-2 * i / 128) for i in range(64)]
    wavelengths = [2 * math.pi / t for t in theta]
    assert facts["configs.llama31.kept"] == sum(w < 8192 / 4 for w in wavelengths)
    assert facts["configs.llama31.slowed"] == sum(w > 8192 / 1 for w in wavelengths)
    assert facts["configs.llama31.blended"] == 64 - facts["configs.llama31.kept"] - facts["configs.llama31.slowed"]
    assert facts["configs.llama31.slowest_wavelength"] == pytest.approx(wavelengths[-1] * 8, rel=1e-12)
    assert facts["configs.llama31.slowest_wavelength"] == pytest.approx(
        2 * math.pi / llama_ref.inv_freq[-1].item(), rel=1e-6
    )
    assert facts["configs.llama31.attention_factor"] == llama_ref.attention_scaling == 1.0

    # Phi-3.5-mini: LongRoPE's attention factor rule and the long factors past 4096 tokens.
    fixture, _, phi_ref, _ = model_rotary("phi-3.5-mini-instruct")
    long_factor = fixture["rope_scaling"]["long_factor"]
    assert facts["configs.phi35.attention_factor"] == pytest.approx(
        math.sqrt(1 + math.log(32) / math.log(4096)), rel=1e-15
    )
    assert facts["configs.phi35.attention_factor"] == pytest.approx(phi_ref.attention_scaling, rel=1e-12)
    assert facts["configs.phi35.slowest_wavelength"] == pytest.approx(
        2 * math.pi * long_factor[-1] / 10000.0 ** (-94 / 96), rel=1e-12
    )
    assert facts["configs.phi35.long_factor_range"] == [min(long_factor), max(long_factor)]


# -- reading and writing configs ---------------------------------------------------------------------------
LLAMA31_ROPE = {
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}


def test_legacy_and_new_style_configs_read_the_same():
    legacy_type = {
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "rope_theta": 500000.0,
        "max_position_embeddings": 131072,
        "rope_scaling": {**LLAMA31_ROPE, "type": "llama3"},
    }
    legacy_rope_type = {**legacy_type, "rope_scaling": {**LLAMA31_ROPE, "rope_type": "llama3"}}
    new_style = {
        "head_dim": 128,
        "max_position_embeddings": 131072,
        "rope_parameters": {**LLAMA31_ROPE, "rope_type": "llama3", "rope_theta": 500000.0},
    }
    built = [RotaryEmbedding.from_hf_config(c) for c in (legacy_type, legacy_rope_type, new_style)]
    built.append(RotaryEmbedding.from_hf_config(AutoConfig.for_model("llama", **legacy_type)))
    for rope in built:
        assert (rope.head_dim, rope.rotary_dim, rope.base) == (128, 128, 500000.0)
        assert rope.scaling == built[0].scaling
        assert torch.equal(rope.inv_freq, built[0].inv_freq)


@pytest.mark.parametrize("name", fixture_names())
@pytest.mark.parametrize("style", ["rope_parameters", "rope_scaling"])
def test_to_hf_dict_round_trips_and_loads_in_transformers(name, style):
    rope = RotaryEmbedding.from_hf_config(load_fixture(name))
    written = to_hf_dict(rope, style)
    if style == "rope_parameters":
        assert written == rope.to_hf_dict()
    again = RotaryEmbedding.from_hf_config(written, layout=rope.layout)
    assert (again.head_dim, again.rotary_dim, again.base, again.scaling) == (
        rope.head_dim,
        rope.rotary_dim,
        rope.base,
        rope.scaling,
    )
    assert torch.equal(again.inv_freq, rope.inv_freq) and again.attention_factor == rope.attention_factor
    # transformers reads the written dict to the same frequencies.
    cfg = AutoConfig.for_model("llama", hidden_size=rope.head_dim * 2, num_attention_heads=2, **written)
    kind = cfg.rope_parameters["rope_type"]
    if kind != "default":
        inv, factor = ROPE_INIT_FUNCTIONS[kind](cfg, None)
        torch.testing.assert_close(inv.double(), rope.inv_freq.double(), rtol=1e-6, atol=0)
        assert math.isclose(factor, rope.attention_factor, rel_tol=1e-6)


def test_config_quirks_follow_transformers():
    factor_lists = {"short_factor": [1.0] * 16, "long_factor": [2.0] * 16}
    phi3_yarn = {
        "hidden_size": 64,
        "num_attention_heads": 2,
        "max_position_embeddings": 64,
        "original_max_position_embeddings": 16,
        "model_type": "phi3",
        "rope_scaling": {"type": "yarn", **factor_lists},
    }
    ours = RotaryEmbedding.from_hf_config(phi3_yarn)
    ref = AutoConfig.for_model("phi3", **{k: v for k, v in phi3_yarn.items() if k != "model_type"})
    assert ours.scaling.rope_type == ref.rope_parameters["rope_type"] == "longrope"
    assert ours.scaling.factor == 4.0  # max_position_embeddings / original
    # Phi-4-multimodal's config translates "yarn" the same way
    # (a fresh rope dict: transformers writes rope_type into the one it is given)
    phi4mm = {**phi3_yarn, "model_type": "phi4_multimodal", "rope_scaling": {"type": "yarn", **factor_lists}}
    ours = RotaryEmbedding.from_hf_config(phi4mm)
    ref = AutoConfig.for_model("phi4_multimodal", **{k: v for k, v in phi4mm.items() if k != "model_type"})
    assert ours.scaling.rope_type == ref.rope_parameters["rope_type"] == "longrope"
    # a built config is read as built: its rotary module runs the rope_type it holds
    ref.rope_parameters = {"rope_type": "yarn", "factor": 4.0, "rope_theta": 10_000.0}
    assert RotaryEmbedding.from_hf_config(ref).scaling.rope_type == "yarn"
    neox = RotaryEmbedding.from_hf_config(load_fixture("gpt-neox-20b"))
    assert (neox.rotary_dim, neox.base) == (24, 10000.0)  # rotary_pct, rotary_emb_base


def test_bad_configs_raise_with_the_field():
    base = {"hidden_size": 64, "num_attention_heads": 2}
    with pytest.raises(ValueError, match=r"keys it does not use: \['factr'\]"):
        RotaryEmbedding.from_hf_config({**base, "rope_scaling": {"type": "linear", "factor": 2.0, "factr": 1}})
    loose = scaling_from_hf({**base, "rope_scaling": {"type": "linear", "factor": 2.0, "factr": 1}}, strict=False)
    assert loose.factor == 2.0
    with pytest.raises(ValueError, match="missing its required key 'factor'"):
        RotaryEmbedding.from_hf_config({**base, "rope_scaling": {"type": "linear"}})
    with pytest.raises(ValueError, match="must be an even number"):
        RotaryEmbedding.from_hf_config({**base, "partial_rotary_factor": 0.3})
    with pytest.raises(ValueError, match="rope_type must be one of"):
        RotaryEmbedding.from_hf_config({**base, "rope_scaling": {"type": "zigzag"}})
    with pytest.raises(ValueError, match="hidden_size and num_attention_heads"):
        RotaryEmbedding.from_hf_config({"rope_theta": 1e4})
    nested = {
        **base,
        "rope_parameters": {
            "full_attention": {"rope_type": "linear", "factor": 8.0},
            "sliding_attention": {"rope_type": "default"},
        },
    }
    with pytest.raises(ValueError, match="pass layer_type="):
        RotaryEmbedding.from_hf_config(nested)
    assert rotary_kwargs_from_hf(nested, layer_type="full_attention")["scaling"].factor == 8.0
    with pytest.raises(ValueError, match="both or neither"):
        RotaryEmbedding.from_hf_config(
            {
                **base,
                "rope_scaling": {"type": "yarn", "factor": 4.0, "mscale": 1.0, "original_max_position_embeddings": 16},
            }
        )
