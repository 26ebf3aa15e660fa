"""xPos against flash-attn's formula (written out here in float64), its scores a function of m - n
times the decay zeta ** ((m - n) / scale_base), the norms it scales, layout equivalence, precision,
gradients, its RoPE limit and its refusals."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import ModelConfig, TinyLM
from posenc.rope import RotaryEmbedding, XPosEmbedding, permute_for_interleaved, xpos_zeta
from posenc.rope.xpos import xpos_max_distance


def flash_attn_xpos_tables(seqlen: int, dim: int, base: float, scale_base: float):
    """flash-attn's ``RotaryEmbedding(dim, base, scale_base=...)._update_cos_sin_cache(seqlen)``
    (``flash_attn/layers/rotary.py``), followed step by step in float64: the queries' cos and sin are
    multiplied by ``scale ** power``, the keys' divided by it, each (seqlen, dim // 2)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    t = torch.arange(seqlen, dtype=torch.float64)
    freqs = torch.outer(t, inv_freq)
    scale = (torch.arange(0, dim, 2, dtype=torch.float64) + 0.4 * dim) / (1.4 * dim)
    power = (torch.arange(seqlen, dtype=torch.float64) - seqlen // 2) / scale_base
    scale = scale ** power.unsqueeze(-1)
    return freqs.cos() * scale, freqs.sin() * scale, freqs.cos() / scale, freqs.sin() / scale


def neox_rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """flash-attn's non-interleaved rotation: x * cat(cos, cos) + rotate_half(x) * cat(sin, sin)."""
    half = x.shape[-1] // 2
    rotated_half = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * torch.cat((cos, cos), dim=-1) + rotated_half * torch.cat((sin, sin), dim=-1)


@pytest.mark.parametrize("dim,seqlen,scale_base", [(32, 64, 512.0), (16, 300, 64.0), (64, 2048, 512.0)])
def test_equals_flash_attn_xpos_formula(dim, seqlen, scale_base):
    torch.manual_seed(0)
    q = torch.randn(2, 3, seqlen, dim, dtype=torch.float64)
    k = torch.randn(2, 3, seqlen, dim, dtype=torch.float64)
    cos_q, sin_q, cos_k, sin_k = flash_attn_xpos_tables(seqlen, dim, 10000.0, scale_base)
    xpos = XPosEmbedding(dim, scale_base=scale_base, center=seqlen // 2).double()
    q_out, k_out = xpos(q, k)
    # the formula's float64 angles (not reduced) and scale ** power (not exp of a product) are good to ~1e-13
    torch.testing.assert_close(q_out, neox_rotate(q, cos_q, sin_q), rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(k_out, neox_rotate(k, cos_k, sin_k), rtol=1e-10, atol=1e-10)
    # float32 rounds the tables once and the rotation twice: within a few float32 steps
    q32, k32 = XPosEmbedding(dim, scale_base=scale_base, center=seqlen // 2)(q.float(), k.float())
    torch.testing.assert_close(q32.double(), q_out, rtol=5e-6, atol=5e-6)
    torch.testing.assert_close(k32.double(), k_out, rtol=5e-6, atol=5e-6)


def pair_scores(q: torch.Tensor, k: torch.Tensor, half: int) -> torch.Tensor:
    """Per-pair dot products of half-split vectors (..., 2 * half) -> (..., half)."""
    return q[..., :half] * k[..., :half] + q[..., half:] * k[..., half:]


DIM, SCALE_BASE = 16, 256.0
ROPE = RotaryEmbedding(DIM).double()
XPOS = {center: XPosEmbedding(DIM, scale_base=SCALE_BASE, center=center).double() for center in (0, 7, 1000, 5000)}


@settings(max_examples=40, deadline=None)
@given(
    m=st.integers(0, 3000),
    n=st.integers(0, 3000),
    shift=st.integers(0, 10000),  # within the float32 range of scale_base 256 (17,988 from the centre)
    center=st.sampled_from(sorted(XPOS)),
    seed=st.integers(0, 100),
)
def test_scores_are_ropes_decayed_by_zeta_to_the_distance(m, n, shift, center, seed):
    """q at m and k at n: pair i's score is RoPE's times zeta_i ** ((m - n) / scale_base), whatever the
    centre, and shifting both positions changes nothing."""
    g = torch.Generator().manual_seed(seed)
    dim, scale_base = DIM, SCALE_BASE
    q = torch.randn(1, 1, 2, dim, dtype=torch.float64, generator=g)
    k = torch.randn(1, 1, 2, dim, dtype=torch.float64, generator=g)
    xpos, rope = XPOS[center], ROPE

    def score(module, a, b):
        q_out, _ = module(q, k, torch.tensor([[a, b]]))
        _, k_out = module(q, k, torch.tensor([[a, b]]))
        return pair_scores(q_out[0, 0, 0], k_out[0, 0, 1], dim // 2)  # (dim / 2,)

    zeta = xpos_zeta(dim)
    want = score(rope, m, n) * zeta ** ((m - n) / scale_base)
    torch.testing.assert_close(score(xpos, m, n), want, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(score(xpos, m + shift, n + shift), want, rtol=1e-8, atol=1e-8)


def test_norms_of_each_pair_are_scaled_by_the_factor():
    torch.manual_seed(2)
    dim, scale_base, center = 32, 128.0, 100
    q = torch.randn(1, 2, 400, dim, dtype=torch.float64)
    xpos = XPosEmbedding(dim, scale_base=scale_base, center=center).double()
    q_out, k_out = xpos(q, q)
    pos = torch.arange(400, dtype=torch.float64).view(-1, 1)
    factor = xpos_zeta(dim) ** ((pos - center) / scale_base)  # (400, dim / 2)

    def norms(x):
        return (x[..., : dim // 2] ** 2 + x[..., dim // 2 :] ** 2).sqrt()

    torch.testing.assert_close(norms(q_out), norms(q) * factor, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(norms(k_out), norms(q) / factor, rtol=1e-12, atol=1e-12)
    assert (norms(q_out)[..., 101:, :] < norms(q)[..., 101:, :]).all()  # past the centre queries shrink


def test_interleaved_layout_equals_half_split_on_permuted_features():
    torch.manual_seed(3)
    heads, dim = 2, 16
    q = torch.randn(1, heads, 50, dim)
    k = torch.randn(1, heads, 50, dim)
    half = XPosEmbedding(dim, scale_base=64.0, rotary_dim=12)
    inter = XPosEmbedding(dim, scale_base=64.0, rotary_dim=12, layout="interleaved")

    def to_interleaved(x):  # a head's features in the interleaved order: the rows a permuted weight gives
        order = permute_for_interleaved(torch.arange(dim, dtype=torch.float64), 1, rotary_dim=12).long()
        return x[..., order]

    q_half, k_half = half(q, k)
    q_int, k_int = inter(to_interleaved(q), to_interleaved(k))
    torch.testing.assert_close(q_int, to_interleaved(q_half), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(k_int, to_interleaved(k_half), rtol=1e-6, atol=1e-6)
    assert torch.equal(q_half[..., 12:], q[..., 12:])  # past rotary_dim: neither rotated nor scaled


def test_float32_tables_are_exact_far_from_zero():
    """At positions near 30,000 (float32 angles would be off by ~1e-3 rad there) xPos in float32 is
    its float64 self to float32 rounding."""
    torch.manual_seed(4)
    dim = 64
    pos = torch.arange(30_000, 30_064).view(1, -1)
    q = torch.randn(1, 2, 64, dim, dtype=torch.float64)
    k = torch.randn(1, 2, 64, dim, dtype=torch.float64)
    exact = XPosEmbedding(dim, scale_base=512.0, center=29_000).double()(q, k, pos)
    got = XPosEmbedding(dim, scale_base=512.0, center=29_000)(q.float(), k.float(), pos)
    for g, e in zip(got, exact):
        torch.testing.assert_close(g.double(), e, rtol=4e-6, atol=4e-6)


def test_bf16_inputs_are_computed_in_float32_and_rounded_once():
    torch.manual_seed(5)
    q = torch.randn(1, 2, 20, 16).bfloat16()
    k = torch.randn(1, 2, 20, 16).bfloat16()
    xpos = XPosEmbedding(16, scale_base=32.0)
    got = xpos(q, k)
    want = xpos(q.float(), k.float())
    for g, w in zip(got, want):
        assert g.dtype == torch.bfloat16
        assert torch.equal(g, w.bfloat16())


def test_gradcheck():
    torch.manual_seed(6)
    xpos = XPosEmbedding(8, scale_base=16.0, center=3).double()
    q = torch.randn(1, 2, 5, 8, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 2, 5, 8, dtype=torch.float64, requires_grad=True)
    pos = torch.tensor([[0, 4, 9, 2, 30]])
    assert torch.autograd.gradcheck(lambda a, b: xpos(a, b, pos), (q, k))


def test_a_huge_scale_base_is_rope():
    torch.manual_seed(7)
    q, k = torch.randn(2, 2, 40, 16, dtype=torch.float64), torch.randn(2, 2, 40, 16, dtype=torch.float64)
    for a, b in zip(XPosEmbedding(16, scale_base=1e15).double()(q, k), RotaryEmbedding(16).double()(q, k)):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_positions_past_float32s_range_are_refused():
    xpos = XPosEmbedding(16, scale_base=8.0)
    limit = xpos_max_distance(16, 8.0)
    assert xpos_max_distance(64, 512.0) == 35_977  # the docs' number for scale_base 512
    assert limit == math.floor((math.log(torch.finfo(torch.float32).max) - math.log(2)) / math.log(1.4 / 0.4) * 8)
    q = torch.randn(1, 1, 1, 16)
    q_out, k_out = xpos(q, q, torch.tensor([[limit]]))  # the last position it holds: finite
    assert torch.isfinite(q_out).all() and torch.isfinite(k_out).all() and q_out.abs().max() > 0
    with pytest.raises(ValueError, match=f"position_ids must be <= {limit} for this xPos"):
        xpos(q, q, torch.tensor([[limit + 1]]))
    with pytest.raises(ValueError, match="center must be <="):
        XPosEmbedding(16, scale_base=8.0, center=limit + 1)


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (dict(scale_base=0.0), ValueError, "scale_base must be > 0"),
        (dict(scale_base=float("nan")), ValueError, "scale_base must be finite"),
        (dict(center=-1), ValueError, "center must be >= 0"),
        (dict(center=1.5), TypeError, "center must be an integer"),
        (dict(head_dim=7), ValueError, "head_dim must be even"),
        (dict(layout="neox"), ValueError, "layout must be one of"),
    ],
)
def test_bad_arguments_are_refused_by_name(kwargs, error, match):
    with pytest.raises(error, match=match):
        XPosEmbedding(**{"head_dim": 16, **kwargs})


def test_bad_calls_are_refused_by_name():
    xpos = XPosEmbedding(16)
    q = torch.randn(1, 1, 3, 16)
    with pytest.raises(ValueError, match="q has head_dim 8"):
        xpos(torch.randn(1, 1, 3, 8), q)
    with pytest.raises(TypeError, match="position_ids must have an integer dtype"):
        xpos(q, q, torch.tensor([[0.0, 1.0, 2.0]]))
    with pytest.raises(ValueError, match="position_ids must be >= 0"):
        xpos(q, q, torch.tensor([[0, -1, 2]]))


def test_xpos_in_the_reference_model():
    model = TinyLM(ModelConfig(scheme="xpos", d_model=32, n_heads=4, n_layers=2, max_len=16))
    assert isinstance(model.scheme, XPosEmbedding) and model.scheme.scale_base == 512.0
    idx = torch.randint(0, 256, (2, 24))
    logits = model(idx)
    changed = idx.clone()
    changed[:, 20:] = (changed[:, 20:] + 1) % 256
    torch.testing.assert_close(model(changed)[:, :20], logits[:, :20], rtol=0, atol=0)  # causal
    torch.testing.assert_close(model(idx, offset=5), model(idx, position_ids=torch.arange(5, 29).view(1, -1)))
