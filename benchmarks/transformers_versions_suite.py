"""posenc's own transformers test files under other transformers releases, one throwaway venv each.

benchmarks/transformers_versions.py checks the tiny models' logits, tokens, pickling and undo under
the transformers on the path; this script runs the whole test files, so it also says which tests
lean on a newer transformers API.

For every version asked for, this makes ``ROOT/tf-VERSION`` (a fresh ``python -m venv``), installs
torch (default 2.13.0, from the local wheel or pip's cache where pip has one), that transformers
release and the test tools, installs posenc from this checkout (a plain, non-editable install, so the
tests import the installed copy), runs the chosen test files of the checkout with
``pytest -q -p no:cacheprovider`` and prints one row per version: passed, failed, skipped, errors.
Each venv is removed after its run unless ``--keep`` is given (they are about 1.5 GB each).

    OMP_NUM_THREADS=1 python benchmarks/transformers_versions_suite.py /tmp/tfv 4.45.2 4.57.6 5.24.0

The 4.45.2 row in docs/transformers.md ("`transformers` versions") is this script's output.
``--exitfirst`` stops each version's run at its first failure (quick yes/no); without it every test
runs, so the counts say how much of the integration holds on that release.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent

#: posenc's tests that import transformers (a file missing from this checkout is left out)
DEFAULT_TESTS = (
    "tests/integrations/test_integration_transformers.py",
    "tests/integrations/test_integration_transformers_configs.py",
    "tests/test_hf_parity.py",
    "tests/integrations/test_transformers_coverage.py",
)

#: what the tests import besides torch, transformers and posenc (rich, matplotlib: the tour section)
TEST_TOOLS = ("pytest>=8", "hypothesis>=6.100", "numpy>=1.24", "safetensors>=0.4", "rich>=13", "matplotlib>=3.7")

SUMMARY = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)")


def run(cmd: list[str], log: pathlib.Path, **kwargs) -> int:
    with log.open("a") as out:
        out.write("$ " + " ".join(cmd) + "\n")
        out.flush()
        return subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, **kwargs).returncode


def counts(output: str) -> dict[str, int]:
    """The numbers on pytest's closing line (``3 failed, 40 passed, 2 skipped in 9.1s``)."""
    lines = [ln for ln in output.splitlines() if re.search(r"\b(passed|failed|error|skipped)\b", ln)]
    found: dict[str, int] = {}
    for n, word in SUMMARY.findall(lines[-1] if lines else ""):
        found["errors" if word.startswith("error") else word] = int(n)
    return found


def one_version(version: str, root: pathlib.Path, args: argparse.Namespace) -> dict[str, object]:
    venv = root / f"tf-{version}"
    log = root / f"tf-{version}.log"
    log.unlink(missing_ok=True)
    shutil.rmtree(venv, ignore_errors=True)
    row: dict[str, object] = {"version": version}
    start = time.monotonic()
    try:
        if run([sys.executable, "-m", "venv", str(venv)], log):
            row["status"] = "venv failed"
            return row
        py = str(venv / "bin" / "python")
        pip = [py, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        if run(pip + [f"torch=={args.torch}", f"transformers=={version}", *TEST_TOOLS], log):
            row["status"] = "install failed"
            return row
        # posenc from a copy of the checkout's files, so the build leaves nothing in the checkout
        source = root / f"tf-{version}-posenc"
        shutil.rmtree(source, ignore_errors=True)
        source.mkdir()
        for name in ("pyproject.toml", "README.md", "src"):
            (shutil.copytree if (REPO / name).is_dir() else shutil.copy)(REPO / name, source / name)
        failed = run(pip + ["--no-deps", str(source)], log)
        shutil.rmtree(source, ignore_errors=True)
        if failed:
            row["status"] = "posenc install failed"
            return row
        probe = subprocess.run(
            [
                py,
                "-c",
                "import torch, transformers, posenc; "
                "print(torch.__version__, transformers.__version__, posenc.__file__)",
            ],
            capture_output=True,
            text=True,
            cwd=REPO,
        )
        if probe.returncode:
            row["status"] = "import failed: " + probe.stderr.strip().splitlines()[-1]
            return row
        row["torch"], row["installed"], where = probe.stdout.split()
        if not where.startswith(str(venv)):
            row["status"] = f"posenc imported from {where}, not from the venv"
            return row
        tests = [t for t in args.tests if (REPO / t).exists()]
        # `python -m pytest` puts the working folder on sys.path; the checkout keeps posenc under src/,
        # so `import posenc` in the tests finds the installed copy (checked below).
        cmd = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE", "--tb=line"]
        if args.exitfirst:
            cmd.append("-x")
        if args.k:
            cmd += ["-k", args.k]
        cmd += tests
        env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
        env.pop("PYTHONPATH", None)
        # pytest writes to its own log as it goes (tail -f it to watch a long run)
        test_log = root / f"tf-{version}.pytest.log"
        with test_log.open("w") as out:
            out.write("$ " + " ".join(cmd) + "\n")
            out.flush()
            returncode = subprocess.run(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env=env).returncode
        output = test_log.read_text()
        row.update(counts(output))
        row["failures"] = [ln for ln in output.splitlines() if ln.startswith(("FAILED", "ERROR"))]
        row["status"] = "ok" if returncode == 0 else f"pytest exit {returncode}"
        return row
    finally:
        row["seconds"] = round(time.monotonic() - start)
        if not args.keep:
            shutil.rmtree(venv, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=pathlib.Path, help="folder for the throwaway venvs and their logs")
    parser.add_argument("versions", nargs="+", help="transformers releases, e.g. 4.45.2 4.57.6 5.24.0")
    parser.add_argument("--torch", default="2.13.0", help="torch release to pair with each (default 2.13.0)")
    parser.add_argument("--tests", nargs="+", default=list(DEFAULT_TESTS), help="test files, relative to the checkout")
    parser.add_argument("-k", default=None, help="pytest -k expression")
    parser.add_argument("--exitfirst", "-x", action="store_true", help="stop each run at its first failure")
    parser.add_argument("--keep", action="store_true", help="keep the venvs (they are deleted by default)")
    args = parser.parse_args(argv)
    args.root.mkdir(parents=True, exist_ok=True)
    rows = []
    for version in args.versions:  # one at a time: each venv is built, run and removed before the next
        row = one_version(version, args.root, args)
        rows.append(row)
        print(
            f"transformers {version}: {row.get('status')} ({row['seconds']} s); logs {args.root}/tf-{version}*.log",
            flush=True,
        )
        for line in row.get("failures", []):
            print("   ", line, flush=True)
    print()
    print("| transformers | torch | passed | failed | skipped | errors | status |")
    print("|---|---|---:|---:|---:|---:|---|")
    for r in rows:
        print(
            f"| {r.get('installed', r['version'])} | {r.get('torch', '-')} | {r.get('passed', 0)} | "
            f"{r.get('failed', 0)} | {r.get('skipped', 0)} | {r.get('errors', 0)} | {r.get('status')} |"
        )
    return 0 if all(r.get("status") == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
