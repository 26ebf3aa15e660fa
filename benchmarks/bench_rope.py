"""Time RoPE implementations side by side; the same code as ``posenc bench``.

    python benchmarks/bench_rope.py --quick          # under two minutes on 2 CPU cores
    python benchmarks/bench_rope.py                  # decode, prefill 4k and 16k; float32 and bfloat16

See :mod:`posenc.measuring.bench` for what is timed and how, and ``docs/kernels.md`` for how to read it.

Per-call overhead of one decode step, optionally against another copy of posenc in the same run:

    python benchmarks/bench_rope.py --decode-overhead
    python benchmarks/bench_rope.py --decode-overhead --baseline-src /path/to/old/posenc/src

The decode step is one layer of a Llama-3-8B-shaped model: q (1, 32, 1, 128), k (1, 8, 1, 128),
float32, tables ready. Each version is timed in its own fresh interpreter (the two cannot share one),
alternating ``--rounds`` times so that drifting load hits both alike; the table gives the median of
the rounds and the ratio after/before, with the ``transformers`` eager formula timed in every
interpreter as a yardstick.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"


def _decode_child(calls: int, repeats: int) -> dict:
    """Medians in microseconds per call of each row, in this interpreter."""
    import inspect

    import torch

    from posenc.rope.apply import apply_rotary
    from posenc.rope.tables import rope_inv_freq, rope_table

    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, 32, 1, 128, generator=gen)
    k = torch.randn(1, 8, 1, 128, generator=gen)
    cos, sin = rope_table(200, rope_inv_freq(128, 500000.0))
    cos, sin = cos[100:101].unsqueeze(0).contiguous(), sin[100:101].unsqueeze(0).contiguous()  # (1, 1, 64)
    cos_full = torch.cat((cos, cos), -1).unsqueeze(1)  # (1, 1, 1, 128), as in HF
    sin_full = torch.cat((sin, sin), -1).unsqueeze(1)

    def rotate_half(x):
        return torch.cat((-x[..., 64:], x[..., :64]), dim=-1)

    rows = {
        "posenc apply_rotary": lambda: apply_rotary(q, k, cos, sin),
        "posenc in-place": lambda: apply_rotary(q, k, cos, sin, inplace=True),
        "eager (transformers formula)": lambda: (
            q * cos_full + rotate_half(q) * sin_full,
            k * cos_full + rotate_half(k) * sin_full,
        ),
    }
    if "validate" in inspect.signature(apply_rotary).parameters:
        rows["posenc validate=False"] = lambda: apply_rotary(q, k, cos, sin, validate=False)
    samples = {name: [] for name in rows}
    for fn in rows.values():
        for _ in range(200):
            fn()
    for _ in range(repeats):
        for name, fn in rows.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            samples[name].append((time.perf_counter() - t0) / calls * 1e6)
    return {name: statistics.median(values) for name, values in samples.items()}


def decode_overhead(args) -> int:
    versions = [("after", str(SRC))]
    if args.baseline_src:
        versions.insert(0, ("before", str(Path(args.baseline_src).resolve())))
    results = {label: [] for label, _ in versions}
    for _ in range(args.rounds):
        for label, src in versions:
            env = {**os.environ, "PYTHONPATH": src, "OMP_NUM_THREADS": "1"}
            proc = subprocess.run(
                [sys.executable, __file__, "--decode-child", "--calls", str(args.calls)],
                capture_output=True,
                text=True,
                env=env,
                timeout=600,
            )
            if proc.returncode != 0:
                print(proc.stderr, file=sys.stderr)
                return 1
            results[label].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    medians = {
        label: {row: statistics.median(r[row] for r in runs) for row in runs[0]} for label, runs in results.items()
    }
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"decode step, q (1, 32, 1, 128), k (1, 8, 1, 128), float32, 1 thread; medians of {args.rounds} "
        f"interpreters per version; load average {load:.1f}"
    )
    rows = list(medians["after"])
    header = f"{'row':30s}" + "".join(f"{label + ' µs':>12s}" for label, _ in versions)
    print(header + ("   after/before" if args.baseline_src else ""))
    for row in rows:
        line = f"{row:30s}" + "".join(f"{medians[label].get(row, float('nan')):12.2f}" for label, _ in versions)
        if args.baseline_src and row in medians["before"]:
            line += f"   {medians['after'][row] / medians['before'][row]:13.2f}"
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps({"medians_us": medians, "runs": results, "load": load}, indent=1))
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--decode-child" in argv:
        calls = int(argv[argv.index("--calls") + 1]) if "--calls" in argv else 2000
        print(json.dumps(_decode_child(calls, repeats=7)))
        return 0
    if "--decode-overhead" in argv:
        parser = argparse.ArgumentParser(prog="bench_rope.py --decode-overhead")
        parser.add_argument("--decode-overhead", action="store_true")
        parser.add_argument("--baseline-src", help="the src directory of another posenc to compare with")
        parser.add_argument("--rounds", type=int, default=5)
        parser.add_argument("--calls", type=int, default=2000, help="calls per timed sample")
        parser.add_argument("--json", help="write the medians and every round here")
        return decode_overhead(parser.parse_args(argv))
    from posenc.measuring import bench

    parser = argparse.ArgumentParser(prog="bench_rope.py", description=bench.__doc__.splitlines()[0])
    bench.add_arguments(parser)
    return bench.run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
