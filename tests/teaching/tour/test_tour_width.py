"""The tour's tables at a terminal's usual 80 columns: no value is cut. A grid whose values do not all fit
whole is printed as cards (a row's cells one under the other), as the page does on a phone."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from posenc.teaching.lesson import chapters
from posenc.teaching.lesson.manifest import CHAPTERS
from posenc.teaching.lesson.prose import plain
from posenc.teaching.tour._show import lesson_table

SRC = Path(__file__).resolve().parents[3] / "src"


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("width", [80, 60])
@pytest.mark.parametrize("chapter", [c.id for c in CHAPTERS])
def test_every_lesson_table_shows_every_value_whole(chapter, width):
    tables = [b for b in chapters.blocks(chapter) if b.kind == "table"]
    for block in tables:
        console = Console(width=width, record=True, file=io.StringIO(), color_system=None, emoji=False)
        lesson_table(SimpleNamespace(console=console), block)
        shown = console.export_text()
        assert max(len(line.rstrip()) for line in shown.splitlines()) <= width
        flat, words = _flat(shown), set(shown.split())
        for row in block.rows[1:]:
            # the label column may wrap between its words; a value is shown whole
            assert set(plain(row[0]).split()) <= words, (chapter, width, row[0])
            for cell in row[1:]:
                assert _flat(plain(cell)) in flat, (chapter, width, cell)


def test_the_fingerprint_table_shows_the_seats_values_at_80_columns(tmp_path):
    """Defect: at 80 columns `posenc tour` cut the fingerprint table's cells to "+0.…": the seats' 0.84 /
    0.54 / 0.01 showed only at 100 columns."""
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(SRC), "NO_COLOR": "1"}
    out = subprocess.run(
        [sys.executable, "-m", "posenc", "tour", "--section", "fingerprint", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    table = out.stdout[out.stdout.index("The sinusoidal table of width 4") :]
    table = table[: table.index("Two honest remarks")]
    assert "…" not in table
    assert re.search(r"1 dog\s+\+0\.84\s+\+0\.54\s+\+0\.01\s+\+1\.00\s+\+0\.84 \+0\.54 \+0\.01\s+yes", table), table
    assert max(len(line.rstrip()) for line in table.splitlines()) <= 80
