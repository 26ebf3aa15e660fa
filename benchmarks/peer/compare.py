"""Run transformers' own model tests with and without posenc's patch, and compare them family by family.

The test tree is ``../shared/peer/transformers-tests.tgz`` (next to the checkout; see its README). It
is unpacked into a scratch folder once, ``src/transformers`` there is linked to the installed package
(one test reads it), and each family's ``tests/models/<family>/test_modeling_<family>.py`` runs twice:

- ``plain``: transformers as installed;
- ``patched``: with ``-p posenc_patch_plugin --posenc-patch`` (this folder), which applies
  :func:`posenc.integrations.transformers.patch` to every top-level model the tests build.

Results come from pytest's own ``--junitxml`` files. What matters is the set of tests that pass
``plain`` and fail ``patched``; tests failing in both modes come from the gap between the test tree
and the installed transformers and say nothing about posenc. Needs ``pytest parameterized
pytest-timeout timeout-decorator pytest-xdist requests httpx`` besides transformers (not part of posenc's extras).

    python benchmarks/peer/compare.py                       # every family patch supports
    python benchmarks/peer/compare.py --families llama,qwen2 --markdown peer.md
    python benchmarks/peer/compare.py --modes patched --reuse   # re-run only the patched mode

Exit status: 1 if any test passes plain and fails patched, or a family's tests did not run (its test
module failed to import: nothing was compared), else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DEFAULT_TGZ = REPO.parent / "shared" / "peer" / "transformers-tests.tgz"
MODES = ("plain", "patched")
#: Left out unless ``--deselect ''``: it fails in both modes at an attribute the installed transformers
#: lacks (``StaticCache.get_max_cache_shape``), after 60-90 s of inductor compilation, so it cannot tell
#: the modes apart and costs half of a family's time.
GAP_TESTS = ("test_generate_compilation_all_outputs",)


@dataclass
class Outcome:
    status: str  # "passed", "failed" or "skipped"
    message: str = ""


@dataclass
class FamilyResult:
    family: str
    runs: Dict[str, Dict[str, Outcome]] = field(default_factory=dict)  # mode -> test -> outcome
    report: Optional[dict] = None  # the plugin's JSON summary of the patched run

    def counts(self, mode: str) -> Dict[str, int]:
        out = {"passed": 0, "failed": 0, "skipped": 0}
        for o in self.runs.get(mode, {}).values():
            out[o.status] += 1
        return out

    def regressions(self) -> List[str]:
        """Tests that pass plain and fail patched."""
        plain, patched = self.runs.get("plain", {}), self.runs.get("patched", {})
        return sorted(
            t for t, o in plain.items() if o.status == "passed" and t in patched and patched[t].status == "failed"
        )

    def fixed(self) -> List[str]:
        """Tests that fail plain and pass patched (worth a look too: posenc should change nothing)."""
        plain, patched = self.runs.get("plain", {}), self.runs.get("patched", {})
        return sorted(
            t for t, o in plain.items() if o.status == "failed" and t in patched and patched[t].status == "passed"
        )

    def not_run(self) -> List[str]:
        """The modes in which no test passed or was skipped: the test module did not import (a test tool
        missing from the venv, such as ``httpx``), so its one collection error says nothing of posenc."""
        return [m for m in MODES if m in self.runs and not any(o.status != "failed" for o in self.runs[m].values())]

    def missing(self) -> List[str]:
        """Tests that pass plain and are absent from the patched run (a crash or a timeout)."""
        plain, patched = self.runs.get("plain", {}), self.runs.get("patched", {})
        if not patched:
            return []
        return sorted(t for t, o in plain.items() if o.status == "passed" and t not in patched)


def read_junit(path: Path) -> Dict[str, Outcome]:
    """Test id (``Class::test``) -> outcome, from pytest's ``--junitxml``; a repeated id keeps its worst outcome."""
    rank = {"passed": 0, "skipped": 1, "failed": 2}
    out: Dict[str, Outcome] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        test = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is not None:
            outcome = Outcome(
                "failed", (bad.get("message") or "").strip().splitlines()[0][:240] if bad.get("message") else ""
            )
        elif case.find("skipped") is not None:
            outcome = Outcome("skipped")
        else:
            outcome = Outcome("passed")
        if test not in out or rank[outcome.status] > rank[out[test].status]:
            out[test] = outcome
    return out


def unpack(tgz: Path, scratch: Path) -> Path:
    """The test tree under ``scratch`` (unpacked once), with ``src/transformers`` linked to the installed package."""
    marker = scratch / ".unpacked"
    if not marker.exists() or marker.read_text() != str(tgz.stat().st_mtime_ns):
        if not tgz.is_file():
            raise SystemExit(f"--tests: no such file {tgz}")
        scratch.mkdir(parents=True, exist_ok=True)
        with tarfile.open(tgz) as tar:
            tar.extractall(scratch, filter="data")
        marker.write_text(str(tgz.stat().st_mtime_ns))
    import transformers

    link = scratch / "src" / "transformers"
    link.parent.mkdir(exist_ok=True)
    target = Path(transformers.__file__).resolve().parent
    if link.is_symlink() and Path(os.readlink(link)) != target:
        link.unlink()
    if not link.exists():
        link.symlink_to(target, target_is_directory=True)
    return scratch


def families_in(tree: Path) -> List[str]:
    return sorted(p.name for p in (tree / "tests" / "models").iterdir() if (p / f"test_modeling_{p.name}.py").is_file())


def supported_families(available: List[str]) -> List[str]:
    """The test tree's families whose model type the patch supports (the family folder is named after it)."""
    from posenc.integrations.transformers import supported_model_types

    supported = set(supported_model_types())
    return [f for f in available if f in supported]


def run_family(tree: Path, out: Path, family: str, mode: str, timeout: int, extra: List[str]) -> float:
    xml = out / f"{family}-{mode}.xml"
    cmd = [
        sys.executable, "-m", "pytest", f"tests/models/{family}/test_modeling_{family}.py", "-q",
        "-p", "no:cacheprovider", f"--junitxml={xml}", f"--timeout={timeout}", *extra,
    ]  # fmt: skip
    if mode == "patched":
        cmd += ["-p", "posenc_patch_plugin", "--posenc-patch", f"--posenc-report={out / f'{family}-patched.json'}"]
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("OMP_NUM_THREADS", "1")
    paths = [str(REPO / "src"), str(HERE)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    start = time.monotonic()
    with open(out / f"{family}-{mode}.log", "w", encoding="utf-8") as log:
        subprocess.run(cmd, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
    if not xml.is_file():
        raise SystemExit(f"{family} ({mode}): pytest wrote no {xml.name}; see {out / f'{family}-{mode}.log'}")
    return time.monotonic() - start


def load(out: Path, family: str, deselected: List[str]) -> FamilyResult:
    """Both modes' results for a family, without the deselected tests (an older run may hold them)."""
    result = FamilyResult(family)
    for mode in MODES:
        xml = out / f"{family}-{mode}.xml"
        if xml.is_file():
            runs = read_junit(xml)
            result.runs[mode] = {t: o for t, o in runs.items() if not any(n in t for n in deselected)}
    report = out / f"{family}-patched.json"
    if report.is_file() and "patched" in result.runs:
        result.report = json.loads(report.read_text())
    return result


def patch_summary(result: FamilyResult) -> str:
    if result.report is None:
        return ""
    patched = sum(result.report["patched"].values())
    refused = sum(r["count"] for r in result.report["refused"])
    touched = sum(1 for t in result.report["tests"].values() if t["patched"])
    return f"{patched} patched in {touched} tests" + (f", {refused} refused" if refused else "")


def markdown(results: List[FamilyResult]) -> str:
    def cell(r: FamilyResult, mode: str) -> str:
        if mode not in r.runs:
            return "-"
        c = r.counts(mode)
        return f"{c['passed']} / {c['failed']} / {c['skipped']}"

    lines = [
        "| family | plain pass / fail / skip | patched pass / fail / skip | pass plain, fail patched | models |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        reg = r.regressions() + [f"{t} (missing)" for t in r.missing()]
        count = f"not run ({', '.join(r.not_run())})" if r.not_run() else str(len(reg))
        lines.append(f"| {r.family} | {cell(r, 'plain')} | {cell(r, 'patched')} | {count} | {patch_summary(r)} |")
    details = []
    for r in results:
        for mode in r.not_run():
            first = next(iter(r.runs[mode].values()), Outcome("failed"))
            details.append(f"- `{r.family}` ({mode}): no test ran; {first.message or 'see its log'}")
        for t in r.regressions():
            details.append(f"- `{r.family}` `{t}`: {r.runs['patched'][t].message}")
        for t in r.missing():
            details.append(f"- `{r.family}` `{t}`: absent from the patched run")
        for t in r.fixed():
            details.append(f"- `{r.family}` `{t}`: fails plain, passes patched")
        if r.report:
            for ref in r.report["refused"]:
                details.append(f"- `{r.family}`: refused {ref['count']}x `{ref['class']}`: {ref['reason']}")
    if details:
        lines += ["", *details]
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", type=Path, default=DEFAULT_TGZ, help="the test tree archive (default: %(default)s)")
    parser.add_argument(
        "--scratch",
        type=Path,
        default=Path(tempfile.gettempdir()) / "posenc-peer",
        help="where to unpack it and write results (default: %(default)s)",
    )
    parser.add_argument(
        "--families", default="supported",
        help="comma-separated family folders, 'supported' (those patch supports) or 'all' (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument("--modes", default="plain,patched", help="which runs to make (default: %(default)s)")
    parser.add_argument(
        "--reuse", action="store_true", help="keep a mode's earlier result for a family instead of re-running it"
    )
    parser.add_argument("--timeout", type=int, default=900, help="per-test timeout in seconds (default: %(default)s)")
    parser.add_argument(
        "--deselect", default=",".join(GAP_TESTS),
        help="comma-separated test names left out of both modes; '' keeps every test (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument("--markdown", type=Path, help="also write the comparison as markdown to this file")
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest after '--', e.g. -- -k rope")
    args = parser.parse_args(argv)

    modes = [m for m in args.modes.split(",") if m]
    bad = [m for m in modes if m not in MODES]
    if bad:
        parser.error(f"--modes: unknown mode(s) {bad}; choose from {list(MODES)}")
    tree = unpack(args.tests.resolve(), args.scratch.resolve())
    out = tree / "results"
    out.mkdir(exist_ok=True)
    available = families_in(tree)
    if args.families == "all":
        families = available
    elif args.families == "supported":
        families = supported_families(available)
    else:
        families = [f for f in args.families.split(",") if f]
        unknown = [f for f in families if f not in available]
        if unknown:
            parser.error(f"--families: {unknown} not in the test tree; it has {available}")

    names = [n for n in args.deselect.split(",") if n]
    deselect = ["-k", " and ".join(f"not {n}" for n in names)] if names else []
    results = []
    for family in families:
        for mode in modes:
            if args.reuse and (out / f"{family}-{mode}.xml").is_file():
                continue
            print(f"{family} ({mode}) ...", end=" ", flush=True)
            seconds = run_family(tree, out, family, mode, args.timeout, deselect + args.pytest_args)
            counts = FamilyResult(family, {mode: read_junit(out / f"{family}-{mode}.xml")}).counts(mode)
            print(
                f"{seconds:.0f} s: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped",
                flush=True,
            )
        results.append(load(out, family, names))

    table = markdown(results)
    print(table)
    if args.markdown:
        args.markdown.write_text(table, encoding="utf-8")
    print(f"junit xml, logs and patch reports: {out}")
    return 1 if any(r.regressions() or r.missing() or r.not_run() for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
