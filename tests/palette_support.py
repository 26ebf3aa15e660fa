"""The palette as a reader sees it and as the page is served, for the tests of colours and of the
explorer's static files: CIE L*a*b* and CIE76 ΔE computed from sRGB (D65) here, not taken from the
module under test; the palette's tables as ``/static/palette-tables.js`` serves them; every script of
the page."""

from __future__ import annotations

import json
import re
from importlib import resources


def lab(colour: str) -> tuple[float, float, float]:
    """CIE L*a*b* (D65 white) of ``"#rrggbb"``."""
    srgb = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in srgb)
    x = (0.4124564 * r + 0.3575761 * g + 0.1804375 * b) / 0.95047
    y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * b
    z = (0.0193339 * r + 0.1191920 * g + 0.9503041 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29

    fx, fy, fz = f(x), f(y), f(z)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def delta_e(a: str, b: str) -> float:
    return sum((p - q) ** 2 for p, q in zip(lab(a), lab(b))) ** 0.5


def served_tables() -> dict[str, object]:
    """The palette's tables as the explorer serves them to the page (``/static/palette-tables.js``),
    each ``export const NAME = Object.freeze(<JSON>);`` line read back as JSON."""
    from fastapi.testclient import TestClient

    from posenc.teaching.explorer.app import create_app

    with TestClient(create_app(allowed_hosts=None)) as client:
        response = client.get("/static/palette-tables.js")
    assert response.status_code == 200 and "javascript" in response.headers["content-type"]
    tables = {}
    for line in response.text.splitlines():
        match = re.fullmatch(r"export const (\w+) = Object\.freeze\((.*)\);", line)
        if match:
            tables[match.group(1)] = json.loads(match.group(2))
        else:
            assert line.startswith("//"), line
    return tables


def page_scripts() -> dict[str, str]:
    """Every script of the page, by its path under ``static/``."""
    found: dict[str, str] = {}

    def walk(folder, prefix=""):
        for entry in folder.iterdir():
            if entry.is_dir():
                walk(entry, f"{prefix}{entry.name}/")
            elif entry.name.endswith(".js"):
                found[prefix + entry.name] = entry.read_text()

    walk(resources.files("posenc.teaching.explorer").joinpath("static"))
    return found
