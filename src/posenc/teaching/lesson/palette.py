"""The one palette of posenc's pictures: the lesson, the workbench and the tour's figures.

Every scheme and every RoPE scaling has one colour, and a sign (a value below or above zero) has one
diverging map, blue for negative and red for positive with white at zero, wherever it is drawn. The
browser reads these very tables: the explorer serves them as the script ``/static/palette-tables.js``,
written from :data:`PAGE_TABLES` by :func:`module_source`, which ``static/palette.js`` re-exports
beside the page's colour functions; a test keeps a colour, here, for every scaling in the registry.
Labels and dash patterns of the scalings live here too (:func:`scaling_style`), one label per scaling
for every page, the tour and the lab's reports (:data:`SCALING_LABELS`, kept in :mod:`posenc.runs.labels`
below the lesson and the lab, which both print it), with the labels of their
parameters (:data:`SCALING_PARAMETER_LABELS`) and the ones a page draws first
(:data:`SHOWN_SCALINGS`): the registry in ``posenc.rope`` holds no UI.

Roles (a query and a key on a clock dial) have colours of their own in :data:`ROLE_COLOURS`, and so
do the lesson's categories that are not schemes (:data:`CATEGORY_COLOURS`: right and wrong, the fast,
medium and slow hands, a stretched table's rows), the workbench's number formats and marks. A colour
means one thing: any two colours of different meanings here are at least 20 apart in CIE76 ΔE, so
they do not merely differ in hex but look different to a reader (a test holds every table to that).
Ink and reference lines (a trained or stretched length) are neutral greys (:data:`NEUTRAL_COLOURS`).
"""

from __future__ import annotations

import json

from ...runs.labels import SCALING_LABELS

#: position scheme (``posenc.factory.SCHEMES`` names) -> colour
SCHEME_COLOURS: dict[str, str] = {
    "nope": "#858585",
    "sinusoidal": "#8c564b",
    "learned": "#bcbd22",
    "rope": "#1f77b4",
    "alibi": "#d62728",
    "t5": "#117788",
    "xpos": "#dd5566",
    "fope": "#991177",
}

#: RoPE scaling (the registry's ``rope_type``) -> colour; "default" is plain RoPE, the rope colour
SCALING_COLOURS: dict[str, str] = {
    "default": SCHEME_COLOURS["rope"],
    "linear": "#9467bd",
    "ntk": "#2ca02c",
    "dynamic": "#17becf",
    "yarn": "#ff7f0e",
    "llama3": "#e377c2",
    "longrope": "#554488",
    "proportional": "#637939",
}

#: RoPE scaling parameter (a config field in a descriptor's ``parameters``) -> its label on the pages'
#: sliders and in their messages (a parameter missing here is labelled by its name)
SCALING_PARAMETER_LABELS: dict[str, str] = {
    "beta_fast": "YaRN β_fast",
    "beta_slow": "YaRN β_slow",
    "low_freq_factor": "Llama-3 low_freq_factor",
    "high_freq_factor": "Llama-3 high_freq_factor",
}

#: the RoPE scalings the wavelength view draws when the page opens (the others are a checkbox away)
SHOWN_SCALINGS: tuple[str, ...] = ("linear", "yarn", "llama3")

#: RoPE scaling -> SVG dash pattern of its curve (absent: solid), in every chart that draws the scaling
SCALING_DASHES: dict[str, str] = {"linear": "7 4"}

#: colours for scalings registered outside posenc, handed out in registration order
EXTRA_COLOURS: tuple[str, ...] = ("#775522", "#883322", "#884477", "#9944bb", "#8877ff", "#ccaa44")

#: the two ends of the diverging sign map (white is zero): dark enough that neither end is a scheme's colour
SIGN_COLOURS: dict[str, str] = {"negative": "#053061", "positive": "#67001f"}

#: a query and a key, on every dial (not RoPE's blue nor YaRN's orange: a colour means one thing)
ROLE_COLOURS: dict[str, str] = {"query": "#3b4cc0", "key": "#cc7711"}

#: the lesson's categories that are not schemes: the right and the wrong way (ch. 3, 6, 13), the three
#: hands of the sine code (ch. 5), a stretched table's rows (ch. 6; its trained rows are drawn in ink)
CATEGORY_COLOURS: dict[str, str] = {
    "right": "#009966",
    "wrong": "#bb4400",
    "fast": "#cc7799",
    "medium": "#55bbee",
    "slow": "#887700",
    "stretched": "#ee4400",
}

#: greys: ink (text, axes, frames) and reference lines (a trained or stretched length, dashed)
NEUTRAL_COLOURS: dict[str, str] = {"ink": "#1d2330", "reference": "#525252"}

#: SVG dash pattern of each reference line, in the lesson and the tour's figures alike (grey, told apart by dash)
REFERENCE_DASHES: dict[str, str] = {"trained": "5 4", "stretched": "2 3"}

#: series with no meaning of their own (one line per length, per run...), in order; none is a colour that
#: means something in :data:`MEANING_TABLES`
SERIES_COLOURS: tuple[str, ...] = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)

#: number formats compared in the workbench's precision view
DTYPE_COLOURS: dict[str, str] = {"bfloat16": "#ff8855", "float16": "#dd2288", "float32": "#00aa99", "posenc": "#7788ee"}

#: marks: the rotation pair picked on a dial, a trend drawn over its own series, bars without a colour of their own
MARK_COLOURS: dict[str, str] = {"focus": "#552288", "trend": "#555577", "bar": "#8888bb"}

#: the lesson's word tiles
TILE_COLOURS: dict[str, str] = {"fill": "#f3ead7", "stroke": "#b08d57"}

#: every table of colours that stand for something, by its name in both palette modules
MEANING_TABLES: dict[str, dict[str, str]] = {
    "SCHEME_COLOURS": SCHEME_COLOURS,
    "SCALING_COLOURS": SCALING_COLOURS,
    "SIGN_COLOURS": SIGN_COLOURS,
    "ROLE_COLOURS": ROLE_COLOURS,
    "CATEGORY_COLOURS": CATEGORY_COLOURS,
    "NEUTRAL_COLOURS": NEUTRAL_COLOURS,
    "DTYPE_COLOURS": DTYPE_COLOURS,
    "MARK_COLOURS": MARK_COLOURS,
    "TILE_COLOURS": TILE_COLOURS,
}


#: every table the page reads, by its name in the browser's palette module (``static/palette.js``
#: re-exports each from the served ``palette-tables.js``)
PAGE_TABLES: dict[str, object] = {
    **MEANING_TABLES,
    "SCALING_LABELS": SCALING_LABELS,
    "SCALING_DASHES": SCALING_DASHES,
    "REFERENCE_DASHES": REFERENCE_DASHES,
    "SERIES_COLOURS": SERIES_COLOURS,
    "EXTRA_COLOURS": EXTRA_COLOURS,
}


def module_source() -> str:
    """The browser's palette tables as an ES module: one ``export const NAME = <JSON>;`` per table of
    :data:`PAGE_TABLES`, in its order (what the explorer serves at ``/static/palette-tables.js``)."""
    lines = ["// The palette's tables, written by posenc.teaching.lesson.palette.module_source (the one source)."]
    for name, table in PAGE_TABLES.items():
        value = list(table) if isinstance(table, tuple) else table
        lines.append(f"export const {name} = Object.freeze({json.dumps(value)});")
    return "\n".join(lines) + "\n"


def _rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def diverging(value: float, span: float = 1.0) -> str:
    """The sign map's colour (``"#rrggbb"``) of ``value`` on a scale from ``-span`` to ``+span``."""
    if not span > 0:
        raise ValueError(f"span must be positive, got {span!r}")
    t = max(-1.0, min(1.0, value / span))
    far = _rgb(SIGN_COLOURS["negative" if t < 0 else "positive"])
    weight = abs(t) ** 0.85
    mixed = (round(255 + (c - 255) * weight) for c in far)
    return "#" + "".join(f"{c:02x}" for c in mixed)


def scaling_style(name: str, extra_index: int = 0) -> dict:
    """``{"label", "colour", "dash"}`` of a RoPE scaling on a page. A type registered outside posenc
    is labelled by its name and gets ``EXTRA_COLOURS[extra_index]`` (cycled)."""
    colour = SCALING_COLOURS.get(name) or EXTRA_COLOURS[extra_index % len(EXTRA_COLOURS)]
    return {"label": SCALING_LABELS.get(name, name), "colour": colour, "dash": SCALING_DASHES.get(name)}


def parameter_label(name: str) -> str:
    """The label of a RoPE scaling parameter on a page (its name when :data:`SCALING_PARAMETER_LABELS`
    has none)."""
    return SCALING_PARAMETER_LABELS.get(name, name)


def as_dict() -> dict:
    return {
        "schemes": SCHEME_COLOURS,
        "scalings": SCALING_COLOURS,
        "sign": SIGN_COLOURS,
        "roles": ROLE_COLOURS,
        "categories": CATEGORY_COLOURS,
        "neutral": NEUTRAL_COLOURS,
    }


__all__ = [
    "CATEGORY_COLOURS",
    "DTYPE_COLOURS",
    "EXTRA_COLOURS",
    "MARK_COLOURS",
    "MEANING_TABLES",
    "NEUTRAL_COLOURS",
    "PAGE_TABLES",
    "REFERENCE_DASHES",
    "ROLE_COLOURS",
    "SCALING_COLOURS",
    "SCALING_DASHES",
    "SCALING_LABELS",
    "SCALING_PARAMETER_LABELS",
    "SCHEME_COLOURS",
    "SERIES_COLOURS",
    "SHOWN_SCALINGS",
    "SIGN_COLOURS",
    "TILE_COLOURS",
    "as_dict",
    "diverging",
    "module_source",
    "parameter_label",
    "scaling_style",
]
