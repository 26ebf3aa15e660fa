"""Chapter 14 in a real headless Chromium: its figures read the trained models by default, each model
menu switches its figure to the untrained block and the line above the figure says which one it shows,
and each sentence of the chapter about the figures holds on the figures as drawn. Expected values come
from posenc (``posenc.teaching.lesson``) or from the page's own numbers. Like the other browser tests these skip
without Chromium (or fail with ``POSENC_REQUIRE_BROWSER=1``).
"""

from __future__ import annotations

import math
import re

import pytest
from browser_support import SIZES, open_chapter, select_and_wait, settled, watched_page

from posenc.teaching.lesson.chapters import big_picture as big

pytestmark = pytest.mark.slow

SCHEMES = ("nope", "sinusoidal", "learned", "rope", "alibi")


# the order figure as drawn: its bars, the log axis's ends and room, its ticks and title
LOG_BARS = """() => { const s = document.querySelector('#big-figure svg'); const g = s.querySelector('.hbar-axis');
  const axis = g.querySelector('line.axis');
  return { bars: [...s.querySelectorAll('rect.bar')].map((r) => ({ width: r.getBoundingClientRect().width,
      svgWidth: r.width.baseVal.value, value: Number(r.dataset.value), rounding: r.dataset.rounding === 'true',
      label: r.nextElementSibling.textContent })),
    low: Number(g.dataset.low), top: Number(g.dataset.top), room: axis.x2.baseVal.value - axis.x1.baseVal.value,
    ticks: [...g.querySelectorAll('text.tick')].map((t) => [t.textContent, Number(t.dataset.value)]),
    title: g.querySelector('.axis-title').textContent }; }"""


def parse_tick(label: str) -> float:
    return float(label.replace("−", "-").replace(",", ""))


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_claim_the_order_figure_reads_each_model_causally_and_none_is_rounding_after_one_block(browser, server, size):
    """ "switch the scheme to none: after the first block the change is rounding, trained or not ... At the
    end it is not ... Every other scheme changes the full stop after the first block already", on a log
    axis shared by every scheme of both models; the untrained menu shows the same model before training.
    ALiBi's bar, 2.6 px (0.6 px on a phone) on the old linear axis, is a bar one can see."""
    with watched_page(browser, server, SIZES[size]) as page:
        node = open_chapter(page, server, "big-picture")
        assert page.locator("#big-model").input_value() == "trained"
        for model in ("trained", "untrained"):
            if page.locator("#big-model").input_value() != model:
                select_and_wait(page, node, "#big-model", model)
            source = page.locator("#big-source").text_content()
            assert "causal" in source and "chapter 1" not in source
            assert (
                ("weights it started training from" in source)
                if model == "untrained"
                else ("trained" in source and "untrained" not in source)
            )
            for scheme in SCHEMES:
                if page.locator("#big-scheme").input_value() != scheme:
                    select_and_wait(page, node, "#big-scheme", scheme)
                drawn = page.evaluate(LOG_BARS)
                expected = big.big_picture(scheme, model)
                assert [b["value"] for b in drawn["bars"]] == pytest.approx(
                    [expected["first_difference"], expected["last_difference"]], rel=1e-12
                )
                assert "log scale" in drawn["title"]
                low, top = drawn["low"], drawn["top"]
                assert low <= expected["smallest"] < 10 * low and top / 10 < expected["scale"] <= top
                # decade ticks, each label its value
                values = [v for _, v in drawn["ticks"]]
                assert values[0] == pytest.approx(low) and values[-1] == pytest.approx(top)
                for label, value in drawn["ticks"]:
                    assert parse_tick(label) == pytest.approx(value, rel=1e-9)
                    assert math.log10(value) == pytest.approx(round(math.log10(value)), abs=1e-9)
                for i, bar in enumerate(drawn["bars"]):
                    if scheme == "nope" and i == 0:  # after the first block
                        assert bar["rounding"] and bar["width"] == 0 and "rounding" in bar["label"], bar
                        continue
                    assert not bar["rounding"] and "rounding" not in bar["label"]
                    share = (math.log10(bar["value"]) - math.log10(low)) / (math.log10(top) - math.log10(low))
                    assert bar["svgWidth"] == pytest.approx(share * drawn["room"], abs=0.01), (scheme, bar)
                if scheme == "alibi":
                    assert min(b["width"] for b in drawn["bars"]) > 20, (size, model, drawn["bars"])


def test_claim_the_caption_names_the_sentences_the_numbers_are_of(browser, server):
    with watched_page(browser, server, SIZES["desktop"]) as page:
        open_chapter(page, server, "big-picture")
        caption = page.locator("#big-caption").text_content()
        numbers = page.locator("#big-numbers").text_content()
        for sentence in big.ENDED_SENTENCES:
            assert f"“{sentence}”" in caption and f"“{sentence}”" in numbers


ATTN = """() => [...document.querySelectorAll('#attn-maps .attn-card')].map((card) => {
  const rows = {};
  for (const c of card.querySelectorAll('rect.attn-cell')) (rows[c.dataset.q] = rows[c.dataset.q] || [])[c.dataset.k] =
    Number(c.dataset.w);
  return { scheme: card.dataset.scheme, source: card.dataset.source, rows: Object.values(rows),
    tops: [...card.querySelectorAll('.attn-top')].map((n) => Number(n.dataset.k)) }; })"""


def test_claim_trained_maps_are_causal_and_look_close_by_and_untrained_ones_spread_evenly(browser, server):
    """Trained (the default): "a word sees only itself and the words before it", and "the last word gives
    itself and the word before it" more than an even spread's share under every scheme with positions,
    NoPE about even. A long word among short ones gets less than the word before the last. Untrained (the
    toggle, the same models before training): "every scheme but ALiBi spreads each row evenly over the
    words it can see"."""
    from playwright.sync_api import expect

    with watched_page(browser, server, SIZES["phone"]) as page:
        node = open_chapter(page, server, "big-picture")
        expect(page.locator("#attn-maps .attn-card")).to_have_count(5)
        expect(page.locator("#attn-source")).to_contain_text("trained")
        cards = {c["scheme"]: c for c in page.evaluate(ATTN)}
        words = big.ATTENTION_TEXT.split()
        even = 2 / len(words)
        for scheme, card in cards.items():
            assert card["source"] == "trained"
            rows = card["rows"]
            assert len(rows) == len(words)
            for q, (row, top) in enumerate(zip(rows, card["tops"])):
                assert sum(row) == pytest.approx(1.0, abs=1e-9) and row[top] == max(row)
                assert all(w == 0 for w in row[q + 1 :]), (scheme, q, row)  # causal
            nearby = sum(rows[-1][-2:])
            assert (abs(nearby - even) < 0.05) if scheme == "nope" else (nearby > even), (scheme, nearby)
            assert f"{nearby:.0%}" in page.locator("#ch-big-picture").text_content()
        # a long word among short ones collects no attention by its length
        renders = node.get_attribute("data-renders")
        page.locator("#attn-text").fill(big.MIXED_TEXT)
        expect(node).not_to_have_attribute("data-renders", renders, timeout=20_000)
        settled(node)
        for scheme, card in {c["scheme"]: c for c in page.evaluate(ATTN)}.items():
            last = card["rows"][-1]
            assert last[0] < last[-2], (scheme, last)  # the 12-letter word three back, against the word before
        page.locator("#attn-text").fill(big.ATTENTION_TEXT)
        settled(node)
        select_and_wait(page, node, "#attn-model", "untrained")
        expect(page.locator("#attn-source")).to_contain_text("weights it started training from")
        cards = {c["scheme"]: c for c in page.evaluate(ATTN)}
        for scheme, card in cards.items():
            assert card["source"] == "untrained"
            for q, row in enumerate(card["rows"]):
                assert sum(row) == pytest.approx(1.0, abs=1e-9) and all(w == 0 for w in row[q + 1 :])
                if scheme != "alibi":
                    assert max(abs(w - 1 / (q + 1)) for w in row[: q + 1]) < 0.01, (scheme, q, row)


DIST = """() => { const s = document.querySelector('#dist-figure svg');
  const even = s.querySelector('line.marker-line');
  return { even: even.y1.baseVal.value, height: s.viewBox.baseVal.height,
    series: [...s.querySelectorAll('path.series')].map((p) => ({ key: p.dataset.key,
      ys: [...p.getAttribute('d').matchAll(/[ML]([-0-9.]+),([-0-9.]+)/g)].map((m) => Number(m[2])) })) }; }"""


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_claim_alibis_preference_for_near_bytes_is_built_in_and_ropes_is_learned(browser, server, size):
    """ "Untrained, every scheme but ALiBi spreads evenly ... ALiBi already gives the 4 bytes just before
    ... Trained ... RoPE has learned to look close": on the drawn curves (SVG y grows downwards), against
    the drawn line of an even spread."""
    with watched_page(browser, server, SIZES[size]) as page:
        node = open_chapter(page, server, "big-picture")
        expected = {m: {e["scheme"]: e for e in big.attention_distance(m)["schemes"]} for m in big.MODELS}
        for model in ("trained", "untrained"):
            if page.locator("#dist-model").input_value() != model:
                select_and_wait(page, node, "#dist-model", model)
            assert ("untrained" in page.locator("#dist-source").text_content()) is (model == "untrained")
            drawn = page.evaluate(DIST)
            curves = {s["key"]: s["ys"] for s in drawn["series"]}
            assert sorted(curves) == sorted(SCHEMES)
            for scheme, ys in curves.items():
                assert len(ys) == len(expected[model][scheme]["curve"]) - 1  # distances 1 .. L-1
            near = {s: sum(ys[: big.NEAR_BYTES]) / big.NEAR_BYTES for s, ys in curves.items()}
            far = {s: sum(ys[big.FAR_FROM - 1 :]) / len(ys[big.FAR_FROM - 1 :]) for s, ys in curves.items()}
            px = drawn["height"] / 50  # a fiftieth of the chart
            assert near["alibi"] < drawn["even"] - px and far["alibi"] > drawn["even"] + px  # above, then below
            for scheme in ("nope", "sinusoidal", "learned", "rope"):
                if model == "untrained":  # on the line of an even spread, at every distance
                    assert max(abs(y - drawn["even"]) for y in curves[scheme]) < px, scheme
                elif scheme != "nope":
                    assert near[scheme] < drawn["even"] - px and far[scheme] > drawn["even"] + px, scheme
            numbers = page.locator("#dist-numbers").text_content()
            for scheme in SCHEMES:
                assert re.search(rf"{expected[model][scheme]['near']:.2f}× an even spread", numbers), scheme


DIST_AXES = """() => { const s = document.querySelector('#dist-figure svg');
  const points = [...s.querySelectorAll('path.series')].flatMap((p) =>
    [...p.getAttribute('d').matchAll(/[ML]([-0-9.]+),([-0-9.]+)/g)].map((m) => Number(m[1])));
  const label = [...s.querySelectorAll('text.marker-label')].find((t) => t.textContent === 'even spread');
  const first = s.querySelector('path.series');
  const xs = [...first.getAttribute('d').matchAll(/[ML]([-0-9.]+),([-0-9.]+)/g)].map((m) => Number(m[1]));
  return { xs, right: Math.max(...points), label: label ? label.getBBox().x : null }; }"""


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_the_distance_figure_reads_bytes_back_on_a_log_axis_and_its_label_is_off_the_curves(browser, server, size):
    """Defect: a linear axis 1-127 gave the first ten bytes back, where the schemes differ, 7% of the width,
    and the even-spread label sat on the curves. On the log axis they get log(10)/log(127) of it, and the
    label is in the margin right of every curve."""
    with watched_page(browser, server, SIZES[size]) as page:
        open_chapter(page, server, "big-picture")
        drawn = page.evaluate(DIST_AXES)
        xs = drawn["xs"]  # distances 1 .. L-1
        share = (xs[9] - xs[0]) / (xs[-1] - xs[0])  # 1 -> 10 bytes back, of 1 -> L-1
        assert share == pytest.approx(math.log(10) / math.log(len(xs)), abs=0.01), share
        assert drawn["label"] is not None and drawn["label"] > drawn["right"], drawn
