"""CPU time of ``posenc lab --preset smoke`` (user + system), retrieval included.

The smoke preset is the lab's machinery check; its budget is 30 s of CPU time. CPU time, unlike
wall time, barely depends on how busy the machine is, so this is the number to compare. Run::

    python benchmarks/lab_smoke_cpu.py            # the default smoke run
    python benchmarks/lab_smoke_cpu.py --finetune  # with the fine-tunes too

It runs the command in a child process (one torch thread) and prints the child's user, system and
wall time from ``resource.getrusage(RUSAGE_CHILDREN)``. A benchmark, not a test: nothing asserts.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time

BUDGET_S = 30.0


def main(extra) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            "-m",
            "posenc",
            "lab",
            "--preset",
            "smoke",
            "--threads",
            "1",
            "--out",
            os.path.join(tmp, "run"),
            *extra,
        ]
        env = dict(os.environ, OMP_NUM_THREADS="1")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        print(done.stderr[-2000:], file=sys.stderr)
        return done.returncode
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    print(
        f"{' '.join(cmd[2:6] + extra)}: user {user:.1f} s + system {system:.1f} s = "
        f"{user + system:.1f} s CPU (budget {BUDGET_S:.0f} s); wall {wall:.1f} s; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
