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
                out = FusedRotary.apply(a, b, cos, sin, None, 0, triton_rope.rotate, layout == "interleaved", 12, False)
            else:
                out = apply_reference(a, b, cos, sin, layout, 12, False)
            torch.autograd.backward(out, (gq, gk))
            grads.append((a.grad, b.grad))
        worst = max(err(grads[0][0], grads[1][0]), err(grads[0][1], grads[1][1]))
        results[f"backward/{layout}"] = {"abs": worst, "ulp": 0.0}
        # every gradcheck perturbation is a kernel launch in the interpreter: keep it small
        a, b, c4, s4 = inputs(torch.float64, batch=1, hq=2, hk=1, seq=2, d=8, r=4)
        ok = torch.autograd.gradcheck(
            lambda x, y: FusedRotary.apply(x, y, c4, s4, None, 0, triton_rope.rotate, layout == "interleaved", 4,
                                           False),
            (a.requires_grad_(), b.requires_grad_()))
        results[f"gradcheck/{layout}"] = {"abs": 0.0 if ok else 1.0, "ulp": 0.0}
        x = q.clone().requires_grad_()
        y = FusedRotaryInplace.apply(x * 1, cos, sin, None, 0, triton_rope.rotate, layout == "interleaved", 12)
        y.backward(gq)
        ref_x = q.clone().requires_grad_()
        apply_reference(ref_x, ref_x[:, :0], cos, sin, layout, 12, False)[0].backward(gq)
        results[f"backward-inplace/{layout}"] = {"abs": err(x.grad, ref_x.grad), "ulp": 0.0}

    # apply_rotary and the module's decode call through the Triton kernel, as on CUDA: the CPU
    # tensors' kernel is the Triton kernel (run by the interpreter); three calls per case on fresh
    # tensors, counting the full layout checks and the launches
    from posenc.rope import apply_rotary, kernels
    from posenc import RotaryEmbedding
    kernels.kernel_for = lambda device: triton_rope.rotate
    work = {"checks": 0, "launches": 0}
    check, jit = triton_rope.check_operands, triton_rope._rope_kernel
    class CountedJit:
        def __getitem__(self, grid):
            work["launches"] += 1
            return jit[grid]
    def counted_check(*args):
        work["checks"] += 1
        return check(*args)
    triton_rope.check_operands, triton_rope._rope_kernel = counted_check, CountedJit()
    table = torch.rand(12, 16, dtype=torch.float64) * 6
    cases = {
        # q and k as transformers hands them over: transposes of one (B, S, H, D) projection
        "entry/transformers-layout": (torch.float32, "half", 32, "projection", "3-d", None),
        "entry/partial-interleaved": (torch.float32, "interleaved", 12, "dense", "2-d", None),
        "entry/row-offset": (torch.float32, "half", 32, "projection", "2-d", 5),
        "entry/bfloat16": (torch.bfloat16, "half", 32, "projection", "3-d", None),
    }
    steps = {}
    for label, (dtype, layout, r, kind, rank, offset) in cases.items():
        worst, before = 0.0, dict(work)
        first = offset or 0
        for _ in range(3):
            if kind == "projection":
                buf = torch.randn(2, 3, 6, 32, dtype=torch.float64).to(dtype)  # (B, S, Hq + Hk, D)
                q, k = buf[:, :, :4].transpose(1, 2), buf[:, :, 4:].transpose(1, 2)
            else:
                q, k, _, _ = inputs(dtype, seq=3, r=r)
            rows = table[:3, : r // 2] if offset is None else table[:, : r // 2]
            cos, sin = rows.cos().float(), rows.sin().float()
            if rank == "3-d":
                cos, sin = cos[None].expand(2, -1, -1), sin[None].expand(2, -1, -1)  # (B, S, r/2)
            got = apply_rotary(q, k, cos, sin, layout=layout, rotary_dim=r, row_offset=offset)
            used = table[first : first + 3, : r // 2]
            want = apply_reference(q, k, used.cos().float()[None], used.sin().float()[None], layout, r, False)
            metric = ulps if dtype == torch.bfloat16 else err
            worst = max(worst, metric(got[0], want[0]), metric(got[1], want[1]))
        results[label] = {"abs": worst, "ulp": worst}
        steps[label] = {name: work[name] - before[name] for name in work}
    # in place and by positions (2-d int64; 1-d int32 in place), transformers' layout, float32
    variants = {
        "entry/in-place": (True, None),
        "entry/positions": (False, torch.tensor([[7, 2, 9], [0, 11, 4]])),
        "entry/positions-1d-int32-in-place": (True, torch.tensor([3, 3, 10], dtype=torch.int32)),
    }
    for label, (inplace, at) in variants.items():
        worst, before = 0.0, dict(work)
        cos, sin = table[:, :16].cos().float(), table[:, :16].sin().float()  # (12, 16)
        for _ in range(3):
            buf = torch.randn(2, 3, 6, 32)  # (B, S, Hq + Hk, D)
            q, k = buf[:, :, :4].transpose(1, 2), buf[:, :, 4:].transpose(1, 2)
            rows = torch.arange(3)[None] if at is None else (at.long() if at.dim() == 2 else at.long()[None])
            want = apply_reference(q, k, cos[rows], sin[rows], "half", 32, False)  # (B|1, S, r/2) rows
            if at is None:
                got = apply_rotary(q, k, cos[:3], sin[:3], inplace=inplace)
            else:
                got = apply_rotary(q, k, cos, sin, inplace=inplace, positions=at)
            same = (got[0] is q and got[1] is k) == inplace
            worst = max(worst, err(got[0], want[0]), err(got[1], want[1]), 0.0 if same else 1.0)
        results[label] = {"abs": worst, "ulp": worst}
        steps[label] = {name: work[name] - before[name] for name in work}
    # the module's decode call, rope(q, k, offset=n): the cached table by row offset, one layout
    decode_cases = {
        "entry/module-decode": ("half", 32, torch.float32),
        "entry/module-decode-partial-bfloat16": ("interleaved", 12, torch.bfloat16),
    }
    for label, (layout, r, dtype) in decode_cases.items():
        rope = RotaryEmbedding(32, rotary_dim=r, layout=layout, max_position_embeddings=16)
        worst, before = 0.0, dict(work)
        for offset in (3, 4, 15):
            buf = torch.randn(2, 1, 6, 32, dtype=torch.float64).to(dtype)  # (B, S, Hq + Hk, D)
            q, k = buf[:, :, :4].transpose(1, 2), buf[:, :, 4:].transpose(1, 2)
            got = rope(q, k, offset=offset)
            rows = slice(offset, offset + 1)
            want = apply_reference(q, k, rope.cos_cached[rows][None], rope.sin_cached[rows][None], layout, r, False)
            metric = ulps if dtype == torch.bfloat16 else err
            worst = max(worst, metric(got[0], want[0]), metric(got[1], want[1]))
        results[label] = {"abs": worst, "ulp": worst}
        steps[label] = {name: work[name] - before[name] for name in work}
    results["entry-work"] = steps
    # forward and backward through apply_rotary: FusedRotary with the Triton kernel, the backward's
    # inverse rotation on the gradients' own layout (expanded gradients of a sum included)
    grad_cases = {
        "entry-grad/transformers-layout": (torch.float32, "half", 32, "projection", "3-d", None, "random"),
        "entry-grad/partial-interleaved-offset": (torch.float64, "interleaved", 12, "dense", "2-d", 5, "random"),
        "entry-grad/expanded-gradients": (torch.float32, "half", 32, "projection", "2-d", None, "sum"),
    }
    grad_steps = {}
    for label, (dtype, layout, r, kind, rank, offset, loss) in grad_cases.items():
        worst, before = 0.0, dict(work)
        first = offset or 0
        for _ in range(3):
            if kind == "projection":
                buf = torch.randn(2, 3, 6, 32, dtype=torch.float64).to(dtype)  # (B, S, Hq + Hk, D)
                q0, k0 = buf[:, :, :4].transpose(1, 2), buf[:, :, 4:].transpose(1, 2)
            else:
                q0, k0, _, _ = inputs(dtype, seq=3, r=r)
            tdt = torch.float64 if dtype == torch.float64 else torch.float32
            rows = table[: first + 3, : r // 2]
            cos, sin = rows.cos().to(tdt), rows.sin().to(tdt)
            if rank == "3-d":
                cos, sin = cos[None].expand(2, -1, -1), sin[None].expand(2, -1, -1)  # (B, S, r/2)
            gq, gk = torch.randn(q0.shape, dtype=dtype), torch.randn(k0.shape, dtype=dtype)
            got, want = [], []
            for fused in (True, False):
                q, k = q0.detach().requires_grad_(), k0.detach().requires_grad_()
                if fused:
                    out = apply_rotary(q, k, cos, sin, layout=layout, rotary_dim=r, row_offset=offset)
                else:
                    used = (cos[..., first:, :], sin[..., first:, :])
                    used = tuple(t if t.dim() == 3 else t[None] for t in used)
                    out = apply_reference(q, k, *used, layout, r, False)
                if loss == "sum":  # autograd hands expanded gradients (stride 0) to the backward
                    (out[0].sum() + out[1].sum()).backward()
                else:
                    torch.autograd.backward(out, (gq, gk))
                (got if fused else want).append((q.grad, k.grad))
            worst = max(worst, err(got[0][0], want[0][0]), err(got[0][1], want[0][1]))
        results[label] = {"abs": worst, "ulp": worst}
        grad_steps[label] = {name: work[name] - before[name] for name in work}
    results["entry-grad-work"] = grad_steps
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


ENTRY_KEYS = [
    "entry/transformers-layout",
    "entry/partial-interleaved",
    "entry/row-offset",
    "entry/bfloat16",
    "entry/module-decode",
    "entry/module-decode-partial-bfloat16",
    "entry/in-place",
    "entry/positions",
    "entry/positions-1d-int32-in-place",
]


@pytest.mark.parametrize("key", ENTRY_KEYS)
def test_triton_entry_in_the_interpreter(triton_results, key):
    """apply_rotary and the module's decode call through the Triton kernel (as on CUDA) equal the
    reference (bfloat16 within one unit in the last place), and each layout's three calls on fresh
    tensors run the full checks once and launch the kernel once per call."""
    limit = 1.0 + 1e-9 if "bfloat16" in key else 1e-6
    assert triton_results[key]["abs"] <= limit, triton_results[key]
    assert triton_results["entry-work"][key] == {"checks": 1, "launches": 3}, triton_results["entry-work"]


ENTRY_GRAD_KEYS = [
    "entry-grad/transformers-layout",
    "entry-grad/partial-interleaved-offset",
    "entry-grad/expanded-gradients",
]


@pytest.mark.parametrize("key", ENTRY_GRAD_KEYS)
def test_triton_backward_through_the_entry_in_the_interpreter(triton_results, key):
    """apply_rotary on q and k that need gradients, through the Triton kernel: the gradients equal
    the reference's, and each case's three steps on fresh leaves run the full checks at most twice
    (the gradients' layout once; the forward's once, unless an earlier case already checked it) and
    launch the kernel twice a step."""
    assert triton_results[key]["abs"] <= 1e-6, triton_results[key]
    work = triton_results["entry-grad-work"][key]
    assert work["launches"] == 6 and work["checks"] in (1, 2), triton_results["entry-grad-work"]


def test_triton_launch_arguments_follow_the_kernel_signature():
    """The plan's constexprs (one set per answer to "copy the untouched tail?") are the kernel's last
    parameters in its order, and its integer arguments fill the rest."""
    pytest.importorskip("triton", reason="triton is a test dependency: pip install triton")
    from posenc.rope.kernels import triton_rope

    q, k, cos, sin = make_inputs(torch.float32, head_dim=16, rotary_dim=12)
    before, after, constexprs, _ = triton_rope._launch_constants(
        (q, k, torch.empty_like(q), torch.empty_like(k), cos, sin, None), 12, False, False
    )
    names = [p.name for p in triton_rope._rope_kernel.params]
    assert set(constexprs) == {(False, False), (False, True), (True, False), (True, True)}
    for (copy_q, copy_k), values in constexprs.items():
        assert list(values) == names[-len(values) :]
        assert (values["COPY_REST_Q"], values["COPY_REST_K"]) == (copy_q, copy_k)
        assert 7 + len(before) + 1 + len(after) + len(values) == len(names)
