"""The figure unit of ``static/core.js``: the one place that wires a chapter's controls to its figure's
route, draws the answer and fills in its text. Driven in a real Chromium on the explorer's page, with a
panel made for the test, against a real route of the lesson's API; and every chapter script that draws
from a route defines its figures through it instead of wiring a loader of its own.
"""

from __future__ import annotations

import re
from importlib import resources

import pytest

from posenc.teaching.lesson.manifest import CHAPTERS

#: chapter scripts that still wire their figures by hand, each with the reason
BY_HAND = {
    "knowledge_checks": "no figure route: it lists the checks and keeps the score",
}

#: a panel with a slider, a choice and an error box, as a chapter's markup has them
PANEL = """
<article class="chapter" id="ch-unit-test" data-chapter="unit-test">
  <input type="range" id="ut-distance" min="2" max="200" value="10"><output id="ut-distance-out"></output>
  <select id="ut-heads"><option>4</option><option selected>8</option></select>
  <div class="error" role="alert" hidden></div>
</article>"""

#: builds the panel, wires one figure to the ALiBi route, and records what the unit does
WIRE = """async (panel) => {
  document.body.insertAdjacentHTML("beforeend", panel);
  const core = await import("/static/core.js");
  core.register("unit-test", { setup: () => null });
  window.seen = { draws: [], fills: [], requests: [] };
  const realFetch = window.fetch;
  // the figure's own requests (the page asks other routes of its own meanwhile)
  window.fetch = (url, options) => {
    if (String(url).includes("/api/lesson/alibi")) window.seen.requests.push(String(url));
    return realFetch(url, options);
  };
  window.unit = core.figure("unit-test", {
    route: "/api/lesson/alibi",
    controls: { distance: "ut-distance", heads: core.choice("ut-heads") },
    prepare: (d) => { d.prepared = true; },
    draw: (d) => window.seen.draws.push({ distance: d.distance, heads: d.heads, prepared: d.prepared }),
    fill: (d) => window.seen.fills.push(d.rows.length),
  });
}"""

STATE = """() => ({ ...window.seen, renders: document.getElementById("ch-unit-test").dataset.renders || "0",
  error: document.querySelector("#ch-unit-test .error").hidden ? null
    : document.querySelector("#ch-unit-test .error").textContent,
  output: document.getElementById("ut-distance-out").textContent })"""


@pytest.fixture(scope="module")
def page(browser, server):
    tab = browser.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda err: errors.append(str(err)))
    tab.goto(server)
    tab.evaluate(WIRE, PANEL)
    yield tab
    assert not errors, errors


def wait_for(page, condition: str):
    page.wait_for_function(f"() => {{ const s = window.seen; return {condition}; }}", timeout=30_000)


def test_the_figure_asks_its_route_with_the_controls_values_and_draws_then_fills(page):
    wait_for(page, "s.fills.length === 1")
    state = page.evaluate(STATE)
    assert state["draws"] == [{"distance": 10, "heads": 8, "prepared": True}]
    assert state["fills"] == [8] and state["renders"] == "1" and state["error"] is None
    assert state["output"] == "10"  # the slider's <output> shows its value
    asked = state["requests"]
    assert len(asked) == 1 and "distance=10" in asked[0] and "heads=8" in asked[0]


def test_moving_a_control_asks_again_and_a_redraw_draws_the_last_answer_without_asking(page):
    wait_for(page, "s.fills.length >= 1")
    page.evaluate("""() => { const s = document.getElementById("ut-distance"); s.value = "40";
      s.dispatchEvent(new Event("input")); }""")
    page.select_option("#ut-heads", "4")
    wait_for(page, "s.draws.some((d) => d.distance === 40 && d.heads === 4)")
    before = page.evaluate(STATE)
    assert before["output"] == "40" and before["draws"][-1] == {"distance": 40, "heads": 4, "prepared": True}
    page.evaluate("() => window.unit.redraw()")
    after = page.evaluate(STATE)
    assert after["draws"][-1] == before["draws"][-1] and len(after["draws"]) == len(before["draws"]) + 1
    assert after["requests"] == before["requests"] and after["fills"] == before["fills"]
    assert page.evaluate("() => window.unit.data().distance") == 40


def test_a_refused_request_shows_the_servers_message_and_keeps_the_last_figure(page):
    wait_for(page, "s.fills.length >= 1")
    drawn = page.evaluate("() => window.seen.draws.length")
    page.evaluate("""() => { const s = document.getElementById("ut-distance"); s.max = "100000"; s.value = "99999";
      s.dispatchEvent(new Event("input")); }""")
    page.wait_for_function("() => !document.querySelector('#ch-unit-test .error').hidden", timeout=30_000)
    state = page.evaluate(STATE)
    assert "distance" in state["error"] and "99999" in state["error"]
    assert len(state["draws"]) == drawn  # nothing drawn from a refused answer


def test_a_figure_defined_wrong_is_refused_with_what_is_wrong(page):
    got = page.evaluate("""async () => {
      const core = await import("/static/core.js");
      const attempt = (spec) => { try { core.figure("unit-test", { ...spec, start: false }); return "no error"; }
        catch (e) { return e.message; } };
      return [attempt({}), attempt({ route: "/api/lesson/alibi", request: async () => ({}) }),
        attempt({ route: "/api/lesson/alibi", controls: { distance: "no-such-slider" } }),
        attempt({ route: "/api/lesson/alibi", controls: { heads: 8 } })];
    }""")
    assert got[0] == got[1] == 'figure in "unit-test": give one of route or request'
    assert got[2] == 'figure: control "distance" names no element: #no-such-slider'
    assert got[3].startswith('figure: control "heads" must be a slider\'s id, range(), choice() or typed(), got 8')


def _script(chapter) -> str:
    return (
        resources.files("posenc.teaching.explorer")
        .joinpath("static", "lesson", "chapters", f"{chapter.module}.js")
        .read_text()
    )


def test_every_chapter_defines_its_figures_through_the_unit():
    """A chapter script declares its figures (``figures(...)``) and wires no loader, API call or slider of
    its own; only the scripts of :data:`BY_HAND` do, each for its stated reason."""
    assert set(BY_HAND) <= {c.module for c in CHAPTERS}
    for chapter in CHAPTERS:
        text = _script(chapter)
        by_hand = bool(re.search(r"\b(loader|slider)\(", text))
        if chapter.module in BY_HAND:
            assert by_hand, f"{chapter.module} now uses the unit: take it off BY_HAND"
            continue
        assert re.search(r"\bfigures\(\s*\"" + re.escape(chapter.id) + '"', text), chapter.id
        assert not by_hand, f"{chapter.module}.js wires a loader or a slider by hand"
        assert not re.search(r"import \{[^}]*\b(loader|slider)\b[^}]*\} from \"\.\./\.\./core\.js\"", text), chapter.id


def test_every_page_script_parses_as_a_module():
    """A script that does not parse takes its whole chapter down; Node reads each as an ES module, as the
    browser does, in well under a second each."""
    import shutil
    import subprocess
    from pathlib import Path

    node = shutil.which("node")
    if not node:
        pytest.skip("node is not installed; the browser tests load every script instead")
    static = Path(str(resources.files("posenc.teaching.explorer").joinpath("static")))
    scripts = sorted(static.rglob("*.js"))
    assert len(scripts) > 20
    for script in scripts:
        done = subprocess.run(
            [node, "--input-type=module", "--check"],
            stdin=script.open("rb"),
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, (script.name, done.stderr.decode()[-600:])


#: a second panel whose controls sit in the chapter's <figure> frame, as figureHtml makes it
FRAMED = """
<article class="chapter" id="ch-unit-ready" data-chapter="unit-ready">
  <figure class="lesson-fig" id="ur-frame"><div class="controls">
    <input type="range" id="ur-distance" min="2" max="100000" value="10"><output id="ur-distance-out"></output>
  </div><div class="error" role="alert" hidden></div></figure>
</article>"""

WIRE_FRAMED = """async (panel) => {
  document.body.insertAdjacentHTML("beforeend", panel);
  const core = await import("/static/core.js");
  core.register("unit-ready", { setup: () => null });
  window.readyDraws = 0;
  window.readyUnit = core.figure("unit-ready", { route: "/api/lesson/alibi", controls: { distance: "ur-distance" },
    draw: () => { window.readyDraws += 1; } });
}"""

MOVE = """(value) => { const s = document.getElementById("ur-distance"); s.value = String(value);
  s.dispatchEvent(new Event("input"));
  const frame = document.getElementById("ur-frame"), panel = document.getElementById("ch-unit-ready");
  return { ready: frame.dataset.ready, pending: panel.dataset.pending, draws: window.readyDraws }; }"""


def test_a_figure_says_when_it_has_drawn_its_answer_and_its_chapter_when_all_have(page):
    """Defect: the browser tests waited by the clock for a chapter's late figures. A figure's frame says
    data-ready="false" from the moment a control moves (the debounce included) and "true" once the answer is
    drawn, "error" once the error box says why not; the chapter's data-pending counts figures not yet drawn."""
    from playwright.sync_api import expect

    page.evaluate(WIRE_FRAMED, FRAMED)
    frame, panel = page.locator("#ur-frame"), page.locator("#ch-unit-ready")
    expect(frame).to_have_attribute("data-ready", "true", timeout=30_000)
    expect(panel).to_have_attribute("data-pending", "0")
    drawn = page.evaluate("() => window.readyDraws")
    assert drawn == 1
    moved = page.evaluate(MOVE, 40)
    assert moved == {"ready": "false", "pending": "1", "draws": drawn}  # at once, before any answer
    expect(frame).to_have_attribute("data-ready", "true", timeout=30_000)
    assert page.evaluate("() => window.readyDraws") == drawn + 1
    assert panel.get_attribute("data-pending") == "0"
    # two moves in a row: one pending figure, settled by the last answer
    page.evaluate(MOVE, 50)
    assert page.evaluate(MOVE, 60)["pending"] == "1"
    expect(panel).to_have_attribute("data-pending", "0", timeout=30_000)
    assert frame.get_attribute("data-ready") == "true"
    assert page.evaluate("() => window.readyUnit.data().distance") == 60
    # a refused request: settled as an error, nothing drawn
    drawn = page.evaluate("() => window.readyDraws")
    page.evaluate(MOVE, 99999)
    expect(frame).to_have_attribute("data-ready", "error", timeout=30_000)
    assert panel.get_attribute("data-pending") == "0" and page.evaluate("() => window.readyDraws") == drawn
    expect(page.locator("#ch-unit-ready .error")).to_be_visible()


def test_every_figure_with_controls_of_every_chapter_says_it_has_drawn(browser, server):
    """Each figure of the lesson that a control drives sets data-ready="true" on its frame once drawn, and
    every chapter settles to data-pending="0": the signal the browser tests wait on."""
    from browser_support import SIZES, open_chapter, watched_page
    from playwright.sync_api import expect

    with watched_page(browser, server, SIZES["desktop"]) as tab:
        for chapter in CHAPTERS:
            node = open_chapter(tab, server, chapter.id)
            assert node.get_attribute("data-pending") == "0", chapter.id
            framed = node.locator("figure.lesson-fig:has(.controls select, .controls input)")
            for i in range(framed.count()):
                expect(framed.nth(i)).to_have_attribute("data-ready", "true")
