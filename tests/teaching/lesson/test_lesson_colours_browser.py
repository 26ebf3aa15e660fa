"""One visual language across the lesson and the workbench, in a real headless Chromium against a real
``posenc explore`` server: a scheme or a scaling is drawn in its one palette colour in every figure,
and in one dash pattern, the sign map never appears without its legend, the workbench lists the checks
in the lesson's reading order, a log axis draws an exact zero on a row labelled as zero, and every tick
label of an axis reads back as its own tick.

The browser is the system Chromium, or ``$POSENC_CHROMIUM`` (Playwright never downloads one). Without
it these tests skip, unless ``POSENC_REQUIRE_BROWSER=1`` (set in CI) turns the skip into a failure.
"""

from __future__ import annotations

import math

import pytest
from browser_support import hex_of, open_section

from posenc.teaching.lesson import palette
from posenc.teaching.lesson.manifest import CHAPTERS

pytestmark = pytest.mark.slow


def check_and_wait(page, node, selector):
    from playwright.sync_api import expect

    before = node.get_attribute("data-renders")
    page.locator(selector).check()
    expect(node).not_to_have_attribute("data-renders", before)


SERIES_STROKES = """(sel) => Object.fromEntries([...document.querySelectorAll(sel + ' path.series[data-key]')]
  .map((p) => [p.dataset.key, p.getAttribute('stroke')]))"""
SERIES_DASHES = """(sel) => Object.fromEntries([...document.querySelectorAll(sel + ' path.series[data-key]')]
  .map((p) => [p.dataset.key, p.getAttribute('stroke-dasharray')]))"""


def test_each_scaling_is_drawn_in_one_colour_and_dash_in_the_lesson_and_the_workbench(page, server):
    """Plain RoPE was near-black in the workbench's wavelength view and RoPE blue in chapter 8; chapter 8
    dashed NTK and YaRN by their order in its chart while the workbench drew them solid."""
    open_section(page, server, "stretching-rope", "ch-stretching-rope")
    lesson = {k: hex_of(v) for k, v in page.evaluate(SERIES_STROKES, "#str-chart").items()}
    assert set(lesson) == {"default", "linear", "ntk", "yarn"}, lesson
    lesson_dashes = page.evaluate(SERIES_DASHES, "#str-chart")

    view = open_section(page, server, "wavelengths", "view-wavelengths")
    for name in ("linear", "ntk", "yarn"):
        if not page.locator(f"#wl-methods input[value='{name}']").is_checked():
            check_and_wait(page, view, f"#wl-methods input[value='{name}']")
    workbench = {k: hex_of(v) for k, v in page.evaluate(SERIES_STROKES, "#wl-chart").items()}
    assert set(lesson) <= set(workbench), workbench
    for key, colour in lesson.items():
        assert colour == workbench[key] == palette.SCALING_COLOURS[key].lower(), (key, colour, workbench[key])
    for key, colour in workbench.items():
        assert colour == palette.SCALING_COLOURS[key].lower(), (key, colour)
    # ... and in one dash pattern (the palette's; none: solid)
    workbench_dashes = page.evaluate(SERIES_DASHES, "#wl-chart")
    for key, dash in lesson_dashes.items():
        assert dash == workbench_dashes[key] == palette.SCALING_DASHES.get(key), (key, dash, workbench_dashes[key])
    for key, dash in workbench_dashes.items():
        assert dash == palette.SCALING_DASHES.get(key), (key, dash)

    # a real config's curves: every one in its scaling's colour (LongRoPE's short and long factors alike)
    before = view.get_attribute("data-renders")
    page.locator("#wl-fixture").select_option("phi-3.5-mini-instruct")
    from playwright.sync_api import expect

    expect(view).not_to_have_attribute("data-renders", before)
    fixture = page.evaluate(
        """() => [...document.querySelectorAll('#wl-chart path.series')]
      .map((p) => [p.dataset.key, p.getAttribute('stroke')])"""
    )
    assert [k for k, _ in fixture].count("longrope") == 2, fixture
    for key, colour in fixture:
        assert hex_of(colour) == palette.SCALING_COLOURS[key].lower(), (key, colour)


def test_the_sine_code_is_drawn_in_the_sinusoidal_colour(page, server):
    open_section(page, server, "bad-ideas", "ch-bad-ideas")
    fills = page.evaluate(
        "() => [...document.querySelectorAll('#raw-figure rect.bar')].map((r) => r.getAttribute('fill'))"
    )
    assert len(fills) == 3
    labels = page.evaluate("() => [...document.querySelectorAll('#raw-figure text')].map((t) => t.textContent)")
    assert any(t.startswith("+ sine code") for t in labels)
    assert hex_of(fills[2]) == palette.SCHEME_COLOURS["sinusoidal"].lower()


#: where the workbench draws the sign map: (view, what is drawn, the holder its legend sits in, how):
#: "map" draws every value in the map's colour, "ends" draws only its two ends, by sign
SIGN_FIGURES = (
    ("fingerprint", "canvas#fp-heat", "#fp-heat-scale", "map"),
    ("fingerprint", "#fp-seat-bars rect.bar", "#fp-seat-scale", "map"),
    ("fingerprint", "canvas.barcode-strip", "#fp-barcodes .scale", "map"),
    ("dials", "#dl-pair-bars rect.bar", "#dl-pair-key", "ends"),
    ("alibi", "canvas#al-rope", "#al-rope-scale", "map"),
)


def rgb_of(hex_colour: str) -> tuple[int, int, int]:
    return int(hex_colour[1:3], 16), int(hex_colour[3:5], 16), int(hex_colour[5:7], 16)


@pytest.mark.parametrize("view,drawn,legend,how", SIGN_FIGURES, ids=[f"{v}:{d}" for v, d, _, _ in SIGN_FIGURES])
def test_the_sign_map_is_drawn_with_its_legend(page, server, view, drawn, legend, how):
    """The fingerprint's heatmap, barcodes and seat bars and the dials' per-pair bars drew signs with no
    legend (only the ALiBi view's RoPE matrix had a colour scale)."""
    from playwright.sync_api import expect

    open_section(page, server, view, f"view-{view}")
    expect(page.locator(drawn).first).to_be_visible()
    key = page.locator(f"{legend} .sign-legend")
    expect(key).to_have_count(1)
    expect(key).to_be_visible()
    # the legend says which sign is which, in the sign map's own colours
    text = key.text_content()
    assert "−" in text and "+" in text, text
    colours = page.evaluate(
        """(sel) => [...document.querySelectorAll(sel + ' .sign-legend rect, ' + sel + ' .sign-legend .swatch')]
      .map((n) => n.getAttribute('fill') || getComputedStyle(n).backgroundColor).filter((c) => c && c !== 'none')""",
        legend,
    )
    colours = [hex_of(c) for c in colours]
    if how == "ends":  # the bars' colours are the legend's two swatches: the map's ends
        assert colours == [palette.SIGN_COLOURS["negative"], palette.SIGN_COLOURS["positive"]], colours
        fills = page.locator(drawn).evaluate_all("(ns) => ns.map((n) => n.getAttribute('fill'))")
        assert {hex_of(f) for f in fills} <= set(colours), fills
    else:  # a gradient from blue through white to red
        low, middle, high = rgb_of(colours[0]), rgb_of(colours[len(colours) // 2]), rgb_of(colours[-1])
        assert low[2] > low[0] + 60 and high[0] > high[2] + 60, (colours[0], colours[-1])
        assert min(middle) > 220, colours[len(colours) // 2]
        # a legend made with the page's own map: its ends are the map's colours just inside -1 and +1
        near = page.evaluate(
            """async () => { const p = await import('/static/palette.js');
          return [p.divergingRGB(-1 + 1 / 32), p.divergingRGB(1 - 1 / 32)]; }"""
        )
        assert [rgb_of(colours[0]), rgb_of(colours[-1])] == [tuple(near[0]), tuple(near[1])]


def test_the_workbench_lists_the_checks_in_the_lessons_reading_order(page, server):
    from playwright.sync_api import expect

    open_section(page, server, "quiz", "view-quiz")
    expect(page.locator(".quiz-card").first).to_be_visible()
    shown = page.evaluate("() => [...document.querySelectorAll('#quiz-list .quiz-card')].map((c) => c.dataset.check)")
    reading = [check for chapter in CHAPTERS for check in chapter.checks]
    assert shown == reading
    numbers = page.locator("#quiz-list .quiz-card h3").all_inner_texts()
    assert [int(t.split(".")[0]) for t in numbers] == list(range(1, len(reading) + 1))


def test_a_log_axis_draws_an_exact_zero_on_a_row_labelled_zero(page, server):
    """The precision view drew errors of exactly 0 at 1e-12 (only the caption said so); its log axes now
    end in a row labelled "exact (0)", and a 0 handed to the chart is drawn on that row."""
    from playwright.sync_api import expect

    open_section(page, server, "precision", "view-precision")
    for chart in ("#pr-chart", "#pr-pairs"):
        expect(page.locator(f"{chart} text.zero-tick")).to_have_text("exact (0)")
        ticks = page.evaluate(
            "(c) => [...document.querySelectorAll(c + ' .axis text')].map((t) => t.textContent)", chart
        )
        assert "1e-12" not in ticks, ticks  # the bottom row is not a number
    drawn = page.evaluate(
        """async () => {
      const { lineChart } = await import('/static/charts.js');
      const holder = document.createElement('div');
      document.body.appendChild(holder);
      lineChart(holder, { width: 400, height: 200, x: { domain: [1, 3] },
        y: { domain: [1e-12, 10], log: true, zero: 1e-12 },
        series: [{ name: 'errors', key: 'e', xs: [1, 2, 3], ys: [1e-3, 0, 1e-6], color: '#000', points: true }] });
      const row = holder.querySelector('text.zero-tick');
      const dots = [...holder.querySelectorAll('circle')].map((c) => Number(c.getAttribute('cy')));
      const path = holder.querySelector('path.series').getAttribute('d');
      const ticks = [...holder.querySelectorAll('.axis text')].map((t) => t.textContent);
      holder.remove();
      return { rowY: Number(row.getAttribute('y')) - 4, dots, path, ticks };
    }"""
    )
    assert len(drawn["dots"]) == 3 and drawn["path"].count("L") == 2  # the zero is drawn, not dropped
    assert abs(drawn["dots"][1] - drawn["rowY"]) < 0.01
    assert drawn["dots"][1] > drawn["dots"][2] > drawn["dots"][0]
    assert "exact (0)" in drawn["ticks"] and "1e-12" not in drawn["ticks"]


#: tick sets handed to charts.js's line chart as chosen x ticks: (first, last, step, log)
TICK_SETS = (
    (0, 200_000, 50_000, False),
    (0, 1_000_000, 250_000, False),
    (-1_000_000, 1_000_000, 500_000, False),
    (100_000, 100_200, 50, False),
    (0, 1, 0.25, False),
    (0, 0.6, 0.1, False),
    (1e-3, 5e-3, 1e-3, False),
    (0, 5e-4, 1e-4, False),
    (1e-12, 1e9, None, True),
)

DRAW_TICKS = """async (sets) => {
  const { lineChart } = await import('/static/charts.js');
  const read = (holder, anchor) => [...holder.querySelectorAll(`g.axis text[text-anchor="${anchor}"]:not(.axis-label)`)]
    .map((t) => t.textContent);
  return sets.map(([first, last, step, log]) => {
    const holder = document.createElement('div');
    document.body.appendChild(holder);
    const values = [];
    if (log) for (let e = Math.log10(first); e <= Math.log10(last); e++) values.push(10 ** e);
    else for (let v = first; v <= last + step * 1e-9; v += step) values.push(v);  // as a tick loop adds them up
    lineChart(holder, { width: 900, height: 300, x: { domain: [first, last], log, ticks: values },
      y: { domain: [first, last], log }, series: [] });
    const out = { values, x: read(holder, 'middle'), y: read(holder, 'end') };
    holder.remove();
    return out;
  });
}"""


def parse_tick(label: str) -> float:
    return float(label.replace("−", "-").replace(",", ""))


@pytest.mark.parametrize("first,last,step,log", TICK_SETS, ids=[f"{a:g}..{b:g}" for a, b, _, _ in TICK_SETS])
def test_every_tick_label_is_distinct_and_reads_back_as_its_tick(page, server, first, last, step, log):
    """A linear axis labelled ticks of 100,000 and up with one significant digit: 150,000 and 200,000
    both read "2e+5". Every label of an axis now reads back as its own tick, so no two are alike."""
    from playwright.sync_api import expect

    page.goto(server)
    expect(page.locator("body")).to_be_visible()
    drawn = page.evaluate(DRAW_TICKS, [[first, last, step, log]])[0]
    values, labels = drawn["values"], drawn["x"]
    assert len(labels) == len(values) >= 3, drawn
    assert len(set(labels)) == len(labels), labels
    for value, label in zip(values, labels):
        allowed = abs(value) * 1e-9 if log else step * 1e-6
        assert parse_tick(label) == pytest.approx(value, abs=allowed, rel=0), (label, value, labels)
    # the y axis picks its own ticks on the same domain: those too are distinct and read back as numbers
    # on a grid (a linear axis: evenly spaced values; a log axis: powers of ten)
    ys = [parse_tick(t) for t in drawn["y"]]
    assert len(ys) >= 3 and len(set(drawn["y"])) == len(ys), drawn["y"]
    if log:
        assert all(math.log10(v) == pytest.approx(round(math.log10(v)), abs=1e-9) for v in ys), drawn["y"]
    else:
        gaps = [b - a for a, b in zip(ys, ys[1:])]
        assert all(g == pytest.approx(gaps[0], rel=1e-9) for g in gaps), drawn["y"]
