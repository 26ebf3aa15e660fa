"""Claim tests of the lesson in a real headless Chromium, for sentences that say what a figure will do
when the reader follows them. Expected values come from posenc (``posenc.lesson``), never from numbers
copied off the page. Helpers are those of ``test_lesson_browser``; these skip without Chromium (or fail
with ``POSENC_REQUIRE_BROWSER=1``).
"""

from __future__ import annotations

import pytest
from browser_support import chromium_or_skip, explore_server, headless_chromium
from test_lesson_browser import SIZES, new_page, open_chapter, select_and_wait

from posenc.lesson.chapters.bag_of_tiles import MIRROR_TEXT

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


WHITE = {"#ffffff", "rgb(255,255,255)", "rgb(255, 255, 255)"}
FILLS = "(ns) => ns.map((n) => n.getAttribute('fill'))"


def test_claim_alibi_without_a_mask_is_fooled_by_the_mirror_image(browser, server):
    """Chapter 1's note: type the sentence, pick ALiBi and shuffle until it reads backwards: the difference
    strip turns white; the same reversal under RoPE colours it."""
    from playwright.sync_api import expect

    reversed_text = " ".join(reversed(MIRROR_TEXT.split()))
    context, page = new_page(browser, server, SIZES["desktop"])
    try:
        node = open_chapter(page, server, "bag-of-tiles")
        note = node.locator("#bag-alibi-mirror")
        assert MIRROR_TEXT in note.inner_text() and reversed_text in note.inner_text()
        renders = node.get_attribute("data-renders")
        page.locator("#bag-text").fill(MIRROR_TEXT)
        expect(node).not_to_have_attribute("data-renders", renders, timeout=20_000)
        select_and_wait(page, node, "#bag-scheme", "alibi")
        label = page.locator("#bag-figure svg text").first
        for _ in range(20):  # the note says: press shuffle until it reads backwards
            if label.text_content() == f"shuffled: {reversed_text}":
                break
            renders = node.get_attribute("data-renders")
            page.locator("#bag-shuffle").click()
            expect(node).not_to_have_attribute("data-renders", renders, timeout=20_000)
        assert label.text_content() == f"shuffled: {reversed_text}"
        assert set(page.eval_on_selector_all("#bag-figure rect.delta", FILLS)) <= WHITE
        select_and_wait(page, node, "#bag-scheme", "rope")
        assert label.text_content() == f"shuffled: {reversed_text}"
        delta = page.eval_on_selector_all("#bag-figure rect.delta", FILLS)
        assert sum(f not in WHITE for f in delta) > len(delta) // 2
        assert page.problems == [], page.problems
    finally:
        context.close()


def test_claim_chapter_eight_opens_on_the_setup_its_text_measures(browser, server):
    """Chapter 8's figure and table open on the head its measured text describes (trained on TRAINED,
    stretched FACTOR x), so the NTK count the text states is the one the table shows at first sight."""
    from playwright.sync_api import expect

    from posenc.lesson import chapters
    from posenc.lesson.chapters.stretching_rope import FACTOR, TRAINED

    n = chapters.numbers("stretching-rope")
    context, page = new_page(browser, server, SIZES["phone"])
    try:
        node = open_chapter(page, server, "stretching-rope")
        caption = page.locator("#str-table caption")
        expect(caption).to_contain_text(f"Stretching {TRAINED} to {int(TRAINED * FACTOR)} tokens (factor {FACTOR:g})")
        assert page.locator("#str-train").input_value() == str(TRAINED)
        for method in ("linear", "ntk"):
            shown = int(page.locator(f"#str-table tr[data-method='{method}']").get_attribute("data-past"))
            assert shown == n[f"extension.{method}.unseen_pairs"], method
        ntk = len(n["extension.ntk.unseen_indices"])
        assert ntk > 0 and f"{ntk} pairs" in " ".join(node.inner_text().split())
        assert page.problems == [], page.problems
    finally:
        context.close()
