"""The explorer's server and page, in process: the routes' limits, the static files and their policy, the
host check, the command's defaults, the page's sliders within the API's limits, the one palette module
and the one chart module the views and chapters share."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest
from explorer_client import get
from fastapi.testclient import TestClient

from posenc.rope import REGISTRY
from posenc.teaching.explorer.app import create_app
from posenc.teaching.explorer.limits import LIMITS
from posenc.teaching.explorer.server import _allowed_hosts, add_arguments, port_free


def _query_params():
    from posenc.teaching.explorer.routers import lab, lesson, workbench

    for router in (workbench.router, lesson.router, lab.router):
        for route in router.routes:
            for field in route.dependant.query_params:
                bounds = {type(m).__name__: m for m in field.field_info.metadata}
                yield router, route.path, field, bounds


def test_every_numeric_query_parameter_is_a_closed_range_and_floats_refuse_inf_nan():
    numeric = [(path, f, b) for _, path, f, b in _query_params() if f.field_info.annotation in (int, float)]
    assert len(numeric) > 60
    for path, field, bounds in numeric:
        assert "Ge" in bounds and "Le" in bounds, (path, field.name)
        if field.field_info.annotation is float:
            assert bounds["AllowInfNan"].allow_inf_nan is False, (path, field.name)


def test_a_workbench_parameter_named_in_the_limits_has_the_published_range():
    from posenc.teaching.explorer.routers import workbench

    checked = 0
    for router, path, field, bounds in _query_params():
        key = {"sin_base": "base", "compare_base": "base"}.get(field.name, field.name)
        if router is not workbench.router or key not in LIMITS or (path, key) == ("/api/precision", "pos"):
            continue
        limit = LIMITS[key]
        assert (bounds["Ge"].ge, bounds["Le"].le) == (limit.minimum, limit.maximum), (path, field.name)
        checked += 1
    assert checked > 40


def test_a_served_view_refuses_a_query_for_a_parameter_it_does_not_have():
    """The workbench serves a view's parameters by name; an override for a name the view lacks (a typo)
    is refused when the route is made, before anything is registered."""
    from posenc.teaching.explorer import views
    from posenc.teaching.explorer.routers import workbench

    before = len(workbench.router.routes)
    with pytest.raises(ValueError, match=r"alibi: queries \['head_count'\] name no parameter of alibi_view"):
        workbench._serve("/api/alibi", views.alibi_view, "alibi", head_count=None)
    assert len(workbench.router.routes) == before


def test_index_and_static_files_are_served_with_a_strict_policy(client):
    page = client.get("/")
    assert page.status_code == 200 and "posenc explorer" in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert client.get("/static/style.css").status_code == 200
    assert "http://" not in page.text and "https://" not in page.text  # nothing from the network


def chapter_scripts(client) -> list[str]:
    """The path of every lesson chapter's script, as the page imports it (by the manifest's module name)."""
    return [f"/static/lesson/chapters/{c['module']}.js" for c in get(client, "/api/lesson/chapters")["chapters"]]


def served_page(client) -> str:
    """The page's markup: index.html as the server sends it, and the markup every chapter's script exports
    (run as the page runs it, :func:`lesson_page.chapter_markup`), which the page writes into its article."""
    from lesson_page import chapter_markup

    chapters = get(client, "/api/lesson/chapters")["chapters"]
    return "\n".join([client.get("/").text, *(chapter_markup(c["id"]) for c in chapters)])


def test_every_script_the_page_imports_is_served_and_local(client):
    import posixpath
    import re

    # the page's modules, and each chapter's script, which the lesson imports by the manifest's name
    todo, seen = ["/static/app.js", *chapter_scripts(client)], set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        response = client.get(path)
        assert response.status_code == 200, path
        assert "javascript" in response.headers["content-type"]
        for target in re.findall(r'^import [^;]*? from "([^"]+)";', response.text, flags=re.M):
            assert target.startswith("."), f"{path} imports {target} from outside the page"
            todo.append(posixpath.normpath(posixpath.join(posixpath.dirname(path), target)))
    assert {"/static/core.js", "/static/charts.js", "/static/views/dials.js"} <= seen
    assert len(seen) >= 12


@pytest.mark.parametrize(
    "path",
    [
        "/static/../app.py",
        "/static/%2e%2e/app.py",
        "/static/..%2fapp.py",
        "/static/../../__init__.py",
        "/static/nope.js",
        "/app.py",
        "/etc/passwd",
    ],
)
def test_only_the_explorer_static_files_are_served(client, path):
    assert client.get(path).status_code == 404


def test_unknown_host_header_is_refused():
    with TestClient(create_app()) as strict:
        assert strict.get("/api/meta", headers={"host": "evil.example"}).status_code == 400
        assert strict.get("/api/meta", headers={"host": "127.0.0.1:8765"}).status_code == 200
        assert strict.get("/api/meta", headers={"host": "[::1]:8765"}).status_code == 200
        assert strict.get("/api/meta", headers={"host": "localhost"}).status_code == 200


def test_meta_lists_limits_methods_and_checks(client):
    meta = get(client, "/api/meta")
    assert meta["limits"]["d_model"]["maximum"] == LIMITS["d_model"].maximum
    overlays = {name for name, d in REGISTRY.items() if d.parameters}  # from the registry
    assert set(meta["methods"]) == overlays >= {"linear", "ntk", "dynamic", "yarn", "llama3"}
    assert meta["checks"] >= 6
    assert meta["lab"] is False


#: slider id -> (API parameter, how the slider's value becomes the parameter's)
SLIDERS = {
    "fp-d-model": ("d_model", int),
    "fp-length": ("length", int),
    "fp-base-log": ("base", lambda v: 10**v),
    "g-base-log": ("base", lambda v: 10**v),
    "dl-q": ("q_pos", int),
    "dl-k": ("k_pos", int),
    "dl-offset": ("offset", int),
    "dl-seed": ("seed", int),
    "wo-deg": ("degrees", float),
    "sc-max": ("max_distance", int),
    "sc-dmodel": ("d_model", int),
    "sc-heads": ("heads", int),
    "sc-compare-log": ("base", lambda v: 10**v),
    "wl-train-log": ("train_len", lambda v: 2**v),
    "wl-seq-log": ("seq_len", lambda v: 2**v),
    "al-heads": ("heads", int),
    "al-len": ("matrix_len", int),
    "al-seed": ("seed", int),
    "pr-max-log": ("max_position", lambda v: 2**v),
}


def test_page_sliders_stay_inside_the_api_limits(client):
    import re

    page = served_page(client)
    found = dict(re.findall(r'<input type="range" id="([\w-]+)"([^>]*)>', page))
    assert set(SLIDERS) <= set(found)
    for slider, (param, convert) in SLIDERS.items():
        attrs = dict(re.findall(r'(min|max)="([^"]+)"', found[slider]))
        limit = LIMITS[param]
        for bound in ("min", "max"):
            value = convert(float(attrs[bound]))
            assert limit.minimum <= value <= limit.maximum, (slider, bound, value)


def test_scaling_parameters_are_defined_once_by_the_registry(client):
    """A scaling's parameter has one definition, its descriptor's ``Parameter``: no slider for it in
    the page's HTML, no limit for it in ``limits.py``; the API checks it against the registry."""
    import dataclasses
    import re

    from posenc.rope.registry import scaling_parameters
    from posenc.teaching.lesson.palette import parameter_label

    parameters = scaling_parameters()
    assert {"factor", "beta_fast", "beta_slow", "low_freq_factor", "high_freq_factor"} <= set(parameters)
    assert not set(parameters) & set(LIMITS)
    page = served_page(client)
    for name in parameters:
        assert not re.search(rf'<input[^>]*id="wl-(param-)?{name.replace("_", "-")}"', page), name
    listed = get(client, "/api/scalings")["scalings"]
    served = {p["name"]: p for s in listed for p in s["parameters"]}
    # the ranges are the registry's, the labels the palette's
    assert served == {name: {**dataclasses.asdict(p), "label": parameter_label(name)} for name, p in parameters.items()}
    for name, p in parameters.items():
        for value, ok in (
            (p.minimum, True),
            (p.maximum, True),
            (p.maximum + p.step, False),
            (p.minimum - p.step, False),
        ):
            response = client.get("/api/wavelengths", params={name: value})
            assert (response.status_code == 200) == ok, (name, value, response.text)
            if ok:
                assert response.json()["settings"][name] == value


def test_the_lessons_factor_slider_and_check_read_the_registry(client):
    """Issue 20: the lesson's factor has no range of its own. Its server-side limit is the registry's
    Parameter (the API accepts the descriptor's ends and refuses a step past them), and its slider in
    the HTML carries no range or default: the page sets them from GET /api/scalings. Its default is the
    chapter's own, the factor the chapter's text measures (the page reads it from /api/lesson/chapters)."""
    import re

    from posenc.rope.registry import scaling_parameters
    from posenc.teaching.explorer.lesson import LESSON_LIMITS
    from posenc.teaching.explorer.limits import scaling_limit
    from posenc.teaching.lesson.chapters.stretching_rope import FACTOR

    p = scaling_parameters()["factor"]
    limit = LESSON_LIMITS["factor"]
    registry = scaling_limit("factor")
    assert (limit.minimum, limit.maximum, limit.help) == (registry.minimum, registry.maximum, registry.help)
    assert (limit.minimum, limit.maximum, limit.default) == (p.minimum, p.maximum, FACTOR)
    assert client.get("/api/lesson/chapters").json()["limits"]["factor"]["default"] == FACTOR
    for value, ok in ((p.minimum, True), (p.maximum, True), (p.maximum + p.step, False), (p.minimum - p.step, False)):
        response = client.get("/api/lesson/stretch", params={"factor": value, "train_len": 2048, "head_dim": 16})
        assert (response.status_code == 200) == ok, (value, response.text)
    page = served_page(client)
    tags = re.findall(r"<input[^>]*data-scaling-param=[^>]*>", page)
    assert any('id="str-factor"' in tag for tag in tags)
    for tag in tags:
        assert not re.search(r"\s(min|max|step|value)=", tag), tag


def test_scaling_limit_reads_any_registered_parameter():
    from tilt_scaling import TILT

    from posenc.rope import register_scaling, unregister_scaling
    from posenc.teaching.explorer.limits import scaling_limit

    with pytest.raises(ValueError, match="'tilt_floor'"):
        scaling_limit("tilt_floor")
    register_scaling(TILT)
    try:
        limit = scaling_limit("tilt_floor")
    finally:
        unregister_scaling("tilt")
    # the range is the descriptor's; the help is the palette's label, the name for one it does not know
    assert (limit.minimum, limit.maximum, limit.default, limit.help) == (1.0, 4.0, 1.0, "tilt_floor")


def test_one_width_rule_for_every_figure():
    """The page sizes figures with one function, charts.js widthOf: no view keeps a helper of its own."""
    import re
    from pathlib import Path

    from posenc.teaching.explorer import app as app_module

    static = Path(app_module.__file__).with_name("static")
    scripts = {p.relative_to(static).as_posix(): p.read_text(encoding="utf-8") for p in static.rglob("*.js")}
    definers = [name for name, text in scripts.items() if re.search(r"function (widthOf|fitWidth|chartWidth)\b", text)]
    assert definers == ["charts.js"]
    assert not [name for name, text in scripts.items() if "fitWidth" in text]
    views = [name for name in scripts if name.startswith("views/") and "widthOf(" in scripts[name]]
    assert len(views) >= 7
    # no figure caps its own width: widthOf takes the holder and, at most, an options object {min, fallback}
    calls = [
        (name, call)
        for name, text in scripts.items()
        for call in re.findall(r"widthOf\(((?:[^()]|\([^()]*\))*)\)", text)
    ]
    assert len(calls) >= 30
    capped = [(name, call) for name, call in calls if "," in call and not re.search(r",\s*\{ *(min|fallback)\b", call)]
    assert capped == [], capped


def test_cli_defaults_bind_loopback():
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args([])
    assert args.host == "127.0.0.1" and args.open is False and args.lab_run is None
    assert parser.parse_args(["--port", "9000", "--open"]).port == 9000
    assert _allowed_hosts("127.0.0.1") == ["127.0.0.1", "[::1]", "localhost"]
    assert _allowed_hosts("0.0.0.0") is None


@pytest.mark.skipif(os.name != "posix", reason="TIME_WAIT and SO_REUSEADDR as on POSIX")
def test_a_port_in_time_wait_is_free_and_a_listened_port_is_not():
    """Restarting ``posenc explore`` on its port within a minute leaves the old connections in
    TIME_WAIT; uvicorn binds over them, so the port check must not call the port in use."""
    import socket

    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = listener.accept()
    assert not port_free("127.0.0.1", port)  # something listens
    accepted.close()  # the server side closes first: its end waits in TIME_WAIT
    client.recv(1)
    client.close()
    listener.close()
    with socket.socket() as plain:  # the old check's bind, without SO_REUSEADDR, trips on TIME_WAIT
        with pytest.raises(OSError):
            plain.bind(("127.0.0.1", port))
    assert port_free("127.0.0.1", port)


def test_the_page_palette_is_the_python_palette():
    """The page's palette module re-exports the tables the explorer serves from palette.py."""
    from palette_support import served_tables

    from posenc.teaching.lesson import palette

    tables = served_tables()
    for name in ("SCHEME_COLOURS", "SCALING_COLOURS", "SIGN_COLOURS", "ROLE_COLOURS", "SCALING_DASHES"):
        assert tables[name] == getattr(palette, name), name


def test_one_colour_per_scheme_and_per_scaling():
    from posenc.factory import SCHEMES
    from posenc.teaching.lesson import palette

    assert set(palette.SCHEME_COLOURS) == set(SCHEMES)
    assert set(palette.SCALING_COLOURS) == set(REGISTRY)
    # the page's scalings take colour, label and dash from the palette, which knows every posenc type
    assert set(palette.SCALING_LABELS) == set(REGISTRY)
    from posenc.teaching.explorer.scaling_view import scalings_metadata

    for entry in scalings_metadata():
        assert entry["colour"] == palette.SCALING_COLOURS[entry["name"]]
        assert entry["label"] == palette.SCALING_LABELS[entry["name"]]
        assert entry["dash"] == palette.SCALING_DASHES.get(entry["name"])
    assert not set(palette.EXTRA_COLOURS) & set(palette.SCALING_COLOURS.values()) - {None}
    colours = {
        **palette.SCHEME_COLOURS,
        **{f"scaling {k}": v for k, v in palette.SCALING_COLOURS.items() if k != "default"},
    }
    assert len(set(colours.values())) == len(colours), "two schemes or scalings share a colour"
    assert palette.SCALING_COLOURS["default"] == palette.SCHEME_COLOURS["rope"]
    signs = set(palette.SIGN_COLOURS.values())
    assert not signs & set(colours.values()), "a sign colour is also a scheme's colour"
    assert palette.diverging(0.0) == "#ffffff"
    assert palette.diverging(-1.0) == palette.SIGN_COLOURS["negative"]
    assert palette.diverging(5.0, span=5.0) == palette.SIGN_COLOURS["positive"]


#: the palette's tables (served to the page from palette.py) of colours that stand for something;
#: "scalings.default" is plain RoPE, the rope scheme
MEANING_TABLES = (
    "SCHEME_COLOURS",
    "SCALING_COLOURS",
    "SIGN_COLOURS",
    "ROLE_COLOURS",
    "DTYPE_COLOURS",
    "MARK_COLOURS",
    "TILE_COLOURS",
)


def test_a_palette_colour_means_one_thing_across_views():
    """Read from the tables the page is served: no colour stands for two things (the precision view once drew float32
    in RoPE's and the query's blue and float16 in YaRN's and the key's orange), series colours are none
    of the meaning colours, and each view takes the colours of its own meanings."""
    import re
    from collections import defaultdict

    from palette_support import served_tables

    from posenc.teaching.lesson import palette

    scripts = _static_scripts()
    served = served_tables()
    meanings: dict[str, set] = defaultdict(set)
    for table in MEANING_TABLES:
        entries = served[table]
        assert entries, table
        for key, colour in entries.items():
            meaning = "SCHEME_COLOURS rope" if (table, key) == ("SCALING_COLOURS", "default") else f"{table} {key}"
            meanings[colour.lower()].add(meaning)
    shared = {colour: sorted(m) for colour, m in meanings.items() if len(m) > 1}
    assert not shared, f"colours with two meanings: {shared}"
    series_colours = {c.lower() for c in served["SERIES_COLOURS"]}
    assert len(series_colours) == 10 and not series_colours & set(meanings)
    assert not {c.lower() for c in palette.EXTRA_COLOURS} & set(meanings)
    # each meaning's colours are used where that meaning is drawn, and nowhere else in the workbench
    views = {name: text for name, text in scripts.items() if name.startswith("views/")}
    assert "DTYPE_COLOURS[n]" in views["views/precision.js"] and "COLORS[n]" not in views["views/precision.js"]
    for name, text in views.items():
        if name != "views/dials.js":
            assert not re.search(r"COLORS\.(q|k)\b|ROLE_COLOURS", text), f"{name} draws something in a query/key colour"
        if name != "views/precision.js":
            assert "DTYPE_COLOURS" not in text, name
    assert "SCHEME_COLOURS[name]" in views["views/lab.js"]  # a lab run's scheme in the scheme's colour


def _static_scripts() -> dict[str, str]:
    from palette_support import page_scripts

    return page_scripts()


def _neutral(r: int, g: int, b: int) -> bool:
    return max(r, g, b) - min(r, g, b) <= 24  # a grey for ink, rules and frames (#1d2330 is 19 apart)


def test_every_colour_of_the_page_comes_from_palette_js():
    """One palette module: a sign map, a scheme's or scaling's colour, a ramp or any other chromatic
    colour written in a page script other than palette.js fails here, as do functions or tables of
    the palette defined a second time (charts.js once had its own copy of the sign map)."""
    import re

    scripts = _static_scripts()
    assert "palette.js" in scripts and "charts.js" in scripts and len(scripts) > 20
    offences = []
    for name, source in scripts.items():
        if name == "palette.js":
            continue
        for match in re.finditer(r"#([0-9a-fA-F]{6}|[0-9a-fA-F]{3})\b", source):
            digits = match.group(1)
            if len(digits) == 3:
                digits = "".join(c * 2 for c in digits)
            r, g, b = (int(digits[i : i + 2], 16) for i in (0, 2, 4))
            if not _neutral(r, g, b):
                offences.append(f"{name}: colour {match.group(0)}")
        for match in re.finditer(r"\[\s*(\d{1,3})\s*,\s*(\d{1,3})\s*,\s*(\d{1,3})\s*\]", source):
            if not _neutral(*(int(v) for v in match.groups())):
                offences.append(f"{name}: rgb triple {match.group(0)}")
        for match in re.finditer(r"(rgb|hsl)a?\(\s*\d", source):
            offences.append(f"{name}: literal {match.group(0)}")
        for match in re.finditer(
            r"(function\s+(diverging|divergingRGB|sequential|viridis|headColour|shadeStyle)\b"
            r"|const\s+(SIGN_COLOURS|SCHEME_COLOURS|SCALING_COLOURS|ROLE_COLOURS|VIRIDIS|SEQUENTIAL)\s*=)",
            source,
        ):
            offences.append(f"{name}: defines {match.group(0)}")
    assert not offences, "colours defined outside palette.js:\n" + "\n".join(offences)


def test_views_and_chapters_share_one_registry_loader_and_resize():
    """One front end: the page's scripts define one registry (register), one loader and one resize
    mechanism, in core.js; the lesson has no framework of its own beside the workbench's."""
    import re

    scripts = _static_scripts()
    for name in ("register", "loader", "onResize"):
        defined = [f for f, src in scripts.items() if re.search(rf"export function {name}\(", src)]
        assert defined == ["core.js"], (name, defined)
    for f, src in scripts.items():
        assert "registerChapter" not in src and "chapterLoader" not in src, f
        assert f == "core.js" or 'addEventListener("resize"' not in src, f"{f} listens for resizes itself"
    # a chapter's script exports its setup, which the lesson registers in core.js's registry by the
    # chapter's id; a view registers itself
    chapters = [f for f in scripts if f.startswith("lesson/chapters/") and "export function setup()" in scripts[f]]
    assert "register(chapter.id, { setup: module.setup })" in scripts["lesson/main.js"]
    views = [
        f for f in scripts if f.startswith("views/") and re.search(r"register\(\"[\w-]+\", \{ refresh", scripts[f])
    ]
    assert len(chapters) >= 14 and len(views) >= 10, (chapters, views)


def test_one_chart_module_draws_for_views_and_chapters():
    """charts.js is the one chart module: nothing else makes SVG nodes or draws a canvas, and the
    lesson's chapters draw with it like the workbench's views (there is no lesson/draw.js beside it)."""
    import re

    scripts = _static_scripts()
    assert "lesson/draw.js" not in scripts
    makers = [f for f, src in scripts.items() if "createElementNS" in src or "getContext(" in src]
    assert makers == ["charts.js"], makers
    users = [f for f, src in scripts.items() if re.search(r'from "(\.\./)+charts\.js"', src)]
    assert {"lesson/chapters/bag_of_tiles.js", "lesson/chapters/rope.js", "views/dials.js"} <= set(users)


def modules_imported_by_the_first_block(warm_up: bool) -> list:
    """The modules a fresh interpreter imports when it builds the lesson's first fixed block, after
    the server's warm-up or without it."""
    warm = "from posenc.teaching.explorer.server import warm_up\nwarm_up()\n" if warm_up else ""
    script = (
        "import sys\n"
        "from posenc.teaching.lesson.chapters.bag_of_tiles import fixed_block\n"
        f"{warm}"
        "before = set(sys.modules)\n"
        "fixed_block()\n"
        "print(sorted(set(sys.modules) - before))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return ast.literal_eval(done.stdout)


def test_warm_up_leaves_no_lazy_import_for_the_first_lesson_draw():
    """Regression: the first quiz answer of a fresh server built a block under ``local_random``, whose
    dispatch mode made torch import its compiler stack then (seconds on two cores, past the page's
    wait). The server's warm-up pays that at start: after it, the lesson's first fixed block imports
    no new module. Checked in a fresh interpreter, where nothing is imported yet."""
    assert modules_imported_by_the_first_block(warm_up=True) == []


def test_without_the_warm_up_the_first_lesson_draw_imports_modules():
    """The check above can fail: without the warm-up, the same first block imports modules."""
    assert len(modules_imported_by_the_first_block(warm_up=False)) > 0
