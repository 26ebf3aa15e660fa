"""Positions as users have them (padding, packing, offsets, layouts, GQA) and RoPE across a KV cache."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc.rope import (
    DynamicNTKScaling,
    LinearScaling,
    LongRoPEScaling,
    RotaryEmbedding,
    YaRNScaling,
    rope_frequencies,
)
from posenc.rope.positions import (
    position_ids_from_attention_mask,
    position_ids_from_cu_seqlens,
    position_ids_from_document_ids,
    position_ids_from_offsets,
)

SETTINGS = settings(max_examples=20, deadline=None)


def qk(batch, q_heads, kv_heads, seq, head_dim, seed=0, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    return (
        torch.randn(batch, q_heads, seq, head_dim, generator=gen, dtype=dtype),
        torch.randn(batch, kv_heads, seq, head_dim, generator=gen, dtype=dtype),
    )


# -- left padding ----------------------------------------------------------------------------------
@SETTINGS
@given(lengths=st.lists(st.integers(1, 10), min_size=1, max_size=4), pad_right=st.booleans())
def test_attention_mask_positions_count_real_tokens(lengths, pad_right):
    seq = max(lengths)
    mask = torch.zeros(len(lengths), seq, dtype=torch.long)
    for row, n in enumerate(lengths):
        if pad_right:
            mask[row, :n] = 1
        else:
            mask[row, seq - n :] = 1
    pos = position_ids_from_attention_mask(mask)
    for row, n in enumerate(lengths):
        real = pos[row][mask[row].bool()]
        assert real.tolist() == list(range(n))
        assert (pos[row][~mask[row].bool()] == 0).all()
    assert torch.equal(position_ids_from_attention_mask(mask.bool()), pos)


def test_left_padded_batch_rotates_like_each_prompt_alone():
    rope = RotaryEmbedding(16, scaling=DynamicNTKScaling(4.0, 8), max_position_embeddings=8)
    lengths, seq = [3, 12], 12
    q, k = qk(2, 2, 1, seq, 16)
    mask = torch.tensor([[0] * (seq - n) + [1] * n for n in lengths])
    q_rot, k_rot = rope(q, k, position_ids_from_attention_mask(mask))
    for row, n in enumerate(lengths):
        alone = RotaryEmbedding(16, scaling=DynamicNTKScaling(4.0, 8), max_position_embeddings=8)
        qa, ka = alone(q[row : row + 1, :, seq - n :], k[row : row + 1, :, seq - n :])
        if n <= 8:  # the batch's length (12) decides the dynamic base for every row, as in HF
            inv, _ = rope.frequencies(12)
            assert not torch.equal(inv, alone.frequencies(n)[0])
            continue
        torch.testing.assert_close(q_rot[row : row + 1, :, seq - n :], qa, atol=0, rtol=0)
        torch.testing.assert_close(k_rot[row : row + 1, :, seq - n :], ka, atol=0, rtol=0)


def test_left_padding_matches_hf_generate_positions_on_real_tokens():
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [0, 0, 0, 0, 1]])
    hf = mask.long().cumsum(-1) - 1  # what transformers' generate derives
    hf.masked_fill_(mask == 0, 1)
    ours = position_ids_from_attention_mask(mask)
    assert torch.equal(ours[mask.bool()], hf[mask.bool()])


def test_bad_masks_raise():
    with pytest.raises(ValueError, match=r"only 0/1"):
        position_ids_from_attention_mask(torch.tensor([[0, 2, 1]]))
    with pytest.raises(TypeError, match="integer or bool tensor"):
        position_ids_from_attention_mask(torch.ones(1, 3))
    with pytest.raises(ValueError, match=r"shape \(batch, seq\)"):
        position_ids_from_attention_mask(torch.ones(3, dtype=torch.long))


# -- packed documents -----------------------------------------------------------------------------------
@SETTINGS
@given(lengths=st.lists(st.integers(0, 9), min_size=1, max_size=5))
def test_cu_seqlens_positions_restart_per_document(lengths):
    cu = torch.tensor([0] + torch.tensor(lengths).cumsum(0).tolist())
    pos = position_ids_from_cu_seqlens(cu)
    assert pos.tolist() == [i for n in lengths for i in range(n)]
    doc_ids = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
    if len(doc_ids):
        assert torch.equal(position_ids_from_document_ids(doc_ids), pos)


def test_packed_row_rotates_each_document_as_if_alone():
    rope = RotaryEmbedding(32, base=500000.0)
    lengths = [5, 1, 9]
    cu = torch.tensor([0, 5, 6, 15])
    q, k = qk(1, 4, 2, 15, 32, seed=3)
    q_rot, k_rot = rope(q, k, position_ids_from_cu_seqlens(cu).unsqueeze(0))
    start = 0
    for n in lengths:
        qa, ka = rope(q[:, :, start : start + n], k[:, :, start : start + n])
        assert torch.equal(q_rot[:, :, start : start + n], qa) and torch.equal(k_rot[:, :, start : start + n], ka)
        start += n


def test_document_ids_restart_on_every_change_per_row():
    doc = torch.tensor([[7, 7, 2, 2, 2, 7], [1, 1, 1, 1, 1, 1]])
    assert position_ids_from_document_ids(doc).tolist() == [[0, 1, 0, 1, 2, 0], [0, 1, 2, 3, 4, 5]]


def test_bad_cu_seqlens_raise():
    with pytest.raises(ValueError, match="start at 0"):
        position_ids_from_cu_seqlens(torch.tensor([1, 4]))
    with pytest.raises(ValueError, match="non-decreasing"):
        position_ids_from_cu_seqlens(torch.tensor([0, 4, 2]))
    with pytest.raises(TypeError, match="integer or bool"):
        position_ids_from_cu_seqlens(torch.tensor([0.0, 4.0]))


# -- offsets, explicit positions, layouts, GQA -------------------------------------------------------------
@SETTINGS
@given(
    seq=st.integers(1, 8),
    offset=st.integers(0, 5000),
    q_heads=st.sampled_from([1, 2, 4, 8]),
    group=st.sampled_from([1, 2, 4]),
)
def test_offset_explicit_positions_and_both_layouts_agree(seq, offset, q_heads, group):
    kv_heads = max(1, q_heads // group)
    rope = RotaryEmbedding(16, rotary_dim=12)
    q, k = qk(2, q_heads, kv_heads, seq, 16, seed=seq)
    by_offset = rope(q, k, offset=offset)
    explicit = rope(q, k, torch.arange(offset, offset + seq))
    per_row = rope(q, k, offset=torch.tensor([offset, offset]))
    seq_first = rope(q.transpose(1, 2), k.transpose(1, 2), offset=offset, heads_first=False)
    for other in (explicit, per_row, (seq_first[0].transpose(1, 2), seq_first[1].transpose(1, 2))):
        assert torch.equal(by_offset[0], other[0]) and torch.equal(by_offset[1], other[1])
    # GQA: every kv head is rotated exactly as a lone head would be
    for h in range(kv_heads):
        _, alone = rope(q[:, :1], k[:, h : h + 1], offset=offset)
        assert torch.equal(by_offset[1][:, h : h + 1], alone)


def test_per_row_offsets_decode_a_left_padded_batch():
    mask = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
    offsets = mask.sum(-1)  # real tokens already cached per row
    assert position_ids_from_offsets(offsets, 2).tolist() == [[2, 3], [4, 5]]
    extended = torch.cat((mask, torch.ones(2, 2, dtype=torch.long)), dim=1)
    assert torch.equal(position_ids_from_attention_mask(extended)[:, -2:], position_ids_from_offsets(offsets, 2))
    with pytest.raises(ValueError, match="offsets must be >= 0"):
        position_ids_from_offsets(torch.tensor([-1]), 2)


def test_forward_argument_errors():
    rope = RotaryEmbedding(8)
    q, k = qk(1, 1, 1, 3, 8)
    with pytest.raises(ValueError, match="not both"):
        rope(q, k, torch.arange(3), offset=torch.tensor([1]))
    with pytest.raises(TypeError, match="heads_first must be True or False"):
        rope(q, k, heads_first="no")


# -- across a KV cache ---------------------------------------------------------------------------------------
def incremental(rope, q, k, prompt):
    """Prefill ``prompt`` tokens, then decode the rest one token at a time with offsets."""
    q_parts, k_parts = [], []
    qp, kp = rope(q[:, :, :prompt], k[:, :, :prompt])
    q_parts.append(qp)
    k_parts.append(kp)
    for t in range(prompt, q.shape[2]):
        qt, kt = rope(q[:, :, t : t + 1], k[:, :, t : t + 1], offset=t)
        q_parts.append(qt)
        k_parts.append(kt)
    return torch.cat(q_parts, dim=2), torch.cat(k_parts, dim=2)


@pytest.mark.parametrize("scaling", [None, LinearScaling(4.0), YaRNScaling(8.0, 16)])
def test_static_scalings_give_the_same_keys_incrementally(scaling):
    rope = RotaryEmbedding(16, scaling=scaling, max_position_embeddings=16)
    q, k = qk(1, 2, 1, 40, 16)
    one_pass = rope(q, k)
    step = incremental(rope, q, k, prompt=10)
    assert torch.equal(one_pass[0], step[0]) and torch.equal(one_pass[1], step[1])


@pytest.mark.parametrize(
    "scaling", [DynamicNTKScaling(4.0, 16), LongRoPEScaling([1.0] * 8, [4.0 + i for i in range(8)], 16, factor=4.0)]
)
def test_dynamic_types_drift_across_a_cache_unless_frozen(scaling):
    rope = RotaryEmbedding(16, scaling=scaling, max_position_embeddings=16)
    total, prompt = 40, 10
    q, k = qk(1, 2, 1, total, 16, seed=5)

    # Unfrozen: each call picks frequencies by its own length, so the prompt's cached keys were
    # rotated with the short/default frequencies and the decode steps past 16 with others.
    one_pass = rope(q, k)
    step = incremental(rope, q, k, prompt)
    assert not torch.allclose(step[1][:, :, :prompt], one_pass[1][:, :, :prompt], atol=1e-3)
    # ... which breaks "scores depend on distance only": with the same vector at every position,
    # pairs at the same distance must score the same, and across the drifting cache they do not.
    same_q, same_k = q[:, :, :1].expand(1, 2, total, 16), k[:, :, :1].expand(1, 1, total, 16)
    sq, sk = incremental(rope, same_q, same_k, prompt)
    near_start = (sq[:, :, 12] * sk[:, :, 2]).sum(-1)  # distance 10, key cached at prefill
    near_end = (sq[:, :, 39] * sk[:, :, 29]).sum(-1)  # distance 10, both decoded late
    assert (near_start - near_end).abs().max().item() > 1e-3

    # Frozen at the final length: one set of frequencies for the whole generation.
    rope.freeze_frequencies(total)
    frozen_pass = rope(q, k)
    frozen_step = incremental(rope, q, k, prompt)
    assert torch.equal(frozen_pass[0], frozen_step[0]) and torch.equal(frozen_pass[1], frozen_step[1])
    torch.testing.assert_close(frozen_pass[0], one_pass[0], atol=0, rtol=0)  # = the one-pass answer
    inv, factor = rope_frequencies(scaling, 16, 10000.0, total)
    assert torch.equal(rope.frequencies(3)[0], inv) and rope.attention_factor == factor

    # Frozen, the same pairs score the same.
    fq, fk = incremental(rope, same_q, same_k, prompt)
    torch.testing.assert_close(
        (fq[:, :, 12] * fk[:, :, 2]).sum(-1), (fq[:, :, 39] * fk[:, :, 29]).sum(-1), atol=1e-5, rtol=0
    )

    # Casting keeps the frozen frequencies exact; unfreezing restores the per-call behaviour.
    rope.to(torch.bfloat16)
    assert torch.equal(rope.inv_freq, inv.float())
    rope.unfreeze_frequencies()
    rope.float()
    assert rope.frozen_seq_len is None
    restored = rope(q, k)
    assert torch.equal(restored[0], one_pass[0]) and torch.equal(restored[1], one_pass[1])


def test_dynamic_per_call_tables_are_exact_at_long_positions_in_half_precision_models():
    rope = RotaryEmbedding(32, scaling=DynamicNTKScaling(2.0, 1024), max_position_embeddings=1024)
    rope.to(torch.bfloat16)
    positions = torch.tensor([[0, 500_000, 1_999_999]])
    cos, sin = rope.cos_sin(positions)
    inv, _ = rope_frequencies(rope.scaling, 32, 10000.0, 2_000_000)
    angles = positions.double()[..., None] * inv
    assert cos.dtype == torch.float32
    torch.testing.assert_close(cos.double(), angles.cos(), atol=2e-7, rtol=0)
    torch.testing.assert_close(sin.double(), angles.sin(), atol=2e-7, rtol=0)


def test_freeze_argument_is_validated():
    with pytest.raises(ValueError, match="seq_len must be >= 1"):
        RotaryEmbedding(8).freeze_frequencies(0)
