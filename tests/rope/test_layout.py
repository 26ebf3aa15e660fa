"""Half-split vs interleaved: a checkpoint trained with Meta's interleaved rotation runs with the
half-split rotation after permuting its q/k projection rows, with the same attention scores."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc.rope import RotaryEmbedding, permute_for_half_split, permute_for_interleaved
from posenc.rope.tables import rope_inv_freq

SETTINGS = settings(max_examples=15, deadline=None)


def meta_rotate(x: torch.Tensor, positions: torch.Tensor, base: float) -> torch.Tensor:
    """Meta's original Llama rotation: consecutive pairs as complex numbers times ``exp(i m theta)``.

    x: (batch, seq, heads, head_dim) as in Meta's code; positions: (seq,).
    """
    head_dim = x.shape[-1]
    theta = rope_inv_freq(head_dim, base)  # (hd/2,) float64
    freqs_cis = torch.polar(
        torch.ones(len(positions), head_dim // 2, dtype=torch.float64), positions.double()[:, None] * theta
    )  # (S, hd/2) complex128
    pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], head_dim // 2, 2))
    return torch.view_as_real(pairs * freqs_cis[None, :, None, :]).flatten(-2)


def hf_conversion_permute(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """The row permutation of Hugging Face's Llama conversion script, written out for comparison."""
    rows, cols = w.shape
    return w.view(n_heads, rows // n_heads // 2, 2, cols).transpose(1, 2).reshape(rows, cols)


@SETTINGS
@given(
    n_heads=st.integers(1, 4),
    kv_div=st.sampled_from([1, 2, 4]),
    half_dim=st.integers(1, 16),
    d_model=st.integers(4, 48),
    seq=st.integers(1, 12),
    base=st.sampled_from([100.0, 1e4, 5e5]),
    start=st.integers(0, 10_000),
    seed=st.integers(0, 99),
)
def test_interleaved_on_original_weights_equals_half_split_on_permuted(
    n_heads, kv_div, half_dim, d_model, seq, base, start, seed
):
    kv_heads = max(1, n_heads // kv_div) if n_heads % kv_div == 0 else n_heads  # GQA when divisible
    head_dim = 2 * half_dim
    gen = torch.Generator().manual_seed(seed)
    wq = torch.randn(n_heads * head_dim, d_model, generator=gen) / d_model**0.5
    wk = torch.randn(kv_heads * head_dim, d_model, generator=gen) / d_model**0.5
    x = torch.randn(2, seq, d_model, generator=gen)
    positions = torch.arange(start, start + seq)

    def heads(w, h):  # (B, S, h, hd)
        return (x @ w.T).view(2, seq, h, head_dim)

    # Meta: interleaved pairs on the original weights, float64 complex arithmetic.
    q_meta = meta_rotate(heads(wq, n_heads), positions, base).transpose(1, 2)  # (B, H, S, hd)
    k_meta = meta_rotate(heads(wk, kv_heads), positions, base).transpose(1, 2)
    k_meta = k_meta.repeat_interleave(n_heads // kv_heads, dim=1)
    scores_meta = q_meta @ k_meta.transpose(-1, -2)

    # posenc: half-split rotation on permuted weights, float32.
    rope = RotaryEmbedding(head_dim, base=base, layout="half")
    q_half = heads(permute_for_half_split(wq, n_heads), n_heads)
    k_half = heads(permute_for_half_split(wk, kv_heads), kv_heads)
    q_rot, k_rot = rope(q_half, k_half, positions.unsqueeze(0), heads_first=False)
    q_rot, k_rot = q_rot.transpose(1, 2), k_rot.transpose(1, 2).repeat_interleave(n_heads // kv_heads, dim=1)
    scores_half = q_rot @ k_rot.transpose(-1, -2)
    torch.testing.assert_close(scores_half.double(), scores_meta, atol=1e-4, rtol=0)

    # posenc's interleaved layout on the original weights reproduces Meta's rotated vectors themselves.
    inter = RotaryEmbedding(head_dim, base=base, layout="interleaved")
    q_int, _ = inter(heads(wq, n_heads), heads(wk, kv_heads), positions.unsqueeze(0), heads_first=False)
    torch.testing.assert_close(q_int.double(), meta_rotate(heads(wq, n_heads), positions, base), atol=1e-5, rtol=0)


@SETTINGS
@given(n_heads=st.integers(1, 6), half_dim=st.integers(1, 12), cols=st.integers(1, 8))
def test_permutation_is_the_conversion_scripts_and_inverts(n_heads, half_dim, cols):
    w = torch.randn(n_heads * 2 * half_dim, cols)
    permuted = permute_for_half_split(w, n_heads)
    assert torch.equal(permuted, hf_conversion_permute(w, n_heads))
    assert torch.equal(permute_for_interleaved(permuted, n_heads), w)
    bias = torch.randn(n_heads * 2 * half_dim)
    assert torch.equal(permute_for_interleaved(permute_for_half_split(bias, n_heads), n_heads), bias)


def test_partial_rotary_permutes_only_the_rotated_rows():
    n_heads, head_dim, rotary_dim = 2, 12, 4
    w = torch.arange(n_heads * head_dim, dtype=torch.float32).unsqueeze(1)
    permuted = permute_for_half_split(w, n_heads, rotary_dim=rotary_dim).view(n_heads, head_dim)
    assert permuted[0].tolist() == [0, 2, 1, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    assert permuted[1].tolist() == [12, 14, 13, 15, 16, 17, 18, 19, 20, 21, 22, 23]

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1, 5, 6, generator=gen)
    wq = torch.randn(n_heads * head_dim, 6, generator=gen)
    pos = torch.arange(5).unsqueeze(0)

    def scores(rope, weight):
        q = (x @ weight.T).view(1, 5, n_heads, head_dim)
        q_rot, k_rot = rope(q, q, pos, heads_first=False)
        return q_rot.transpose(1, 2) @ k_rot.transpose(1, 2).transpose(-1, -2)

    inter = RotaryEmbedding(head_dim, rotary_dim=rotary_dim, layout="interleaved")
    half = RotaryEmbedding(head_dim, rotary_dim=rotary_dim, layout="half")
    torch.testing.assert_close(
        scores(half, permute_for_half_split(wq, n_heads, rotary_dim)), scores(inter, wq), atol=1e-4, rtol=0
    )


def test_mixing_layouts_without_the_permutation_is_wrong():
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(1, 1, 8, 16, generator=gen)
    pos = torch.arange(8).unsqueeze(0)
    a, _ = RotaryEmbedding(16, layout="half")(q, q, pos)
    b, _ = RotaryEmbedding(16, layout="interleaved")(q, q, pos)
    assert (a - b).abs().max().item() > 0.1


def test_bad_permutation_arguments_raise():
    with pytest.raises(ValueError, match="not divisible by n_heads=3"):
        permute_for_half_split(torch.zeros(8, 2), 3)
    with pytest.raises(ValueError, match="rotary_dim must be even"):
        permute_for_half_split(torch.zeros(8, 2), 1, rotary_dim=3)
