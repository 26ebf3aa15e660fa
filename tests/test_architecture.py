"""The package's shape: layers that only point down, no private names borrowed across modules, and a
core that needs nothing but torch.

Layers, lowest first (docs: CONTRIBUTING.md):

* core: the schemes, ``posenc.rope`` (scalings, tables, kernels, positions), the checks and buffers;
* model: the reference attention block and ``TinyLM``;
* interop: Hugging Face configs and the transformers integration;
* apps: lesson (the one source of the tour and the explorer's lesson), tour, explorer, lab, eval,
  bench, inspect, the command line, and ``input_sizes`` (numbers the tour and the explorer share).

A module may import from its own layer and the layers below it. A name that starts with an underscore
belongs to the module that defines it; modules whose own name starts with an underscore
(``posenc._checks``) are shared helpers of the package and may be imported by any layer above them.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import posenc

ROOT = Path(posenc.__file__).resolve().parent
LAYERS = {"core": 0, "model": 1, "interop": 2, "apps": 3}


def layer_of(module: str) -> int:
    """The layer of a dotted module name inside ``posenc``."""
    parts = module.split(".")[1:]
    head = parts[0] if parts else ""
    if head in ("lesson", "tour", "explorer", "lab", "eval", "bench", "inspect", "cli", "__main__", "input_sizes"):
        return LAYERS["apps"]
    if head in ("hf", "integrations", "testing"):
        return LAYERS["interop"]
    if head in ("model", "factory"):
        return LAYERS["model"]
    if head == "":  # posenc/__init__.py re-exports the core and the model
        return LAYERS["model"]
    return LAYERS["core"]


def modules():
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = list(rel.parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        yield ".".join(parts), path, is_package


def imports(module: str, path: Path, is_package: bool):
    """(line, imported module, imported names) for every posenc import in the file, lazy ones included."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if is_package else module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level > 1:
                    base = base[: -(node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "posenc" or target.startswith("posenc."):
                yield node.lineno, target, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "posenc" or alias.name.startswith("posenc."):
                    yield node.lineno, alias.name, []


def violations():
    upward, private = [], []
    for module, path, is_package in modules():
        own = layer_of(module)
        for line, target, names in imports(module, path, is_package):
            where = f"{path.relative_to(ROOT.parent)}:{line}"
            # `from posenc.rope import scaling` imports the submodule posenc.rope.scaling
            targets = (
                [target]
                if not names
                else [
                    f"{target}.{n}"
                    if (ROOT.parent / (target.replace(".", "/") + "/" + n)).exists()
                    or (ROOT.parent / (target.replace(".", "/") + "/" + n + ".py")).exists()
                    else target
                    for n in names
                ]
            )
            for t in targets:
                if layer_of(t) > own:
                    upward.append(f"{where}: {module} (layer {own}) imports {t} (layer {layer_of(t)})")
            for n in names:
                if n.startswith("_") and not n.startswith("__") and target != module:
                    private.append(f"{where}: {module} imports the private name {n} from {target}")
    return upward, private


def test_layer_of_knows_the_layers():
    assert layer_of("posenc.rope.apply") == 0
    assert layer_of("posenc._checks") == 0
    assert layer_of("posenc.model") == 1
    assert layer_of("posenc.hf") == 2
    assert layer_of("posenc.integrations.transformers") == 2
    assert layer_of("posenc.explorer.app") == 3


def test_no_upward_imports():
    upward, _ = violations()
    assert not upward, "imports that point up a layer:\n" + "\n".join(upward)


def test_no_private_names_across_modules():
    _, private = violations()
    assert not private, "private names used outside their module:\n" + "\n".join(private)


def test_the_checker_sees_a_violation(tmp_path):
    """The checker itself must be able to fail: feed it a core module that imports an app."""
    pkg = tmp_path / "posenc"
    (pkg / "rope").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "rope" / "__init__.py").write_text("")
    (pkg / "rope" / "bad.py").write_text("from ..explorer.app import _secret\nimport posenc.lab\n")
    found = list(imports("posenc.rope.bad", pkg / "rope" / "bad.py", False))
    assert [(t, n) for _, t, n in found] == [("posenc.explorer.app", ["_secret"]), ("posenc.lab", [])]
    assert all(layer_of(t) > layer_of("posenc.rope.bad") for _, t, _ in found)


BLOCK_APP_PACKAGES = textwrap.dedent("""
    import importlib.abc, sys
    BLOCKED = {"fastapi", "uvicorn", "starlette", "matplotlib", "rich", "numpy", "transformers"}
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
            return None
    sys.meta_path.insert(0, Block())
""")


def run_blocked(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT.parent) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(
        [sys.executable, "-c", BLOCK_APP_PACKAGES + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_core_needs_only_torch():
    """With every app dependency made unimportable, the core imports and rotates q and k."""
    result = run_blocked("""
        import torch, posenc
        rope = posenc.RotaryEmbedding(16)
        q, k = torch.randn(1, 2, 5, 16), torch.randn(1, 2, 5, 16)
        q2, k2 = rope(q, k)
        assert torch.allclose(q2.norm(dim=-1), q.norm(dim=-1), atol=1e-5)
        model = posenc.TinyLM(posenc.ModelConfig(scheme="alibi", d_model=32, n_heads=2, n_layers=1))
        assert model(torch.randint(0, 256, (1, 8))).shape == (1, 8, 256)
        loaded = sorted(m for m in ("fastapi", "uvicorn", "matplotlib", "rich", "numpy") if m in sys.modules)
        print("loaded:", loaded)
    """)
    assert result.returncode == 0, result.stderr
    assert "loaded: []" in result.stdout


@pytest.mark.parametrize("command, extra", [("explore", "explore"), ("lab", "lab"), ("tour", "tour")])
def test_missing_extra_is_named(command, extra):
    result = run_blocked(f"""
        from posenc.cli import main
        sys.exit(main([{command!r}]))
    """)
    assert result.returncode == 2, result.stderr
    assert f"posenc[{extra}]" in result.stderr
    assert "Traceback" not in result.stderr


def test_version_is_written_once():
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("posenc")
    except PackageNotFoundError:
        pytest.skip("posenc is not installed as a distribution here")
    assert installed == posenc.__version__
    pyproject = ROOT.parent.parent / "pyproject.toml"
    if pyproject.exists():
        assert 'dynamic = ["version"]' in pyproject.read_text()
