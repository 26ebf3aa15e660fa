"""The claims of chapters 8 and 9 (stretching RoPE; ALiBi, a penalty for distance) in a real headless
Chromium: each test does what a sentence of the lesson says (a "try this", or a caption saying what a
figure shows) and asserts what the sentence claims, on the figure as drawn. Expected values come from
posenc (``posenc.teaching.lesson``) or from the page's own numbers, never from numbers copied off the page. The
server, browser and page helpers are ``conftest``'s and ``browser_support``'s; without Chromium these
tests skip (or fail with ``POSENC_REQUIRE_BROWSER=1``).
"""

from __future__ import annotations

import math
import re

import pytest
from browser_support import SIZES, open_chapter, select_and_wait, set_slider, settled, watched_page

from posenc.teaching.lesson import palette
from posenc.teaching.lesson.manifest import CHAPTERS

pytestmark = pytest.mark.slow

IDS = [c.id for c in CHAPTERS]


def test_claim_alibi_is_taught_before_it_is_checked(browser, server):
    """The ALiBi chapter: slopes 1/2 ... 1/256 for 8 heads, head 0 adds −5 to a key 10 seats back, and
    at 64 seats the steep head keeps its attention near while the shallow one spreads it."""
    from playwright.sync_api import expect

    taught = IDS.index("alibi-penalty")
    checked = next(i for i, c in enumerate(CHAPTERS) if "alibi-head0" in c.checks)
    assert taught <= checked
    with watched_page(browser, server, SIZES["phone"]) as page:
        node = open_chapter(page, server, "alibi-penalty")
        expect(page.locator("#alibi-table tbody tr")).to_have_count(8)
        slopes = page.eval_on_selector_all(
            "#alibi-table tbody tr td:nth-child(2)", "(ns) => ns.map((n) => n.textContent)"
        )
        assert slopes == [f"1/{2**k}" for k in range(1, 9)]
        assert page.locator("#alibi-table tr[data-head='0'] td.bias").inner_text() == "−5.0000"
        assert page.locator("#alibi-chart svg.chart").count() == 1
        assert page.locator("#alibi-weights svg.chart").count() == 1
        # the check comes after the figure in the chapter
        assert page.evaluate(
            """() => { const f = document.getElementById('alibi-chart'), c = document.getElementById('lq-alibi-head0');
              return !!c && !!(f.compareDocumentPosition(c) & Node.DOCUMENT_POSITION_FOLLOWING); }"""
        )
        set_slider(page, node, "#alibi-distance", 64)
        near = [
            float(t)
            for t in page.eval_on_selector_all(
                "#alibi-table tbody tr td:nth-child(4)", "(ns) => ns.map((n) => n.textContent)"
            )
        ]
        far = [
            float(t)
            for t in page.eval_on_selector_all(
                "#alibi-table tbody tr td:nth-child(5)", "(ns) => ns.map((n) => n.textContent)"
            )
        ]
        assert near[0] > 0.35 and far[0] < 1e-3  # steep: attention stays on the nearest words
        assert far[-1] > 0.4 * near[-1]  # shallow: spread out


def test_claim_pairs_past_training_are_defined_and_point_the_right_way(browser, server):
    """Chapter 8: plain RoPE puts every partial-turn pair past training, linear and YaRN none, NTK-aware
    most of the slow pairs; only a zero gets a tick."""
    from posenc.teaching.lesson.chapters.stretching_rope import stretching

    with watched_page(browser, server, SIZES["phone"]) as page:
        node = open_chapter(page, server, "stretching-rope")
        assert "past training" in node.locator("#def-past-training").inner_text()
        set_slider(page, node, "#str-factor", 4)
        trained = int(page.locator("#str-train").input_value())
        expected = {m["method"]: m["pairs_past_training"] for m in stretching(4.0, trained, 128)["methods"]}
        shown = {}
        for method in expected:
            row = page.locator(f"#str-table tr[data-method='{method}']")
            shown[method] = int(row.get_attribute("data-past"))
            cell = row.locator("td").last.inner_text()
            assert cell.startswith("✓") == (shown[method] == 0), (method, cell)
        assert shown == expected
        assert shown["linear"] == 0 == shown["yarn"] and shown["ntk"] > 0 and shown["rope"] > shown["ntk"]


def test_claim_chapter_eight_opens_on_the_setup_its_text_measures(browser, server):
    """Chapter 8's figure and table open on the head its measured text describes (trained on TRAINED,
    stretched FACTOR x), so the NTK count the text states is the one the table shows at first sight."""
    from playwright.sync_api import expect

    from posenc.teaching.lesson import chapters
    from posenc.teaching.lesson.chapters.stretching_rope import FACTOR, TRAINED

    n = chapters.numbers("stretching-rope")
    with watched_page(browser, server, SIZES["phone"]) as page:
        node = open_chapter(page, server, "stretching-rope")
        caption = page.locator("#str-table caption")
        expect(caption).to_contain_text(f"Stretching {TRAINED} to {int(TRAINED * FACTOR)} tokens (factor {FACTOR:g})")
        assert page.locator("#str-train").input_value() == str(TRAINED)
        for method in ("linear", "ntk"):
            shown = int(page.locator(f"#str-table tr[data-method='{method}']").get_attribute("data-past"))
            assert shown == n[f"extension.{method}.unseen_pairs"], method
        ntk = len(n["extension.ntk.unseen_indices"])
        assert ntk > 0 and f"{ntk} pairs" in " ".join(node.inner_text().split())


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
    from posenc.teaching.lesson.chapters.stretching_rope import stretching

    with watched_page(browser, server, SIZES["desktop"]) as page:
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
    from posenc.teaching.lesson.chapters import alibi_penalty

    with watched_page(browser, server, SIZES["desktop"]) as page:
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


def test_claim_sixteen_alibi_heads_have_a_legend_and_slopes_written_alike(browser, server):
    from posenc.teaching.lesson.chapters.alibi_penalty import alibi_penalty

    with watched_page(browser, server, SIZES["phone"]) as page:
        node = open_chapter(page, server, "alibi-penalty")
        renders = node.get_attribute("data-renders")
        page.locator("#alibi-heads").select_option("16")
        from playwright.sync_api import expect

        expect(node).not_to_have_attribute("data-renders", renders, timeout=20_000)
        settled(node)
        expected = [r["slope_text"] for r in alibi_penalty(16, 10)["rows"]]
        items = page.eval_on_selector_all("#alibi-chart .legend-item", "(ns) => ns.map((n) => n.dataset.name)")
        assert items == [f"head {h}: slope {t}" for h, t in enumerate(expected)]
        shown = page.eval_on_selector_all(
            "#alibi-table tbody tr td:nth-of-type(1)", "(ns) => ns.map((n) => n.textContent)"
        )
        assert shown == expected and not any(t.startswith("1/") for t in shown)


Y_AXIS = """() => { const texts = [...document.querySelectorAll('#str-chart svg text')];
  const title = texts.find((t) => t.classList.contains('axis-label') && t.getAttribute('transform'));
  const ticks = texts.filter((t) => !t.classList.contains('axis-label') && t.getAttribute('text-anchor') === 'end'
    && Number(t.getAttribute('x')) < 70);
  const box = (t) => { const b = t.getBoundingClientRect(); return [b.left, b.right, b.top, b.bottom]; };
  return { title: box(title), ticks: ticks.map((t) => [t.textContent, ...box(t)]) }; }"""


@pytest.mark.parametrize("size", ["phone", "desktop"])
def test_claim_the_wavelength_axis_is_written_one_way_and_its_title_clears_the_ticks(browser, server, size):
    """Chapter 8's log axis of wavelengths, at factor 8 and at factor 64: every tick label in one form (no
    "1e6" beside "100,000"), each reading back its decade, and none under the axis title."""
    import re

    with watched_page(browser, server, SIZES[size]) as page:
        node = open_chapter(page, server, "stretching-rope")
        for factor in (8, 64):
            set_slider(page, node, "#str-factor", factor)
            axis = page.evaluate(Y_AXIS)
            labels = [t[0] for t in axis["ticks"]]
            assert len(labels) >= 3, labels
            forms = {"exponent" if re.fullmatch(r"\d(\.\d+)?e−?\d+", t) else "plain" for t in labels}
            assert len(forms) == 1, labels
            values = [float(t.replace("−", "-").replace(",", "")) for t in labels]
            assert all(abs(math.log10(v) - round(math.log10(v))) < 1e-9 for v in values), labels  # decades
            left, right, top, bottom = axis["title"]
            for text, t_left, t_right, t_top, t_bottom in axis["ticks"]:
                apart = t_left >= right or t_right <= left or t_top >= bottom or t_bottom <= top
                assert apart, (factor, text, (t_left, t_right), (left, right))
