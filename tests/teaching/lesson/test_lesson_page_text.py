"""What the page's own files say, read as the server sends them (no browser, no JavaScript run).

A sentence written into the page's markup (``index.html``, and each lesson chapter's ``markup`` in its
script) must be true before any script runs, and text that the scripts used to overwrite at load is not
left behind; a command the lesson's text tells the reader to run is run here.
The scripts are read for what a browser test cannot enumerate: every one that draws the sign map
draws its legend too.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from lesson_page import chapter_markup, page_html

import posenc.teaching.explorer

INDEX = Path(posenc.teaching.explorer.__file__).parent / "static" / "index.html"
SRC = Path(posenc.teaching.explorer.__file__).parents[3]


class _TextOf(HTMLParser):
    """The text inside every element whose id or class is asked for (nested elements included)."""

    def __init__(self, wanted: set[str]):
        super().__init__(convert_charrefs=True)
        self.wanted = wanted
        self.open: list[tuple[str, str | None]] = []  # (tag, the wanted name it opened, if any)
        self.text: dict[str, list[str]] = {}

    def handle_starttag(self, tag, attrs):
        names = {f"#{v}" for k, v in attrs if k == "id" and v}
        names |= {f".{c}" for k, v in attrs if k == "class" and v for c in v.split()}
        hit = next((n for n in names if n in self.wanted), None)
        if hit is not None:
            self.text.setdefault(hit, []).append("")
        if tag not in {"br", "img", "input", "meta", "link", "hr", "source", "wbr"}:
            self.open.append((tag, hit))

    def handle_endtag(self, tag):
        while self.open:
            open_tag, _ = self.open.pop()
            if open_tag == tag:
                break

    def handle_data(self, data):
        for _, hit in self.open:
            if hit is not None:
                self.text[hit][-1] += data


def page_text(*selectors: str) -> dict[str, list[str]]:
    parser = _TextOf(set(selectors))
    parser.feed(page_html())
    return parser.text


@pytest.mark.slow  # a subprocess that imports torch
def test_the_demo_caption_command_runs_and_prints_the_score_the_caption_states():
    """The demo's caption (the chapter module's caption block, which the page puts into #demo-caption)
    tells the reader to run a command and says what it prints: run here, it prints exactly that."""
    import re

    from posenc.teaching.lesson import chapters
    from posenc.teaching.lesson.chapters.pytorch_demo import RUN_IT
    from posenc.teaching.lesson.prose import spans

    assert '<figcaption id="demo-caption" data-prose="demo-caption"></figcaption>' in chapter_markup("pytorch-demo")
    (caption,) = [b for b in chapters.blocks("pytorch-demo") if b.slot == "demo-caption"]
    assert caption.kind == "caption"
    assert RUN_IT in [span["text"] for span in spans(caption.text) if span["style"] == "code"]
    stated = re.search(
        r"prints the score (-?\d\.\d{5}) for seats (\d+) and (\d+) and again for seats (\d+) and (\d+)\.",
        " ".join(caption.text.split()),
    )
    assert stated, caption.text
    score, *seats = stated.groups()
    argv = shlex.split(RUN_IT)
    assert argv[:2] == ["python", "-c"], f"the caption's command is not a `python -c` line: {RUN_IT!r}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))}
    env["OMP_NUM_THREADS"] = "1"
    done = subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, f"`{RUN_IT}` failed:\n{done.stderr}"
    printed_scores = [line.rsplit(":", 1)[1].strip() for line in done.stdout.splitlines() if line.startswith("score")]
    assert printed_scores and set(printed_scores) == {score}, done.stdout
    for a, b in (seats[:2], seats[2:]):
        assert f"score, seats {a} and {b}: {score}" in done.stdout, done.stdout


def test_the_dials_texts_are_written_once_on_the_page_with_the_sign_the_view_draws():
    """The workbench's dials lede and sign note were written twice, in index.html and in dials.js, which
    replaced them at load; the page's copy said the opposite sign (key seat minus query seat)."""
    found = page_text("#view-dials", "#wo-sign-note")
    note = " ".join(found["#wo-sign-note"][0].split())
    assert "(query seat − key seat)·θ" in note and "+30°" in note and "counter-clockwise" in note
    assert "key seat minus" not in " ".join(found["#view-dials"][0].split())
    scripts = "\n".join(p.read_text(encoding="utf-8") for p in (INDEX.parent).rglob("*.js"))
    assert "wo-sign-note" not in scripts and '".lede"' not in scripts, "a script rewrites text the page holds"


def test_every_script_that_draws_the_sign_map_draws_its_legend():
    """The sign map (palette.js diverging, divergingRGB, SIGN_COLOURS; charts.js barRow) is never drawn
    without a legend: a script that draws with it also calls one of charts.js's sign legends."""
    import re

    uses = re.compile(r"\b(diverging|divergingRGB|SIGN_COLOURS|barRow)\b")
    legends = re.compile(r"\b(signLegend|signScale|signKey)\(")
    static = INDEX.parent
    drawing = {}
    for path in sorted(static.rglob("*.js")):
        name = path.relative_to(static).as_posix()
        if name in {"palette.js", "charts.js"}:  # where the map and its legends are defined
            continue
        code = path.read_text(encoding="utf-8")
        if uses.search(code):
            drawing[name] = bool(legends.search(code))
    expected = {"views/fingerprint.js", "views/dials.js", "views/alibi.js", "lesson/chapters/bag_of_tiles.js"}
    assert expected <= set(drawing)
    assert all(drawing.values()), [name for name, ok in drawing.items() if not ok]
