"""The claims of chapters 1 to 3 (a bag of tiles, word + position, two ideas that fail) in a real
headless Chromium: each test does what a sentence of the lesson says (a "try this", or a caption saying
what a figure shows) and asserts what the sentence claims, on the figure as drawn. Expected values come
from posenc (``posenc.teaching.lesson``) or from the page's own numbers, never from numbers copied off the page.
The server, browser and page helpers are ``conftest``'s and ``browser_support``'s; without Chromium these
tests skip (or fail with ``POSENC_REQUIRE_BROWSER=1``).
"""

from __future__ import annotations

import math
import re

import pytest
from browser_support import SIZES, new_page, open_chapter, select_and_wait, set_slider, settled, watched_page

from posenc.teaching.lesson.chapters.bag_of_tiles import MIRROR_TEXT

pytestmark = pytest.mark.slow


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / (sum(x * x for x in a) ** 0.5 * sum(y * y for y in b) ** 0.5)


def rgb(fill):
    """``rgb(r,g,b)`` or ``#rrggbb`` as three ints."""
    if fill.startswith("#"):
        return tuple(int(fill[i : i + 2], 16) for i in (1, 3, 5))
    return tuple(int(v) for v in re.findall(r"\d+", fill)[:3])


def test_claim_the_opening_demo_shows_a_shuffle_and_ropes_small_differences(browser, server):
    """Chapter 1: the shuffled row differs from the sentence on first load; with none the difference
    strip is white (rounding); with RoPE it is coloured on a scale of its own, and the page says why
    RoPE's changes are small (an untrained block)."""
    from playwright.sync_api import expect

    with watched_page(browser, server, SIZES["phone"]) as page:
        node = open_chapter(page, server, "bag-of-tiles")
        words = page.locator("#bag-text").input_value().split()
        shown = page.locator("#bag-figure svg text").first.text_content()
        assert shown.startswith("shuffled: ") and shown.split(": ")[1].split() != words
        assert sorted(shown.split(": ")[1].split()) == sorted(words)
        fills = "(ns) => ns.map((n) => n.getAttribute('fill'))"
        assert set(page.eval_on_selector_all("#bag-figure rect.delta", fills)) == {"#ffffff"}
        renders = node.get_attribute("data-renders")
        page.locator("#bag-scheme").select_option("rope")
        expect(node).not_to_have_attribute("data-renders", renders, timeout=20_000)
        written = page.eval_on_selector_all("#bag-figure rect.written", fills)
        shuffled = page.eval_on_selector_all("#bag-figure rect.shuffled", fills)
        delta = page.eval_on_selector_all("#bag-figure rect.delta", fills)
        white = {"rgb(255,255,255)", "#ffffff"}
        assert sum(f not in white for f in delta) > len(delta) // 2  # the difference strip is coloured
        assert written != shuffled
        spans = page.eval_on_selector_all("#bag-figure .sign-legend", "(ns) => ns.map((n) => Number(n.dataset.span))")
        assert len(spans) == 2 and 0 < spans[1] < 0.2 * spans[0], spans  # the difference has its own, finer scale
        assert "untrained" in node.locator("#bag-why-small").inner_text()


def test_claim_rule_one_is_about_growth_with_the_seat(browser, server):
    """Chapters 2-4: at GPT-2's scale the position vector is about 30 times the word at every seat; the
    sine code's pull on "dog" and "man" stays in a band at every seat, while the raw seat drives it to 1."""
    with watched_page(browser, server, SIZES["desktop"]) as page:
        node = open_chapter(page, server, "word-plus-position")
        ratios = []
        for seat in (3, 60):
            renders = node.get_attribute("data-renders")
            page.locator("#input-std").select_option("0.02")
            page.locator("#input-seat").fill(str(seat))
            from playwright.sync_api import expect

            expect(node).not_to_have_attribute("data-renders", renders, timeout=20_000)
            settled(node)
            text = page.locator("#input-numbers").inner_text()
            ratios.append(float(re.search(r"position / word = ([\d.]+)", text).group(1)))
        assert ratios[0] == ratios[1] and 20 < ratios[0] < 40  # the same at every seat
        node = open_chapter(page, server, "bad-ideas")
        set_slider(page, node, "#raw-seat", 2000)
        text = page.locator("#raw-numbers").inner_text()
        raw = float(re.search(r"with the raw seat ([\d.]+)", text).group(1))
        sine = float(re.search(r"with the sine code ([\d.]+)", text).group(1))
        low, high = (float(v) for v in re.search(r"stays between ([\d.]+) and ([\d.]+)", text).groups())
        assert raw > 0.999 and low <= sine <= high < 0.9
        assert "rule 1" in node.locator("#sine-pull").inner_text()


def bar_rows(page, selector):
    """``data-value`` of the bars of ``selector``, by their ``data-row``."""
    rows = page.eval_on_selector_all(
        f"{selector} rect.bar", "(ns) => ns.map((n) => [n.dataset.row, Number(n.dataset.value)])"
    )
    out: dict = {}
    for row, value in rows:
        out.setdefault(row, []).append(value)
    return out


def test_claim_moving_the_seat_changes_only_the_position_row_and_a_small_word_is_buried(browser, server):
    """Chapter 2: "move the seat: only the middle row changes, and the bottom row is always the top two
    added. Switch the scale to 0.02 and watch the sum look like the position alone"."""
    with watched_page(browser, server, SIZES["phone"]) as page:
        node = open_chapter(page, server, "word-plus-position")
        before = bar_rows(page, "#input-figure")
        assert set(before) == {"word", "position", "input"} and len(before["word"]) == 16
        set_slider(page, node, "#input-seat", 10)
        after = bar_rows(page, "#input-figure")
        assert after["word"] == before["word"]
        assert after["position"] != before["position"]
        for rows in (before, after):
            for w, p, s in zip(rows["word"], rows["position"], rows["input"]):
                assert s == pytest.approx(w + p, abs=1e-12)
        assert cosine(after["input"], after["position"]) < 0.9  # nn.Embedding's default: the word shows
        select_and_wait(page, node, "#input-std", "0.02")
        small = bar_rows(page, "#input-figure")
        assert cosine(small["input"], small["position"]) > 0.99  # the sum looks like the position alone


def test_claim_the_fraction_step_shrinks_and_the_ruler_stays_readable(browser, server):
    """Chapter 3: "set the sentence to 100 words: the step shrinks from 0.25 to 0.01"; at any length
    the ruler's labels never run into each other."""
    with watched_page(browser, server, SIZES["phone"]) as page:
        node = open_chapter(page, server, "bad-ideas")
        overlaps = """() => { const boxes = [...document.querySelectorAll('#frac-figure svg text')]
            .map((t) => t.getBoundingClientRect()).filter((b) => b.width > 0);
          const hit = [];
          boxes.forEach((a, i) => boxes.slice(i + 1).forEach((b) => {
            const across = a.left < b.right - 0.5 && b.left < a.right - 0.5;
            if (across && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5) hit.push(i);
          }));
          return hit; }"""
        step_text = "() => [...document.querySelectorAll('#frac-figure svg text')].map((t) => t.textContent).join('|')"
        for length in (4, 8, 100, 1000):
            set_slider(page, node, "#frac-len", length)
            assert page.evaluate(overlaps) == [], length
            shown = page.evaluate(step_text)
            step = float(re.search(r"one step = ([\d.]+)", shown).group(1))
            assert step == pytest.approx(1 / length), shown
            assert "4-word sentence: 0.25" in shown, shown
            labels = page.eval_on_selector_all("#frac-figure .tick-label", "(ns) => ns.map((n) => n.textContent)")
            assert labels[:2] == ["0.00", "0.25"] if length == 4 else len(labels) >= 1
            assert len(set(labels)) == len(labels), labels  # two seats never share a label


def test_claim_the_sine_code_also_colours_the_difference_strip(browser, server):
    """Chapter 1: "pick sinusoidal or RoPE and shuffle again: the difference strip fills with colour"."""
    from playwright.sync_api import expect

    context, page = new_page(browser, server, SIZES["phone"])
    fills = "(ns) => ns.map((n) => n.getAttribute('fill'))"
    try:
        node = open_chapter(page, server, "bag-of-tiles")
        select_and_wait(page, node, "#bag-scheme", "sinusoidal")
        renders = node.get_attribute("data-renders")
        page.locator("#bag-shuffle").click()
        expect(node).not_to_have_attribute("data-renders", renders, timeout=20_000)
        delta = page.eval_on_selector_all("#bag-figure rect.delta", fills)
        assert sum(f not in {"#ffffff", "rgb(255,255,255)"} for f in delta) > len(delta) // 2
        assert page.problems == [], page.problems
    finally:
        context.close()


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

    from posenc.teaching.lesson.chapters.bag_of_tiles import bag_of_tiles

    with watched_page(browser, server, SIZES["desktop"]) as page:
        node = open_chapter(page, server, "bag-of-tiles")
        text = page.locator("#bag-text").input_value()
        note = " ".join(node.locator("#bag-why-small").inner_text().split())
        assert "The sine code is added to the input itself, so even the untrained block shows it at once" in note
        for shuffle in (1, 2):  # the first load shows shuffle 1, each press the next
            if shuffle > 1:
                renders = node.get_attribute("data-renders")
                page.locator("#bag-shuffle").click()
                expect(node).not_to_have_attribute("data-renders", renders, timeout=20_000)
                settled(node)
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


WHITE = {"#ffffff", "rgb(255,255,255)", "rgb(255, 255, 255)"}


FILLS = "(ns) => ns.map((n) => n.getAttribute('fill'))"


def test_claim_alibi_without_a_mask_is_fooled_by_the_mirror_image(browser, server):
    """Chapter 1's note: type the sentence, pick ALiBi and shuffle until it reads backwards: the difference
    strip turns white; the same reversal under RoPE colours it."""
    from playwright.sync_api import expect

    reversed_text = " ".join(reversed(MIRROR_TEXT.split()))
    with watched_page(browser, server, SIZES["desktop"]) as page:
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


def test_claim_chapter_twos_legend_is_the_two_colours_its_bars_are_drawn_in(browser, server):
    """Chapter 2's bars are coloured by their sign alone (their height is their size): the legend shows
    exactly the colours the bars use, one for each sign, and no colour scale the bars never take."""
    from posenc.teaching.lesson.palette import SIGN_COLOURS

    with watched_page(browser, server, SIZES["desktop"]) as page:
        node = open_chapter(page, server, "word-plus-position")
        set_slider(page, node, "#input-seat", 5)
        bars = page.eval_on_selector_all(
            "#input-figure rect.bar", "(ns) => ns.map((n) => [Number(n.dataset.value), n.getAttribute('fill')])"
        )
        assert {fill for v, fill in bars if v < 0} == {SIGN_COLOURS["negative"]}
        assert {fill for v, fill in bars if v > 0} == {SIGN_COLOURS["positive"]}
        legend = page.eval_on_selector_all(
            "#ch-word-plus-position .sign-legend .sign-swatch",
            "(ns) => ns.map((n) => [n.dataset.sign, getComputedStyle(n).backgroundColor])",
        )
        to_rgb = lambda h: f"rgb({int(h[1:3], 16)}, {int(h[3:5], 16)}, {int(h[5:7], 16)})"  # noqa: E731
        assert sorted(map(tuple, legend)) == sorted(
            [(s, to_rgb(c)) for s, c in SIGN_COLOURS.items() if s in ("negative", "positive")]
        )
        assert page.locator("#ch-word-plus-position .sign-legend rect").count() == 0  # no colour scale


def test_claim_the_raw_seat_is_measured_against_the_pair_it_is_added_to(browser, server):
    """Chapter 3: the figure adds the seat to the pair [0.42, −0.15] and compares the seat's two numbers with
    that pair (defect: "730.6 times longer" was measured against a 16-number word); at the text's scale the
    raw code of 512 numbers is compared with "dog", the bars' word. Both recomputed here."""
    import math

    from posenc.teaching.lesson.chapters.bad_ideas import EXAMPLE_WORD, word_vectors

    dog = float(word_vectors()[0].norm())
    with watched_page(browser, server, SIZES["desktop"]) as page:
        node = open_chapter(page, server, "bad-ideas")
        for seat in (500, 1000):
            set_slider(page, node, "#raw-seat", seat)
            (line,) = [t for t in page.locator("#raw-numbers li").all_inner_texts() if "times longer" in t]
            pair = math.hypot(seat, seat) / math.hypot(*EXAMPLE_WORD)
            assert f"(each {seat}) are {round(pair):,} times longer than the pair [0.42, -0.15]" in line, line
            word = seat * math.sqrt(512) / dog
            assert f"(512 numbers, each {seat}) is {round(word):,} times longer than the vector of “dog”" in line
            assert f"(length {dog:.2f})" in line


def test_an_empty_sentence_is_refused_in_words_and_the_old_figure_is_dimmed(browser, server):
    from playwright.sync_api import expect

    context, page = new_page(browser, server, SIZES["phone"])
    try:
        node = open_chapter(page, server, "bag-of-tiles")
        error = node.locator(".error").first
        figure = page.locator("#bag-figure")
        opacity = "() => Number(getComputedStyle(document.querySelector('#bag-figure')).opacity)"
        assert page.evaluate(opacity) == 1
        page.locator("#bag-text").fill("   ")
        expect(error).to_be_visible(timeout=10_000)
        expect(error).to_have_text("text must contain at least one word, got '   '")
        assert "String should have" not in error.inner_text()
        expect(node).to_have_attribute("data-failed", "true")
        assert page.evaluate(opacity) < 0.5  # the figure left from the last sentence is not the answer
        page.locator("#bag-text").fill("dog bit man")
        expect(error).to_be_hidden(timeout=10_000)
        expect(node).not_to_have_attribute("data-failed", "true")
        expect(figure.locator("svg")).to_have_count(1)
        assert page.evaluate(opacity) == 1
        # the refused request (and the browser's console line about it) is the only problem
        expected = [p for p in page.problems if "HTTP 422" in p and "/api/lesson/bag" in p]
        others = [p for p in page.problems if p not in expected and "status of 422" not in p]
        assert len(expected) == 1 and others == [], page.problems
    finally:
        context.close()


def test_claim_the_position_vector_always_has_length_root_half_d(browser, server):
    """Chapter 2: "a sine/cosine position vector always has length √(d/2) (2.83 at width 16, at every seat
    ...)": the drawn position bars, the figure's label and the printed numbers, at every width and
    several seats."""
    with watched_page(browser, server, SIZES["phone"]) as page:
        node = open_chapter(page, server, "word-plus-position")
        note = node.locator(".prose").filter(has_text="√(d/2)").first.inner_text()
        stated, width = re.search(r"√\(d/2\) \(([\d.]+)\s+at width (\d+)", note).groups()
        assert float(stated) == round(math.sqrt(int(width) / 2), 2), note
        widths = page.eval_on_selector_all(
            "#input-width option", "(ns) => ns.map((n) => Number(n.value || n.textContent))"
        )
        assert int(width) in widths and len(widths) >= 2
        for d in widths:
            select_and_wait(page, node, "#input-width", str(d))
            for seat in (0, 37, 63):
                set_slider(page, node, "#input-seat", seat)
                length = math.sqrt(d / 2)
                bars = page.eval_on_selector_all(
                    "#input-figure rect.bar[data-row='position']", "(ns) => ns.map((n) => Number(n.dataset.value))"
                )
                assert len(bars) == d and math.sqrt(sum(v * v for v in bars)) == pytest.approx(length, rel=1e-9)
                label = page.locator("#input-figure svg text").filter(has_text="+ position of seat").text_content()
                assert f"+ position of seat {seat} ({d} numbers, length {length:.2f})" == label, label
                printed = re.search(
                    r"position ([\d.]+) \(always √\(d/2\)\)", page.locator("#input-numbers").inner_text()
                )
                assert float(printed[1]) == round(length, 3), (d, seat, printed[0])


def test_claim_the_sine_code_keeps_dog_and_man_in_one_band_at_every_seat(browser, server):
    """Chapter 3: "the sine code pulls "dog" and "man" together too, from −0.031 to between 0.675 and
    0.726 over seats 0 to 2,000, depending on the seat ... the similarity stays in one band at every seat
    (printed under that figure)": at several seats the sine bar lies in the printed band, the band is the
    same at every seat, is posenc's over every seat of the slider, and the note's numbers are the figure's."""
    from posenc.teaching.lesson.chapters.bad_ideas import bad_ideas

    context, page = new_page(browser, server, SIZES["desktop"])
    values = "(ns) => ns.map((n) => Number(n.dataset.value))"
    try:
        node = open_chapter(page, server, "bad-ideas")
        note = node.locator("#sine-pull").inner_text()
        about, low_said, high_said = (
            float(v.replace("−", "-"))
            for v in re.search(r"from ([-+−\d.]+) to between ([-+−\d.]+) and ([-+−\d.]+)", note).groups()
        )
        top = int(page.locator("#raw-seat").get_attribute("max"))
        bands, sines = set(), []
        for seat in (0, 1, 500, 1337, top):
            set_slider(page, node, "#raw-seat", seat)
            text = page.locator("#raw-numbers").inner_text()
            band = re.search(r"stays between ([\d.]+) and ([\d.]+)", text).groups()
            bands.add(band)
            low, high = (float(v) for v in band)
            words, raw, sine = page.eval_on_selector_all("#raw-figure rect.bar", values)
            expected = bad_ideas(seat, 4)
            assert sine == pytest.approx(expected["cosine_sine"], abs=1e-12)
            assert low - 5e-4 <= sine <= high + 5e-4, (seat, sine, band)
            assert (low, high) == (
                round(expected["cosine_sine_range"][0], 3),
                round(expected["cosine_sine_range"][1], 3),
            )
            assert round(words, 3) == about and sine > words  # the pull is towards each other
            sines.append(sine)
        assert len(bands) == 1  # one band at every seat
        assert max(sines) - min(sines) > 0.005  # ... and the seat moves the similarity inside it
        (band,) = bands
        assert (float(band[0]), float(band[1])) == (low_said, high_said), (band, note)
        assert page.problems == [], page.problems
    finally:
        context.close()


def test_claim_one_button_shows_the_exact_pair_and_none_gives_every_word_the_same_output(browser, server):
    """Chapter 1: "Take “The dog bit the man.” and “The man bit the dog.”": its button sets the sentence and
    the shuffle that swaps the nouns; with none every word's output is the same (rounding), with the sine
    code it is not."""
    from playwright.sync_api import expect

    from posenc.teaching.lesson.chapters import bag_of_tiles as bag

    with watched_page(browser, server, SIZES["phone"]) as page:
        node = open_chapter(page, server, "bag-of-tiles")
        page.locator("#bag-text").fill("a cat saw a dog")
        settled(node)
        for scheme in ("nope", "sinusoidal"):
            select_and_wait(page, node, "#bag-scheme", scheme)
            renders = node.get_attribute("data-renders")
            page.locator("#bag-swap").click()
            expect(node).not_to_have_attribute("data-renders", renders, timeout=20_000)
            settled(node)
            assert page.locator("#bag-text").input_value() == bag.SENTENCE_A
            numbers = page.locator("#bag-numbers").inner_text()
            assert f"sentence: “{bag.SENTENCE_A}”; shuffled: “{bag.SENTENCE_B}”" in numbers
            expected = bag.bag_of_tiles(bag.SENTENCE_A, bag.SWAP_SHUFFLE, scheme)["largest_difference"]
            assert (expected <= bag.ROUNDING_LEVEL) is (scheme == "nope")
            assert ("(rounding: the same vectors)" in numbers) is (scheme == "nope"), numbers
