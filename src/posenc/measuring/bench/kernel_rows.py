"""The kernel rows of ``posenc bench``: RoPE implementations timed side by side, against the memory limit.

Applying RoPE reads q and k and writes them back; cos/sin are small and shared by all heads. So the
honest yardstick is not another implementation but the memory system: the **ceiling** is an in-place
pass over the same bytes (``q.mul_(1.0); k.mul_(1.0)``), which reads and writes every element once.
Each implementation is reported as a multiple of that ceiling's time (1.0 is the limit) and as a
speed-up over the usual eager PyTorch code.

Implementations (rows):

* ``posenc``: :func:`posenc.apply_rotary`, the dispatched path (fused C kernel on CPU, Triton on CUDA);
* ``posenc in-place``: the same with ``inplace=True`` (forward only: leaves cannot be modified in place);
* ``posenc reference``: :func:`posenc.rope.apply.rotate_reference`, plain torch ops;
* ``eager``: the usual ``transformers``-style code, ``q * cos + rotate_half(q) * sin`` with
  full-width (duplicated) cos/sin in the input dtype, written out below;
* ``compiled eager``: ``torch.compile`` of that eager code (compile time is reported separately);
* ``Liger``: Liger-Kernel's Triton rotation (``liger_kernel``, an optional import), on CUDA only;
* ``memory pass``: the ceiling above. With backward it is two passes: the forward's over q and k and
  the backward's over their gradients.

q and k are laid out as transformers lays them out (``--qk-layout transformers``, the default on
CUDA): transposes of (batch, seq, heads, head_dim) projection outputs; ``--qk-layout contiguous`` (the
default on CPU) gives them contiguous. At decode (one token) each row also reports its host time per
call (``host_ms``): calls back to back without synchronising, which is what bounds decoding on a GPU.

Shapes follow Llama-3-8B attention (32 query heads, 8 key/value heads, head_dim 128): ``decode``
(one new token), ``prefill-4k`` and ``prefill-16k``. Each case is warmed up, then timed ``repeats``
times; a repeat of a very short call runs it in a loop and reports the time per call. Medians are
reported. On CUDA, the L2 cache is flushed before every repeat and time is taken with CUDA events.

Timings on a shared machine move from run to run; only ratios measured within one run are meaningful,
which is why every row of a case is timed in the same process, interleaved round by round.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from dataclasses import asdict
from typing import Any, Callable, Dict, List, NamedTuple, Optional

import torch

from .settings import LLAMA3_8B, SHAPES, TINY, BenchConfig

IMPLEMENTATIONS = ("posenc", "posenc in-place", "posenc reference", "eager", "compiled eager", "Liger", "memory pass")
CEILING = "memory pass"
EAGER = "eager"


# -- the usual implementation, as found in transformers' Llama ------------------------------------
def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(..., d) -> (..., d): ``(x1, x2) -> (-x2, x1)`` on the two halves."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def eager_rotary(q, k, cos_full, sin_full):
    """``transformers``-style RoPE; cos_full/sin_full are (B|1, 1, S, head_dim), halves duplicated."""
    return q * cos_full + rotate_half(q) * sin_full, k * cos_full + rotate_half(k) * sin_full


# -- timing ---------------------------------------------------------------------------------------
class _Timer:
    """Seconds per call of ``fn``: wall clock on CPU, CUDA events after an L2 flush on CUDA."""

    def __init__(self, device: str):
        self.cuda = device == "cuda"
        if self.cuda:
            l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or (64 << 20)
            # writing twice the L2 size evicts whatever the previous repeat left there
            self.flush_buffer = torch.empty(max(2 * l2, 64 << 20), dtype=torch.uint8, device="cuda")

    def once(self, fn: Callable[[], None], calls: int) -> float:
        if self.cuda:
            self.flush_buffer.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end) / 1e3 / calls
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - t0) / calls

    def calls_per_sample(self, fn: Callable[[], None], min_sample_s: float) -> int:
        one = max(self.once(fn, 1), 1e-7)
        return int(min(1000, max(1, min_sample_s // one + 1)))


# -- cases ----------------------------------------------------------------------------------------
class Case(NamedTuple):
    """The tensors of one case and what the JSON says of it."""

    q: torch.Tensor  # (B, q_heads, S, D), contiguous or a transpose of (B, S, q_heads, D)
    k: torch.Tensor  # (B, kv_heads, S, D), laid out as q
    cos: torch.Tensor  # (1, S, D/2): posenc's half-width table, float32
    sin: torch.Tensor  # (1, S, D/2)
    cos_full: torch.Tensor  # (1, 1, S, D): halves duplicated, in the input dtype, as transformers has it
    sin_full: torch.Tensor  # (1, 1, S, D)
    info: Dict[str, Any]  # shape, batch, seq, heads, head_dim, dtype, bytes of q and k, layout


def _make_case(shape: str, dtype: torch.dtype, device: str, qk_layout: str = "contiguous") -> Case:
    batch, seq = SHAPES[shape]
    dims = TINY if shape == "tiny" else LLAMA3_8B
    d = dims["head_dim"]
    gen = torch.Generator().manual_seed(0)
    if qk_layout == "transformers":  # (B, S, H, D) projection outputs seen as (B, H, S, D)
        q = torch.randn(batch, seq, dims["q_heads"], d, generator=gen).to(device=device, dtype=dtype).transpose(1, 2)
        k = torch.randn(batch, seq, dims["kv_heads"], d, generator=gen).to(device=device, dtype=dtype).transpose(1, 2)
    else:
        q = torch.randn(batch, dims["q_heads"], seq, d, generator=gen).to(device=device, dtype=dtype)
        k = torch.randn(batch, dims["kv_heads"], seq, d, generator=gen).to(device=device, dtype=dtype)
    from ...rope.tables import rope_inv_freq, rope_table

    cos, sin = rope_table(seq + 100, rope_inv_freq(d, 500000.0), device=torch.device(device))
    cos, sin = cos[100:].unsqueeze(0), sin[100:].unsqueeze(0)  # (1, S, d/2): decode at 100+
    cos_full = torch.cat((cos, cos), -1).unsqueeze(1).to(dtype)  # (1, 1, S, d), as in HF
    sin_full = torch.cat((sin, sin), -1).unsqueeze(1).to(dtype)
    info = {
        "shape": shape,
        "batch": batch,
        "seq": seq,
        **dims,
        "dtype": str(dtype).replace("torch.", ""),
        "bytes_q_k": (q.numel() + k.numel()) * q.element_size(),
        "qk_layout": qk_layout,
    }
    return Case(q, k, cos, sin, cos_full, sin_full, info)


def liger_rotation() -> Optional[Callable[..., Any]]:
    """Liger-Kernel's rotation ``f(q, k, cos, sin)`` (cos/sin (B|1, S, head_dim)), or ``None`` when
    liger_kernel is not importable (an optional import: it is never a dependency of posenc)."""
    try:
        from liger_kernel.transformers.rope import liger_rotary_pos_emb

        return liger_rotary_pos_emb  # type: ignore[no-any-return]
    except Exception:
        return None


def _forward_fns(case: Case, compiled: Optional[Callable[..., Any]]) -> Dict[str, Callable[[], None]]:
    """The rows of one forward case, each a call with no arguments."""
    from ...rope.apply import apply_reference, apply_rotary

    q, k, cos, sin, cos_full, sin_full = case[:6]
    fns = {
        "posenc": lambda: apply_rotary(q, k, cos, sin),
        "posenc in-place": lambda: apply_rotary(q, k, cos, sin, inplace=True),
        "posenc reference": lambda: apply_reference(q, k, cos, sin, "half", q.shape[-1], False),
        "eager": lambda: eager_rotary(q, k, cos_full, sin_full),
        "memory pass": lambda: (q.mul_(1.0), k.mul_(1.0)),
    }
    if compiled is not None:
        fns["compiled eager"] = lambda: compiled(q, k, cos_full, sin_full)
    liger = liger_rotation() if q.is_cuda else None
    if liger is not None:
        ql, kl = q.clone(), k.clone()  # Liger may write into its inputs
        fns["Liger"] = lambda: liger(ql, kl, cos_full[:, 0], sin_full[:, 0])
    return fns


def _backward_fns(case: Case, compiled: Optional[Callable[..., Any]]) -> Dict[str, Callable[[], None]]:
    """The rows of one forward+backward case: each runs the forward and its backward from leaves."""
    from ...rope.apply import apply_reference, apply_rotary

    q, k, cos, sin, cos_full, sin_full = case[:6]
    ql, kl = q.detach().clone().requires_grad_(), k.detach().clone().requires_grad_()
    gq, gk = torch.randn_like(q), torch.randn_like(k)

    def step(forward):
        def go():
            ql.grad = kl.grad = None  # as after optimizer.zero_grad(): backward assigns, no sum
            qo, ko = forward()
            torch.autograd.backward((qo, ko), (gq, gk))

        return go

    fns = {
        "posenc": step(lambda: apply_rotary(ql, kl, cos, sin)),
        "posenc reference": step(lambda: apply_reference(ql, kl, cos, sin, "half", q.shape[-1], False)),
        "eager": step(lambda: eager_rotary(ql, kl, cos_full, sin_full)),
        "memory pass": lambda: (q.mul_(1.0), k.mul_(1.0), gq.mul_(1.0), gk.mul_(1.0)),
    }
    if compiled is not None:
        fns["compiled eager"] = step(lambda: compiled(ql, kl, cos_full, sin_full))
    liger = liger_rotation() if q.is_cuda else None
    if liger is not None:
        fns["Liger"] = step(lambda: liger(ql, kl, cos_full[:, 0], sin_full[:, 0]))
    return fns


def _host_ms(fn: Callable[[], None], cuda: bool, calls: int = 200) -> float:
    """Host milliseconds per call, ``calls`` calls back to back without synchronising in between."""
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - t0
    if cuda:
        torch.cuda.synchronize()
    return elapsed / calls * 1e3


def _time_case(
    fns: Dict[str, Callable[[], None]], config: BenchConfig, timer: _Timer, host: bool = False
) -> Dict[str, dict]:
    """Warm every row up, then time them round-robin so that drifting load hits all rows alike."""
    calls = {}
    compile_s = {}
    for name, fn in fns.items():
        t0 = time.perf_counter()
        fn()  # first call: compiles, builds
        compile_s[name] = time.perf_counter() - t0
        for _ in range(config.warmup):
            fn()
        calls[name] = timer.calls_per_sample(fn, config.min_sample_s)
    samples: Dict[str, List[float]] = {name: [] for name in fns}
    for _ in range(config.repeats):
        for name, fn in fns.items():
            samples[name].append(timer.once(fn, calls[name]) * 1e3)
    out: Dict[str, Dict[str, Any]] = {}
    for name in fns:
        entry: Dict[str, Any] = {
            "median_ms": statistics.median(samples[name]),
            "samples_ms": samples[name],
            "calls_per_sample": calls[name],
        }
        if name == "compiled eager":
            entry["first_call_s"] = compile_s[name]
        if host:
            entry["host_ms"] = _host_ms(fns[name], timer.cuda)
        out[name] = entry
    ceiling = out[CEILING]["median_ms"]
    eager = out[EAGER]["median_ms"]
    for entry in out.values():
        entry["x_ceiling"] = entry["median_ms"] / ceiling
        entry["speedup_vs_eager"] = eager / entry["median_ms"]
    return {name: out[name] for name in IMPLEMENTATIONS if name in out}


def environment(device: str) -> dict:
    """Where a benchmark runs (versions, threads, processor, load) and which RoPE kernel dispatches
    on ``device``: the ``environment`` of the kernel rows' and the model rows' JSON."""
    from ... import __version__
    from ...rope import kernels
    from ...rope.apply import fused_kernel

    env = {
        "posenc": __version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": device,
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "processor": _cpu_name(),
    }
    if hasattr(os, "getloadavg"):
        env["load_average_at_start"] = list(os.getloadavg())
    probe = torch.zeros(1, 1, 1, 2, device=device)
    kernel = fused_kernel(probe, probe, probe, probe)
    env["dispatched_kernel"] = ("fused C kernel" if device == "cpu" else "Triton") if kernel else "reference"
    if device == "cpu" and kernel is None:
        env["fused_unavailable_reason"] = kernels.cpu.unavailable_reason()
    if device == "cuda":
        env["gpu"] = torch.cuda.get_device_name(0)
    return env


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def run_benchmark(config: BenchConfig, progress: Optional[Callable[[str], None]] = None) -> dict:
    """Run every case of ``config`` (checked when it was made); return the JSON-ready results."""
    timer = _Timer(config.device)
    report: Dict[str, Any] = {"config": asdict(config), "environment": environment(config.device), "cases": []}
    started = time.perf_counter()
    compiled = torch.compile(eager_rotary) if config.compile else None
    for dtype_name in config.dtypes:
        dtype = getattr(torch, dtype_name)
        for shape in config.shapes:
            case = _make_case(shape, dtype, config.device, config.qk_layout)
            for mode in config.modes:
                if progress:
                    progress(f"{shape} {dtype_name} {mode}")
                make = _forward_fns if mode == "forward" else _backward_fns
                fns = make(case, compiled)
                results = _time_case(fns, config, timer, host=case.info["seq"] == 1)
                report["cases"].append({**case.info, "mode": mode, "results": results})
            del case, fns  # free this case's tensors before the next is made
    report["elapsed_s"] = time.perf_counter() - started
    if hasattr(os, "getloadavg"):
        report["environment"]["load_average_at_end"] = list(os.getloadavg())
    return report
