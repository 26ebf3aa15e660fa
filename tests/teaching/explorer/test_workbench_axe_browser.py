"""axe-core over every workbench view at the two sizes the browser tests use (1440x900 and 390x844).

Each view is opened by its URL hash and must pass axe-core with no serious or critical violation. Two
kinds were found by hand before this test existed: the lab's "seen" verdicts in green at a contrast
of 4.03 (under the 4.5 that text needs), and tables and code blocks that scroll sideways on a phone
but could not be reached with the keyboard (axe rule scrollable-region-focusable).

The browser is the system Chromium, or ``$POSENC_CHROMIUM``; without it this test skips, unless
``POSENC_REQUIRE_BROWSER=1`` (set in CI).
"""

from __future__ import annotations

import pytest
from browser_support import SIZES, axe_serious

pytestmark = pytest.mark.slow

VIEWS = ("fingerprint", "dials", "scores", "wavelengths", "alibi", "precision", "lab", "quiz", "config", "eval")


@pytest.mark.parametrize("size", list(SIZES))
def test_every_workbench_view_passes_axe(browser, server, size):
    from playwright.sync_api import expect

    width, height = SIZES[size]
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    failures, checked = [], 0
    try:
        for view in VIEWS:
            page.goto(f"{server}#{view}")
            section = page.locator(f"#view-{view}")
            expect(section).to_be_visible()
            expect(section).not_to_have_attribute("data-renders", "0", timeout=20_000)
            failures += [f"{view}: {line}" for line in axe_serious(page, f"#view-{view}")]
            checked += 1
        # every element the views scroll sideways can take the keyboard's focus
        unreachable = page.evaluate(
            """() => [...document.querySelectorAll('#workbench-main table.data, #workbench-main pre')]
                 .filter((n) => n.tabIndex < 0).map((n) => n.id || n.outerHTML.slice(0, 60))"""
        )
    finally:
        context.close()
    assert checked == len(VIEWS)
    assert failures == [], "\n".join(failures)
    assert unreachable == [], unreachable
