"""One run on a GPU: is the fused rotation right there, does torch trace and capture it, how fast is it?

    PYTHONPATH=src python -u benchmarks/gpu_check.py --out gpu-check          # on the GPU machine
    PYTHONPATH=src python -u benchmarks/gpu_check.py --device cpu --dry-run --out /tmp/gpu-check

Sections, each independent (a failure prints its traceback, is recorded, and the next one runs):

1. ``environment``: versions of torch, Triton, transformers, Liger-Kernel; the device.
2. ``parity``: the Triton kernel (through :func:`posenc.apply_rotary` and directly) against the
   rotation computed in float64 from float64 angles: bfloat16, float16, float32 (and float64), both
   pair layouts, full and partial rotary, random memory layouts (transformers' transpose of a
   (batch, seq, heads, dim) buffer, q and k as views of one projection, strided last dimension,
   permuted strides), table rows by offset and by positions; repeated calls (a seen layout's
   plan) equal to the first; the backward against the float64 inverse rotation.
3. ``refusals``: aliasing that must raise ``ValueError`` before anything is written, including a
   layout seen before whose storage now overlaps.
4. ``opcheck``: ``torch.library.opcheck`` of ``torch.ops.posenc.rotary`` on the device.
5. ``compile``: ``torch.compile(fullgraph=True)`` of the op (one node, forward and backward, values
   equal to eager).
6. ``cudagraph``: a decode step under ``torch.compile(mode="reduce-overhead")`` and a manual
   ``torch.cuda.CUDAGraph`` capture of the eager call, replayed on new inputs.
7. ``table``: the issue's cases side by side in one process (CUDA events after an L2 flush and a
   synchronize, so host time counts; medians in microseconds): posenc, posenc in place,
   transformers eager, Liger (when importable), an in-place pass over the same bytes; on CUDA the
   same rows again with the host queued ahead (device time alone, against the pass's device time);
   decode host time per call; max error against float64 angles.
8. ``host_profile``: cProfile of decode calls (out of place, in place, by positions, the module's
   ``rope(q, k, offset=n)``, forward+backward): where host time goes, Python calls per call.
9. ``model``: a 4-layer 4096-wide Llama in bfloat16, decode per token (2k prompt, 64 greedy tokens)
   and an 8k-token forward, unpatched against patched by ``posenc.integrations.transformers``.
10. ``launch_shapes``: the Triton kernel alone at 16k tokens in float32 and bfloat16 under a few
   launch shapes (tile size, warps), against the pass: data for choosing the defaults.
11. ``compiled_rows``: ``torch.compile`` of transformers' function, and of posenc's entry through
   the op and through the reference, on the table's cases while time remains.

Results go to ``--out``: ``gpu_check.json`` (written after every section) and ``gpu_check.md``.
``--budget-s`` (default 290) bounds the run: later sections are skipped, and say so, once it is spent.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for gpu_check.json and gpu_check.md")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--dry-run", action="store_true", help="tiny sizes and few repeats: seconds, not minutes")
    parser.add_argument(
        "--budget-s", type=float, default=290.0, help="start no section (and no table case) after this long"
    )
    parser.add_argument("--sections", nargs="+", default=None, help="run only these sections, in this order")
    return parser.parse_args()


ARGS = _parse() if __name__ == "__main__" else None
if ARGS is not None and ARGS.device == "cpu":
    os.environ.setdefault("TRITON_INTERPRET", "1")  # the Triton kernel on CPU tensors, before triton loads

import torch  # noqa: E402

T0 = time.perf_counter()


def say(text: str) -> None:
    print(f"[{time.perf_counter() - T0:6.1f}s] {text}", flush=True)


# -- shared helpers --------------------------------------------------------------------------------
class Context:
    def __init__(self, device: str, dry: bool, budget_s: float):
        self.device = device
        self.dry = dry
        self.budget_s = budget_s
        self.results: Dict[str, Any] = {}
        self.checks: List[Dict[str, Any]] = []

    def left_s(self) -> float:
        return self.budget_s - (time.perf_counter() - T0)

    def check(self, section: str, name: str, ok: bool, detail: Any = None) -> None:
        self.checks.append({"section": section, "check": name, "ok": bool(ok), "detail": detail})
        say(f"  {'PASS' if ok else 'FAIL'} {section}: {name}" + (f" ({detail})" if detail is not None else ""))

    def sync(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()


def exact_tables(positions: torch.Tensor, rotary_dim: int, base: float = 500000.0):
    """cos/sin (P, r/2) in float64 from float64 angles, and the float32 tables the kernel reads."""
    from posenc.rope.tables import rope_cos_sin, rope_inv_freq

    cos64, sin64 = rope_cos_sin(positions.cpu(), rope_inv_freq(rotary_dim, base), dtype=torch.float64)
    return cos64, sin64


def exact_rotation(x: torch.Tensor, cos64: torch.Tensor, sin64: torch.Tensor, layout: str, r: int) -> torch.Tensor:
    """The rotation in float64 on x's values; cos64/sin64 (B|1, S, r/2)."""
    from posenc.rope.apply import rotate_reference

    c, s = cos64.to(x.device).unsqueeze(1), sin64.to(x.device).unsqueeze(1)
    return rotate_reference(x.double(), c, s, layout=layout, rotary_dim=r)


def ulp_error(got: torch.Tensor, want64: torch.Tensor, x: Optional[torch.Tensor] = None) -> float:
    """How far ``got`` is from ``want64``, in units of what a correct result may be off by (so <= 1 is
    right).

    bfloat16/float16: one unit is the last place of got's format at want's magnitude (the output is
    rounded once), plus, when the input ``x`` is given, 4 float32 epsilons of the largest |x| in the
    same row: the float32 arithmetic and float32 tables before that rounding. Without that term a
    small output from a near-cancellation (a*cos ~ b*sin) counts as several last places although
    the rotation computed exactly in float32 and rounded once gives it too.
    float32/float64: the largest |got - want| over the largest |want|, in units of the format's
    epsilon (the float32 tables are rounded too, so the error scales with the vector)."""
    if got.numel() == 0:
        return 0.0
    if got.dtype in (torch.float32, torch.float64):
        scale = float(want64.abs().max()) or 1.0
        return float((got.double() - want64).abs().max()) / scale / torch.finfo(got.dtype).eps
    info = torch.finfo(got.dtype)
    mag = want64.abs().clamp(min=info.tiny)
    _, exponent = torch.frexp(mag)
    allowed = info.eps * torch.pow(2.0, (exponent - 1).double())
    if x is not None:
        row = x.detach().double().abs().amax(dim=-1, keepdim=True).to(allowed.device)
        allowed = allowed + 4 * torch.finfo(torch.float32).eps * row
    return float(((got.double() - want64).abs() / allowed).max())


def memory_layout(kind: str, shape: Tuple[int, int, int, int], dtype, device, gen) -> torch.Tensor:
    """A (B, H, S, D) tensor of random values in one of the layouts attention produces."""
    b, h, s, d = shape

    def rnd(*size):
        return torch.randn(*size, generator=gen, dtype=torch.float64).to(device=device, dtype=dtype)

    if kind == "contiguous":
        return rnd(b, h, s, d)
    if kind == "transformers":  # a transpose of a (B, S, H, D) projection output
        return rnd(b, s, h, d).transpose(1, 2)
    if kind == "strided-last-dim":
        return rnd(b, h, s, 2 * d)[..., ::2]
    if kind == "permuted":  # (S, D, B, H) storage, seen as (B, H, S, D)
        return rnd(s, d, b, h).permute(2, 3, 0, 1)
    raise KeyError(kind)


LAYOUTS = ("contiguous", "transformers", "strided-last-dim", "permuted")


# -- 1. environment ----------------------------------------------------------------------------------
def section_environment(ctx: Context) -> Dict[str, Any]:
    env: Dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__, "device": ctx.device}
    for name in ("triton", "transformers", "liger_kernel"):
        try:
            module = __import__(name)
            env[name] = getattr(module, "__version__", "installed")
        except Exception as exc:  # absent or broken: the sections that need it say so
            env[name] = f"unavailable ({type(exc).__name__})"
    if env["liger_kernel"] == "installed":
        try:
            from importlib.metadata import version

            env["liger_kernel"] = version("liger-kernel")
        except Exception:
            pass
    if ctx.device == "cuda":
        props = torch.cuda.get_device_properties(0)
        env.update(gpu=props.name, cuda=torch.version.cuda, gpu_memory_gib=round(props.total_memory / 2**30, 1))
    env["triton_interpret"] = os.environ.get("TRITON_INTERPRET", "")
    import posenc

    env["posenc"] = getattr(posenc, "__version__", "checkout")
    for key, value in env.items():
        say(f"  {key}: {value}")
    return env


# -- 2. parity ---------------------------------------------------------------------------------------
def section_parity(ctx: Context) -> Dict[str, Any]:
    from posenc.rope.apply import apply_rotary

    gen = torch.Generator().manual_seed(0)
    if ctx.dry:
        b, hq, hk, s, d = 2, 4, 2, 5, 16
        dtypes = [torch.float32, torch.bfloat16]
    else:
        b, hq, hk, s, d = 2, 8, 2, 33, 128
        dtypes = [torch.bfloat16, torch.float16, torch.float32, torch.float64]
    # bf16/fp16: ulps of each output; fp32: epsilons of the largest output (tables rounded to fp32)
    limit = {torch.float32: 16.0, torch.float64: 16.0, torch.bfloat16: 1.0, torch.float16: 1.0}
    worst: Dict[str, float] = {}
    failures = []
    cases = 0
    for dtype in dtypes:
        table_dtype = torch.float64 if dtype == torch.float64 else torch.float32
        for layout in ("half", "interleaved"):
            for r in (d, d // 2):
                # every memory layout for one combination; transformers' for the rest (each
                # combination is a Triton compile, and the run has minutes, not hours)
                every = dtype == torch.bfloat16 and layout == "half" and r == d
                for kind in LAYOUTS if every else ("transformers",):
                    q = memory_layout(kind, (b, hq, s, d), dtype, ctx.device, gen)
                    k = memory_layout(kind, (b, hk, s, d), dtype, ctx.device, gen)
                    for rows in ("consecutive", "offset", "positions"):
                        pos = torch.arange(s) + (97 if rows == "offset" else 0)
                        if rows == "positions":
                            pos = torch.randint(0, 4 * s, (b, s), generator=gen)
                        cos64, sin64 = exact_tables(pos.reshape(-1, s) if pos.dim() == 2 else pos[None], r)
                        want_q = exact_rotation(q, cos64, sin64, layout, r)
                        want_k = exact_rotation(k, cos64, sin64, layout, r)
                        if rows == "consecutive":
                            cos, sin = cos64.to(ctx.device, table_dtype), sin64.to(ctx.device, table_dtype)
                            extra: Dict[str, Any] = {}
                        elif rows == "offset":
                            table, tsin = exact_tables(torch.arange(97 + s + 3), r)
                            cos, sin = table[None].to(ctx.device, table_dtype), tsin[None].to(ctx.device, table_dtype)
                            extra = {"row_offset": 97}
                        else:
                            table, tsin = exact_tables(torch.arange(4 * s), r)
                            cos, sin = table.to(ctx.device, table_dtype), tsin.to(ctx.device, table_dtype)
                            extra = {"positions": pos.to(ctx.device)}
                        args = (q, k, cos, sin)
                        kwargs = dict(layout=layout, rotary_dim=r, **extra)
                        first = apply_rotary(*args, **kwargs)
                        again = apply_rotary(*args, **kwargs)  # a seen layout: its cached plan
                        key = f"{str(dtype)[6:]}"
                        err = max(ulp_error(first[0], want_q, q), ulp_error(first[1], want_k, k))
                        worst[key] = max(worst.get(key, 0.0), err)
                        cases += 1
                        label = f"{key}/{layout}/r{r}/{kind}/{rows}"
                        if err > limit[dtype]:
                            failures.append(f"{label}: {err:.2f} ulp")
                        if not (torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])):
                            failures.append(f"{label}: the repeated call differs from the first")
    ctx.check("parity", f"forward within tolerance and repeatable on {cases} cases", not failures, failures[:5] or None)
    for key, value in worst.items():
        say(f"  worst error {key}: {value:.3g} (<= 1 is right; see ulp_error)")

    # backward: the gradient of a rotation is the inverse rotation, in float64
    grad_fail = []
    for dtype in (torch.float32, torch.bfloat16):
        for layout in ("half", "interleaved"):
            q = memory_layout("transformers", (b, hq, s, d), dtype, ctx.device, gen).requires_grad_()
            k = memory_layout("transformers", (b, hk, s, d), dtype, ctx.device, gen).requires_grad_()
            gq, gk = torch.randn_like(q), torch.randn_like(k)
            cos64, sin64 = exact_tables(torch.arange(s)[None] + 11, d)
            cos, sin = cos64.to(ctx.device, torch.float32), sin64.to(ctx.device, torch.float32)
            torch.autograd.backward(apply_rotary(q, k, cos, sin, layout=layout), (gq, gk))
            want_q = exact_rotation(gq, cos64, -sin64, layout, d)
            want_k = exact_rotation(gk, cos64, -sin64, layout, d)
            err = max(ulp_error(q.grad, want_q, gq), ulp_error(k.grad, want_k, gk))
            worst[f"backward/{str(dtype)[6:]}"] = max(worst.get(f"backward/{str(dtype)[6:]}", 0.0), err)
            if err > limit[dtype]:
                grad_fail.append(f"{dtype}/{layout}: {err:.2f} ulp")
    ctx.check("parity", "backward = inverse rotation within tolerance", not grad_fail, grad_fail or None)
    return {
        "cases": cases,
        "worst": worst,
        "failures": failures,
    }


# -- 3. refusals -------------------------------------------------------------------------------------
def section_refusals(ctx: Context) -> Dict[str, Any]:
    from posenc.rope.apply import apply_rotary
    from posenc.rope.kernels import triton_rope

    dt = torch.bfloat16 if ctx.device == "cuda" else torch.float32
    cos = torch.rand(1, 6, 8, device=ctx.device)
    outcomes = {}

    def refused(name: str, fn: Callable[[], Any], untouched: List[torch.Tensor]) -> None:
        before = [t.clone() for t in untouched]
        try:
            fn()
            ok, detail = False, "no error"
        except ValueError as exc:
            ctx.sync()
            ok = all(torch.equal(a, b) for a, b in zip(before, untouched))
            detail = str(exc)[:100] if ok else "raised, but wrote first"
        outcomes[name] = ok
        ctx.check("refusals", name, ok, detail)

    buf = torch.randn(1, 6, 4, 16, device=ctx.device, dtype=dt)
    q, k = buf[:, :, :3].transpose(1, 2), buf[:, :, 1:4].transpose(1, 2)
    refused("in place, q and k share a head", lambda: apply_rotary(q, k, cos, cos, inplace=True), [buf])
    wide = torch.randn(1, 1, 6, 16, device=ctx.device, dtype=dt).expand(1, 3, 6, 16)
    other = torch.randn(1, 1, 6, 16, device=ctx.device, dtype=dt)
    refused("in place into an expanded q", lambda: apply_rotary(wide, other, cos, cos, inplace=True), [other])
    # a layout seen before (disjoint), then the same shapes and strides with overlapping storage
    a = torch.randn(1, 6, 4, 16, device=ctx.device, dtype=dt)
    b = torch.randn(1, 6, 4, 16, device=ctx.device, dtype=dt)
    qa, kb = a[:, :, :2].transpose(1, 2), b[:, :, :2].transpose(1, 2)
    triton_rope.rotate(qa, kb, qa, kb, cos, cos, interleaved=False, rotary_dim=16)
    qa, ka = a[:, :, :2].transpose(1, 2), a[:, :, 1:3].transpose(1, 2)
    refused(
        "cached layout whose storage now overlaps",
        lambda: triton_rope.rotate(qa, ka, qa, ka, cos, cos, interleaved=False, rotary_dim=16),
        [a],
    )
    src = torch.randn(1, 2, 6, 16, device=ctx.device, dtype=dt)
    refused(
        "k_out overlapping q (out of place)",
        lambda: triton_rope.rotate(
            src, src[:, :1], torch.empty_like(src), src[:, 1:], cos, cos, interleaved=False, rotary_dim=16
        ),
        [src],
    )
    return outcomes


# -- 4. opcheck --------------------------------------------------------------------------------------
def section_opcheck(ctx: Context) -> Dict[str, Any]:
    import posenc.rope.apply  # noqa: F401  (registers torch.ops.posenc.rotary)

    gen = torch.Generator().manual_seed(1)
    out = {}
    for dtype in (torch.float32,) if ctx.dry else (torch.float32, torch.bfloat16):
        kinds = ("transformers", "strided-last-dim") if dtype == torch.float32 and not ctx.dry else ("transformers",)
        for kind in kinds:
            q = memory_layout(kind, (2, 4, 5, 16), dtype, ctx.device, gen)
            k = memory_layout(kind, (2, 2, 5, 16), dtype, ctx.device, gen)
            cos = torch.rand(1, 9, 8, generator=gen).to(ctx.device)
            pos = torch.tensor([[0, 3, 8, 1, 1], [2, 2, 0, 7, 4]], device=ctx.device)
            for positions, offset in ((None, 0), (None, 4), (pos, 0)):
                args = (q, k, cos, cos.flip(1), positions, offset, 16, kind == "transformers", False)
                name = f"{str(dtype)[6:]}/{kind}/{'positions' if positions is not None else f'offset{offset}'}"
                try:
                    torch.library.opcheck(torch.ops.posenc.rotary.default, args)
                    if dtype == torch.float32:
                        grads = (q.detach().clone().requires_grad_(), k.detach().clone().requires_grad_(), *args[2:])
                        torch.library.opcheck(torch.ops.posenc.rotary.default, grads)
                    out[name] = "ok"
                except Exception as exc:
                    if all(v == "ok" for v in out.values()):
                        traceback.print_exc()  # the first failure in full
                    out[name] = f"{type(exc).__name__}: {str(exc)[:200]}"
    bad = {k: v for k, v in out.items() if v != "ok"}
    ctx.check("opcheck", f"torch.library.opcheck on {len(out)} cases", not bad, bad or None)
    return out


# -- 5. compile ---------------------------------------------------------------------------------------
def _recording_backend(graphs: List[List[Any]], inner: str):
    def backend(gm, example_inputs):
        graphs.append([n.target for n in gm.graph.nodes if n.op == "call_function"])
        if inner == "inductor":
            from torch._inductor.compile_fx import compile_fx

            return compile_fx(gm, example_inputs)
        return gm.forward

    return backend


def _op_call(a: torch.Tensor, b: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """``torch.ops.posenc.rotary`` on q, k and tables as :func:`posenc.apply_rotary` takes them."""
    c3 = (cos if cos.dim() == 3 else cos[None]).float()  # (B|1, S, r/2)
    s3 = (sin if sin.dim() == 3 else sin[None]).float()
    return torch.ops.posenc.rotary(a, b, c3, s3, None, 0, 2 * c3.shape[-1], False, False)


def section_compile(ctx: Context) -> Dict[str, Any]:
    """torch.compile(fullgraph=True) of the op: one node, forward and backward equal to eager (the entry
    traces the reference under compile, which tests/rope/test_kernel_compile.py checks)."""
    import posenc.rope  # noqa: F401  (registers torch.ops.posenc.rotary)
    from posenc.rope.apply import apply_rotary

    gen = torch.Generator().manual_seed(2)
    dtype = torch.bfloat16 if ctx.device == "cuda" else torch.float32
    b, hq, hk, s, d = (1, 4, 2, 8, 16) if ctx.dry else (2, 32, 8, 256, 128)
    q = memory_layout("transformers", (b, hq, s, d), dtype, ctx.device, gen)
    k = memory_layout("transformers", (b, hk, s, d), dtype, ctx.device, gen)
    cos64, sin64 = exact_tables(torch.arange(s)[None], d)
    cos, sin = cos64.to(ctx.device, torch.float32), sin64.to(ctx.device, torch.float32)
    graphs: List[List[Any]] = []
    inner = "inductor" if ctx.device == "cuda" else "aot_eager"
    torch._dynamo.reset()
    fn = torch.compile(lambda a, c: _op_call(a, c, cos, sin), backend=_recording_backend(graphs, inner), fullgraph=True)
    got = fn(q, k)
    want = apply_rotary(q, k, cos, sin)
    same = all(torch.equal(x, y) for x, y in zip(got, want))
    op = torch.ops.posenc.rotary
    has_op = any({op, op.default} & set(g) for g in graphs)
    ctx.check("compile", "fullgraph op: one graph with the op, values equal eager", same and has_op, graphs[:1])
    qg, kg = q.detach().clone().requires_grad_(), k.detach().clone().requires_grad_()
    qe, ke = q.detach().clone().requires_grad_(), k.detach().clone().requires_grad_()
    gq, gk = torch.randn_like(q), torch.randn_like(k)
    torch._dynamo.reset()
    trained = torch.compile(lambda a, c: _op_call(a, c, cos, sin), backend=inner, fullgraph=True)
    torch.autograd.backward(trained(qg, kg), (gq, gk))
    torch.autograd.backward(apply_rotary(qe, ke, cos, sin), (gq, gk))
    ok = torch.equal(qg.grad, qe.grad) and torch.equal(kg.grad, ke.grad)
    ctx.check("compile", "fullgraph op forward+backward: gradients equal eager", ok)
    return {"forward_equal": same, "op_in_graph": has_op, "backward_equal": ok}


# -- 6. CUDA graphs -------------------------------------------------------------------------------
def section_cudagraph(ctx: Context) -> Dict[str, Any]:
    if ctx.device != "cuda":
        say("  skipped: CUDA graphs need a CUDA device")
        return {"skipped": "needs CUDA"}
    from posenc.rope.apply import apply_rotary

    gen = torch.Generator().manual_seed(3)
    dtype = torch.bfloat16
    proj = torch.randn(1, 1, 48 * 128, generator=gen).to("cuda", dtype)  # one token's q|k|v projection
    table, tsin = exact_tables(torch.arange(4096), 128)
    cos_t, sin_t = table[None].cuda().float(), tsin[None].cuda().float()

    def step(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        x = qkv.view(1, 1, 48, 128)
        q, k = x[:, :, :32].transpose(1, 2), x[:, :, 32:40].transpose(1, 2)  # transformers' layout
        return apply_rotary(q, k, cos, sin)

    out = {}
    compiled = torch.compile(step, mode="reduce-overhead", fullgraph=True)
    worst = 0.0
    for t in range(6):  # the first calls warm up and record; later ones replay the graph
        x = torch.randn(1, 1, 48 * 128, generator=gen).to("cuda", dtype)
        c, s = cos_t[:, 100 + t : 101 + t].clone(), sin_t[:, 100 + t : 101 + t].clone()
        got = [o.clone() for o in compiled(x, c, s)]
        want = step(x, c, s)
        worst = max(worst, max(float((g.float() - w.float()).abs().max()) for g, w in zip(got, want)))
    ok = worst == 0.0
    ctx.check("cudagraph", "reduce-overhead decode step replays equal to eager", ok, f"max diff {worst}")
    out["reduce_overhead_max_diff"] = worst
    # a manual capture of the eager call (static input buffers, new values copied in)
    static_x = torch.zeros_like(proj)
    static_c, static_s = cos_t[:, :1].clone(), sin_t[:, :1].clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step(static_x, static_c, static_s)  # warm up: compile the kernel, build the plan
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = step(static_x, static_c, static_s)
    diffs = []
    for t in range(5):
        static_x.copy_(torch.randn(1, 1, 48 * 128, generator=gen).to("cuda", dtype))
        static_c.copy_(cos_t[:, 200 + t : 201 + t])
        static_s.copy_(sin_t[:, 200 + t : 201 + t])
        graph.replay()
        want = step(static_x, static_c, static_s)
        diffs.append(max(float((g.float() - w.float()).abs().max()) for g, w in zip(static_out, want)))
    ok = max(diffs) == 0.0
    ctx.check("cudagraph", "eager call captured in a CUDAGraph replays equal to eager", ok, f"max diff {max(diffs)}")
    out["manual_capture_max_diff"] = max(diffs)
    return out


# -- 7. the table ----------------------------------------------------------------------------------
CASES = [
    # name, batch, seq, dtype, mode
    ("prefill 4k bf16, forward", 1, 4096, "bfloat16", "forward"),
    ("prefill 16k bf16, forward", 1, 16384, "bfloat16", "forward"),
    ("prefill 16k fp32, forward", 1, 16384, "float32", "forward"),
    ("prefill 4k bf16, forward+backward", 1, 4096, "bfloat16", "forward+backward"),
    ("prefill 16k bf16, forward+backward", 1, 16384, "bfloat16", "forward+backward"),
    ("decode 1 token, batch 1, bf16", 1, 1, "bfloat16", "forward"),
    ("decode 1 token, batch 64, bf16", 64, 1, "bfloat16", "forward"),
]
DRY_CASES = [
    ("prefill 64 fp32, forward", 1, 64, "float32", "forward"),
    ("prefill 64 bf16, forward+backward", 1, 64, "bfloat16", "forward+backward"),
    ("decode 1 token, batch 2, bf16", 2, 1, "bfloat16", "forward"),
]
PASS = "pass"


class Timer:
    """Seconds of one call: CUDA events around the call after an L2 flush and a synchronize (the GPU
    idles while the host launches, so host time shows); wall clock on CPU. With ``ahead=True`` the
    GPU is first held busy (``torch.cuda._sleep``) long enough for the host to queue the whole call,
    so the events time the device's work alone, back to back: device time separate from host time."""

    #: How long the GPU is held before an ``ahead`` sample: longer than any row's host time.
    HOLD_S = 5e-3

    def __init__(self, device: str):
        self.cuda = device == "cuda"
        self.hold_cycles = 0  # 0: no device-time samples (CPU, or a torch without torch.cuda._sleep)
        if self.cuda:
            l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or (64 << 20)
            self.flush = torch.empty(max(2 * l2, 64 << 20), dtype=torch.uint8, device="cuda")
            try:
                self.hold_cycles = self._cycles_for(self.HOLD_S)
            except Exception as exc:
                say(f"  device time alone is not measured: {type(exc).__name__}: {exc}")

    @staticmethod
    def _cycles_for(seconds: float) -> int:
        """``torch.cuda._sleep`` cycles that take ``seconds`` on this GPU (measured once)."""
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        cycles = 10_000_000
        torch.cuda._sleep(cycles)  # warm up
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        per_second = cycles / max(start.elapsed_time(end) / 1e3, 1e-6)
        return int(per_second * seconds)

    def sample(self, fn: Callable[[], Any], ahead: bool = False) -> float:
        if self.cuda:
            self.flush.zero_()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if ahead:
                torch.cuda._sleep(self.hold_cycles)  # the host queues the call while the GPU waits
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    def host(self, fn: Callable[[], Any], calls: int) -> float:
        """Host seconds per call, many calls back to back (no synchronize in between)."""
        if self.cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        elapsed = time.perf_counter() - t0
        if self.cuda:
            torch.cuda.synchronize()
        return elapsed / calls


def _liger() -> Optional[Callable[..., Any]]:
    try:
        from liger_kernel.transformers.rope import liger_rotary_pos_emb

        return liger_rotary_pos_emb
    except Exception:
        pass
    try:
        from liger_kernel.ops.rope import LigerRopeFunction

        return lambda q, k, cos, sin: LigerRopeFunction.apply(q, k, cos, sin)
    except Exception:
        return None


def _transformers_rope() -> Tuple[str, Callable[..., Any]]:
    try:
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        return "transformers", apply_rotary_pos_emb
    except Exception:
        from posenc.measuring.bench import eager_rotary

        return "posenc.measuring.bench.eager_rotary (transformers not importable)", eager_rotary


def _case_tensors(ctx: Context, batch: int, seq: int, dtype_name: str):
    """q, k as transposes of (B, S, H, D) buffers (Llama-3-8B heads), posenc's half tables in
    float32 from float64 angles at positions 100.., and transformers' full-width tables in the
    model dtype, (B|1, S, D)."""
    dtype = getattr(torch, dtype_name)
    hq, hk, d = (4, 2, 16) if ctx.dry else (32, 8, 128)
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(batch, seq, hq, d, generator=gen).to(ctx.device, dtype).transpose(1, 2)
    k = torch.randn(batch, seq, hk, d, generator=gen).to(ctx.device, dtype).transpose(1, 2)
    cos64, sin64 = exact_tables(torch.arange(100, 100 + seq)[None], d)  # (1, S, d/2)
    cos, sin = cos64.to(ctx.device, torch.float32), sin64.to(ctx.device, torch.float32)
    cos_full = torch.cat((cos64, cos64), -1).to(ctx.device, dtype)  # (1, S, d), as transformers builds it
    sin_full = torch.cat((sin64, sin64), -1).to(ctx.device, dtype)
    return q, k, cos, sin, cos_full, sin_full, cos64, sin64


def _rows(ctx: Context, case, compiled: Dict[str, Any]) -> Tuple[Dict[str, Callable[[], Any]], Dict[str, Any]]:
    """The callables of one case, and the tensors to check their accuracy with."""
    from posenc.rope.apply import apply_rotary

    _, batch, seq, dtype_name, mode = case
    q, k, cos, sin, cos_full, sin_full, cos64, sin64 = _case_tensors(ctx, batch, seq, dtype_name)
    _, hf = _transformers_rope()
    liger = _liger()
    impls: Dict[str, Callable[[Any, Any], Any]] = {
        "posenc": lambda a, b: apply_rotary(a, b, cos, sin),
        "transformers eager": lambda a, b: hf(a, b, cos_full, sin_full),
    }
    for name, fn in compiled.items():
        impls[name] = (lambda f: lambda a, b: f(a, b, cos, sin, cos_full, sin_full))(fn)
    if liger is not None:
        # Liger may write into its inputs: it gets its own copies, refreshed outside the timing
        impls["Liger"] = lambda a, b: liger(a, b, cos_full, sin_full)
    rows: Dict[str, Callable[[], Any]] = {}
    if mode == "forward":
        for name, fn in impls.items():
            if name == "Liger":
                qc, kc = q.clone(), k.clone()
                rows[name] = (lambda f, a, b: lambda: f(a, b))(fn, qc, kc)
            else:
                rows[name] = (lambda f: lambda: f(q, k))(fn)
        rows["posenc in place"] = lambda: apply_rotary(q, k, cos, sin, inplace=True)
        rows[PASS] = lambda: (q.mul_(1.0), k.mul_(1.0))
    else:
        qb = q.transpose(1, 2).detach().clone().requires_grad_()  # (B, S, H, D) leaves, like a projection
        kb = k.transpose(1, 2).detach().clone().requires_grad_()
        gq, gk = torch.randn_like(q), torch.randn_like(k)

        def step(fn):
            def go():
                qb.grad = kb.grad = None
                out = fn(qb.transpose(1, 2), kb.transpose(1, 2))
                torch.autograd.backward(out, (gq, gk))

            return go

        for name, fn in impls.items():
            rows[name] = step(fn)
        rows[PASS] = lambda: (q.mul_(1.0), k.mul_(1.0), gq.mul_(1.0), gk.mul_(1.0))
    accuracy = {"q": q, "k": k, "cos64": cos64, "sin64": sin64, "impls": impls}
    return rows, accuracy


def _time_rows(
    ctx: Context, timer: Timer, rows: Dict[str, Callable[[], Any]], repeats: int, ahead: bool = False
) -> Dict[str, float]:
    """Medians in microseconds (``ahead``: device time alone, see :class:`Timer`); a row that fails
    its warm-up is dropped (and says why), the others are still timed."""
    for name, fn in list(rows.items()):
        try:
            for _ in range(2):
                fn()  # compile, build plans, warm caches
            ctx.sync()
        except Exception as exc:
            traceback.print_exc()
            say(f"  row {name} dropped: {type(exc).__name__}: {str(exc)[:200]}")
            ctx.check("table", f"row {name} runs", False, f"{type(exc).__name__}: {str(exc)[:200]}")
            del rows[name]
    samples: Dict[str, List[float]] = {name: [] for name in rows}
    for _ in range(repeats):
        for name, fn in rows.items():  # round-robin: drifting clocks hit every row alike
            samples[name].append(timer.sample(fn, ahead))
    return {name: statistics.median(v) * 1e6 for name, v in samples.items()}


def _accuracy(acc: Dict[str, Any]) -> Dict[str, float]:
    q, cos64, sin64 = acc["q"], acc["cos64"], acc["sin64"]
    want = exact_rotation(q, cos64, sin64, "half", q.shape[-1])
    out = {}
    for name, fn in acc["impls"].items():
        try:
            got = fn(q.clone(), acc["k"].clone())[0]
            out[name] = float((got.double() - want).abs().max())
        except Exception as exc:
            out[name] = float("nan")
            say(f"  accuracy of {name} failed: {type(exc).__name__}: {exc}")
    return out


def _run_table(
    ctx: Context, compiled: Callable[[], Dict[str, Any]], section: str, limit: Optional[int] = None
) -> Dict[str, Any]:
    timer = Timer(ctx.device)
    repeats = 3 if ctx.dry else 15
    table: Dict[str, Any] = {}
    for case in (DRY_CASES if ctx.dry else CASES)[:limit]:
        name, _, seq, _, mode = case
        if ctx.left_s() < 45:  # a case with compiled rows can take that long
            say(f"  {name}: skipped, the time budget is spent")
            table[name] = {"skipped": "time budget"}
            continue
        try:
            rows, acc = _rows(ctx, case, compiled())
            medians = _time_rows(ctx, timer, rows, repeats if seq > 1 else 3 * repeats)
            entry: Dict[str, Any] = {"median_us": medians}
            if PASS in medians:
                entry["x_pass"] = {k: v / medians[PASS] for k, v in medians.items()}
            # device time alone: the kernels' own ratio to the pass, without host time (a dry run on
            # CPU runs the same code, where it is wall time again)
            if timer.hold_cycles or ctx.dry:
                device = _time_rows(ctx, timer, dict(rows), repeats, ahead=True)
                entry["device_us"] = device
                if PASS in device:
                    entry["device_x_pass"] = {k: v / device[PASS] for k, v in device.items()}
            if seq == 1:
                entry["host_us_per_call"] = {
                    k: timer.host(fn, 20 if ctx.dry else 200) * 1e6 for k, fn in rows.items() if k != PASS
                }
            if mode == "forward":
                entry["max_error_vs_float64"] = _accuracy(acc)
            table[name] = entry
            say(f"  {name}: " + ", ".join(f"{k} {v:.1f}" for k, v in medians.items()) + " µs")
        except Exception as exc:
            traceback.print_exc()
            table[name] = {"error": f"{type(exc).__name__}: {exc}"}
            ctx.check(section, name, False, table[name]["error"])
    return table


def section_table(ctx: Context) -> Dict[str, Any]:
    label, _ = _transformers_rope()
    say(f"  transformers' rotation: {label}; Liger: {'yes' if _liger() else 'not importable'}")
    return {"transformers_function": label, "liger": _liger() is not None, "cases": _run_table(ctx, dict, "table")}


def section_compiled_rows(ctx: Context) -> Dict[str, Any]:
    """The compiled rows, each case with fresh compiled functions (no recompiles while timing)."""
    from posenc.rope.apply import apply_rotary

    _, hf = _transformers_rope()

    def compiled_set() -> Dict[str, Any]:
        torch._dynamo.reset()

        def hf_call(a, b, c, s, cf, sf):
            return hf(a, b, cf, sf)

        def posenc_call(a, b, c, s, cf, sf):
            return apply_rotary(a, b, c, s)

        def op_call(a, b, c, s, cf, sf):
            return _op_call(a, b, c, s)

        return {
            "torch.compile of transformers": torch.compile(hf_call, dynamic=False),
            "posenc compiled (op)": torch.compile(op_call, dynamic=False),
            "posenc compiled (reference)": torch.compile(posenc_call, dynamic=False),
        }

    return {"cases": _run_table(ctx, compiled_set, "compiled_rows", limit=1 if ctx.dry else None)}


# -- 8a. where a decode call's host time goes --------------------------------------------------------
def section_host_profile(ctx: Context) -> Dict[str, Any]:
    """cProfile of decode calls (batch 1, bfloat16, transformers' layout), eager and with autograd
    (forward+backward): the functions that take the host's time, per call."""
    import cProfile
    import pstats

    from posenc import RotaryEmbedding
    from posenc.rope.apply import apply_rotary

    q, k, cos, sin, *_ = _case_tensors(ctx, 1, 1, "bfloat16")
    q_in, k_in = q.clone(), k.clone()  # rotated again at every in-place call
    rope = RotaryEmbedding(q.shape[-1], base=500000.0, max_position_embeddings=4096).to(ctx.device)
    at = torch.tensor([[100]], device=ctx.device)  # (B, S): a row named by position
    qb = q.transpose(1, 2).detach().clone().requires_grad_()
    kb = k.transpose(1, 2).detach().clone().requires_grad_()
    gq, gk = torch.randn_like(q), torch.randn_like(k)

    def backward_step() -> None:
        qb.grad = kb.grad = None
        torch.autograd.backward(apply_rotary(qb.transpose(1, 2), kb.transpose(1, 2), cos, sin), (gq, gk))

    out: Dict[str, Any] = {}
    calls = 100 if ctx.dry else 500
    modes = {
        "forward": lambda: apply_rotary(q, k, cos, sin),
        "in place": lambda: apply_rotary(q_in, k_in, cos, sin, inplace=True),
        # validate=True reads the positions' bounds back: one synchronisation per call
        "positions": lambda: apply_rotary(q, k, rope.cos_cached, rope.sin_cached, positions=at),
        "module decode": lambda: rope(q, k, offset=100),
        "forward+backward": backward_step,
    }
    for name, fn in modes.items():
        for _ in range(20):
            fn()
        ctx.sync()
        profiler = cProfile.Profile()
        t0 = time.perf_counter()
        profiler.enable()
        for _ in range(calls):
            fn()
        profiler.disable()
        ctx.sync()
        wall = (time.perf_counter() - t0) / calls * 1e6
        stats = pstats.Stats(profiler)
        rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:12]  # by own time
        top = [
            {"function": f"{Path(f).name}:{line}({fn_name})", "us_per_call": tt / calls * 1e6, "calls": nc / calls}
            for (f, line, fn_name), (cc, nc, tt, ct, callers) in rows
        ]
        out[name] = {
            "us_per_call_profiled": wall,
            "python_calls_per_call": stats.total_calls / calls,
            "top_own_time": top,
        }
        say(
            f"  {name}: {wall:.1f} µs per call under the profiler; top: "
            + ", ".join(f"{t['function']} {t['us_per_call']:.1f}" for t in top[:5])
        )
    return out


# -- 8b. launch shapes ------------------------------------------------------------------------------
TUNING = [  # (max_tile, num_warps): the default first
    (4096, None),
    (4096, 8),
    (2048, 4),
    (8192, 8),
    (1024, 2),
]


def section_launch_shapes(ctx: Context) -> Dict[str, Any]:
    """The Triton kernel alone (outputs preallocated) under alternative launch shapes, against the
    pass, for the cases where the kernel's own time matters: 16k float32 and bfloat16 prefill."""
    from posenc.rope.kernels import plans, triton_rope

    timer = Timer(ctx.device)
    seqs = (4,) if ctx.dry else (16384,)
    shapes = TUNING[:2] if ctx.dry else TUNING  # the interpreter takes seconds per call
    out: Dict[str, Any] = {}
    saved = dict(triton_rope.LAUNCH)
    try:
        for dtype_name in ("float32", "bfloat16"):
            for seq in seqs:
                q, k, cos, sin, *_ = _case_tensors(ctx, 1, seq, dtype_name)
                q_out, k_out = torch.empty_like(q), torch.empty_like(k)
                rows: Dict[str, Callable[[], Any]] = {}
                operands = (q, k, q_out, k_out, cos, sin)
                for max_tile, warps in shapes:

                    def run(tile=max_tile, nw=warps, ops=operands):
                        if triton_rope.LAUNCH != {"max_tile": tile, "num_warps": nw}:
                            triton_rope.LAUNCH.update(max_tile=tile, num_warps=nw)
                            plans.clear()  # plans hold the launch shape
                        triton_rope.rotate(*ops, interleaved=False, rotary_dim=ops[0].shape[-1])

                    rows[f"tile {max_tile}, warps {warps or 'default'}"] = run
                rows[PASS] = lambda a=q, b=k: (a.mul_(1.0), b.mul_(1.0))
                medians = _time_rows(ctx, timer, rows, 1 if ctx.dry else 11)
                name = f"{dtype_name} seq {seq}"
                out[name] = {k: {"us": v, "x_pass": v / medians[PASS]} for k, v in medians.items()}
                say(f"  {name}: " + ", ".join(f"{k} {v:.1f}" for k, v in medians.items()) + " µs")
    finally:
        triton_rope.LAUNCH.clear()
        triton_rope.LAUNCH.update(saved)
        plans.clear()
    return out


# -- 8. the model ------------------------------------------------------------------------------------
def section_model(ctx: Context) -> Dict[str, Any]:
    from transformers import LlamaConfig, LlamaForCausalLM

    from posenc.integrations.transformers import patch

    if ctx.dry:
        dims = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=64)
        prompt, new, long_seq, vocab = 8, 2, 32, 128
    else:
        dims = dict(
            hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, head_dim=128, intermediate_size=4096
        )
        prompt, new, long_seq, vocab = 2048, 64, 8192, 1024
    config = LlamaConfig(
        **dims,
        num_hidden_layers=4,
        vocab_size=vocab,
        max_position_embeddings=131072,
        rope_theta=500000.0,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    dtype = torch.bfloat16 if ctx.device == "cuda" else torch.float32
    model = LlamaForCausalLM(config).eval().to(ctx.device, dtype)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (1, prompt), generator=gen).to(ctx.device)
    long_ids = torch.randint(0, vocab, (1, long_seq), generator=gen).to(ctx.device)

    def generate(tokens: int) -> float:
        ctx.sync()
        t0 = time.perf_counter()
        with torch.no_grad():
            model.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False, pad_token_id=0)
        ctx.sync()
        return time.perf_counter() - t0

    def forward() -> float:
        ctx.sync()
        t0 = time.perf_counter()
        with torch.no_grad():
            model(long_ids)
        ctx.sync()
        return time.perf_counter() - t0

    samples: Dict[str, Dict[str, List[float]]] = {v: {"per_token": [], "forward": []} for v in ("unpatched", "patched")}
    outputs = {}
    for variant in ("unpatched", "patched"):  # warm-up and greedy outputs for the agreement check
        handle = patch(model) if variant == "patched" else None
        try:
            with torch.no_grad():
                outputs[variant] = model.generate(
                    ids, max_new_tokens=new, min_new_tokens=new, do_sample=False, pad_token_id=0
                )
            generate(1)
            forward()
        finally:
            if handle is not None:
                handle.undo()
    rounds = 1 if ctx.dry else 3
    for _ in range(rounds):
        for variant in ("unpatched", "patched"):
            handle = patch(model) if variant == "patched" else None
            try:
                prefill_only = generate(1)
                full = generate(new + 1)
                samples[variant]["per_token"].append((full - prefill_only) / new * 1e3)
                samples[variant]["forward"].append(forward() * 1e3)
            finally:
                if handle is not None:
                    handle.undo()
    out: Dict[str, Any] = {"layers": 4, "prompt": prompt, "new_tokens": new, "long_seq": long_seq, **dims}
    for variant, s in samples.items():
        out[variant] = {
            "decode_ms_per_token": statistics.median(s["per_token"]),
            "forward_ms": statistics.median(s["forward"]),
            "samples": s,
        }
        row = out[variant]
        say(f"  {variant}: decode {row['decode_ms_per_token']:.3f} ms/token, forward {row['forward_ms']:.2f} ms")
    agree = float((outputs["unpatched"] == outputs["patched"]).float().mean())
    out["greedy_tokens_agreeing"] = agree
    say(f"  greedy tokens equal patched/unpatched: {agree:.0%} (bf16 rounding may flip near-ties)")
    return out


# -- the report ----------------------------------------------------------------------------------------
def _fmt(us: float) -> str:
    return f"{us:.1f}" if us < 1000 else f"{us:.0f}"


def _grid(title: str, rows: Dict[str, Dict[str, float]], cell: Callable[[str, str, float], str]) -> List[str]:
    """A markdown table under ``title``: one line per case, one column per key of the first case,
    ``cell(case, column, value)`` in each cell ("–" where the case has no such column)."""
    cols = list(next(iter(rows.values())))
    lines = ["", title, "", "| case | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for name, row in rows.items():
        lines.append(f"| {name} | " + " | ".join(cell(name, c, row[c]) if c in row else "–" for c in cols) + " |")
    return lines


def markdown(ctx: Context) -> str:
    lines = ["# posenc GPU check", ""]
    env = ctx.results.get("environment", {})
    if isinstance(env, dict):
        lines.append(
            ", ".join(
                f"{k} {env[k]}" for k in ("gpu", "torch", "cuda", "triton", "transformers", "liger_kernel") if k in env
            )
        )
        lines.append("")
    lines += ["## Checks", "", "| section | check | result |", "|---|---|---|"]
    for c in ctx.checks:
        lines.append(f"| {c['section']} | {c['check']} | {'pass' if c['ok'] else 'FAIL: ' + str(c['detail'])[:120]} |")
    for key in ("table", "compiled_rows"):
        block = ctx.results.get(key)
        if not isinstance(block, dict) or "cases" not in block:
            continue
        cases = block["cases"]
        columns: List[str] = []
        for entry in cases.values():
            for col in entry.get("median_us", {}):
                if col not in columns:
                    columns.append(col)
        if PASS in columns:
            columns.remove(PASS)
            columns.append(PASS)
        lines += [
            "",
            f"## {'Side by side' if key == 'table' else 'Compiled rows'} (µs, median; × the same-bytes pass)",
            "",
        ]
        lines += ["| case | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
        for name, entry in cases.items():
            med, ratio = entry.get("median_us"), entry.get("x_pass", {})
            if med is None:
                lines.append(f"| {name} | " + " | ".join(["–"] * len(columns)) + f" |  {entry}")
                continue
            cells = []
            for col in columns:
                if col not in med:
                    cells.append("–")
                elif col == PASS or col not in ratio:
                    cells.append(_fmt(med[col]))
                else:
                    cells.append(f"{_fmt(med[col])} ({ratio[col]:.2f}×)")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        device = {n: e for n, e in cases.items() if "device_us" in e}
        if device:
            lines += _grid(
                "Device time alone, the host queued ahead (µs, median; × the pass's device time):",
                {n: e["device_us"] for n, e in device.items()},
                lambda n, c, v, ratios=device: (
                    f"{_fmt(v)} ({ratios[n]['device_x_pass'][c]:.2f}×)"
                    if c in ratios[n].get("device_x_pass", {}) and c != PASS
                    else _fmt(v)
                ),
            )
        host = {n: e["host_us_per_call"] for n, e in cases.items() if "host_us_per_call" in e}
        if host:
            lines += _grid("Host time per call, back to back (µs):", host, lambda n, c, v: _fmt(v))
        acc = {n: e["max_error_vs_float64"] for n, e in cases.items() if "max_error_vs_float64" in e}
        if acc:
            lines += _grid(
                "Max error of q against the rotation in float64 from float64 angles:", acc, lambda n, c, v: f"{v:.2g}"
            )
    model = ctx.results.get("model")
    if isinstance(model, dict) and "patched" in model:
        u, p = model["unpatched"], model["patched"]
        lines += [
            "",
            f"## Model: {model['layers']}-layer Llama, hidden {model['hidden_size']}, "
            f"{model['prompt']}-token prompt, {model['new_tokens']} greedy tokens",
            "",
            "| variant | decode ms/token | forward ms (" + str(model["long_seq"]) + " tokens) |",
            "|---|---|---|",
            f"| unpatched | {u['decode_ms_per_token']:.3f} | {u['forward_ms']:.2f} |",
            f"| patched | {p['decode_ms_per_token']:.3f} | {p['forward_ms']:.2f} |",
        ]
    prof = ctx.results.get("host_profile")
    if isinstance(prof, dict) and "forward" in prof:
        lines += ["", "## Host time of a decode call under cProfile (µs per call, own time)", ""]
        for mode, entry in prof.items():
            lines.append(f"{mode}: {entry['us_per_call_profiled']:.1f} µs per call under the profiler")
            lines.append("")
            lines += ["| function | µs per call | calls per call |", "|---|---|---|"]
            for t in entry["top_own_time"][:8]:
                lines.append(f"| `{t['function']}` | {t['us_per_call']:.2f} | {t['calls']:.0f} |")
            lines.append("")
    shapes = ctx.results.get("launch_shapes")
    if isinstance(shapes, dict) and shapes and "error" not in shapes and "skipped" not in shapes:
        cols = list(next(iter(shapes.values())))
        lines += ["", "## Triton launch shapes, kernel alone (µs, × the pass)", ""]
        lines += ["| case | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
        for n, row in shapes.items():
            lines.append(
                f"| {n} | " + " | ".join(f"{_fmt(row[c]['us'])} ({row[c]['x_pass']:.2f}×)" for c in cols) + " |"
            )
    errors = {k: v for k, v in ctx.results.items() if isinstance(v, dict) and "error" in v}
    if errors:
        lines += ["", "## Sections that failed", ""]
        lines += [f"- {k}: {v['error']}" for k, v in errors.items()]
    return "\n".join(lines) + "\n"


SECTIONS: List[Tuple[str, Callable[[Context], Any]]] = [
    ("environment", section_environment),
    ("parity", section_parity),
    ("refusals", section_refusals),
    ("opcheck", section_opcheck),
    ("compile", section_compile),
    ("cudagraph", section_cudagraph),
    ("table", section_table),
    ("host_profile", section_host_profile),
    ("model", section_model),
    ("launch_shapes", section_launch_shapes),
    ("compiled_rows", section_compiled_rows),
]


def main(args: argparse.Namespace) -> int:
    if args.device == "cuda" and not torch.cuda.is_available():
        print("--device cuda: torch.cuda.is_available() is False (use --device cpu for a dry run)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    ctx = Context(args.device, args.dry_run, args.budget_s)
    by_name = dict(SECTIONS)
    unknown = sorted(set(args.sections or ()) - set(by_name))
    if unknown:
        print(f"--sections: unknown {unknown}; known: {sorted(by_name)}", file=sys.stderr)
        return 2
    # the sections run in the order asked for, so a short budget goes to what matters most
    order = [(name, by_name[name]) for name in args.sections] if args.sections else SECTIONS
    for name, fn in order:
        if ctx.left_s() <= 0 and name != "environment":
            say(f"== {name}: skipped, the time budget ({args.budget_s:.0f} s) is spent")
            ctx.results[name] = {"skipped": "time budget"}
            continue
        say(f"== {name}")
        started = time.perf_counter()
        try:
            ctx.results[name] = fn(ctx)
        except Exception as exc:  # one section's failure must not cost the others
            traceback.print_exc()
            sys.stdout.flush()
            ctx.results[name] = {"error": f"{type(exc).__name__}: {exc}"}
            ctx.check(name, "section ran", False, ctx.results[name]["error"][:300])
        say(f"   {name} took {time.perf_counter() - started:.1f}s")
        report = {"results": ctx.results, "checks": ctx.checks, "device": args.device, "dry_run": args.dry_run}
        tmp = args.out / "gpu_check.json.tmp"
        tmp.write_text(json.dumps(report, indent=1, default=str))
        os.replace(tmp, args.out / "gpu_check.json")
        (args.out / "gpu_check.md").write_text(markdown(ctx))
    failed = [c for c in ctx.checks if not c["ok"]]
    say(f"done: {len(ctx.checks) - len(failed)} checks passed, {len(failed)} failed; results in {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    assert ARGS is not None
    sys.exit(main(ARGS))
