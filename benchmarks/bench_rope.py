"""Time RoPE implementations side by side; the same code as ``posenc bench``.

    python benchmarks/bench_rope.py --quick          # under two minutes on 2 CPU cores
    python benchmarks/bench_rope.py                  # decode, prefill 4k and 16k; float32 and bfloat16

See :mod:`posenc.bench` for what is timed and how, and ``docs/kernels.md`` for how to read it.
"""

import argparse
import sys

from posenc import bench


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="bench_rope.py", description=bench.__doc__.splitlines()[0])
    bench.add_arguments(parser)
    return bench.run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
