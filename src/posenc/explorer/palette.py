"""The one palette of posenc's pictures: the lesson, the workbench and the tour's figures.

Every scheme and every RoPE scaling has one colour, and a sign (a value below or above zero) has one
diverging map, blue for negative and red for positive with white at zero, wherever it is drawn. The
browser reads the same table from ``static/palette.js``; a test keeps the two equal, and another
keeps a colour, here, for every scaling in the registry. Labels and dash patterns of the scalings live
here too (:func:`scaling_style`): the registry in ``posenc.rope`` holds no UI.

Roles (a query and a key on a clock dial) have colours of their own in :data:`ROLE_COLOURS`.
"""

from __future__ import annotations

#: position scheme (``posenc.factory.SCHEMES`` names) -> colour
SCHEME_COLOURS: dict[str, str] = {
    "nope": "#7f7f7f",
    "sinusoidal": "#8c564b",
    "learned": "#bcbd22",
    "rope": "#1f77b4",
    "alibi": "#000000",
}

#: RoPE scaling (the registry's ``rope_type``) -> colour; "default" is plain RoPE, the rope colour
SCALING_COLOURS: dict[str, str] = {
    "default": SCHEME_COLOURS["rope"],
    "linear": "#9467bd",
    "ntk": "#2ca02c",
    "dynamic": "#17becf",
    "yarn": "#ff7f0e",
    "llama3": "#e377c2",
    "longrope": "#393b79",
    "proportional": "#637939",
}

#: RoPE scaling -> the name a page prints for it (a type missing here is printed by its rope type)
SCALING_LABELS: dict[str, str] = {
    "default": "no scaling",
    "linear": "linear / PI",
    "ntk": "NTK-aware",
    "dynamic": "dynamic NTK",
    "yarn": "YaRN",
    "llama3": "Llama 3",
    "longrope": "LongRoPE",
    "proportional": "proportional",
}

#: RoPE scaling -> SVG dash pattern of its curve (absent: solid), in every chart that draws the scaling
SCALING_DASHES: dict[str, str] = {"linear": "7 4"}

#: colours for scalings registered outside posenc, handed out in registration order
EXTRA_COLOURS: tuple[str, ...] = ("#8c6d31", "#843c39", "#7b4173", "#5254a3", "#6b6ecf", "#bd9e39")

#: the two ends of the diverging sign map (white is zero)
SIGN_COLOURS: dict[str, str] = {"negative": "#2166ac", "positive": "#b2182b"}

#: a query and a key, on every dial (not RoPE's blue nor YaRN's orange: a colour means one thing)
ROLE_COLOURS: dict[str, str] = {"query": "#3b4cc0", "key": "#e08214"}


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


def as_dict() -> dict:
    return {"schemes": SCHEME_COLOURS, "scalings": SCALING_COLOURS, "sign": SIGN_COLOURS, "roles": ROLE_COLOURS}


__all__ = [
    "EXTRA_COLOURS",
    "ROLE_COLOURS",
    "SCALING_COLOURS",
    "SCALING_DASHES",
    "SCALING_LABELS",
    "SCHEME_COLOURS",
    "SIGN_COLOURS",
    "as_dict",
    "diverging",
    "scaling_style",
]
