"""Inputs, the reference rotation and tolerances that the fused-kernel tests
share (``test_kernels.py``, ``test_kernel_dispatch.py``, ``test_kernel_triton_interpreter.py``); their
fixtures ``fused_cpu`` and ``count_fused`` are in ``conftest.py``."""

from __future__ import annotations

import math

import torch

from posenc.rope.apply import apply_reference

# (rtol, atol): one ulp of the output's format for the half types, 1e-6 for float32
TOL = {
    torch.float32: (1e-6, 1e-6),
    torch.float64: (1e-12, 1e-12),
    torch.bfloat16: (2.0**-7, 2.0**-14),
    torch.float16: (2.0**-10, 2.0**-24),
}


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
