"""The lesson's text as data: blocks of prose with light inline markup, one renderer per face.

A chapter module (:mod:`posenc.teaching.lesson.chapters`) writes each sentence once, as a :class:`Block`. The
tour prints the blocks in the terminal (:func:`to_rich`) and the explorer's page draws them (the
``/api/lesson/prose/{chapter}`` route sends :func:`as_dict`, spans already parsed), so the terminal
and the page carry the same sentences and the same numbers.

Inline markup, deliberately small:

- ``**bold**``, ``*emphasis*``, ```code```;
- ``[words](#chapter-id)``: a link to a chapter (the terminal prints the words only).

A table block carries ``rows`` (the first row is the header) and its caption as ``text``; a cell may
use the same inline markup. Numbers are written into the text already formatted, so both faces print
the same digits.

Three kinds belong to one face's figures or furniture (:data:`IN_TOUR`, :data:`IN_PAGE`):

- ``caption`` says what one of the page's figures shows; its slot is the figure's ``<figcaption>``
  (the block fills that element itself). The tour draws figures of its own, so it never prints a
  page figure's caption.
- ``tour-figure`` says what one of the figures ``posenc tour`` writes shows (a PNG file); the page
  draws figures of its own, so it never receives one.
- ``see-also`` points to a view of the explorer's workbench; the tour prints it after "In posenc
  explore:", so a reader in the terminal learns where to go deeper.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rich.markup import escape

#: what a block can be, and how each face shows it
KINDS = {
    "plain": "the idea in everyday words, before any jargon (printed first by the tour)",
    "p": "a paragraph",
    "h3": "a sub-heading",
    "item": "one point of a list (the page's container is a list)",
    "note": "an aside",
    "formula": "a formula on a line of its own",
    "try": "what to do with the chapter's figure, and what it will show",
    "table": "a table: rows (header first, cells with inline markup), text its caption",
    "caption": "what the page's figure shows: fills the figure's <figcaption> (its slot); the tour, which "
    "draws figures of its own, skips it",
    "tour-figure": "what a figure written by posenc tour (a PNG file) shows: the tour prints it as an aside; "
    "the page, which draws figures of its own, never receives it",
    "see-also": "a pointer to a view of the workbench (posenc explore); the tour prints it after 'In posenc explore:'",
}

#: the kinds ``posenc tour`` prints (all but the captions of the page's figures)
IN_TOUR = frozenset(KINDS) - {"caption"}
#: the kinds the explorer's page receives (all but the notes on the tour's own figure files)
IN_PAGE = frozenset(KINDS) - {"tour-figure"}

#: the label the tour and the page put in front of each "plain" block
PLAIN_LABEL = "In plain words:"
#: the label in front of each "try" block
TRY_LABEL = "Try this:"
#: what the tour prints in front of each "see-also" block
SEE_ALSO_LABEL = "In posenc explore:"

_TOKEN = re.compile(
    r"\*\*(?P<bold>[^*]+)\*\*|\*(?P<em>[^*]+)\*|`(?P<code>[^`]+)`|\[(?P<link>[^\]]+)\]\((?P<href>#[a-z0-9-]+)\)"
)


@dataclass(frozen=True)
class Block:
    """One block of a chapter's text.

    Attributes:
        kind: one of :data:`KINDS`.
        text: the sentence(s), with the inline markup of this module (a table's caption).
        slot: where the page puts it: the chapter's element with ``data-prose="<slot>"``.
        id: an optional id the page gives the element (for links and tests).
        rows: a table's cells, header row first (only for ``kind == "table"``).
    """

    kind: str
    text: str
    slot: str = "main"
    id: str = ""
    rows: tuple[tuple[str, ...], ...] = ()

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"Block kind must be one of {sorted(KINDS)}, got {self.kind!r}")
        if not isinstance(self.text, str) or (not self.text.strip() and self.kind != "table"):
            raise ValueError(f"Block text must be a non-empty string, got {self.text!r}")
        if not re.fullmatch(r"[a-z][a-z0-9-]*", self.slot):
            raise ValueError(f"Block slot must be lower-case letters, digits and '-', got {self.slot!r}")
        if self.id and not re.fullmatch(r"[a-z][a-z0-9-]*", self.id):
            raise ValueError(f"Block id must be lower-case letters, digits and '-', got {self.id!r}")
        if self.kind == "caption" and self.id:
            raise ValueError(
                f"a caption block fills its figure's <figcaption>, which carries the id; got id {self.id!r}"
            )
        if (self.kind == "table") != bool(self.rows):
            raise ValueError(
                f"Block rows are for tables only (and a table needs them); kind {self.kind!r}, rows {self.rows!r}"
            )
        if self.rows and len({len(r) for r in self.rows}) != 1:
            raise ValueError(f"Block rows must all have the same number of cells, got {[len(r) for r in self.rows]}")
        spans(self.text)  # refuses unbalanced markup
        for row in self.rows:
            for cell in row:
                spans(cell)


def see_also(text: str) -> Block:
    """A chapter's pointer to the workbench: a "see-also" block in the page's "see-also" slot."""
    return Block("see-also", text, "see-also")


def spans(text: str) -> list[dict]:
    """``text`` cut into spans ``{"style": "text" | "bold" | "em" | "code" | "link", "text", ["href"]}``.

    Raises:
        ValueError: when a marker (``*``, `````, ``[``) is left open, naming the text.
    """
    text = " ".join(text.split())
    out: list[dict] = []
    at = 0
    for match in _TOKEN.finditer(text):
        if match.start() > at:
            out.append({"style": "text", "text": text[at : match.start()]})
        if match.group("link") is not None:
            out.append({"style": "link", "text": match.group("link"), "href": match.group("href")})
        else:
            style = next(s for s in ("bold", "em", "code") if match.group(s) is not None)
            out.append({"style": style, "text": match.group(style)})
        at = match.end()
    if at < len(text):
        out.append({"style": "text", "text": text[at:]})
    for span in out:
        if span["style"] == "text" and re.search(r"[*`]|\]\(#", span["text"]):
            raise ValueError(f"unbalanced inline markup (*, ` or a [link](#id)) in lesson text {text!r}")
    return out


def plain(text: str) -> str:
    """The words of ``text`` without markup, whitespace made single spaces: what a reader sees."""
    return "".join(span["text"] for span in spans(text))


def to_rich(text: str) -> str:
    """``text`` as rich console markup (bold, italic, cyan code; a link prints its words)."""
    style = {"bold": "bold", "em": "italic", "code": "cyan"}
    out = []
    for span in spans(text):
        words = escape(span["text"])
        out.append(f"[{style[span['style']]}]{words}[/]" if span["style"] in style else words)
    return "".join(out)


def as_dict(block: Block) -> dict:
    """A block as the page gets it: kind, slot, id, parsed spans, plain text, and for a table its rows
    (each cell's plain text) and cells (each cell's spans)."""
    out = {
        "kind": block.kind,
        "slot": block.slot,
        "id": block.id,
        "spans": spans(block.text),
        "plain": plain(block.text),
    }
    if block.rows:
        out["rows"] = [[plain(cell) for cell in row] for row in block.rows]
        out["cells"] = [[spans(cell) for cell in row] for row in block.rows]
    return out


__all__ = [
    "Block",
    "IN_PAGE",
    "IN_TOUR",
    "KINDS",
    "PLAIN_LABEL",
    "SEE_ALSO_LABEL",
    "TRY_LABEL",
    "as_dict",
    "plain",
    "see_also",
    "spans",
    "to_rich",
]
