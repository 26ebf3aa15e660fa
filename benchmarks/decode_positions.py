"""Per-layer decode cost of RotaryEmbedding, and decoding far out (2**31, 2**40) in bounded memory.

    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/decode_positions.py
    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/decode_positions.py --json out.json

One decode step rotates one token per layer: q (1, 32, 1, 128), k (1, 8, 1, 128), float32, CPU, the
Llama-3-8B head layout. Rows, all timed in one run and interleaved so that machine load hits them
alike: ``--repeats`` rounds, each timing every row once (the mean over ``--calls`` calls). The
microseconds are each row's best round; the ratios are medians over rounds of the ratio within a
round, so a load that comes and goes between rounds does not skew them. ``hf / this`` is
transformers' time over the row's (its forward+backward for the ``fwd+bwd`` rows):

* ``module, same offset``: ``rope(q, k, offset=5000)`` as layers 2..L of one step call it;
* ``module, new offset``: the offset moves on every call, as layer 1 of each step sees it;
* ``apply_rotary, ready tables``: posenc's functional entry with the cos/sin rows already sliced;
  ``in place``: the same with ``inplace=True``; ``positions``: the whole cached table and a (1, 1)
  ``positions`` tensor naming the row;
* ``kernel only``: the fused CPU kernel called directly into preallocated outputs, the floor a
  module call can approach once the functional entry skips its argument checks;
* ``transformers apply_rotary_pos_emb``: its per-layer call with cos/sin already built (skipped when
  transformers is not installed);
* ``memory pass``: ``q.mul_(1.0); k.mul_(1.0)``, the same bytes read and written in place.

Forward and backward (``torch.autograd.grad`` of both outputs), the host time of training-style
calls at one token, with its own yardstick:

* ``fwd+bwd apply_rotary``: the fused path through its autograd Function;
* ``fwd+bwd torch.ops.posenc.rotary``: the registered op and its registered backward;
* ``fwd+bwd in place``: ``inplace=True`` on q and k as views of one projection (``x * 1``), the
  in-place rules' overlap test included;
* ``fwd+bwd transformers``: ``apply_rotary_pos_emb`` and torch's own autograd, on the leaves (the
  yardstick of the first two) and on the same views of one projection (the yardstick of in place);
* ``Triton path, launch stubbed``: :func:`posenc.rope.kernels.triton_rope.rotate` on CPU tensors
  with the kernel launch replaced by a no-op (when Triton is importable): the Python a GPU decode
  call runs before its launch (plan lookup, aliasing test, launch arguments);
* ``apply_rotary on CUDA (stubbed)``, ``... in place``, ``... positions``, ``module on CUDA`` and
  ``fwd+bwd on CUDA``: the entry, in place, by positions (the whole 8192-row table and a (1, 1)
  positions tensor), the module's ``rope(q, k, offset=n)`` and a forward+backward step as a CUDA
  call takes them (q and k views of one projection; the dispatcher answers with the Triton kernel
  for the row), launch stubbed.

Then the far positions: one token at ``2**31`` and ``2**40`` (a new position every call, so the row
is computed every time), with the cache size before and after.

Ratios are what to read; absolute microseconds depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch

from posenc import RotaryEmbedding
from posenc.rope import apply_rotary, kernels


def timer(fn, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def backward_rows(q, k, cos, sin, hf):
    """Forward and backward at one token: posenc's three autograd paths and transformers'."""
    q_leaf, k_leaf = q.clone().requires_grad_(), k.clone().requires_grad_()
    grads = (torch.randn_like(q), torch.randn_like(k))
    c3, s3 = cos[None], sin[None]  # (1, 1, r/2)
    heads_q, heads_k, dim = q.shape[1], k.shape[1], q.shape[3]
    x = torch.randn(1, 1, (heads_q + heads_k) * dim, requires_grad=True)  # (B, S, (Hq + Hk) * D)

    def projection():
        qk = x * 1  # a projection's output
        q_view = qk[..., : heads_q * dim].view(1, 1, heads_q, dim).transpose(1, 2)  # (B, Hq, S, D)
        k_view = qk[..., heads_q * dim :].view(1, 1, heads_k, dim).transpose(1, 2)
        return q_view, k_view

    def in_place():
        torch.autograd.grad(apply_rotary(*projection(), cos, sin, inplace=True), (x,), grads)

    rows = {
        "fwd+bwd apply_rotary": lambda: torch.autograd.grad(
            apply_rotary(q_leaf, k_leaf, cos, sin), (q_leaf, k_leaf), grads
        ),
        "fwd+bwd torch.ops.posenc.rotary": lambda: torch.autograd.grad(
            torch.ops.posenc.rotary(q_leaf, k_leaf, c3, s3, None, 0, dim, False, False), (q_leaf, k_leaf), grads
        ),
        "fwd+bwd in place": in_place,
    }
    if hf is not None:
        cos_full = torch.cat((cos, cos), -1)[None]  # (B, S, D) = (1, 1, 128), as transformers passes it
        sin_full = torch.cat((sin, sin), -1)[None]
        rows["fwd+bwd transformers"] = lambda: torch.autograd.grad(
            hf(q_leaf, k_leaf, cos_full, sin_full), (q_leaf, k_leaf), grads
        )
        rows["fwd+bwd transformers, projection"] = lambda: torch.autograd.grad(
            hf(*projection(), cos_full, sin_full), (x,), grads
        )
    return rows


class NoLaunch:
    """Stands for the Triton kernel ``_rope_kernel``: ``kernel[grid](*args, **constexprs)`` returns
    at once, so a row times the host work before a real launch."""

    def __getitem__(self, grid):
        return self.launch

    @staticmethod
    def launch(*args, **kwargs):
        return None


def triton_prelude(q, k, cos, sin, offset):
    """The Triton path's host work on CPU tensors with the launch stubbed, or None without Triton:
    the kernel call alone, and apply_rotary and the module's decode call as a CUDA call takes them
    (the CPU tensors' kernel is the Triton kernel for these rows)."""
    try:
        from posenc.rope.kernels import triton_rope
    except Exception:
        return None
    triton_rope._rope_kernel = NoLaunch()  # this process never launches the real kernel
    c3, s3 = cos[None], sin[None]  # (1, 1, r/2)
    buf = torch.randn(1, 1, q.shape[1] + k.shape[1], q.shape[3])  # (B, S, Hq + Hk, D): one projection
    qv, kv = buf[:, :, : q.shape[1]].transpose(1, 2), buf[:, :, q.shape[1] :].transpose(1, 2)
    dispatcher = kernels.kernel_for
    table = (torch.rand(8192, cos.shape[-1]), torch.rand(8192, cos.shape[-1]))  # (rows, r/2)
    at = torch.tensor([[offset]])  # (B, S)
    rope = RotaryEmbedding(q.shape[-1], base=500000.0, max_position_embeddings=8192)
    q_leaf, k_leaf = q.clone().requires_grad_(), k.clone().requires_grad_()
    grads = (torch.randn_like(q), torch.randn_like(k))

    def on_triton(call):
        def row():
            kernels.kernel_for = triton_kernel_for  # the dispatcher's answer on CUDA
            try:
                return call()
            finally:
                kernels.kernel_for = dispatcher

        return row

    def triton_kernel_for(device):
        return triton_rope.rotate

    def kernel_only():
        q_out, k_out = torch.empty_like(q), torch.empty_like(k)
        triton_rope.rotate(q, k, q_out, k_out, c3, s3, interleaved=False, rotary_dim=q.shape[-1])

    return {
        "Triton path, launch stubbed": kernel_only,
        "apply_rotary on CUDA (stubbed)": on_triton(lambda: apply_rotary(qv, kv, c3, s3)),
        "... in place (stubbed)": on_triton(lambda: apply_rotary(qv, kv, c3, s3, inplace=True)),
        "... positions (stubbed)": on_triton(lambda: apply_rotary(qv, kv, *table, positions=at)),
        "module on CUDA (stubbed)": on_triton(lambda: rope(qv, kv, offset=offset)),
        "fwd+bwd on CUDA (stubbed)": on_triton(
            lambda: torch.autograd.grad(apply_rotary(q_leaf, k_leaf, c3, s3), (q_leaf, k_leaf), grads)
        ),
    }


def count_calls(rows, calls: int = 200) -> int:
    """Print each row's Python function calls per call, as cProfile counts them (builtins included,
    attribute reads not): the host work per call, free of the machine's load."""
    import cProfile
    import pstats

    print("Python function calls per call (cProfile)")
    for name, fn in rows.items():
        for _ in range(20):
            fn()  # first calls check and cache per layout
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(calls):
            fn()
        profiler.disable()
        print(f"{name:38s} {pstats.Stats(profiler).total_calls / calls:8.1f}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=31, help="rounds (each times every row once)")
    parser.add_argument("--calls", type=int, default=200, help="calls per row per round")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument(
        "--count-calls",
        action="store_true",
        help="instead of timing: Python function calls per call of each row (cProfile's count, which "
        "does not depend on the machine's load)",
    )
    args = parser.parse_args(argv)
    torch.manual_seed(0)

    q, k = torch.randn(1, 32, 1, 128), torch.randn(1, 8, 1, 128)
    rope = RotaryEmbedding(128, base=500000.0, max_position_embeddings=8192)
    offset = 5000
    cos, sin = rope.cos_cached[offset : offset + 1], rope.sin_cached[offset : offset + 1]  # (1, 64)
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    kernel = kernels.kernel_for(q.device)
    moving = iter(range(10**9))
    at = torch.tensor([[offset]])  # (B, S): per-token positions, as a packed batch names its rows

    rows = {
        "module, same offset": lambda: rope(q, k, offset=offset),
        "module, new offset": lambda: rope(q, k, offset=offset + next(moving) % 3000),
        "apply_rotary, ready tables": lambda: apply_rotary(q, k, cos, sin),
        "apply_rotary, ready tables, in place": lambda: apply_rotary(q, k, cos, sin, inplace=True),
        "apply_rotary, positions": lambda: apply_rotary(q, k, rope.cos_cached, rope.sin_cached, positions=at),
        "memory pass": lambda: (q.mul_(1.0), k.mul_(1.0)),
    }
    if kernel is not None:
        c3, s3 = cos.unsqueeze(0), sin.unsqueeze(0)
        rows["kernel only"] = lambda: kernel(q, k, q_out, k_out, c3, s3, interleaved=False, rotary_dim=128)
    try:
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    except ImportError:
        apply_rotary_pos_emb = None
    if apply_rotary_pos_emb is not None:
        cos_full = torch.cat((cos, cos), -1)[None]  # (B, S, D) = (1, 1, 128), as transformers passes it
        sin_full = torch.cat((sin, sin), -1)[None]
        rows["transformers apply_rotary_pos_emb"] = lambda: apply_rotary_pos_emb(q, k, cos_full, sin_full)
    rows.update(backward_rows(q, k, cos, sin, apply_rotary_pos_emb))
    rows.update(triton_prelude(q, k, cos, sin, offset) or {})

    if args.count_calls:
        return count_calls(rows)
    best = {name: float("inf") for name in rows}
    rounds = []  # one {name: seconds} per round: its ratios saw one machine load
    for fn in rows.values():
        for _ in range(50):
            fn()  # warm up
    for _ in range(args.repeats):
        sample = {name: timer(fn, args.calls) for name, fn in rows.items()}  # interleaved
        rounds.append(sample)
        for name, seconds in sample.items():
            best[name] = min(best[name], seconds)

    far = {}
    for position in (2**31, 2**40):
        module = RotaryEmbedding(128, base=500000.0, max_position_embeddings=8192)
        before = module.cached_length
        start = time.perf_counter()
        module(q, k, offset=position)  # first call
        first = time.perf_counter() - start
        steps = iter(range(10**9))

        # The closure is timed at once, within this iteration; the defaults bind it to this iteration anyway.
        def call(module=module, position=position, steps=steps):
            return module(q, k, offset=position + next(steps))

        per_call = min(timer(call, 50) for _ in range(5))
        far[position] = {
            "first_call_ms": first * 1e3,
            "per_call_ms": per_call * 1e3,
            "cached_rows_before": before,
            "cached_rows_after": module.cached_length,
            "cache_bytes": 2 * module.cos_cached.numel() * module.cos_cached.element_size(),
        }

    hf_name = "transformers apply_rotary_pos_emb"

    def median_ratio(top, bottom):
        return statistics.median(sample[top] / sample[bottom] for sample in rounds)

    def yardstick(name):  # forward+backward rows against transformers' forward+backward
        if name in ("fwd+bwd in place", "fwd+bwd transformers, projection"):
            return "fwd+bwd transformers, projection"
        return "fwd+bwd transformers" if name.startswith("fwd+bwd") else hf_name

    over_pass = {name: median_ratio(name, "memory pass") for name in rows}
    hf_over = {name: median_ratio(yardstick(name), name) for name in rows} if hf_name in rows else None
    print(
        f"decode, one token per layer: q (1, 32, 1, 128), k (1, 8, 1, 128), float32, "
        f"torch threads {torch.get_num_threads()}; ratios are medians over {len(rounds)} rounds"
    )
    print(f"{'call':38s} {'best us':>8s} {'x memory pass':>14s}" + (f" {'hf / this':>10s}" if hf_over else ""))
    for name, seconds in best.items():
        line = f"{name:38s} {seconds * 1e6:8.2f} {over_pass[name]:14.2f}"
        if hf_over is not None:
            line += f" {hf_over[name]:10.2f}"
        print(line)
    print("\nfar positions (a new position every call; the cache is never grown past its window):")
    for position, row in far.items():
        print(
            f"  offset 2**{position.bit_length() - 1}: first call {row['first_call_ms']:.2f} ms, then "
            f"{row['per_call_ms']:.3f} ms per call; cached rows {row['cached_rows_before']} -> "
            f"{row['cached_rows_after']} ({row['cache_bytes'] / 2**20:.1f} MiB)"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "decode_us": {k: v * 1e6 for k, v in best.items()},
                    "x_memory_pass": over_pass,
                    "hf_over_this": hf_over,
                    "far": {str(k): v for k, v in far.items()},
                },
                f,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
