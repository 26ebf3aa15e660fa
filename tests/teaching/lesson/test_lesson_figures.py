"""The lesson's figure routes come from the chapter modules: every figure a chapter declares in
``FIGURES`` is served at ``/api/lesson/<route>`` with the function's parameters and the ranges its
chapter declares (the limits ``/api/lesson/chapters`` publishes), and a figure the routes could not
serve is refused when the chapters are imported, naming the chapter, the figure and the parameter."""

from __future__ import annotations

import inspect
import subprocess
import sys
from types import ModuleType

import pytest
from fastapi import APIRouter
from fastapi.encoders import jsonable_encoder
from fastapi.testclient import TestClient

from posenc.teaching.explorer.app import create_app
from posenc.teaching.explorer.routers.lesson import add_figure_routes
from posenc.teaching.lesson.chapters import (
    FIGURES,
    LAB_RUN,
    MODULES,
    Choice,
    Figure,
    Text,
    collect_figures,
    figure_ranges,
)

#: lesson routes that are not figures
NOT_FIGURES = {"/api/lesson/chapters", "/api/lesson/prose/{chapter}"}


@pytest.fixture(scope="module")
def app():
    return create_app()


@pytest.fixture(scope="module")
def client(app):
    return TestClient(app, base_url="http://127.0.0.1")


def query_parameters(app) -> dict[str, dict[str, dict]]:
    """Lesson path -> its query parameters (name -> OpenAPI entry), as the app registers them."""
    paths = app.openapi()["paths"]
    return {
        path: {p["name"]: p for p in operation["get"].get("parameters", []) if p["in"] == "query"}
        for path, operation in paths.items()
        if path.startswith("/api/lesson/") and path not in NOT_FIGURES
    }


# -- every declared figure is served, as declared --------------------------------------------------------
def test_the_figure_routes_are_the_figures_the_chapters_declare(app):
    declared = {route: chapter for chapter, module in MODULES.items() for route in getattr(module, "FIGURES", {})}
    assert {route: f.chapter for route, f in FIGURES.items()} == declared
    assert len(declared) >= 17
    assert set(query_parameters(app)) == {f"/api/lesson/{route}" for route in declared}


def test_each_route_takes_its_functions_parameters_with_their_declared_ranges(app):
    registered = query_parameters(app)
    for route, figure in FIGURES.items():
        given = registered[f"/api/lesson/{route}"]
        by_server = [p.name for p in figure.parameters if p.kind == "lab_run"]
        assert list(given) == [n for n in inspect.signature(figure.function).parameters if n not in by_server], route
        for p in figure.parameters:
            if p.kind != "range":
                continue
            minimum, maximum, default, help_ = figure_ranges()[p.range_name]
            schema = given[p.name]["schema"]
            assert (schema["minimum"], schema["maximum"], schema["default"]) == (minimum, maximum, default), (route, p)
            assert schema["type"] == ("number" if isinstance(default, float) else "integer"), (route, p)
            assert given[p.name]["description"] == help_


def test_the_published_limits_are_what_the_chapters_declare(client):
    """GET /api/lesson/chapters publishes every range the chapter modules declare, and only those; every
    numeric parameter of a figure route is one of them."""
    published = client.get("/api/lesson/chapters").json()["limits"]
    declared: dict = {}
    for module in MODULES.values():
        declared.update(getattr(module, "FIGURE_RANGES", {}))
    assert published == {
        name: {"minimum": lo, "maximum": hi, "default": default, "help": help_}
        for name, (lo, hi, default, help_) in declared.items()
    }
    used = {p.range_name for f in FIGURES.values() for p in f.parameters if p.kind == "range"}
    assert used == set(declared)  # no range is declared that no figure takes


@pytest.mark.parametrize("route", list(FIGURES))
def test_a_figure_route_with_no_query_serves_the_function_at_its_defaults(client, route):
    figure = FIGURES[route]
    response = client.get(f"/api/lesson/{route}")
    assert response.status_code == 200, response.text
    server = {p.name: None for p in figure.parameters if p.kind == "lab_run"}  # the app runs without a lab run
    assert response.json() == jsonable_encoder(figure.function(**figure.defaults(), **server))


@pytest.mark.parametrize(
    "route, name",
    [(r, p.name) for r, f in FIGURES.items() for p in f.parameters if p.kind == "range"],
)
def test_a_value_past_its_range_is_refused_with_422_naming_it(client, route, name):
    parameter = next(p for p in FIGURES[route].parameters if p.name == name)
    minimum, maximum, _, _ = parameter.range
    for value, bound in ((maximum + 1, "less than or equal to"), (minimum - 1, "greater than or equal to")):
        response = client.get(f"/api/lesson/{route}", params={name: value})
        assert response.status_code == 422, (route, name, value)
        detail = response.json()["detail"]
        assert detail.startswith(f"{name}: ") and repr(str(value)) in detail, detail
        allowed = minimum if "greater" in bound else maximum
        assert f"{bound} {int(allowed) if float(allowed).is_integer() else allowed}" in detail, detail


# -- what a chapter may declare ----------------------------------------------------------------------------
def chapter_module(figures: dict, ranges: dict) -> ModuleType:
    module = ModuleType("posenc.teaching.lesson.chapters.toy")
    module.FIGURES = figures  # type: ignore[attr-defined]
    module.FIGURE_RANGES = ranges  # type: ignore[attr-defined]
    return module


def toy(size: int, gain: float) -> dict:
    """A toy figure."""
    return {"size": size, "gain": gain}


RANGES = {"size": (1, 8, 2, "cells"), "toy_gain": (0.0, 1.0, 0.5, "gain")}


def test_the_package_resolves_its_figures_when_imported():
    """``FIGURES`` is what collect_figures makes of the chapter modules."""
    assert collect_figures(MODULES).keys() == FIGURES.keys()


def test_a_chapter_declaring_a_figure_parameter_without_a_range_is_refused_at_import():
    """Importing the chapters with one whose figure takes a parameter without a range fails, naming
    the chapter, the figure and the parameter (a fresh interpreter, the chapter's module replaced)."""
    code = (
        "import sys, types\n"
        "stub = types.ModuleType('posenc.teaching.lesson.chapters.comparison')\n"
        "stub.numbers = lambda: {}\n"
        "stub.prose = lambda n: []\n"
        "def compare(compare_len, gain):\n"
        "    return {}\n"
        "stub.FIGURE_RANGES = {'compare_len': (1, 8192, 1024, 'tokens')}\n"
        "stub.FIGURES = {'compare': compare}\n"
        "sys.modules[stub.__name__] = stub\n"
        "import posenc.teaching.lesson.chapters\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert (
        "ValueError: chapter 'comparison', figure 'compare': parameter 'gain' of compare() has no range"
        in run.stderr.splitlines()[-1]
    ), run.stderr


def test_a_figure_parameter_without_a_range_is_refused_naming_chapter_figure_and_parameter():
    module = chapter_module({"toy-figure": toy}, RANGES)  # gain has no range of its own name
    with pytest.raises(
        ValueError, match=r"chapter 'toy', figure 'toy-figure': parameter 'gain' of toy\(\) has no range"
    ):
        collect_figures({"toy": module})
    mapped = chapter_module({"toy-figure": Figure(toy, gain="toy_gain")}, RANGES)
    assert [p.range_name for p in collect_figures({"toy": mapped})["toy-figure"].parameters] == ["size", "toy_gain"]


@pytest.mark.parametrize(
    "figures, message",
    [
        (
            {"toy": Figure(toy, gain="toy_gains")},
            r"figure 'toy': parameter 'gain' of toy\(\) \(mapped to range 'toy_gains'\) has no range",
        ),
        ({"toy": Figure(toy, gain="toy_gain", seed="size")}, r"figure 'toy': toy\(\) has no parameter 'seed'"),
        ({"toy": Figure(toy, gain="toy_gain", size=3)}, r"figure 'toy': parameter 'size' of toy\(\) has spec 3"),
        ({"Toy": Figure(toy, gain="toy_gain")}, r"figure 'Toy': a route must be lower-case words"),
        ({"toy": Figure(lambda *cells: {}, cells="size")}, r"figure 'toy': parameter 'cells' .* not \*cells"),
        ({"toy": "toy"}, r"figure 'toy': FIGURES must map a route to a function or a Figure"),
    ],
)
def test_a_figure_the_routes_could_not_serve_is_refused(figures, message):
    with pytest.raises(ValueError, match=r"chapter 'toy', " + message):
        collect_figures({"toy": chapter_module(figures, RANGES)})


def test_one_route_declared_by_two_chapters_is_refused():
    figures = {"toy": Figure(toy, gain="toy_gain")}
    with pytest.raises(ValueError, match=r"figure 'toy' is declared twice: in chapter 'one' and in chapter 'two'"):
        collect_figures({"one": chapter_module(figures, RANGES), "two": chapter_module(figures, RANGES)})


# -- a new chapter's figure needs no code in the explorer ------------------------------------------------
def labelled(text: str, style: str, run) -> dict:
    """A toy figure with a text, a choice and the lab run."""
    return {"text": text, "style": style, "run": None if run is None else str(run)}


def toy_client(tmp_path) -> TestClient:
    module = chapter_module(
        {
            "toy": Figure(toy, gain="toy_gain"),
            "toy-labelled": Figure(labelled, text=Text("a b"), style=Choice("plain"), run=LAB_RUN),
        },
        RANGES,
    )
    app = create_app(lab_run=tmp_path)
    routes = APIRouter(prefix="/api/toy")
    add_figure_routes(routes, collect_figures({"toy": module}))
    app.include_router(routes)
    return TestClient(app, base_url="http://127.0.0.1")


def test_a_declared_figure_is_served_and_checked_with_no_route_written(tmp_path):
    client = toy_client(tmp_path)
    assert client.get("/api/toy/toy").json() == {"size": 2, "gain": 0.5}
    assert client.get("/api/toy/toy", params={"size": 8, "gain": 0.25}).json() == {"size": 8, "gain": 0.25}
    for params, detail in (
        ({"size": 9}, "size: Input should be less than or equal to 8 (got '9')"),
        ({"gain": "nan"}, "gain: Input should be a finite number (got 'nan')"),
        ({"size": "two"}, "size: Input should be a valid integer"),
    ):
        response = client.get("/api/toy/toy", params=params)
        assert response.status_code == 422 and response.json()["detail"].startswith(detail), response.text


def test_the_lab_run_comes_from_the_server_never_from_the_query(tmp_path):
    client = toy_client(tmp_path)
    served = client.get("/api/toy/toy-labelled", params={"run": "/etc", "text": "x y"}).json()
    assert served == {"text": "x y", "style": "plain", "run": str(tmp_path)}
    too_long = client.get("/api/toy/toy-labelled", params={"style": "x" * 21})
    assert too_long.status_code == 422 and "style" in too_long.json()["detail"]
