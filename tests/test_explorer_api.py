"""The explorer's JSON API, in process: every endpoint, its numbers against the library's, bad input.

The numbers are checked against posenc's public functions (or closed forms of them), never against the
explorer's own functions, so a view cannot drift from the library unnoticed.
"""

from __future__ import annotations

import json
import math
import os

import pytest
import torch
from fastapi.testclient import TestClient

from posenc.alibi import alibi_bias, alibi_slopes
from posenc.explorer import lab_results, quiz
from posenc.explorer.app import create_app
from posenc.explorer.limits import LIMITS
from posenc.explorer.server import _allowed_hosts, add_arguments, port_free
from posenc.hf import rotary_kwargs_from_hf
from posenc.learned import LearnedPositionalEmbedding, PositionOutOfRangeError
from posenc.rope import REGISTRY, RotaryEmbedding
from posenc.rope.scaling import (
    DynamicNTKScaling,
    LinearScaling,
    Llama3Scaling,
    NTKScaling,
    YaRNScaling,
    rope_frequencies,
)
from posenc.rope.tables import rope_cos_sin, rope_inv_freq
from posenc.sinusoidal import sinusoidal_frequencies, sinusoidal_table

TWO_PI = 2 * math.pi


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(allowed_hosts=None)) as c:
        yield c


def get(client, url, **params):
    response = client.get(url, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def seeded(dim, seed):
    return torch.randn(dim, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


# -- routes ----------------------------------------------------------------------------------------
def _query_params():
    from posenc.explorer.routers import lab, lesson, workbench

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
    from posenc.explorer.routers import workbench

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
    from posenc.explorer import views
    from posenc.explorer.routers import workbench

    before = len(workbench.router.routes)
    with pytest.raises(ValueError, match=r"alibi: queries \['head_count'\] name no parameter of alibi_view"):
        workbench._serve("/api/alibi", views.alibi_view, "alibi", head_count=None)
    assert len(workbench.router.routes) == before


# -- the page and its files ---------------------------------------------------------------------------
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
    overlays = {name for name, d in REGISTRY.items() if d.explorer is not None}  # from the registry
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
    import re

    from posenc.rope.registry import scaling_parameters

    parameters = scaling_parameters()
    assert {"factor", "beta_fast", "beta_slow", "low_freq_factor", "high_freq_factor"} <= set(parameters)
    assert not set(parameters) & set(LIMITS)
    page = served_page(client)
    for name in parameters:
        assert not re.search(rf'<input[^>]*id="wl-(param-)?{name.replace("_", "-")}"', page), name
    listed = get(client, "/api/scalings")["scalings"]
    served = {p["name"]: p for s in listed for p in s["parameters"]}
    assert served == {name: p.as_dict() for name, p in parameters.items()}
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

    from posenc.explorer.lesson import LESSON_LIMITS
    from posenc.explorer.limits import scaling_limit
    from posenc.lesson.chapters.stretching_rope import FACTOR
    from posenc.rope.registry import scaling_parameters

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
    from test_scaling_registry import TILT

    from posenc.explorer.limits import scaling_limit
    from posenc.rope import register_scaling, unregister_scaling

    with pytest.raises(ValueError, match="'tilt_floor'"):
        scaling_limit("tilt_floor")
    register_scaling(TILT)
    try:
        limit = scaling_limit("tilt_floor")
    finally:
        unregister_scaling("tilt")
    assert (limit.minimum, limit.maximum, limit.default, limit.help) == (1.0, 4.0, 1.0, "tilt floor (toy)")


def test_one_width_rule_for_every_figure():
    """The page sizes figures with one function, charts.js widthOf: no view keeps a helper of its own."""
    import re
    from pathlib import Path

    from posenc.explorer import app as app_module

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


# -- 1. wave fingerprint --------------------------------------------------------------------------------
def test_sinusoidal_table_is_the_library_table(client):
    d = get(client, "/api/sinusoidal", length=12, d_model=10, base=500.0)
    expected = sinusoidal_table(12, 10, 500.0)
    assert torch.equal(torch.tensor(d["table"], dtype=torch.float32), expected)
    assert d["frequencies"] == sinusoidal_frequencies(10, 500.0).tolist()
    assert d["wavelengths"] == pytest.approx([TWO_PI / f for f in d["frequencies"]])


def test_sinusoidal_cell_fills_the_formula_with_library_numbers(client):
    cell = get(client, "/api/sinusoidal/cell", pos=37, dim=7, d_model=16, base=10000.0)
    assert cell["function"] == "cos" and cell["pair"] == 3
    assert cell["value"] == float(sinusoidal_table(38, 16)[37, 7])
    assert cell["frequency"] == float(sinusoidal_frequencies(16)[3])
    assert cell["denominator"] == pytest.approx(10000 ** (6 / 16))
    assert math.cos(cell["angle"]) == pytest.approx(cell["value"], abs=1e-6)
    assert cell["angle"] == pytest.approx(37 / cell["denominator"])


def test_fingerprint_gives_each_word_its_seat_and_distances_depend_on_the_gap(client):
    d = get(client, "/api/fingerprint", text="the dog bites the man", d_model=16, base=10000.0)
    assert d["words"] == ["the", "dog", "bites", "the", "man"]
    assert torch.equal(torch.tensor(d["vectors"], dtype=torch.float32), sinusoidal_table(5, 16))
    dist = torch.tensor(d["distances"])
    for gap in range(1, 5):
        diagonal = torch.diagonal(dist, offset=gap)
        assert torch.allclose(diagonal, diagonal[0].expand_as(diagonal), atol=1e-6)
        assert bool((diagonal > 0).all())


# -- 2. RoPE dials and the order proof ----------------------------------------------------------------------
def test_dials_score_matches_rotary_embedding_and_ignores_a_common_shift(client):
    d = get(client, "/api/rope/dials", head_dim=8, base=10000.0, q_pos=7, k_pos=2, offset=1000, seed=3)
    q, k = seeded(8, 3), seeded(8, 10_003)
    rope = RotaryEmbedding(8, base=10000.0, max_position_embeddings=16)
    qf, kf = q.float().view(1, 1, 1, 8), k.float().view(1, 1, 1, 8)
    q_rot, _ = rope(qf, qf, position_ids=torch.tensor([[7]]))
    _, k_rot = rope(kf, kf, position_ids=torch.tensor([[2]]))
    assert d["score"] == pytest.approx(float((q_rot * k_rot).sum()), abs=1e-5)
    assert d["score_moved"] == pytest.approx(d["score"], abs=1e-10)
    assert d["theta"] == rope_inv_freq(8, 10000.0).tolist()
    assert d["relative_angle_deg"][1] == pytest.approx(math.degrees(5 * 0.1), abs=1e-9)  # theta_1 = 0.1
    assert sum(d["pair_scores"]) == pytest.approx(d["score"], abs=1e-12)


def test_dials_give_the_unturned_hands_and_each_turn_m_theta(client):
    d = get(client, "/api/rope/dials", head_dim=128, base=10000.0, q_pos=7, k_pos=2, offset=1000, seed=3)
    q, k = seeded(128, 3), seeded(128, 10_003)
    assert d["q_pairs_unrotated"] == torch.stack((q[:64], q[64:]), -1).tolist()
    assert d["k_pairs_unrotated"] == torch.stack((k[:64], k[64:]), -1).tolist()
    inv_freq = rope_inv_freq(128, 10000.0)
    for key, seat in (("q_turn_deg", 1007), ("k_turn_deg", 1002)):
        expected = torch.remainder(torch.rad2deg(seat * inv_freq), 360.0)
        assert d[key] == pytest.approx(expected.tolist(), abs=1e-9)
    # each drawn hand is its unturned pair turned counter-clockwise by exactly that angle
    for i in (0, 5, 63):
        (a, b), (x, y) = d["q_pairs_unrotated"][i], d["q_pairs_moved"][i]
        turn = math.degrees(math.atan2(y, x) - math.atan2(b, a)) % 360.0
        assert min(abs(turn - d["q_turn_deg"][i]), 360 - abs(turn - d["q_turn_deg"][i])) < 1e-9


def test_order_proof_flips_the_relative_angle_and_only_rope_tells_the_sentences_apart(client):
    d = get(
        client,
        "/api/rope/order",
        text_a="dog bites man",
        text_b="man bites dog",
        query_word="bites",
        key_word="dog",
        degrees=30.0,
    )
    a, b = d["sentences"]
    # counter-clockwise positive, query's turn minus key's: "bites" after "dog" is +30, as in posenc tour
    assert a["relative_angle_deg"] == pytest.approx(30.0) and b["relative_angle_deg"] == pytest.approx(-30.0)
    assert (a["query_minus_key_seats"], b["query_minus_key_seats"]) == (1, -1)
    assert a["score_nope"] == b["score_nope"]
    assert abs(a["score_rope"] - b["score_rope"]) > 1e-3
    # the same rotation through the library's tables
    inv_freq = torch.tensor([math.radians(30.0)], dtype=torch.float64)
    cos, sin = rope_cos_sin(torch.tensor([1.0, 0.0]), inv_freq, dtype=torch.float64)
    q, k = torch.tensor(d["q"], dtype=torch.float64), torch.tensor(d["k"], dtype=torch.float64)
    q_rot = torch.stack((q[0] * cos[0, 0] - q[1] * sin[0, 0], q[0] * sin[0, 0] + q[1] * cos[0, 0]))
    k_rot = torch.stack((k[0] * cos[1, 0] - k[1] * sin[1, 0], k[0] * sin[1, 0] + k[1] * cos[1, 0]))
    assert a["score_rope"] == pytest.approx(float(q_rot @ k_rot), abs=1e-12)


# -- 3. scores against distance --------------------------------------------------------------------------
def test_scores_follow_the_closed_forms(client):
    d = get(client, "/api/scores", head_dim=32, base=10000.0, d_model=24, sin_base=10000.0, heads=6, max_distance=300)
    dist = torch.arange(301, dtype=torch.float64)
    rope_expected = torch.cos(dist.unsqueeze(-1) * rope_inv_freq(32, 10000.0)).mean(-1)
    assert d["rope"] == pytest.approx(rope_expected.tolist(), abs=1e-12)
    table = sinusoidal_table(301, 24, dtype=torch.float64)
    assert d["sinusoidal"] == pytest.approx(((table @ table[0]) / 12).tolist(), abs=1e-12)
    slopes = alibi_slopes(6)
    assert d["alibi_slopes"] == slopes.tolist()
    assert d["alibi"][4][:5] == pytest.approx([-float(slopes[4]) * i for i in range(5)])
    assert d["rope"][0] == pytest.approx(1.0) and max(d["rope"][100:]) < 0.9
    assert d["rope_compare"] is None
    d2 = get(client, "/api/scores", head_dim=32, base=10000.0, max_distance=300, compare_base=500000.0)
    slow = torch.cos(dist.unsqueeze(-1) * rope_inv_freq(32, 500000.0)).mean(-1)
    assert d2["rope_compare"] == pytest.approx(slow.tolist(), abs=1e-12) and d2["rope"] == d["rope"]


def test_score_defaults_show_the_decay(client):
    defaults = {name: LIMITS[name].default for name in ("head_dim", "base", "d_model", "heads", "max_distance")}
    d = get(client, "/api/scores", sin_base=10000.0, **defaults)
    far = [r for dist, r in zip(d["distances"], d["rope"]) if dist >= defaults["max_distance"] // 2]
    near = [r for dist, r in zip(d["distances"], d["rope"]) if 1 <= dist <= 16]
    assert d["rope"][0] == pytest.approx(1.0)
    assert d["rope"][0] - sum(far) / len(far) > 0.5  # well below 1 far away
    assert sum(near) / len(near) > sum(far) / len(far) + 0.3  # and falling on the way
    # the octave-averaged curve, recomputed from the closed form, falls steadily
    inv_freq = rope_inv_freq(defaults["head_dim"], defaults["base"])
    exact = torch.cos(torch.arange(defaults["max_distance"] + 1, dtype=torch.float64).unsqueeze(-1) * inv_freq).mean(-1)
    trend = dict(zip(d["distances"], d["rope_trend"]))
    for dist in (1, 16, 100, 2048):
        lo, hi = math.ceil(dist / math.sqrt(2)), min(math.floor(dist * math.sqrt(2)), defaults["max_distance"])
        assert trend[dist] == pytest.approx(float(exact[lo : hi + 1].mean()), abs=1e-12)
    assert trend[1] > trend[16] > trend[100] > trend[1024] and trend[1024] < 0.25


def test_long_ranges_keep_every_near_distance():
    from posenc.explorer.views import DENSE_DISTANCES, score_distances

    d = score_distances(2048)
    assert d[: DENSE_DISTANCES + 1] == list(range(DENSE_DISTANCES + 1)) and d[-1] == 2048
    gaps = [b / a for a, b in zip(d[DENSE_DISTANCES:], d[DENSE_DISTANCES + 1 :])]
    assert max(gaps) < 1.02  # evenly spread on a log axis


def test_long_score_ranges_are_sampled_and_exact_where_sampled(client):
    from posenc.explorer.limits import MAX_SCORE_POINTS

    top = int(LIMITS["max_distance"].maximum)
    d = get(
        client, "/api/scores", head_dim=32, base=10000.0, d_model=24, heads=4, max_distance=top, compare_base=500000.0
    )
    dist = d["distances"]
    assert len(dist) <= MAX_SCORE_POINTS and dist[0] == 0 and dist[-1] == top and dist == sorted(set(dist))
    assert len(d["rope"]) == len(d["sinusoidal"]) == len(d["rope_compare"]) == len(d["alibi"][0]) == len(dist)
    at = torch.tensor(dist, dtype=torch.float64)
    rope_expected = torch.cos(at.unsqueeze(-1) * rope_inv_freq(32, 10000.0)).mean(-1)
    assert d["rope"] == pytest.approx(rope_expected.tolist(), abs=1e-12)
    table = sinusoidal_table(top + 1, 24, dtype=torch.float64)
    assert d["sinusoidal"] == pytest.approx(((table[at.long()] @ table[0]) / 12).tolist(), abs=1e-12)
    assert d["alibi"][3] == pytest.approx([-float(alibi_slopes(4)[3]) * x for x in dist])


# -- 5. ALiBi beside RoPE ------------------------------------------------------------------------------------
def test_alibi_matrix_is_the_library_bias_and_rope_matrix_depends_on_distance_only(client):
    d = get(client, "/api/alibi", heads=12, head=5, matrix_len=9, head_dim=16, base=10000.0, seed=4)
    pos = torch.arange(9)
    bias = alibi_bias(alibi_slopes(12), pos, pos)[5]
    for i in range(9):
        for j in range(9):
            got = d["bias"][i][j]
            assert (got is None) if j > i else got == float(bias[i, j])
            assert (d["rope_scores"][i][j] is None) == (j > i)
    scores = d["rope_scores"]
    for gap in range(0, 9):
        values = [scores[i][i - gap] for i in range(gap, 9)]
        assert values == pytest.approx([values[0]] * len(values), abs=1e-9)
    assert d["slopes"] == alibi_slopes(12).tolist()


# -- 6. precision ----------------------------------------------------------------------------------------------
def test_precision_errors_per_dtype(client):
    d = get(client, "/api/precision", head_dim=64, base=10000.0, max_position=2**20, pos=1_000_000)
    assert d["positions"] == sorted(d["positions"]) and d["positions"][-1] == 2**20
    inv_freq = rope_inv_freq(64, 10000.0)
    exact = 1_000_000 * inv_freq
    naive = (torch.tensor(1_000_000.0) * inv_freq.float()).double()
    table_angle = torch.atan2(naive.sin().float().double(), naive.cos().float().double())
    err32 = torch.remainder(table_angle - exact + math.pi, TWO_PI) - math.pi
    assert d["at_pos"]["float32"] == pytest.approx(err32.abs().tolist(), abs=1e-12)
    assert max(d["at_pos"]["float32"]) > 1e-3
    assert max(d["at_pos"]["posenc"]) < 1e-6
    assert d["at_pos"]["float16"] == [None] * 32  # 1e6 is past float16's range
    beyond = [i for i, p in enumerate(d["positions"]) if p > 65520]
    assert all(d["max_error"]["float16"][i] is None for i in beyond)
    assert all(v < 1e-6 for v in d["max_error"]["posenc"])


# -- 4. wavelengths, fixtures, config -----------------------------------------------------------------------------
def test_wavelength_overlays_are_the_library_frequencies(client):
    d = get(
        client,
        "/api/wavelengths",
        rotary_dim=64,
        base=500000.0,
        train_len=8192,
        methods="linear,ntk,dynamic,yarn,llama3",
        factor=8.0,
        seq_len=20000,
        beta_fast=32.0,
        beta_slow=1.0,
        low_freq_factor=1.0,
        high_freq_factor=4.0,
    )
    configs = {
        "linear": (LinearScaling(8.0), None),
        "ntk": (NTKScaling(8.0), None),
        "dynamic": (DynamicNTKScaling(8.0, 8192), 20000),
        "yarn": (YaRNScaling(8.0, 8192, beta_fast=32.0, beta_slow=1.0), None),
        "llama3": (Llama3Scaling(8.0, 1.0, 4.0, 8192), None),
    }
    default = rope_inv_freq(64, 500000.0)
    assert d["default"]["wavelength"] == pytest.approx((TWO_PI / default).tolist())
    for name, (cfg, seq_len) in configs.items():
        inv_freq, factor = rope_frequencies(cfg, 64, 500000.0, seq_len)
        entry = d["methods"][name]
        assert entry["inv_freq"] == inv_freq.tolist(), name
        assert entry["attention_factor"] == factor
        slow = (default / inv_freq).tolist()
        assert entry["slowdown"] == pytest.approx([min(slow), max(slow)], rel=1e-12)
        if name in ("yarn", "llama3"):  # the ramp methods, split three ways
            assert entry["split"] and entry["kept"] + entry["blended"] + entry["divided"] == 32
        else:  # no ramp: no kept/blended/divided
            assert not entry["split"] and entry["kept"] is entry["blended"] is entry["divided"] is None
    assert d["methods"]["linear"]["slowdown"] == pytest.approx([8.0, 8.0])
    assert d["methods"]["ntk"]["slowdown"] == pytest.approx([1.0, 8.0])
    llama = d["methods"]["llama3"]
    wavelengths = (TWO_PI / default).tolist()
    assert llama["kept"] == sum(w < 8192 / 4 for w in wavelengths)
    assert llama["divided"] == sum(w > 8192 / 1 for w in wavelengths)
    assert d["thresholds"]["llama3"] == [2048.0, 8192.0]


def test_fixtures_load_real_configs_through_posenc_hf(client):
    listed = get(client, "/api/fixtures")["fixtures"]
    names = [f["name"] for f in listed if "error" not in f]
    assert "llama-3.1-8b" in names
    d = get(client, "/api/fixture", name="llama-3.1-8b")
    assert d["rope_type"] == "llama3" and d["base"] == 500000.0 and d["train_len"] == 8192
    from posenc.explorer.scaling_view import fixtures

    kw = rotary_kwargs_from_hf(fixtures()["llama-3.1-8b"][0])
    expected, _ = rope_frequencies(kw["scaling"], kw["rotary_dim"], kw["base"])
    assert d["curves"]["configured"]["inv_freq"] == expected.tolist()
    for name in names:  # every shipped fixture draws
        assert client.get("/api/fixture", params={"name": name}).status_code == 200, name


def test_longrope_fixture_shows_its_two_factor_lists_and_no_invented_factor(client):
    d = get(client, "/api/fixture", name="phi-3.5-mini-instruct")
    from posenc.fixtures import load_fixture

    config = load_fixture("phi-3.5-mini-instruct")
    assert "factor" not in config["rope_scaling"] and d["factor"] is None
    listed = {f["name"]: f for f in get(client, "/api/fixtures")["fixtures"]}
    assert listed["phi-3.5-mini-instruct"]["factor"] is None
    assert listed["llama-3.1-8b"]["factor"] == 8.0
    assert set(d["curves"]) == {"short", "long"}
    default = torch.tensor(d["default"]["inv_freq"], dtype=torch.float64)
    for key in ("short", "long"):
        curve = d["curves"][key]
        assert curve["split"] is False and curve["kept"] is None  # LongRoPE has no ramp
        factors = torch.tensor(config["rope_scaling"][f"{key}_factor"], dtype=torch.float64)
        torch.testing.assert_close(
            torch.tensor(curve["inv_freq"], dtype=torch.float64), default / factors, rtol=1e-12, atol=0
        )
        assert curve["slowdown"] == pytest.approx([float(factors.min()), float(factors.max())], rel=1e-9)


#: what each exported method is meant to be, as posenc configs (head_dim 64, rotary_dim 32, base 500000)
REQUESTED = {
    "default": None,
    "linear": LinearScaling(8.0),
    "ntk": NTKScaling(8.0),
    "dynamic": DynamicNTKScaling(8.0, 8192),
    "yarn": YaRNScaling(8.0, 8192, beta_fast=32.0, beta_slow=1.0),
    "llama3": Llama3Scaling(8.0, 1.0, 4.0, 8192),
}


def reference_frequencies(hf: dict, seq_len=None):
    """``(inv_freq, attention_factor)`` as ``transformers`` computes them from an exported config dict."""
    import transformers
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding

    transformers.logging.set_verbosity_error()
    config = LlamaConfig(**hf, hidden_size=2 * hf["head_dim"], num_attention_heads=2)
    rope_type = config.rope_parameters["rope_type"]
    if rope_type == "default":  # the reference with partial rotary support
        inv_freq, factor = GPTNeoXRotaryEmbedding.compute_default_rope_parameters(config)
    else:
        inv_freq, factor = ROPE_INIT_FUNCTIONS[rope_type](config, None, seq_len=seq_len)
    return inv_freq.double(), float(factor)


@pytest.mark.parametrize("method", list(REQUESTED))
def test_config_loads_in_transformers_as_the_requested_rope(client, method):
    d = get(
        client,
        "/api/config",
        head_dim=64,
        rotary_dim=32,
        base=500000.0,
        layout="half",
        method=method,
        max_position_embeddings=131072,
        factor=8.0,
        original_max_position_embeddings=8192,
    )
    cfg = d["posenc"]
    assert cfg["rotary_dim"] == 32 and cfg["base"] == 500000.0
    requested = REQUESTED[method]
    # dynamic NTK adapts to the length: compare at the trained length and well past it
    lengths = [None, 8192 * 5] if method == "dynamic" else [None]
    for style in ("hf_rope_parameters", "hf_rope_scaling"):
        hf = d[style]
        assert hf["max_position_embeddings"] == (8192 if method == "dynamic" else 131072)
        rope = hf["rope_parameters"] if style == "hf_rope_parameters" else (hf["rope_scaling"] or {})
        assert rope.get("rope_type", "default") == ("default" if method == "ntk" else method)
        for seq_len in lengths:
            expected, expected_factor = rope_frequencies(requested, 32, 500000.0, seq_len)
            reference, reference_factor = reference_frequencies(hf, seq_len)
            torch.testing.assert_close(reference, expected, rtol=1e-6, atol=0)
            assert reference_factor == pytest.approx(expected_factor, rel=1e-12)
        rebuilt = rotary_kwargs_from_hf(hf)  # posenc reads its own export back
        assert rebuilt["rotary_dim"] == 32
        torch.testing.assert_close(
            rope_frequencies(rebuilt["scaling"], 32, rebuilt["base"])[0],
            rope_frequencies(requested, 32, 500000.0)[0],
            rtol=1e-12,
            atol=0,
        )
    assert (d["hf_note"] is not None) == (method == "ntk")
    namespace = {}
    exec(d["python"], namespace)  # the snippet builds the requested module
    assert namespace["rope"].rotary_dim == 32
    assert namespace["rope"].scaling == requested
    assert namespace["rope"].attention_factor == d["attention_factor"]


def test_ntk_exports_the_equivalent_base():
    d = 32
    theta = 500000.0 * 8.0 ** (d / (d - 2))
    from posenc.explorer.scaling_view import config_view

    out = config_view(
        64,
        d,
        500000.0,
        "half",
        "ntk",
        max_position_embeddings=131072,
        original=8192,
        settings={"factor": 8.0},
    )
    assert out["hf_rope_parameters"]["rope_parameters"]["rope_theta"] == pytest.approx(theta, rel=1e-15)
    assert out["hf_rope_scaling"]["rope_theta"] == pytest.approx(theta, rel=1e-15)
    assert out["hf_rope_scaling"]["rope_scaling"] is None
    assert "rope_theta" in out["hf_note"] and out["posenc"]["scaling"] == {"rope_type": "ntk", "factor": 8.0}


# -- 7. lab results ---------------------------------------------------------------------------------------------------
def write_results(folder, data):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(data), encoding="utf-8")
    return folder


SYNTHETIC = {
    "schema_version": 2,
    "kind": "results",  # posenc.lab.schema's stamp
    "config": {"d_model": 64, "steps": 10},
    "train_len": 128,
    "eval_lengths": [128, 512],
    "schemes": {
        "rope": {
            "eval": {
                "128": {"bpb": 2.1, "bpb_ci": [2.0, 2.2], "bpb_last_quarter": 2.0, "bpb_final32": 1.9},
                "512": {"bpb": 2.9, "bpb_ci": [2.7, 3.1], "bpb_last_quarter": 3.3, "bpb_final32": 3.5},
            },
            "loss_by_position": {"128": [2.0] * 128, "512": [float(i) for i in range(2000)]},
        },
        "alibi": {"eval": {"128": {"bpb": 2.2}}, "loss_by_position": {"128": [2.1] * 128}},
    },
    "extension": {"yarn": {"512": {"bpb": 2.5}}},
}


def test_lab_view_reads_a_results_file(tmp_path):
    run = write_results(tmp_path / "run", SYNTHETIC)
    with TestClient(create_app(lab_run=run, allowed_hosts=None)) as c:
        d = get(c, "/api/lab")
        assert get(c, "/api/meta")["lab"] is True
    assert d["available"] and d["train_len"] == 128 and d["eval_lengths"] == [128, 512]
    assert d["schemes"]["rope"]["eval"]["512"]["bpb_ci"] == [2.7, 3.1]
    long_curve = d["schemes"]["rope"]["loss_by_position"]["512"]
    assert len(long_curve["loss"]) == lab_results.MAX_CURVE_POINTS and long_curve["points"] == 2000
    assert long_curve["loss"][0] == pytest.approx(sum(range(3)) / 3)  # 2000/512 -> first bucket 0..2
    assert d["schemes"]["alibi"]["eval"]["128"]["bpb_last_quarter"] is None
    assert d["extension"]["yarn"]["512"]["bpb"] == 2.5
    assert d["notes"] == []
    with TestClient(create_app(lab_run=run, allowed_hosts=None)) as c:
        smooth = get(c, "/api/lab", points=100)["schemes"]["rope"]["loss_by_position"]
        assert c.get("/api/lab", params={"points": 0}).status_code == 422
    assert len(smooth["512"]["loss"]) == 100 and smooth["512"]["loss"][0] == pytest.approx(sum(range(20)) / 20)
    assert len(smooth["128"]["loss"]) == 100


def test_lab_view_keeps_status_verdicts_and_unmeasurable_cells(tmp_path):
    data = dict(
        SYNTHETIC,
        complete=False,
        verdicts=[
            {"claim": "ALiBi stays flat", "seen": True, "evidence": "bpb 2.2 -> 2.25"},
            {"claim": "YaRN helps", "seen": None, "evidence": "not measured in this run"},
            "junk",
        ],
    )
    data["schemes"] = dict(
        SYNTHETIC["schemes"],
        learned={
            "eval": {"512": {"cannot": True, "note": "cannot: the learned table has 128 rows"}},
            "loss_by_position": {},
        },
    )
    data["extension"] = {"yarn": {"512": {"bpb": 2.5, "finetuned": {"bpb": 2.3, "loss_by_position": [1.0]}}}}
    d = lab_results.read_lab_results(write_results(tmp_path / "run", data))
    assert d["complete"] is False and "not complete" in " ".join(d["notes"])
    assert [v["seen"] for v in d["verdicts"]] == [True, None]
    cell = d["schemes"]["learned"]["eval"]["512"]
    assert cell["cannot"] is True and cell["bpb"] is None and "128 rows" in cell["note"]
    assert d["extension"]["yarn"]["512"]["finetuned_bpb"] == 2.3


def test_lab_view_says_what_is_missing(tmp_path):
    assert lab_results.read_lab_results(None)["available"] is False
    assert "not found" in lab_results.read_lab_results(tmp_path)["notes"][0]
    (tmp_path / "results.json").write_text("{broken", encoding="utf-8")
    assert "could not be read" in lab_results.read_lab_results(tmp_path)["notes"][0]
    partial = write_results(
        tmp_path / "partial",
        {
            "train_len": 64,
            "schemes": {
                "rope": {"eval": {"64": {"bpb": "NaN"}, "x": {}}, "loss_by_position": {"64": [1.0, None, "a"]}},
                "nope": 3,
            },
        },
    )
    d = lab_results.read_lab_results(partial)
    assert d["available"] is True
    joined = " | ".join(d["notes"])
    for fragment in (
        "eval_lengths is missing",
        "config is missing",
        "extension is missing",
        "scheme 'nope' has no results",
        "'x' is not a length",
    ):
        assert fragment in joined
    assert d["schemes"]["rope"]["eval"]["64"]["bpb"] is None
    assert d["schemes"]["rope"]["loss_by_position"]["64"]["loss"] == [1.0, None, None]
    assert d["eval_lengths"] == [64]


# -- 8. knowledge checks ---------------------------------------------------------------------------------------------
def test_quiz_lists_questions_without_answers(client):
    checks = get(client, "/api/quiz")["checks"]
    assert len(checks) >= 6
    for check in checks:
        assert set(check) == {"id", "topic", "prompt", "choices"}
        assert len(check["choices"]) >= 2


def _supports_added(v):
    d = v["d_model"]
    assert v["shape"][-1] == d and v["max_abs"] <= 1.0
    assert v["pe_norm"] == pytest.approx([math.sqrt(d / 2)] * 2, rel=1e-6)  # fixed size, every row
    # the stated scale: N(0, std^2) entries times sqrt(d_model), so about std * d long
    assert v["embed_scale"] == pytest.approx(math.sqrt(d))
    assert v["embedding_norm"] == pytest.approx(v["embedding_std"] * math.sqrt(d) * v["embed_scale"], rel=0.05)
    assert v["ratio"] == pytest.approx(v["pe_norm"][0] / v["embedding_norm"], rel=1e-6)
    assert 0.5 < v["ratio"] < 2  # the same size as the word: neither drowns the other
    assert v["ratio_unscaled"] == pytest.approx(v["ratio"] * math.sqrt(d), rel=1e-9)
    assert v["raw_ratio_1000"] == pytest.approx(1000 * math.sqrt(d) / v["embedding_norm"], rel=1e-9)


def test_the_basic_bag_of_words_check_comes_first(client):
    checks = get(client, "/api/quiz")["checks"]
    assert checks[0]["id"] == "bag-of-words" and quiz.CHECKS[0].id == "bag-of-words"


def test_quiz_lists_exactly_the_manifests_checks_in_its_order(client):
    from posenc.lesson.manifest import CHAPTERS

    manifest = [check_id for chapter in CHAPTERS for check_id in chapter.checks]
    assert [check["id"] for check in get(client, "/api/quiz")["checks"]] == manifest
    assert [check.id for check in quiz.CHECKS] == manifest
    # the reading order, not the order the workbench once listed them in (llama3-bands before fast-columns)
    assert manifest.index("fast-columns") < manifest.index("relative") < manifest.index("linear-vs-ntk")


def _fake_module(*ids):
    import types

    return types.SimpleNamespace(CHECKS=tuple(quiz.BY_ID[i] for i in ids))


def test_the_quiz_follows_a_reordered_manifest():
    from posenc.lesson.manifest import Chapter

    chapters = (Chapter("one", "One", ("relative", "added")), Chapter("two", "Two", ("bag-of-words",)))
    modules = {"one": _fake_module("added", "relative"), "two": _fake_module("bag-of-words")}
    assert [c.id for c in quiz.collect_checks(chapters, modules)] == ["relative", "added", "bag-of-words"]
    assert quiz.collect_checks(chapters, modules)[0] is quiz.BY_ID["relative"]


def test_the_quiz_refuses_a_manifest_that_disagrees_with_its_chapters():
    from posenc.lesson.manifest import Chapter

    listed = (Chapter("one", "One", ("relative", "added")),)
    with pytest.raises(
        ValueError, match=r"chapter 'one' lists the checks \['relative', 'added'\] .* writes \['added'\]"
    ):
        quiz.collect_checks(listed, {"one": _fake_module("added")})
    twice = (Chapter("one", "One", ("added",)), Chapter("two", "Two", ("added",)))
    modules = {"one": _fake_module("added"), "two": _fake_module("added")}
    with pytest.raises(ValueError, match=r"\['added'\] are listed twice"):
        quiz.collect_checks(twice, modules)


def test_added_check_states_the_scale_the_tour_uses(client):
    from posenc.input_sizes import position_word_lengths

    answer = get(client, "/api/quiz/added/answer", choice=1)
    sizes = position_word_lengths()
    assert answer["values"]["ratio"] == pytest.approx(sizes["ratio"], rel=1e-12)
    text = " ".join(answer["evidence"])
    assert "TinyLM" in text and "posenc tour" in text and f"{sizes['ratio']:.2f}x" in text


def _supports_llama3(v):
    # closed form: a pair is kept below original/high, divided above original/low, blended between
    wavelengths = [2 * math.pi * v["base"] ** (2 * i / v["rotary_dim"]) for i in range(v["rotary_dim"] // 2)]
    kept = sum(w < v["original"] / v["high_freq_factor"] for w in wavelengths)
    divided = sum(w > v["original"] / v["low_freq_factor"] for w in wavelengths)
    assert (v["kept"], v["blended"], v["divided"]) == (kept, len(wavelengths) - kept - divided, divided)
    assert (kept, divided) == (29, 29) and v["blended"] == 6


#: for each knowledge check, what its evidence must show for the keyed answer to be right
SUPPORTS = {
    "added": _supports_added,
    "learned-limit": lambda v: "512" in v["error"] and v["requested"] > v["max_len"] == 512,
    "relative": lambda v: v["score_near"] == pytest.approx(v["score_far"], abs=1e-12),
    "qk-only": lambda v: v["change_qk_only"] < 1e-12 and v["change_with_v"] > 1e-2,
    "llama3-bands": _supports_llama3,
    "fast-columns": lambda v: min(v["first"]) > 0.1 and max(v["last"]) < 1e-3,
    "bag-of-words": lambda v: v["nope_difference"] < 1e-12 and v["sinusoidal_difference"] > 1e-3,
    "alibi-head0": lambda v: v["head0"] == -5.0 and v["head7"] == -10 / 256 and v["slopes"][0] == 0.5,
    "precision": lambda v: 0.01 <= v["float32"] < 0.1 and v["posenc"] < 1e-6,
    "linear-vs-ntk": lambda v: (
        v["linear"] == pytest.approx([0.25, 0.25], rel=1e-12) and v["ntk"] == pytest.approx([1.0, 0.25], rel=1e-12)
    ),
}


def test_every_check_has_its_evidence_tested():
    assert set(SUPPORTS) == {check.id for check in quiz.CHECKS}


@pytest.mark.parametrize("check", quiz.CHECKS, ids=lambda c: c.id)
def test_every_check_explains_itself_with_a_computation(client, check):
    right = get(client, f"/api/quiz/{check.id}/answer", choice=check.answer)
    assert right["correct"] is True and right["evidence"] and right["values"]
    assert SUPPORTS[check.id](right["values"]) is not False, right["values"]
    wrong = (check.answer + 1) % len(check.choices)
    answer = get(client, f"/api/quiz/{check.id}/answer", choice=wrong)
    assert answer["correct"] is False and answer["answer"] == check.answer
    assert answer["feedback"] != right["feedback"]


def test_check_evidence_equals_the_library(client):
    alibi = get(client, "/api/quiz/alibi-head0/answer", choice=0)["values"]
    assert alibi["head0"] == float(alibi_bias(alibi_slopes(8), torch.tensor([10]), torch.arange(11))[0, 0, 0]) == -5.0
    learned = get(client, "/api/quiz/learned-limit/answer", choice=2)["values"]
    with pytest.raises(PositionOutOfRangeError) as err:
        LearnedPositionalEmbedding(512, 4).encodings(torch.arange(600))
    assert learned["error"] == str(err.value)
    relative = get(client, "/api/quiz/relative/answer", choice=0)["values"]
    assert relative["score_near"] == pytest.approx(relative["score_far"], abs=1e-12)
    bands = get(client, "/api/quiz/llama3-bands/answer", choice=2)
    values = bands["values"]
    ratio = rope_frequencies(Llama3Scaling(8.0, 1.0, 4.0, 8192), 128, 500000.0)[0] / rope_inv_freq(128, 500000.0)
    assert values["ratio"] == ratio.tolist()
    _supports_llama3(values)
    # the prose is formatted from the fixture, not typed in
    prose = " ".join(bands["evidence"])
    for fragment in (
        "rope_theta 500000",
        "128 rotated features",
        "factor 8",
        "original context 8192",
        "8192 / high_freq_factor 4 = 2048",
        "29 of 64",
        "6 are blended",
        "29 are divided by 8",
    ):
        assert fragment in prose


# -- bad input: always 422 with a message, never a server error ------------------------------------------------------
BAD = [
    ("/api/sinusoidal", {"d_model": 100000}),
    ("/api/sinusoidal", {"length": 0}),
    ("/api/sinusoidal", {"base": "nan"}),
    ("/api/sinusoidal", {"base": "inf"}),
    ("/api/sinusoidal", {"base": 1}),
    ("/api/sinusoidal", {"length": "abc"}),
    ("/api/sinusoidal", {"length": 10**30}),
    ("/api/sinusoidal/cell", {"dim": 70, "d_model": 64}),
    ("/api/sinusoidal/cell", {"pos": -1}),
    ("/api/sinusoidal/cell", {"pos": 10**7}),
    ("/api/fingerprint", {"text": ""}),
    ("/api/fingerprint", {"text": "   "}),
    ("/api/fingerprint", {"text": "a " * 30}),
    ("/api/fingerprint", {"text": "x" * 301}),
    ("/api/fingerprint", {"text": "y" * 40}),
    ("/api/rope/dials", {"head_dim": 7}),
    ("/api/rope/dials", {"head_dim": 1024}),
    ("/api/rope/dials", {"q_pos": -3}),
    ("/api/rope/dials", {"offset": 10**9}),
    ("/api/rope/dials", {"seed": -1}),
    ("/api/rope/order", {"key_word": "cat"}),
    ("/api/rope/order", {"degrees": 0}),
    ("/api/rope/order", {"degrees": 720}),
    ("/api/rope/order", {"text_a": ""}),
    ("/api/scores", {"max_distance": 100000}),
    ("/api/scores", {"heads": 0}),
    ("/api/scores", {"head_dim": 9}),
    ("/api/scores", {"sin_base": "-inf"}),
    ("/api/scores", {"compare_base": 1}),
    ("/api/scores", {"compare_base": "nan"}),
    ("/api/alibi", {"heads": 4, "head": 5}),
    ("/api/alibi", {"matrix_len": 1000}),
    ("/api/alibi", {"head_dim": 3}),
    ("/api/precision", {"max_position": 2**40}),
    ("/api/precision", {"pos": -1}),
    ("/api/precision", {"head_dim": 5}),
    ("/api/wavelengths", {"methods": "yarn,foo"}),
    ("/api/wavelengths", {"methods": "yarn,yarn"}),
    ("/api/wavelengths", {"methods": "yarn", "beta_fast": 0.5}),
    ("/api/wavelengths", {"methods": "llama3", "high_freq_factor": 0.5}),
    ("/api/wavelengths", {"factor": 0.5}),
    ("/api/wavelengths", {"factor": 65}),
    ("/api/wavelengths", {"factor": "inf"}),
    ("/api/wavelengths", {"factor": "eight"}),
    ("/api/wavelengths", {"fctor": 8}),
    ("/api/wavelengths", [("factor", 2), ("factor", 4)]),
    ("/api/wavelengths", {"rotary_dim": 3}),
    ("/api/wavelengths", {"methods": "x" * 101}),
    ("/api/fixture", {"name": "../../etc/passwd"}),
    ("/api/fixture", {"name": "no-such-model"}),
    ("/api/fixture", {}),
    ("/api/config", {"rotary_dim": 300}),
    ("/api/config", {"head_dim": 16, "rotary_dim": 32}),
    ("/api/config", {"layout": "diagonal"}),
    ("/api/config", {"method": "longrope"}),
    ("/api/config", {"method": "llama3", "high_freq_factor": 0.5}),
    ("/api/config", {"max_position_embeddings": 0}),
    ("/api/lab", {"points": 1000}),
    ("/api/lab", {"points": "many"}),
    ("/api/quiz/nope/answer", {"choice": 0}),
    ("/api/quiz/relative/answer", {"choice": 5}),
    ("/api/quiz/relative/answer", {"choice": -1}),
    ("/api/quiz/relative/answer", {}),
]


@pytest.mark.parametrize("url,params", BAD, ids=[f"{u}?{p}"[:70] for u, p in BAD])
def test_bad_input_is_a_422_with_a_message(client, url, params):
    response = client.get(url, params=params)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, str) and len(detail) > 10


# -- the one palette ---------------------------------------------------------------------------------------
def test_the_page_palette_is_the_python_palette():
    """The page's palette module re-exports the tables the explorer serves from palette.py."""
    from test_palette_meanings import served_tables

    from posenc.lesson import palette

    tables = served_tables()
    for name in ("SCHEME_COLOURS", "SCALING_COLOURS", "SIGN_COLOURS", "ROLE_COLOURS", "SCALING_DASHES"):
        assert tables[name] == getattr(palette, name), name


def test_one_colour_per_scheme_and_per_scaling():
    from posenc.factory import SCHEMES
    from posenc.lesson import palette

    assert set(palette.SCHEME_COLOURS) == set(SCHEMES)
    assert set(palette.SCALING_COLOURS) == set(REGISTRY)
    # the page's scalings take colour, label and dash from the palette, which knows every posenc type
    assert set(palette.SCALING_LABELS) == set(REGISTRY)
    from posenc.explorer.scaling_view import scalings_metadata

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

    from test_palette_meanings import served_tables

    from posenc.lesson import palette

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
    from test_palette_meanings import page_scripts

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
