"""A colour means one thing, to the eye and not only in hex: every two colours of the palette that stand
for different things are at least 20 apart in CIE76 ΔE. Plain RoPE once was ``#1f77b4`` and the lesson's
"words alone" ``#0072B2`` (ΔE 2.9), the sign map's blue end ``#2166ac`` (ΔE 10); YaRN's orange and the
key's (ΔE 15); ALiBi black beside the axis ink (ΔE 17): different hex, one colour to a reader.

Lab is computed from sRGB (D65) in ``palette_support``, not taken from the module under test.
"""

from __future__ import annotations

import itertools
import re
from importlib import resources

import pytest
from palette_support import delta_e, lab, page_scripts, served_tables

from posenc.teaching.lesson import palette

#: the least CIE76 ΔE between two colours of different meanings
LEAST_DELTA_E = 20.0


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


def _plain(table):
    return list(table) if isinstance(table, tuple) else dict(table)


def test_the_page_is_served_the_python_palettes_tables():
    """The page's tables are palette.py's, served, not a hand-written copy: every table, in full."""
    tables = served_tables()
    assert list(tables) == list(palette.PAGE_TABLES)
    for name, table in palette.PAGE_TABLES.items():
        assert tables[name] == _plain(table), name
    assert set(palette.MEANING_TABLES) <= set(tables)


def test_no_palette_table_is_written_in_a_page_script():
    """palette.js re-exports the served tables and writes none of its own (it once mirrored every
    table by hand); no other script defines a table of the palette either."""
    static = resources.files("posenc.teaching.explorer").joinpath("static")
    source = static.joinpath("palette.js").read_text()
    assert 'export * from "./palette-tables.js";' in source
    assert not static.joinpath("palette-tables.js").is_file()  # served, written from palette.py
    assert not re.search(r"export const (C|T|SERIES) =", source)
    scripts = page_scripts()
    assert "palette.js" in scripts and len(scripts) > 20
    for script, text in scripts.items():
        for name in palette.PAGE_TABLES:
            assert not re.search(rf"\bconst {name}\s*=", text), (script, name)


def test_series_colours_mean_nothing():
    assert len(set(palette.SERIES_COLOURS)) == len(palette.SERIES_COLOURS) == 10
    assert not {c.lower() for c in palette.SERIES_COLOURS} & set(meanings().values())


#: how scalings were once labelled beside the palette's table (the lab's "PI (linear)" against the
#: page's "linear / PI" and ch. 8's "linear (PI)"; "no scaling" against "plain RoPE")
OLD_LABELS = ("linear / PI", "linear (PI)", "no scaling")


def test_one_label_per_scaling_everywhere():
    """A scaling has one name: the palette's, in the API the workbench reads, in the lab's reports and on
    the lesson's pages; no script of the page writes a scaling's name of its own."""
    from posenc.measuring.lab.verdicts import LABELS
    from posenc.rope import REGISTRY
    from posenc.teaching.explorer.scaling_view import scalings_metadata

    assert set(palette.SCALING_LABELS) == set(REGISTRY)
    assert len(set(palette.SCALING_LABELS.values())) == len(palette.SCALING_LABELS)
    for entry in scalings_metadata():
        assert entry["label"] == palette.SCALING_LABELS[entry["name"]]
    lab_types = {"none": "default", "linear": "linear", "ntk": "ntk", "dynamic_ntk": "dynamic", "yarn": "yarn"}
    for method, rope_type in lab_types.items():
        assert LABELS[method] == palette.SCALING_LABELS[rope_type], method
    assert served_tables()["SCALING_LABELS"] == palette.SCALING_LABELS
    written = [*palette.SCALING_LABELS.values(), *OLD_LABELS]
    for script, text in page_scripts().items():
        for label in written:
            assert not re.search(rf"[\"'`]{re.escape(label)}[\"'`]", text), (script, label)


def test_reference_lines_have_one_dash_each():
    assert served_tables()["REFERENCE_DASHES"] == palette.REFERENCE_DASHES
    assert len(set(palette.REFERENCE_DASHES.values())) == len(palette.REFERENCE_DASHES)


@pytest.mark.slow
def test_the_browsers_palette_is_palette_py():
    """In a real Chromium, the palette module the page's scripts import exports palette.py's tables, each
    equal in full, and labels every scaling as the palette does."""
    from browser_support import chromium_or_skip, explore_server, headless_chromium

    path = chromium_or_skip()
    names = list(palette.PAGE_TABLES)
    with explore_server() as url, headless_chromium(path) as browser:
        page = browser.new_page()
        errors = []
        page.on("pageerror", lambda err: errors.append(str(err)))
        page.goto(url)
        got = page.evaluate(
            "async (names) => { const p = await import('/static/palette.js');"
            " return Object.fromEntries(names.map((n) => [n, p[n]])); }",
            names,
        )
        frozen = page.evaluate(
            "async () => { const p = await import('/static/palette.js'); return Object.isFrozen(p.SCALING_LABELS); }"
        )
    for name, table in palette.PAGE_TABLES.items():
        assert got[name] == _plain(table), name
    assert frozen and not errors, errors
