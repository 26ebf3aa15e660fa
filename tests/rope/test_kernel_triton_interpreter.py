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
from kernel_cases import make_inputs, python_calls_per_call, reference

from posenc import RotaryEmbedding
from posenc.rope import apply_rotary

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

    # apply_rotary's dense out-of-place call planned per layout as on CUDA: CPU tensors handed to the
    # Triton planner, the kernel run by the interpreter; three calls per layout on fresh tensors
    from posenc.rope import apply_rotary, kernels
    if kernels.kernel_for(torch.device("cpu")) is not None:  # the plan's path choice asks the dispatcher
        planner = kernels.Planner(triton_rope.make_planned, {"kernel": 1}, "kernel", 1)
        kernels.planner_for = lambda device: planner
        work = {"checks": 0, "launches": 0}
        check, launch = triton_rope.check_operands, triton_rope._launch
        def counted_check(*args):
            work["checks"] += 1
            return check(*args)
        def counted_launch(*args):
            work["launches"] += 1
            return launch(*args)
        triton_rope.check_operands, triton_rope._launch = counted_check, counted_launch
        table = torch.rand(12, 16, dtype=torch.float64) * 6
        cases = {
            # q and k as transformers hands them over: transposes of one (B, S, H, D) projection
            "planned/transformers-layout": (torch.float32, "half", 32, "projection", "3-d", 0),
            "planned/partial-interleaved": (torch.float32, "interleaved", 12, "dense", "2-d", 0),
            "planned/row-offset": (torch.float32, "half", 32, "projection", "2-d", 5),
            "planned/bfloat16": (torch.bfloat16, "half", 32, "projection", "3-d", 0),
        }
        steps = {}
        for label, (dtype, layout, r, kind, rank, offset) in cases.items():
            worst, before = 0.0, dict(work)
            for _ in range(3):
                if kind == "projection":
                    buf = torch.randn(2, 3, 6, 32, dtype=torch.float64).to(dtype)  # (B, S, Hq + Hk, D)
                    q, k = buf[:, :, :4].transpose(1, 2), buf[:, :, 4:].transpose(1, 2)
                else:
                    q, k, _, _ = inputs(dtype, seq=3, r=r)
                rows = table[offset : offset + 3, : r // 2] if offset == 0 else table[:, : r // 2]
                cos, sin = rows.cos().float(), rows.sin().float()
                if rank == "3-d":
                    cos, sin = cos[None].expand(2, -1, -1), sin[None].expand(2, -1, -1)  # (B, S, r/2)
                got = apply_rotary(q, k, cos, sin, layout=layout, rotary_dim=r, row_offset=offset)
                used = table[offset : offset + 3, : r // 2]
                want = apply_reference(q, k, used.cos().float()[None], used.sin().float()[None], layout, r, False)
                metric = ulps if dtype == torch.bfloat16 else err
                worst = max(worst, metric(got[0], want[0]), metric(got[1], want[1]))
            results[label] = {"abs": worst, "ulp": worst}
            steps[label] = {name: work[name] - before[name] for name in work}
        # in place and by positions (2-d int64; 1-d int32 in place), transformers' layout, float32
        variants = {
            "planned/in-place": (True, None),
            "planned/positions": (False, torch.tensor([[7, 2, 9], [0, 11, 4]])),
            "planned/positions-1d-int32-in-place": (True, torch.tensor([3, 3, 10], dtype=torch.int32)),
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
        # the module's decode call, rope(q, k, offset=n), as on CUDA (no CPU-kernel fields for its
        # cache views): a window of the cached tables at a new offset per call, one layout
        import posenc.rope.embedding as embedding_mod
        from posenc import RotaryEmbedding
        embedding_mod.cached_rows_fields = lambda cos, sin: None
        decode_cases = {
            "planned/module-decode": ("half", 32, torch.float32),
            "planned/module-decode-partial-bfloat16": ("interleaved", 12, torch.bfloat16),
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
        results["planned-work"] = steps
        # calls that need gradients, planned as on CUDA: the forward run inside PlannedRotary, the
        # backward's inverse rotation planned on the gradients' layout; three steps per case, each
        # on fresh leaves, gradients against the reference's (autograd through torch's own ops)
        inverting = kernels.Planner(triton_rope.make_planned, {"kernel": 1}, "kernel", 1, True)
        kernels.planner_for = lambda device: inverting
        grad_cases = {
            "planned-grad/transformers-layout": (torch.float32, "half", 32, "projection", "3-d", 0, "random"),
            "planned-grad/partial-interleaved-offset": (torch.float64, "interleaved", 12, "dense", "2-d", 5, "random"),
            "planned-grad/expanded-gradients": (torch.float32, "half", 32, "projection", "2-d", 0, "sum"),
        }
        grad_steps, nodes = {}, {}
        for label, (dtype, layout, r, kind, rank, offset, loss) in grad_cases.items():
            worst, before = 0.0, dict(work)
            for _ in range(3):
                if kind == "projection":
                    buf = torch.randn(2, 3, 6, 32, dtype=torch.float64).to(dtype)  # (B, S, Hq + Hk, D)
                    q0, k0 = buf[:, :, :4].transpose(1, 2), buf[:, :, 4:].transpose(1, 2)
                else:
                    q0, k0, _, _ = inputs(dtype, seq=3, r=r)
                tdt = torch.float64 if dtype == torch.float64 else torch.float32
                rows = table[: offset + 3, : r // 2]
                cos, sin = rows.cos().to(tdt), rows.sin().to(tdt)
                if rank == "3-d":
                    cos, sin = cos[None].expand(2, -1, -1), sin[None].expand(2, -1, -1)  # (B, S, r/2)
                gq, gk = torch.randn(q0.shape, dtype=dtype), torch.randn(k0.shape, dtype=dtype)
                got, want = [], []
                for planned in (True, False):
                    q, k = q0.detach().requires_grad_(), k0.detach().requires_grad_()
                    if planned:
                        out = apply_rotary(q, k, cos, sin, layout=layout, rotary_dim=r, row_offset=offset)
                        nodes[label] = type(out[0].grad_fn).__name__
                    else:
                        used = (cos[..., offset:, :], sin[..., offset:, :])
                        used = tuple(t if t.dim() == 3 else t[None] for t in used)
                        out = apply_reference(q, k, *used, layout, r, False)
                    if loss == "sum":  # autograd hands expanded gradients (stride 0) to the backward
                        (out[0].sum() + out[1].sum()).backward()
                    else:
                        torch.autograd.backward(out, (gq, gk))
                    (got if planned else want).append((q.grad, k.grad))
                worst = max(worst, err(got[0][0], want[0][0]), err(got[0][1], want[0][1]))
            results[label] = {"abs": worst, "ulp": worst}
            grad_steps[label] = {name: work[name] - before[name] for name in work}
        results["planned-grad-work"] = grad_steps
        results["planned-grad-nodes"] = nodes
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


PLANNED_KEYS = [
    "planned/transformers-layout",
    "planned/partial-interleaved",
    "planned/row-offset",
    "planned/bfloat16",
    "planned/module-decode",
    "planned/module-decode-partial-bfloat16",
    "planned/in-place",
    "planned/positions",
    "planned/positions-1d-int32-in-place",
]


@pytest.mark.parametrize("key", PLANNED_KEYS)
def test_triton_planned_call_in_the_interpreter(triton_results, key):
    """apply_rotary's planned dense call through the Triton planner (as on CUDA) equals the reference
    (bfloat16 within one unit in the last place), and each layout's three calls on fresh tensors run
    the full checks once and launch the kernel once per call."""
    if "planned-work" not in triton_results:
        pytest.skip("no fused CPU kernel here: the planned path's choice asks the dispatcher")
    limit = 1.0 + 1e-9 if "bfloat16" in key else 1e-6
    assert triton_results[key]["abs"] <= limit, triton_results[key]
    assert triton_results["planned-work"][key] == {"checks": 1, "launches": 3}, triton_results["planned-work"]


PLANNED_GRAD_KEYS = [
    "planned-grad/transformers-layout",
    "planned-grad/partial-interleaved-offset",
    "planned-grad/expanded-gradients",
]


@pytest.mark.parametrize("key", PLANNED_GRAD_KEYS)
def test_triton_planned_backward_in_the_interpreter(triton_results, key):
    """apply_rotary on q and k that need gradients, planned through the Triton planner as on CUDA
    (PlannedRotary: the forward's plan, the backward's inverse rotation planned on the gradients'
    layout, expanded gradients included): the gradients equal the reference's, and each case's three
    steps on fresh leaves run the full checks at most twice (the gradients' layout once; the
    forward's once, unless an earlier case without gradients planned that layout already) and
    launch the kernel twice a step."""
    if "planned-grad-work" not in triton_results:
        pytest.skip("no fused CPU kernel here: the planned path's choice asks the dispatcher")
    assert triton_results["planned-grad-nodes"][key] == "PlannedRotaryBackward"
    assert triton_results[key]["abs"] <= 1e-6, triton_results[key]
    work = triton_results["planned-grad-work"][key]
    assert work["launches"] == 6 and work["checks"] in (1, 2), triton_results["planned-grad-work"]


def test_triton_launch_arguments_follow_the_kernel_signature():
    """The plan's constexprs (one set per answer to "copy the untouched tail?") are the kernel's last
    parameters in its order, which the pre-bound launcher passes by position; the alignment mask has
    bit i set exactly for the pointers that are multiples of 16."""
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
    gen = torch.Generator().manual_seed(0)
    for _ in range(200):
        ptrs = tuple(int(x) for x in torch.randint(0, 1 << 40, (7,), generator=gen) * 8)
        assert triton_rope._alignment(ptrs) == sum(1 << i for i, p in enumerate(ptrs) if p % 16 == 0)


# -- the CUDA path's host work per call, with the launch stubbed --------------------------------------
class FakeCompiled:
    """What the pre-bound launcher reads of a compiled kernel: ``run`` records each direct launch."""

    function, packed_metadata = "function", "packed"

    def __init__(self, launches):
        self.launches = launches

    def run(self, *args):
        self.launches.append(("pre-bound", args))


class FakeJit:
    """Stands for ``_rope_kernel``: ``kernel[grid](*args, **constexprs)`` records a launch through
    the JIT function and returns a :class:`FakeCompiled`; the parameters are the real kernel's."""

    def __init__(self, params):
        self.params = params
        self.launches = []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.launches.append(("jit", (grid, args, kwargs)))
            return FakeCompiled(self.launches)

        return launch


@pytest.fixture
def triton_planned(monkeypatch, fused_cpu):
    """apply_rotary's dense call on CPU tensors planned by the Triton planner as on CUDA, with the
    pre-bound launch enabled for CPU and the launch itself stubbed: what a GPU decode call runs on
    the host, nothing of the kernel. Counts the full checks and layout keys."""
    pytest.importorskip("triton", reason="triton is a test dependency: pip install triton")
    import posenc.rope.apply as apply_mod
    from posenc.rope import kernels
    from posenc.rope.kernels import plans, triton_rope

    fake = FakeJit(triton_rope._rope_kernel.params)
    monkeypatch.setattr(triton_rope, "_rope_kernel", fake)
    monkeypatch.setattr(triton_rope, "_INTERPRETED", False)
    monkeypatch.setattr(triton_rope, "_PREBOUND", True)
    monkeypatch.setattr(triton_rope, "_PREBIND_ON", frozenset({"cpu", "cuda"}))
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda index: 7, raising=False)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    loaded = {"kernel": "triton"}  # the loader's state: what kernels.planner_for reads

    def planner_for(device):
        kernel = loaded.get("kernel")
        return kernels.Planner(triton_rope.make_planned if kernel else None, loaded, "kernel", kernel, True)

    monkeypatch.setattr(kernels, "planner_for", planner_for)
    monkeypatch.setattr(apply_mod, "_ACCEPTED", {})
    counts = {"full checks": 0, "layout keys": 0}
    for name, module, attr in (("full checks", triton_rope, "check_operands"), ("layout keys", plans, "layout_key")):

        def spy(*args, _fn=getattr(module, attr), _name=name, **kwargs):
            counts[_name] += 1
            return _fn(*args, **kwargs)

        monkeypatch.setattr(module, attr, spy)
    plans.clear()
    yield fake, counts, loaded
    plans.clear()


def _projection(dtype=torch.float32, q_heads=32, kv_heads=8, dim=128, seq=1):
    """q and k as transformers hands them over: transposes of (B, S, H, D) views of one projection."""
    buf = torch.randn(1, seq, q_heads + kv_heads, dim, dtype=dtype)  # (B, S, Hq + Hk, D)
    return buf, buf[:, :, :q_heads].transpose(1, 2), buf[:, :, q_heads:].transpose(1, 2)


def test_triton_planned_call_does_constant_work_on_a_seen_layout(triton_planned):
    """On CUDA, apply_rotary's dense decode call on a seen layout builds no layout key, runs no full
    check and no plan build, and makes exactly one launch for q and k, through the pre-bound
    launcher (the compiled kernel's own launch, called with the arguments the JIT function bound,
    in the kernel's parameter order); cProfile's count of Python calls is the same at every call
    and for two layouts. Here the launch is stubbed and CPU tensors stand for CUDA ones."""
    from posenc.rope.kernels import plans, triton_rope

    fake, counts, _ = triton_planned
    names = [p.name for p in triton_rope._rope_kernel.params]
    per_call = []
    for q_heads, kv_heads, dim in ((32, 8, 128), (4, 2, 16)):
        _, q, k = _projection(q_heads=q_heads, kv_heads=kv_heads, dim=dim)
        cos, sin = torch.rand(1, 1, dim // 2), torch.rand(1, 1, dim // 2)  # (B, S, r/2), as transformers
        apply_rotary(q, k, cos, sin)  # plans the layout: the full checks, the first launch through the JIT
        first = dict(counts, plans=plans.STATS["plans"], launches=len(fake.launches))
        assert first["full checks"] >= 1 and fake.launches[-1][0] == "jit"
        _, (grid, jit_args, jit_kwargs) = fake.launches[-1]
        bound = dict(zip(names, jit_args), **jit_kwargs)  # what the JIT function would bind
        assert list(bound) == names and grid == (1,)
        for _ in range(2):
            count, out = python_calls_per_call(lambda: apply_rotary(q, k, cos, sin))  # noqa: B023
            per_call.append(count)
        assert dict(counts, plans=plans.STATS["plans"], launches=first["launches"]) == first
        launched = fake.launches[first["launches"] :]
        assert len(launched) == 100 and {kind for kind, _ in launched} == {"pre-bound"}  # one launch per call
        args = launched[-1][1]
        assert args[:9] == (1, 1, 1, 7, "function", "packed", None, None, None)  # grid, stream, no hooks
        direct = dict(zip(names, args[9:]))
        assert len(args[9:]) == len(names)
        for name in names:
            if name in ("qo_ptr", "ko_ptr"):
                assert direct[name] is not bound[name]  # fresh outputs of every call
            elif isinstance(bound[name], torch.Tensor):
                assert direct[name] is bound[name], name
            else:
                assert direct[name] == bound[name], name
        assert direct["qo_ptr"] is out[0] and direct["ko_ptr"] is out[1]
        assert out[0].stride() == torch.empty_like(q).stride() and out[1].shape == k.shape
    # the lambda, apply_rotary, the planned call, its run, the launch step and the launcher; is_compiling (2),
    # getattr for forward-mode AD, 4 functorch probes, 4 negation bits, 4 strides, one lookup, 2
    # allocations, 6 data pointers, the overlap test, the alignment mask, one launcher lookup, the
    # stream and the compiled kernel's launch (stubbed here: the stream, run and its list append)
    # (rounded: the profiler's own disable call, and callbacks another test may have left, add < 1)
    calls = [round(n) for n in per_call]
    assert calls == [calls[0]] * len(calls) and calls[0] <= 36, per_call


def test_pre_bound_launcher_leaves_hooked_launches_to_the_jit_function(triton_planned):
    """Newer Triton keeps its launch hooks as a HookChain that is never None: an empty chain is no
    hook (the pre-bound launch runs), a chain with a hook gets every launch through the JIT function,
    which hands the hook its launch metadata."""
    import triton

    fake, _, _ = triton_planned
    runtime = triton.knobs.runtime
    if not hasattr(triton.knobs, "HookChain") or not isinstance(runtime.launch_enter_hook, triton.knobs.HookChain):
        pytest.skip("this Triton has no HookChain")
    _, q, k = _projection(q_heads=4, kv_heads=2, dim=16)
    cos, sin = torch.rand(1, 8), torch.rand(1, 8)
    for _ in range(2):
        apply_rotary(q, k, cos, sin)
    assert [kind for kind, _ in fake.launches] == ["jit", "pre-bound"]

    def hook(metadata):
        pass

    runtime.launch_enter_hook.add(hook)
    try:
        apply_rotary(q, k, cos, sin)
    finally:
        runtime.launch_enter_hook.remove(hook)
    apply_rotary(q, k, cos, sin)
    assert [kind for kind, _ in fake.launches] == ["jit", "pre-bound", "jit", "pre-bound"]


def test_triton_planned_call_still_checks_what_changes(triton_planned):
    """A seen layout's Triton plan covers shapes, strides, dtypes and the device: a new dtype or
    shape is checked in full again; q and k that now share memory (read only, out of place) are
    rotated from both; rows past the table are refused; an output that would overlap an operand
    (the byte-range test, forced here) leaves the plan for the general path, which checks it; a
    stale plan (the loader's kernel gone) is not used, and the layout is planned anew once a kernel
    is loaded again."""
    from posenc.rope.kernels import plans

    fake, counts, loaded = triton_planned
    buf, q, k = _projection(q_heads=4, kv_heads=2, dim=16)
    cos, sin = torch.rand(1, 8), torch.rand(1, 8)
    apply_rotary(q, k, cos, sin)
    checks, launches = counts["full checks"], len(fake.launches)
    k_over = buf[:, :, 2:4].transpose(1, 2)  # k's layout, sharing two heads with q
    assert k_over.stride() == k.stride()
    apply_rotary(q, k_over, cos, sin)
    assert counts["full checks"] == checks and len(fake.launches) == launches + 1
    apply_rotary(q.double(), k.double(), cos.double(), sin.double())  # a new layout: checked once
    assert counts["full checks"] == checks + 1
    with pytest.raises(ValueError, match="row_offset"):
        apply_rotary(q, k, torch.rand(4, 8), torch.rand(4, 8), row_offset=4)
    launches = len(fake.launches)
    saved = plans.disjoint
    try:
        plans.disjoint = lambda plan, ptrs: False
        got = apply_rotary(q, k, cos, sin)  # not launched by the plan; the C kernel's general call
    finally:
        plans.disjoint = saved
    assert len(fake.launches) == launches
    assert torch.equal(got[0], reference(q, k, cos, sin, "half", None)[0])
    checks = counts["full checks"]
    loaded.clear()  # the kernel the plans were made for is gone: planned anew, without it
    apply_rotary(q, k, cos, sin)
    assert len(fake.launches) == launches
    loaded["kernel"] = "triton, loaded again"  # planned anew with it (the layout's checks are kept)
    for _ in range(2):
        apply_rotary(q, k, cos, sin)
    assert len(fake.launches) == launches + 2 and counts["full checks"] == checks


@pytest.fixture
def cuda_like_module(triton_planned, monkeypatch):
    """A RotaryEmbedding whose cache views carry no CPU-kernel fields, as on CUDA (where
    ``cached_rows_fields`` is None): its decode call takes the Triton plan of ``triton_planned``."""
    import posenc.rope.embedding as embedding_mod

    monkeypatch.setattr(embedding_mod, "cached_rows_fields", lambda cos, sin: None)
    rope = RotaryEmbedding(128, max_position_embeddings=64)
    return (*triton_planned, rope)


def test_module_decode_on_cuda_does_constant_work_on_a_seen_layout(cuda_like_module):
    """rope(q, k, offset=n), the module's decode call, on CUDA: on a seen layout, at the same offset
    or a new one at every call (as layer 1 of each step sees it), it builds no layout key, runs no
    full check and no plan build, and makes one pre-bound launch per call whose row offset is the
    call's; cProfile counts the same Python calls at every call. Launch stubbed, CPU tensors."""
    from posenc.rope.kernels import plans, triton_rope

    fake, counts, _, rope = cuda_like_module
    names = [p.name for p in triton_rope._rope_kernel.params]
    _, q, k = _projection()
    rope(q, k, offset=5)  # plans the layout (tables (1, 64, 64), a window of the cache)
    first = dict(counts, plans=plans.STATS["plans"])
    assert first["full checks"] == 1 and [kind for kind, _ in fake.launches] == ["jit"]
    offsets = iter(range(6, 60))
    per_call = []
    for call in (lambda: rope(q, k, offset=5), lambda: rope(q, k, offset=next(offsets))):
        for _ in range(2):
            count, out = python_calls_per_call(call, calls=20)
            per_call.append(count)
    assert dict(counts, plans=plans.STATS["plans"]) == first
    launched = fake.launches[1:]
    assert len(launched) == 80 and {kind for kind, _ in launched} == {"pre-bound"}
    row_offsets = [dict(zip(names, args[9:]))["row_offset"] for _, args in launched]
    assert row_offsets == [5] * 40 + list(range(6, 46))
    direct = dict(zip(names, launched[-1][1][9:]))
    assert direct["qo_ptr"] is out[0] and direct["ko_ptr"] is out[1]
    assert direct["cos_ptr"] is rope._rows.cos and direct["rows"] == 64
    # rope.forward, its cached-rows step, rotate_cached_rows, the planned call, its run, the launch step
    # and the launcher, the lambda (and next() for the moving offset), is_compiling (2), getattr, 4
    # functorch probes, 4 negation bits, 4 strides, the lookup, 2 allocations, 6 data pointers, the
    # overlap test, the alignment mask, the stream and the stubbed launch; nn.Module's call around them
    calls = [round(n) for n in per_call]
    assert calls[:2] == [calls[0]] * 2 and calls[2:] == [calls[2]] * 2 and calls[2] - calls[0] <= 1, per_call
    assert calls[0] <= 44, per_call


def test_module_decode_on_cuda_still_checks_what_changes(cuda_like_module):
    """The module's planned decode call checks per call what a layout does not fix: a grown cache
    (more rows) and a new dtype are new layouts, checked in full once; rows past the table leave the
    plan (the module grows the cache first; called directly, the general path names the bound); an
    output whose byte range would meet an operand leaves the plan for the general path; q and k that
    share memory are read from both."""
    from posenc.rope.apply import rotate_cached_rows
    from posenc.rope.kernels import plans

    fake, counts, _, rope = cuda_like_module
    buf, q, k = _projection(q_heads=4, kv_heads=2, dim=128)
    rope(q, k, offset=3)
    assert counts["full checks"] == 1
    rope(q, k, offset=70)  # past the 64 cached rows: the cache grows to 128 rows, a new layout
    assert counts["full checks"] == 2 and rope._rows.cos.shape[1] == 128
    rope(q, k, offset=71)
    rope(q.double(), k.double(), offset=71)  # float64 q reads float32 tables: the general path
    assert counts["full checks"] == 2
    rows = rope._rows
    launches = len(fake.launches)
    with pytest.raises(ValueError, match="row_offset"):
        rotate_cached_rows(q, k, rows.cos, rows.sin, 128, interleaved=False, rotary_dim=128)
    assert len(fake.launches) == launches  # nothing launched past the table
    k_over = buf[:, :, 2:4].transpose(1, 2)  # k's layout, sharing two heads with q
    rope(q, k_over, offset=72)
    assert len(fake.launches) == launches + 1 and counts["full checks"] == 2
    saved = plans.disjoint
    try:
        plans.disjoint = lambda plan, ptrs: False
        got = rope(q, k, offset=72)  # not launched by the plan; the C kernel's general call
    finally:
        plans.disjoint = saved
    assert len(fake.launches) == launches + 1
    window = (rope.cos_cached[72:73][None], rope.sin_cached[72:73][None])  # (1, 1, r/2)
    want = reference(q, k, *window, "half", None)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_triton_planned_in_place_and_positions_do_constant_work(triton_planned):
    """On CUDA, apply_rotary in place and by positions (2-d int64, 1-d int32, and in place by
    positions) on a seen layout build no layout key, run no full check and no plan build, and make
    one pre-bound launch per call: in place into q and k themselves (their version counters
    bumped), by positions with the positions tensor as the kernel reads it; cProfile counts the same
    Python calls at every call. Launch stubbed, CPU tensors standing for CUDA ones."""
    from posenc.rope.kernels import plans, triton_rope

    fake, counts, _ = triton_planned
    names = [p.name for p in triton_rope._rope_kernel.params]
    table_cos, table_sin = torch.rand(64, 64), torch.rand(64, 64)  # (rows, r/2): a module's cache
    window = (table_cos[5:6][None], table_sin[5:6][None])  # (1, 1, r/2)
    cases = {
        "in place": (window, dict(inplace=True)),
        "positions": ((table_cos, table_sin), dict(positions=torch.tensor([[5]]))),
        "positions 1-d int32": ((table_cos, table_sin), dict(positions=torch.tensor([5], dtype=torch.int32))),
        "in place by positions": ((table_cos, table_sin), dict(inplace=True, positions=torch.tensor([[5]]))),
    }
    for label, ((cos, sin), options) in cases.items():
        _, q, k = _projection()
        launches = len(fake.launches)
        apply_rotary(q, k, cos, sin, **options)  # plans the layout (its kernel plan may be an earlier case's)
        first = dict(counts, plans=plans.STATS["plans"], launches=len(fake.launches))
        assert first["launches"] == launches + 1, label
        version = q._version
        per_call = []
        for _ in range(2):
            count, out = python_calls_per_call(lambda: apply_rotary(q, k, cos, sin, **options))  # noqa: B023
            per_call.append(count)
        assert dict(counts, plans=plans.STATS["plans"], launches=first["launches"]) == first, label
        launched = fake.launches[first["launches"] :]
        assert len(launched) == 100 and {kind for kind, _ in launched} == {"pre-bound"}, label
        direct = dict(zip(names, launched[-1][1][9:]))
        if options.get("inplace"):
            assert out[0] is q and out[1] is k and direct["qo_ptr"] is q and direct["ko_ptr"] is k, label
            assert q._version == version + 200, label  # q and k share their base's counter: two bumps a call
        else:
            assert direct["qo_ptr"] is out[0] and direct["q_ptr"] is q, label
        if "positions" in options:
            assert direct["pos_ptr"] is options["positions"] and direct["rows"] == 64, label
            assert (direct["ps_b"], direct["ps_s"]) == (0, 1), label
        calls = [round(n) for n in per_call]
        # as out of place (at most 36) with the keyword arguments; in place no allocations but the
        # version bump; by positions also the positions' checks and the read-back of their bounds
        assert calls == [calls[0]] * 2 and calls[0] <= (37 if label == "in place" else 44), (label, per_call)


def test_triton_planned_forward_backward_does_constant_work_on_a_seen_layout(triton_planned):
    """On CUDA, a training step (apply_rotary on q and k that need gradients, then autograd's
    backward) on a seen layout builds no layout key, runs no full check and no plan build: the
    forward is the layout's plan run inside PlannedRotary, the backward the plan of the gradients'
    layout with the inverse rotation, one pre-bound launch each; cProfile counts the same Python
    calls at every step, for two layouts (the second with a partial rotation and a row offset).
    Launch stubbed, CPU tensors standing for CUDA ones."""
    from posenc.rope.kernels import plans, triton_rope

    fake, counts, _ = triton_planned
    names = [p.name for p in triton_rope._rope_kernel.params]
    for q_heads, kv_heads, dim, r, offset in ((32, 8, 128, 128, 0), (4, 2, 16, 8, 3)):
        _, q0, k0 = _projection(q_heads=q_heads, kv_heads=kv_heads, dim=dim)
        q, k = q0.detach().requires_grad_(), k0.detach().requires_grad_()  # leaves in transformers' layout
        cos, sin = torch.rand(1, 1 + offset, r // 2), torch.rand(1, 1 + offset, r // 2)
        grads = (torch.randn_like(q0), torch.randn_like(k0))

        def step(q=q, k=k, cos=cos, sin=sin, r=r, offset=offset, grads=grads):
            return torch.autograd.grad(apply_rotary(q, k, cos, sin, rotary_dim=r, row_offset=offset), (q, k), grads)

        assert type(apply_rotary(q, k, cos, sin, rotary_dim=r, row_offset=offset)[0].grad_fn).__name__ == (
            "PlannedRotaryBackward"
        )  # planned the forward's layout (no backward run)
        launches = len(fake.launches)
        step()  # plans the gradients' layout (inverse): a full check, a JIT launch
        first = dict(counts, plans=plans.STATS["plans"], launches=len(fake.launches))
        assert first["launches"] == launches + 2 and first["full checks"] >= 2
        kinds = [kind for kind, _ in fake.launches[-2:]]
        assert kinds == ["pre-bound", "jit"]  # the seen forward, the backward's first launch
        _, (_, args, kwargs) = fake.launches[-1]
        assert dict(zip(names, args), **kwargs)["INVERSE"] is True  # the rotation by -theta
        step()  # its launcher pre-bound now
        first["launches"] += 2
        per_call = []
        for _ in range(2):
            count, (gq, gk) = python_calls_per_call(step)
            per_call.append(count)
        assert dict(counts, plans=plans.STATS["plans"], launches=first["launches"]) == first
        launched = fake.launches[first["launches"] :]
        assert len(launched) == 200 and {kind for kind, _ in launched} == {"pre-bound"}  # two launches a step
        forward, backward = (dict(zip(names, args[9:])) for _, args in launched[-2:])
        assert backward["q_ptr"] is not forward["q_ptr"] and backward["qo_ptr"] is gq and backward["ko_ptr"] is gk
        assert forward["q_ptr"] is q and backward["row_offset"] == offset == forward["row_offset"]
        assert gq.shape == q.shape and gk.stride() == torch.empty_like(k).stride()
        calls = [round(n) for n in per_call]
        # the step's own autograd work (the Function's apply and node, the engine) and two planned
        # runs (a custom Function with two outputs and autograd.grad alone take about 110); the
        # general path took 231 (benchmarks/decode_positions.py --count-calls)
        assert calls == [calls[0]] * 2 and calls[0] <= 200, per_call


def test_triton_planned_in_place_and_positions_still_check_what_changes(triton_planned):
    """A seen in-place or by-positions layout's Triton plan still refuses per call: q and k that now
    overlap in place, or an expanded q in place, are refused before anything is written; one tensor
    as q and k is rotated once (the general path); a negative or too large position gets the general
    path's message and no launch; a new dtype is checked in full again. A layout first seen with q
    and k as one tensor is planned all the same (its checks ran on stand-in outputs), and its later
    calls launch."""
    fake, counts, _ = triton_planned
    buf = torch.randn(1, 1, 8, 16)  # (B, S, H, D)
    cos, sin = torch.rand(1, 1, 8), torch.rand(1, 1, 8)
    one = buf[:, :, :4].transpose(1, 2)  # (B, 4, S, D)
    want = reference(one, one, cos, sin, "half", None)[0]
    got = apply_rotary(one, one, cos, sin, inplace=True)  # first seen as one tensor: rotated once
    assert got[0] is one and torch.equal(one, want)
    checks, launches = counts["full checks"], len(fake.launches)
    q, k = buf[:, :, :4].transpose(1, 2), buf[:, :, 4:].transpose(1, 2)
    apply_rotary(q, k, cos, sin, inplace=True)  # the same layout, now apart: the plan launches
    assert len(fake.launches) == launches + 1 and counts["full checks"] == checks
    k_over = buf[:, :, 2:6].transpose(1, 2)  # q's layout, sharing two heads with q
    before = buf.clone()
    with pytest.raises(ValueError, match="share memory"):
        apply_rotary(q, k_over, cos, sin, inplace=True)
    assert torch.equal(buf, before) and len(fake.launches) == launches + 1
    expanded = torch.randn(1, 1, 1, 16).expand(1, 4, 1, 16)  # q's shape, its heads one memory
    with pytest.raises(ValueError, match="share memory"):  # planned for the general path, refused there
        apply_rotary(expanded, k, cos, sin, inplace=True)
    assert len(fake.launches) == launches + 1
    table_cos, table_sin = torch.rand(16, 8), torch.rand(16, 8)
    at = torch.tensor([[3]])
    apply_rotary(q, k, table_cos, table_sin, positions=at)
    launches = len(fake.launches)
    for bad, message in ((-1, "must be >= 0"), (16, "must be < 16")):
        with pytest.raises(ValueError, match=message):
            apply_rotary(q, k, table_cos, table_sin, positions=torch.tensor([[bad]]))
    assert len(fake.launches) == launches
    checks = counts["full checks"]
    apply_rotary(q.double(), k.double(), table_cos.double(), table_sin.double(), positions=at)
    assert counts["full checks"] == checks + 1
