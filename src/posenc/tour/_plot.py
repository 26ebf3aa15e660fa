"""Figures without pyplot: each figure gets its own Agg canvas, so no global backend is touched."""

from __future__ import annotations

import pathlib

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def new_figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save(ctx, fig: Figure, name: str) -> pathlib.Path:
    """Write ``fig`` as ``<out_dir>/<name>.png``, print where it went, record the path."""
    path = ctx.figure_path(name)
    fig.savefig(path)
    ctx.record(f"figure.{name}", str(path))
    ctx.console.print(f"[dim]figure written:[/] [cyan]{path}[/]", highlight=False)
    return path
