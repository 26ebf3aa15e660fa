"""A colour means one thing, to the eye and not only in hex: every two colours of the palette that stand
for different things are at least 20 apart in CIE76 ΔE. Plain RoPE once was ``#1f77b4`` and the lesson's
"words alone" ``#0072B2`` (ΔE 2.9), the sign map's blue end ``#2166ac`` (ΔE 10); YaRN's orange and the
key's (ΔE 15); ALiBi black beside the axis ink (ΔE 17): different hex, one colour to a reader.

Lab is computed here from sRGB (D65), not taken from the module under test.
"""

from __future__ import annotations

import itertools
import re
from importlib import resources

import pytest

from posenc.explorer import palette

#: the least CIE76 ΔE between two colours of different meanings
LEAST_DELTA_E = 20.0


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


def test_lab_matches_known_values():
    assert lab("#ffffff") == pytest.approx((100.0, 0.0, 0.0), abs=0.01)
    assert lab("#000000") == pytest.approx((0.0, 0.0, 0.0), abs=0.01)
    assert lab("#ff0000") == pytest.approx((53.24, 80.09, 67.20), abs=0.05)
    assert lab("#0000ff") == pytest.approx((32.30, 79.19, -107.86), abs=0.05)
    assert delta_e("#1f77b4", "#0072b2") == pytest.approx(2.9, abs=0.1)  # the audit's RoPE against "words alone"


def meanings() -> dict[str, str]:
    """Meaning -> colour over every table of the palette; plain RoPE among the scalings is the rope
    scheme (one meaning), and each scaling registered outside posenc gets an extra colour."""
    found = {}
    for table, entries in palette.MEANING_TABLES.items():
        for key, colour in entries.items():
            if (table, key) == ("SCALING_COLOURS", "default"):
                assert colour == palette.SCHEME_COLOURS["rope"]
                continue
            found[f"{table} {key}"] = colour.lower()
    for k, colour in enumerate(palette.EXTRA_COLOURS):
        found[f"EXTRA_COLOURS {k}"] = colour.lower()
    return found


def test_every_two_colours_of_different_meanings_look_different():
    colours = meanings()
    assert len(colours) > 30
    close = [
        f"{a} {colours[a]} / {b} {colours[b]}: ΔE {delta_e(colours[a], colours[b]):.1f}"
        for a, b in itertools.combinations(sorted(colours), 2)
        if delta_e(colours[a], colours[b]) < LEAST_DELTA_E
    ]
    assert not close, "colours of different meanings that look alike:\n" + "\n".join(close)


def test_alibi_is_not_drawn_in_ink_and_reference_lines_are_neutral_grey():
    ink = palette.NEUTRAL_COLOURS["ink"]
    assert delta_e(palette.SCHEME_COLOURS["alibi"], ink) >= LEAST_DELTA_E
    r, g, b = (int(palette.NEUTRAL_COLOURS["reference"][i : i + 2], 16) for i in (1, 3, 5))
    assert max(r, g, b) - min(r, g, b) <= 8  # a grey: no hue to mistake for a scheme's


def _js_tables(source: str) -> dict[str, dict[str, str]]:
    tables = {}
    for match in re.finditer(r"export const (\w+) = \{(.*?)\};", source, re.S):
        entries = dict(re.findall(r"(\w+): \"(#[0-9a-fA-F]{6})\"", match.group(2)))
        if entries:
            tables[match.group(1)] = entries
    return tables


def test_the_page_has_one_palette_the_python_one():
    """palette.js mirrors every meaning table of palette.py and has no second set of colours (the
    lesson's Okabe-Ito C/T/SERIES once stood beside the scheme colours, in hues that collided)."""
    source = resources.files("posenc.explorer").joinpath("static", "palette.js").read_text()
    tables = _js_tables(source)
    for name, entries in palette.MEANING_TABLES.items():
        assert tables.get(name) == entries, name
    extra = set(tables) - set(palette.MEANING_TABLES)
    assert not extra, f"colour tables in palette.js only: {sorted(extra)}"
    assert not re.search(r"export const (C|T|SERIES) =", source)


def test_reference_lines_have_one_dash_each_in_both_palettes():
    source = resources.files("posenc.explorer").joinpath("static", "palette.js").read_text()
    body = re.search(r"export const REFERENCE_DASHES = \{(.*?)\};", source, re.S)
    assert body, "REFERENCE_DASHES not found in palette.js"
    assert dict(re.findall(r"(\w+): \"([\d ]+)\"", body.group(1))) == palette.REFERENCE_DASHES
    assert len(set(palette.REFERENCE_DASHES.values())) == len(palette.REFERENCE_DASHES)
