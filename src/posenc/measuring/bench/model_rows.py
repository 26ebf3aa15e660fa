"""``posenc bench --model``: position encoding timed inside a ``transformers`` model, unpatched and
patched with :func:`posenc.integrations.transformers.patch` in turn (see :func:`run_model_benchmark`).

The model is a wide tiny Llama with Llama-3.1-8B's rope fields, randomly initialised (nothing is
downloaded). Each row times the whole forward, the part of it spent in position encoding (rotary
tables plus rotation, summed by ``torch.profiler`` over labelled scopes) and the decode time per
generated token with the KV cache.
"""

from __future__ import annotations

import functools
import statistics
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from ...fixtures import load_fixture
from .kernel_rows import environment
from .settings import MODEL_SIZES, ModelBenchConfig

#: profiler scope that labels position-encoding work in the model benchmark
PE_SCOPE = "position encoding"
#: the published config whose rope fields the benchmark's model carries
ROPE_FIXTURE = "llama-3.1-8b"
ROPE_FIELDS = ("max_position_embeddings", "rope_theta", "rope_scaling")


def _model(size: str, dtype: torch.dtype):
    from transformers import LlamaConfig, LlamaForCausalLM

    dims = {k: v for k, v in MODEL_SIZES[size].items() if k != "seq"}
    # Llama-3.1-8B's rope fields, from its published config: llama3 scaling, rope_theta 5e5, 128k
    # context (the rope_theta and rope_scaling keywords: every supported transformers version reads them)
    published = load_fixture(ROPE_FIXTURE)
    fields: Dict[str, Any] = dict(dims, **{k: published[k] for k in ROPE_FIELDS}, tie_word_embeddings=False)
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
    from ...integrations.transformers import global_seen_by, instance_function_override

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


def run_model_benchmark(config: ModelBenchConfig, progress: Optional[Callable[[str], None]] = None) -> dict:
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
    size = config.size
    report: Dict[str, Any] = {
        "model": {**MODEL_SIZES[size], "rope": "llama3, rope_theta 5e5 (Llama-3.1-8B)", "size": size},
        "environment": environment(config.device),
        "rows": [],
    }
    started = time.perf_counter()
    for dtype_name in config.dtypes:
        with torch.no_grad():
            report["rows"] += _model_rows(config, dtype_name, progress)
    report["elapsed_s"] = time.perf_counter() - started
    return report


_VARIANTS = ("unpatched", "posenc")


class _Variants:
    """One model, patched or unpatched on request (patching takes milliseconds and is never timed)."""

    def __init__(self, model: torch.nn.Module):
        self.model = model

    def use(self, variant: str) -> torch.nn.Module:
        from ...integrations.transformers import patch, unpatch

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
    config: ModelBenchConfig, dtype_name: str, progress: Optional[Callable[[str], None]]
) -> List[Dict[str, Any]]:
    """The unpatched and the patched row of one dtype (see :func:`run_model_benchmark`)."""
    say = progress or (lambda text: None)
    size, repeats, decode_tokens = config.size, config.repeats, config.decode_tokens
    model = _model(size, getattr(torch, dtype_name)).to(config.device)
    variants = _Variants(model)
    seq = MODEL_SIZES[size]["seq"]
    ids = torch.randint(0, MODEL_SIZES[size]["vocab_size"], (1, seq), generator=torch.Generator().manual_seed(0))
    ids = ids.to(config.device)
    rows: Dict[str, Dict[str, Any]] = {
        v: {"dtype": dtype_name, "variant": v, "seq": seq, "decode_tokens": decode_tokens} for v in _VARIANTS
    }

    say(f"{dtype_name}: warm-up and profiled forwards")
    for v in _VARIANTS:
        variants.use(v)
        for _ in range(config.warmup):  # kernel build, table growth
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
