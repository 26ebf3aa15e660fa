"""The package's shape: layers that only point down, no private names borrowed across modules, and a
core that needs nothing but torch.

Layers, lowest first (drawn in docs/architecture.md); the folders of ``src/posenc`` show them:

* core: the schemes, ``posenc.rope`` (scalings, tables, kernels, positions), the checks and buffers;
* model: the reference attention block and ``TinyLM``;
* interop: Hugging Face configs and the transformers integration, and above them the run files
  (``runs/``: what the apps write and read, a lab run's model, the scalings' labels);
* apps: ``teaching/`` (lesson, the one source of the tour and the explorer's lesson; tour; explorer;
  ``input_sizes``), ``measuring/`` (lab, eval, bench), and the tools (``inspect``, the command line).

Inside those layers the groups are ordered too (:data:`MAY_IMPORT`): core < model < integrations <
runs (the run files) < lesson < {tour, explorer}, and runs < {lab, eval, bench}; an app's group is
the name after its folder (``posenc.measuring.lab.cli`` is the lab's). No app imports a sibling
app's modules, nor another app's private module: what two apps share goes down to a group below both.

A module may import from its own layer and the layers below it. A name that starts with an underscore
belongs to the module that defines it; modules whose own name starts with an underscore
(``posenc._checks``) are shared helpers of the package and may be imported by any layer above them.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import posenc

ROOT = Path(posenc.__file__).resolve().parent
LAYERS = {"core": 0, "model": 1, "interop": 2, "apps": 3}


#: The folders of the apps, each with the apps it holds and the group of each: a module's group is
#: the name after its folder (``posenc.measuring.lab.cli`` is the lab's), ``input_sizes`` is the
#: lesson's (numbers the tour and the explorer share).
APP_FOLDERS = {
    "teaching": {"lesson": "lesson", "input_sizes": "lesson", "tour": "tour", "explorer": "explorer"},
    # the corpus is the measuring apps' shared text: it stands below them, in the folder's own group
    "measuring": {"lab": "lab", "eval": "eval", "bench": "bench", "corpus": "measuring"},
}
#: The tools at the top of the package: they may import anything and nothing imports them.
TOOLS = ("inspect", "cli", "__main__", "conform")


def layer_of(module: str) -> int:
    """The layer of a dotted module name inside ``posenc``."""
    parts = module.split(".")[1:]
    head = parts[0] if parts else ""
    if head in APP_FOLDERS or head in TOOLS:
        return LAYERS["apps"]
    if head in ("hf", "integrations", "testing", "runs"):  # runs: above the integrations (GROUP_ORDER)
        return LAYERS["interop"]
    if head in ("model", "factory"):
        return LAYERS["model"]
    if head == "":  # posenc/__init__.py re-exports the core and the model
        return LAYERS["model"]
    return LAYERS["core"]


def modules(root: Path = ROOT):
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("")
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
    assert layer_of("posenc.runs.lab_run") == 2
    assert layer_of("posenc.teaching.explorer.app") == 3
    assert layer_of("posenc.measuring.lab.cli") == 3
    assert layer_of("posenc.inspect") == 3
    assert group_of("posenc.measuring.lab.cli") == "lab"
    assert group_of("posenc.teaching.input_sizes") == "lesson"


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
    (pkg / "rope" / "bad.py").write_text("from ..teaching.explorer.app import _secret\nimport posenc.measuring.lab\n")
    found = list(imports("posenc.rope.bad", pkg / "rope" / "bad.py", False))
    assert [(t, n) for _, t, n in found] == [
        ("posenc.teaching.explorer.app", ["_secret"]),
        ("posenc.measuring.lab", []),
    ]
    assert all(layer_of(t) > layer_of("posenc.rope.bad") for _, t, _ in found)


#: The groups of modules, lowest first, and the groups each may import besides itself: the core, the
#: model, the integrations, the run-file layer, then the apps. The teaching apps (tour, explorer) stand
#: on the lesson; the measuring apps (lab, eval, bench) on the run files and the text they share
#: (``posenc.measuring.corpus``). No app imports a sibling
#: app; the tools (``inspect``, the command line) may import anything.
GROUP_ORDER = ("core", "model", "integrations", "runs")
MAY_IMPORT = {
    "core": set(),
    "model": {"core"},
    "integrations": {"core", "model"},
    "runs": {"core", "model", "integrations"},
    "lesson": set(GROUP_ORDER),
    "tour": set(GROUP_ORDER) | {"lesson"},
    "explorer": set(GROUP_ORDER) | {"lesson"},
    "lab": set(GROUP_ORDER) | {"measuring"},
    "eval": set(GROUP_ORDER) | {"measuring"},
    "bench": set(GROUP_ORDER) | {"measuring"},
    # the teaching folder's own ``__init__``: a map of the folder, importing nothing
    "teaching": set(),
    # the measuring folder's map and what its apps share (the corpus), below the apps
    "measuring": set(GROUP_ORDER),
}
APPS = ("lesson", "tour", "explorer", "lab", "eval", "bench")


def group_of(module: str) -> str:
    """The group of a dotted module name inside ``posenc`` (``tools`` for inspect and the command line).

    Raises:
        ValueError: for a module in an app folder that names no app of that folder, so that a new
            app is placed in :data:`APP_FOLDERS` (and its order in :data:`MAY_IMPORT`) when it is added.
    """
    parts = module.split(".")[1:]
    head = parts[0] if parts else ""
    if head in TOOLS:
        return "tools"
    if head in APP_FOLDERS:
        if len(parts) == 1:
            return head  # the folder's own __init__: its map, importing nothing
        if parts[1] not in APP_FOLDERS[head]:
            raise ValueError(
                f"{module}: {parts[1]!r} is no app of {head}/ (APP_FOLDERS knows {sorted(APP_FOLDERS[head])})"
            )
        return APP_FOLDERS[head][parts[1]]
    if head == "runs":
        return head
    if head in ("hf", "integrations", "testing"):
        return "integrations"
    if head in ("", "model", "factory"):
        return "model"
    return "core"


def _resolved(root: Path, target: str, names: list) -> list:
    """``target``, or ``target.name`` for each name that is a submodule (``from posenc.lab import store``)."""
    base = root.parent / target.replace(".", "/")
    return (
        [target]
        if not names
        else [f"{target}.{n}" if (base / n).exists() or (base / f"{n}.py").exists() else target for n in names]
    )


def group_violations(root: Path = ROOT) -> set:
    """(importer, imported) modules where an import crosses the group order, or where a module
    imports a private module (``_name``) of another app group."""
    found = set()
    for module, path, is_package in modules(root):
        own = group_of(module)
        if own == "tools":
            continue
        for _, target, names in imports(module, path, is_package):
            for t in _resolved(root, target, names):
                other = group_of(t)
                private = other in APPS and any(p.startswith("_") for p in t.split(".")[1:])
                if (other != own and other not in MAY_IMPORT[own]) or (other != own and private):
                    found.add((module, t))
    return found


def test_groups_import_only_down_the_order():
    """No import crosses the order, none excepted: a piece two apps need moves down to a group below
    both (a lab run's model and the scalings' labels went to ``runs/``), never across."""
    found = sorted(group_violations())
    assert not found, "imports across app groups (move the shared piece down, see MAY_IMPORT):\n" + "\n".join(
        f"{a} imports {b}" for a, b in found
    )


def test_the_group_checker_sees_each_kind_of_violation(tmp_path):
    """The group checker must be able to fail: a made-up package with one import of each kind."""
    pkg = tmp_path / "posenc"
    files = {
        "__init__.py": "",
        "runs/__init__.py": "from ..measuring.lab import store\n",  # runs below the lab
        "measuring/__init__.py": "",
        "measuring/lab/__init__.py": "",
        "measuring/lab/store.py": "from ...teaching.explorer.palette import LABELS\n",  # another app
        "measuring/eval/__init__.py": "from ..lab import store\n",  # a sibling measuring app
        "teaching/__init__.py": "",
        "teaching/lesson/__init__.py": "",
        "teaching/lesson/_check.py": "",
        "teaching/lesson/vectors.py": "from ...runs import stamp\n",  # allowed: down the order
        "teaching/lesson/figures.py": "from ...measuring.lab import store\n",  # the lesson reads the lab
        "teaching/input_sizes.py": "from .lesson.vectors import TWO_PI\n",  # allowed: the lesson's own
        "teaching/explorer/__init__.py": "",
        "teaching/explorer/palette.py": "",
        "teaching/explorer/quiz.py": "from ..lesson._check import Check\nfrom ..lesson.vectors import TWO_PI\n",
        "teaching/tour/__init__.py": "import posenc.teaching.explorer.palette\n",  # a sibling teaching app
        "cli.py": "import posenc.measuring.lab.store\n",  # the tools may import anything
    }
    for name, text in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    assert group_violations(pkg) == {
        ("posenc.runs", "posenc.measuring.lab.store"),
        ("posenc.measuring.lab.store", "posenc.teaching.explorer.palette"),
        ("posenc.measuring.eval", "posenc.measuring.lab.store"),
        ("posenc.teaching.lesson.figures", "posenc.measuring.lab.store"),
        ("posenc.teaching.explorer.quiz", "posenc.teaching.lesson._check"),
        ("posenc.teaching.tour", "posenc.teaching.explorer.palette"),
    }


def test_every_module_has_a_group_in_the_order():
    """A module in an app folder belongs to one of that folder's apps (a new app gets its place in
    APP_FOLDERS and MAY_IMPORT), and every group has its line in MAY_IMPORT."""
    groups = {module: group_of(module) for module, _, _ in modules()}
    assert set(groups.values()) - {"tools"} <= set(MAY_IMPORT), set(groups.values()) - set(MAY_IMPORT)
    assert groups["posenc.teaching.input_sizes"] == "lesson" and groups["posenc.measuring.bench"] == "bench"
    with pytest.raises(ValueError, match="'notes' is no app of teaching/"):
        group_of("posenc.teaching.notes.pages")


def test_the_architecture_page_names_every_group_and_top_level_module():
    """docs/architecture.md is the map: every group and every module or package at the top of posenc
    appears in it (in backticks), so a new one is placed on the page when it is added."""
    page = (ROOT.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    tops = sorted(
        p.stem if p.suffix == ".py" else f"{p.name}/"
        for p in ROOT.iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())
    )
    missing = [t for t in tops if f"`{t}`" not in page]
    groups = [g for g in list(MAY_IMPORT) + ["tools"] if g not in page]
    assert not missing and not groups, f"not on docs/architecture.md: modules {missing}, groups {groups}"


#: Packages whose docstring is not their map, with where the map is.
MAPPED_ELSEWHERE = {
    "posenc.teaching.lesson.chapters": "one module per chapter of the lesson's manifest, which is its map "
    "(tests/teaching/lesson/test_lesson_one_source.py holds every chapter module to a manifest entry)",
}


#: Modules a package's map does not name yet. The list only shrinks: the test fails on a new gap and
#: on a listed one that is closed.
UNMAPPED: dict = {}


def named_in(docstring: str) -> set:
    """Every name inside the docstring's backtick spans: ``x``, `x`, :mod:`~posenc.a.x` all name x."""
    return {word for span in re.findall(r"`+([^`]+)`+", docstring) for word in re.findall(r"[A-Za-z_]\w*", span)}


def unmapped(root: Path = ROOT) -> list:
    """``package: module`` for each module or subpackage its package's docstring does not name."""
    missing = []
    for init in sorted(root.rglob("__init__.py")):
        folder = init.parent
        package = ".".join(folder.relative_to(root.parent).parts)
        if package in MAPPED_ELSEWHERE:
            continue
        inside = [p.stem for p in folder.glob("*.py") if p.stem != "__init__"]
        inside += [d.name for d in folder.iterdir() if (d / "__init__.py").is_file()]
        named = named_in(ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or "")
        missing += [f"{package}: {name}" for name in sorted(inside) if name not in named]
    return missing


def test_each_package_docstring_is_a_map_of_its_modules():
    """A package's ``__init__`` docstring names each of its modules and subpackages (in backticks), so
    a reader finds where a thing lives from the top down, and a new module is placed on the map."""
    missing = unmapped()
    new = sorted(set(missing) - set(UNMAPPED))
    closed = sorted(set(UNMAPPED) - set(missing))
    assert not new, "modules their package's docstring does not name:\n" + "\n".join(new)
    assert not closed, "now on their package's map, so remove from UNMAPPED:\n" + "\n".join(closed)


def test_the_map_check_sees_a_module_left_off(tmp_path):
    pkg = tmp_path / "posenc"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""Top: :mod:`posenc.one` and ``sub``."""\n')
    (pkg / "one.py").write_text("")
    (pkg / "two.py").write_text('"""two is named in prose only, not in backticks."""\n')
    (pkg / "sub" / "__init__.py").write_text('"""Sub: the three of them."""\n')
    (pkg / "sub" / "three.py").write_text("")
    assert unmapped(pkg) == ["posenc: two", "posenc.sub: three"]


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


def import_graph(found=None) -> dict[str, set[str]]:
    """Module -> the posenc modules it imports (lazy imports included), over the installed package."""
    found = list(modules()) if found is None else found
    known = {module for module, _, _ in found}
    graph: dict[str, set[str]] = {module: set() for module in known}
    for module, path, is_package in found:
        for _, target, names in imports(module, path, is_package):
            for name in names or [None]:
                edge = f"{target}.{name}" if name and f"{target}.{name}" in known else target
                if edge in known and edge != module:
                    graph[module].add(edge)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycles():
    """Two modules that import each other (directly or around a longer loop) are one concept split in
    two, or a shared helper living in the wrong module: move what both need down a layer."""
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_cycle_finder_finds_cycles():
    """The cycle check must be able to fail: a loop of three, a pair, a self-free chain and a tail."""
    graph = {
        "a": {"b"},
        "b": {"c"},
        "c": {"a", "d"},
        "d": set(),
        "e": {"f"},
        "f": {"e"},
        "g": {"a"},
    }
    assert sorted(cycles(graph)) == [["a", "b", "c"], ["e", "f"]]
    assert cycles({"x": {"y"}, "y": set()}) == []


def test_import_graph_sees_a_mutual_import(tmp_path):
    pkg = tmp_path / "posenc"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "one.py").write_text("def f():\n    from .two import g\n")
    (pkg / "two.py").write_text("from posenc.one import f\n")
    found = [
        ("posenc", pkg / "__init__.py", True),
        ("posenc.one", pkg / "one.py", False),
        ("posenc.two", pkg / "two.py", False),
    ]
    assert cycles(import_graph(found)) == [["posenc.one", "posenc.two"]]


INTEGRATIONS_ORDER = (
    "posenc.integrations.hints",
    "posenc.integrations.discovery",
    "posenc.integrations.tables",
    "posenc.integrations.transformers",
)


def test_the_integrations_modules_point_down_their_own_order():
    """Inside integrations/: hints (the flat table) < discovery (the probe) < tables (the tables in
    each family's form) < transformers (the install), as docs/architecture.md says; lazy imports count."""
    graph = import_graph()
    rank = {module: i for i, module in enumerate(INTEGRATIONS_ORDER)}
    assert set(INTEGRATIONS_ORDER) <= set(graph), "a module of the integrations order is missing"
    upward = [
        f"{module} imports {target}"
        for module in INTEGRATIONS_ORDER
        for target in sorted(graph[module])
        if target in rank and rank[target] > rank[module]
    ]
    assert not upward, "integrations modules that import up their order:\n" + "\n".join(upward)


#: The longest body a function of the package may have. A chapter's ``prose()`` is exempt: it is the
#: chapter's text, a list of blocks read top to bottom, not logic.
MAX_BODY_LINES = 80


def long_functions(root: Path) -> list:
    """``(lines, file, name)`` of each function under ``root`` whose body runs over MAX_BODY_LINES.

    The body is counted from its first statement (the docstring included) to its last line, so a
    signature that the formatter writes one parameter per line (a Triton kernel's forty strides) does
    not count; nested functions count inside the function that holds them and on their own.
    """
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name == "prose":
                continue
            lines = node.end_lineno - node.body[0].lineno + 1
            if lines > MAX_BODY_LINES:
                found.append((lines, str(path.relative_to(root)), node.name))
    return found


def test_no_function_is_over_80_lines():
    assert long_functions(ROOT) == []


def test_the_length_check_sees_a_long_function_and_spares_prose(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_BODY_LINES + 1))
    (tmp_path / "long.py").write_text("def long():\n" + body + "\n\ndef prose():\n" + body)
    (tmp_path / "short.py").write_text("def short(\n" + "    a,\n" * 100 + "):\n" + body.replace("    x0 = 0\n", "", 1))
    assert long_functions(tmp_path) == [(MAX_BODY_LINES + 1, "long.py", "long")]


#: The most positional parameters a function of the lab, eval or bench takes: a command's settings
#: travel as one object (``LabRun``, ``EvalRun``, ``BenchRun``), and options past the first few are
#: keyword-only.
MAX_POSITIONAL = 6


def wide_functions(root: Path) -> list:
    """``(count, file, name)`` of each function under ``root`` taking more than MAX_POSITIONAL
    positional parameters (``self`` and ``cls`` included)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                count = len(node.args.posonlyargs) + len(node.args.args)
                if count > MAX_POSITIONAL:
                    found.append((count, str(path.relative_to(root)), node.name))
    return found


def test_no_function_of_the_lab_eval_or_bench_takes_more_than_six_positional_parameters():
    assert wide_functions(ROOT / "measuring") == []


def test_the_width_check_sees_a_wide_function_and_spares_keyword_only(tmp_path):
    source = "def wide(a, b, c, d, e, f, g):\n    pass\n\n\ndef kw(a, b, c, d, e, f, *, g):\n    pass\n"
    (tmp_path / "m.py").write_text(source)
    assert wide_functions(tmp_path) == [(7, "m.py", "wide")]
