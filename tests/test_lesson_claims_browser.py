"""More claim tests of the lesson in a real headless Chromium: each does what a sentence of the lesson
says (a "try this", or a caption saying what a figure shows) and asserts what the sentence claims, on
the figure as drawn. Expected values come from posenc (``posenc.lesson``) or from the page's own
numbers, never from numbers copied off the page. The server, browser and page helpers are those of
``test_lesson_browser``; like those tests these skip without Chromium (or fail with
``POSENC_REQUIRE_BROWSER=1``).
"""

from __future__ import annotations

import math
import re

import pytest
from browser_support import chromium_or_skip, explore_server, headless_chromium
from test_lesson_browser import SIZES, new_page, open_chapter, select_and_wait, set_slider

from posenc.lesson import palette

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


# A line's direction in degrees, counter-clockwise from 3 o'clock (SVG's y axis points down).
LINE_DEG = (
    "(n) => Math.atan2(-(n.y2.baseVal.value - n.y1.baseVal.value), n.x2.baseVal.value - n.x1.baseVal.value)"
    " * 180 / Math.PI"
)


def wrap(degrees: float) -> float:
    """``degrees`` folded into [-180, 180)."""
    return (degrees + 180.0) % 360.0 - 180.0


# -- chapter 6: the stretched table ----------------------------------------------------------------------
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
    from posenc.lesson.chapters.learned_tables import learned_wall

    context, page = new_page(browser, server, SIZES["desktop"])
    try:
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
        assert page.problems == [], page.problems
    finally:
        context.close()


# -- chapter 7: the dials, the proof box and who bit whom -------------------------------------------------
DIAL_CARDS = f"""() => [...document.querySelectorAll('#rope-dials .dial-row')].flatMap((row) =>
  [...row.querySelectorAll('.dial-card')].map((card) => {{
    const deg = {LINE_DEG};
    const arc = card.querySelector('path.turn-arc');
    return {{ who: row.dataset.who, pair: Number(card.dataset.pair), turn: Number(card.dataset.turnDeg),
      ghost: deg(card.querySelector('line.ghost-hand')), solid: deg(card.querySelector('line.hand')),
      solidColour: card.querySelector('line.hand').getAttribute('stroke'),
      arc: arc ? arc.getAttribute('d') : null }};
  }}))"""


def arc_ends(path: str) -> tuple[float, float, int, int]:
    """The start and end direction (degrees, counter-clockwise) of a ``M c L x0,y0 A r,r 0 large dir x1,y1 Z``
    wedge, with its large-arc and sweep flags."""
    cx, cy, x0, y0, _, _, _, large, sweep, x1, y1 = (float(v) for v in re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", path))
    start = math.degrees(math.atan2(-(y0 - cy), x0 - cx))
    end = math.degrees(math.atan2(-(y1 - cy), x1 - cx))
    return start, end, int(large), int(sweep)


def test_claim_the_dials_draw_the_pair_before_and_after_its_turn_by_seat_times_theta(browser, server):
    """Chapter 7, the dials: "top row: the query's pairs at seat m plus the move; bottom row: the key's at
    seat n plus the move. Dashed grey: before; solid: after; shaded: the turn (shown modulo 360°)": the
    solid hand is the ghost turned by (seat + move)·θᵢ, with θᵢ posenc's RoPE frequencies of an 8-wide
    head, and the wedge spans that turn counter-clockwise, folded into one turn."""
    from posenc.lesson.palette import ROLE_COLOURS
    from posenc.rope.tables import rope_inv_freq

    theta = [math.degrees(float(t)) for t in rope_inv_freq(8, 10000.0)]
    context, page = new_page(browser, server, SIZES["phone"])
    try:
        node = open_chapter(page, server, "rope")
        for m, n, shift in ((3, 1, 100), (7, 12, 0), (40, 0, 333)):
            set_slider(page, node, "#rope-m", m)
            set_slider(page, node, "#rope-n", n)
            set_slider(page, node, "#rope-shift", shift)
            cards = page.evaluate(DIAL_CARDS)
            assert [c["who"] for c in cards] == ["q"] * 4 + ["k"] * 4
            for card in cards:
                seat = (m if card["who"] == "q" else n) + shift
                turn = seat * theta[card["pair"]]
                assert card["turn"] == pytest.approx(turn, abs=1e-9), card
                assert wrap(card["solid"] - card["ghost"] - turn) == pytest.approx(0, abs=0.5), (m, n, shift, card)
                assert card["solidColour"] == ROLE_COLOURS["query" if card["who"] == "q" else "key"]
                folded = turn % 360
                if folded < 1e-6 or folded > 360 - 1e-6:
                    continue  # a whole number of turns: nothing to shade
                start, end, large, sweep = arc_ends(card["arc"])
                assert wrap(start - card["ghost"]) == pytest.approx(0, abs=0.5), card
                assert wrap(end - start - folded) == pytest.approx(0, abs=0.5), card
                assert sweep == 0 and large == (folded > 180), card  # counter-clockwise, the short or long way
        assert page.problems == [], page.problems
    finally:
        context.close()


PROOF_ROWS = """() => [...document.querySelectorAll('#rope-proof tr')].map((tr) =>
  [...tr.querySelectorAll('td')].map((td) => td.textContent))"""


def test_claim_turning_only_the_key_back_by_the_gap_gives_the_same_score(browser, server):
    """Chapter 7, the proof box: q′·k′ at seats m and n, the key alone turned back by the gap m − n, and
    both moved by the shift print one score, posenc's, and the unturned q·k another."""
    from posenc.lesson.chapters.rope import rope_clock

    context, page = new_page(browser, server, SIZES["desktop"])
    try:
        node = open_chapter(page, server, "rope")
        for m, n, shift in ((3, 1, 100), (5, 30, 250)):
            set_slider(page, node, "#rope-m", m)
            set_slider(page, node, "#rope-n", n)
            set_slider(page, node, "#rope-shift", shift)
            rows = page.evaluate(PROOF_ROWS)

            def value(start, rows=rows):
                (found,) = [right for left, right in rows if left.startswith(start)]
                return float(found.replace("−", "-"))

            both = value(f"with m = {m}, n = {n}: q′ · k′ =")
            gap = value(f"only the key turned, back by the gap (m − n = {m - n}")
            moved = value(f"both moved by {shift} (m = {m + shift}, n = {n + shift})")
            plain = value("no turn at all (q · k)")
            expected = rope_clock(8, m, n, shift)
            assert both == pytest.approx(expected["score"], abs=1e-9)
            assert gap == pytest.approx(both, abs=2e-9) and moved == pytest.approx(both, abs=2e-9)
            assert abs(plain - both) > 1e-3  # the turn matters; only the gap is left of it
            assert page.locator("#rope-score").inner_text().replace("−", "-") == f"{expected['score_shifted']:.7f}"
        assert page.problems == [], page.problems
    finally:
        context.close()


ORDER_DIALS = f"""() => [...document.querySelectorAll('#order-figure g.clock')].map((g) => {{
  const deg = {LINE_DEG};
  const hand = g.querySelector('line.hand');
  return {{ word: g.dataset.word, drawn: deg(hand), colour: hand.getAttribute('stroke'),
    ghost: deg(g.querySelector('line.ghost-hand')) }};
}})"""
ORDER_WORDS = (
    "(w) => [...document.querySelectorAll('#order-figure g.clock')].map((g) => g.dataset.word).join(' ') === w"
)
WORD_LABELS = """() => Object.fromEntries([...document.querySelectorAll('#order-figure svg text')]
  .filter((t) => /^“.*”$/.test(t.textContent)).map((t) => [t.textContent.slice(1, -1), t.getAttribute('fill')]))"""


def test_claim_dog_wears_the_keys_colour_and_bit_the_querys_at_any_angle(browser, server):
    """Chapter 7, who bit whom: "one dial per seat: each word's hand at seat × θ, counter-clockwise from 3
    o'clock (dashed: the unturned hand at 0°). "dog" is drawn in the key's colour and "bit" in the
    query's" -- the dials' colours, at several degrees per seat and in both sentences, with the turn from
    "dog" to "bit" equal to (seat of bit − seat of dog)·θ."""
    from playwright.sync_api import expect

    from posenc.lesson.chapters.rope import ORDER_SENTENCES
    from posenc.lesson.palette import ROLE_COLOURS

    context, page = new_page(browser, server, SIZES["desktop"])
    try:
        node = open_chapter(page, server, "rope")
        query_colour = page.locator("#rope-dials .dial-row[data-who='q'] line.hand").first.get_attribute("stroke")
        key_colour = page.locator("#rope-dials .dial-row[data-who='k'] line.hand").first.get_attribute("stroke")
        assert (query_colour, key_colour) == (ROLE_COLOURS["query"], ROLE_COLOURS["key"])
        # the words are written in the page's text shade of each role colour (palette.js's PAL)
        key_text, query_text = page.evaluate(
            "async () => { const p = await import('/static/palette.js'); return [p.PAL.keyText, p.PAL.queryText]; }"
        )
        for sentence, text in enumerate(ORDER_SENTENCES):
            if sentence:
                page.locator("#order-rotate").click()
                expect(page.locator("#order-rotate")).to_have_attribute("aria-pressed", "true")
            words = text.split()
            for degrees in (30, 45, 80):
                set_slider(page, node, "#order-deg", degrees)
                page.wait_for_function(ORDER_WORDS, arg=text)
                dials = page.evaluate(ORDER_DIALS)
                assert [d["word"] for d in dials] == words
                for seat, dial in enumerate(dials):
                    assert wrap(dial["drawn"] - seat * degrees) == pytest.approx(0, abs=0.5), (degrees, dial)
                    assert dial["ghost"] == pytest.approx(0, abs=1e-6)
                colours = {d["word"]: d["colour"] for d in dials}
                assert colours["dog"] == key_colour and colours["bit"] == query_colour, colours
                assert colours["the"] not in (key_colour, query_colour)
                labels = page.evaluate(WORD_LABELS)
                assert (labels["dog"], labels["bit"]) == (key_text, query_text), labels
                assert labels["the"] not in (key_text, query_text)
                turn = (words.index("bit") - words.index("dog")) * degrees
                shown = page.locator("#order-turn").inner_text().replace("−", "-").rstrip("°")
                assert float(shown) == pytest.approx(turn), (text, degrees, shown)
        assert page.problems == [], page.problems
    finally:
        context.close()


# -- chapter 8: stretching RoPE ---------------------------------------------------------------------------
STRETCH_CHART = """() => { const s = document.querySelector('#str-chart svg');
  const num = (t) => Number(t.replace('−', '-').replaceAll(',', ''));
  const yTicks = [...s.querySelectorAll('g.axis text[text-anchor="end"]')]
    .map((t) => [num(t.textContent), t.y.baseVal[0].value - 4]);
  const series = Object.fromEntries([...s.querySelectorAll('path.series')].map((p) => [p.dataset.name,
    [...p.getAttribute('d').matchAll(/[ML](-?[\\d.]+),(-?[\\d.]+)/g)].map((m) => [Number(m[1]), Number(m[2])])]));
  const dashed = [...s.querySelectorAll('line.marker-line')].map((l) => ({ y: l.y1.baseVal.value,
    flat: l.y1.baseVal.value === l.y2.baseVal.value, dash: l.getAttribute('stroke-dasharray') }));
  const label = [...s.querySelectorAll('text.axis-label')].map((t) => t.textContent);
  return { yTicks, series, dashed, label }; }"""
STRETCH_ROWS = """() => Object.fromEntries([...document.querySelectorAll('#str-table tbody tr')].map((tr) =>
  [tr.dataset.method, { past: Number(tr.dataset.past),
    cells: [...tr.querySelectorAll('td')].map((td) => td.textContent) }]))"""
#: each method's label: its scaling's one label in the palette (plain RoPE is the "default" type)
NAMES = {
    m: palette.SCALING_LABELS[t]
    for m, t in (("rope", "default"), ("linear", "linear"), ("ntk", "ntk"), ("yarn", "yarn"))
}


def test_claim_each_scaling_moves_the_pairs_as_the_chapter_says_on_a_log_axis(browser, server):
    """Chapter 8: "plain RoPE puts every pair that turned less than once in training past it; linear
    scaling and YaRN put none there; NTK-aware ... still leaves most of the slow pairs past training.
    Linear ... its fastest θ is divided by the factor"; the list: linear slows every pair by the factor,
    NTK-aware keeps the fastest pair and slows the slowest by the full factor, YaRN leaves fast pairs
    alone, slows the slow ones by the full factor and sharpens attention (a factor above 1); the
    caption: wavelengths on a log scale, dashed lines at the trained and the stretched length."""
    from posenc.lesson.chapters.stretching_rope import stretching

    context, page = new_page(browser, server, SIZES["desktop"])
    try:
        node = open_chapter(page, server, "stretching-rope")
        for train, factor in (("8192", 4), ("2048", 8), ("32768", 2)):
            select_and_wait(page, node, "#str-train", train)
            set_slider(page, node, "#str-factor", factor)
            expected = stretching(float(factor), int(train), 128)
            partial = int(
                re.search(r"(\d+) of \d+ pairs turned less than once", page.locator("#str-table caption").inner_text())[
                    1
                ]
            )
            assert partial == expected["partial_turn_pairs"] > 0
            rows = page.evaluate(STRETCH_ROWS)
            # "every" partial-turn pair, "none", "most of the slow pairs"
            assert rows["rope"]["past"] == partial, (train, factor, rows["rope"])
            assert rows["linear"]["past"] == 0 == rows["yarn"]["past"]
            assert partial / 2 < rows["ntk"]["past"] <= partial, (train, factor, rows["ntk"])
            # the fastest θ (rad/seat) as printed: divided by the factor for linear only
            fastest = {m: float(r["cells"][0]) for m, r in rows.items()}
            assert fastest["linear"] == pytest.approx(1 / factor, abs=5e-5)
            assert fastest["rope"] == fastest["ntk"] == fastest["yarn"] == pytest.approx(1.0, abs=5e-5)
            attention = {m: float(r["cells"][1]) for m, r in rows.items()}
            yarn = next(m for m in expected["methods"] if m["method"] == "yarn")["attention_factor"]
            assert attention["yarn"] > 1 and attention["yarn"] == pytest.approx(yarn, abs=5e-5)
            assert {attention[m] for m in ("rope", "linear", "ntk")} == {1.0}

            chart = page.evaluate(STRETCH_CHART)
            # a log axis: the tick labels are powers of ten, equally spaced on the page
            ticks = chart["yTicks"]
            assert len(ticks) >= 3 and "wavelength (seats)" in chart["label"]
            exponents = [math.log10(v) for v, _ in ticks]
            assert all(e == pytest.approx(round(e), abs=1e-9) for e in exponents), ticks
            per_decade = (ticks[0][1] - ticks[-1][1]) / (exponents[-1] - exponents[0])
            y0, e0 = ticks[0][1], exponents[0]
            for (_, y), e in zip(ticks, exponents):
                assert y == pytest.approx(y0 - (e - e0) * per_decade, abs=0.6), ticks
            # two flat dashed lines, at the trained and the stretched length
            lines = sorted(chart["dashed"], key=lambda d: -d["y"])
            assert len(lines) == 2 and all(d["flat"] and d["dash"] for d in lines), lines
            for line, seats in zip(lines, (int(train), int(train) * factor)):
                assert line["y"] == pytest.approx(y0 - (math.log10(seats) - e0) * per_decade, abs=0.6), (line, seats)
            # each curve against plain RoPE's, in decades: log10(factor) means slowed by the full factor
            rope = chart["series"][NAMES["rope"]]
            slowed = {
                m: [(y0 - y) / per_decade for (_, y0), (_, y) in zip(rope, chart["series"][NAMES[m]])]
                for m in ("linear", "ntk", "yarn")
            }
            full = math.log10(factor)
            assert all(s == pytest.approx(full, abs=0.01) for s in slowed["linear"]), slowed["linear"]
            for m in ("ntk", "yarn"):
                assert slowed[m][0] == pytest.approx(0, abs=0.01) and slowed[m][-1] == pytest.approx(full, abs=0.01)
                assert all(-0.01 <= s <= full + 0.01 for s in slowed[m]), (m, slowed[m])
        assert page.problems == [], page.problems
    finally:
        context.close()


# -- chapter 14: who attends to whom ------------------------------------------------------------------------
ATTN_CARDS = """() => [...document.querySelectorAll('#attn-maps .attn-card')].map((card) => {
  const cells = [...card.querySelectorAll('rect.attn-cell')].map((c) => ({ q: Number(c.dataset.q),
    k: Number(c.dataset.k), w: Number(c.dataset.w), shade: Number(c.getAttribute('fill-opacity')) }));
  const steps = [...card.querySelectorAll('rect:not(.attn-cell)')].filter((r) => r.hasAttribute('fill-opacity'))
    .map((r) => [r.x.baseVal.value, Number(r.getAttribute('fill-opacity'))]).sort((a, b) => a[0] - b[0]);
  const texts = [...card.querySelectorAll('svg text')].map((t) => t.textContent);
  const at = texts.indexOf('attention weight');
  const tops = [...card.querySelectorAll('.attn-top')].map((n) => [Number(n.dataset.q), Number(n.dataset.k)]);
  return { scheme: card.dataset.scheme, cells, legend: steps.map((s) => s[1]), ends: texts.slice(at + 1, at + 3),
    tops };
})"""


def attention_cards(page, node, text):
    from playwright.sync_api import expect

    if page.locator("#attn-text").input_value() != text:
        renders = node.get_attribute("data-renders")
        page.locator("#attn-text").fill(text)
        expect(node).not_to_have_attribute("data-renders", renders, timeout=20_000)
        page.wait_for_timeout(200)
    return {card["scheme"]: card for card in page.evaluate(ATTN_CARDS)}


def test_claim_the_shade_scale_spans_the_pages_weights_lightest_to_darkest(browser, server):
    """Chapter 14: "all shaded on one scale, from the smallest weight on the page (lightest) to the largest
    (darkest), as the legend under each grid says"."""
    context, page = new_page(browser, server, SIZES["desktop"])
    try:
        node = open_chapter(page, server, "big-picture")
        for text in ("the dog bit the man", "a cat saw a dog"):
            cards = attention_cards(page, node, text)
            cells = [c for card in cards.values() for c in card["cells"]]
            low, high = min(c["w"] for c in cells), max(c["w"] for c in cells)
            lightest, darkest = min(cells, key=lambda c: c["shade"]), max(cells, key=lambda c: c["shade"])
            assert lightest["w"] == low and darkest["w"] == high, (lightest, darkest)
            # one scale for every grid: a larger weight is never lighter, whichever grid it is in
            ordered = sorted(cells, key=lambda c: c["w"])
            assert all(a["shade"] <= b["shade"] + 1e-9 for a, b in zip(ordered, ordered[1:]))
            assert darkest["shade"] > 5 * lightest["shade"]  # the scale is stretched, not a narrow band
            for scheme, card in cards.items():
                legend = card["legend"]
                assert len(legend) >= 10 and legend == sorted(legend), (scheme, legend)  # light on the left
                assert lightest["shade"] <= legend[0] and legend[-1] <= darkest["shade"] + 1e-9, (scheme, legend)
                assert card["ends"] == [f"{low:.2f}", f"{high:.2f}"], (scheme, card["ends"], low, high)
        assert page.problems == [], page.problems
    finally:
        context.close()


def test_claim_position_changes_where_each_word_looks(browser, server):
    """Chapter 14: "Position changes more than an output: it changes where each word looks": against none, a
    positional scheme moves some weight by more than a tenth of the page's shade scale and moves at least
    one ring (the word a row attends to most); on the trained maps ALiBi moves its weights less than every
    other scheme."""
    context, page = new_page(browser, server, SIZES["phone"])
    try:
        node = open_chapter(page, server, "big-picture")
        for text in ("the dog bit the man", "a cat saw a dog"):
            cards = attention_cards(page, node, text)
            cells = [c for card in cards.values() for c in card["cells"]]
            scale = max(c["w"] for c in cells) - min(c["w"] for c in cells)
            none = cards.pop("nope")
            nope = {(c["q"], c["k"]): c["w"] for c in none["cells"]}
            change = {s: max(abs(c["w"] - nope[c["q"], c["k"]]) for c in card["cells"]) for s, card in cards.items()}
            assert set(change) == {"sinusoidal", "learned", "rope", "alibi"}
            assert max(change.values()) > 0.1 * scale, (text, change, scale)
            # the rings as drawn: row q's ring on column k
            nope_rings = sorted(none["tops"])
            rings = {s: sorted(card["tops"]) for s, card in cards.items()}
            assert len(nope_rings) == len(text.split()) and all(len(r) == len(nope_rings) for r in rings.values())
            moved = {s: sum(a != b for a, b in zip(r, nope_rings)) for s, r in rings.items()}
            assert max(moved.values()) >= 1, (text, moved)
            assert change["alibi"] < min(v for s, v in change.items() if s != "alibi"), (text, change)
        assert page.problems == [], page.problems
    finally:
        context.close()


# -- chapters 2, 3 and 5: lengths, the sine band, the table's rows ---------------------------------------------
def test_claim_the_position_vector_always_has_length_root_half_d(browser, server):
    """Chapter 2: "a sine/cosine position vector always has length √(d/2) (2.83 at width 16, at every seat
    ...)": the drawn position bars, the figure's label and the printed numbers, at every width and
    several seats."""
    context, page = new_page(browser, server, SIZES["phone"])
    try:
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
        assert page.problems == [], page.problems
    finally:
        context.close()


def test_claim_the_sine_code_keeps_dog_and_man_in_one_band_at_every_seat(browser, server):
    """Chapter 3: "the sine code pulls "dog" and "man" together too, from about 0.2 to somewhere between 0.2
    and 0.8, depending on the seat ... the similarity stays in one band at every seat (printed under that
    figure)": at several seats the sine bar lies in the printed band, the band is the same at every seat,
    is posenc's over every seat of the slider, and the note's rounded numbers are the figure's."""
    from posenc.lesson.chapters.bad_ideas import bad_ideas

    context, page = new_page(browser, server, SIZES["desktop"])
    values = "(ns) => ns.map((n) => Number(n.dataset.value))"
    try:
        node = open_chapter(page, server, "bad-ideas")
        note = node.locator("#sine-pull").inner_text()
        about, low_said, high_said = (
            float(v)
            for v in re.search(r"from about ([\d.]+) to somewhere between ([\d.]+) and ([\d.]+)", note).groups()
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
            assert round(words, 1) == about and sine > words  # the pull is towards each other
            sines.append(sine)
        assert len(bands) == 1  # one band at every seat
        assert max(sines) - min(sines) > 0.1  # ... and the seat moves the similarity inside it
        (band,) = bands
        assert (round(float(band[0]), 1), round(float(band[1]), 1)) == (low_said, high_said), (band, note)
        assert page.problems == [], page.problems
    finally:
        context.close()


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
    from posenc.lesson.chapters.clock_hands import clock_hands

    context, page = new_page(browser, server, SIZES["phone"])
    try:
        node = open_chapter(page, server, "clock-hands")
        for width in ("16", "64", "256"):
            select_and_wait(page, node, "#clock-width", width)
            table = clock_hands(3, int(width))["table"]
            heat = page.evaluate(HEAT_ROWS)
            assert heat["width"] == len(table[0]) == int(width) and len(heat["rows"]) == len(table), width
            assert len(set(heat["rows"])) == len(table), (width, len(set(heat["rows"])))
        assert page.problems == [], page.problems
    finally:
        context.close()


# -- on a phone: table cells never print over each other ------------------------------------------------------
CELL_OVERLAP = """(id) => { const hit = []; let cells = 0;
  for (const table of document.querySelectorAll('#ch-' + id + ' table')) {
    const boxes = [...table.querySelectorAll('td, th, caption')].flatMap((cell, ci) => {
      const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT), out = [];
      cells += 1;
      while (walk.nextNode()) {
        if (!walk.currentNode.textContent.trim()) continue;
        const range = document.createRange();
        range.selectNodeContents(walk.currentNode);
        for (const b of range.getClientRects()) if (b.width > 0) out.push([ci, walk.currentNode.textContent.trim(), b]);
      }
      return out; });
    boxes.forEach(([ca, ta, a], i) => boxes.slice(i + 1).forEach(([cb, tb, b]) => {
      if (ca !== cb && a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1)
        hit.push(`${ta.slice(0, 30)} / ${tb.slice(0, 30)}`);
    }));
  }
  return { cells, hit }; }"""


def test_no_table_cell_prints_over_another_on_a_phone(browser, server):
    """Every table of every chapter at 390x844 (the wavelengths table once printed its cells over each other):
    no two cells' text boxes overlap."""
    from test_lesson_browser import IDS

    context, page = new_page(browser, server, SIZES["phone"])
    try:
        crowded, cells = {}, 0
        for chapter in IDS:
            open_chapter(page, server, chapter)
            page.wait_for_timeout(400)  # the chapter's tables are filled by its figures
            found = page.evaluate(CELL_OVERLAP, chapter)
            cells += found["cells"]
            if found["hit"]:
                crowded[chapter] = found["hit"][:5]
        assert cells > 100  # the tables were there to check
        assert crowded == {}, crowded
        assert page.problems == [], page.problems
    finally:
        context.close()


# -- chapter 5: the clock hands as drawn --------------------------------------------------------------------
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

    context, page = new_page(browser, server, SIZES["desktop"])
    try:
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
        assert page.problems == [], page.problems
    finally:
        context.close()


# -- chapter 9: ALiBi's two charts -----------------------------------------------------------------------------
# A line chart's tick labels (value, position on the page) on each axis, and each series' points, in SVG units.
CHART_READ = """(sel) => { const s = document.querySelector(sel + ' svg');
  const num = (t) => Number(t.textContent.replace('−', '-').replaceAll(',', ''));
  const ticks = (anchor, at) => [...s.querySelectorAll(`g.axis text[text-anchor="${anchor}"]:not(.axis-label)`)]
    .map((t) => [num(t), at(t)]);
  return { x: ticks('middle', (t) => t.x.baseVal[0].value), y: ticks('end', (t) => t.y.baseVal[0].value - 4),
    series: [...s.querySelectorAll('path.series')].map((p) => [p.dataset.name,
      [...p.getAttribute('d').matchAll(/[ML](-?[\\d.]+),(-?[\\d.]+)/g)]
        .map((m) => [Number(m[1]), Number(m[2])])]) }; }"""


def linear_axis(ticks):
    """Page position -> value on a linear axis, from its tick labels (which must be evenly spaced)."""
    (v0, p0), (v1, p1) = ticks[0], ticks[-1]
    for v, p in ticks:
        assert p == pytest.approx(p0 + (v - v0) * (p1 - p0) / (v1 - v0), abs=0.6), ticks  # linear, not log
    return lambda p: v0 + (p - p0) * (v1 - v0) / (p1 - p0)


def test_claim_alibis_bias_is_a_straight_line_per_head_and_the_weights_follow_from_it(browser, server):
    """Chapter 9's caption: "Top: the bias each head adds to a key's score, against how far behind the query
    the key sits (linear axes) ... Bottom: the attention weights of the steepest and the shallowest head when
    every key matches the query equally well" -- each drawn bias line is −slope × distance with posenc's
    slopes, on linear axes, and the drawn weights are the softmax of posenc's alibi_bias; at 64 seats the
    steep head keeps nearly all of it on the nearest words and the shallow one spreads it, by the chapter's
    numbers."""
    import torch

    from posenc.alibi import alibi_bias, alibi_slopes
    from posenc.lesson.chapters import alibi_penalty

    context, page = new_page(browser, server, SIZES["desktop"])
    try:
        node = open_chapter(page, server, "alibi-penalty")
        for heads in ("4", "8", "16"):
            select_and_wait(page, node, "#alibi-heads", heads)
            slopes = alibi_slopes(int(heads))
            for distance in (alibi_penalty.DISTANCE, alibi_penalty.FAR):
                set_slider(page, node, "#alibi-distance", distance)
                top = page.evaluate(CHART_READ, "#alibi-chart")
                x, y = linear_axis(top["x"]), linear_axis(top["y"])
                assert len(top["series"]) == int(heads)
                spread = float(slopes[0]) * distance
                for (name, points), slope in zip(top["series"], slopes.tolist()):
                    assert name.startswith(f"head {top['series'].index([name, points])}:"), name
                    assert len(points) == distance + 1
                    for px, py in points:
                        assert y(py) == pytest.approx(-slope * x(px), abs=0.01 * spread), (heads, distance, name)
                bias = alibi_bias(slopes, torch.tensor([distance]), torch.arange(distance + 1))[:, 0]  # (heads, keys)
                weights = torch.softmax(bias, dim=-1).flip(-1)  # nearest key first, as the chart reads
                bottom = page.evaluate(CHART_READ, "#alibi-weights")
                x, y = linear_axis(bottom["x"]), linear_axis(bottom["y"])
                assert [name.split(" (")[0] for name, _ in bottom["series"]] == ["head 0", f"head {int(heads) - 1}"]
                drawn = [[y(py) for _, py in points] for _, points in bottom["series"]]
                for got, want in zip(drawn, (weights[0], weights[-1])):
                    assert got == pytest.approx(want.tolist(), abs=0.01 * float(weights.max())), (heads, distance)
                if heads == str(alibi_penalty.HEADS) and distance == alibi_penalty.FAR:
                    n = alibi_penalty.numbers()
                    steep, shallow = drawn
                    near = alibi_penalty.NEAREST
                    assert sum(steep[:near]) == pytest.approx(n["alibi.far.steep_nearest"], abs=0.02)
                    assert sum(shallow[:near]) == pytest.approx(n["alibi.far.shallow_nearest"], abs=0.02)
                    assert max(shallow) / min(shallow) == pytest.approx(n["alibi.far.shallow_spread"], rel=0.03)
        assert page.problems == [], page.problems
    finally:
        context.close()


# -- chapters 10 and 13: the comparison's live columns, values turned at any shift -------------------------------
CMP_ROWS = """() => Object.fromEntries([...document.querySelectorAll('#cmp-table tbody tr')].map((tr) =>
  [tr.dataset.scheme, [tr.querySelector('td[data-label="extra trainable numbers"]').textContent,
    tr.querySelector('.live-reads').textContent]]))"""


def test_claim_the_comparison_counts_each_schemes_extra_trainable_numbers(browser, server):
    """Chapter 10's table, the live columns: each scheme's extra trainable numbers and what it does with the
    length, as posenc builds the schemes (only the learned table has trainable numbers, and only it stops)."""
    from posenc.lesson.chapters.comparison import compare

    context, page = new_page(browser, server, SIZES["desktop"])
    try:
        node = open_chapter(page, server, "comparison")
        for length in (64, 512, 576, 4096):
            set_slider(page, node, "#cmp-len", length)
            shown = page.evaluate(CMP_ROWS)
            expected = {row["scheme"]: row for row in compare(length)["schemes"]}
            assert set(shown) == set(expected)
            for scheme, (params, reads) in shown.items():
                assert int(params.replace(",", "")) == expected[scheme]["extra_parameters"], (length, scheme, params)
                assert reads == expected[scheme]["says"], (length, scheme, reads)
                assert reads.startswith("✗") == (not expected[scheme]["reads"]), (length, scheme, reads)
            assert {s for s, row in expected.items() if row["extra_parameters"]} == {"learned"}
        assert page.problems == [], page.problems
    finally:
        context.close()


def test_claim_moving_the_phrase_changes_nothing_with_q_k_turned_and_something_with_v(browser, server):
    """Chapter 13, turning values: "shift every position by the same amount and the output must not change"
    with q and k turned (drawn as a zero bar, rounding), while with v turned too it does -- at any move of the
    slider, with posenc's numbers."""
    from posenc.lesson.mistakes import ROUNDING_LEVEL, rotated_values_change

    values = """() => [...document.querySelectorAll('#mis-v rect.bar')].map((r) => ({ value: Number(r.dataset.value),
      rounding: r.dataset.rounding === 'true', width: r.getBoundingClientRect().width }))"""
    context, page = new_page(browser, server, SIZES["phone"])
    try:
        node = open_chapter(page, server, "common-mistakes")
        top = int(page.locator("#mis-shift").get_attribute("max"))
        for shift in (1, 37, top):
            set_slider(page, node, "#mis-shift", shift)
            right, wrong = page.evaluate(values)
            expected = rotated_values_change(shift)
            assert right["value"] == pytest.approx(expected["qk_only"], abs=1e-15) and right["value"] <= ROUNDING_LEVEL
            assert right["rounding"] and right["width"] == 0, (shift, right)
            assert (
                wrong["value"] == pytest.approx(expected["with_v"], rel=1e-9) and wrong["value"] > 1e3 * ROUNDING_LEVEL
            )
            assert not wrong["rounding"] and wrong["width"] > 0, (shift, wrong)
        assert page.problems == [], page.problems
    finally:
        context.close()
