"""``posenc lab --seeds``: one ``posenc lab`` process per training seed, each in its own folder
``OUT/seed-<n>`` (``--jobs`` at a time), then ``OUT/summary.md`` with the spread across seeds. The
same command again resumes every seed."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, List, Tuple

from .config import MAX_SEED, preset_config
from .folder import MAX_THREADS, LabError, check_threads, check_writable, checked_config, locked
from .parser import command_line, config_overrides
from .store import atomic_write_bytes, is_lab_run, write_run_file
from .summary import seed_dir, summarize, table_bpb, table_retrieval, table_time, table_verdicts


def _seed_commands(args) -> Tuple[Path, List[Tuple[int, List[str]]], str]:
    """(seeds folder, [(seed, argv of its `posenc lab` run)], the command as typed) for ``--seeds``;
    a :class:`LabError` for flags that do not go with it."""
    seeds = args.seeds
    if not seeds or len(set(seeds)) != len(seeds) or any(not 0 <= s <= MAX_SEED for s in seeds):
        shown = ",".join(str(s) if len(str(s)) <= 20 else f"<a {len(str(s))}-digit number>" for s in seeds or [])
        raise LabError(f"--seeds must list distinct seeds >= 0 and <= {MAX_SEED}, got {shown or seeds}")
    for flag, given in (("--seed", args.seed is not None), ("--resume", bool(args.resume)), ("--fresh", args.fresh)):
        if given:
            raise LabError(
                f"--seeds does not take {flag}: each seed trains in OUT/seed-<n>, and the same --seeds "
                f"command again resumes every seed folder that holds a run"
            )
    if not args.out:
        raise LabError("--seeds needs --out, the folder that holds one run folder per seed")
    if args.jobs < 1:
        raise LabError(f"--jobs must be >= 1, got {args.jobs}")
    if args.jobs > MAX_THREADS:
        raise LabError(f"--jobs must be <= {MAX_THREADS}, got {args.jobs if args.jobs < 10**20 else 'more'}")
    if args.threads is not None:
        check_threads(args.threads)
    cfg = checked_config(lambda: preset_config(args.preset or "quick", **config_overrides(args)), "invalid settings")
    root = Path(args.out)
    if root.exists() and not root.is_dir():
        raise LabError(f"--out {str(root)!r} is a file, not a folder; choose a folder")
    if is_lab_run(root):
        raise LabError(f"--out {str(root)!r} holds a single run; give --seeds a folder of its own")
    threads = args.threads or max(1, (os.cpu_count() or 1) // args.jobs)
    common = ["--threads", str(threads), "--device", args.device] + ([] if args.plots else ["--no-plots"])
    commands = []
    for seed in seeds:
        folder = seed_dir(root, seed)
        if is_lab_run(folder):
            argv = ["lab", "--resume", str(folder)]
        else:
            argv = shlex.split(command_line(replace(cfg, seed=seed)))[1:] + ["--out", str(folder)]
        commands.append((seed, argv + common))
    typed = shlex.split(command_line(cfg)) + ["--seeds", ",".join(map(str, seeds)), "--out", str(root)]
    return root, commands, shlex.join(typed)


def run_seeds(args) -> int:
    """``--seeds``: one ``posenc lab`` process per seed (``--jobs`` at a time), then the summary."""
    root, commands, typed = _seed_commands(args)
    check_writable(root, "--out")
    with locked(root, "--out"):
        pending, failed = list(commands), []
        running: List[Tuple[int, Any, Any]] = []
        try:
            while pending or running:
                while pending and len(running) < args.jobs:
                    seed, argv = pending.pop(0)
                    log = open(root / f"seed-{seed}.log", "ab")
                    print(f"seed {seed}: posenc {shlex.join(argv)} (log: {log.name})", file=sys.stderr)
                    child = subprocess.Popen([sys.executable, "-m", "posenc.cli"] + argv, stdout=log, stderr=log)
                    running.append((seed, child, log))
                seed, child, log = running[0]
                for item in running:
                    if item[1].poll() is not None:
                        seed, child, log = item
                        break
                else:
                    time.sleep(0.5)
                    continue
                running.remove((seed, child, log))
                log.close()
                print(f"seed {seed}: finished with status {child.returncode}", file=sys.stderr)
                if child.returncode:
                    failed.append(seed)
        except KeyboardInterrupt:
            for _, child, log in running:
                child.wait()  # each saves its progress on the same Ctrl-C
                log.close()
            print("stopped; run the same command again to resume every seed", file=sys.stderr)
            return 130
        if failed:
            raise LabError(
                f"seed {', '.join(map(str, failed))} stopped with an error; see {root}/seed-<n>.log, fix it "
                f"and run the same command again to resume"
            )
        summary = summarize(root, root.name, typed)
        write_run_file(root / "summary.json", "summary", summary)
    _write_report(root, summary, typed)
    print(f"report: {root / 'summary.md'}", file=sys.stderr)
    return 0


def _write_report(root: Path, summary: dict, typed: str) -> None:
    """``root/summary.md``: the tables of the seeds' summary under the command as typed."""
    parts = [
        f"# posenc lab: {len(summary['seeds'])} training seeds",
        "",
        f"Command: `{typed}`",
        "",
        "## Bits per byte",
        "",
        table_bpb(summary),
        "",
        "## RoPE context extension",
        "",
        table_bpb(summary, extension=True),
        "",
        "## Passkey retrieval",
        "",
        table_retrieval(summary),
        "",
        table_retrieval(summary, extension=True),
        "",
        "## Verdicts",
        "",
        table_verdicts(summary),
        "",
        "## Training time",
        "",
        table_time(summary),
        "",
    ]
    atomic_write_bytes(root / "summary.md", "\n".join(parts).encode("utf-8"))
