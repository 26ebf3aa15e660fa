"""The explorer's lab view in a real headless Chromium: retrieval heatmaps beside the perplexity
table, side-by-side verdicts from intervals, and the smoke stamp. Uses the browser fixtures of
``conftest`` (skips the same way when Chromium or Playwright is missing)."""

from __future__ import annotations

import json

import pytest
from browser_support import explore_server, open_view
from constructed_results import constructed_results

from posenc.measuring.lab.schema import stamp

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def lab_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("lab-view")
    res = constructed_results()
    res["config"]["preset"] = "smoke"
    res["machinery_check"] = True
    for s in res["schemes"].values():
        s["loss_by_position"] = {"512": [3.0] * 512}
    (run / "results.json").write_text(json.dumps(stamp("results", res)), encoding="utf-8")
    return run


@pytest.fixture(scope="module")
def explore_args(lab_run):
    return ("--lab-run", str(lab_run))


def test_lab_view_shows_retrieval_verdicts_and_the_smoke_stamp(page, server):
    section = open_view(page, server, "lab")
    stamp_line = section.locator("#lab-stamp")
    assert stamp_line.is_visible()
    assert stamp_line.text_content() == "Smoke run: machinery check: numbers carry no meaning."
    tables = section.locator("#lab-retrieval table.heatmap")
    captions = [c.text_content() for c in section.locator("#lab-retrieval caption").all()]
    assert captions == [
        "rope",
        "alibi",
        "rope+none",
        "rope+none ft",
        "rope+linear",
        "rope+linear ft",
        "rope+yarn",
        "rope+yarn ft",
    ]
    assert tables.count() == 8
    alibi = tables.nth(1)
    far = alibi.locator("tbody tr").nth(2)  # near, mid, far
    assert far.locator("td").nth(0).text_content() == "—"  # no far keys at 1x
    assert far.locator("td[data-accuracy='0']").count() == 1
    near = alibi.locator("tbody tr").nth(0).locator("td").nth(0)
    # 54 of 64 keys, with the exact (Clopper–Pearson) interval
    assert near.get_attribute("data-accuracy") == "0.84375" and "[73%, 92%]" in near.text_content()
    assert near.locator("small.logp").text_content() == "−1.5 bits"  # log2 p(key) shown, not only hovered
    assert section.locator("#lab-no-copy").count() == 0  # RoPE and ALiBi retrieve keys at 1x here
    items = section.locator("#lab-verdicts li.side-by-side")
    assert items.count() == 2
    text = items.nth(1).text_content()
    assert text.startswith("alibi: perplexity past the training length: flat within noise")
    # far against near keys at the same length, by Fisher's exact test
    assert "far keys at 512 0% [0%, 6%] vs near keys at 512 80% [68%, 89%]" in text and "Fisher exact" in text
    assert "Fisher exact (0/64 vs 51/64)" in text and "Holm-adjusted" in text and "over 14 tests: seen;" in text
    assert section.locator("#lab-verdicts li.noise").count() >= 1
    assert section.locator("#lab-verdicts li.not-seen").count() >= 1


def test_lab_view_says_when_no_model_learned_the_copy(browser, tmp_path):
    from playwright.sync_api import expect

    res = constructed_results()
    for s in res["schemes"].values():
        for cell in s["eval"]["64"]["retrieval"].values():
            cell["accuracy"], cell["accuracy_ci"] = 0.0, [0.0, 0.0]
    run = tmp_path / "no-copy"
    run.mkdir()
    (run / "results.json").write_text(json.dumps(stamp("results", res)), encoding="utf-8")
    errors: list = []
    with explore_server("--lab-run", str(run)) as url:
        page = browser.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{url}#lab")
        note = page.locator("#lab-no-copy")
        expect(note).to_be_visible()
        assert note.text_content().startswith("No model retrieved a single key at the training length (64 bytes)")
        page.close()
    assert not errors
