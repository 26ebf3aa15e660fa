"""Every section of the lesson the explorer retells is covered by a chapter that exists on the page.

The list below is the source lesson's outline, section by section, each paired with the chapter of
``posenc explore`` that tells it. Remove a chapter, or a section's mapping, and this test fails. With
``$POSENC_SEED_LESSON`` pointing at the source lesson's text, its closing table of contents is read
as well, and every heading there must be one of the sections below.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from lesson_page import article

from posenc.teaching.explorer import lesson
from posenc.teaching.lesson import chapters
from posenc.teaching.lesson.manifest import CHAPTERS

#: the source lesson's sections, in its order -> a fragment of its heading, for matching its outline
OUTLINE = {
    "The core idea": "Core Idea",
    "The bag of Scrabble tiles problem": "Scrabble Tiles",
    "The fix: a seat-number vector": 'Seat Number" Vector',
    "Why simple seat numbers fail": "Simple Seat Numbers",
    "Bad idea 1: raw integers": "Raw Integers",
    "Bad idea 2: fractions from 0 to 1": "Fractions",
    "The three rules": "3 Rules",
    "Knowledge check: how encodings combine": "Meaning Embedding",
    "Sinusoidal encodings (the hands of a clock)": "Hands of a Clock",
    "The wave formulas (even and odd sliders)": "Wave Formulas",
    "Learned positional embeddings (BERT, GPT-2)": "Learned Positional Embeddings",
    "Method comparison table": "Famous Models",
    "Knowledge check: BERT and 600 tokens": "600-token",
    "RoPE: rotary position embeddings": "RoPE (Rotary Position Embeddings)",
    "Why rotating beats adding": "Rotating Beats Adding",
    "Context extension (NTK-aware, YaRN)": "Context Extension",
    "Knowledge check: the relative angle": "angle difference",
    "Visual: the wave fingerprint": "Wave Fingerprint",
    "Visual: the RoPE clock dials": "Clock Dials",
    "Visual: dog bit man vs man bit dog": "Dog Bit Man",
    "Python implementation in PyTorch": "Python Implementation",
    "Key points": "Key Points",
    "Common mistakes": "Common Mistakes",
    "The big picture": "The Big Picture",
}


def chapter_html(chapter_id: str) -> str:
    return article(chapter_id) if chapter_id in {c.id for c in CHAPTERS} else ""


@pytest.mark.parametrize("section", list(OUTLINE))
def test_each_source_section_maps_to_a_chapter_on_the_page(section):
    assert section in lesson.SOURCE_SECTIONS, f"no chapter covers the section {section!r}"
    chapter = lesson.SOURCE_SECTIONS[section]
    assert chapter in [c.id for c in CHAPTERS]
    body = chapter_html(chapter)
    assert body, f"chapter {chapter!r} (covering {section!r}) is missing from the page"
    written = chapters.MODULES.get(chapter)
    tries = 'class="try"' in body or (written and any(b.kind == "try" for b in chapters.blocks(chapter)))
    assert tries, f"chapter {chapter!r} has no 'try this' prompt"
    assert re.search(r"data-primary\b", body) or "data-primary-checks" in body, f"chapter {chapter!r} has no control"


def test_no_section_is_mapped_that_the_outline_lacks():
    assert set(lesson.SOURCE_SECTIONS) == set(OUTLINE)


def test_chapters_follow_the_source_order():
    ids = [c.id for c in CHAPTERS]
    first_seen = [lesson.SOURCE_SECTIONS[s] for s in OUTLINE]
    # the chapters that tell the story proper appear in the order of the sections they retell
    story = [
        c
        for c in dict.fromkeys(first_seen)
        if c not in ("comparison", "pytorch-demo", "big-picture", "common-mistakes")
    ]
    assert story == [c for c in ids if c in story]


def test_the_source_outline_is_covered_when_available():
    path = os.environ.get("POSENC_SEED_LESSON")
    if not path:
        pytest.skip("set POSENC_SEED_LESSON to the source lesson's text to compare its outline")
    text = Path(path).read_text(encoding="utf-8")
    outline = [
        line.strip()
        for line in text.split("Positional Encodings: How Transformers Know Word Order")[-1].splitlines()
        if line.strip()
    ]
    assert len(outline) >= 10
    for heading in outline:
        assert any(fragment.lower() in heading.lower() for fragment in OUTLINE.values()), (
            f"the source section {heading!r} is not mapped to a chapter"
        )
    for fragment in OUTLINE.values():
        assert fragment.lower() in text.lower(), f"{fragment!r} no longer occurs in the source lesson"
