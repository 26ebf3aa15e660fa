"""The claims of chapters 10 to 14 (the methods side by side, the PyTorch demo, the knowledge checks,
common mistakes, the big picture) in a real headless Chromium: each test does what a sentence of the
lesson says (a "try this", or a caption saying what a figure shows) and asserts what the sentence claims,
on the figure as drawn. Expected values come from posenc (``posenc.teaching.lesson``) or from the page's own
numbers, never from numbers copied off the page. The server, browser and page helpers are ``conftest``'s
and ``browser_support``'s; without Chromium these tests skip (or fail with ``POSENC_REQUIRE_BROWSER=1``).
"""

from __future__ import annotations

import math

import pytest
import torch
from browser_support import SIZES, new_page, open_chapter, select_and_wait, set_slider, settled, watched_page

from posenc.teaching.lesson.manifest import CHAPTERS

pytestmark = pytest.mark.slow


LIVE = """() => Object.fromEntries([...document.querySelectorAll('#cmp-table tbody tr')].map((tr) =>
  [tr.dataset.scheme, [tr.querySelector('.live-reads').textContent, tr.querySelector('.live-reads').className]]))"""


LIVE_HEAD = "() => document.querySelector('#cmp-table thead tr').lastElementChild.textContent"


def test_claim_placing_4096_tokens_is_not_reading_them_and_rope_agrees_with_chapter_eight(browser, server):
    """Chapter 10: the live column says what it measures: at or under the 512 tokens trained every scheme is
    within training; past it the learned table refuses, and the others place the tokens without an error but
    meet what training never showed them -- for plain RoPE the pairs chapter 8 marks past training (its one
    rule, posenc.teaching.lesson.stretching.past_training). Past training only T5's bias gets a tick: every
    distance from its max_distance (128) on reads its last bucket, which distances 128..511 trained."""
    from posenc.rope.tables import rope_inv_freq
    from posenc.t5 import t5_buckets
    from posenc.teaching.lesson.chapters.comparison import SCHEMES, TRAINED
    from posenc.teaching.lesson.stretching import past_training

    inv_freq = rope_inv_freq(8, 10000.0)  # the comparison's RoPE head: width 32, 4 heads
    with watched_page(browser, server, SIZES["desktop"]) as page:
        node = open_chapter(page, server, "comparison")
        intro = node.locator("[data-prose='intro']").inner_text()
        assert "can you read a longer text" not in intro
        assert "Placing a position without an error is not reading the text well" in intro
        for length in (512, 576, 4096):
            set_slider(page, node, "#cmp-len", length)
            assert page.evaluate(LIVE_HEAD) == f"at {length} tokens (trained on {TRAINED})"
            cells = page.evaluate(LIVE)
            assert set(cells) == set(SCHEMES) == {"sinusoidal", "learned", "rope", "alibi", "t5", "nope"}
            ticked = {s for s, (text, _) in cells.items() if text.startswith("✓")}
            passed = {s for s, (_, css) in cells.items() if "pass" in css.split()}
            assert ticked == passed
            if length <= TRAINED:
                assert ticked == set(cells)
                continue
            assert ticked == {"t5"}, cells  # placing without an error is not reading well, but for T5's buckets
            far = t5_buckets(torch.tensor([length - 1]), torch.arange(length), 32, 128, bidirectional=False)
            trained = t5_buckets(torch.tensor([TRAINED - 1]), torch.arange(TRAINED), 32, 128, bidirectional=False)
            assert set(far.unique().tolist()) == set(trained.unique().tolist()) == set(range(32))
            assert cells["t5"][0] == "✓ placed; every distance from 128 on reads one bucket, trained on"
            assert cells["learned"][0].startswith("✗ refused: position 512 is outside the learned position table")
            past = int(past_training(inv_freq, inv_freq, TRAINED, length).sum())
            assert past == 2
            assert cells["rope"][0] == f"⚠ placed, but {past} of its 4 pairs turn past training (chapter 8)"
            for scheme in ("sinusoidal", "alibi", "nope"):
                assert cells[scheme][0].startswith("⚠") and f"{TRAINED:,}" in cells[scheme][0], cells[scheme]


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


ATTN_DRAWN = """() => { const cards = [...document.querySelectorAll('#attn-maps .attn-card')];
  return cards.length > 0 && cards.every((card) => card.querySelector('rect.attn-cell') !== null); }"""


def attention_cards(page, node, text):
    from playwright.sync_api import expect

    if page.locator("#attn-text").input_value() != text:
        renders = node.get_attribute("data-renders")
        page.locator("#attn-text").fill(text)
        expect(node).not_to_have_attribute("data-renders", renders, timeout=20_000)
        settled(node)
    # the maps come from the server after the chapter has drawn: wait until every card has its cells
    page.wait_for_function(ATTN_DRAWN, timeout=30_000)
    return {card["scheme"]: card for card in page.evaluate(ATTN_CARDS)}


def test_claim_every_grid_trained_or_not_is_shaded_on_one_fixed_scale(browser, server):
    """Chapter 14: "every grid, trained or not, is shaded on one scale from 0 to 1". Defect: each page of
    maps was stretched over its own weights, so the untrained grids' near-even 0.15 to 0.28 looked as dark
    as a trained weight of 1.00. Now a cell's shade is its weight, whichever model and sentence, and the
    legend under each grid runs from 0 to 1."""
    with watched_page(browser, server, SIZES["desktop"]) as page:
        node = open_chapter(page, server, "big-picture")
        for model in ("trained", "untrained"):
            if page.locator("#attn-model").input_value() != model:
                select_and_wait(page, node, "#attn-model", model)
            for text in ("the dog bit the man", "a cat saw a dog"):
                cards = attention_cards(page, node, text)
                for scheme, card in cards.items():
                    for c in card["cells"]:
                        assert c["shade"] == pytest.approx(c["w"], abs=1e-4), (model, scheme, c)
                    legend = card["legend"]
                    assert len(legend) == 20 and legend == sorted(legend), (scheme, legend)  # light on the left
                    assert legend[0] < 0.05 and legend[-1] > 0.95
                    assert card["ends"] == ["0", "1"], (scheme, card["ends"])
                if model == "untrained":  # near even: no cell of a row that sees two words or more is dark
                    for scheme, card in cards.items():
                        if scheme != "alibi":
                            assert max(c["shade"] for c in card["cells"] if c["q"] > 0) < 0.55, scheme


def test_claim_position_changes_where_each_word_looks(browser, server):
    """Chapter 14: "Position changes more than an output: it changes where each word looks": against none, a
    positional scheme moves some weight by more than a tenth (of the shade scale, 0 to 1) and moves at least
    one ring (the word a row attends to most); on the trained maps ALiBi moves its weights less than every
    other scheme."""
    with watched_page(browser, server, SIZES["phone"]) as page:
        node = open_chapter(page, server, "big-picture")
        for text in ("the dog bit the man", "a cat saw a dog"):
            cards = attention_cards(page, node, text)
            none = cards.pop("nope")
            nope = {(c["q"], c["k"]): c["w"] for c in none["cells"]}
            change = {s: max(abs(c["w"] - nope[c["q"], c["k"]]) for c in card["cells"]) for s, card in cards.items()}
            assert set(change) == {"sinusoidal", "learned", "rope", "alibi"}
            assert max(change.values()) > 0.1, (text, change)
            # the rings as drawn: row q's ring on column k
            nope_rings = sorted(none["tops"])
            rings = {s: sorted(card["tops"]) for s, card in cards.items()}
            assert len(nope_rings) == len(text.split()) and all(len(r) == len(nope_rings) for r in rings.values())
            moved = {s: sum(a != b for a, b in zip(r, nope_rings)) for s, r in rings.items()}
            assert max(moved.values()) >= 1, (text, moved)
            assert change["alibi"] < min(v for s, v in change.items() if s != "alibi"), (text, change)


CMP_ROWS = """() => Object.fromEntries([...document.querySelectorAll('#cmp-table tbody tr')].map((tr) =>
  [tr.dataset.scheme, [tr.querySelector('td[data-label="extra trainable numbers"]').textContent,
    tr.querySelector('.live-reads').textContent]]))"""


def test_claim_the_comparison_counts_each_schemes_extra_trainable_numbers(browser, server):
    """Chapter 10's table, the live columns: each scheme's extra trainable numbers and what it does with the
    length, as posenc builds the schemes (the learned table and T5's bias table have trainable numbers, and only
    the learned table stops)."""
    from posenc.teaching.lesson.chapters.comparison import compare

    with watched_page(browser, server, SIZES["desktop"]) as page:
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
            assert {s for s, row in expected.items() if row["extra_parameters"]} == {"learned", "t5"}
            assert expected["t5"]["extra_parameters"] == 32 * 4  # 32 buckets, 4 heads


def test_claim_moving_the_phrase_changes_nothing_with_q_k_turned_and_something_with_v(browser, server):
    """Chapter 13, turning values: "shift every position by the same amount and the output must not change"
    with q and k turned (drawn as a zero bar, rounding), while with v turned too it does -- at any move of the
    slider, with posenc's numbers."""
    from posenc.teaching.lesson.mistakes import ROUNDING_LEVEL, rotated_values_change

    values = """() => [...document.querySelectorAll('#mis-v rect.bar')].map((r) => ({ value: Number(r.dataset.value),
      rounding: r.dataset.rounding === 'true', width: r.getBoundingClientRect().width }))"""
    with watched_page(browser, server, SIZES["phone"]) as page:
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
    with watched_page(browser, server, SIZES["desktop"]) as page:
        node = open_chapter(page, server, "comparison")
        intro = node.locator("[data-prose='intro']").inner_text()
        assert "how each scheme works" in intro and "longer texts" in intro and "used in" in intro
        rows = page.evaluate(COMPARISON_LINKS, list(columns))
        assert [scheme for scheme, _ in rows] == ["sinusoidal", "learned", "rope", "alibi", "t5", "nope"]
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


def test_claim_a_layer_that_only_reads_the_wider_vector_doubles_and_a_block_grows_fourfold(browser, server):
    """Chapter 13: "A layer that only reads the wider vector, such as the table's linear map back to the model
    width, doubles; a block that keeps the wider width throughout grows fourfold". The page's table counts,
    as nn.Linear does, W*W + W weights reading W numbers and 2W*W + W reading 2W (ratio 2), and the block's
    row is posenc's block counted at W and 2W (ratio 4 to two decimals), as the figure above it prints."""
    from posenc.teaching.lesson.chapters.common_mistakes import WIDE
    from posenc.teaching.lesson.mistakes import block_parameters

    with watched_page(browser, server, SIZES["phone"]) as page:
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
    with watched_page(browser, server, SIZES["desktop"]) as page:
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


BARS = """(sel) => [...document.querySelectorAll(sel + ' rect.bar')].map((r) => ({
  width: r.getBoundingClientRect().width, value: Number(r.dataset.value), rounding: r.dataset.rounding === 'true',
  label: r.nextElementSibling.textContent }))"""


def test_claim_turning_values_is_measured_on_a_linear_axis(browser, server):
    """Chapter 12: with q, k turned the last output does not change (rounding, drawn as zero); with v
    turned too it does."""
    with watched_page(browser, server, SIZES["phone"]) as page:
        open_chapter(page, server, "common-mistakes")
        right, wrong = page.evaluate(BARS, "#mis-v")
        assert right["rounding"] and right["width"] == 0 and "rounding" in right["label"]
        assert not wrong["rounding"] and wrong["width"] > 100


def test_claim_the_demo_reproduces_the_seed_and_keeps_its_indentation_on_a_phone(browser, server):
    """Chapter 10: the from-scratch demo prints the seed's 0.65457 at seats 1/3 and after a move of
    10,000 seats; on a phone the code scrolls sideways instead of wrapping, so indentation survives."""
    from playwright.sync_api import expect

    with watched_page(browser, server, SIZES["phone"]) as page:
        node = open_chapter(page, server, "pytorch-demo")
        output = page.locator("#demo-output")
        expect(output).to_contain_text("score, seats 1 and 3: 0.65457")
        set_slider(page, node, "#demo-shift", 10000)
        expect(output).to_contain_text("score, seats 10001 and 10003: 0.65457")
        expect(output).to_contain_text("posenc, seats 10001 and 10003: 0.65457")
        layout = page.evaluate(
            """() => { const pre = document.getElementById('demo-code'), s = getComputedStyle(pre);
              const lines = pre.textContent.split(String.fromCharCode(10)).length;
              const lineH = parseFloat(s.lineHeight) || parseFloat(s.fontSize) * 1.2;
              const pad = parseFloat(s.paddingTop) + parseFloat(s.paddingBottom);
              return { lines, rows: (pre.scrollHeight - pad) / lineH, scrolls: pre.scrollWidth > pre.clientWidth,
                whiteSpace: s.whiteSpace, page: document.documentElement.scrollWidth }; }"""
        )
        assert layout["whiteSpace"] == "pre" and layout["scrolls"], layout
        assert layout["rows"] == pytest.approx(layout["lines"], abs=1.5), layout  # one row per line: nothing wrapped
        assert layout["page"] <= SIZES["phone"][0]


def test_claim_a_parameter_table_drifts_the_buffer_stays_and_gluing_quadruples_a_block(browser, server):
    """Chapter 12: "take more optimizer steps and watch the parameter table drift; the buffer stays at
    exactly 0"; gluing on a d-wide position makes the block's weights grow with the square of the width."""
    context, page = new_page(browser, server, SIZES["desktop"])
    values = "(ns) => ns.map((n) => Number(n.dataset.value))"
    try:
        node = open_chapter(page, server, "common-mistakes")
        drift = []
        for steps in (1, 5, 10):
            set_slider(page, node, "#mis-steps", steps)
            buffer, parameter = page.eval_on_selector_all("#mis-param rect.bar", values)
            assert buffer == 0.0
            drift.append(parameter)
        assert 0 < drift[0] < drift[1] < drift[2]
        for width in (64, 1024):
            set_slider(page, node, "#mis-width", width)
            added, glued = page.eval_on_selector_all("#mis-cat rect.bar", values)
            assert 3.9 < glued / added <= 4.0, (width, added, glued)
        assert "persistent=False" in node.inner_text()  # not saved with the weights only then
        assert page.problems == [], page.problems
    finally:
        context.close()
