"""Claim tests of the lesson in a real headless Chromium, for sentences that say what a figure, a table or a
printed output shows. Expected values come from posenc or from a computation written out in the test, never
from numbers copied off the page. Helpers are those of ``test_lesson_browser``; these skip without Chromium
(or fail with ``POSENC_REQUIRE_BROWSER=1``).
"""

from __future__ import annotations

import pytest
from browser_support import chromium_or_skip, explore_server, headless_chromium
from test_lesson_browser import SIZES, new_page, open_chapter

from posenc.lesson.manifest import CHAPTERS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def chromium_path():
    return chromium_or_skip()


@pytest.fixture(scope="module")
def server(chromium_path):
    """``posenc explore --port 0`` in a subprocess; yields its base URL."""
    with explore_server() as url:
        yield url


@pytest.fixture(scope="module")
def browser(chromium_path, server):
    with headless_chromium(chromium_path) as b:
        yield b


# Per row of the comparison table: its scheme, and for each cell of the columns the intro covers, the
# hash of every link in it.
COMPARISON_LINKS = """(columns) => [...document.querySelectorAll('#cmp-table tbody tr')].map((tr) => [tr.dataset.scheme,
  columns.map((c) => [...tr.querySelectorAll(`td[data-label="${c}"] a`)].map((a) => a.getAttribute('href')))])"""


def test_claim_the_comparison_links_how_each_scheme_works_and_how_far_it_reads(browser, server):
    """Chapter 10's intro: what the table says about how each scheme works and how it copes with longer
    texts links to the chapter or view where posenc shows it. Every such cell of every row has a link, and
    every link opens an existing chapter or workbench view."""
    from playwright.sync_api import expect

    columns = ("how it works", "longer than trained")
    context, page = new_page(browser, server, SIZES["desktop"])
    try:
        node = open_chapter(page, server, "comparison")
        intro = node.locator("[data-prose='intro']").inner_text()
        assert "how each scheme works" in intro and "longer texts" in intro and "used in" in intro
        rows = page.evaluate(COMPARISON_LINKS, list(columns))
        assert [scheme for scheme, _ in rows] == ["sinusoidal", "learned", "rope", "alibi", "nope"]
        unlinked = [(scheme, column) for scheme, cells in rows for column, links in zip(columns, cells) if not links]
        assert unlinked == []
        targets = sorted({href for _, cells in rows for links in cells for href in links})
        chapters = {c.id for c in CHAPTERS}
        for href in targets:
            assert href.startswith("#"), href
            name = href[1:]
            page.goto(f"{server}#comparison")
            expect(node).to_be_visible()
            node.locator(f"#cmp-table a[href='{href}']").first.click()
            target = page.locator(f"#ch-{name}" if name in chapters else f"#view-{name}")
            expect(target).to_be_visible()
        assert page.problems == [], page.problems
    finally:
        context.close()
