"""FoPE against vLLM's FourierRotaryEmbedding formula (written out here as loops over heads, positions and
pairs, with angles from mpmath), its frequency clipping, its RoPE limit (identity coefficients), grouped
heads, layout equivalence, float64 exactness far out, gradients to the coefficients, and its refusals."""

from __future__ import annotations

import copy
import math

import mpmath
import pytest
import torch

from posenc import ModelConfig, TinyLM
from posenc.rope import (
    FourierRotaryEmbedding,
    RotaryEmbedding,
    fope_frequencies,
    permute_for_interleaved,
    rope_inv_freq,
)


def exact_cos_sin(position: int, theta: float) -> tuple[float, float]:
    """cos and sin of ``position * theta`` (theta the float64 frequency, read exactly) to 40 digits."""
    with mpmath.workdps(40):
        angle = mpmath.mpf(position) * mpmath.mpf(theta)
        return float(mpmath.cos(angle)), float(mpmath.sin(angle))


def vllm_fope(x: torch.Tensor, positions: list[int], thetas: list[float], cos_coef, sin_coef, group: int):
    """vLLM's ``FourierRotaryEmbedding.forward_native`` (``vllm/model_executor/layers/rotary_embedding/fope.py``)
    followed as loops, float64: head ``h`` reads coefficient set ``h // group``; pair ``d`` of ``F``
    kept frequencies gets ``cos = sum_j cos(m theta_j) C[s, j, d]`` and ``sin = sum_j sin(m theta_j) S[s, j, d]``,
    pairs past ``F`` get cos 1 and sin 0; then NeoX's ``x * cos + rotate_half(x) * sin``.

    x: (heads, seq, head_dim) float64."""
    heads, seq, dim = x.shape
    half = dim // 2
    out = torch.empty_like(x)
    for h in range(heads):
        s = h // group
        for t, m in enumerate(positions):
            trig = [exact_cos_sin(m, th) for th in thetas]
            for d in range(half):
                if d < len(thetas):
                    c = sum(trig[j][0] * float(cos_coef[s, j, d]) for j in range(len(thetas)))
                    si = sum(trig[j][1] * float(sin_coef[s, j, d]) for j in range(len(thetas)))
                else:
                    c, si = 1.0, 0.0
                a, b = float(x[h, t, d]), float(x[h, t, d + half])
                out[h, t, d] = a * c - b * si
                out[h, t, d + half] = b * c + a * si
    return out


def test_frequency_clipping_keeps_periods_shorter_than_the_training_length():
    inv = rope_inv_freq(32, 10000.0)
    kept = fope_frequencies(32, 10000.0, 64)
    assert torch.equal(kept, inv[2 * math.pi / inv < 64])
    assert kept.numel() == 5 and (2 * math.pi / kept < 64).all() and 2 * math.pi / inv[5] >= 64
    assert fope_frequencies(32, 10000.0, 64, num_inv_freq=9).numel() == 9
    assert fope_frequencies(32, 10000.0, 10**9).numel() == 16  # every period fits a long enough training length


@pytest.mark.parametrize("separate_heads", [True, False])
def test_equals_vllms_formula(separate_heads):
    torch.manual_seed(0)
    heads, kv_heads, dim, train_len = 4, 2, 16, 100
    fope = FourierRotaryEmbedding(
        dim, kv_heads, max_position_embeddings=train_len, separate_heads=separate_heads, init_factor=0.3
    ).double()
    positions = [0, 1, 7, 99, 250, 4093]
    q = torch.randn(1, heads, len(positions), dim, dtype=torch.float64)
    k = torch.randn(1, kv_heads, len(positions), dim, dtype=torch.float64)
    q_out, k_out = fope(q, k, torch.tensor([positions]))
    thetas = fope.inv_freq.tolist()
    assert len(thetas) == fope.kept_frequencies == 3  # 10000 ** (-i / 8) with a period below 100: i = 0, 1, 2
    C, S = fope.cos_coef.detach(), fope.sin_coef.detach()
    group_q = heads // kv_heads if separate_heads else heads
    group_k = 1 if separate_heads else kv_heads
    torch.testing.assert_close(q_out[0], vllm_fope(q[0], positions, thetas, C, S, group_q), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(k_out[0], vllm_fope(k[0], positions, thetas, C, S, group_k), rtol=1e-12, atol=1e-12)


def test_identity_coefficients_are_rope_on_kept_pairs_and_no_rotation_on_clipped_ones():
    torch.manual_seed(1)
    dim, train_len = 32, 64
    fope = FourierRotaryEmbedding(dim, 2, max_position_embeddings=train_len, init_factor=0.0).double()
    kept = fope.kept_frequencies
    q = torch.randn(2, 2, 90, dim, dtype=torch.float64)
    k = torch.randn(2, 2, 90, dim, dtype=torch.float64)
    q_out, k_out = fope(q, k)
    q_rope, k_rope = RotaryEmbedding(dim).double()(q, k)
    half = dim // 2
    for got, rope, x in ((q_out, q_rope, q), (k_out, k_rope, k)):
        rotated = torch.cat((torch.arange(kept), torch.arange(kept) + half))
        clipped = torch.cat((torch.arange(kept, half), torch.arange(kept, half) + half))
        torch.testing.assert_close(got[..., rotated], rope[..., rotated], rtol=1e-12, atol=1e-12)
        assert torch.equal(got[..., clipped], x[..., clipped])


def test_grouped_query_heads_share_their_key_heads_coefficients():
    torch.manual_seed(2)
    fope = FourierRotaryEmbedding(8, 2, max_position_embeddings=32, init_factor=0.5)
    q = torch.randn(1, 6, 5, 8)
    k = torch.randn(1, 2, 5, 8)
    q_out, k_out = fope(q, k)
    same = q[:, 0:1].expand(1, 6, 5, 8).contiguous()
    q_same, _ = fope(same, k)
    assert torch.equal(q_same[:, 0], q_same[:, 2])  # heads 0 and 2 read set 0
    assert not torch.allclose(q_same[:, 0], q_same[:, 3])  # head 3 reads set 1
    with pytest.raises(ValueError, match="k must have 2 heads and q a multiple of 2"):
        fope(torch.randn(1, 3, 5, 8), k)


def test_interleaved_layout_equals_half_split_on_permuted_features():
    torch.manual_seed(3)
    dim = 16
    half = FourierRotaryEmbedding(dim, 2, max_position_embeddings=40, rotary_dim=12)
    inter = FourierRotaryEmbedding(dim, 2, max_position_embeddings=40, rotary_dim=12, layout="interleaved")
    inter.load_state_dict(half.state_dict())
    order = permute_for_interleaved(torch.arange(dim, dtype=torch.float64), 1, rotary_dim=12).long()
    q, k = torch.randn(2, 2, 30, dim), torch.randn(2, 2, 30, dim)
    for a, b in zip(inter(q[..., order], k[..., order]), half(q, k)):
        torch.testing.assert_close(a, b[..., order], rtol=1e-6, atol=1e-6)


def test_float64_angles_are_exact_far_out():
    """At position 2**40 + 3 a float64 product m * theta is off by ~1e-4 rad; FoPE's angles are RoPE's
    exact ones, so the float64 module matches 40-digit angles to float64 rounding."""
    torch.manual_seed(4)
    fope = FourierRotaryEmbedding(8, 1, max_position_embeddings=1000, init_factor=0.2).double()
    positions = [2**40 + 3, 2**52 + 1]
    q = torch.randn(1, 1, 2, 8, dtype=torch.float64)
    q_out, _ = fope(q, q, torch.tensor([positions]))
    C, S = fope.cos_coef.detach(), fope.sin_coef.detach()
    want = vllm_fope(q[0], positions, fope.inv_freq.tolist(), C, S, 1)
    torch.testing.assert_close(q_out[0], want, rtol=1e-9, atol=1e-9)
    theta = fope.inv_freq[1].item()  # 10000 ** -0.25 (the first, 1.0, multiplies exactly)
    naive = math.cos((2**40 + 3) * theta)
    assert abs(naive - exact_cos_sin(2**40 + 3, theta)[0]) > 1e-7  # what exact angles buy


def test_gradcheck_through_queries_keys_and_coefficients():
    torch.manual_seed(5)
    fope = FourierRotaryEmbedding(8, 2, max_position_embeddings=20, init_factor=0.3).double()
    q = torch.randn(1, 2, 4, 8, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 2, 4, 8, dtype=torch.float64, requires_grad=True)
    c = fope.cos_coef.detach().clone().requires_grad_(True)
    s = fope.sin_coef.detach().clone().requires_grad_(True)
    pos = torch.tensor([[0, 3, 11, 40]])

    def run(a, b, cos_coef, sin_coef):
        return torch.func.functional_call(fope, {"cos_coef": cos_coef, "sin_coef": sin_coef}, (a, b, pos))

    assert torch.autograd.gradcheck(run, (q, k, c, s))


def test_fope_in_the_reference_model_trains_its_coefficients():
    model = TinyLM(ModelConfig(scheme="fope", d_model=64, n_heads=2, n_layers=2, max_len=64))
    fope = model.scheme
    assert isinstance(fope, FourierRotaryEmbedding)
    assert fope.max_position_embeddings == 64 and fope.cos_coef.shape[0] == 2
    idx = torch.randint(0, 256, (2, 80))
    logits = model(idx)
    changed = idx.clone()
    changed[:, 70:] = (changed[:, 70:] + 1) % 256
    torch.testing.assert_close(model(changed)[:, :70], logits[:, :70], rtol=0, atol=0)  # causal
    logits.sum().backward()
    assert fope.cos_coef.grad is not None and fope.cos_coef.grad.abs().sum() > 0
    assert fope.sin_coef.grad is not None and fope.sin_coef.grad.abs().sum() > 0
    assert {"cos_coef", "sin_coef"} <= {name.split(".")[-1] for name in model.state_dict()}


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (dict(num_inv_freq=9), ValueError, "num_inv_freq must be <= 8"),
        (dict(num_inv_freq=-1), ValueError, "num_inv_freq must be >= 0"),
        (dict(max_position_embeddings=0), ValueError, "max_position_embeddings must be >= 1"),
        (dict(separate_heads=1), TypeError, "separate_heads must be True or False"),
        (dict(init_factor=-0.1), ValueError, "init_factor must be >= 0"),
        (dict(num_heads=0), ValueError, "num_heads must be >= 1"),
        (dict(rotary_dim=5), ValueError, "rotary_dim must be even"),
        (dict(layout="gptj"), ValueError, "layout must be one of"),
    ],
)
def test_bad_arguments_are_refused_by_name(kwargs, error, match):
    with pytest.raises(error, match=match):
        FourierRotaryEmbedding(**{"head_dim": 16, **kwargs})


def test_bad_calls_are_refused_by_name():
    fope = FourierRotaryEmbedding(16, 1)
    q = torch.randn(1, 1, 3, 16)
    with pytest.raises(TypeError, match="position_ids must have an integer dtype"):
        fope(q, q, torch.tensor([[0.0, 1.0, 2.0]]))
    with pytest.raises(ValueError, match="k has head_dim 8"):
        fope(q, torch.randn(1, 1, 3, 8))


def test_no_kept_frequency_is_the_identity():
    fope = FourierRotaryEmbedding(8, 1, max_position_embeddings=2)  # no period shorter than 2 tokens
    assert fope.kept_frequencies == 0
    q = torch.randn(1, 1, 4, 8)
    q_out, k_out = fope(q, q)
    assert torch.equal(q_out, q) and torch.equal(k_out, q)


def test_a_bf16_cast_rounds_the_coefficients_not_the_angles():
    """model.to(bfloat16) casts the learned coefficients (they are weights) but not the frequencies or
    their exact phase table: the tables are those of a float32 module with the bf16 coefficients."""
    torch.manual_seed(6)
    fope = FourierRotaryEmbedding(16, 2, max_position_embeddings=64, init_factor=0.2)
    half = copy.deepcopy(fope).to(torch.bfloat16)
    assert half.cos_coef.dtype == torch.bfloat16 and half.inv_freq.dtype == torch.float64
    twin = copy.deepcopy(fope)
    with torch.no_grad():
        twin.cos_coef.copy_(half.cos_coef.float())
        twin.sin_coef.copy_(half.sin_coef.float())
    pos = torch.arange(5000, 5040).view(1, -1)
    for got, want in zip(half.cos_sin(pos), twin.cos_sin(pos)):
        assert got.dtype == torch.float32 and torch.equal(got, want)
    q = torch.randn(1, 2, 40, 16).bfloat16()
    q_out, _ = half(q, q, pos)
    assert q_out.dtype == torch.bfloat16
    torch.testing.assert_close(q_out, twin(q.float(), q.float(), pos)[0].bfloat16(), rtol=1e-2, atol=1e-2)
