"""Axial RoPE and RoPE-Mixed: the mathematics (relative coordinates, norms, layouts, exact angles,
gradients, the 1-D limit), the conventions of FLUX, timm/EVA-02 and DINOv3, and bad input."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc.rope import RotaryEmbedding, apply_rotary, permute_for_half_split
from posenc.rope.axial import (
    AxialRotaryEmbedding,
    MixedRotaryEmbedding,
    exact_integer_limit,
    grid_coordinates,
    mixed_initial_frequencies,
    normalized_grid_coordinates,
)
from posenc.rope.axial_scaling import AxialInterpolation

# 2*pi to 60 digits, for an exact reduction of coordinate * frequency in the reference
TWO_PI = 2 * Fraction("3.14159265358979323846264338327950288419716939937510582097494")


def loop_reference(x, coords, axes_dim, bases, layout, scale=1.0):
    """Rotate float64 ``x`` (seq, head_dim) pair by pair with Python floats, the formula written out."""
    out = x.clone()
    seq, _ = x.shape
    r = sum(axes_dim)
    for s in range(seq):
        pair = 0
        for a, (d, b) in enumerate(zip(axes_dim, bases)):
            for i in range(d // 2):
                angle = float(coords[s][a]) * scale * b ** (-2 * i / d)
                j, m = (pair, pair + r // 2) if layout == "half" else (2 * pair, 2 * pair + 1)
                u, v = float(x[s, j]), float(x[s, m])
                out[s, j] = u * math.cos(angle) - v * math.sin(angle)
                out[s, m] = u * math.sin(angle) + v * math.cos(angle)
                pair += 1
    return out


def scores(module, q, k, cq, ck):
    qr, _ = module(q, q, cq)
    _, kr = module(k, k, ck)
    return qr @ kr.transpose(-1, -2)


# -- the definition ------------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rotation_equals_the_formula_pair_by_pair(layout):
    axes, bases = (4, 6, 2), (10000.0, 100.0, 7.5)
    m = AxialRotaryEmbedding(16, axes, bases, rotary_dim=12, layout=layout)
    x = torch.randn(1, 1, 5, 16, dtype=torch.float64)
    coords = torch.tensor([[0, 0, 0], [1, 2, 3], [5, -4, 9], [300, 7, 1], [2, 2, 2]])
    got, _ = m(x, x, coords)
    want = loop_reference(x[0, 0], coords.tolist(), axes, bases, layout)
    torch.testing.assert_close(got[0, 0], want, rtol=0, atol=1e-12)
    assert torch.equal(got[..., 12:], x[..., 12:])  # past rotary_dim: untouched


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_one_axis_is_1d_rope_bit_for_bit(layout):
    one = AxialRotaryEmbedding(32, (32,), 500000.0, layout=layout)
    rope = RotaryEmbedding(32, base=500000.0, layout=layout)
    q, k = torch.randn(2, 3, 9, 32), torch.randn(2, 1, 9, 32)
    for start in (0, 1_000_000):
        positions = torch.arange(start, start + 9)
        a = one(q, k, positions.unsqueeze(-1))
        b = rope(q, k, position_ids=positions.unsqueeze(0))
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_grid_coordinates_are_row_major_with_offsets():
    assert grid_coordinates((2, 3)).tolist() == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]
    assert grid_coordinates((1, 2), offset=(5, 10)).tolist() == [[5, 10], [5, 11]]
    assert grid_coordinates((2, 2, 2)).shape == (8, 3)


# -- invariances ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("shift", [7, -3, 100_000])
def test_scores_depend_only_on_coordinate_differences_along_each_axis(axis, shift):
    m = AxialRotaryEmbedding(32, (8, 12, 12), layout="interleaved")
    q, k = torch.randn(1, 2, 12, 32, dtype=torch.float64), torch.randn(1, 2, 12, 32, dtype=torch.float64)
    cq = grid_coordinates((1, 3, 4))
    ck = grid_coordinates((2, 2, 3))
    moved = torch.zeros(3, dtype=torch.int64)
    moved[axis] = shift
    base = scores(m, q, k, cq, ck)
    torch.testing.assert_close(scores(m, q, k, cq + moved, ck + moved), base, rtol=1e-9, atol=1e-9)
    # and the scores do read the coordinates: moving the queries alone changes them
    assert (scores(m, q, k, cq + moved, ck) - base).abs().max() > 1e-3


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_norms_are_preserved(layout):
    m = AxialRotaryEmbedding(24, (8, 8, 8), (10.0, 100.0, 1e4), layout=layout)
    q = torch.randn(3, 2, 20, 24, dtype=torch.float64)
    coords = torch.randint(-10_000, 10_000, (3, 20, 3))
    qr, kr = m(q, q, coords)
    torch.testing.assert_close(qr.norm(dim=-1), q.norm(dim=-1), rtol=1e-13, atol=0)


def test_layouts_give_the_same_scores_after_the_weight_permutation():
    heads, head_dim, rotary, width = 2, 16, 12, 10
    wq, wk = (
        torch.randn(heads * head_dim, width, dtype=torch.float64),
        torch.randn(heads * head_dim, width, dtype=torch.float64),
    )
    x = torch.randn(1, 6, width, dtype=torch.float64)
    coords = grid_coordinates((2, 3), offset=(4, 1))
    per_layout = {}
    for layout, (pq, pk) in {
        "interleaved": (wq, wk),
        "half": (permute_for_half_split(wq, heads, rotary), permute_for_half_split(wk, heads, rotary)),
    }.items():
        m = AxialRotaryEmbedding(head_dim, (4, 8), rotary_dim=rotary, layout=layout)
        q = (x @ pq.T).view(1, 6, heads, head_dim).transpose(1, 2)
        k = (x @ pk.T).view(1, 6, heads, head_dim).transpose(1, 2)
        qr, kr = m(q, k, coords)
        per_layout[layout] = qr @ kr.transpose(-1, -2)
    torch.testing.assert_close(per_layout["half"], per_layout["interleaved"], rtol=1e-12, atol=1e-12)


# -- precision ----------------------------------------------------------------------------------------
def exact_cos_sin(coordinate: int, frequency: float):
    x = Fraction(coordinate) * Fraction(frequency)
    reduced = float(x - TWO_PI * math.floor(x / TWO_PI))
    return math.cos(reduced), math.sin(reduced)


def test_tables_are_exact_at_large_grids():
    m = AxialRotaryEmbedding(16, (8, 8), 10000.0)
    coords = torch.tensor([[2**40 + 3, 5], [123_456_789, 2**33 - 1], [-(2**35), 2**21 + 1]])
    cos, sin = m.cos_sin(coords)  # float32 tables
    freqs = m.inv_freq.tolist()
    axis = m.axis_of_pair.tolist()
    worst = 0.0
    for s, row in enumerate(coords.tolist()):
        for p, f in enumerate(freqs):
            c, si = exact_cos_sin(row[axis[p]], f)
            worst = max(worst, abs(float(cos[s, p]) - c), abs(float(sin[s, p]) - si))
    assert worst < 2e-7  # float32 rounding of an exact value
    # the hazard this guards against: the same angles formed in float32 are wrong by far more
    naive = (coords[:, :1].float() * m.axis_freqs[0].float()).cos()
    exact = torch.tensor([[exact_cos_sin(int(row[0]), f)[0] for f in m.axis_freqs[0].tolist()] for row in coords])
    assert (naive.double() - exact).abs().max() > 1e-2


def test_float64_inputs_get_float64_tables():
    m = AxialRotaryEmbedding(8, (4, 4))
    x = torch.randn(1, 1, 1, 8, dtype=torch.float64)
    coords = torch.tensor([[3_000_017, 11]])
    got, _ = m(x, x, coords)
    want = loop_reference(x[0, 0], coords.tolist(), (4, 4), (10000.0, 10000.0), "half")
    torch.testing.assert_close(got[0, 0], want, rtol=0, atol=1e-9)


def test_gradcheck():
    m = AxialRotaryEmbedding(8, (2, 6), rotary_dim=8, layout="interleaved")
    q = torch.randn(1, 2, 3, 8, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 1, 3, 8, dtype=torch.float64, requires_grad=True)
    coords = torch.tensor([[0, 1], [4, 2], [9, 9]])
    assert torch.autograd.gradcheck(lambda a, b: m(a, b, coords), (q, k))


def test_tables_formed_once_and_applied_per_layer_equal_the_module():
    m = AxialRotaryEmbedding(16, (4, 6, 6), layout="interleaved")
    coords = grid_coordinates((2, 3, 4))
    q, k = torch.randn(2, 4, 24, 16), torch.randn(2, 2, 24, 16)
    cos, sin = m.cos_sin(coords)
    a = apply_rotary(q, k, cos, sin, layout=m.layout, rotary_dim=m.rotary_dim)
    b = m(q, k, coords)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_sequence_first_layout_and_batched_coordinates():
    m = AxialRotaryEmbedding(8, (4, 4))
    q = torch.randn(2, 5, 3, 8)  # (batch, seq, heads, head_dim)
    coords = torch.randint(0, 50, (2, 5, 2))
    a, _ = m(q, q, coords, heads_first=False)
    b, _ = m(q.transpose(1, 2), q.transpose(1, 2), coords)
    assert torch.equal(a, b.transpose(1, 2))
    c, _ = m(q[1:].transpose(1, 2), q[1:].transpose(1, 2), coords[1])
    assert torch.equal(b[1:], c)


# -- the conventions of the models people run ------------------------------------------------------------
def rotate_interleaved_full(x, cos_full, sin_full):
    """x * cos + rot(x) * sin with full-width tables whose entries repeat per pair (FLUX, timm)."""
    rot = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    return x * cos_full + rot * sin_full


def test_flux_convention_per_axis_tables_concatenated_and_interleaved():
    axes, theta = (4, 6, 6), 10000.0
    ids = torch.cat((torch.zeros(2, 3), torch.cat((torch.zeros(6, 1), grid_coordinates((2, 3)).double()), 1)))
    cos_parts, sin_parts = [], []
    for a, d in enumerate(axes):  # FLUX's per-axis 1-D table in float64, each pair's value twice
        freqs = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
        angle = torch.outer(ids[:, a].double(), freqs)
        cos_parts.append(angle.cos().repeat_interleave(2, -1))
        sin_parts.append(angle.sin().repeat_interleave(2, -1))
    x = torch.randn(8, 16, dtype=torch.float64)
    want = rotate_interleaved_full(x, torch.cat(cos_parts, -1), torch.cat(sin_parts, -1))
    m = AxialRotaryEmbedding(16, axes, theta, layout="interleaved")
    got, _ = m(x.view(1, 1, 8, 16), x.view(1, 1, 8, 16), ids.long())
    torch.testing.assert_close(got[0, 0], want, rtol=0, atol=1e-12)


def test_eva02_convention_and_its_resize_is_interpolation():
    head_dim, temperature, feat, ref = 16, 10000.0, (6, 4), (3, 2)
    bands = 1.0 / temperature ** (torch.arange(head_dim // 4, dtype=torch.float64) / (head_dim // 4))
    # timm's non-pixel grid: arange per axis, times ref / feat when the grid changed ('ij' order)
    t = [torch.arange(s, dtype=torch.float64) * r / f for s, f, r in zip(feat, feat, ref)]
    grid = torch.stack(torch.meshgrid(*t, indexing="ij"), dim=-1).reshape(-1, 2, 1)
    angle = (grid * bands).reshape(-1, head_dim // 2)  # [h bands..., w bands...]
    x = torch.randn(24, head_dim, dtype=torch.float64)
    want = rotate_interleaved_full(x, angle.cos().repeat_interleave(2, -1), angle.sin().repeat_interleave(2, -1))
    scaling = AxialInterpolation(tuple(f / r for f, r in zip(feat, ref)))
    m = AxialRotaryEmbedding(head_dim, (8, 8), temperature, layout="interleaved", scaling=scaling)
    got, _ = m(x.view(1, 1, 24, head_dim), x.view(1, 1, 24, head_dim), grid_coordinates(feat))
    torch.testing.assert_close(got[0, 0], want, rtol=0, atol=1e-12)


def test_dinov3_convention_normalized_coordinates_periods_and_half_split():
    head_dim, base, sizes = 16, 100.0, (3, 5)
    coords = normalized_grid_coordinates(sizes)
    # DINOv3: patch centres in [-1, 1], angle 2*pi*x/period, period = base ** (2j / (D/2)), tiled halves
    j = torch.arange(head_dim // 4, dtype=torch.float64)
    periods = base ** (2 * j / (head_dim // 2))
    angle = (2 * math.pi * coords.unsqueeze(-1) / periods).reshape(-1, head_dim // 2).tile(2)
    x = torch.randn(15, head_dim, dtype=torch.float64)
    half = torch.cat((-x[..., head_dim // 2 :], x[..., : head_dim // 2]), -1)
    want = x * angle.cos() + half * angle.sin()
    m = AxialRotaryEmbedding(head_dim, (8, 8), base, layout="half", frequency_scale=2 * math.pi)
    got, _ = m(x.view(1, 1, 15, head_dim), x.view(1, 1, 15, head_dim), coords)
    torch.testing.assert_close(got[0, 0], want, rtol=0, atol=1e-12)
    assert coords[0].tolist() == pytest.approx([2 * 0.5 / 3 - 1, 2 * 0.5 / 5 - 1])
    assert normalized_grid_coordinates(sizes, "max")[-1].tolist() == pytest.approx([2 * 2.5 / 5 - 1, 2 * 4.5 / 5 - 1])


# -- property tests: correct against the loop reference, or a clear typed error -----------------------
PROPERTY = settings(max_examples=40, deadline=None)


@PROPERTY
@given(
    axes=st.lists(st.sampled_from([2, 4, 6]), min_size=1, max_size=3),
    extra=st.sampled_from([0, 2]),
    layout=st.sampled_from(["half", "interleaved"]),
    base=st.sampled_from([10.0, 100.0, 10000.0]),
    seq=st.integers(1, 3),
    integer=st.booleans(),
    data=st.data(),
)
def test_any_grid_rotates_as_the_formula(axes, extra, layout, base, seq, integer, data):
    rotary = sum(axes)
    m = AxialRotaryEmbedding(rotary + extra, axes, base, rotary_dim=rotary, layout=layout)
    if integer:
        values = st.integers(-(2**20), 2**20)
    else:
        values = st.floats(-1000.0, 1000.0, allow_nan=False)
    coords = data.draw(st.lists(st.lists(values, min_size=len(axes), max_size=len(axes)), min_size=seq, max_size=seq))
    c = torch.tensor(coords, dtype=torch.int64 if integer else torch.float64)
    x = torch.randn(1, 1, seq, rotary + extra, dtype=torch.float64)
    got, _ = m(x, x, c)
    want = loop_reference(x[0, 0], coords, axes, (base,) * len(axes), layout)
    torch.testing.assert_close(got[0, 0], want, rtol=0, atol=1e-9)


@PROPERTY
@given(
    head_dim=st.integers(-2, 20),
    axes=st.lists(st.integers(-2, 12), min_size=0, max_size=4),
    n_coords=st.integers(0, 4),
    layout=st.sampled_from(["half", "interleaved", "rows"]),
)
def test_any_construction_and_call_is_correct_or_a_clear_error(head_dim, axes, n_coords, layout):
    try:
        m = AxialRotaryEmbedding(head_dim, axes, layout=layout)
    except (TypeError, ValueError) as error:
        assert any(word in str(error) for word in ("head_dim", "axes_dim", "layout", "rotary"))
        return
    assert sum(m.axes_dim) == m.rotary_dim == head_dim and all(d % 2 == 0 and d >= 2 for d in m.axes_dim)
    q = torch.randn(1, 1, 2, head_dim)
    try:
        out, _ = m(q, q, torch.zeros(2, n_coords, dtype=torch.int64))
    except ValueError as error:
        assert n_coords != len(axes) and "coords must have shape" in str(error)
        return
    assert n_coords == len(axes) and torch.equal(out, q)  # coordinate 0: no rotation


def test_timm_mixed_convention_column_row_coordinates_and_interleaved_pairs():
    heads, head_dim, h, w = 2, 8, 3, 4
    generator = torch.Generator().manual_seed(5)
    timm_freqs = torch.randn(2, heads, head_dim // 2, generator=generator, dtype=torch.float64)  # (axis, head, pair)
    # timm's 'xy' grid: t_x the column, t_y the row, row-major tokens; angle t_x * f_x + t_y * f_y
    t_x = torch.arange(w, dtype=torch.float64).repeat(h)
    t_y = torch.arange(h, dtype=torch.float64).repeat_interleave(w)
    angle = t_x[:, None] * timm_freqs[0][:, None, :] + t_y[:, None] * timm_freqs[1][:, None, :]  # (heads, S, P)
    x = torch.randn(1, heads, h * w, head_dim, dtype=torch.float64)
    want = rotate_interleaved_full(x[0], angle.cos().repeat_interleave(2, -1), angle.sin().repeat_interleave(2, -1))
    m = MixedRotaryEmbedding(head_dim, heads, layout="interleaved").double()
    with torch.no_grad():
        m.freqs.copy_(timm_freqs.permute(1, 2, 0))  # (head, pair, axis)
    coords = grid_coordinates((h, w)).flip(-1)  # (column, row)
    got, _ = m(x, x, coords)
    torch.testing.assert_close(got[0], want, rtol=0, atol=1e-12)


# -- bad input -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(head_dim=16, axes_dim=(4, 8)), ValueError, "sums to 12, but the rotary dimension is 16"),
        (dict(head_dim=16, axes_dim=(8, 8), rotary_dim=12), ValueError, "sums to 16.*12 \\(rotary_dim\\)"),
        (dict(head_dim=16, axes_dim=(5, 11)), ValueError, "axes_dim\\[0\\] must be an even int"),
        (dict(head_dim=16, axes_dim=(8, 0, 8)), ValueError, "axes_dim\\[1\\] must be an even int >= 2"),
        (dict(head_dim=16, axes_dim=(8.0, 8)), TypeError, "axes_dim\\[0\\] must be an int"),
        (dict(head_dim=16, axes_dim=16), TypeError, "axes_dim must be a non-empty sequence"),
        (dict(head_dim=16, axes_dim=(8, 8), base=(100.0,)), ValueError, "base must be one number or 2"),
        (dict(head_dim=16, axes_dim=(8, 8), base=(100.0, 1.0)), ValueError, "base\\[1\\] must be > 1"),
        (dict(head_dim=16, axes_dim=(8, 8), layout="rows"), ValueError, "layout must be one of"),
        (dict(head_dim=16, axes_dim=(8, 8), frequency_scale=0.0), ValueError, "frequency_scale must be > 0"),
        (dict(head_dim=16, axes_dim=(8, 8), scaling="ntk"), ValueError, "registered axial scaling"),
    ],
)
def test_bad_construction_is_refused_by_name(kwargs, error, match):
    with pytest.raises(error, match=match):
        AxialRotaryEmbedding(**kwargs)


@pytest.mark.parametrize(
    "coords, error, match",
    [
        (torch.zeros(4, 3, dtype=torch.int64), ValueError, "shape \\(\\.\\.\\., 2\\).*got shape \\(4, 3\\)"),
        (torch.zeros(4, dtype=torch.int64), ValueError, "shape \\(\\.\\.\\., 2\\)"),
        (torch.zeros(5, 2, dtype=torch.int64), ValueError, "coords must have shape \\(4, 2\\)"),
        (torch.zeros(2, 2, 2, dtype=torch.int64), ValueError, "flatten it row-major: coords.reshape\\(-1, 2\\)"),
        (torch.zeros(4, 2, dtype=torch.bool), TypeError, "bool tensor is a mask"),
        (torch.tensor([[0, 0], [0, 1], [0, 2], [0, 300]], dtype=torch.bfloat16), ValueError, "past 256 = 2\\*\\*8"),
        (torch.tensor([[0, 0], [0, 1], [0, 2], [0, 4000]], dtype=torch.float16), ValueError, "past 2048"),
        (torch.tensor([[0.0, 0], [0, 1], [0, 2], [0, 2.0**25]]), ValueError, "past 16777216 = 2\\*\\*24"),
        (torch.tensor([[0.0, 0], [0, 1], [0, 2], [0, float("nan")]]), ValueError, "must be finite"),
        ([[0, 0]] * 4, TypeError, "coords must be a torch.Tensor"),
    ],
)
def test_bad_coordinates_are_refused_by_name(coords, error, match):
    m = AxialRotaryEmbedding(8, (4, 4))
    q = torch.randn(1, 1, 4, 8)
    with pytest.raises(error, match=match):
        m(q, q, coords)


def test_exact_integer_limits():
    assert [exact_integer_limit(d) for d in (torch.bfloat16, torch.float16, torch.float32, torch.float64)] == [
        2**8,
        2**11,
        2**24,
        2**53,
    ]
    m = AxialRotaryEmbedding(8, (4, 4))
    q = torch.randn(1, 1, 2, 8)
    m(q, q, torch.tensor([[0, 256], [0, -256]], dtype=torch.bfloat16))  # at the limit: still exact


def test_wrong_head_dim_is_refused():
    m = AxialRotaryEmbedding(8, (4, 4))
    with pytest.raises(ValueError, match="head_dim 16 but this AxialRotaryEmbedding was built for head_dim=8"):
        m(torch.randn(1, 1, 2, 16), torch.randn(1, 1, 2, 16), grid_coordinates((1, 2)))


# -- RoPE-Mixed ------------------------------------------------------------------------------------------
def test_mixed_started_axial_is_axial():
    mixed = MixedRotaryEmbedding(16, 2, n_axes=2, base=100.0, init="axial")
    axial = AxialRotaryEmbedding(16, (8, 8), 100.0)
    q, k = torch.randn(1, 2, 6, 16), torch.randn(1, 2, 6, 16)
    coords = grid_coordinates((2, 3), offset=3)
    a, b = mixed(q, k, coords), axial(q, k, coords)
    torch.testing.assert_close(a[0], b[0], rtol=1e-5, atol=1e-5)  # the parameter is float32
    torch.testing.assert_close(a[1], b[1], rtol=1e-5, atol=1e-5)


def test_mixed_random_start_is_the_papers():
    f = mixed_initial_frequencies(3, (8, 8), base=10.0, init="random", generator=torch.Generator().manual_seed(0))
    assert f.shape == (3, 8, 2)
    magnitude = 10.0 ** (-2 * torch.arange(4, dtype=torch.float64) / 8)
    for h in range(3):
        first, second = f[h, :4], f[h, 4:]
        torch.testing.assert_close(first.norm(dim=-1), magnitude)
        torch.testing.assert_close(second.norm(dim=-1), magnitude)
        # one angle per head for the first block, that angle + pi/2 for the second
        phi = torch.atan2(first[:, 1], first[:, 0])
        torch.testing.assert_close(phi, phi[:1].expand(4))
        torch.testing.assert_close((first * second).sum(-1), torch.zeros(4, dtype=torch.float64), atol=1e-15, rtol=0)
        assert float(first[0, 0] * second[0, 1] - first[0, 1] * second[0, 0]) > 0  # counter-clockwise
    assert not torch.allclose(f[0], f[1])  # every head its own turn


def test_mixed_random_start_in_three_axes_is_a_rotation():
    f = mixed_initial_frequencies(1, (4, 4, 4), init="random", generator=torch.Generator().manual_seed(1))
    directions = f[0, [0, 2, 4]] / f[0, [0, 2, 4]].norm(dim=-1, keepdim=True)
    torch.testing.assert_close(directions @ directions.T, torch.eye(3, dtype=torch.float64))
    assert float(torch.linalg.det(directions)) == pytest.approx(1.0)


@pytest.mark.parametrize("shift", [(5, 0), (0, -7), (11, 11), (1000, -300)])
def test_mixed_scores_depend_only_on_coordinate_differences(shift):
    m = MixedRotaryEmbedding(16, 2, generator=torch.Generator().manual_seed(2)).double()
    q, k = torch.randn(1, 2, 6, 16, dtype=torch.float64), torch.randn(1, 2, 6, 16, dtype=torch.float64)
    cq, ck = grid_coordinates((2, 3)), grid_coordinates((3, 2))
    t = torch.tensor(shift)
    base = scores(m, q, k, cq, ck)
    torch.testing.assert_close(scores(m, q, k, cq + t, ck + t), base, rtol=1e-9, atol=1e-9)
    assert (scores(m, q, k, cq + t, ck) - base).abs().max() > 1e-3


def test_mixed_preserves_norms_and_sees_diagonals():
    m = MixedRotaryEmbedding(16, 2, generator=torch.Generator().manual_seed(3)).double()
    q = torch.randn(1, 2, 2, 16, dtype=torch.float64)
    coords = torch.tensor([[3, 4], [4, 3]])  # swapped along the diagonal
    qr, _ = m(q, q, coords)
    torch.testing.assert_close(qr.norm(dim=-1), q.norm(dim=-1), rtol=1e-13, atol=0)
    # an axial pair sees (3, 4) and (4, 3) as the same set of per-axis angles; a mixed head does not
    angles = m.angles(coords)  # (heads, seq, pairs)
    assert (angles[:, 0] - angles[:, 1]).abs().max() > 1e-2


def test_mixed_gradcheck_through_the_frequencies():
    m = MixedRotaryEmbedding(8, 2, generator=torch.Generator().manual_seed(4)).double()
    q = torch.randn(1, 2, 3, 8, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 2, 3, 8, dtype=torch.float64, requires_grad=True)
    coords = torch.tensor([[0, 1], [2, 0], [1, 3]])

    def run(a, b, freqs):  # the module with ``freqs`` in place of its parameter, which gradcheck perturbs
        return torch.func.functional_call(m, {"freqs": freqs}, (a, b, coords))

    freqs = m.freqs.detach().clone().requires_grad_(True)
    assert torch.autograd.gradcheck(run, (q, k, freqs))


def test_mixed_frequencies_learn():
    torch.manual_seed(0)
    m = MixedRotaryEmbedding(8, 2)
    before = m.freqs.detach().clone()
    q, k = torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8)
    qr, kr = m(q, k, grid_coordinates((2, 2)))
    (qr @ kr.transpose(-1, -2)).square().sum().backward()
    assert m.freqs.grad is not None and m.freqs.grad.abs().sum() > 0
    torch.optim.SGD(m.parameters(), lr=0.1).step()
    assert not torch.equal(m.freqs.detach(), before)


def test_mixed_frequencies_keep_float32_through_half_precision_casts():
    m = MixedRotaryEmbedding(8, 2, generator=torch.Generator().manual_seed(6))
    start = m.freqs.detach().clone()
    for dtype in (torch.bfloat16, torch.float16):
        cast = m.to(dtype)
        assert cast.freqs.dtype == torch.float32 and torch.equal(cast.freqs.detach(), start)
        assert isinstance(cast.freqs, torch.nn.Parameter) and cast.freqs.requires_grad
    q = torch.randn(1, 2, 4, 8, dtype=torch.bfloat16)
    got, _ = m(q, q, grid_coordinates((2, 2)))
    want, _ = m.double()(q.double(), q.double(), grid_coordinates((2, 2)))
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.double(), want, rtol=1e-2, atol=1e-2)
    assert m.freqs.dtype == torch.float64  # a cast may raise their precision


def test_mixed_bad_input_is_refused_by_name():
    with pytest.raises(ValueError, match="q has 3 heads but this MixedRotaryEmbedding has frequencies for num_heads=2"):
        MixedRotaryEmbedding(8, 2)(torch.randn(1, 3, 4, 8), torch.randn(1, 3, 4, 8), grid_coordinates((2, 2)))
    with pytest.raises(ValueError, match="does not split evenly into 3 axes"):
        MixedRotaryEmbedding(8, 2, n_axes=3)
    with pytest.raises(ValueError, match="init must be one of"):
        MixedRotaryEmbedding(8, 2, init="orthogonal")
    with pytest.raises(ValueError, match="shape \\(\\.\\.\\., 2\\)"):
        MixedRotaryEmbedding(8, 2)(torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8), torch.zeros(4, 3))
