"""Fused RoPE kernels against the plain PyTorch reference.

* the CPU C kernel through :func:`posenc.apply_rotary`: forward and backward, both layouts, partial
  rotary, GQA, in-place, float32 / bfloat16 / float16 / float64;
* the Triton kernel in Triton's interpreter on CPU (a subprocess with ``TRITON_INTERPRET=1``, which
  must be set before ``triton`` is imported);
* gradcheck in float64, ``torch.compile``, and the fallback when no fused kernel can be built.

Tolerances: float32 1e-6; bfloat16 and float16 one unit in the last place of the output (the kernels
compute in float32 and round once, as the reference does, so at most the final rounding may differ).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import posenc
from posenc import RotaryEmbedding
from posenc.rope import kernels
from posenc.rope.apply import apply_reference, apply_rotary, apply_rotary_at, fused_kernel
from posenc.rope.kernels import cpu

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
# (rtol, atol): one ulp of the output's format for the half types, 1e-6 for float32
TOL = {
    torch.float32: (1e-6, 1e-6),
    torch.float64: (1e-12, 1e-12),
    torch.bfloat16: (2.0**-7, 2.0**-14),
    torch.float16: (2.0**-10, 2.0**-24),
}


@pytest.fixture(scope="module")
def fused_cpu():
    lib = cpu.library()
    if lib is None:
        pytest.skip(f"the fused CPU kernel cannot be built here: {cpu.unavailable_reason()}")
    return lib


@pytest.fixture
def count_fused(monkeypatch):
    """Count calls of the fused kernel made through the dispatcher."""
    calls = []
    original = kernels.kernel_for

    def spy(device):
        kernel = original(device)
        if kernel is None:
            return None

        def counted(*args, **kwargs):
            calls.append(1)
            return kernel(*args, **kwargs)

        return counted

    monkeypatch.setattr(kernels, "kernel_for", spy)
    return calls


def make_inputs(dtype, *, batch=2, q_heads=4, kv_heads=2, seq=19, head_dim=32, rotary_dim=None, table_batch=1, seed=0):
    gen = torch.Generator().manual_seed(seed)
    r = head_dim if rotary_dim is None else rotary_dim
    q = (torch.randn(batch, q_heads, seq, head_dim, generator=gen, dtype=torch.float64) * 2).to(dtype)
    k = (torch.randn(batch, kv_heads, seq, head_dim, generator=gen, dtype=torch.float64) * 2).to(dtype)
    angles = torch.rand(table_batch, seq, r // 2, generator=gen, dtype=torch.float64) * 2 * math.pi
    table = torch.float64 if dtype == torch.float64 else torch.float32
    return q, k, angles.cos().to(table), angles.sin().to(table)


def reference(q, k, cos, sin, layout, rotary_dim):
    if cos.dim() == 2:
        cos, sin = cos.unsqueeze(0), sin.unsqueeze(0)
    return apply_reference(q, k, cos, sin, layout, rotary_dim or q.shape[-1], False)


def assert_close(actual, expected):
    rtol, atol = TOL[expected.dtype]
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol)


# -- CPU fused kernel, forward -------------------------------------------------------------------
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


# -- CPU fused kernel, backward ------------------------------------------------------------------
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
    assert grads[0][2] == "FusedRotaryBackward"
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


# -- torch.compile -------------------------------------------------------------------------------
def test_compile_dispatcher_has_no_graph_break():
    q, k, cos, sin = make_inputs(torch.float32)
    torch._dynamo.reset()
    compiled = torch.compile(lambda a, b: apply_rotary(a, b, cos, sin, layout="interleaved"), fullgraph=True)
    got = compiled(q, k)
    want = reference(q, k, cos, sin, "interleaved", None)
    torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-5)
    qg, kg = q.clone().requires_grad_(), k.clone().requires_grad_()
    compiled(qg, kg)[0].sum().backward()
    assert qg.grad is not None


def test_compile_tinylm():
    """torch.compile of a model using posenc: same logits; graph breaks come only from outside
    the rotation (reported in the failure message if the dispatcher ever causes one)."""
    torch.manual_seed(0)
    model = posenc.TinyLM(
        posenc.ModelConfig(scheme="rope", d_model=32, n_heads=2, n_layers=1, max_len=64, rotary_dim=8)
    )
    idx = torch.randint(0, 256, (2, 16))
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(model)(idx)
    ours = [
        b
        for b in explanation.break_reasons
        if any("rope/apply.py" in f.filename or "rope/kernels" in f.filename for f in b.user_stack)
    ]
    assert not ours, [b.reason for b in ours]
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=False)
    logits = compiled(idx)
    torch.testing.assert_close(logits, model(idx), rtol=1e-5, atol=1e-5)
    logits.square().mean().backward()  # training through it works
    assert all(p.grad is not None for p in model.parameters())


# -- the registered op ---------------------------------------------------------------------------
def _op_case(name, dtype=torch.float32):
    """(q, k, cos, sin, positions, row_offset, rotary_dim, interleaved) for one layout."""
    gen = torch.Generator().manual_seed(3)
    tdt = torch.float64 if dtype == torch.float64 else torch.float32

    def rnd(*shape, dt=dtype):
        return torch.randn(*shape, generator=gen, dtype=torch.float64).to(dt)

    table = rnd(1, 12, 8, dt=tdt)
    if name == "contiguous":
        return rnd(2, 4, 5, 16), rnd(2, 2, 5, 16), table[:, :5], table[:, 5:10], None, 0, 16, False
    if name == "transformers-layout":  # q/k transposes of (B, S, H, D) buffers
        q, k = rnd(2, 5, 4, 16).transpose(1, 2), rnd(2, 5, 2, 16).transpose(1, 2)
        return q, k, table[:, :5], table[:, 1:6], None, 0, 16, True
    if name == "one-projection":  # q and k interleaved views of one qkv buffer
        qkv = rnd(2, 5, 8, 16)
        q, k = qkv[:, :, :4].transpose(1, 2), qkv[:, :, 4:6].transpose(1, 2)
        return q, k, table[:, :5], table[:, :5], None, 0, 16, False
    if name == "partial-gqa-batch-tables":
        tables = rnd(2, 5, 4, dt=tdt)
        return rnd(2, 6, 5, 16), rnd(2, 1, 5, 16), tables, tables.flip(0), None, 0, 8, True
    if name == "positions":
        pos = torch.tensor([[0, 1, 2, 0, 1], [3, 4, 0, 1, 11]])
        return rnd(2, 4, 5, 16), rnd(2, 2, 5, 16), table, table.flip(1), pos, 0, 16, False
    if name == "row-offset":
        return rnd(1, 4, 1, 16), rnd(1, 2, 1, 16), table, table.flip(1), None, 9, 16, True
    if name == "strided-last-dim":
        return rnd(2, 4, 5, 32)[..., ::2], rnd(2, 2, 5, 32)[..., 1::2], table[:, :5], table[:, 5:10], None, 0, 16, False
    raise KeyError(name)


OP_CASES = [
    "contiguous",
    "transformers-layout",
    "one-projection",
    "partial-gqa-batch-tables",
    "positions",
    "row-offset",
    "strided-last-dim",
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("case", OP_CASES)
def test_op_passes_opcheck_for_every_layout(fused_cpu, case, dtype):
    """torch.library.opcheck: schema, fake kernel (shapes, strides), autograd registration and
    AOT dispatch, on every layout the kernel takes; and the op equals the reference."""
    q, k, cos, sin, pos, offset, r, interleaved = _op_case(case, dtype)
    args = (q, k, cos, sin, pos, offset, r, interleaved, False)
    torch.library.opcheck(torch.ops.posenc.rotary.default, args)
    if dtype != torch.bfloat16:  # autograd checks want a floating type with gradients worth comparing
        grads = (q.clone().requires_grad_(), k.clone().requires_grad_(), cos, sin, pos, offset, r, interleaved, False)
        torch.library.opcheck(torch.ops.posenc.rotary.default, grads)
    got_q, got_k = torch.ops.posenc.rotary(*args)
    layout = "interleaved" if interleaved else "half"
    want = posenc.rope.apply._reference_rows(q, k, cos, sin, pos, offset, layout, r, False)
    assert_close(got_q, want[0])
    assert_close(got_k, want[1])


def test_op_backward_is_the_inverse_rotation(fused_cpu):
    """The op's gradient is the rotation by the negated angles: gradcheck in float64, and the
    backward of the op equals the forward op with ``inverse`` flipped."""
    q, k, cos, sin, pos, offset, r, il = _op_case("positions", torch.float64)
    q, k = q.requires_grad_(), k.requires_grad_()
    assert torch.autograd.gradcheck(
        lambda a, b: torch.ops.posenc.rotary(a, b, cos, sin, pos, offset, r, il, False), (q, k)
    )
    gq, gk = torch.randn_like(q), torch.randn_like(k)
    torch.autograd.backward(torch.ops.posenc.rotary(q, k, cos, sin, pos, offset, r, il, False), (gq, gk))
    want_q, want_k = torch.ops.posenc.rotary(gq, gk, cos, sin, pos, offset, r, il, True)
    torch.testing.assert_close(q.grad, want_q, rtol=0, atol=0)
    torch.testing.assert_close(k.grad, want_k, rtol=0, atol=0)


class _GraphRecorder:
    """A torch.compile backend that records the ops of every graph it is given (and runs it)."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append([node.target for node in gm.graph.nodes if node.op == "call_function"])
        return gm.forward


@pytest.mark.parametrize("mode", ["out", "inplace", "row_offset", "positions"])
def test_compiled_entry_traces_the_op_without_a_graph_break(fused_cpu, monkeypatch, mode):
    """With the op chosen for compiled CPU code, apply_rotary under torch.compile(fullgraph=True)
    is one graph holding torch.ops.posenc.rotary; values equal eager; training through it works."""
    monkeypatch.setitem(posenc.rope.apply.COMPILED_PATH, "cpu", "op")
    q, k, cos, sin = make_inputs(torch.float32, seq=6)
    table = torch.cat([cos, sin], dim=1)  # (1, 12, 16): rows for the offset/positions cases
    pos = torch.tensor([[5, 0, 11, 3, 3, 7]])

    def call(a, b):
        if mode == "row_offset":
            return apply_rotary(a, b, table, table.flip(1), row_offset=4)
        if mode == "positions":
            return apply_rotary_at(a, b, table[0], table[0].flip(0), pos)
        return apply_rotary(a, b, cos, sin, inplace=mode == "inplace")

    recorder = _GraphRecorder()
    torch._dynamo.reset()
    compiled = torch.compile(call, backend=recorder, fullgraph=True)
    got = compiled(q.clone(), k.clone())
    want = call(q.clone(), k.clone())
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert len(recorder.graphs) == 1 and torch.ops.posenc.rotary.default in recorder.graphs[0], recorder.graphs
    if mode != "inplace":
        torch._dynamo.reset()
        trained = torch.compile(call, backend="aot_eager", fullgraph=True)
        qg, kg = q.clone().requires_grad_(), k.clone().requires_grad_()
        trained(qg, kg)[0].square().sum().backward()
        qe, ke = q.clone().requires_grad_(), k.clone().requires_grad_()
        call(qe, ke)[0].square().sum().backward()
        torch.testing.assert_close(qg.grad, qe.grad, rtol=1e-6, atol=1e-6)


def test_compiled_entry_keeps_the_reference_for_inductor_on_cpu(fused_cpu):
    """By default compiled CPU code traces the reference (Inductor fuses it), not the op."""
    assert posenc.rope.apply.COMPILED_PATH["cpu"] == "reference"
    q, k, cos, sin = make_inputs(torch.float32)
    recorder = _GraphRecorder()
    torch._dynamo.reset()
    torch.compile(lambda a, b: apply_rotary(a, b, cos, sin), backend=recorder, fullgraph=True)(q, k)
    assert recorder.graphs and all(torch.ops.posenc.rotary.default not in g for g in recorder.graphs)


# -- fallback ------------------------------------------------------------------------------------
@pytest.fixture
def fresh_kernel_state():
    cpu.reset()
    yield
    cpu.reset()


def test_fallback_when_disabled_warns_once(monkeypatch, fresh_kernel_state):
    monkeypatch.setenv("POSENC_DISABLE_FUSED", "1")
    q, k, cos, sin = make_inputs(torch.bfloat16)
    want = reference(q, k, cos, sin, "half", None)
    with pytest.warns(RuntimeWarning, match=r"fused CPU RoPE kernel unavailable \(POSENC_DISABLE_FUSED"):
        got = apply_rotary(q, k, cos, sin)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = apply_rotary(q, k, cos, sin, inplace=True)
    assert torch.equal(got[0], want[0]) and torch.equal(again[1], want[1])
    assert cpu.unavailable_reason() == "POSENC_DISABLE_FUSED is set"


def test_fallback_without_compiler(monkeypatch, tmp_path, fresh_kernel_state):
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path))  # nothing cached there
    monkeypatch.setenv("CC", "no-such-compiler")
    monkeypatch.setenv("PATH", str(tmp_path))  # and none on PATH
    q, k, cos, sin = make_inputs(torch.float32)
    with pytest.warns(RuntimeWarning, match="no C compiler found") as record:
        got = apply_rotary(q, k, cos, sin, layout="interleaved")
    assert len(record) == 1 and "\n" not in str(record[0].message)
    want = reference(q, k, cos, sin, "interleaved", None)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_fallback_when_compiler_fails(monkeypatch, tmp_path, fresh_kernel_state):
    broken = tmp_path / "cc"
    broken.write_text("#!/bin/sh\necho 'cc: fatal error: broken on purpose' >&2\nexit 1\n")
    broken.chmod(0o755)
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", str(broken))
    q, k, cos, sin = make_inputs(torch.float32)
    with pytest.warns(RuntimeWarning, match="broken on purpose"):
        got = apply_rotary(q, k, cos, sin)
    assert torch.equal(got[0], reference(q, k, cos, sin, "half", None)[0])


def test_build_from_scratch_into_empty_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path))
    try:
        path = cpu.build()
    except cpu.FusedKernelUnavailable as exc:
        pytest.skip(f"no C compiler here: {exc}")
    assert path.exists() and path.parent.parent == tmp_path
    assert cpu.build() == path  # second call: from the cache


def test_build_retries_without_march_native(monkeypatch, tmp_path):
    """A compiler that rejects -march=native still gets the kernel (portable code)."""
    try:
        real = cpu._compiler()
    except cpu.FusedKernelUnavailable as exc:
        pytest.skip(f"no C compiler here: {exc}")
    picky = tmp_path / "picky-cc"
    picky.write_text(
        '#!/bin/sh\nfor a in "$@"; do [ "$a" = "-march=native" ] && '
        '{ echo "unknown flag -march=native" >&2; exit 1; }; done\n'
        f'exec "{real}" "$@"\n'
    )
    picky.chmod(0o755)
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", str(picky))
    lib = cpu._load(cpu.build())
    q, k, cos, sin = make_inputs(torch.float32)
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    cpu.rotate(lib, q, k, q_out, k_out, cos, sin, interleaved=False, rotary_dim=32)
    assert torch.equal(q_out, reference(q, k, cos, sin, "half", None)[0])


def test_triton_import_failure_warns_and_falls_back(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)  # "import triton" raises
    monkeypatch.delitem(sys.modules, "posenc.rope.kernels.triton_rope", raising=False)
    monkeypatch.setattr(kernels, "_triton", {})
    with pytest.warns(RuntimeWarning, match="Triton RoPE kernel unavailable"):
        assert kernels.kernel_for(torch.device("cuda")) is None
    assert kernels.kernel_for(torch.device("meta")) is None


def test_vmap_uses_reference(count_fused):
    q, k, cos, sin = make_inputs(torch.float32, batch=3)
    got_q, got_k = torch.vmap(lambda a, b: apply_rotary(a, b, cos, sin))(q.unsqueeze(1), k.unsqueeze(1))
    want = reference(q, k, cos, sin, "half", None)
    assert not count_fused
    assert_close(got_q.squeeze(1), want[0])
    assert_close(got_k.squeeze(1), want[1])


def test_functorch_wrapper_probe_is_still_there():
    """apply.py asks a private PyTorch function whether a tensor is a vmap/grad wrapper (no public API
    says so). If PyTorch renames or changes it, this fails here rather than letting a wrapper reach a
    fused kernel."""
    probe = torch._C._functorch.is_functorch_wrapped_tensor
    x = torch.randn(3, 4)
    assert probe(x) is False
    seen = []
    torch.vmap(lambda row: seen.append(probe(row)) or row)(x)
    assert seen == [True]


def test_other_devices_use_reference():
    q = torch.empty(1, 2, 3, 8, device="meta")
    cos = torch.empty(3, 4, device="meta")
    assert fused_kernel(q, q, cos, cos) is None
    out_q, out_k = apply_rotary(q, q, cos, cos)
    assert out_q.shape == q.shape and out_q.device.type == "meta"


def test_bad_input_messages():
    q, k, cos, sin = make_inputs(torch.float32)
    with pytest.raises(ValueError, match="layout must be one of"):
        apply_rotary(q, k, cos, sin, layout="neox")
    with pytest.raises(ValueError, match="rotary_dim must be even"):
        apply_rotary(q, k, cos, sin, rotary_dim=7)
    with pytest.raises(ValueError, match="last dimension rotary_dim // 2"):
        apply_rotary(q, k, cos, sin, rotary_dim=16)


# -- Triton, in the interpreter ------------------------------------------------------------------
TRITON_SCRIPT = textwrap.dedent(r"""
    import json, math, os, sys
    assert os.environ.get("TRITON_INTERPRET") == "1"
    import torch
    from posenc.rope.apply import FusedRotary, FusedRotaryInplace, apply_reference
    from posenc.rope.kernels import triton_rope

    def inputs(dtype, batch=2, hq=4, hk=2, seq=5, d=32, r=32, seed=0):
        g = torch.Generator().manual_seed(seed)
        q = (torch.randn(batch, hq, seq, d, generator=g, dtype=torch.float64) * 2).to(dtype)
        k = (torch.randn(batch, hk, seq, d, generator=g, dtype=torch.float64) * 2).to(dtype)
        ang = torch.rand(1, seq, r // 2, generator=g, dtype=torch.float64) * 2 * math.pi
        tdt = torch.float64 if dtype == torch.float64 else torch.float32
        return q, k, ang.cos().to(tdt), ang.sin().to(tdt)

    def err(a, b):
        return (a.double() - b.double()).abs().max().item() if a.numel() else 0.0

    def ulps(a, b):
        # largest difference in units of the last place of the expected value's format
        if not a.numel():
            return 0.0
        info = torch.finfo(b.dtype)
        _, exponent = torch.frexp(b.double().abs().clamp(min=info.tiny))
        spacing = info.eps * torch.pow(2.0, (exponent - 1).double())
        return ((a.double() - b.double()).abs() / spacing).max().item()

    results = {}
    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
              "float64": torch.float64}
    for name, dtype in dtypes.items():
        for layout in ("half", "interleaved"):
            for r in (32, 12):
                for inplace in (False, True):
                    q, k, cos, sin = inputs(dtype, r=r)
                    want = apply_reference(q, k, cos, sin, layout, r, False)
                    if inplace:
                        qo, ko = q.clone(), k.clone()
                        triton_rope.rotate(qo, ko, qo, ko, cos, sin, interleaved=layout == "interleaved", rotary_dim=r)
                    else:
                        qo, ko = torch.empty_like(q), torch.empty_like(k)
                        triton_rope.rotate(q, k, qo, ko, cos, sin, interleaved=layout == "interleaved", rotary_dim=r)
                    key = f"forward/{name}/{layout}/r{r}/{'inplace' if inplace else 'out'}"
                    results[key] = {"abs": max(err(qo, want[0]), err(ko, want[1])),
                                    "ulp": max(ulps(qo, want[0]), ulps(ko, want[1]))}

    # multi-query, per-sample tables, decode
    for label, kw in {"mqa": dict(hq=8, hk=1), "decode": dict(seq=1), "heads-not-pow2": dict(hq=6, hk=3)}.items():
        q, k, cos, sin = inputs(torch.float32, **kw)
        want = apply_reference(q, k, cos, sin, "half", 32, False)
        qo, ko = torch.empty_like(q), torch.empty_like(k)
        triton_rope.rotate(q, k, qo, ko, cos, sin, interleaved=False, rotary_dim=32)
        results[f"shape/{label}"] = {"abs": max(err(qo, want[0]), err(ko, want[1])), "ulp": 0.0}

    # packed sequences: positions index one shared table inside the kernel
    q, k, _, _ = inputs(torch.float32, batch=1, seq=9)
    pos = torch.tensor([[0, 1, 2, 3, 0, 1, 0, 1, 2]])
    ang = torch.rand(1, 16, 16, dtype=torch.float64) * 2 * math.pi
    ct, st = ang.cos().float(), ang.sin().float()
    want = apply_reference(q, k, ct[:, pos[0]], st[:, pos[0]], "interleaved", 32, False)
    qo, ko = torch.empty_like(q), torch.empty_like(k)
    triton_rope.rotate(q, k, qo, ko, ct, st, interleaved=True, rotary_dim=32, positions=pos)
    results["positions/packed"] = {"abs": max(err(qo, want[0]), err(ko, want[1])), "ulp": 0.0}

    # backward through the autograd Functions with the Triton kernel
    for layout in ("half", "interleaved"):
        q, k, cos, sin = inputs(torch.float64, r=12)
        gq, gk = torch.randn_like(q), torch.randn_like(k)
        grads = []
        for use_triton in (True, False):
            a, b = q.clone().requires_grad_(), k.clone().requires_grad_()
            if use_triton:
                out = FusedRotary.apply(a, b, cos, sin, triton_rope.rotate, layout == "interleaved", 12, False)
            else:
                out = apply_reference(a, b, cos, sin, layout, 12, False)
            torch.autograd.backward(out, (gq, gk))
            grads.append((a.grad, b.grad))
        worst = max(err(grads[0][0], grads[1][0]), err(grads[0][1], grads[1][1]))
        results[f"backward/{layout}"] = {"abs": worst, "ulp": 0.0}
        # every gradcheck perturbation is a kernel launch in the interpreter: keep it small
        a, b, c4, s4 = inputs(torch.float64, batch=1, hq=2, hk=1, seq=2, d=8, r=4)
        ok = torch.autograd.gradcheck(
            lambda x, y: FusedRotary.apply(x, y, c4, s4, triton_rope.rotate, layout == "interleaved", 4, False),
            (a.requires_grad_(), b.requires_grad_()))
        results[f"gradcheck/{layout}"] = {"abs": 0.0 if ok else 1.0, "ulp": 0.0}
        x = q.clone().requires_grad_()
        y = FusedRotaryInplace.apply(x * 1, cos, sin, triton_rope.rotate, layout == "interleaved", 12)
        y.backward(gq)
        ref_x = q.clone().requires_grad_()
        apply_reference(ref_x, ref_x[:, :0], cos, sin, layout, 12, False)[0].backward(gq)
        results[f"backward-inplace/{layout}"] = {"abs": err(x.grad, ref_x.grad), "ulp": 0.0}
    print("RESULTS " + json.dumps(results))
""")


@pytest.fixture(scope="module")
def triton_results():
    pytest.importorskip("triton", reason="triton is a test dependency: pip install triton")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", TRITON_SCRIPT], capture_output=True, text=True, env=env, timeout=900)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULTS ")]
    assert proc.returncode == 0 and lines, f"Triton interpreter run failed:\n{proc.stdout}\n{proc.stderr}"
    return json.loads(lines[-1][len("RESULTS ") :])


TRITON_FORWARD_KEYS = [
    f"forward/{d}/{lay}/r{r}/{m}"
    for d in ("float32", "bfloat16", "float16", "float64")
    for lay in ("half", "interleaved")
    for r in (32, 12)
    for m in ("out", "inplace")
]


@pytest.mark.parametrize("key", TRITON_FORWARD_KEYS)
def test_triton_interpreter_forward(triton_results, key):
    dtype = key.split("/")[1]
    result = triton_results[key]
    if dtype in ("float32", "float64"):
        assert result["abs"] <= (1e-6 if dtype == "float32" else 1e-12), result
    else:
        # The interpreter rounds float32 -> bfloat16 by truncation (GPUs round to nearest even), so
        # allow one unit in the last place: the difference is at most the final rounding.
        assert result["ulp"] <= 1.0 + 1e-9, result


@pytest.mark.parametrize(
    "key",
    [
        "shape/mqa",
        "shape/decode",
        "shape/heads-not-pow2",
        "positions/packed",
        "backward/half",
        "backward/interleaved",
        "gradcheck/half",
        "gradcheck/interleaved",
        "backward-inplace/half",
        "backward-inplace/interleaved",
    ],
)
def test_triton_interpreter_cases(triton_results, key):
    assert triton_results[key]["abs"] <= 1e-6, triton_results[key]


# -- the decode step's lean kernel call -----------------------------------------------------------
@pytest.fixture
def lean_decode(monkeypatch):
    """Count the decode step's lean calls and what they returned; the general kernel call fails."""
    returned = []
    original = kernels.cpu_decode

    def spy():
        decode = original()

        def counted(*args):
            out = decode(*args)
            returned.append(out is not None)
            return out

        return counted

    def no_general_call(*args, **kwargs):
        raise AssertionError("the decode step fell back to the general kernel call")

    monkeypatch.setattr(kernels, "cpu_decode", spy)
    monkeypatch.setattr(posenc.rope.apply, "fused_kernel", no_general_call)
    return returned


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_decode_step_is_one_lean_call_equal_to_the_reference(fused_cpu, lean_decode, dtype, layout):
    """rope(q, k, offset=n) on CPU is one lean kernel call on the cached tables, for contiguous and
    transposed (B, S, H, D)-as-(B, H, S, D) inputs and partial rotation, bit for bit the reference
    rotation by rows n .. n + seq - 1."""
    rope = RotaryEmbedding(32, rotary_dim=24, layout=layout, max_position_embeddings=64)
    gen = torch.Generator().manual_seed(1)
    for seq, offset, transposed in ((1, 0, False), (1, 63, True), (3, 17, False), (2, 40, True)):
        shape_q, shape_k = (2, seq, 4, 32), (2, seq, 2, 32)
        q, k = (torch.randn(s, generator=gen, dtype=torch.float64).to(dtype) for s in (shape_q, shape_k))
        q, k = (
            (q.transpose(1, 2), k.transpose(1, 2))
            if transposed
            else (q.transpose(1, 2).contiguous(), k.transpose(1, 2).contiguous())
        )
        got_q, got_k = rope(q, k, offset=offset)
        rows = slice(offset, offset + seq)
        cos, sin = rope.cos_cached[rows][None], rope.sin_cached[rows][None]  # (1, S, r/2)
        want_q, want_k = apply_reference(q, k, cos, sin, layout, 24, False)
        torch.testing.assert_close(got_q, want_q, rtol=0, atol=0)
        torch.testing.assert_close(got_k, want_k, rtol=0, atol=0)
        assert got_q.stride() == torch.empty_like(q).stride()  # the input's layout is kept
    assert lean_decode and all(lean_decode)


def test_decode_call_declines_what_it_does_not_read(fused_cpu):
    """The lean call returns None (and the general path explains or resolves) for a lazily negated
    q, mixed dtypes, a 3-d k, and rows past the table, before anything is written."""
    rope = RotaryEmbedding(8, max_position_embeddings=16)
    rows = rope._rows
    decode = kernels.cpu_decode()
    q, k = torch.randn(1, 2, 1, 8), torch.randn(1, 1, 1, 8)
    assert decode(q, k, rows.cos, rows.sin, rows.fields, 3, False, 8) is not None
    negated = torch.complex(torch.zeros_like(q), -q).conj().imag
    assert negated.is_neg()
    for args in (
        (negated, k, 3),
        (q, k.double(), 3),
        (q, k[0], 3),
        (q, k, 16),  # row 16 of 16
        (q, k, -1),
    ):
        assert decode(args[0], args[1], rows.cos, rows.sin, rows.fields, args[2], False, 8) is None


def test_table_fields_only_for_plain_cpu_float_tables(fused_cpu):
    cos = torch.rand(1, 5, 4)
    fields = cpu.table_fields(cos, cos.clone())
    assert fields == ((0, 1, 5, 4, 20, 4, 1), (0, 1, 5, 4, 20, 4, 1))  # no data pointer in them
    assert cpu.table_fields(cos.double(), cos.double())[0][0] == cpu.DTYPE_CODES[torch.float64]
    negated = torch.complex(torch.zeros_like(cos), -cos).conj().imag
    for bad in (cos.half(), cos[0], cos.to("meta"), negated, torch.nn.Parameter(cos)):
        assert cpu.table_fields(bad, cos) is None
        assert cpu.table_fields(cos, bad) is None


def test_argument_checks_run_once_per_layout(monkeypatch):
    """apply_rotary's argument checks are a function of types, shapes, dtypes, layout name and
    rotary_dim: a seen combination is not checked again (a decode loop pays one lookup per layer),
    a new one is, and refused arguments are refused at every call, never remembered."""
    import posenc.rope.apply as apply_mod

    calls = []
    original = apply_mod._check_rotary_inputs

    def spy(*args):
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(apply_mod, "_check_rotary_inputs", spy)
    monkeypatch.setattr(apply_mod, "_ACCEPTED", {})
    for _ in range(10):
        q, k, cos, sin = make_inputs(torch.float32, seq=3)
        want = reference(q, k, cos, sin, "half", None)
        got = apply_rotary(q, k, cos, sin)
        assert_close(got[0], want[0])
    assert len(calls) == 1
    apply_rotary(q, k, cos, sin, layout="interleaved")
    apply_rotary(q.double(), k.double(), cos.double(), sin.double())
    assert len(calls) == 3
    for _ in range(3):
        with pytest.raises(ValueError, match="layout"):
            apply_rotary(q, k, cos, sin, layout="halves")
        with pytest.raises(ValueError, match="rotary_dim"):
            apply_rotary(q, k, cos, sin, rotary_dim=31)
    assert len(calls) == 9 and len(apply_mod._ACCEPTED) == 3


def test_one_entry_row_offset_and_positions(fused_cpu, count_fused):
    """apply_rotary(row_offset=n) equals the rows n.. of the table, apply_rotary(positions=p) the
    named rows, forward and backward, through the fused kernel; bad offsets are refused by name."""
    q, k, _, _ = make_inputs(torch.float32, seq=4)
    ang = torch.rand(1, 12, 16, dtype=torch.float64) * 6
    cos, sin = ang.cos().float(), ang.sin().float()
    got = apply_rotary(q, k, cos, sin, row_offset=7)
    assert_close(got[0], reference(q, k, cos[:, 7:11], sin[:, 7:11], "half", None)[0])
    pos = torch.tensor([[3, 0, 11, 3], [1, 2, 3, 4]])
    got = apply_rotary(q, k, cos[0], sin[0], positions=pos)
    want = apply_reference(q, k, cos[0][pos], sin[0][pos], "half", 32, False)
    assert_close(got[0], want[0])
    assert_close(got[1], want[1])
    assert count_fused
    qg = q.clone().requires_grad_()
    apply_rotary(qg, k, cos, sin, row_offset=8)[0].sum().backward()
    qr = q.clone().requires_grad_()
    reference(qr, k, cos[:, 8:12], sin[:, 8:12], "half", None)[0].sum().backward()
    assert_close(qg.grad, qr.grad)
    for bad, match in ((-1, "row_offset"), (9, "row_offset"), (True, "row_offset"), (1.5, "row_offset")):
        with pytest.raises((ValueError, TypeError), match=match):
            apply_rotary(q, k, cos, sin, row_offset=bad)
