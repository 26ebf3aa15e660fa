"""The linters are part of the suite: ruff (lint and format) on the whole tree, mypy on the package
(strict on the core and the model, lenient on the apps; the configuration is in pyproject.toml)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TREES = ["src", "tests", "benchmarks", "examples"]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=900)


def test_ruff_lint():
    result = run("ruff", "check", *TREES)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format():
    result = run("ruff", "format", "--check", *TREES)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_mypy():
    result = run("mypy")
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr


def test_the_test_folders_mirror_the_package():
    """``tests/`` is laid out as ``src/posenc/`` is: every folder of tests is a folder of the package, so
    a test's folder says which layer it tests (CONTRIBUTING.md, "the tests mirror src/posenc/")."""
    tests, package = ROOT / "tests", ROOT / "src" / "posenc"
    folders = {
        p.relative_to(tests)
        for p in tests.rglob("*")
        if p.is_dir() and not any(part.startswith((".", "__")) for part in p.relative_to(tests).parts)
    }
    assert Path("rope") in folders and Path("teaching", "lesson") in folders
    strays = sorted(str(f) for f in folders if not (package / f).is_dir())
    assert strays == [], f"test folders with no package folder of the same path: {strays}"


def imported_test_modules(source: str) -> list:
    """The test modules (``test_*``, ``conftest``) that ``source`` imports."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return [n for n in names if n.rsplit(".", 1)[-1].startswith("test_") or n.rsplit(".", 1)[-1] == "conftest"]


def test_no_test_module_imports_another():
    """What tests share lives in a support module named for what it holds (``browser_support.py``,
    ``palette_support.py``, ``tilt_scaling.py``, ...), never in a test module that others import
    through pytest's import path."""
    assert imported_test_modules("import test_a\nfrom tests.test_b import x\nfrom conftest import y") == [
        "test_a",
        "tests.test_b",
        "conftest",
    ]
    assert imported_test_modules("from posenc import testing\nimport palette_support") == []
    found = {
        str(path.relative_to(ROOT)): imported_test_modules(path.read_text())
        for path in sorted((ROOT / "tests").rglob("*.py"))
    }
    assert {path: names for path, names in found.items() if names} == {}
