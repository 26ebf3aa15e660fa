"""The claims of chapter 7 (RoPE: turn, don't add) in a real headless Chromium: each test does what a
sentence of the lesson says (a "try this", or a caption saying what a figure shows) and asserts what the
sentence claims, on the figure as drawn. Expected values come from posenc (``posenc.teaching.lesson``) or from the
page's own numbers, never from numbers copied off the page. The server, browser and page helpers are
``conftest``'s and ``browser_support``'s; without Chromium these tests skip (or fail with
``POSENC_REQUIRE_BROWSER=1``).
"""

from __future__ import annotations

import math
import re

import pytest
from browser_support import SIZES, new_page, number, open_chapter, set_slider, watched_page, wrap

pytestmark = pytest.mark.slow


def hand_angles(page, selector):
    """``data-hand-deg`` of every element matching ``selector``, in page order."""
    return page.eval_on_selector_all(selector, "(ns) => ns.map((n) => Number(n.dataset.handDeg))")


def test_claim_moving_both_seats_turns_every_hand_and_keeps_the_score(browser, server):
    """Chapter 7: "drag move both by: every hand turns, yet the score under the dials stays the same"."""
    with watched_page(browser, server, SIZES["desktop"]) as page:
        node = open_chapter(page, server, "rope")
        set_slider(page, node, "#rope-shift", 100)
        before = hand_angles(page, "#rope-dials .dial-card")
        score = page.locator("#rope-score").inner_text()
        set_slider(page, node, "#rope-shift", 500)
        after = hand_angles(page, "#rope-dials .dial-card")
        assert len(before) == len(after) == 8
        turned = [abs(((a - b + 180) % 360) - 180) for a, b in zip(after, before)]
        assert all(t > 1e-3 for t in turned), f"hands that did not turn: {turned}"
        assert page.locator("#rope-score").inner_text() == score
        assert re.fullmatch(r"−?\d+\.\d{7}", score), score


def test_claim_who_bit_whom_is_plus_then_minus_30_degrees_on_four_dials(browser, server):
    """Chapter 7: seats 0-3 at 0°, 30°, 60°, 90°; dog to bit is +30° in A and −30° in B."""
    from playwright.sync_api import expect

    with watched_page(browser, server, SIZES["phone"]) as page:
        open_chapter(page, server, "rope")
        expect(page.locator("#order-turn")).to_have_text("+30°")
        assert hand_angles(page, "#order-figure .clock") == [0, 30, 60, 90]
        words = page.eval_on_selector_all("#order-figure .clock", "(ns) => ns.map((n) => n.dataset.word)")
        assert words == ["the", "dog", "bit", "man"]
        button = page.locator("#order-rotate")
        assert "sentence B" in button.inner_text()
        button.click()
        expect(page.locator("#order-turn")).to_have_text("−30°")
        words = page.eval_on_selector_all("#order-figure .clock", "(ns) => ns.map((n) => n.dataset.word)")
        assert words == ["the", "man", "bit", "dog"]
        assert "sentence A" in button.inner_text()


def test_claim_both_pair_conventions_and_the_complex_view_give_one_score(browser, server):
    """Chapter 7: half-split pairs x_i with x_i+4 and interleaved x_2i with x_2i+1 (the arcs); the same
    query and key score the same under both once the rows are reordered, as complex numbers, and from
    the gap alone; moving both seats keeps all four."""
    context, page = new_page(browser, server, SIZES["phone"])
    arcs = """(cls) => [...document.querySelectorAll('#pairs-figure .pair-arc.' + cls)]
      .map((n) => [Number(n.dataset.a), Number(n.dataset.b)])"""
    scores = """() => Object.fromEntries([...document.querySelectorAll('#pairs-table tbody tr')]
      .map((tr) => [tr.dataset.way, Number(tr.dataset.score)]))"""
    try:
        node = open_chapter(page, server, "rope")
        page.locator("#pairs-table tbody tr").first.wait_for()
        assert page.evaluate(arcs, "half") == [[i, i + 4] for i in range(4)]
        assert page.evaluate(arcs, "interleaved") == [[2 * i, 2 * i + 1] for i in range(4)]
        first = page.evaluate(scores)
        assert set(first) == {"half", "interleaved", "complex", "gap"}
        assert max(first.values()) - min(first.values()) < 1e-12, first
        set_slider(page, node, "#rope-shift", 400)  # waits until every figure has drawn the new seats
        moved = page.evaluate(scores)
        assert all(abs(moved[k] - first[k]) < 1e-9 for k in first), (first, moved)
        assert "seats 403 and 401" in page.locator("#pairs-table caption").inner_text()
        assert page.problems == [], page.problems
    finally:
        context.close()


def test_claim_the_plane_turns_the_vector_by_m_theta_counter_clockwise_and_keeps_its_length(browser, server):
    """Chapter 7, the 2x2 matrix: "the dashed grey arrow is the vector before the turn, the blue one after
    it; the arc is the turn m·θ", counter-clockwise for a positive angle, and a turn never stretches."""
    import math

    context, page = new_page(browser, server, SIZES["desktop"])
    hands = """() => ['.ghost-hand', '.hand'].map((c) => { const n = document.querySelector('#rot-plane ' + c);
      return ['x1', 'y1', 'x2', 'y2'].map((k) => Number(n.getAttribute(k))); })"""
    try:
        node = open_chapter(page, server, "rope")
        for seat, theta in ((2, 30), (3, -20), (5, 50)):
            set_slider(page, node, "#rot-theta", theta)
            set_slider(page, node, "#rot-seat", seat)
            before, after = page.evaluate(hands)
            angle = lambda h: math.atan2(-(h[3] - h[1]), h[2] - h[0])  # noqa: E731  (SVG y points down)
            length = lambda h: math.hypot(h[2] - h[0], h[3] - h[1])  # noqa: E731
            turned = (math.degrees(angle(after) - angle(before)) + 180) % 360 - 180
            expected = (seat * theta + 180) % 360 - 180
            assert turned == pytest.approx(expected, abs=0.5), (seat, theta, turned)
            assert length(after) == pytest.approx(length(before), rel=1e-3)
            assert f"m·θ = {seat} × {theta}°".replace("-", "−") in page.locator("#rot-matrix").inner_text().replace(
                "-", "−"
            )
        assert page.problems == [], page.problems
    finally:
        context.close()


ORDER_SCORE = re.compile(r"score of “bit” looking at “dog”: with RoPE (\S+); without positions (\S+)")


def test_claim_who_bit_whoms_score_is_printed_under_the_dials_for_each_sentence(browser, server):
    """Chapter 7: "the score is 0.67942 in A and 0.87942 in B, the score the “Who bit whom?” dials print under
    them for the sentence they show". Worked out by hand: "bit" at seat 2 queries "dog" at seat 1 (A) or 3 (B),
    the lesson's q and k turned 30 degrees per seat; the page prints that score under the dials for each
    sentence, and the same to five decimals in the sentence."""
    from playwright.sync_api import expect

    from posenc.teaching.lesson.rotation import KEY, QUERY

    def turned(v, seat):
        a = math.radians(30.0) * seat
        return (v[0] * math.cos(a) - v[1] * math.sin(a), v[0] * math.sin(a) + v[1] * math.cos(a))

    q = turned(QUERY, 2)
    by_hand = {}
    for name, dog in (("A", 1), ("B", 3)):
        k = turned(KEY, dog)
        by_hand[name] = q[0] * k[0] + q[1] * k[1]
    with watched_page(browser, server, SIZES["phone"]) as page:
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


# A line's direction in degrees, counter-clockwise from 3 o'clock (SVG's y axis points down).
LINE_DEG = (
    "(n) => Math.atan2(-(n.y2.baseVal.value - n.y1.baseVal.value), n.x2.baseVal.value - n.x1.baseVal.value)"
    " * 180 / Math.PI"
)


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
    from posenc.rope.tables import rope_inv_freq
    from posenc.teaching.lesson.palette import ROLE_COLOURS

    theta = [math.degrees(float(t)) for t in rope_inv_freq(8, 10000.0)]
    with watched_page(browser, server, SIZES["phone"]) as page:
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


PROOF_ROWS = """() => [...document.querySelectorAll('#rope-proof tr')].map((tr) =>
  [...tr.querySelectorAll('td')].map((td) => td.textContent))"""


def test_claim_turning_only_the_key_back_by_the_gap_gives_the_same_score(browser, server):
    """Chapter 7, the proof box: q′·k′ at seats m and n, the key alone turned back by the gap m − n, and
    both moved by the shift print one score, posenc's, and the unturned q·k another."""
    from posenc.teaching.lesson.chapters.rope import rope_clock

    with watched_page(browser, server, SIZES["desktop"]) as page:
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

    from posenc.teaching.lesson.chapters.rope import ORDER_SENTENCES
    from posenc.teaching.lesson.palette import ROLE_COLOURS

    with watched_page(browser, server, SIZES["desktop"]) as page:
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


FOUR_WAYS = """() => Object.fromEntries([...document.querySelectorAll('#pairs-table tbody tr')].map((tr) =>
  [tr.dataset.way, tr.querySelector('td').textContent]))"""


def test_claim_one_score_four_ways_is_the_score_under_the_dials(browser, server):
    """Chapter 7: "one query and key (seats m + move and n + move of the dials above) scored four ways by
    posenc" -- each of the four scores is the score printed under the dials, at every setting of the dials'
    sliders, and the table's caption names the dials' seats."""
    from playwright.sync_api import expect

    from posenc.teaching.lesson.chapters.rope import rope_clock

    with watched_page(browser, server, SIZES["desktop"]) as page:
        node = open_chapter(page, server, "rope")
        caption = node.locator("[data-prose='pairs-caption']").inner_text()
        assert "seats m + move and n + move of the dials above" in caption
        for m, n, shift in ((3, 1, 100), (5, 30, 250), (40, 0, 0)):
            set_slider(page, node, "#rope-m", m)
            set_slider(page, node, "#rope-n", n)
            set_slider(page, node, "#rope-shift", shift)
            expect(page.locator("#pairs-table caption")).to_have_text(
                f"One query and key at seats {m + shift} and {n + shift}, scored four ways"
            )
            under_dials = page.locator("#rope-score").inner_text()
            expected = rope_clock(8, m, n, shift)["score_shifted"]
            assert number(under_dials) == pytest.approx(expected, abs=5e-8)
            ways = page.evaluate(FOUR_WAYS)
            assert set(ways) == {"half", "interleaved", "complex", "gap"}
            for way, shown in ways.items():
                assert number(shown) == pytest.approx(expected, abs=5e-10), (way, shown)
                assert f"{number(shown):.7f}" == f"{number(under_dials):.7f}", (way, shown, under_dials)


MEASURED_TABLES = """() => [...document.querySelectorAll('#ch-rope [data-prose="measured"] table')].map((t) =>
  [t.caption.textContent, [...t.rows].map((tr) => [...tr.cells].map((c) => c.textContent))])"""


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_claim_the_measured_gap_is_query_seat_minus_key_seat_and_angles_are_in_degrees(browser, server, size):
    """Chapter 7, "Measured": the gap column is m − n, the query's seat minus the key's ("the gap is m − n
    everywhere in posenc"), printed with the page's minus sign; the who-bit-whom table writes its angles
    as 30° and its turns as +30° and −30°, as the dials' readout does."""
    from playwright.sync_api import expect

    with watched_page(browser, server, SIZES[size]) as page:
        open_chapter(page, server, "rope")
        tables = dict(page.evaluate(MEASURED_TABLES))
        (seats,) = [rows for caption, rows in tables.items() if caption.startswith("The score of one pair")]
        header, *rows = seats
        assert header[:3] == ["query seat m", "key seat n", "gap m − n"]
        for m, n, gap, *_ in rows:
            assert gap.startswith("−") and number(gap) == int(m) - int(n), (m, n, gap)
        (order,) = [rows for caption, rows in tables.items() if caption.startswith("Who bit whom")]
        assert [row[-1] for row in order[1:]] == ["+30°", "−30°"]
        assert all(cell.endswith("°") for row in order[1:] for cell in row[3:])
        assert "deg" not in " ".join(cell for row in order for cell in row)
        expect(page.locator("#order-turn")).to_have_text("+30°")


SPAN = """(selectors) => { const boxes = selectors.map((s) => document.querySelector(s).getBoundingClientRect());
  return [Math.min(...boxes.map((b) => b.top)), Math.max(...boxes.map((b) => b.bottom))]; }"""


DIALS_VIEW = ["#ch-rope [data-prose='dials-try']", "#rope-shift", "#rope-dials", "#rope-score"]


@pytest.mark.parametrize("size", ["phone", "desktop"])
def test_claim_move_both_the_dials_and_the_score_fit_one_screen(browser, server, size):
    """Chapter 7's "drag move both by: every hand turns, yet the score under the dials stays the same": the
    sentence, the slider it names, the dials and the score fit in one viewport height, at 390×844 and at
    1440×900, so the reader sees every hand turn and the score hold while dragging; and they do so after
    the slider is moved."""
    width, height = SIZES[size]
    with watched_page(browser, server, SIZES[size]) as page:
        node = open_chapter(page, server, "rope")
        sentence = node.locator("[data-prose='dials-try']").inner_text()
        assert "move both by" in sentence and "the score under the dials stays the same" in sentence
        for shift in (100, 500):
            set_slider(page, node, "#rope-shift", shift)
            page.locator(DIALS_VIEW[0]).scroll_into_view_if_needed()
            page.evaluate("(s) => document.querySelector(s).scrollIntoView({block: 'start'})", DIALS_VIEW[0])
            top, bottom = page.evaluate(SPAN, DIALS_VIEW)
            assert bottom - top <= height, (size, shift, top, bottom)
            assert top >= -1 and bottom <= height, (size, shift, top, bottom)  # all of it on screen at once
            cards = page.eval_on_selector_all(
                "#rope-dials .dial-card svg", "(ns) => ns.map((n) => n.getBoundingClientRect().width)"
            )
            assert len(cards) == 8 and min(cards) >= 55, cards  # every clock drawn, none squeezed to nothing
            overflow = page.evaluate(
                "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            assert overflow <= 0, overflow


def test_claim_the_matrix_at_ninety_degrees_prints_zero_and_one(browser, server):
    """Chapter 7's 2×2 matrix: three seats of 30° is a quarter turn, the matrix [[0, −1], [1, 0]]; the page
    prints 0.000 and ±1.000, not the 6.1e-17 of a cosine computed from a rounded pi."""
    with watched_page(browser, server, SIZES["desktop"]) as page:
        node = open_chapter(page, server, "rope")
        set_slider(page, node, "#rot-seat", 3)
        cells = page.eval_on_selector_all("#rot-matrix table.matrix td", "(ns) => ns.map((n) => n.textContent)")
        assert cells[:2] == ["0.000", "−1.000"] and cells[6:8] == ["1.000", "0.000"], cells
        text = page.locator("#rot-matrix").inner_text()
        assert "e-" not in text and "e−" not in text, text
        assert "m·θ = 3 × 30° = 90.0°" in text
