"""The lesson page's files as the server sends them, read without a browser.

``index.html`` holds the lesson's frame (contents, progress, pager, an empty main); each chapter's
article is written by the page from the manifest (its kicker and heading) and by the chapter's script,
``static/lesson/chapters/<module>.js``, which exports the rest as ``markup``. :func:`chapter_markup` reads
that markup from the script and :func:`page_html` puts the articles where the page puts them, so tests
that read the page's text or attributes read every chapter where it lives.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import posenc.explorer
from posenc.lesson.manifest import CHAPTERS

STATIC = Path(posenc.explorer.__file__).parent / "static"
INDEX = STATIC / "index.html"
SCRIPTS = STATIC / "lesson" / "chapters"

#: `export const markup = `...`;`: a template literal without substitutions, so its text is the markup
_MARKUP = re.compile(r"^export const markup = `(.*?)`;$", re.S | re.M)


def chapter_markup(chapter_id: str) -> str:
    """The markup chapter ``chapter_id``'s script exports (what the page puts under its heading)."""
    module = next(c.module for c in CHAPTERS if c.id == chapter_id)
    source = (SCRIPTS / f"{module}.js").read_text(encoding="utf-8")
    found = _MARKUP.findall(source)
    assert len(found) == 1, f"{module}.js must export its markup once as a template literal"
    (markup,) = found
    assert "${" not in markup and "\\" not in markup, f"{module}.js: its markup must be plain text"
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
