"""docs/explorer.md is checked against the code it describes: the lesson's chapter table against the
manifest, the JSON API table against the routes the app registers (paths, query parameters, and the
chapter each lesson endpoint draws), and every ``posenc.…`` name it gives against the package."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import posenc.teaching.explorer
from posenc.teaching.explorer.app import create_app
from posenc.teaching.lesson.manifest import CHAPTERS

DOC = Path(__file__).resolve().parents[3] / "docs" / "explorer.md"
STATIC = Path(posenc.teaching.explorer.__file__).parent / "static"


def section(title: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def documented_endpoints() -> dict[str, tuple[set[str], str]]:
    """Path -> (its documented query parameters, what the row says it returns), from the API table."""
    found: dict[str, tuple[set[str], str]] = {}
    for line in section("The JSON API").splitlines():
        if not line.startswith("| `GET "):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        for endpoint in re.findall(r"`GET ([^`]+)`", cells[0]):
            path, _, query = endpoint.partition("?")
            params = {p for p in query.split("&") if p and not p.startswith("<")}
            assert path not in found, f"{path} is documented twice"
            found[path] = (params, cells[1])
    return found


def registered_routes() -> dict[str, set[str]]:
    """Path -> its query parameters, for every ``/api`` route of the app (read from its OpenAPI schema)."""
    paths = create_app().openapi()["paths"]
    return {
        path: {p["name"] for p in operation["get"].get("parameters", []) if p["in"] == "query"}
        for path, operation in paths.items()
        if path.startswith("/api")
    }


def test_every_api_route_is_documented_and_every_documented_route_exists():
    documented, registered = documented_endpoints(), registered_routes()
    assert sorted(set(registered) - set(documented)) == [], "routes missing from docs/explorer.md's API table"
    assert sorted(set(documented) - set(registered)) == [], "documented routes the app does not register"
    for path, params in registered.items():
        assert documented[path][0] == params, f"{path}: documented {documented[path][0]}, takes {params}"


def lesson_endpoints_by_chapter() -> dict[str, set[int]]:
    """Lesson endpoint path -> the numbers of the chapters whose script calls it, directly (``api("...")``)
    or as a figure's ``route`` for core.js's figure unit (each chapter's script is
    lesson/chapters/<module>.js, named by its id)."""
    number = {chapter.module: k + 1 for k, chapter in enumerate(CHAPTERS)}
    used: dict[str, set[int]] = {}
    for path in sorted((STATIC / "lesson" / "chapters").glob("*.js")):
        assert path.stem in number, f"{path.name} is the script of no chapter of the manifest"
        text = path.read_text(encoding="utf-8")
        for endpoint in re.findall(r'(?:api\(|route:\s*)"(/api/lesson/[\w-]+)"', text):
            used.setdefault(endpoint, set()).add(number[path.stem])
    return used


def test_each_lesson_endpoint_names_the_chapter_that_draws_it():
    documented = documented_endpoints()
    used = lesson_endpoints_by_chapter()
    assert len(used) >= 15
    for endpoint, chapters in used.items():
        says = {int(n) for n in re.findall(r"chapter (\d+)", documented[endpoint][1])}
        assert says == chapters, f"{endpoint} is drawn by chapter(s) {sorted(chapters)}, the docs say {sorted(says)}"


def test_the_chapter_table_is_the_manifest():
    rows = re.findall(r"^\| (\d+) \| (.+?) \(`#([\w-]+)`\) \|", section("The lesson (the landing page)"), re.M)
    assert [(int(n), hash_) for n, _, hash_ in rows] == [(k + 1, c.id) for k, c in enumerate(CHAPTERS)]
    assert [title for _, title, _ in rows] == [c.title for c in CHAPTERS]


def dotted_names() -> set[str]:
    return set(re.findall(r"`(posenc(?:\.\w+)+)`", DOC.read_text(encoding="utf-8")))


@pytest.mark.parametrize("name", sorted(dotted_names()))
def test_every_posenc_name_the_page_gives_exists(name):
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            assert hasattr(obj, attribute), f"{name}: {'.'.join(parts[:cut])} has no {attribute!r}"
            obj = getattr(obj, attribute)
        return
    pytest.fail(f"{name} is not importable")
