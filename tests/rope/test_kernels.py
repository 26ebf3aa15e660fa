"""The fused CPU C kernel against the plain PyTorch reference, through :func:`posenc.apply_rotary`:
forward and backward, both layouts, partial rotary, GQA, strided views, in-place, packed positions,
gradcheck and forward-mode AD in float64, float32 / bfloat16 / float16 / float64.

Tolerances: float32 1e-6; bfloat16 and float16 one unit in the last place of the output (the kernels
compute in float32 and round once, as the reference does, so at most the final rounding may differ).
"""

from __future__ import annotations

import math

import pytest
import torch
from kernel_cases import assert_close, make_inputs, reference

from posenc.rope import kernels
from posenc.rope.apply import apply_rotary, apply_rotary_at
from posenc.rope.kernels import cpu

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("rotary_dim", [None, 16, 2])
@pytest.mark.parametrize("inplace", [False, True])
def test_cpu_forward_matches_reference(fused_cpu, count_fused, dtype, layout, rotary_dim, inplace):
    q, k, cos, sin = make_inputs(dtype, rotary_dim=rotary_dim)
    want_q, want_k = reference(q, k, cos, sin, layout, rotary_dim)
    q_in, k_in = q.clone(), k.clone()
    got_q, got_k = apply_rotary(q_in, k_in, cos, sin, layout=layout, rotary_dim=rotary_dim, inplace=inplace)
    assert count_fused, "the dispatcher did not use the fused kernel"
    assert_close(got_q, want_q)
    assert_close(got_k, want_k)
    if inplace:
        assert got_q.data_ptr() == q_in.data_ptr() and got_k.data_ptr() == k_in.data_ptr()
    else:
        assert torch.equal(q_in, q) and torch.equal(k_in, k), "out-of-place call modified its inputs"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64], ids=str)
@pytest.mark.parametrize("head_dim,rotary_dim", [(64, None), (64, 32), (4, 2), (4, None), (2, None)])
def test_cpu_forward_is_bit_exact(fused_cpu, dtype, head_dim, rotary_dim):
    """Same operations in the same order, no fused multiply-adds: identical bits, not just close.

    Tiny rotary widths matter: there the compiler's straight-line (SLP) vectoriser would otherwise turn
    an interleaved pair into a complex multiply with fused multiply-adds."""
    q, k, cos, sin = make_inputs(dtype, seq=40, head_dim=head_dim, rotary_dim=rotary_dim)
    for layout in ("half", "interleaved"):
        got = apply_rotary(q, k, cos, sin, layout=layout, rotary_dim=rotary_dim)
        want = reference(q, k, cos, sin, layout, rotary_dim)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), layout


@pytest.mark.parametrize(
    "case",
    [
        dict(q_heads=8, kv_heads=1),  # multi-query
        dict(q_heads=6, kv_heads=6),  # plain multi-head
        dict(batch=3, table_batch=3),  # per-sample tables (packed / offset positions)
        dict(seq=1),  # decode
        dict(seq=0),  # empty
        dict(seq=300, batch=1, q_heads=32, kv_heads=8, head_dim=128),  # large enough for threads
    ],
    ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()),
)
def test_cpu_shapes(fused_cpu, count_fused, case):
    q, k, cos, sin = make_inputs(torch.float32, **case)
    got = apply_rotary(q, k, cos, sin)
    want = reference(q, k, cos, sin, "half", None)
    assert count_fused
    assert_close(got[0], want[0])
    assert_close(got[1], want[1])


def test_cpu_two_dim_tables_and_float64_tables(fused_cpu):
    q, k, cos, sin = make_inputs(torch.float32)
    want = reference(q, k, cos, sin, "half", None)
    for c, s in ((cos[0], sin[0]), (cos.double(), sin.double()), (cos, sin.double()), (cos.half(), sin)):
        if c.dtype == torch.float16:
            want = reference(q, k, c, s, "half", None)
        got = apply_rotary(q, k, c, s)
        assert_close(got[0], want[0])
        assert_close(got[1], want[1])


def test_cpu_strided_views(fused_cpu, count_fused):
    """q/k as transposed views of a (batch, seq, heads, head_dim) projection, as in attention."""
    gen = torch.Generator().manual_seed(1)
    qkv = torch.randn(2, 11, 3 * 4 * 16, generator=gen)  # (B, S, 3*H*D)
    q, k, _ = qkv.split(64, dim=-1)
    q = q.view(2, 11, 4, 16).transpose(1, 2)  # (B, H, S, D), strided
    k = k.view(2, 11, 4, 16).transpose(1, 2)
    _, _, cos, sin = make_inputs(torch.float32, seq=11, head_dim=16, rotary_dim=8)
    want = reference(q, k, cos, sin, "interleaved", 8)
    got = apply_rotary(q, k, cos, sin, layout="interleaved", rotary_dim=8)
    assert count_fused
    assert_close(got[0], want[0])
    assert_close(got[1], want[1])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_non_contiguous_last_dim_uses_strided_kernel(fused_cpu, count_fused, dtype):
    """A last dimension with stride != 1 (in q, k and the tables) takes the kernel's strided loop,
    which does the same arithmetic as the unit-stride one: still bit for bit the reference."""
    q, k, cos, sin = make_inputs(dtype, head_dim=32, rotary_dim=16)
    q_t = q.transpose(-1, -2).contiguous().transpose(-1, -2)  # last-dim stride != 1
    cos_t = cos.transpose(-1, -2).contiguous().transpose(-1, -2)
    for layout in ("half", "interleaved"):
        got = apply_rotary(q_t, k, cos_t, sin, layout=layout, rotary_dim=16)
        want = reference(q, k, cos, sin, layout, 16)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
        got = apply_rotary(
            q_t.clone(memory_format=torch.preserve_format), k, cos_t, sin, layout=layout, rotary_dim=16, inplace=True
        )
        assert torch.equal(got[0], want[0])
    assert count_fused


def test_rotation_inverse(fused_cpu):
    """The kernel's inverse flag undoes the rotation (the backward pass relies on it)."""
    q, k, cos, sin = make_inputs(torch.float64)
    kernel = kernels.cpu_kernel()
    qr, kr = torch.empty_like(q), torch.empty_like(k)
    kernel(q, k, qr, kr, cos, sin, interleaved=True, rotary_dim=32)
    back_q, back_k = torch.empty_like(q), torch.empty_like(k)
    kernel(qr, kr, back_q, back_k, cos, sin, interleaved=True, rotary_dim=32, inverse=True)
    torch.testing.assert_close(back_q, q, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(back_k, k, rtol=1e-12, atol=1e-12)


def test_positions_index_the_table(fused_cpu):
    """Packed sequences: positions restart per document and index one shared table."""
    q, k, _, _ = make_inputs(torch.float32, batch=1, seq=12)
    positions = torch.tensor([[0, 1, 2, 3, 4, 0, 1, 2, 0, 1, 2, 3]])
    angles = torch.rand(64, 16, dtype=torch.float64) * 2 * math.pi
    cos_t, sin_t = angles.cos().float().unsqueeze(0), angles.sin().float().unsqueeze(0)  # (1, rows, r/2)
    want = reference(q, k, cos_t[:, positions[0]], sin_t[:, positions[0]], "half", None)
    got_q, got_k = torch.empty_like(q), torch.empty_like(k)
    kernels.cpu_kernel()(q, k, got_q, got_k, cos_t, sin_t, interleaved=False, rotary_dim=32, positions=positions)
    assert_close(got_q, want[0])
    assert_close(got_k, want[1])


def test_float16_without_compiler_support(monkeypatch, tmp_path):
    """The bit-level float16 conversions used where the compiler has no _Float16."""
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path))
    try:
        lib = cpu._load(cpu.build(["-DPOSENC_NO_FLOAT16"]))
    except cpu.FusedKernelUnavailable as exc:
        pytest.skip(f"no C compiler here: {exc}")
    special = torch.tensor(
        [
            0.0,
            -0.0,
            1e-7,
            -3e-8,
            6e-5,
            65504.0,
            65519.0,
            65520.0,
            7e4,
            float("inf"),
            float("-inf"),
            float("nan"),
            1.0,
            -2.5,
        ]
    )
    q = torch.cat([special, torch.randn(64 - special.numel()) * 100]).view(1, 1, 4, 16)
    q16 = q.to(torch.float16)
    k16 = torch.randn(1, 1, 4, 16).to(torch.float16)
    cos = torch.ones(1, 4, 8) * torch.tensor([1.0, 0.6, -0.8, 1e-5, 0.0, 1.0, 0.3, -1.0])
    sin = (1 - cos**2).clamp(min=0).sqrt()
    got_q, got_k = torch.empty_like(q16), torch.empty_like(k16)
    cpu.rotate(lib, q16, k16, got_q, got_k, cos, sin, interleaved=False, rotary_dim=16)
    want_q, want_k = reference(q16, k16, cos, sin, "half", None)
    torch.testing.assert_close(got_q, want_q, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(got_k, want_k, rtol=0, atol=0)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_apply_rotary_at_packed_positions(fused_cpu, count_fused, layout, inplace, dtype):
    q, k, _, _ = make_inputs(dtype, batch=2, seq=9, rotary_dim=16)
    angles = torch.rand(40, 8, dtype=torch.float64) * 2 * math.pi
    cos_t, sin_t = angles.cos().float(), angles.sin().float()
    positions = torch.tensor([[0, 1, 2, 3, 0, 1, 0, 1, 2], [30, 31, 32, 33, 34, 35, 36, 37, 38]])
    want = reference(q, k, cos_t[positions], sin_t[positions], layout, 16)
    got = apply_rotary_at(q.clone(), k.clone(), cos_t, sin_t, positions, layout=layout, rotary_dim=16, inplace=inplace)
    assert count_fused
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    shared = apply_rotary_at(q, k, cos_t, sin_t, positions[0], layout=layout, rotary_dim=16)  # (seq,)
    want_shared = reference(q, k, cos_t[positions[:1]], sin_t[positions[:1]], layout, 16)
    assert torch.equal(shared[0], want_shared[0])


def test_apply_rotary_at_backward(fused_cpu):
    q, k, _, _ = make_inputs(torch.float64, batch=1, q_heads=2, kv_heads=1, seq=5, head_dim=8)
    angles = torch.rand(7, 4, dtype=torch.float64) * 2 * math.pi
    cos_t, sin_t = angles.cos(), angles.sin()
    positions = torch.tensor([[3, 4, 0, 1, 2]])
    q.requires_grad_()
    k.requires_grad_()
    out = apply_rotary_at(q, k, cos_t, sin_t, positions, layout="interleaved")
    assert type(out[0].grad_fn).__name__ == "FusedRotaryBackward"
    assert torch.autograd.gradcheck(
        lambda a, b: apply_rotary_at(a, b, cos_t, sin_t, positions, layout="interleaved"), (q, k)
    )


def test_apply_rotary_at_bad_positions():
    q, k, _, _ = make_inputs(torch.float32, batch=2, seq=4)
    table = torch.rand(10, 16)
    with pytest.raises(ValueError, match=r"positions must be < 10 .* maximum of 12"):
        apply_rotary_at(q, k, table, table, torch.tensor([[0, 1, 2, 12]]))
    with pytest.raises(ValueError, match=r"positions must be >= 0"):
        apply_rotary_at(q, k, table, table, torch.tensor([0, -1, 2, 3]))
    with pytest.raises(TypeError, match="integer dtype"):
        apply_rotary_at(q, k, table, table, torch.tensor([0.0, 1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match=r"positions must have shape \(batch or 1, seq\)"):
        apply_rotary_at(q, k, table, table, torch.tensor([[0, 1, 2]]))
    with pytest.raises(ValueError, match="cos_table and sin_table must have the same shape"):
        apply_rotary_at(q, k, table, table[:5], torch.tensor([0, 1, 2, 3]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("rotary_dim", [None, 12])
def test_cpu_backward_matches_reference(fused_cpu, dtype, layout, rotary_dim):
    q, k, cos, sin = make_inputs(dtype, rotary_dim=rotary_dim)
    gen = torch.Generator().manual_seed(5)
    gq, gk = torch.randn(q.shape, generator=gen).to(dtype), torch.randn(k.shape, generator=gen).to(dtype)
    grads = []
    for fn in (
        lambda a, b: apply_rotary(a, b, cos, sin, layout=layout, rotary_dim=rotary_dim),
        lambda a, b: reference(a, b, cos, sin, layout, rotary_dim),
    ):
        a, b = q.clone().requires_grad_(), k.clone().requires_grad_()
        out_q, out_k = fn(a, b)
        torch.autograd.backward((out_q, out_k), (gq, gk))
        grads.append((a.grad, b.grad, type(out_q.grad_fn).__name__))
    assert grads[0][2] == "FusedRotaryBackward"  # the fused path's autograd Function
    assert_close(grads[0][0], grads[1][0])
    assert_close(grads[0][1], grads[1][1])


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_cpu_inplace_on_activations_with_autograd(fused_cpu, layout):
    """In-place rotation of q/k that are views of projections, then backward through it."""
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(2, 7, 64, generator=gen, requires_grad=True)
    wq, wk = torch.randn(64, 64, generator=gen), torch.randn(64, 32, generator=gen)
    _, _, cos, sin = make_inputs(torch.float32, seq=7, head_dim=16, rotary_dim=12)

    def loss(inplace):
        q = (x @ wq).view(2, 7, 4, 16).transpose(1, 2)  # (B, Hq, S, D), a view
        k = (x @ wk).view(2, 7, 2, 16).transpose(1, 2)  # (B, Hkv, S, D)
        q2, k2 = apply_rotary(q, k, cos, sin, layout=layout, rotary_dim=12, inplace=inplace)
        if inplace:
            assert q2 is q and k2 is k
        scores = q2 @ k2.repeat_interleave(2, dim=1).transpose(-1, -2)  # (B, Hq, S, S)
        return scores.square().mean()

    grads = []
    for inplace in (True, False):
        x.grad = None
        loss(inplace).backward()
        grads.append(x.grad.clone())
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-6, atol=1e-6)


def test_inplace_on_leaf_requiring_grad_raises_like_torch(fused_cpu):
    q, k, cos, sin = make_inputs(torch.float32)
    q.requires_grad_()
    with pytest.raises(RuntimeError, match="leaf Variable"):
        apply_rotary(q, k, cos, sin, inplace=True)


def test_tables_requiring_grad_use_reference(fused_cpu):
    q, k, cos, sin = make_inputs(torch.float64)
    cos.requires_grad_()
    out_q, _ = apply_rotary(q, k, cos, sin)
    out_q.sum().backward()
    assert cos.grad is not None and cos.grad.abs().sum() > 0


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("rotary_dim", [None, 4])
def test_gradcheck_fused_and_reference(fused_cpu, layout, rotary_dim):
    q, k, cos, sin = make_inputs(
        torch.float64, batch=1, q_heads=2, kv_heads=1, seq=3, head_dim=8, rotary_dim=rotary_dim
    )
    q.requires_grad_()
    k.requires_grad_()

    def fused(a, b):
        out = apply_rotary(a, b, cos, sin, layout=layout, rotary_dim=rotary_dim)
        assert type(out[0].grad_fn).__name__ == "FusedRotaryBackward"
        return out

    def fused_inplace(a, b):
        return apply_rotary(a * 1, b * 1, cos, sin, layout=layout, rotary_dim=rotary_dim, inplace=True)

    def ref(a, b):
        return reference(a, b, cos, sin, layout, rotary_dim)

    for fn in (fused, fused_inplace, ref):
        assert torch.autograd.gradcheck(fn, (q, k))
    assert torch.autograd.gradgradcheck(fused, (q, k))
    c, s = cos.clone().requires_grad_(), sin.clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b, c_, s_: reference(a, b, c_, s_, layout, rotary_dim), (q, k, c, s))


def test_double_backward_builds_a_node_of_its_own(fused_cpu):
    """A backward under create_graph=True is FusedRotary again (a node of its own, the inverse
    rotation), so the second derivative exists and equals the reference's: R(theta) applied to the
    ones of the sum."""
    q, k, cos, sin = make_inputs(torch.float64, batch=1, q_heads=2, kv_heads=1, seq=3, head_dim=8)
    a, b = q.clone().requires_grad_(), k.clone().requires_grad_()
    out = apply_rotary(a, b, cos, sin)
    gq, gk = torch.randn_like(q, requires_grad=True), torch.randn_like(k, requires_grad=True)
    grad_a, grad_b = torch.autograd.grad(out, (a, b), (gq, gk), create_graph=True)
    assert type(grad_a.grad_fn).__name__ == "FusedRotaryBackward"
    assert_close(grad_a, reference(gq, gk, cos, -sin, "half", None)[0])
    (second,) = torch.autograd.grad(grad_a.sum() + grad_b.sum(), (gq,))
    assert_close(second, reference(torch.ones_like(q), gk, cos, sin, "half", None)[0])  # R(theta) 1


def test_forward_mode_ad(fused_cpu):
    """Dual tensors go through the Functions' jvp (the tangent rotates like the input)."""
    q, k, cos, sin = make_inputs(torch.float64, batch=1, q_heads=2, kv_heads=1, seq=3, head_dim=8)
    q.requires_grad_()
    k.requires_grad_()
    for inplace in (False, True):
        fn = (
            (lambda a, b: apply_rotary(a * 1, b * 1, cos, sin, inplace=True))
            if inplace
            else (lambda a, b: apply_rotary(a, b, cos, sin, layout="interleaved"))
        )
        assert torch.autograd.gradcheck(fn, (q, k), check_forward_ad=True)
    import torch.autograd.forward_ad as fwAD

    tq, tk = torch.randn_like(q), torch.randn_like(k)
    with torch.no_grad(), fwAD.dual_level():
        out_q, _ = apply_rotary(fwAD.make_dual(q.detach(), tq), fwAD.make_dual(k.detach(), tk), cos, sin)
        tangent = fwAD.unpack_dual(out_q).tangent
    assert tangent is not None
    torch.testing.assert_close(tangent, reference(tq, tk, cos, sin, "half", None)[0], rtol=1e-12, atol=1e-12)


def test_inplace_without_grad_bumps_the_version(fused_cpu):
    """Like any in-place op: a tensor saved for backward and then rotated in place is detected."""
    q, k, cos, sin = make_inputs(torch.float32)
    x = q.clone().requires_grad_()
    y = x * 1
    loss = (y * y).sum()  # saves y for backward
    with torch.no_grad():
        apply_rotary(y, k, cos, sin, inplace=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
