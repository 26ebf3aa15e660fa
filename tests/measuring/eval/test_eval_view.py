"""``posenc explore --eval-run DIR``: the eval view's API and the view in a real headless Chromium.

The results file is written by posenc eval's own report code (:func:`posenc.measuring.eval.report.build`) from
constructed cells, so the view reads exactly what the command writes.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from posenc.measuring.eval.files import depth_key
from posenc.measuring.eval.report import build
from posenc.measuring.eval.scalings import ScalingSpec, parse_specs

LENGTHS, DEPTHS, TRAINED = [32, 64, 128], [0.0, 0.5, 1.0], 32


def written_results() -> dict:
    specs = parse_specs("none,linear,yarn") + [
        ScalingSpec("yarn default", "yarn", {"factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0}),
        ScalingSpec("yarn searched", "yarn", {"factor": 5.0, "beta_fast": 24.0, "beta_slow": 1.0}),
    ]
    rng = np.random.default_rng(0)
    cells = {}
    for i, s in enumerate(specs):
        for j, n in enumerate(LENGTHS):
            nats = 0.7 * 128 * (1 + 0.1 * j * (i == 0)) + rng.normal(0, 1, 4)
            cells[f"ppl|{s.label}|{n}"] = {"nats": list(nats), "final_nats": list(nats / 4), "tokens": 128}
            if s.label == "yarn searched":
                continue  # no passkey for this one: the view shows no heatmap for it
            for d in DEPTHS:
                hits = [1.0] * (4 - j - (i == 0)) + [0.0] * (j + (i == 0))
                cells[f"passkey|{s.label}|{n}|{depth_key(d)}"] = {
                    "correct": hits,
                    "logp_bits": [-1.0 - j] * 4,
                    "key_tokens": [5] * 4,
                }
    search = {
        "type": "yarn",
        "target_length": 128,
        "budget": 6,
        "evaluations": 6,
        "parameters": [],
        "history": [],
        "window_bytes": np.full(3, 128.0),
        "default": {"params": dict(specs[3].params)},
        "best": {"params": dict(specs[4].params)},
        "default_nats": np.array([90.0, 91.0, 92.0]),
        "best_nats": np.array([89.0, 90.0, 90.5]),
        "default_spec": specs[3],
        "best_spec": specs[4],
    }
    settings = {"model": "/models/tiny-rope", "seed": 0}
    return build(
        {"schema": "posenc.eval/results", "schema_version": 2},
        settings,
        cells,
        specs=specs,
        lengths=LENGTHS,
        trained=TRAINED,
        depths=DEPTHS,
        window_bytes=np.full(4, 128.0),
        final_bytes=np.full(4, 32.0),
        final_tokens=32,
        bootstrap_samples=200,
        skipped={},
        complete=True,
        model_type="gpt_neox",
        search=search,
    )


@pytest.fixture(scope="module")
def eval_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("eval-run")
    (folder / "results.json").write_text(json.dumps(written_results()), encoding="utf-8")
    return folder


def _client(eval_run):
    from fastapi.testclient import TestClient

    from posenc.teaching.explorer.app import create_app

    return TestClient(create_app(allowed_hosts=None, eval_run=eval_run))


def test_api_shows_the_eval_folder_as_written(eval_run):
    pytest.importorskip("fastapi")
    written = json.loads((eval_run / "results.json").read_text())
    with _client(eval_run) as client:
        got = client.get("/api/eval").json()
    assert got["available"] and got["notes"] == [] and got["run"] == eval_run.name
    assert got["model"] == "tiny-rope" and got["trained_context"] == 32 and got["lengths"] == LENGTHS
    assert [s["label"] for s in got["scalings"]] == [s["label"] for s in written["scalings"]]
    assert [s["name"] for s in got["scalings"]] == ["none", "linear", "yarn", "yarn", "yarn"]
    for label, row in written["perplexity"].items():
        for n, e in row.items():
            assert (
                got["perplexity"][label][n]["bpb"] == e["bpb"] and got["perplexity"][label][n]["bpb_ci"] == e["bpb_ci"]
            )
    for label, grid in written["passkey"].items():
        for n, cells in grid.items():
            for d, c in cells.items():
                mine = got["passkey"][label][n][d]
                assert mine["accuracy"] == c["accuracy"] and mine["accuracy_ci"] == c["accuracy_ci"]
                assert mine["trials"] == 4
    assert "yarn searched" not in got["passkey"]
    s = got["search"]
    assert s["type"] == "yarn" and s["target_length"] == 128
    assert s["best"]["held_out_bpb"] == written["search"]["best"]["held_out_bpb"]
    assert s["held_out_difference"]["bpb"] == pytest.approx(s["best"]["held_out_bpb"] - s["default"]["held_out_bpb"])


def test_api_without_a_folder_or_with_a_bad_file_says_why(tmp_path):
    pytest.importorskip("fastapi")
    from posenc.teaching.explorer.eval_results import read_eval_results

    none = read_eval_results(None)
    assert not none["available"] and "--eval-run" in none["notes"][0]
    assert "not found" in read_eval_results(tmp_path)["notes"][0]
    (tmp_path / "results.json").write_text(json.dumps({"schema": "posenc.lab/results"}))
    assert "not a posenc eval results file" in read_eval_results(tmp_path)["notes"][0]
    (tmp_path / "results.json").write_text(json.dumps({"schema": "posenc.eval/results", "schema_version": 9}))
    assert "version 9" in read_eval_results(tmp_path)["notes"][0]
    (tmp_path / "results.json").write_text("{" * 10)
    assert "could not be read" in read_eval_results(tmp_path)["notes"][0]
    res = written_results()
    res["perplexity"]["none"]["64"]["bpb"] = "high"
    res["perplexity"]["linear"]["64"]["bpb_ci"] = [1.0, math.inf]
    (tmp_path / "results.json").write_text(json.dumps(res))
    got = read_eval_results(tmp_path)
    assert got["available"] and "64" not in got["perplexity"]["none"]
    assert got["notes"] == ["perplexity of none at 64: malformed entry dropped"]
    assert got["perplexity"]["linear"]["64"]["bpb_ci"] is None  # a non-finite bound is no interval


@pytest.mark.slow  # a real server and a real browser
def test_eval_view_draws_every_scaling_and_one_heatmap_per_scaling(eval_run):
    from browser_support import chromium_or_skip, explore_server, headless_chromium
    from playwright.sync_api import expect

    from posenc.teaching.lesson.palette import SCALING_COLOURS

    written = json.loads((eval_run / "results.json").read_text())
    errors: list = []
    with explore_server("--eval-run", str(eval_run)) as url, headless_chromium(chromium_or_skip()) as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{url}#eval")
        section = page.locator("#view-eval")
        expect(section).not_to_have_attribute("data-renders", "0")
        expect(section.locator("#eval-body")).to_be_visible()
        # perplexity against length: one line per scaling, in the rope type's colour, dashes within a type
        lines = section.locator("#eval-chart path.series")
        assert lines.count() == 5
        strokes = {lines.nth(i).get_attribute("data-name"): lines.nth(i).get_attribute("stroke") for i in range(5)}
        assert strokes == {
            "none": SCALING_COLOURS["default"],
            "linear": SCALING_COLOURS["linear"],
            "yarn": SCALING_COLOURS["yarn"],
            "yarn default": SCALING_COLOURS["yarn"],
            "yarn searched": SCALING_COLOURS["yarn"],
        }
        dashes = {lines.nth(i).get_attribute("stroke-dasharray") for i in range(2, 5)}
        assert len(dashes) == 3  # the three yarn specs are told apart
        for i in range(5):  # ... and the legend draws each line as the chart does, dash included
            name = lines.nth(i).get_attribute("data-name")
            mark = section.locator(f"#eval-legend [data-scaling='{name}'] line")
            assert mark.get_attribute("stroke") == lines.nth(i).get_attribute("stroke")
            assert mark.get_attribute("stroke-dasharray") == lines.nth(i).get_attribute("stroke-dasharray")
        ticks = section.locator("#eval-chart .axis text").all_text_contents()
        assert all(str(n) in ticks for n in LENGTHS)  # the lengths themselves are the x ticks
        # the table holds the file's numbers
        cell = section.locator("#eval-ppl tr[data-scaling='none'] td[data-bpb]").nth(2)
        assert float(cell.get_attribute("data-bpb")) == written["perplexity"]["none"]["128"]["bpb"]
        # one heatmap per scaling with passkey cells: depth rows, length columns
        maps = section.locator("#eval-passkey table.heatmap")
        assert [c.text_content() for c in section.locator("#eval-passkey caption").all()] == list(written["passkey"])
        none = maps.nth(0)
        assert none.locator("tbody tr").count() == len(DEPTHS) and none.locator("thead th").count() == 1 + len(LENGTHS)
        got = [float(c.get_attribute("data-accuracy")) for c in none.locator("tbody tr").nth(1).locator("td").all()]
        assert got == [written["passkey"]["none"][str(n)]["0.5"]["accuracy"] for n in LENGTHS] == [0.75, 0.5, 0.25]
        assert "[" in none.locator("tbody td").first.text_content()  # the Wilson interval is shown
        # the search beside its default, with the held-out difference
        expect(section.locator("#eval-search")).to_be_visible()
        assert section.locator("#eval-search-table tbody tr").count() == 2
        assert (
            section.locator("#eval-search-diff").text_content().startswith("best minus default on the held-out windows")
        )
        page.close()
    assert not errors


def test_explore_refuses_an_eval_run_that_is_not_a_folder(tmp_path, capsys):
    pytest.importorskip("uvicorn")
    from posenc.cli import main

    assert main(["explore", "--eval-run", str(tmp_path / "missing")]) == 2
    assert "--eval-run" in capsys.readouterr().err
