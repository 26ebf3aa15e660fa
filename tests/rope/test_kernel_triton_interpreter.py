"""The Triton kernel in Triton's interpreter on CPU, against the plain PyTorch reference: a subprocess
with ``TRITON_INTERPRET=1`` (which must be set before ``triton`` is imported), forward and backward over
the cases of both layouts.

Tolerances: float32 1e-6; bfloat16 and float16 one unit in the last place of the output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from kernel_cases import make_inputs

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

    # 2-d tables (rows, r/2), read as one batch row of stride 0, by row offset
    q, k, _, _ = inputs(torch.float32, seq=3)
    want = apply_reference(q, k, ct[:, 4:7], st[:, 4:7], "half", 32, False)
    qo, ko = torch.empty_like(q), torch.empty_like(k)
    triton_rope.rotate(q, k, qo, ko, ct[0], st[0], interleaved=False, rotary_dim=32, row_offset=4)
    results["tables/2d"] = {"abs": max(err(qo, want[0]), err(ko, want[1])), "ulp": 0.0}

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
        "tables/2d",
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


def test_triton_launch_arguments_follow_the_kernel_signature():
    """The plan's constexprs (one set per answer to "copy the untouched tail?") are the kernel's last
    parameters in its order, which the pre-bound launcher passes by position; the alignment mask has
    bit i set exactly for the pointers that are multiples of 16."""
    pytest.importorskip("triton", reason="triton is a test dependency: pip install triton")
    from posenc.rope.kernels import triton_rope

    q, k, cos, sin = make_inputs(torch.float32, head_dim=16, rotary_dim=12)
    before, after, constexprs, _ = triton_rope._launch_constants(
        q, k, torch.empty_like(q), torch.empty_like(k), cos, sin, None, 12, False, False
    )
    names = [p.name for p in triton_rope._rope_kernel.params]
    assert set(constexprs) == {(False, False), (False, True), (True, False), (True, True)}
    for (copy_q, copy_k), values in constexprs.items():
        assert list(values) == names[-len(values) :]
        assert (values["COPY_REST_Q"], values["COPY_REST_K"]) == (copy_q, copy_k)
        assert 7 + len(before) + 1 + len(after) + len(values) == len(names)
    gen = torch.Generator().manual_seed(0)
    for _ in range(200):
        ptrs = tuple(int(x) for x in torch.randint(0, 1 << 40, (7,), generator=gen) * 8)
        assert triton_rope._alignment(ptrs) == sum(1 << i for i, p in enumerate(ptrs) if p % 16 == 0)
