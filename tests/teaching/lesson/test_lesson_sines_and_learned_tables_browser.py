"""The claims of chapters 4 to 6 (the three rules, sine waves as clock hands, learned tables and the 512
wall) in a real headless Chromium: each test does what a sentence of the lesson says (a "try this", or a
caption saying what a figure shows) and asserts what the sentence claims, on the figure as drawn.
Expected values come from posenc (``posenc.teaching.lesson``) or from the page's own numbers, never from numbers
copied off the page. The server, browser and page helpers are ``conftest``'s and ``browser_support``'s;
without Chromium these tests skip (or fail with ``POSENC_REQUIRE_BROWSER=1``).
"""

from __future__ import annotations

import math

import pytest
from browser_support import SIZES, new_page, open_chapter, select_and_wait, set_slider, watched_page, wrap

pytestmark = pytest.mark.slow


RULES = """() => Object.fromEntries([...document.querySelectorAll('#rules-table tbody tr')].map((tr) =>
  [tr.dataset.code, [...tr.querySelectorAll('td')].map((td) => [td.className, td.textContent])]))"""


def test_claim_raw_integers_grow_fractions_break_rule_two_and_the_sine_code_passes(browser, server):
    """Chapter 4: "drag the length. Raw integers break rule 1 more and more; fractions break rule 2 at
    every length but 5; the sine code passes all three at any length"."""
    with watched_page(browser, server, SIZES["desktop"]) as page:
        node = open_chapter(page, server, "three-rules")
        largest = []
        for length in (5, 64, 2048):
            set_slider(page, node, "#rules-len", length)
            rows = page.evaluate(RULES)
            raw, frac, sine = rows["raw integers"], rows["fractions"], rows["sinusoidal"]
            assert raw[0][0] == "fail"
            largest.append(float(raw[0][1].split(": ")[1]))
            assert frac[1][0] == ("pass" if length == 5 else "fail"), (length, frac)
            assert [cell[0] for cell in sine] == ["pass"] * 3, (length, sine)
        assert largest == sorted(largest) and largest[-1] > 100 * largest[0]  # more and more


def test_claim_the_fast_hand_jumps_a_radian_and_the_slow_one_creeps(browser, server):
    """Chapter 5: "step the seat one at a time: the fast hand jumps about 57° (one radian), the slow
    one creeps. Go to seat 64 and compare how far each hand has come"."""
    import math

    with watched_page(browser, server, SIZES["desktop"]) as page:
        node = open_chapter(page, server, "clock-hands")
        angles = "(ns) => Object.fromEntries(ns.map((n) => [n.dataset.speed, Number(n.dataset.angle)]))"
        set_slider(page, node, "#clock-seat", 3)
        at3 = page.eval_on_selector_all("#clock-dials .dial-card", angles)
        set_slider(page, node, "#clock-seat", 4)
        at4 = page.eval_on_selector_all("#clock-dials .dial-card", angles)
        assert math.degrees(at4["fast"] - at3["fast"]) == pytest.approx(57.3, abs=0.1)
        assert 0 < math.degrees(at4["slow"] - at3["slow"]) < 1
        set_slider(page, node, "#clock-seat", 64)
        at64 = page.eval_on_selector_all("#clock-dials .dial-card", angles)
        assert at64["fast"] == pytest.approx(64.0) and at64["fast"] > 10 * 2 * math.pi  # ten turns and more
        assert at64["slow"] < math.radians(60)  # not yet a sixth of a turn
        assert at64["fast"] > at64["medium"] > at64["slow"]


def test_claim_the_wall_stops_the_513th_token_and_a_stretched_table_reads_it(browser, server):
    """Chapter 6: "set the tokens to 512, then 513. Then stretch the table past your token count and
    read the status again": 512 is read, 513 raises posenc's error, and the status says whether the
    stretched table reads the tokens."""
    from playwright.sync_api import expect

    with watched_page(browser, server, SIZES["phone"]) as page:
        node = open_chapter(page, server, "learned-tables")
        result, stretched = page.locator("#wall-result"), page.locator("#wall-stretched-status")
        set_slider(page, node, "#wall-stretch", 600)
        set_slider(page, node, "#wall-tokens", 512)
        expect(result).to_contain_text("512 tokens: fine")
        set_slider(page, node, "#wall-tokens", 513)
        expect(result).to_contain_text("posenc raised PositionOutOfRangeError")
        expect(stretched).to_have_attribute("data-reads", "true")
        set_slider(page, node, "#wall-tokens", 700)
        expect(stretched).to_have_attribute("data-reads", "false")
        expect(stretched).to_contain_text("still too short for 700 tokens")
        set_slider(page, node, "#wall-stretch", 1024)  # past the token count
        expect(stretched).to_have_attribute("data-reads", "true")
        expect(stretched).to_contain_text("reads all 700 tokens")
        expect(result).to_contain_text("posenc raised PositionOutOfRangeError")  # the 512-row table still stops


def test_claim_only_the_learned_table_stops_past_512_with_chapter_sixs_message(browser, server):
    """Comparison: "slide the length from 512 to 576: only the learned table stops, with the same
    message as in chapter 6"."""
    from playwright.sync_api import expect

    context, page = new_page(browser, server, SIZES["desktop"])
    reads = """() => Object.fromEntries([...document.querySelectorAll('#cmp-table tbody tr')].map((tr) =>
      [tr.dataset.scheme, tr.querySelector('.live-reads').textContent]))"""
    try:
        node = open_chapter(page, server, "learned-tables")
        set_slider(page, node, "#wall-tokens", 576)
        message = page.locator("#wall-result pre.error-message").inner_text()
        node = open_chapter(page, server, "comparison")
        set_slider(page, node, "#cmp-len", 512)
        assert all(cell.startswith("✓") for cell in page.evaluate(reads).values())
        set_slider(page, node, "#cmp-len", 576)
        cells = page.evaluate(reads)
        assert {s for s, cell in cells.items() if cell.startswith("✗")} == {"learned"}
        stated = cells["learned"].split("✗ refused: ")[1]
        assert message.startswith(stated), (stated, message)
        expect(page.locator("#cmp-len-head")).to_have_text("576")
        assert page.problems == [], page.problems
    finally:
        context.close()


def test_claim_the_whole_table_flips_on_the_left_and_holds_on_the_right(browser, server):
    """Chapter 5, the whole table: "the leftmost columns change colour almost from one seat to the next;
    the rightmost keep one colour over all 65 seats", at every width; the line follows the chosen seat."""
    with watched_page(browser, server, SIZES["phone"]) as page:
        node = open_chapter(page, server, "clock-hands")
        heat = page.locator("#clock-heat")
        for width in ("64", "256", "16"):
            select_and_wait(page, node, "#clock-width", width)
            first, last = int(heat.get_attribute("data-flips-first")), int(heat.get_attribute("data-flips-last"))
            assert first > 15 and last == 0, (width, first, last)
            assert page.locator("#clock-heat svg image.heat-image").count() == 1
            assert page.locator("#clock-heat .sign-legend").count() == 1
        marker = "() => Number(document.querySelector('#clock-heat .seat-marker').getAttribute('y1'))"
        set_slider(page, node, "#clock-seat", 3)
        near = page.evaluate(marker)
        set_slider(page, node, "#clock-seat", 40)
        assert page.evaluate(marker) > near
        box = page.locator("#clock-heat svg").bounding_box()
        assert box["width"] <= SIZES["phone"][0]


# Where every word of a chapter breaks across lines: for each word (a run without white space, across
# inline elements), the text before each line break it takes, and whether it runs past its block.
WORD_BREAKS = r"""
(sel) => {
  const root = document.querySelector(sel);
  const blocks = [...root.querySelectorAll("p, li, pre, caption, figcaption, td, th, h2, h3, dd, dt")]
    .filter((b) => b.getClientRects().length && !b.closest("svg") && !b.querySelector("p, li, pre, td, figcaption"));
  const out = [];
  for (const block of blocks) {
    const chars = [];
    const walker = document.createTreeWalker(block, NodeFilter.SHOW_TEXT);
    for (let t = walker.nextNode(); t; t = walker.nextNode())
      for (let i = 0; i < t.data.length; i++) chars.push([t, i, t.data[i]]);
    const box = block.getBoundingClientRect();
    let word = [];
    const flush = () => {
      if (!word.length) return;
      const rects = word.map(([t, i]) => {
        const r = document.createRange();
        r.setStart(t, i);
        r.setEnd(t, i + 1);
        return r.getBoundingClientRect();
      });
      const text = word.map((w) => w[2]).join("");
      const breaks = [];
      rects.forEach((r, k) => {
        if (k && r.width && rects[k - 1].width && r.top > rects[k - 1].top + 2) breaks.push(text.slice(0, k));
      });
      const over = rects.some((r) => r.width && r.right > box.right + 0.5);
      if (breaks.length || over) out.push({ word: text, breaks, over, tag: block.tagName });
      word = [];
    };
    for (const c of chars) { if (/\s/.test(c[2])) flush(); else word.push(c); }
    flush();
  }
  return out;
}
"""


def test_chapter_six_breaks_long_identifiers_only_after_a_dot_or_a_bracket_on_a_phone(browser, server):
    """On a 390 px phone ch. 6 split ``LearnedPositionalEmbedding.extend(new_max_len)`` as "...(new_ma" /
    "x_len)", both in the error box and in the quoted error of the text. Now no word runs past its line,
    a word breaks only after '.', '(' or a hyphen, and the identifier only after '.' or '('."""
    from playwright.sync_api import expect

    with watched_page(browser, server, SIZES["phone"]) as page:
        open_chapter(page, server, "learned-tables")  # waits until the figure has drawn its result and error
        expect(page.locator("#wall-result .error-message")).to_contain_text("extend(new_max_len)")
        text = page.locator("#ch-learned-tables").inner_text()
        assert text.count("LearnedPositionalEmbedding.extend(new_max_len)") >= 2  # the error box and the quoted error
        words = page.evaluate(WORD_BREAKS, "#ch-learned-tables")
        assert [w for w in words if w["over"]] == []
        broken = [w for w in words if w["breaks"]]
        assert [w for w in broken if any(b[-1] not in ".(-" for b in w["breaks"])] == []
        identifier = [w for w in broken if "LearnedPositionalEmbedding.extend(" in w["word"]]
        assert identifier, "at 390 px the identifier takes more than one line; the test must see where it breaks"
        assert all(b[-1] in ".(" for w in identifier for b in w["breaks"]), identifier


# [name, dots] of each series of a line chart, in drawing order: a path starts a series, its circles follow.
SERIES_DOTS = """(sel) => { const out = [];
  for (const n of document.querySelectorAll(sel + ' g.series-layer > *')) {
    if (n.tagName === 'path') out.push([n.dataset.name, []]);
    else if (n.tagName === 'circle') out[out.length - 1][1].push([n.cx.baseVal.value, n.cy.baseVal.value]);
  }
  return out; }"""


def test_claim_every_stretched_row_lies_between_two_trained_ones(browser, server):
    """Chapter 6, the stretch figure: "the stretched table's rows placed at old seats (dots): every new
    row lies between two trained ones" -- on the drawn dots, at several stretches, and in posenc's numbers."""
    from posenc.teaching.lesson.chapters.learned_tables import learned_wall

    with watched_page(browser, server, SIZES["desktop"]) as page:
        node = open_chapter(page, server, "learned-tables")
        for stretch in (600, 1024, 4096):
            set_slider(page, node, "#wall-stretch", stretch)
            data = learned_wall(513, stretch)
            # posenc's own numbers: each new row between the trained rows on either side of its old seat
            for at, value in zip(data["new_at_old_scale"], data["new_values"]):
                i = data["old_positions"].index(math.floor(at)) if at < data["old_positions"][-1] else None
                if i is None:
                    assert value == pytest.approx(data["old_values"][-1], abs=1e-12)
                    continue
                low, high = sorted(data["old_values"][i : i + 2])
                assert low - 1e-12 <= value <= high + 1e-12, (stretch, at, value, low, high)
            # ... and the drawn dots: every stretched dot lies (in y) between the trained dots left and right of it
            dots = dict(page.evaluate(SERIES_DOTS, "#stretch-figure"))
            trained = next(v for k, v in dots.items() if k.startswith("original rows"))
            stretched = next(v for k, v in dots.items() if k.startswith("stretched rows"))
            assert len(trained) == len(data["old_values"]) and len(stretched) == len(data["new_values"])
            assert len(stretched) > len(trained)  # more rows drawn over the same seats
            for x, y in stretched:
                left = max((d for d in trained if d[0] <= x + 1e-6), key=lambda d: d[0])
                right = min((d for d in trained if d[0] >= x - 1e-6), key=lambda d: d[0])
                low, high = sorted((left[1], right[1]))
                assert low - 0.5 <= y <= high + 0.5, (stretch, x, y, left, right)


# Every pixel row of the heatmap image, read back from the image the page drew.
HEAT_ROWS = """async () => {
  const image = document.querySelector('#clock-heat image.heat-image');
  const img = new Image();
  img.src = image.getAttribute('href');
  await img.decode();
  const canvas = document.createElement('canvas');
  canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
  const ctx = canvas.getContext('2d');
  ctx.drawImage(img, 0, 0);
  const data = ctx.getImageData(0, 0, canvas.width, canvas.height).data, rows = [];
  const rowBytes = canvas.width * 4;
  for (let r = 0; r < canvas.height; r++) rows.push(Array.from(data.slice(r * rowBytes, (r + 1) * rowBytes)).join(','));
  return { width: canvas.width, rows };
}"""


def test_claim_no_two_rows_of_the_table_are_the_same_pattern(browser, server):
    """Chapter 5: "No two rows are the same pattern: rule 3, seen whole" -- the heatmap as drawn, one pixel
    per number, has as many different colour rows as the table has seats, at every width."""
    from posenc.teaching.lesson.chapters.clock_hands import clock_hands

    with watched_page(browser, server, SIZES["phone"]) as page:
        node = open_chapter(page, server, "clock-hands")
        for width in ("16", "64", "256"):
            select_and_wait(page, node, "#clock-width", width)
            table = clock_hands(3, int(width))["table"]
            heat = page.evaluate(HEAT_ROWS)
            assert heat["width"] == len(table[0]) == int(width) and len(heat["rows"]) == len(table), width
            assert len(set(heat["rows"])) == len(table), (width, len(set(heat["rows"])))


CLOCK_HANDS = """() => [...document.querySelectorAll('#clock-dials .dial-card')].map((card) => {
  const hand = card.querySelector('line.hand'), face = card.querySelector('g.clock > circle');
  return { speed: card.dataset.speed, cx: face.cx.baseVal.value, cy: face.cy.baseVal.value, r: face.r.baseVal.value,
    x1: hand.x1.baseVal.value, y1: hand.y1.baseVal.value, x2: hand.x2.baseVal.value, y2: hand.y2.baseVal.value };
})"""


WAVE_AXIS = """() => [...document.querySelectorAll('#clock-waves svg g.axis text[text-anchor="end"]')]
  .map((t) => [Number(t.textContent.replace('−', '-').replaceAll(',', '')), t.y.baseVal[0].value - 4])"""


def test_claim_each_hand_is_drawn_at_seat_times_frequency_with_its_tip_at_cos_sin(browser, server):
    """Chapter 5's caption: "three hands of the chosen seat, each drawn counter-clockwise from 3 o'clock by
    seat × frequency; the hand's tip is the pair's (cos, sin). Below, the sine wave of each hand over seats 0
    to 64: the dots are the table's values at whole seats" -- checked on the drawn hands and dots against
    posenc's sinusoidal table."""
    from posenc.sinusoidal import sinusoidal_frequencies, sinusoidal_table

    with watched_page(browser, server, SIZES["desktop"]) as page:
        node = open_chapter(page, server, "clock-hands")
        for width in ("16", "64"):
            select_and_wait(page, node, "#clock-width", width)
            d = int(width)
            freqs = sinusoidal_frequencies(d)
            pairs = {"fast": 0, "medium": max(1, d // 8), "slow": d // 2 - 1}  # as the chapter names them
            table = sinusoidal_table(65, d).double()  # (65, d)
            for seat in (3, 10, 64):
                set_slider(page, node, "#clock-seat", seat)
                row = sinusoidal_table(1, d, start=seat)[0].double()
                hands = {h["speed"]: h for h in page.evaluate(CLOCK_HANDS)}
                assert set(hands) == set(pairs)
                for speed, pair in pairs.items():
                    h = hands[speed]
                    assert (h["x1"], h["y1"]) == (h["cx"], h["cy"])  # from the centre
                    drawn = math.degrees(math.atan2(-(h["y2"] - h["cy"]), h["x2"] - h["cx"]))
                    assert wrap(drawn - math.degrees(seat * float(freqs[pair]))) == pytest.approx(0, abs=0.5)
                    length = math.hypot(h["x2"] - h["cx"], h["y2"] - h["cy"])
                    tip = ((h["x2"] - h["cx"]) / length, -(h["y2"] - h["cy"]) / length)
                    cos, sin = float(row[2 * pair + 1]), float(row[2 * pair])
                    assert tip == pytest.approx((cos, sin), abs=0.01), (speed, seat, tip)
            # the dots of each wave, read back through the chart's own axis, are the table's sine column
            ticks = page.evaluate(WAVE_AXIS)
            (v0, y0), (v1, y1) = ticks[0], ticks[-1]
            value = lambda y, v0=v0, y0=y0, v1=v1, y1=y1: v0 + (y - y0) * (v1 - v0) / (y1 - y0)  # noqa: E731
            dots = page.evaluate(SERIES_DOTS, "#clock-waves")
            drawn = [[value(y) for _, y in points] for name, points in dots if not name and points]
            assert len(drawn) == 3
            for speed, wave in zip(pairs, drawn):
                expected = table[:, 2 * pairs[speed]]
                assert len(wave) == 65 and wave == pytest.approx(expected.tolist(), abs=0.02), (width, speed)


def test_claim_one_token_is_written_in_the_singular(browser, server):
    from playwright.sync_api import expect

    with watched_page(browser, server, SIZES["desktop"]) as page:
        node = open_chapter(page, server, "learned-tables")
        set_slider(page, node, "#wall-tokens", 1)
        expect(page.locator("#wall-result")).to_contain_text("1 token: fine.")
        assert "1 tokens" not in node.inner_text()
        assert "1 token asked for" in page.locator("#wall-figure").inner_text()
        set_slider(page, node, "#wall-tokens", 513)
        expect(page.locator("#wall-result")).to_contain_text("513 tokens: posenc raised")
