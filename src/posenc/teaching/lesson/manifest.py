"""The lesson's chapters, in reading order: its one manifest.

The explorer builds its table of contents, chapter articles (kicker and heading), chapter numbers,
routes (the URL hash is a chapter's id) and pager from :data:`CHAPTERS`; ``posenc tour`` makes its
sections, their names and titles, from it, and ``posenc tour --list`` prints it with the sections that
tell each chapter in the terminal. Adding a chapter is one entry
here, one Python module named by its id (:attr:`Chapter.module`, in :mod:`posenc.teaching.lesson.chapters`: its
text, numbers, checks and figure functions in ``FIGURES``, from which the explorer's API routes are
made), one page script of the same name (``posenc/teaching/explorer/static/lesson/chapters/<module>.js``: the
article's markup and its ``setup()``), and their tests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Chapter:
    """One chapter of the lesson.

    Attributes:
        id: the URL hash that names it in ``posenc explore``.
        title: its heading.
        checks: ids of the knowledge checks shown inline, in their order; the chapter's module writes
            them (its ``CHECKS``, in this order) and ``posenc.teaching.explorer.quiz`` serves them.
        tour: names of the ``posenc tour`` sections that tell it in the terminal (every chapter has one);
            ``posenc tour`` makes its sections from these names, in this order.
        parts: for a chapter told in several sections, the headings of the second and later ones (one per
            name after the first of :attr:`tour`); see :attr:`section_titles`.
        level: who it is for, one word after its number on the page's kicker ("Chapter 7 · advanced");
            empty for none.

    Its text lives in the module :attr:`module` of :mod:`posenc.teaching.lesson.chapters`, named by its id.
    """

    id: str
    title: str
    checks: tuple[str, ...] = ()
    tour: tuple[str, ...] = ()
    level: str = ""
    parts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)*", self.id):
            raise ValueError(
                f"id must be lower-case words of letters and digits joined by single hyphens, got {self.id!r}"
            )
        if not re.fullmatch(r"([a-z]+(-[a-z]+)*)?", self.level):
            raise ValueError(
                f"level must be empty or lower-case words joined by single hyphens (as 'wrap-up'), got {self.level!r}"
            )

        if len(self.parts) != max(len(self.tour) - 1, 0):
            raise ValueError(
                f"parts must give a heading to every tour section after the first ({len(self.tour)} sections: "
                f"{self.tour!r}), got {self.parts!r}"
            )

    @property
    def section_titles(self) -> tuple[str, ...]:
        """The title of each of its tour sections (:attr:`tour`): the chapter's title, and for each later
        section the title and that section's heading of :attr:`parts` (``"Stretching RoPE: real model
        configs"``)."""
        if not self.tour:
            return ()
        return (self.title, *(f"{self.title}: {part}" for part in self.parts))

    @property
    def module(self) -> str:
        """The name of the chapter's module in :mod:`posenc.teaching.lesson.chapters`: its id with ``_`` for
        ``-`` (``"bag-of-tiles"`` is written in ``bag_of_tiles``)."""
        return self.id.replace("-", "_")


CHAPTERS: tuple[Chapter, ...] = (
    Chapter("bag-of-tiles", "A bag of tiles", ("bag-of-words",), ("bag",), level="beginner"),
    Chapter("word-plus-position", "Word + position = input", ("added",), ("input",), level="beginner"),
    Chapter("bad-ideas", "Two ideas that fail", (), ("seats",), level="beginner"),
    Chapter("three-rules", "The three rules", (), ("rules",), level="beginner"),
    Chapter("clock-hands", "Sine waves as clock hands", ("fast-columns",), ("fingerprint",), level="intermediate"),
    Chapter(
        "learned-tables", "Learned tables and the 512 wall", ("learned-limit",), ("learned",), level="intermediate"
    ),
    Chapter("rope", "RoPE: turn, don't add", ("relative", "qk-only"), ("rope",), level="advanced"),
    Chapter(
        "stretching-rope",
        "Stretching RoPE",
        ("linear-vs-ntk", "llama3-bands"),
        ("extension", "configs"),
        level="advanced",
        parts=("real model configs",),
    ),
    Chapter("alibi-penalty", "ALiBi: a penalty for distance", ("alibi-head0",), ("alibi",), level="advanced"),
    Chapter("comparison", "The methods side by side", (), ("compare",), level="summary"),
    Chapter("pytorch-demo", "The PyTorch demo", (), ("demo",), level="code"),
    Chapter("knowledge-checks", "Check yourself", ("precision",), ("checks",), level="review"),
    Chapter("common-mistakes", "Common mistakes", (), ("mistakes",), level="practice"),
    Chapter("big-picture", "Key points and the big picture", (), ("big-picture",), level="wrap-up"),
)


def chapter_of_section(section: str) -> Chapter | None:
    """The chapter a tour section tells, or ``None``."""
    return next((c for c in CHAPTERS if section in c.tour), None)


__all__ = ["CHAPTERS", "Chapter", "chapter_of_section"]
