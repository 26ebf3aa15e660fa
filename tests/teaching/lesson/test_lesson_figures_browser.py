"""Figures that say what they draw, in a real headless Chromium against a real ``posenc explore`` server:
a legend shows each series' dash as well as its colour, ALiBi's neighbouring heads look different, bar
charts have round ticks and a title saying what is measured, and chapter 13's drift grows on one axis.

The browser is the system Chromium, or ``$POSENC_CHROMIUM`` (Playwright never downloads one). Without
it these tests skip, unless ``POSENC_REQUIRE_BROWSER=1`` (set in CI) turns the skip into a failure.
"""

from __future__ import annotations

import math

import pytest
from browser_support import hex_of, open_chapter, set_slider
from palette_support import delta_e

pytestmark = pytest.mark.slow


# Each legend item of a line chart beside the series of the same name: stroke and dasharray of both.
LEGEND = """(sel) => {
  const holder = document.querySelector(sel), series = {};
  for (const p of holder.querySelectorAll('path.series')) if (p.dataset.name)
    series[p.dataset.name] = [p.getAttribute('stroke'), p.getAttribute('stroke-dasharray')];
  return [...holder.querySelectorAll('.legend .legend-item')].map((item) => {
    const line = item.querySelector('line');
    return { name: item.textContent, series: series[item.textContent] || null,
      swatch: line ? [line.getAttribute('stroke'), line.getAttribute('stroke-dasharray')] : null };
  });
}"""

#: (chapter, chart) of every lesson line chart with a legend, and whether one of its series is dashed
LEGENDS = (
    ("clock-hands", "#clock-waves"),
    ("learned-tables", "#stretch-figure"),
    ("stretching-rope", "#str-chart"),
    ("alibi-penalty", "#alibi-chart"),
    ("alibi-penalty", "#alibi-weights"),
)


@pytest.mark.parametrize("chapter,chart", LEGENDS, ids=[c for _, c in LEGENDS])
def test_each_legend_swatch_is_drawn_in_its_series_colour_and_dash(page, server, chapter, chart):
    """Legend swatches were solid blocks: chapter 8's dashed linear scaling and chapter 9's dashed odd
    heads had solid swatches, so the legend could not tell the dashed curve apart."""
    open_chapter(page, server, chapter)
    page.wait_for_selector(f"{chart} .legend .legend-item")
    items = page.evaluate(LEGEND, chart)
    assert items, chart
    for item in items:
        assert item["series"] is not None, item  # a legend item names a drawn series
        assert item["swatch"] is not None, item  # ... and draws a stretch of its line
        (s_colour, s_dash), (w_colour, w_dash) = item["series"], item["swatch"]
        assert hex_of(w_colour) == hex_of(s_colour), item
        assert w_dash == s_dash, item
    if chart in ("#str-chart", "#alibi-chart", "#clock-waves"):
        assert any(item["swatch"][1] for item in items), items  # a dashed series shows dashed in the legend


HEAD_STROKES = """() => [...document.querySelectorAll('#alibi-chart path.series')]
  .map((p) => [p.dataset.name, p.getAttribute('stroke'), p.getAttribute('stroke-dasharray')])"""


def test_neighbouring_alibi_heads_look_different(page, server):
    """Chapter 9 drew heads 0 and 1 (and 2 and 3 ...) in near-identical purples (ΔE 16 for 8 heads):
    neighbours now differ in dash and by at least 20 in ΔE, and the ramp runs steepest to gentlest."""
    from playwright.sync_api import expect

    node = open_chapter(page, server, "alibi-penalty")
    for heads in ("8", "4"):
        if page.locator("#alibi-heads").input_value() != heads:
            before = node.get_attribute("data-renders")
            page.locator("#alibi-heads").select_option(heads)
            expect(node).not_to_have_attribute("data-renders", before, timeout=20_000)
        drawn = page.evaluate(HEAD_STROKES)
        assert len(drawn) == int(heads)
        colours = [hex_of(c) for _, c, _ in drawn]
        for h in range(len(drawn) - 1):
            assert drawn[h][2] != drawn[h + 1][2], (h, drawn[h], drawn[h + 1])
            assert delta_e(colours[h], colours[h + 1]) >= 20, (h, colours[h], colours[h + 1])
        # one ramp, dark to light: lightness grows from head to head
        light = [sum(int(c[i : i + 2], 16) for i in (1, 3, 5)) for c in colours]
        assert light == sorted(light), colours


# A bar chart's (hbars) tick labels, their values, the axis title and the bars: values and drawn widths.
HBARS = """(sel) => {
  const s = document.querySelector(sel + ' svg');
  return { ticks: [...s.querySelectorAll('.hbar-axis text.tick')].map((t) => [t.textContent, Number(t.dataset.value)]),
    title: (s.querySelector('.hbar-axis .axis-title') || {}).textContent || null,
    bars: [...s.querySelectorAll('rect.bar')].map((r) => [Number(r.dataset.value), r.getBoundingClientRect().width]) };
}"""


def parse_tick(label: str) -> float:
    return float(label.replace("−", "-").replace(",", ""))


def assert_round_ticks(ticks):
    """Ticks from 0 in one step of 1, 2 or 5 × 10^k, each label reading back as its tick."""
    values = [parse_tick(label) for label, _ in ticks]
    assert len(values) >= 2 and values[0] == 0, ticks
    step = values[1] - values[0]
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert any(mantissa == pytest.approx(m, rel=1e-9) for m in (1, 2, 5)), (step, ticks)
    for k, (label, value) in enumerate(ticks):
        assert parse_tick(label) == pytest.approx(k * step, rel=1e-9, abs=step * 1e-9), ticks
        assert value == pytest.approx(k * step, rel=1e-9, abs=step * 1e-9), ticks
    assert len({label for label, _ in ticks}) == len(ticks), ticks


#: (chapter, bar chart, words its axis title must hold)
BAR_CHARTS = (
    ("bad-ideas", "#raw-figure", "cosine"),
    ("common-mistakes", "#mis-param", "change"),
    ("common-mistakes", "#mis-cat", "parameters"),
    ("common-mistakes", "#mis-v", "change"),
)


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_every_bar_chart_has_round_ticks_and_says_what_it_measures(page, phone, server, size):
    """Bar axes read 0.000 / 0.832 / 1.664 and 0.000000 / 0.500000 / 1.000000 (the value format at 0,
    half and the top) and none said what it measures."""
    pg = page if size == "desktop" else phone
    for chapter, chart, words in BAR_CHARTS:
        open_chapter(pg, server, chapter)
        pg.wait_for_selector(f"{chart} .hbar-axis text.tick")
        drawn = pg.evaluate(HBARS, chart)
        assert_round_ticks(drawn["ticks"])
        assert drawn["title"] and words in drawn["title"], (chart, drawn["title"])
        top = drawn["ticks"][-1][1]
        assert all(v <= top * (1 + 1e-9) for v, _ in drawn["bars"]), (chart, drawn)


#: the largest value handed to a bar chart: the axis ends at the first round tick at or past it
BAR_TOPS = (1.0, 1.664, 0.0501, 0.1008, 16_640, 3.7e-4, 7)


def test_bar_chart_ticks_are_round_for_any_top(page, server):
    from playwright.sync_api import expect

    page.goto(server)
    expect(page.locator("body")).to_be_visible()
    for width in (900, 300):
        drawn = page.evaluate(
            """async ([tops, width]) => {
          const { hbars } = await import('/static/charts.js');
          return tops.map((top) => {
            const holder = document.createElement('div');
            holder.style.width = width + 'px';
            document.body.appendChild(holder);
            hbars(holder, [{ label: 'a', value: top / 3 }, { label: 'b', value: top }], { label: 'what is measured' });
            const s = holder.querySelector('svg');
            const out = { ticks: [...s.querySelectorAll('.hbar-axis text.tick')]
                .map((t) => [t.textContent, Number(t.dataset.value)]),
              title: s.querySelector('.hbar-axis .axis-title').textContent,
              widths: [...s.querySelectorAll('rect.bar')].map((r) => Number(r.getAttribute('width'))),
              room: Number(s.querySelector('.hbar-axis line.axis').getAttribute('x2')) };
            holder.remove();
            return out;
          });
        }""",
            [list(BAR_TOPS), width],
        )
        for top, out in zip(BAR_TOPS, drawn):
            assert_round_ticks(out["ticks"])
            assert out["title"] == "what is measured"
            end = out["ticks"][-1][1]
            assert top <= end * (1 + 1e-9) and end < 2.5 * top, (top, out["ticks"])  # the first round tick past it
            # linear: a bar's width is its share of the axis
            assert out["widths"][1] == pytest.approx(out["room"] * top / end, rel=1e-6), (top, out)
            assert out["widths"][0] == pytest.approx(out["widths"][1] / 3, rel=1e-6), (top, out)


def test_claim_the_parameter_table_drifts_on_one_axis(page, server):
    """Chapter 13: "take more optimizer steps and watch the parameter table drift". The axis rescaled
    to each drift, so from 5 steps on the bar stayed at full width (149 px, 746 px, 746 px): the
    drift seemed to stop. The bar now grows from 1 to 5 to 10 steps on one unchanged axis."""
    node = open_chapter(page, server, "common-mistakes")
    seen = []
    for steps in (1, 5, 10):
        set_slider(page, node, "#mis-steps", steps)
        drawn = page.evaluate(HBARS, "#mis-param")
        (buffer, buffer_w), (parameter, parameter_w) = drawn["bars"]
        assert buffer == 0 and buffer_w < 1.5
        seen.append((parameter, parameter_w, [t for t, _ in drawn["ticks"]]))
    (v1, w1, t1), (v5, w5, t5), (v10, w10, t10) = seen
    assert t1 == t5 == t10, seen  # one axis
    assert v1 < v5 < v10 and w1 < w5 < w10, seen  # the drawn width grows with the drift
    assert w5 / w1 == pytest.approx(v5 / v1, rel=0.02) and w10 / w1 == pytest.approx(v10 / v1, rel=0.02)
    assert "past the axis" not in page.locator("#mis-param").inner_text()


# Every text of the figures under ``sel`` whose drawn box leaves its SVG's box.
TEXT_OUTSIDE = """(sel) => {
  const out = [];
  for (const s of document.querySelectorAll(sel + ' svg')) {
    const box = s.getBoundingClientRect();
    for (const t of s.querySelectorAll('text')) {
      const b = t.getBoundingClientRect();
      if (!t.textContent.trim() || !b.width) continue;
      if (b.left < box.left - 0.5 || b.right > box.right + 0.5 || b.top < box.top - 0.5 || b.bottom > box.bottom + 0.5)
        out.push([t.textContent, b.left - box.left, b.right - box.left, box.width]);
    }
  }
  return out;
}"""


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_claim_the_ruler_keeps_every_label_whole(page, phone, server, size):
    """Chapter 3, "try 100 words": the ruler's first label started left of the figure (−5 px at 100
    words, −9 px at 1000), so "0.000" lost its leading 0 behind the SVG's edge."""
    pg = page if size == "desktop" else phone
    node = open_chapter(pg, server, "bad-ideas")
    for words in (100, 1000, 4):
        set_slider(pg, node, "#frac-len", words)
        labels = pg.eval_on_selector_all("#frac-figure .tick-label", "(ns) => ns.map((n) => n.textContent)")
        assert labels and labels[0].startswith("0"), labels
        assert pg.evaluate(TEXT_OUTSIDE, "#frac-figure") == [], words


DIAL_CARDS = """() => [...document.querySelectorAll('#rope-dials .dial-row')].map((row) => ({
  row: row.getBoundingClientRect().width,
  cards: [...row.querySelectorAll('.dial-card')].map((c) => {
    const first = c.querySelector('.dial-text');
    return { width: c.getBoundingClientRect().width, text: first.textContent,
      lines: first.getBoundingClientRect().height / parseFloat(getComputedStyle(first).lineHeight) };
  }) }))"""


def test_rope_dial_cards_use_their_row_and_keep_theta_on_one_line(page, server):
    """Chapter 7 at 1440 px: four 130 px cards used under half the panel and "pair 0: θ = 57.30°/seat"
    wrapped onto two lines."""
    open_chapter(page, server, "rope")
    page.wait_for_selector("#rope-dials .dial-card")
    rows = page.evaluate(DIAL_CARDS)
    assert len(rows) == 2
    for row in rows:
        assert len(row["cards"]) == 4
        assert sum(c["width"] for c in row["cards"]) > 0.85 * row["row"], row
        for card in row["cards"]:
            assert card["text"].startswith("pair ") and "θ =" in card["text"], card
            assert card["lines"] < 1.5, card  # one line


PAIR_ARCS = """() => [...document.querySelectorAll('#pairs-figure path.pair-arc')].map((p) => ({
  row: p.classList.contains('half') ? 'half' : 'interleaved', pair: Number(p.dataset.pair),
  dash: p.getAttribute('stroke-dasharray'), bottom: p.getBoundingClientRect().bottom }))"""
PAIR_LABELS = """() => [...document.querySelectorAll('#pairs-figure text.pair-label')].map((t) => {
  const b = t.getBoundingClientRect(); return [t.textContent, b.left, b.right, b.top, b.bottom]; })"""


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_the_half_split_arcs_can_each_be_followed_to_their_pair(page, phone, server, size):
    """Chapter 7's pair picture drew four identical half-split arcs that cross, so on a phone p0 … p3
    could not be matched to their arcs. Each pair now has its own dash in both rows, and each
    half-split arc its own depth; no two pair labels overlap."""
    pg = page if size == "desktop" else phone
    open_chapter(pg, server, "rope")
    pg.wait_for_selector("#pairs-figure path.pair-arc")
    arcs = pg.evaluate(PAIR_ARCS)
    half = [a for a in arcs if a["row"] == "half"]
    inter = [a for a in arcs if a["row"] == "interleaved"]
    assert len(half) == len(inter) == 4
    assert len({a["dash"] for a in half}) == 4, half  # a dash per pair ...
    assert {a["pair"]: a["dash"] for a in half} == {a["pair"]: a["dash"] for a in inter}  # ... the same in both rows
    bottoms = sorted(a["bottom"] for a in half)
    assert all(b - a > 5 for a, b in zip(bottoms, bottoms[1:])), bottoms  # each at a depth of its own
    labels = pg.evaluate(PAIR_LABELS)
    assert len(labels) == 8
    for i, (ta, l1, r1, t1, b1) in enumerate(labels):
        for tb, l2, r2, t2, b2 in labels[i + 1 :]:
            assert not (l1 < r2 and l2 < r1 and t1 < b2 and t2 < b1), (ta, tb)


def test_attention_maps_are_titled_with_the_menus_names(page, server):
    """Chapter 14's attention cards were titled with scheme ids ("nope · untrained", "rope")."""
    open_chapter(page, server, "big-picture")
    page.wait_for_selector("#attn-maps .attn-card svg")
    menu = dict(page.eval_on_selector_all("#big-scheme option", "(ns) => ns.map((n) => [n.value, n.textContent])"))
    cards = page.eval_on_selector_all(
        "#attn-maps .attn-card",
        "(ns) => ns.map((n) => [n.dataset.scheme, n.dataset.source, n.querySelector('svg text').textContent])",
    )
    assert len(cards) == len(menu)
    for scheme, source, title in cards:
        assert title == f"{menu[scheme]} · {source}", (scheme, title)
    assert "none (NoPE) · " in [t[: len("none (NoPE) · ")] for _, _, t in cards]
