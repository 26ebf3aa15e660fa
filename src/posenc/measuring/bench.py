"""``posenc bench``: time RoPE implementations side by side, in one run, against the memory limit.

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

``posenc bench --model`` measures the same inside a ``transformers`` model instead (see
:func:`run_model_benchmark`): a wide tiny Llama, unpatched and patched in turn with
:func:`posenc.integrations.transformers.patch`, timing the whole forward, the part of it spent in
position encoding (rotary tables plus rotation, summed by ``torch.profiler`` over labelled scopes) and
the decode time per generated token with the KV cache.

Timings on a shared machine move from run to run; only ratios measured within one run are meaningful,
which is why every row of a case is timed in the same process, interleaved round by round.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

#: name -> (batch, seq); heads and head_dim are in :data:`LLAMA3_8B`
SHAPES = {
    "decode": (1, 1),
    "prefill-4k": (1, 4096),
    "prefill-16k": (1, 16384),
    "tiny": (2, 8),
}
LLAMA3_8B = {"q_heads": 32, "kv_heads": 8, "head_dim": 128}
TINY = {"q_heads": 4, "kv_heads": 2, "head_dim": 16}
QUICK_SHAPES = ("decode", "prefill-4k")
FULL_SHAPES = ("decode", "prefill-4k", "prefill-16k")
MODES = ("forward", "forward+backward")
IMPLEMENTATIONS = ("posenc", "posenc in-place", "posenc reference", "eager", "compiled eager", "Liger", "memory pass")
QK_LAYOUTS = ("auto", "contiguous", "transformers")
CEILING = "memory pass"
EAGER = "eager"
#: --model sizes: the Llama attention shape of the issue, and a smoke-test shape
MODEL_SIZES = {
    "wide": {
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "intermediate_size": 4096,
        "num_hidden_layers": 2,
        "vocab_size": 1024,
        "seq": 2048,
    },
    "tiny": {
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "vocab_size": 128,
        "seq": 32,
    },
}
#: profiler scope that labels position-encoding work in the model benchmark
PE_SCOPE = "position encoding"


# -- the usual implementation, as found in transformers' Llama ------------------------------------
def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(..., d) -> (..., d): ``(x1, x2) -> (-x2, x1)`` on the two halves."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def eager_rotary(q, k, cos_full, sin_full):
    """``transformers``-style RoPE; cos_full/sin_full are (B|1, 1, S, head_dim), halves duplicated."""
    return q * cos_full + rotate_half(q) * sin_full, k * cos_full + rotate_half(k) * sin_full


# -- configuration --------------------------------------------------------------------------------
@dataclass
class BenchConfig:
    shapes: Sequence[str] = QUICK_SHAPES
    dtypes: Sequence[str] = ("float32",)
    modes: Sequence[str] = MODES
    device: str = "cpu"
    repeats: int = 9  # timed repeats per implementation and case
    warmup: int = 2  # untimed calls before timing
    min_sample_s: float = 1e-2  # a repeat loops a short call until it lasts at least this long
    compile: bool = True  # include "compiled eager" (costs compile time per case)
    quick: bool = False
    qk_layout: str = "contiguous"  # "transformers": q/k transposes of (B, S, H, D) buffers


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quick", action="store_true", help="decode and prefill-4k, float32: under two minutes on 2 CPU cores"
    )
    parser.add_argument(
        "--shapes",
        nargs="+",
        choices=list(SHAPES),
        default=None,
        help=f"cases to run (default {' '.join(FULL_SHAPES)}; --quick: {' '.join(QUICK_SHAPES)}; "
        "'tiny' is a small smoke-test shape)",
    )
    parser.add_argument(
        "--dtypes",
        nargs="+",
        choices=["float32", "bfloat16", "float16"],
        default=None,
        help="element types (default float32 bfloat16; --quick: float32)",
    )
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--device", default="auto", help="cpu, cuda, or auto (cuda when available)")
    parser.add_argument("--repeats", default=None, help="timed repeats (default 9; --model: 3)")
    parser.add_argument("--warmup", default=None, help="untimed calls before timing (default 2; --model: 1)")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile row")
    parser.add_argument(
        "--qk-layout",
        choices=list(QK_LAYOUTS),
        default="auto",
        help="q/k memory: 'transformers' (transposes of (B, S, H, D) buffers), 'contiguous'; "
        "auto: transformers on CUDA, contiguous on CPU",
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        help="where to write the results (default: bench-rope.json; --model: bench-model.json)",
    )
    parser.add_argument(
        "--model",
        action="store_true",
        help="instead of kernels: a wide tiny Llama (hidden 4096, 32 heads, 8 kv heads, 2 layers, "
        "2048 tokens), unpatched vs patched by posenc.integrations.transformers",
    )
    parser.add_argument(
        "--model-size",
        choices=list(MODEL_SIZES),
        default="wide",
        help="'wide' (default) or 'tiny' (a seconds-long smoke test)",
    )
    parser.add_argument("--decode-tokens", default="8", help="--model: tokens generated for the decode row (default 8)")


#: most repeats / warm-up calls / decode tokens a flag may ask for (a typo must not mean a week)
MAX_COUNT = 1000


def parse_count(flag: str, text, minimum: int) -> int:
    """An integer flag value in [minimum, MAX_COUNT], or ValueError with a one-line message."""
    try:
        value = int(str(text), 10)
    except ValueError:
        raise ValueError(f"{flag} must be a whole number, got {text!r}") from None
    if not minimum <= value <= MAX_COUNT:
        raise ValueError(f"{flag} must be >= {minimum} and <= {MAX_COUNT}, got {value}")
    return value


def check_writable(path: Path) -> None:
    """Raise ValueError (one line) unless ``path`` can be written, before any long work starts."""
    if path.is_dir():
        raise ValueError(f"--json {path} is a folder; give a file name")
    existed = path.exists()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a"):
            pass
    except OSError as exc:
        raise ValueError(f"--json {path} cannot be written: {exc.strerror or exc}") from None
    if not existed:
        path.unlink()


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda"):
        raise ValueError(f"--device must be cpu, cuda or auto, got {args.device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was asked for but torch.cuda.is_available() is False")
    repeats = 9 if args.repeats is None else parse_count("--repeats", args.repeats, 1)
    warmup = 2 if args.warmup is None else parse_count("--warmup", args.warmup, 0)
    return BenchConfig(
        shapes=tuple(args.shapes or (QUICK_SHAPES if args.quick else FULL_SHAPES)),
        dtypes=tuple(args.dtypes or (("float32",) if args.quick else ("float32", "bfloat16"))),
        modes=tuple(args.modes),
        device=device,
        repeats=repeats,
        warmup=warmup,
        min_sample_s=5e-3 if args.quick else 1e-2,
        compile=not args.no_compile,
        quick=args.quick,
        qk_layout=_resolve_layout(getattr(args, "qk_layout", "auto"), device),
    )


def _resolve_layout(layout: str, device: str) -> str:
    if layout not in QK_LAYOUTS:
        raise ValueError(f"--qk-layout must be one of {list(QK_LAYOUTS)}, got {layout!r}")
    if layout == "auto":
        return "transformers" if device == "cuda" else "contiguous"
    return layout


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
def _make_case(shape: str, dtype: torch.dtype, device: str, qk_layout: str = "contiguous"):
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
    from ..rope.tables import rope_inv_freq, rope_table

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
    return q, k, cos, sin, cos_full, sin_full, info


def liger_rotation() -> Optional[Callable[..., Any]]:
    """Liger-Kernel's rotation ``f(q, k, cos, sin)`` (cos/sin (B|1, S, head_dim)), or ``None`` when
    liger_kernel is not importable (an optional import: it is never a dependency of posenc)."""
    try:
        from liger_kernel.transformers.rope import liger_rotary_pos_emb

        return liger_rotary_pos_emb  # type: ignore[no-any-return]
    except Exception:
        return None


def _forward_fns(q, k, cos, sin, cos_full, sin_full, compiled) -> Dict[str, Callable[[], None]]:
    from ..rope.apply import apply_reference, apply_rotary

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


def _backward_fns(q, k, cos, sin, cos_full, sin_full, compiled) -> Dict[str, Callable[[], None]]:
    from ..rope.apply import apply_reference, apply_rotary

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


def _environment(config: BenchConfig) -> dict:
    from .. import __version__
    from ..rope import kernels
    from ..rope.apply import fused_kernel

    env = {
        "posenc": __version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": config.device,
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "processor": _cpu_name(),
    }
    if hasattr(os, "getloadavg"):
        env["load_average_at_start"] = list(os.getloadavg())
    probe = torch.zeros(1, 1, 1, 2, device=config.device)
    kernel = fused_kernel(probe, probe, probe, probe)
    env["dispatched_kernel"] = ("fused C kernel" if config.device == "cpu" else "Triton") if kernel else "reference"
    if config.device == "cpu" and kernel is None:
        env["fused_unavailable_reason"] = kernels.cpu.unavailable_reason()
    if config.device == "cuda":
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
    """Run every case of ``config``; return the JSON-ready results."""
    for shape in config.shapes:
        if shape not in SHAPES:
            raise ValueError(f"shape must be one of {list(SHAPES)}, got {shape!r}")
    for mode in config.modes:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {list(MODES)}, got {mode!r}")
    timer = _Timer(config.device)
    report: Dict[str, Any] = {"config": asdict(config), "environment": _environment(config), "cases": []}
    started = time.perf_counter()
    compiled = torch.compile(eager_rotary) if config.compile else None
    for dtype_name in config.dtypes:
        dtype = getattr(torch, dtype_name)
        for shape in config.shapes:
            q, k, cos, sin, cos_full, sin_full, info = _make_case(shape, dtype, config.device, config.qk_layout)
            for mode in config.modes:
                if progress:
                    progress(f"{shape} {dtype_name} {mode}")
                make = _forward_fns if mode == "forward" else _backward_fns
                fns = make(q, k, cos, sin, cos_full, sin_full, compiled)
                results = _time_case(fns, config, timer, host=info["seq"] == 1)
                report["cases"].append({**info, "mode": mode, "results": results})
            del q, k, cos_full, sin_full
    report["elapsed_s"] = time.perf_counter() - started
    if hasattr(os, "getloadavg"):
        report["environment"]["load_average_at_end"] = list(os.getloadavg())
    return report


def _fmt_ms(ms: float) -> str:
    return f"{ms * 1e3:.1f} µs" if ms < 1 else f"{ms:.2f} ms"


def format_table(report: dict) -> str:
    """A markdown table: one row per case and implementation."""
    lines = [
        "| case | dtype | pass | implementation | median | × ceiling | vs eager | host per call |",
        "|---|---|---|---|---:|---:|---:|---:|",
    ]
    for case in report["cases"]:
        label = (
            f"{case['shape']} ({case['batch']}×{case['seq']}, "
            f"{case['q_heads']}q/{case['kv_heads']}kv×{case['head_dim']})"
        )
        for name, r in case["results"].items():
            lines.append(
                f"| {label} | {case['dtype']} | {case['mode']} | {name} | {_fmt_ms(r['median_ms'])} | "
                f"{r['x_ceiling']:.2f} | {r['speedup_vs_eager']:.1f}× | "
                + (_fmt_ms(r["host_ms"]) if "host_ms" in r else "–")
                + " |"
            )
    return "\n".join(lines)


# -- the model-level benchmark ---------------------------------------------------------------------
def _model(size: str, dtype: torch.dtype):
    from transformers import LlamaConfig, LlamaForCausalLM

    dims = {k: v for k, v in MODEL_SIZES[size].items() if k != "seq"}
    # Llama-3.1-8B's rope fields: llama3 scaling, rope_theta 5e5, 128k context
    # (the rope_theta and rope_scaling keywords: every supported transformers version reads them)
    fields: Dict[str, Any] = dict(
        dims,
        max_position_embeddings=131072,
        rope_theta=500000.0,
        rope_scaling={
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
        tie_word_embeddings=False,
    )
    config = LlamaConfig(**fields)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    return model.to(dtype)


def _labelled(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def call(*args, **kwargs):
        with torch.profiler.record_function(PE_SCOPE):
            return fn(*args, **kwargs)

    return call


def _instrument(model) -> Callable[[], None]:
    """Label the model's position-encoding work for the profiler; returns the function that undoes it.

    The rotary module's ``forward`` and the rotation function the attention layers call are wrapped
    per instance (the same mechanism as the patch), so patched and unpatched models are measured alike.
    """
    from ..integrations.transformers import global_seen_by, instance_function_override

    undo = []
    for module in model.modules():
        name = type(module).__name__
        if name.endswith("RotaryEmbedding") or name == "PosencRotaryTables":
            module.forward = _labelled(module.forward)
            undo.append(lambda m=module: m.__dict__.pop("forward", None))
    for module in model.modules():
        if not type(module).__name__.endswith("Attention"):
            continue
        previous = module.__dict__.get("forward")  # the patch's, if patched
        # the patch installs functools.partial(function, module); a bound method has __func__
        forward = getattr(previous, "func", None) or getattr(previous, "__func__", None) or type(module).forward
        rotate = global_seen_by(forward, "apply_rotary_pos_emb")
        new = instance_function_override(forward, {"apply_rotary_pos_emb": _labelled(rotate)})
        module.forward = new.__get__(module)

        def put_back(m: torch.nn.Module = module, p: Any = previous) -> None:
            if p is not None:
                m.__dict__.update(forward=p)
            else:
                m.__dict__.pop("forward", None)

        undo.append(put_back)

    def restore():
        for fn in reversed(undo):
            fn()

    return restore


def _profile_pe(fn: Callable[[], None]) -> Tuple[float, float]:
    """(seconds in position encoding, seconds of the whole call) for one profiled call of ``fn``."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        fn()
        total = time.perf_counter() - t0
    pe = sum(e.cpu_time_total for e in prof.key_averages() if e.key == PE_SCOPE) / 1e6
    return pe, total


def run_model_benchmark(
    size: str = "wide",
    dtypes: Sequence[str] = ("float32", "bfloat16"),
    repeats: int = 3,
    decode_tokens: int = 8,
    warmup: int = 1,
    progress: Optional[Callable[[str], None]] = None,
    device: str = "cpu",
) -> dict:
    """Unpatched vs posenc-patched Llama: forward, position-encoding time, decode time per token.

    On CUDA every timed call ends with a synchronize, so the times are the GPU's as well as the
    host's; the position-encoding share is the profiler's host time of those calls.

    One model instance, patched and unpatched in turn before every measurement (patching takes a few
    milliseconds and is never timed), so that the two variants read the very same weights and a
    drifting machine load hits both alike. Per dtype: ``warmup`` untimed forwards each; one profiled
    forward each gives the position-encoding seconds; ``repeats`` alternating unprofiled forwards give
    the forward time (median); after a prefill with the KV cache (one cache per variant),
    ``decode_tokens`` alternating single-token steps give the decode time per token (median), and
    several more profiled steps each (median) its position-encoding share.
    """
    if size not in MODEL_SIZES:
        raise ValueError(f"size must be one of {list(MODEL_SIZES)}, got {size!r}")
    report: Dict[str, Any] = {
        "model": {**MODEL_SIZES[size], "rope": "llama3, rope_theta 5e5 (Llama-3.1-8B)", "size": size},
        "environment": _environment(BenchConfig(device=device)),
        "rows": [],
    }
    started = time.perf_counter()
    for dtype_name in dtypes:
        with torch.no_grad():
            report["rows"] += _model_rows(size, dtype_name, repeats, decode_tokens, warmup, progress, device)
    report["elapsed_s"] = time.perf_counter() - started
    return report


_VARIANTS = ("unpatched", "posenc")


class _Variants:
    """One model, patched or unpatched on request (patching takes milliseconds and is never timed)."""

    def __init__(self, model: torch.nn.Module):
        self.model = model

    def use(self, variant: str) -> torch.nn.Module:
        from ..integrations.transformers import patch, unpatch

        unpatch(self.model)
        if variant == "posenc":
            patch(self.model)
        return self.model

    def profiled_pe(self, variant: str, call: Callable[[], Any], samples: int = 1) -> List[Tuple[float, float]]:
        """:func:`_profile_pe` of ``call`` on ``variant``, ``samples`` times with one patch, its
        position encoding labelled."""
        self.use(variant)
        restore = _instrument(self.model)
        try:
            return [_profile_pe(call) for _ in range(samples)]
        finally:
            restore()


def _model_rows(
    size: str,
    dtype_name: str,
    repeats: int,
    decode_tokens: int,
    warmup: int,
    progress: Optional[Callable[[str], None]],
    device: str = "cpu",
) -> List[Dict[str, Any]]:
    """The unpatched and the patched row of one dtype (see :func:`run_model_benchmark`)."""
    say = progress or (lambda text: None)
    model = _model(size, getattr(torch, dtype_name)).to(device)
    variants = _Variants(model)
    seq = MODEL_SIZES[size]["seq"]
    ids = torch.randint(0, MODEL_SIZES[size]["vocab_size"], (1, seq), generator=torch.Generator().manual_seed(0))
    ids = ids.to(device)
    rows: Dict[str, Dict[str, Any]] = {
        v: {"dtype": dtype_name, "variant": v, "seq": seq, "decode_tokens": decode_tokens} for v in _VARIANTS
    }

    say(f"{dtype_name}: warm-up and profiled forwards")
    for v in _VARIANTS:
        variants.use(v)
        for _ in range(warmup):  # kernel build, table growth
            model(ids)
        [(pe_s, profiled_s)] = variants.profiled_pe(v, functools.partial(model, ids))
        rows[v].update(pe_ms=pe_s * 1e3, profiled_forward_ms=profiled_s * 1e3)

    say(f"{dtype_name}: {repeats} forwards each, alternating")
    forward = _alternating(variants, repeats, lambda v: model(ids))

    say(f"{dtype_name}: prefill, then {decode_tokens} decode steps each, alternating")
    caches, tokens = _prefill(variants, ids)

    def step(v: str) -> None:
        out = model(tokens[v], cache=caches[v], use_cache=True)
        tokens[v] = out.logits[:, -1:].argmax(-1)

    steps = _alternating(variants, decode_tokens, step)
    for v in _VARIANTS:
        # a single decode step lasts about a millisecond of position encoding, so one profiled step is
        # noise; take the median of several
        call = functools.partial(model, tokens[v], cache=caches[v], use_cache=True)
        samples = variants.profiled_pe(v, call, samples=max(3, min(decode_tokens, 7)))
        decode_pe = statistics.median(pe for pe, _ in samples)
        rows[v].update(
            forward_ms=statistics.median(forward[v]) * 1e3,
            forward_samples_ms=[t * 1e3 for t in forward[v]],
            decode_ms_per_token=statistics.median(steps[v]) * 1e3,
            decode_samples_ms=[t * 1e3 for t in steps[v]],
            decode_pe_ms=decode_pe * 1e3,
        )
    variants.use("unpatched")
    base, ours = rows["unpatched"], rows["posenc"]
    for key in ("pe_ms", "forward_ms", "decode_ms_per_token", "decode_pe_ms"):
        ours[f"speedup_{key}"] = base[key] / ours[key] if ours[key] > 0 else float("inf")
    return [base, ours]


def _alternating(variants: _Variants, rounds: int, call: Callable[[str], Any]) -> Dict[str, List[float]]:
    """Seconds of ``call(variant)`` per round, the variants taking turns so load hits both alike."""
    times: Dict[str, List[float]] = {v: [] for v in _VARIANTS}
    cuda = next(variants.model.parameters()).is_cuda
    for _ in range(rounds):
        for v in _VARIANTS:
            variants.use(v)
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            call(v)
            if cuda:
                torch.cuda.synchronize()  # the GPU's work counts, not only its launch
            times[v].append(time.perf_counter() - t0)
    return times


def _prefill(variants: _Variants, ids: torch.Tensor) -> Tuple[Dict[str, Any], Dict[str, torch.Tensor]]:
    """One KV cache per variant filled with ``ids``, and each variant's next token."""
    from transformers import DynamicCache

    caches, tokens = {}, {}
    for v in _VARIANTS:
        model: Any = variants.use(v)
        caches[v] = DynamicCache(config=model.config)
        tokens[v] = model(ids, cache=caches[v], use_cache=True).logits[:, -1:].argmax(-1)
    return caches, tokens


def format_model_table(report: dict) -> str:
    """A markdown table: one row per dtype and variant, speed-ups of posenc over unpatched."""
    m = report["model"]
    lines = [
        f"Llama, hidden {m['hidden_size']}, {m['num_attention_heads']} heads / {m['num_key_value_heads']} kv "
        f"× {m['head_dim']}, {m['num_hidden_layers']} layers, {m['seq']} tokens; {m['rope']}",
        "",
        "| dtype | model | position encoding (profiler) | whole forward | decode / token | decode position encoding |",
        "|---|---|---:|---:|---:|---:|",
    ]

    def cell(row, key):
        speedup = row.get(f"speedup_{key}")
        return _fmt_ms(row[key]) + (f" ({speedup:.1f}×)" if speedup is not None else "")

    for r in report["rows"]:
        lines.append(
            f"| {r['dtype']} | {r['variant']} | {cell(r, 'pe_ms')} | {cell(r, 'forward_ms')} | "
            f"{cell(r, 'decode_ms_per_token')} | {cell(r, 'decode_pe_ms')} |"
        )
    return "\n".join(lines)


def _model_run(args: argparse.Namespace) -> int:
    try:
        repeats = 3 if args.repeats is None else parse_count("--repeats", args.repeats, 1)
        warmup = 1 if args.warmup is None else parse_count("--warmup", args.warmup, 0)
        decode_tokens = parse_count("--decode-tokens", args.decode_tokens, 1)
        path = args.json or Path("bench-model.json")
        check_writable(path)
        import transformers  # noqa: F401
    except ImportError:
        print("posenc bench --model: needs transformers (pip install transformers)")
        return 2
    except ValueError as exc:
        print(f"posenc bench: {exc}")
        return 2
    dtypes = tuple(args.dtypes or ("float32", "bfloat16"))
    print(
        f"posenc bench --model ({args.model_size}): {' '.join(dtypes)}; {repeats} forwards, {decode_tokens} "
        f"decode steps; torch {torch.__version__}, {torch.get_num_threads()} threads",
        flush=True,
    )
    device = "cuda" if args.device == "auto" and torch.cuda.is_available() else args.device
    if device == "auto":
        device = "cpu"
    if device not in ("cpu", "cuda") or (device == "cuda" and not torch.cuda.is_available()):
        print(f"posenc bench: --device must be cpu, or cuda where torch.cuda.is_available(), got {args.device!r}")
        return 2
    report = run_model_benchmark(
        args.model_size,
        dtypes,
        repeats,
        decode_tokens,
        warmup,
        progress=lambda what: print(f"  timing {what} ...", flush=True),
        device=device,
    )
    print()
    print(format_model_table(report))
    print("\n(×: unpatched time / posenc time, measured in this run)")
    path.write_text(json.dumps(report, indent=2))
    print(f"wrote {path} ({report['elapsed_s']:.0f} s)")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.model:
        return _model_run(args)
    try:
        config = config_from_args(args)
        path = args.json or Path("bench-rope.json")
        check_writable(path)
    except ValueError as exc:
        print(f"posenc bench: {exc}")
        return 2
    env_line = f"torch {torch.__version__}, {config.device}, {torch.get_num_threads()} threads"
    print(
        f"posenc bench: {' '.join(config.shapes)} × {' '.join(config.dtypes)} × {' / '.join(config.modes)}; "
        f"{config.repeats} repeats after {config.warmup} warm-up calls; {env_line}",
        flush=True,
    )
    report = run_benchmark(config, progress=lambda what: print(f"  timing {what} ...", flush=True))
    print()
    print(format_table(report))
    env = report["environment"]
    load = env.get("load_average_at_start")
    print(
        f"\nceiling = same-bytes in-place pass (q.mul_(1.0); k.mul_(1.0)); dispatched kernel: "
        f"{env['dispatched_kernel']}" + (f"; load average at start {load[0]:.2f}" if load else "")
    )
    path.write_text(json.dumps(report, indent=2))
    print(f"wrote {path} ({report['elapsed_s']:.0f} s)")
    return 0
