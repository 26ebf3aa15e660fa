"""Small printing helpers shared by the tour's sections."""

from __future__ import annotations

import io

from rich import box
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ..lesson.prose import IN_TOUR, PLAIN_LABEL, SEE_ALSO_LABEL, TRY_LABEL, Block, to_rich
from ..lesson.prose import plain as plain_text


def prose(ctx, text: str) -> None:
    """Print a paragraph of teaching text (rich markup allowed), joined into one flowing line."""
    ctx.console.print(" ".join(text.split()), highlight=False)
    ctx.console.print()


#: What every section's first line starts with: the idea in everyday words, before any jargon.
PLAIN_PREFIX = PLAIN_LABEL


def plain(ctx, text: str) -> None:
    """Print a section's opening line: the idea in everyday words, before any technical term."""
    ctx.console.print(f"[bold]{PLAIN_PREFIX}[/] " + " ".join(text.split()), highlight=False)
    ctx.console.print()


def table(*columns: str, title: str = "") -> Table:
    """A rich table: a left-aligned label column, then right-aligned value columns.

    Value columns never wrap, so a number is never split across two lines on a narrow terminal
    (rich narrows the label column instead). A long value header is broken by hand with ``\\n``.
    """
    t = Table(title=title or None, title_justify="left", header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False)
    for i, name in enumerate(columns):
        if i == 0:
            t.add_column(name, justify="left", overflow="fold")
        else:
            t.add_column(name, justify="right", no_wrap=True)
    return t


def verdict(ok: bool, yes: str = "as claimed", no: str = "NOT as claimed") -> Text:
    return Text(yes, style="green") if ok else Text(no, style="bold red")


def chapter(ctx, blocks: list[Block], chapter_id: str) -> None:
    """Print a chapter's text (:mod:`posenc.teaching.lesson.chapters`) in the terminal, block by block: the same
    sentences and numbers the explorer's page shows for chapter ``chapter_id`` (but the captions of the
    page's figures: :data:`posenc.teaching.lesson.prose.IN_TOUR`)."""
    blocks = [b for b in blocks if b.kind in IN_TOUR]
    for i, block in enumerate(blocks):
        text = to_rich(block.text)
        if i and blocks[i - 1].kind == "item" and block.kind != "item":
            ctx.console.print()
        if block.kind == "plain":
            plain(ctx, text)
        elif block.kind == "h3":
            ctx.console.print(f"[bold]{text}[/]", highlight=False)
            ctx.console.print()
        elif block.kind == "formula":
            ctx.console.print(Padding(text, (0, 0, 0, 4)), highlight=False)
            ctx.console.print()
        elif block.kind == "item":
            ctx.console.print(Padding(f"• {text}", (0, 0, 0, 2)), highlight=False)
        elif block.kind == "try":
            prose(ctx, f"[bold]{TRY_LABEL.rstrip(':')}[/] in posenc explore [dim](#{chapter_id})[/]: {text}")
        elif block.kind == "see-also":
            prose(ctx, f"[dim]{SEE_ALSO_LABEL}[/] {text}")
        elif block.kind == "table":
            lesson_table(ctx, block)
        else:
            prose(ctx, text)


#: the longest value a table's grid shows in a column after its first (value columns never wrap)
VALUE_WIDTH = 60


def _grid(block: Block) -> Table:
    """A lesson table as a grid: each value column at least as wide as its longest value, so a value
    never wraps or is cut, while a long header may wrap between its words."""
    header, *rows = block.rows
    t = Table(title=to_rich(block.text), title_justify="left", header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False)
    for i, name in enumerate(header):
        if i == 0:
            t.add_column(plain_text(name), justify="left", overflow="fold")
            continue
        longest = max(len(plain_text(row[i])) for row in rows) if rows else 1
        t.add_column(plain_text(name), justify="right", overflow="fold", min_width=longest)
    for row in rows:
        t.add_row(*(to_rich(cell) for cell in row))
    return t


def _grid_fits(block: Block, width: int) -> bool:
    """Whether :func:`_grid` of ``block``, drawn ``width`` columns wide, shows every value whole (each
    row's values on one line of the drawing, in their order: rich drops or cuts a column that does not
    fit) and every word of its labels whole."""
    probe = Console(width=width, record=True, file=io.StringIO(), color_system=None, emoji=False)
    probe.print(_grid(block))
    drawn = probe.export_text()
    lines, words = drawn.splitlines(), set(drawn.split())
    for row in block.rows[1:]:
        values = [plain_text(cell) for cell in row[1:]]
        if not any(_in_order(line, values) for line in lines):
            return False
        if not set(plain_text(row[0]).split()) <= words:  # the label wraps between words, never inside one
            return False
    return True


def _in_order(line: str, values: list[str]) -> bool:
    at = 0
    for value in values:
        found = line.find(value, at)
        if found < 0:
            return False
        at = found + len(value)
    return True


def lesson_table(ctx, block: Block) -> None:
    """Print a table block of the lesson: a grid when every cell after the first column is a short value
    (:data:`VALUE_WIDTH`) and the grid, its headers wrapped, fits the terminal with every value whole;
    else one card per row, its first cell and then each other cell after its column's name, as the page
    does on a phone, so that no cell is cut at any width."""
    header, *rows = block.rows
    if all(len(plain_text(cell)) <= VALUE_WIDTH for row in block.rows for cell in row[1:]):
        if _grid_fits(block, ctx.console.width):
            ctx.console.print(_grid(block))
            return
    ctx.console.print(to_rich(block.text), highlight=False)
    for row in rows:
        ctx.console.print(Padding(f"[bold]{to_rich(row[0])}[/]", (0, 0, 0, 2)), highlight=False)
        for name, cell in zip(header[1:], row[1:]):
            ctx.console.print(Padding(f"{to_rich(name)}: {to_rich(cell)}", (0, 0, 0, 4)), highlight=False)
    ctx.console.print()
