"""`posenc explore` without --lab-run shows the committed run summaries in its lab view, and treats a
missing, None or non-finite number as "not measured", as the verdicts do."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from posenc.measuring.lab.schema import stamp
from posenc.measuring.lab.summary import load_summaries
from posenc.teaching.explorer import lab_results
from posenc.teaching.explorer.app import create_app


def _summary(**numbers) -> dict:
    return {
        "name": "t",
        "command": "posenc lab --preset quick --seeds 0,1 --out runs/t",
        "config": {"schemes": ["rope"]},
        "seeds": [0, 1],
        "complete": True,
        "machinery_check": False,
        "train_len": 64,
        "eval_lengths": [64, 128],
        "numbers": numbers,
        "train_seconds": {},
        "verdicts_by_seed": {},
        "verdicts": [
            {
                "claim": "RoPE reads text at 128 bytes (2x) worse than at 64 (1x)",
                "verdict": "seen",
                "by_seed": {"0": "seen", "1": "seen"},
                "evidence": "2 seeds",
                "effect_mean": float("nan"),
            },
            {"claim": "odd", "verdict": "maybe", "by_seed": {}},
        ],
    }


def test_without_a_run_the_api_serves_the_committed_summaries():
    committed = load_summaries()
    with TestClient(create_app(allowed_hosts=None)) as client:
        response = client.get("/api/lab")
    assert response.status_code == 200
    data = response.json()
    assert data["available"] is False  # no run of one's own ...
    assert [s["name"] for s in data["summaries"]] == sorted(committed)  # ... but every shipped summary
    assert committed, "no run summary ships with posenc"
    assert "showing the run summaries that ship with posenc" in data["notes"][0]
    for view in data["summaries"]:
        raw = committed[view["name"]]
        assert view["seeds"] == [str(s) for s in raw["seeds"]]
        for seed, per in raw["numbers"].items():
            for model, cells in per.items():
                for length, cell in cells.items():
                    row = view["models"][model][length]
                    if "bpb" in cell:
                        assert row["bpb"][seed] == cell["bpb"]
                    for b in ("near", "mid", "far"):
                        if b in cell:
                            assert row["retrieval"][b][seed] == cell[b]
        assert [v["verdict"] for v in view["verdicts"]] == (
            [] if raw["machinery_check"] else [v["verdict"] for v in raw["verdicts"]]
        )
        for shown, v in zip(view["verdicts"], raw["verdicts"]):
            # Beside the adjusted verdict, the adjusted p (Holm over the claims), and the interval.
            assert shown["p"] == v.get("p_holm", v.get("p")) and shown["p_raw"] == v.get("p")
            assert shown["effect_ci"] == v.get("effect_ci")
            if v.get("p_holm") is not None:
                assert shown["p"] >= shown["p_raw"]


def test_a_summary_view_averages_seeds_and_marks_what_is_not_measured():
    s = _summary(
        **{
            "0": {"rope": {"64": {"bpb": 3.0, "near": [5, 64]}, "128": {"bpb": float("nan"), "far": [1, 64]}}},
            "1": {"rope": {"64": {"bpb": 3.2}, "128": {"bpb": None, "near": ["x", 64]}}},
        }
    )
    view = lab_results.summary_view(s)
    at64, at128 = view["models"]["rope"]["64"], view["models"]["rope"]["128"]
    assert at64["bpb_mean"] == pytest.approx(3.1) and at64["bpb_sd"] == pytest.approx(0.1414, abs=1e-4)
    assert at128["bpb"] == {"0": None, "1": None} and at128["bpb_mean"] is None and at128["bpb_sd"] is None
    assert at64["retrieval"] == {"near": {"0": [5, 64]}}  # seed 1 did not measure it
    assert at128["retrieval"] == {"far": {"0": [1, 64]}}  # a malformed cell is not measured
    assert view["verdicts"][0]["effect_mean"] is None  # NaN is not measured
    assert view["verdicts"][1]["verdict"] == "not measured"  # an unknown verdict too
    json.dumps(view, allow_nan=False)  # nothing non-finite reaches the page


def test_a_machinery_check_summary_shows_no_verdicts(tmp_path):
    s = _summary(**{"0": {"rope": {"64": {"bpb": 7.0}}}})
    s["machinery_check"] = True
    (tmp_path / "m.json").write_text(json.dumps(stamp("summary", s)))
    (tmp_path / "bad.json").write_text("{")
    views, notes = lab_results.committed_summaries(tmp_path)
    assert [v["name"] for v in views] == ["t"] and views[0]["verdicts"] == [] and views[0]["stamp"]
    assert len(notes) == 1 and notes[0].startswith("bad.json could not be read")


@pytest.fixture(scope="module")
def browser():
    from browser_support import chromium_or_skip, headless_chromium

    with headless_chromium(chromium_or_skip()) as b:
        yield b


@pytest.mark.slow
def test_the_lab_view_shows_committed_summaries_in_a_browser(browser):
    from browser_support import explore_server
    from playwright.sync_api import expect

    committed = load_summaries()
    errors: list = []
    with explore_server() as url:
        page = browser.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{url}#lab")
        blocks = page.locator("#lab-summaries article.lab-summary")
        expect(blocks.first).to_be_visible()
        assert blocks.count() == len(committed)
        for name, raw in committed.items():
            block = page.locator(f"#lab-summaries article[data-summary='{name}']")
            assert raw["command"] in block.locator("code").text_content()
            assert block.locator("td[data-bpb]").count() > 0
            if raw["machinery_check"]:
                assert block.locator("p.stamp").is_visible()
            else:  # the page's verdict for each claim is the summary's across-seed one, not a per-seed tally
                shown = block.locator("ul.verdicts li").evaluate_all("els => els.map(e => e.dataset.verdict)")
                assert shown == [v["verdict"] for v in raw["verdicts"]]
                notes = block.locator("ul.verdicts li small").all_text_contents()
                for note, v in zip(notes, raw["verdicts"]):  # the p shown is the Holm-adjusted one
                    assert ("Holm-adjusted p across seeds = " in note) == (v.get("p_holm") is not None), note
                heading = block.locator("h4", has_text="Verdicts across seeds").text_content()
                assert "spread between training seeds" in heading and "every seed sees it" not in heading
        assert page.locator("#lab-body").is_hidden()
        page.close()
    assert not errors
