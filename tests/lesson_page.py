"""The lesson page's files as the server sends them, read without a browser.

``index.html`` holds the lesson's frame (contents, progress, pager, an empty main); each chapter's
article is written by the page from the manifest (its kicker and heading) and by the chapter's script,
``static/lesson/chapters/<module>.js``, which exports the rest as ``markup`` (built with core.js's markup
helpers). :func:`chapter_markup` runs the scripts in Node.js to read that markup as the page gets it, and
:func:`page_html` puts the articles where the page puts them, so tests that read the page's text or
attributes read every chapter where it lives.
"""

from __future__ import annotations

import functools
import html
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import posenc.teaching.explorer
from posenc.teaching.lesson.manifest import CHAPTERS
from posenc.teaching.lesson.palette import module_source

STATIC = Path(posenc.teaching.explorer.__file__).parent / "static"
INDEX = STATIC / "index.html"
SCRIPTS = STATIC / "lesson" / "chapters"

#: imports every chapter script (argv: the copied static folder, then the modules) and prints their markup
_READ_MARKUP = """
const [folder, ...modules] = process.argv.slice(1);
const markup = {};
for (const name of modules) markup[name] = (await import(`${folder}/lesson/chapters/${name}.js`)).markup;
process.stdout.write(JSON.stringify(markup));
"""


def node() -> str:
    """A Node.js to run the page's scripts: the one on PATH, else the one Playwright (a test dependency)
    ships to drive the browser."""
    found = shutil.which("node")
    if found:
        return found
    import playwright

    bundled = Path(playwright.__file__).parent / "driver" / "node"
    if not bundled.is_file():
        raise RuntimeError("reading the chapters' markup needs Node.js: none on PATH, and Playwright ships none")
    return str(bundled)


@functools.lru_cache(maxsize=None)
def _all_markup() -> dict:
    """Every chapter script's ``markup``, by module name, as the page's browser gets it: the static folder
    copied with the palette's tables the server writes (``palette-tables.js``) beside it."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "static"
        shutil.copytree(STATIC, folder)
        (folder / "palette-tables.js").write_text(module_source(), encoding="utf-8")
        (folder / "package.json").write_text('{"type": "module"}', encoding="utf-8")
        modules = [c.module for c in CHAPTERS]
        done = subprocess.run(
            [node(), "--input-type=module", "-e", _READ_MARKUP, folder.as_uri(), *modules],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"the chapter scripts did not load in Node.js:\n{done.stderr}"
        return json.loads(done.stdout)


def chapter_markup(chapter_id: str) -> str:
    """The markup chapter ``chapter_id``'s script exports (what the page puts under its heading)."""
    module = next(c.module for c in CHAPTERS if c.id == chapter_id)
    markup = _all_markup().get(module)
    assert isinstance(markup, str), f"{module}.js must export its markup as a string, got {markup!r}"
    return markup


def article(chapter_id: str) -> str:
    """Chapter ``chapter_id``'s article as the page builds it (kicker left empty, as before its number)."""
    chapter = next(c for c in CHAPTERS if c.id == chapter_id)
    return (
        f'<article class="chapter" id="ch-{chapter.id}" data-chapter="{chapter.id}" data-renders="0" hidden>\n'
        f'  <p class="kicker"></p>\n  <h2>{html.escape(chapter.title)}</h2>\n'
        f"{chapter_markup(chapter.id)}</article>\n"
    )


def page_html() -> str:
    """``index.html`` with every chapter's article before the lesson's pager, in the manifest's order."""
    page = INDEX.read_text(encoding="utf-8")
    pager = '<nav class="pager"'
    assert page.count(pager) == 1, "index.html has one lesson pager"
    articles = "".join(article(c.id) + "\n" for c in CHAPTERS)
    return page.replace(pager, articles + pager)
