"""RoPE core: relative invariance, norm preservation, exact long-position tables, values untouched."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import RotaryEmbedding
from posenc.rope import rope_cos_sin, rope_inv_freq, rope_table, rotate_reference


def _rotate_one(rope, x, position):
    """Rotate a single head vector x (head_dim,) as if it sat at ``position``."""
    q = x.view(1, 1, 1, -1)
    out, _ = rope(q, q.clone(), position_ids=torch.tensor([[position]]))
    return out.view(-1)


@settings(max_examples=30, deadline=None)
@given(
    m=st.integers(0, 5000),
    n=st.integers(0, 5000),
    shift=st.integers(0, 20000),
    layout=st.sampled_from(["half", "interleaved"]),
    seed=st.integers(0, 2**16),
)
def test_scores_depend_only_on_relative_distance(m, n, shift, layout, seed):
    g = torch.Generator().manual_seed(seed)
    rope = RotaryEmbedding(32, layout=layout, max_position_embeddings=8)
    rope.double()
    q, k = torch.randn(32, generator=g, dtype=torch.float64), torch.randn(32, generator=g, dtype=torch.float64)
    s1 = _rotate_one(rope, q, m) @ _rotate_one(rope, k, n)
    s2 = _rotate_one(rope, q, m + shift) @ _rotate_one(rope, k, n + shift)
    assert abs((s1 - s2).item()) < 1e-5 * (1 + q.norm() * k.norm()).item()


def test_rotation_preserves_norms_and_position_zero_is_identity():
    rope = RotaryEmbedding(64)
    q, k = torch.randn(2, 4, 50, 64), torch.randn(2, 4, 50, 64)
    rq, rk = rope(q, k)
    torch.testing.assert_close(rq.norm(dim=-1), q.norm(dim=-1))
    torch.testing.assert_close(rq[:, :, 0], q[:, :, 0])
    torch.testing.assert_close(rk[:, :, 0], k[:, :, 0])


def test_half_split_pairs_rotate_by_m_theta():
    head_dim, pos = 8, 7
    rope = RotaryEmbedding(head_dim, layout="half").double()
    inv = rope_inv_freq(head_dim)
    for i in range(head_dim // 2):
        x = torch.zeros(head_dim, dtype=torch.float64)
        x[i] = 1.0  # the pair (x[i], x[i + d/2]) = (1, 0)
        out = _rotate_one(rope, x, pos)
        angle = pos * inv[i].item()
        assert out[i].item() == pytest.approx(math.cos(angle), abs=1e-12)
        assert out[i + head_dim // 2].item() == pytest.approx(math.sin(angle), abs=1e-12)


def test_interleaved_equals_half_split_after_reordering_features():
    head_dim = 16
    x = torch.randn(2, 3, 9, head_dim)
    order = torch.cat((torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)))  # interleaved -> half
    half = RotaryEmbedding(head_dim, layout="half")
    inter = RotaryEmbedding(head_dim, layout="interleaved")
    a, _ = inter(x, x)
    b, _ = half(x[..., order], x[..., order])
    torch.testing.assert_close(a[..., order], b)


def test_partial_rotary_leaves_the_tail_alone():
    rope = RotaryEmbedding(64, rotary_dim=16)
    q = torch.randn(1, 2, 10, 64)
    rq, _ = rope(q, q)
    torch.testing.assert_close(rq[..., 16:], q[..., 16:])
    assert not torch.allclose(rq[:, :, 1:, :16], q[:, :, 1:, :16])
    # frequencies use the rotary width as denominator
    torch.testing.assert_close(rope.inv_freq.double(), rope_inv_freq(16), rtol=1e-7, atol=0)


def test_offset_equals_explicit_positions_and_gqa():
    rope = RotaryEmbedding(32)
    q, k = torch.randn(2, 8, 5, 32), torch.randn(2, 2, 5, 32)  # 8 query heads, 2 kv heads
    a = rope(q, k, offset=40)
    b = rope(q, k, position_ids=torch.arange(40, 45).expand(2, 5))
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y)
    assert a[1].shape == k.shape


def test_per_row_positions_for_left_padding():
    rope = RotaryEmbedding(16)
    q = torch.randn(2, 1, 4, 16)
    pos = torch.tensor([[0, 1, 2, 3], [0, 0, 0, 1]])
    rq, _ = rope(q, q, position_ids=pos)
    row1, _ = rope(q[1:], q[1:], position_ids=pos[1:])
    torch.testing.assert_close(rq[1:], row1)


def test_precision_bound_at_one_million():
    """cos/sin at position 1,048,575 (head_dim 128, base 10000) within 1e-6 of float64."""
    pos = 1_048_575
    rope = RotaryEmbedding(128, max_position_embeddings=16)
    # the module's table rows are built by rope_cos_sin over a range of positions; build just this one
    cos, sin = rope_cos_sin(torch.tensor([pos]), rope_inv_freq(128), dtype=rope.cos_cached.dtype)
    angles = pos * rope_inv_freq(128)  # float64 reference
    assert cos.dtype == torch.float32
    assert (cos[0].double() - angles.cos()).abs().max() < 1e-6
    assert (sin[0].double() - angles.sin()).abs().max() < 1e-6
    # and the module's own cached rows agree with that function exactly
    rows = rope_cos_sin(torch.arange(16), rope_inv_freq(128))
    torch.testing.assert_close(rope.cos_cached, rows[0], atol=0, rtol=0)
    # the common float32 way is far off there, which is why the tables are built in float64
    naive = torch.tensor(float(pos)) * rope_inv_freq(128).float()
    assert (naive.cos().double() - angles.cos()).abs().max() > 1e-3


def test_cache_grows_and_matches_fresh_table():
    rope = RotaryEmbedding(16, max_position_embeddings=4)
    rope.cos_sin(torch.tensor([[100]]))
    cos, sin = rope_table(rope.cached_length, rope_inv_freq(16))
    torch.testing.assert_close(rope.cos_cached, cos, atol=0, rtol=0)
    torch.testing.assert_close(rope.sin_cached, sin, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_tables_survive_cast_at_full_precision(dtype):
    rope = RotaryEmbedding(64, max_position_embeddings=64)
    before = (rope.inv_freq.clone(), rope.cos_cached.clone(), rope.sin_cached.clone())
    rope = rope.to(dtype)
    for name, ref in zip(("inv_freq", "cos_cached", "sin_cached"), before):
        buf = getattr(rope, name)
        assert buf.dtype == torch.float32, name
        torch.testing.assert_close(buf, ref, atol=0, rtol=0)
    assert list(rope.parameters()) == [] and rope.state_dict() == {}
    q = torch.randn(1, 2, 8, 64, dtype=dtype)
    rq, _ = rope(q, q)
    assert rq.dtype == dtype


def test_reference_bf16_is_rotated_in_float32():
    x = torch.randn(1, 1, 6, 8, dtype=torch.bfloat16)
    cos, sin = rope_table(6, rope_inv_freq(8))
    out = rotate_reference(x, cos, sin)
    want = rotate_reference(x.float(), cos, sin).to(torch.bfloat16)
    torch.testing.assert_close(out, want, atol=0, rtol=0)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="head_dim.*even"):
        RotaryEmbedding(63)
    with pytest.raises(ValueError, match="rotary_dim"):
        RotaryEmbedding(64, rotary_dim=80)
    with pytest.raises(ValueError, match="layout"):
        RotaryEmbedding(64, layout="zigzag")
    rope = RotaryEmbedding(8)
    with pytest.raises(ValueError, match="head_dim=8"):
        rope(torch.randn(1, 1, 2, 16), torch.randn(1, 1, 2, 16))
    with pytest.raises(ValueError, match="4 dimensions"):
        rope(torch.randn(2, 8), torch.randn(2, 8))
    with pytest.raises(ValueError, match=">= 0"):
        rope(torch.randn(1, 1, 2, 8), torch.randn(1, 1, 2, 8), position_ids=torch.tensor([[-1, 0]]))
    with pytest.raises(ValueError, match="offset"):
        rope(torch.randn(1, 1, 2, 8), torch.randn(1, 1, 2, 8), offset=-3)
    with pytest.raises(TypeError, match="floating"):
        rope(torch.ones(1, 1, 2, 8, dtype=torch.long), torch.ones(1, 1, 2, 8, dtype=torch.long))


def test_double_raises_table_precision_and_meta_init_works():
    rope = RotaryEmbedding(16, max_position_embeddings=32).double()
    assert rope.cos_cached.dtype == torch.float64
    cos, _ = rope_table(32, rope_inv_freq(16), dtype=torch.float64)
    torch.testing.assert_close(rope.cos_cached, cos, atol=0, rtol=0)
    with torch.device("meta"):
        meta = RotaryEmbedding(16)
    assert meta.cos_cached.is_meta
    meta.to_empty(device="cpu")
    assert meta.cos_cached.dtype == torch.float32
