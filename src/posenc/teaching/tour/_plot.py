"""Figures without pyplot: each figure gets its own Agg canvas, so no global backend is touched."""

from __future__ import annotations

import pathlib

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from ...runs import save_figure
from ..lesson.palette import SCALING_DASHES, diverging


def new_figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def svg_dash(dasharray: str | None) -> str | tuple[float, tuple[float, ...]]:
    """Matplotlib's line style of an SVG ``stroke-dasharray`` such as ``"7 4"``: ``(0, (7.0, 4.0))``,
    and ``"-"`` (solid) for ``None`` or an empty pattern."""
    if dasharray is None or not dasharray.strip():
        return "-"
    try:
        lengths = tuple(float(part) for part in dasharray.replace(",", " ").split())
    except ValueError:
        lengths = ()
    if not lengths or any(not length >= 0 for length in lengths) or not sum(lengths) > 0:
        raise ValueError(
            f"dasharray must be non-negative lengths, not all zero, separated by spaces or commas, got {dasharray!r}"
        )
    if len(lengths) % 2:  # SVG repeats an odd list to make it even
        lengths = lengths * 2
    return (0, lengths)


def scaling_dash(name: str) -> str | tuple[float, tuple[float, ...]]:
    """The line style of RoPE scaling ``name``: its dash in the page's palette, solid where it has none."""
    return svg_dash(SCALING_DASHES.get(name))


def save(ctx, fig: Figure, name: str) -> pathlib.Path:
    """Write ``fig`` as ``<out_dir>/<name>.png``, print where it went, record the path."""
    path = ctx.figure_path(name)
    save_figure(fig, path)  # atomically: a link at path is replaced, never written through
    ctx.record(f"figure.{name}", str(path))
    ctx.console.print(f"[dim]figure written:[/] [cyan]{path}[/]", highlight=False)
    return path


def sign_colormap(steps: int = 257) -> ListedColormap:
    """The page's sign map (:func:`posenc.teaching.lesson.palette.diverging`) for ``imshow`` from -1 to +1:
    the same blue below zero, white at zero and red above as every figure of the explorer.
    An odd number of steps puts one colour exactly at 0."""
    if steps < 3 or steps % 2 == 0:
        raise ValueError(f"steps must be an odd number of at least 3, got {steps!r}")
    return ListedColormap([diverging(-1 + 2 * i / (steps - 1)) for i in range(steps)], name="posenc-sign")
