"""The guided lesson's API glue: the limits its figures' query parameters accept, and its chapter list.

The lesson itself is written once, in :mod:`posenc.teaching.lesson.chapters`: each chapter's module holds its
text, its numbers, its figure functions in ``FIGURES`` (each served by a route that
:mod:`posenc.teaching.explorer.routers.lesson` makes from it) with ``FIGURE_RANGES``, and its knowledge checks.
This module turns those ranges into the API's :data:`LESSON_LIMITS` (published by
``GET /api/lesson/chapters``, which the page's sliders stay inside)
and lists the chapters of :mod:`posenc.teaching.lesson.manifest` with the sections of the source lesson each
one retells (:data:`SOURCE_SECTIONS`).

Every figure's computation is small: measured on one CPU core with every parameter at its maximum, the
heaviest is :func:`posenc.teaching.lesson.chapters.three_rules.three_rules` (2048 positions compared pairwise,
about 0.5 s); :func:`posenc.teaching.lesson.chapters.common_mistakes.mistakes` (ten Adam steps of a one-layer
model) takes about 0.2 s and everything else a few milliseconds.
"""

from __future__ import annotations

from ..lesson.chapters import figure_ranges
from ..lesson.manifest import CHAPTERS
from .limits import Limit

#: query parameter name -> its limit, for the lesson's endpoints (integers unless the default is a float):
#: every chapter's FIGURE_RANGES, in the manifest's order
LESSON_LIMITS: dict[str, Limit] = {name: Limit(*declared) for name, declared in figure_ranges().items()}


def limits_dict() -> dict:
    return {name: limit.to_dict() for name, limit in LESSON_LIMITS.items()}


# -- chapters ------------------------------------------------------------------------------------
# The chapter list is the lesson's one manifest (posenc.teaching.lesson.manifest): the page's contents, routes
# and pager, and `posenc tour --list`, come from it.
#: each section of the lesson this course retells -> the chapter that covers it
SOURCE_SECTIONS: dict[str, str] = {
    "The core idea": "bag-of-tiles",
    "The bag of Scrabble tiles problem": "bag-of-tiles",
    "The fix: a seat-number vector": "word-plus-position",
    "Why simple seat numbers fail": "bad-ideas",
    "Bad idea 1: raw integers": "bad-ideas",
    "Bad idea 2: fractions from 0 to 1": "bad-ideas",
    "The three rules": "three-rules",
    "Knowledge check: how encodings combine": "word-plus-position",
    "Sinusoidal encodings (the hands of a clock)": "clock-hands",
    "The wave formulas (even and odd sliders)": "clock-hands",
    "Learned positional embeddings (BERT, GPT-2)": "learned-tables",
    "Method comparison table": "comparison",
    "Knowledge check: BERT and 600 tokens": "learned-tables",
    "RoPE: rotary position embeddings": "rope",
    "Why rotating beats adding": "rope",
    "Context extension (NTK-aware, YaRN)": "stretching-rope",
    "Knowledge check: the relative angle": "rope",
    "Visual: the wave fingerprint": "clock-hands",
    "Visual: the RoPE clock dials": "rope",
    "Visual: dog bit man vs man bit dog": "rope",
    "Python implementation in PyTorch": "pytorch-demo",
    "Key points": "big-picture",
    "Common mistakes": "common-mistakes",
    "The big picture": "big-picture",
}


def chapters() -> dict:
    return {
        "chapters": [
            {
                "id": c.id,
                "title": c.title,
                "level": c.level,
                # the page imports the chapter's script by this name: static/lesson/chapters/<module>.js
                "module": c.module,
                "checks": list(c.checks),
                "tour": list(c.tour),
            }
            for c in CHAPTERS
        ],
        "sources": SOURCE_SECTIONS,
    }


__all__ = ["LESSON_LIMITS", "SOURCE_SECTIONS", "chapters", "limits_dict"]
