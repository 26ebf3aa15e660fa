"""One lesson source: a chapter written in :mod:`posenc.teaching.lesson.chapters` reads the same in the terminal
(``posenc tour``) and on the page (``posenc explore``), sentence for sentence and number for number.

For every chapter written there, the tour sections that tell it are run, the page is opened in a real
headless Chromium at the chapter, and both must carry every sentence of the chapter module; every
number the tour prints for the chapter must be on the page too. The markup and block rules of
:mod:`posenc.teaching.lesson.prose` are tested here as well.
"""

from __future__ import annotations

import io
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
import rich.console
from browser_support import chromium_or_skip, explore_server, headless_chromium
from fastapi.testclient import TestClient
from lesson_page import article, chapter_markup

import posenc.teaching.tour as tour
from posenc.teaching.explorer.app import create_app
from posenc.teaching.lesson import chapters
from posenc.teaching.lesson.manifest import CHAPTERS
from posenc.teaching.lesson.prose import IN_PAGE, IN_TOUR, KINDS, SEE_ALSO_LABEL, Block, as_dict, plain, spans, to_rich

WRITTEN = sorted(chapters.MODULES)
BY_ID = {c.id: c for c in CHAPTERS}
#: the written chapters the tour tells (every one: ``test_..._tour_tells_every_one``)
TOLD = [c for c in WRITTEN if BY_ID[c].tour]
#: a number as printed: 4.77e-07, 6,708, 0.019, −0.5, 30
NUMBER = re.compile(r"(?<![\w.])[-−]?\d[\d,]*(?:\.\d+)?(?:e[-+]\d+)?")


def flowing(text: str) -> str:
    return " ".join(text.split())


def numbers_in(text: str) -> set[str]:
    return {n.replace("−", "-") for n in NUMBER.findall(text)}


# -- the markup ---------------------------------------------------------------------------------------
def test_markup_is_parsed_into_spans_and_rendered_for_both_faces():
    text = "a **bold** and *em* `code` [chapter 1](#bag-of-tiles) end"
    assert [s["style"] for s in spans(text)] == ["text", "bold", "text", "em", "text", "code", "text", "link", "text"]
    assert spans(text)[7]["href"] == "#bag-of-tiles"
    assert plain(text) == "a bold and em code chapter 1 end"
    assert to_rich(text) == "a [bold]bold[/] and [italic]em[/] [cyan]code[/] chapter 1 end"
    # square brackets in the text are printed, never read as rich markup
    buffer = io.StringIO()
    rich.console.Console(file=buffer, width=200, color_system=None).print(to_rich("x[1] and [bold] are text"))
    assert buffer.getvalue().strip() == "x[1] and [bold] are text"


@pytest.mark.parametrize("text", ["an *open emphasis", "a `code", "a [link](#Bad Id)", "**bold*"])
def test_unbalanced_markup_is_refused_naming_the_text(text):
    with pytest.raises(ValueError, match="unbalanced"):
        Block("p", text)


def test_bad_blocks_are_refused():
    with pytest.raises(ValueError, match="kind"):
        Block("para", "x")
    with pytest.raises(ValueError, match="slot"):
        Block("p", "x", slot="Intro")
    with pytest.raises(ValueError, match="rows"):
        Block("p", "x", rows=(("a",),))
    with pytest.raises(ValueError, match="rows"):
        Block("table", "caption")
    with pytest.raises(ValueError, match="same number"):
        Block("table", "caption", rows=(("a", "b"), ("c",)))
    with pytest.raises(ValueError, match="unbalanced"):
        Block("table", "caption", rows=(("a", "b"), ("c", "an *open cell")))
    with pytest.raises(ValueError, match="figcaption.*'bag-caption'"):
        Block("caption", "x", slot="bag-caption", id="bag-caption")
    with pytest.raises(KeyError, match="must be one of"):
        chapters.blocks("no-such-chapter")


# -- every written chapter -------------------------------------------------------------------------------
def test_every_chapter_of_the_manifest_has_its_module():
    """The lesson is written once: each chapter of the manifest is one module, listed in reading order."""
    assert list(chapters.MODULES) == [c.id for c in CHAPTERS]
    for chapter in CHAPTERS:
        module = chapters.MODULES[chapter.id]
        assert callable(module.numbers) and callable(module.prose), chapter.id


def test_the_modules_are_the_manifests_chapters_in_its_order_each_named_by_its_id():
    """MODULES is derived from the manifest: its keys are the manifest's ids in reading order, each
    chapter's module is named by its id (``-`` -> ``_``), and no chapter module is left outside."""
    assert list(chapters.MODULES) == [c.id for c in CHAPTERS]
    for chapter in CHAPTERS:
        assert chapter.module == chapter.id.replace("-", "_")
        assert chapters.MODULES[chapter.id].__name__ == f"posenc.teaching.lesson.chapters.{chapter.module}", chapter.id
    folder = Path(chapters.__file__).parent
    written = sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))
    assert written == sorted(c.module for c in CHAPTERS)
    assert chapters.MODULES["bag-of-tiles"].__name__.endswith(".bag_of_tiles")


def test_a_manifest_chapter_without_its_module_is_a_clear_import_error():
    from posenc.teaching.lesson.manifest import Chapter

    expected = r"chapter 'no-such-chapter' .* posenc\.teaching\.lesson\.chapters\.no_such_chapter"
    with pytest.raises(ImportError, match=expected):
        chapters._modules((CHAPTERS[0], Chapter("no-such-chapter", "Not written")))


#: each chapter's script on the page: static/lesson/chapters/<module>.js
SCRIPTS = Path(chapters.__file__).parents[2] / "explorer" / "static" / "lesson" / "chapters"


def test_every_chapter_has_one_page_script_and_every_page_script_a_chapter():
    """The page imports a chapter's script by the chapter's module name: each chapter of the manifest
    has exactly one (no two chapters share a name), nothing else lies in the folder, and each script
    exports its article's markup and the setup the lesson registers under the chapter's id (it registers
    nothing itself)."""
    assert len({c.module for c in CHAPTERS}) == len(CHAPTERS)
    assert sorted(p.name for p in SCRIPTS.iterdir()) == sorted(f"{c.module}.js" for c in CHAPTERS)
    for chapter in CHAPTERS:
        source = (SCRIPTS / f"{chapter.module}.js").read_text(encoding="utf-8")
        assert re.search(r"^export function setup\(\)", source, re.M), chapter.module
        assert chapter_markup(chapter.id).strip(), chapter.module
        assert "register(" not in source, chapter.module


@pytest.mark.parametrize("bad", ["Advanced", "wrap_up", "wrap--up", "-code", "code-", "two words"])
def test_a_chapter_level_that_is_not_lower_case_words_is_refused(bad):
    from posenc.teaching.lesson.manifest import Chapter

    with pytest.raises(ValueError, match=f"level must be empty or lower-case words .* got {bad!r}"):
        Chapter("a-chapter", "A title", level=bad)


@pytest.mark.parametrize("bad", ["Bag-of-tiles", "bag_of_tiles", "bag--tiles", "-bag", "bag-", ""])
def test_a_chapter_id_that_names_no_module_is_refused(bad):
    from posenc.teaching.lesson.manifest import Chapter

    with pytest.raises(ValueError, match=f"id must be lower-case words .* got {bad!r}"):
        Chapter(bad, "A title")


def test_each_chapter_module_writes_the_checks_the_manifest_lists_under_it():
    """A chapter's CHECKS are the ids its manifest entry names, in that order; every check is written
    once, in one chapter, and the quiz serves exactly those (the very objects)."""
    from posenc.teaching.explorer import quiz

    everywhere = []
    for chapter in CHAPTERS:
        written = tuple(check.id for check in getattr(chapters.MODULES[chapter.id], "CHECKS", ()))
        assert written == chapter.checks, chapter.id
        everywhere += written
    assert len(everywhere) == len(set(everywhere)), everywhere
    assert sorted(quiz.BY_ID) == sorted(everywhere)
    for chapter in CHAPTERS:
        for check in getattr(chapters.MODULES[chapter.id], "CHECKS", ()):
            assert quiz.BY_ID[check.id] is check


def test_written_chapters_are_in_the_manifest_and_the_tour_tells_every_one():
    for chapter in WRITTEN:
        assert chapter in BY_ID
    assert TOLD == WRITTEN  # no chapter is the browser's only
    assert [c.id for c in CHAPTERS if c.tour] == [c.id for c in CHAPTERS]


def test_the_tour_runs_its_sections_in_the_manifests_order():
    """``--section`` names, ``--list`` and the tour's order all come from one list, in reading order."""
    in_manifest = [name for c in CHAPTERS for name in c.tour]
    assert tour.section_names() == in_manifest
    for chapter in CHAPTERS:
        for name in chapter.tour:
            assert tour.select_sections([name])[0].name == name
    buffer = io.StringIO()
    tour.print_list(rich.console.Console(file=buffer, width=200, color_system=None))
    assert "browser only" not in buffer.getvalue()


def test_the_tours_sections_and_titles_are_the_manifests():
    """The tour keeps no list of its own: its sections are the manifest's tour names, in order, each
    titled with its chapter's title (a later part of a chapter told in two, with that part's heading)."""
    assert [s.name for s in tour.SECTIONS] == [name for c in CHAPTERS for name in c.tour]
    assert [s.title for s in tour.SECTIONS] == [title for c in CHAPTERS for title in c.section_titles]
    for chapter in CHAPTERS:
        titles = [s.title for s in tour.SECTIONS if s.name in chapter.tour]
        assert titles[0] == chapter.title, chapter.id
        assert all(t.startswith(f"{chapter.title}: ") for t in titles[1:]), titles
    assert BY_ID["stretching-rope"].section_titles == ("Stretching RoPE", "Stretching RoPE: real model configs")


def test_a_chapter_in_the_manifest_is_told_with_no_code_in_the_tour():
    """Sections that only tell their chapter are made from the manifest; a drawn section's function must
    belong to a section of the manifest."""
    from posenc.teaching.tour.telling import Telling

    made = tour.sections_of(CHAPTERS, drawn={})
    assert [s.name for s in made] == [s.name for s in tour.SECTIONS]
    assert all(isinstance(s.run, Telling) and s.run.chapter == BY_ID[s.run.chapter].id for s in made)
    with pytest.raises(ValueError, match=r"\['nowhere'\].*listed under no chapter"):
        tour.sections_of(CHAPTERS, drawn={"nowhere": print})


def test_a_chapter_told_in_several_sections_names_each_later_part():
    from posenc.teaching.lesson.manifest import Chapter

    with pytest.raises(ValueError, match=r"parts must give a heading.*\('a', 'b'\).*got \(\)"):
        Chapter("two-parts", "Two parts", tour=("a", "b"))
    with pytest.raises(ValueError, match="parts must give a heading"):
        Chapter("one-part", "One part", tour=("a",), parts=("extra",))
    assert Chapter("two-parts", "Two", tour=("a", "b"), parts=("more",)).section_titles == ("Two", "Two: more")
    assert Chapter("none", "None").section_titles == ()


def test_every_chapter_opens_in_plain_words_on_both_faces():
    """Each chapter's text starts with its "plain" block (the idea in everyday words), a kind both the
    tour and the page show, so neither face needs an opening of its own."""
    assert "plain" in IN_TOUR and "plain" in IN_PAGE
    for chapter in CHAPTERS:
        first = chapters.blocks(chapter.id)[0]
        assert first.kind == "plain", (chapter.id, first)


@pytest.fixture(scope="module")
def told(tmp_path_factory):
    """chapter id -> what its tour sections print, at a width that wraps nothing."""
    out = {}
    for chapter in TOLD:
        buffer = io.StringIO()
        console = rich.console.Console(file=buffer, width=200, color_system=None)
        sections = tour.select_sections(BY_ID[chapter].tour)
        tour.run_tour(tmp_path_factory.mktemp(chapter), console=console, sections=sections)
        out[chapter] = buffer.getvalue()
    return out


def sentences(block: Block) -> list[str]:
    """What a reader must find of the block: its text, and each cell of a table."""
    found = [plain(block.text)]
    for row in block.rows:
        found += [plain(cell) for cell in row if cell.strip()]
    return found


@pytest.mark.parametrize("chapter", TOLD)
def test_the_tour_prints_every_sentence_of_the_chapter(told, chapter):
    """Every block the tour tells (all but the page figures' captions) is printed, every table cell too."""
    text = flowing(told[chapter])
    for block in chapters.blocks(chapter):
        if block.kind not in IN_TOUR:
            continue
        for sentence in sentences(block):
            if block.kind == "h3" and block.slot.endswith("-heading"):  # a part's heading: the section's title
                assert flowing(sentence).lower() in text.lower(), (chapter, sentence)
                continue
            assert flowing(sentence) in text, (chapter, sentence)


def test_the_tour_skips_the_page_figures_captions_and_points_to_the_workbench(told):
    """A caption says what the page's figure shows, and the tour draws figures of its own: it never prints
    one. A see-also line is printed after "In posenc explore:"."""
    assert IN_TOUR == set(KINDS) - {"caption"}
    captions = see_also = 0
    for chapter in TOLD:
        text = flowing(told[chapter])
        for block in chapters.blocks(chapter):
            if block.kind == "caption":
                captions += 1
                assert flowing(plain(block.text)) not in text, (chapter, block.slot)
            if block.kind == "see-also":
                see_also += 1
                assert f"{SEE_ALSO_LABEL} {flowing(plain(block.text))}" in text, (chapter, block.text)
    assert captions >= 20 and see_also >= 7, (captions, see_also)


@pytest.mark.parametrize("chapter", WRITTEN)
def test_the_api_sends_the_chapter_module_text(chapter):
    client = TestClient(create_app(), base_url="http://127.0.0.1")
    response = client.get(f"/api/lesson/prose/{chapter}")
    assert response.status_code == 200, response.text
    assert response.json()["blocks"] == [as_dict(b) for b in chapters.blocks(chapter) if b.kind in IN_PAGE]


def test_the_page_never_gets_a_note_on_the_tours_figure_files():
    """A note on a PNG that `posenc tour` writes describes a figure the page does not show: the page never
    receives one (and no sentence it receives names a .png), while the tour prints every one of them."""
    assert IN_PAGE == set(KINDS) - {"tour-figure"}
    client = TestClient(create_app(), base_url="http://127.0.0.1")
    notes = 0
    for chapter in WRITTEN:
        notes += sum(b.kind == "tour-figure" for b in chapters.blocks(chapter))
        for block in client.get(f"/api/lesson/prose/{chapter}").json()["blocks"]:
            assert block["kind"] != "tour-figure" and ".png" not in block["plain"], (chapter, block["plain"])
    assert notes >= 4
    assert "tour-figure" in IN_TOUR


def test_a_chapter_not_in_the_manifest_is_a_404_naming_the_chapters():
    client = TestClient(create_app(), base_url="http://127.0.0.1")
    missing = client.get("/api/lesson/prose/no-such-chapter")
    assert missing.status_code == 404
    assert "no-such-chapter" in missing.json()["detail"] and "bag-of-tiles" in missing.json()["detail"]


# -- the page, in a real browser -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def page_texts():
    """chapter id -> the text the page shows in its data-prose slots, rendered by the browser."""
    path = chromium_or_skip()
    texts, slots = {}, {}
    parts.clear()
    with explore_server() as url, headless_chromium(path) as browser:
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda err: errors.append(str(err)))
        for chapter in WRITTEN:
            page.goto(f"{url}#{chapter}")
            page.wait_for_selector(f"#ch-{chapter}[data-prose='ready']", timeout=30_000)
            texts[chapter] = page.evaluate(
                "(id) => [...document.querySelectorAll(`#ch-${id} [data-prose]`)].map((n) => n.innerText).join(' ')",
                chapter,
            )
            parts[chapter] = page.evaluate(PARTS, chapter)
            # the places for the text, in the order the rendered article holds them
            slots[chapter] = page.eval_on_selector_all(
                f"#ch-{chapter} [data-prose]", "(ns) => ns.map((n) => n.dataset.prose)"
            )
        context.close()
        assert errors == [], errors
    return texts, slots


#: chapter id -> what the page shows of its captions, see-also lines and prose tables (filled by page_texts)
parts: dict[str, dict] = {}
PARTS = r"""(id) => {
  const chapter = document.querySelector(`#ch-${id}`), words = (n) => n.textContent.replace(/\s+/g, ' ').trim();
  return {
    captions: Object.fromEntries([...chapter.querySelectorAll('figcaption')].map((n) =>
      [n.dataset.prose || n.id, words(n)])),
    seeAlso: [...chapter.querySelectorAll('.see-also')].map(words),
    tables: Object.fromEntries([...chapter.querySelectorAll(`#ch-${id} [data-prose] table`)].map((t) =>
      [t.closest('[data-prose]').dataset.prose,
       { caption: words(t.caption), rows: [...t.rows].map((r) => [...r.cells].map(words)) }])),
  }; }"""


@pytest.mark.slow
@pytest.mark.parametrize("chapter", WRITTEN)
def test_the_pages_captions_see_also_and_tables_are_the_chapter_modules(page_texts, chapter):
    """In the browser, every <figcaption> of the chapter says its caption block, every see-also line its
    see-also block and every prose table its table block, cell for cell (a page's live column, appended
    after the block's columns, aside); nothing of these is the page's own."""
    shown = parts[chapter]
    blocks = chapters.blocks(chapter)
    assert shown["captions"] == {b.slot: flowing(plain(b.text)) for b in blocks if b.kind == "caption"}
    assert shown["seeAlso"] == [flowing(plain(b.text)) for b in blocks if b.kind == "see-also"]
    tables = {b.slot: b for b in blocks if b.kind == "table"}
    assert set(shown["tables"]) == set(tables)
    for slot, block in tables.items():
        table = shown["tables"][slot]
        assert table["caption"] == flowing(plain(block.text)), slot
        columns = len(block.rows[0])
        assert [row[:columns] for row in table["rows"]] == [[flowing(plain(c)) for c in r] for r in block.rows]


@pytest.mark.slow
@pytest.mark.parametrize("chapter", WRITTEN)
def test_the_page_and_the_tour_carry_the_same_sentences_and_numbers(request, page_texts, chapter):
    on_page = flowing(page_texts[0][chapter])
    for block in chapters.blocks(chapter):
        if block.kind not in IN_PAGE:
            continue  # a note on one of the tour's figure files
        for sentence in sentences(block):
            assert flowing(sentence) in on_page, (chapter, sentence)
    if chapter not in TOLD:
        return  # the browser's only: its sentences are checked above
    told = request.getfixturevalue("told")
    # every number the tour prints for the chapter (but its title's and the figure files') is on the page
    printed = "\n".join(
        line
        for line in told[chapter].splitlines()
        if not line.startswith(("─", "figure written:")) and "──" not in line
    )
    # the notes on the tour's figure files are the tour's only
    tour_only = set().union(
        *(numbers_in(plain(b.text)) for b in chapters.blocks(chapter) if b.kind not in IN_PAGE), set()
    )
    missing = numbers_in(printed) - tour_only - numbers_in(on_page)
    assert not missing, sorted(missing)


# -- the page's places for the text ----------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("chapter", WRITTEN)
def test_the_page_has_one_place_per_slot_in_the_tours_reading_order(page_texts, chapter):
    """Read from the article as the browser renders it (the page writes it from the manifest and the
    chapter's script): every slot the chapter's blocks name has exactly one element, and every element
    is a slot they name."""
    on_page = page_texts[1][chapter]
    assert len(on_page) == len(set(on_page)), on_page
    named = list(dict.fromkeys(b.slot for b in chapters.blocks(chapter)))
    assert on_page == named  # every slot filled, none missing, and read in the order the tour prints


def test_every_chapter_of_the_manifest_is_written_once_here():
    """The lesson has one text: every chapter the manifest lists is a module, and the markup its script
    exports for its article takes that module's text through prose slots."""
    assert sorted(chapters.MODULES) == sorted(c.id for c in CHAPTERS)
    for chapter in CHAPTERS:
        assert "data-prose" in chapter_markup(chapter.id), chapter.id


def test_alibi_chapter_states_what_its_figure_draws():
    """Chapter 9's sentences about the steep and shallow heads are the figure's own weights."""
    from posenc.teaching.lesson.chapters import alibi_penalty as chapter
    from posenc.teaching.lesson.chapters.alibi_penalty import alibi_penalty

    n = chapters.numbers("alibi-penalty")
    assert (
        n["alibi.head0.bias_at_distance"]
        == alibi_penalty(chapter.HEADS, chapter.DISTANCE)["rows"][0]["bias_at_distance"]
    )
    drawn = alibi_penalty(chapter.HEADS, chapter.FAR)["rows"]
    steep, shallow = drawn[0]["weights"], drawn[-1]["weights"]
    assert sum(steep[-chapter.NEAREST :]) == pytest.approx(n["alibi.far.steep_nearest"], abs=1e-12)
    assert sum(shallow[-chapter.NEAREST :]) == pytest.approx(n["alibi.far.shallow_nearest"], abs=1e-12)
    # "nearly all" near for the steep head, "almost evenly" for the shallow one
    assert n["alibi.far.steep_nearest"] > 0.8
    assert (
        max(shallow) / min(shallow) == pytest.approx(n["alibi.far.shallow_spread"])
        and n["alibi.far.shallow_spread"] < 1.5
    )


def test_comparison_chapter_states_what_its_table_computes():
    """Chapter 10's "only the learned table stops" is the table's own live column at both lengths."""
    from posenc.teaching.lesson.chapters import comparison as chapter
    from posenc.teaching.lesson.chapters.comparison import compare

    n = chapters.numbers("comparison")
    assert n["compare.trained"] == compare(1)["trained_len"]
    for length in chapter.LENGTHS:
        live = [row["scheme"] for row in compare(length)["schemes"] if row["reads"]]
        assert n[f"compare.reads.{length}"] == live
    assert set(n["compare.reads.512"]) - set(n["compare.reads.576"]) == {"learned"}


def test_pytorch_demo_chapter_states_what_the_demo_prints(capsys):
    """Chapter 11's "0.65457 four times" and its try-this are what the demo itself prints."""
    from posenc.teaching.lesson.chapters.pytorch_demo import pytorch_demo

    n = chapters.numbers("pytorch-demo")
    for shift in (100, 10_000):
        pytorch_demo(shift=shift)
        printed = capsys.readouterr().out
        scores = re.findall(r"seats \d+ and \d+: (-?\d\.\d{5})", printed)
        assert scores.count(f"{n['demo.score']:.5f}") == 4, printed
        assert f"{n[f'demo.score.moved.{shift}']:.5f}" == f"{n['demo.score']:.5f}"


def test_knowledge_checks_chapter_states_float_spacing_from_the_formats():
    """Chapter 12's float32 step near a million seats is one unit in the last place: 2^(e - 23), 2^(e - 52)."""
    import math

    n = chapters.numbers("knowledge-checks")
    exponent = math.floor(math.log2(n["checks.seat"]))
    assert n["checks.spacing.float32"] == 2.0 ** (exponent - 23) == 0.0625
    assert n["checks.spacing.float64"] == 2.0 ** (exponent - 52)


# -- nothing of the lesson's text is written only on the page ----------------------------------------------
#: where an article may hold text of its own: its heading (the manifest's title), the figures' controls
#: and the labels of their live readouts; every other word comes through a data-prose slot
STRUCTURAL = {"h2", "label", "option", "button", "output"}
STRUCTURAL_CLASSES = {"score-readout"}


class _OutsideSlots(HTMLParser):
    """The words of one article that are neither in a data-prose slot nor structural, and its heading."""

    VOID = {"br", "img", "input", "meta", "link", "hr", "source", "wbr"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.open: list[tuple[str, bool]] = []  # (tag, whether text inside it may stand here)
        self.outside: list[str] = []
        self.heading = ""

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        names = dict(attrs)
        allowed = (
            tag in STRUCTURAL
            or "data-prose" in names
            or bool(STRUCTURAL_CLASSES & set((names.get("class") or "").split()))
        )
        self.open.append((tag, allowed))

    def handle_endtag(self, tag):
        while self.open and self.open.pop()[0] != tag:
            pass

    def handle_data(self, data):
        if not data.strip():
            return
        if self.open and self.open[-1][0] == "h2":
            self.heading += data
        if not any(allowed for _, allowed in self.open):
            self.outside.append(" ".join(data.split()))


@pytest.mark.parametrize("chapter", WRITTEN)
def test_no_article_holds_lesson_text_outside_its_prose_slots(chapter):
    """Captions, see-also lines and the comparison's table were written into the page's markup only,
    where the tour could not tell them; now an article's own words are its heading (the manifest's
    title) and its controls' labels (the markup its script exports): everything else is the chapter
    module's."""
    parser = _OutsideSlots()
    parser.feed(article(chapter))
    assert parser.outside == [], parser.outside
    assert " ".join(parser.heading.split()) == BY_ID[chapter].title


def test_every_lesson_figcaption_and_see_also_is_a_prose_slot_of_its_kind():
    """Each figure's <figcaption> is filled by the chapter's caption block of the same name (and keeps
    its id, which the figure's aria-labelledby names); each see-also slot by a see-also block."""
    for chapter in WRITTEN:
        html = article(chapter)
        kinds = {b.slot: b.kind for b in chapters.blocks(chapter)}
        for caption_id, slot in re.findall(r'<figcaption id="([a-z-]+)" data-prose="([a-z0-9-]+)">', html):
            assert caption_id == slot and kinds[slot] == "caption", (chapter, slot)
            assert f'aria-labelledby="{caption_id}"' in html, (chapter, caption_id)
        assert html.count("<figcaption") == len(re.findall(r"<figcaption [^>]*data-prose=", html)), chapter
        assert [s for s, k in kinds.items() if k == "caption"] == re.findall(
            r'<figcaption [^>]*data-prose="([^"]+)"', html
        )
        assert ("see-also" in kinds) == ('data-prose="see-also"' in html), chapter


def test_the_comparison_table_is_the_chapter_modules_one_per_scheme_in_the_order_the_figure_lists_them():
    """One table, one source: the page's table and the tour's are the chapter's table block, whose rows are
    the schemes in the order the live column (``compare``) fills them; its trainable numbers are posenc's."""
    from posenc.teaching.lesson.chapters.comparison import HEADER, ROWS, SCHEMES, compare

    (table,) = [b for b in chapters.blocks("comparison") if b.kind == "table"]
    assert table.rows[0] == HEADER and [row[0] for row in table.rows[1:]] == [ROWS[s][0] for s in SCHEMES]
    live = compare(1024)["schemes"]
    assert [row["scheme"] for row in live] == list(SCHEMES)
    column = HEADER.index("extra trainable numbers")
    assert [int(row[column].replace(",", "")) for row in table.rows[1:]] == [r["extra_parameters"] for r in live]


#: a chapter as a contributor adds one: its manifest entry and its module, and nothing else in Python
ADDED_CHAPTER = r'''
import io, json, sys, types
import rich.console
import posenc.teaching.lesson.manifest as manifest

extra = manifest.Chapter("counting-seats", "Counting seats", tour=("counting",), level="test")
manifest.CHAPTERS = manifest.CHAPTERS + (extra,)
module = types.ModuleType("posenc.teaching.lesson.chapters.counting_seats")
exec("""
from posenc.teaching.lesson.prose import Block
FIGURE_RANGES = {"count_seat": (0, 50, 7, "the seat counted to")}
def count(count_seat: int = 7) -> dict:
    return {"seat": count_seat, "seats_before": count_seat}
FIGURES = {"count": count}
def numbers():
    return {"counting.before_seven": 7}
def prose(n):
    return [Block("plain", "Every word counts the words before it.", "intro"),
            Block("p", f"Seat 7 has {n['counting.before_seven']} words before it.", "intro")]
""", module.__dict__)
sys.modules[module.__name__] = module

import posenc.teaching.tour as tour
from fastapi.testclient import TestClient
from posenc.teaching.explorer.app import create_app

buffer = io.StringIO()
tour.run_tour(sys.argv[1], console=rich.console.Console(file=buffer, width=200, color_system=None),
              sections=tour.select_sections(["counting"]))
with TestClient(create_app(allowed_hosts=None)) as client:
    listed = client.get("/api/lesson/chapters").json()["chapters"][-1]
    prose = client.get("/api/lesson/prose/counting-seats").json()
    figure = client.get("/api/lesson/count", params={"count_seat": 12}).json()
    refused = client.get("/api/lesson/count", params={"count_seat": 51})
print(json.dumps({"section": [tour.SECTIONS[-1].name, tour.SECTIONS[-1].title], "printed": buffer.getvalue(),
                  "listed": listed, "prose": [b["plain"] for b in prose["blocks"]], "figure": figure,
                  "refused": [refused.status_code, refused.json()["detail"]]}))
'''


def test_a_chapter_is_added_with_its_manifest_entry_and_one_module(tmp_path):
    """Adding a chapter as the docs say: a manifest entry and a module with numbers, prose and a figure
    (the page script is the third file) give the tour its section, the page its entry, text and route,
    with no other code; run in a fresh interpreter, where the entry is added before anything reads it."""
    import json
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", ADDED_CHAPTER, str(tmp_path)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["section"] == ["counting", "Counting seats"]
    printed = flowing(got["printed"])
    assert f"{len(tour.SECTIONS) + 1}. Counting seats" in printed
    assert "In plain words: Every word counts the words before it. Seat 7 has 7 words before it." in printed
    assert got["listed"]["id"] == "counting-seats" and got["listed"]["module"] == "counting_seats"
    assert got["listed"]["tour"] == ["counting"]
    assert got["prose"] == ["Every word counts the words before it.", "Seat 7 has 7 words before it."]
    assert got["figure"] == {"seat": 12, "seats_before": 12}
    assert got["refused"][0] == 422 and "seat" in got["refused"][1] and "51" in got["refused"][1]
