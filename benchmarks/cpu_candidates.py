"""Measure the candidate technologies for the fused CPU rotation, side by side in one run.

    python benchmarks/cpu_candidates.py [--seq 4096] [--dtype float32] [--repeats 15]

Candidates, all rotating q (1, 32, seq, 128) and k (1, 8, seq, 128) with half-width cos/sin:

* ``memory pass``: ``q.mul_(1.0); k.mul_(1.0)``, the same bytes read and written once (the ceiling);
* ``eager (transformers-style)``: ``q*cos + rotate_half(q)*sin`` with full-width cos/sin;
* ``posenc reference``: :func:`posenc.rope.apply.rotate_reference`;
* ``chunked torch in-place``: torch ops on blocks of positions small enough to stay in cache;
* ``inductor``: ``torch.compile`` of the reference (compile time reported separately);
* ``C kernel``: the kernel posenc ships, in place and out of place.

Only the ratios within one run mean anything on a shared machine.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from posenc.rope.apply import rotate_reference
from posenc.rope.kernels import cpu


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def eager(q, k, cos_full, sin_full):
    return q * cos_full + rotate_half(q) * sin_full, k * cos_full + rotate_half(k) * sin_full


def chunked_inplace(q, k, cos, sin, block=16):
    h = q.shape[-1] // 2
    for x in (q, k):
        for s0 in range(0, x.shape[2], block):
            part = x[:, :, s0 : s0 + block]  # (B, H, blk, d)
            c = cos[:, s0 : s0 + block].unsqueeze(1)  # (1, 1, blk, d/2)
            s = sin[:, s0 : s0 + block].unsqueeze(1)
            a, b = part[..., :h], part[..., h:]
            saved = a.clone()
            a.mul_(c).addcmul_(b, s, value=-1.0)
            b.mul_(c).addcmul_(saved, s)
    return q, k


def median_ms(fn, repeats, warmup=2):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--repeats", type=int, default=15)
    args = p.parse_args()
    dtype = getattr(torch, args.dtype)
    torch.manual_seed(0)
    q = torch.randn(1, 32, args.seq, 128).to(dtype)
    k = torch.randn(1, 8, args.seq, 128).to(dtype)
    ang = torch.rand(1, args.seq, 64) * 6.28
    cos, sin = ang.cos(), ang.sin()
    cos_full = torch.cat((cos, cos), -1).unsqueeze(1).to(dtype)
    sin_full = torch.cat((sin, sin), -1).unsqueeze(1).to(dtype)
    c4, s4 = cos.unsqueeze(1), sin.unsqueeze(1)
    kernel = cpu.make_rotate(cpu.library())
    qo, ko = torch.empty_like(q), torch.empty_like(k)

    compiled = torch.compile(lambda q, k: (rotate_reference(q, c4, s4), rotate_reference(k, c4, s4)))
    t0 = time.perf_counter()
    compiled(q, k)
    compile_s = time.perf_counter() - t0

    rows = {
        "memory pass": lambda: (q.mul_(1.0), k.mul_(1.0)),
        "eager (transformers-style)": lambda: eager(q, k, cos_full, sin_full),
        "posenc reference": lambda: (rotate_reference(q, c4, s4), rotate_reference(k, c4, s4)),
        "chunked torch in-place": lambda: chunked_inplace(q, k, cos, sin),
        "inductor (compiled reference)": lambda: compiled(q, k),
        "C kernel, out of place": lambda: kernel(q, k, qo, ko, cos, sin, interleaved=False, rotary_dim=128),
        "C kernel, in place": lambda: kernel(q, k, q, k, cos, sin, interleaved=False, rotary_dim=128),
    }
    results = {name: median_ms(fn, args.repeats) for name, fn in rows.items()}
    ceiling = results["memory pass"]
    print(
        f"q (1, 32, {args.seq}, 128), k (1, 8, {args.seq}, 128), {args.dtype}, "
        f"{torch.get_num_threads()} threads; inductor compile {compile_s:.1f} s"
    )
    print(f"{'candidate':32s} {'median ms':>10s} {'x ceiling':>10s}")
    for name, ms in results.items():
        print(f"{name:32s} {ms:10.2f} {ms / ceiling:10.2f}")


if __name__ == "__main__":
    main()
