"""docs/mrope.md: its examples run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "mrope.md"


def test_the_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) == 2
    namespace: dict = {}
    for block in blocks:  # the second example uses the first one's imports, as a reader would
        exec(compile(block, str(DOC), "exec"), namespace)
    assert namespace["q_rot"].shape == (1, 4, 11, 32)
    assert namespace["q_local"].shape == (1, 2, 5, 32)


def test_the_page_is_linked():
    for page in ("README.md", "docs/scalings.md", "docs/transformers.md"):
        text = (DOC.parents[1] / page).read_text()
        if "mrope.md" not in text:
            pytest.fail(f"{page} does not link docs/mrope.md")
