"""Claim tests of the lesson in a real headless Chromium, for sentences that say what a figure, a table or a
printed output shows. Expected values come from posenc or from a computation written out in the test, never
from numbers copied off the page. Helpers are those of ``test_lesson_browser``; these skip without Chromium
(or fail with ``POSENC_REQUIRE_BROWSER=1``).
"""

from __future__ import annotations

import math
import re

import pytest
from browser_support import chromium_or_skip, explore_server, headless_chromium
from test_lesson_browser import SIZES, new_page, open_chapter, select_and_wait, set_slider

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


def rgb(fill):
    """``rgb(r,g,b)`` or ``#rrggbb`` as three ints."""
    if fill.startswith("#"):
        return tuple(int(fill[i : i + 2], 16) for i in (1, 3, 5))
    return tuple(int(v) for v in re.findall(r"\d+", fill)[:3])


# What chapter 1's figure draws: the shuffled sentence, the two legends' spans (outputs, difference), and per
# cell the colour of a word's output as written and after the shuffle, on the outputs' one scale.
BAG_DRAWN = """() => { const f = document.getElementById('bag-figure');
  const fills = (c) => [...f.querySelectorAll('rect.' + c)].map((n) => n.getAttribute('fill'));
  return { label: f.querySelector('svg text').textContent,
    spans: [...f.querySelectorAll('.sign-legend')].map((n) => Number(n.dataset.span)),
    written: fills('written'), shuffled: fills('shuffled') }; }"""


def test_claim_the_sine_code_shows_a_shuffle_at_once_where_ropes_untrained_change_is_small(browser, server):
    """Chapter 1's note: "The sine code is added to the input itself, so even the untrained block shows it at
    once", against RoPE's small changes. For the same sentence and the same shuffle, the difference legend
    spans posenc's largest change under each scheme, the sine code's at least ten times RoPE's; on the
    outputs' own colour scale a word's shuffled cells visibly change colour with the sine code and barely
    with RoPE."""
    from playwright.sync_api import expect

    from posenc.lesson.chapters.bag_of_tiles import bag_of_tiles

    context, page = new_page(browser, server, SIZES["desktop"])
    try:
        node = open_chapter(page, server, "bag-of-tiles")
        text = page.locator("#bag-text").input_value()
        note = " ".join(node.locator("#bag-why-small").inner_text().split())
        assert "The sine code is added to the input itself, so even the untrained block shows it at once" in note
        for shuffle in (1, 2):  # the first load shows shuffle 1, each press the next
            if shuffle > 1:
                renders = node.get_attribute("data-renders")
                page.locator("#bag-shuffle").click()
                expect(node).not_to_have_attribute("data-renders", renders, timeout=20_000)
                page.wait_for_timeout(150)
            drawn = {}
            for scheme in ("rope", "sinusoidal"):
                select_and_wait(page, node, "#bag-scheme", scheme)
                drawn[scheme] = page.evaluate(BAG_DRAWN)
                expected = bag_of_tiles(text, shuffle, scheme)
                assert drawn[scheme]["label"] == "shuffled: " + " ".join(expected["shuffled"])
                span, delta_span = drawn[scheme]["spans"]
                assert span == pytest.approx(max(abs(v) for row in expected["outputs"] for v in row), rel=1e-6)
                assert delta_span == pytest.approx(expected["largest_difference"], rel=1e-6)
            assert drawn["rope"]["label"] == drawn["sinusoidal"]["label"]  # the same shuffle under both
            assert drawn["sinusoidal"]["spans"][1] >= 10 * drawn["rope"]["spans"][1], drawn
            change = {
                scheme: max(
                    max(abs(x - y) for x, y in zip(rgb(a), rgb(b)))
                    for a, b in zip(drawn[scheme]["written"], drawn[scheme]["shuffled"])
                )
                for scheme in drawn
            }
            assert change["sinusoidal"] >= 60 and change["rope"] <= 20 and change["sinusoidal"] >= 5 * change["rope"]
        assert page.problems == [], page.problems
    finally:
        context.close()


def test_claim_a_layer_that_only_reads_the_wider_vector_doubles_and_a_block_grows_fourfold(browser, server):
    """Chapter 13: "A layer that only reads the wider vector, such as the table's linear map back to the model
    width, doubles; a block that keeps the wider width throughout grows fourfold". The page's table counts,
    as nn.Linear does, W*W + W weights reading W numbers and 2W*W + W reading 2W (ratio 2), and the block's
    row is posenc's block counted at W and 2W (ratio 4 to two decimals), as the figure above it prints."""
    from posenc.lesson.chapters.common_mistakes import WIDE
    from posenc.lesson.mistakes import block_parameters

    context, page = new_page(browser, server, SIZES["phone"])
    try:
        node = open_chapter(page, server, "common-mistakes")
        slot = node.locator("[data-prose='m2-measured']")
        sentence = " ".join(slot.inner_text().split())
        assert (
            "only reads the wider vector, such as the table's linear map back to the model width, doubles" in sentence
        )
        assert "grows fourfold" in sentence
        rows = slot.locator("table").evaluate(
            "(t) => Object.fromEntries([...t.tBodies[0].rows].map((r) => [r.cells[0].textContent,"
            " [...r.cells].slice(1).map((c) => c.textContent)]))"
        )
        width = WIDE
        linear = (width * width + width, 2 * width * width + width)
        assert rows["a linear map back to the model width"] == [f"{linear[0]:,}", f"{linear[1]:,}", "2.00x"]
        block = block_parameters(width)
        ratio = block["concatenated"] / block["added"]
        assert rows["one transformer block (attention + MLP)"] == [
            f"{block['added']:,}",
            f"{block['concatenated']:,}",
            f"{ratio:.2f}x",
        ]
        assert round(ratio) == 4 and round(linear[1] / linear[0]) == 2
        figure = " ".join(node.locator("#mis-cat-numbers").inner_text().split())
        assert f"at width {width}: {block['added']:,} parameters; at {2 * width}: {block['concatenated']:,}" in figure
        assert page.problems == [], page.problems
    finally:
        context.close()


ORDER_SCORE = re.compile(r"score of “bit” looking at “dog”: with RoPE (\S+); without positions (\S+)")


def number(shown):
    return float(shown.replace("−", "-"))


def test_claim_who_bit_whoms_score_is_printed_under_the_dials_for_each_sentence(browser, server):
    """Chapter 7: "the score is 0.67942 in A and 0.87942 in B, the score the “Who bit whom?” dials print under
    them for the sentence they show". Worked out by hand: "bit" at seat 2 queries "dog" at seat 1 (A) or 3 (B),
    the lesson's q and k turned 30 degrees per seat; the page prints that score under the dials for each
    sentence, and the same to five decimals in the sentence."""
    from playwright.sync_api import expect

    from posenc.lesson.rotation import KEY, QUERY

    def turned(v, seat):
        a = math.radians(30.0) * seat
        return (v[0] * math.cos(a) - v[1] * math.sin(a), v[0] * math.sin(a) + v[1] * math.cos(a))

    q = turned(QUERY, 2)
    by_hand = {}
    for name, dog in (("A", 1), ("B", 3)):
        k = turned(KEY, dog)
        by_hand[name] = q[0] * k[0] + q[1] * k[1]
    context, page = new_page(browser, server, SIZES["phone"])
    try:
        node = open_chapter(page, server, "rope")
        measured = " ".join(node.locator("[data-prose='measured']").inner_text().split())
        assert (
            f"the score is {by_hand['A']:.5f} in A and {by_hand['B']:.5f} in B, the score the “Who bit whom?” dials"
            " print under them for the sentence they show"
        ) in measured
        numbers = page.locator("#order-numbers")
        expect(numbers).to_contain_text("sentence A")
        for name in ("A", "B"):
            if name == "B":
                page.locator("#order-rotate").click()
                expect(numbers).to_contain_text("sentence B")
            found = ORDER_SCORE.search(" ".join(numbers.inner_text().split()))
            assert found is not None, numbers.inner_text()
            assert number(found.group(1)) == pytest.approx(by_hand[name], abs=5e-5), name
            assert number(found.group(2)) == pytest.approx(QUERY[0] * KEY[0] + QUERY[1] * KEY[1], abs=5e-5)
        assert page.problems == [], page.problems
    finally:
        context.close()


def wave_vector(seat, d_model):
    """The sinusoidal table's row ``seat``, from the formula: sin and cos of seat * 10000^(-2i/d) in columns
    2i and 2i + 1, each rounded to three decimals as the demo prints them."""
    row = []
    for i in range(d_model // 2):
        angle = seat * 10000 ** (-2 * i / d_model)
        row += [round(math.sin(angle), 3), round(math.cos(angle), 3)]
    return row


def pair_score(seat_q, seat_k, theta=0.5, q=(1.0, 0.5), k=(0.8, 0.2)):
    """The seed's 2-D RoPE score: q turned by seat_q * theta dotted with k turned by seat_k * theta."""
    a, b = seat_q * theta, seat_k * theta
    qa = (q[0] * math.cos(a) - q[1] * math.sin(a), q[0] * math.sin(a) + q[1] * math.cos(a))
    kb = (k[0] * math.cos(b) - k[1] * math.sin(b), k[0] * math.sin(b) + k[1] * math.cos(b))
    return qa[0] * kb[0] + qa[1] * kb[1]


def test_claim_the_demo_prints_the_seeds_wave_vectors_and_scores(browser, server):
    """Chapter 11: the from-scratch demo reproduces the seed's printed output: at width 4 the wave vectors of
    seats 0 and 1 are [0, 1, 0, 1] and [0.841, 0.54, 0.01, 1], and the score of seats 1 and 3 is 0.65457, as
    worked out here from the formulas; at width 8 the printed rows are the formula's too."""
    from playwright.sync_api import expect

    assert wave_vector(0, 4) == [0.0, 1.0, 0.0, 1.0] and wave_vector(1, 4) == [0.841, 0.54, 0.01, 1.0]  # the seed's
    assert f"{pair_score(1, 3):.5f}" == "0.65457"  # the seed's
    context, page = new_page(browser, server, SIZES["desktop"])
    try:
        node = open_chapter(page, server, "pytorch-demo")
        output = page.locator("#demo-output")
        shift = int(page.locator("#demo-shift").input_value())
        for width in (4, 8):
            if width != 4:
                select_and_wait(page, node, "#demo-width", str(width))
            expect(output).to_contain_text("seat 0 wave vector")
            lines = output.inner_text().split("\n")
            assert f"seat 0 wave vector: {wave_vector(0, width)}" in lines, lines
            assert f"seat 1 wave vector: {wave_vector(1, width)}" in lines, lines
            assert f"score, seats 1 and 3: {pair_score(1, 3):.5f}" in lines
            moved = f"seats {1 + shift} and {3 + shift}: {pair_score(1 + shift, 3 + shift):.5f}"
            assert f"score, {moved}" in lines and f"posenc, {moved}" in lines
            assert "posenc's table matches: True" in lines
        set_slider(page, node, "#demo-shift", 10_000)
        expect(output).to_contain_text(f"score, seats 10001 and 10003: {pair_score(10_001, 10_003):.5f}")
        assert page.problems == [], page.problems
    finally:
        context.close()


# Per entry of the opened table of contents: its text, and whether its number and its link lie whole inside the
# contents' box and the screen, and its text inside its link (nothing cut off at either side).
TOC_FITS = """() => { const toc = document.querySelector('nav.toc').getBoundingClientRect(), w = window.innerWidth;
  const inside = (b) => b.width > 0 && b.left >= Math.max(0, toc.left) - 0.5 && b.right <= Math.min(w, toc.right) + 0.5;
  return [...document.querySelectorAll('#toc-list a')].map((a) => [a.textContent,
    inside(a.querySelector('.toc-num').getBoundingClientRect()) && inside(a.getBoundingClientRect())
      && a.scrollWidth <= a.clientWidth + 1]); }"""


def test_claim_the_contents_fit_on_a_phone_once_opened(browser, server):
    """The table of contents on a phone: folded at first, and once opened every chapter is listed with its
    number, in the manifest's order, each number and link whole inside the contents and the screen."""
    from playwright.sync_api import expect

    context, page = new_page(browser, server, SIZES["phone"])
    try:
        open_chapter(page, server, "knowledge-checks")
        box = page.locator("#toc-box")
        expect(box).not_to_have_attribute("open", "")
        box.locator("summary").click()
        expect(box).to_have_attribute("open", "")
        links = page.locator("#toc-list a")
        expect(links).to_have_count(len(CHAPTERS))
        for i in range(len(CHAPTERS)):
            expect(links.nth(i)).to_be_visible()
        fits = page.evaluate(TOC_FITS)
        assert len(fits) == len(CHAPTERS)
        for i, ((shown, whole), chapter) in enumerate(zip(fits, CHAPTERS), start=1):
            assert shown.startswith(f"{i}. ") and chapter.title in shown, shown
            assert whole, shown
        assert page.problems == [], page.problems
    finally:
        context.close()
