"""Section: a preview of context extension, what three RoPE scalings do to the frequencies.

The text and numbers are the first part of the lesson's chapter "Stretching RoPE"
(:mod:`posenc.teaching.lesson.chapters.stretching_rope`); this section prints them, records the numbers and
draws the wavelengths' figure.

A RoPE model trained on ``L0`` tokens has seen, for each rotation pair, only the angles
``0 .. (L0 - 1) * theta_i``. Pairs that turn less than once over ``L0`` meet angles they have never
seen as soon as the input grows longer. The scalings in :mod:`posenc.rope.scaling` change the
frequencies so that a longer input stays (mostly) within the angles seen in training.
"""

from __future__ import annotations

import math

from ...rope import rope_frequencies
from ..lesson.chapters.stretching_rope import (  # noqa: F401  (the chapter's helpers, for callers of the tour)
    BASE,
    FACTOR,
    ROTARY_DIM,
    TRAINED,
    index_ranges,
    scalings,
    times,
    unseen_mask,
)
from ..lesson.palette import NEUTRAL_COLOURS, REFERENCE_DASHES, SCALING_COLOURS
from ._plot import new_figure, save, scaling_dash, svg_dash
from .telling import tell

CHAPTER = "stretching-rope"


def _ours(name: str) -> bool:
    """The chapter's numbers and blocks this section tells: all but the real configs' part."""
    return not name.startswith("configs")


def context_extension(ctx) -> None:
    tell(ctx, CHAPTER, only=_ours)
    results = {name: rope_frequencies(config, ROTARY_DIM, BASE)[0] for name, config in scalings().items()}
    _draw(ctx, results)


def _draw(ctx, results: dict) -> None:
    fig = new_figure(8, 4.6)
    ax = fig.subplots()
    index = range(ROTARY_DIM // 2)
    for name, inv_freq in results.items():
        # one colour and one dash per scaling, as in the explorer
        ax.plot(
            index,
            (2 * math.pi / inv_freq).numpy(),
            linestyle=scaling_dash(name),
            color=SCALING_COLOURS[name],
            linewidth=1.8,
            label=name,
        )
    # reference lines as the lesson draws them: neutral grey, told apart by dash
    grey = NEUTRAL_COLOURS["reference"]
    ax.axhline(TRAINED, color=grey, linewidth=0.9, linestyle=svg_dash(REFERENCE_DASHES["trained"]))
    ax.text(1, TRAINED * 1.15, f"trained length {TRAINED:,}", fontsize=8, color=grey)
    ax.axhline(TRAINED * FACTOR, color=grey, linewidth=0.9, linestyle=svg_dash(REFERENCE_DASHES["stretched"]))
    ax.text(1, TRAINED * FACTOR * 1.15, f"target length {int(TRAINED * FACTOR):,}", fontsize=8, color=grey)
    ax.set_yscale("log")
    ax.set_xlabel("rotation pair i (0 = fastest)")
    ax.set_ylabel("wavelength in seats (2 pi / theta_i)")
    ax.set_title(f"RoPE wavelengths, {ROTARY_DIM} rotated features, base {BASE:g}, scaled {FACTOR:g}x")
    ax.legend()
    save(ctx, fig, "rope_scaling_wavelengths")
