"""Section: two real model configs, read from their ``config.json`` fields, and what their scalings do.

The fixtures in :mod:`posenc.fixtures` hold the rope fields of public configs. Loading one with
:meth:`posenc.rope.RotaryEmbedding.from_hf_config` gives the same frequencies ``transformers`` uses
(``tests/test_hf_parity.py``); this section shows them next to the unscaled frequencies of the same
head, as wavelengths in tokens, each scaling in its colour and dash of :mod:`posenc.teaching.lesson.palette`,
as the explorer draws it. The text and numbers are the second part of the lesson's chapter
"Stretching RoPE" (:mod:`posenc.teaching.lesson.chapters.stretching_rope`).
"""

from __future__ import annotations

import math

from ...fixtures import load_fixture
from ...rope import RotaryEmbedding, rope_inv_freq
from ..lesson.chapters.stretching_rope import MODELS, pair_bands  # noqa: F401  (for callers of the tour)
from ..lesson.palette import NEUTRAL_COLOURS, REFERENCE_DASHES, SCALING_COLOURS
from ._plot import new_figure, save, scaling_dash, svg_dash
from .telling import tell

CHAPTER = "stretching-rope"


def real_configs(ctx) -> None:
    # the section's own title stands for the page's heading of this part (slot configs-heading)
    tell(ctx, CHAPTER, only=lambda name: name.startswith("configs") and name != "configs-heading")
    curves = {}
    for key, name in MODELS:
        fixture = load_fixture(name)
        rope = RotaryEmbedding.from_hf_config(fixture)
        default = rope_inv_freq(rope.rotary_dim, rope.base)  # (r/2,) float64
        trained = rope.scaling.original_max_position_embeddings
        context = fixture["max_position_embeddings"]
        scaled, _ = rope.frequencies(context)
        curves[key] = (fixture["source"], default, scaled, trained, context, rope)
    _draw(ctx, curves)


def _curve(ax, inv_freq, scaling: str, label: str, linewidth: float = 1.6, alpha: float = 1.0) -> None:
    """Wavelength of every pair, in the scaling's one colour and dash of the palette, as the explorer
    draws it."""
    ax.plot(
        range(len(inv_freq)),
        (2 * math.pi / inv_freq).numpy(),
        linestyle=scaling_dash(scaling),
        color=SCALING_COLOURS[scaling],
        linewidth=linewidth,
        alpha=alpha,
        label=label,
    )


def _draw(ctx, curves: dict) -> None:
    fig = new_figure(10, 4.4)
    axes = fig.subplots(1, 2)
    for ax, (source, default, scaled, trained, context, rope) in zip(axes, curves.values()):
        _curve(ax, default, "default", "unscaled")
        rope_type = rope.scaling.rope_type
        if rope_type == "longrope":
            # both lists are LongRoPE's: its colour and dash, the short factors drawn thinner and paler
            short, _ = rope.frequencies(trained)
            _curve(ax, short, rope_type, "short factors", linewidth=1.0, alpha=0.5)
            _curve(ax, scaled, rope_type, "long factors")
        else:
            _curve(ax, scaled, rope_type, rope_type)
        # reference lines as the lesson draws them: neutral grey, told apart by dash
        grey = NEUTRAL_COLOURS["reference"]
        ax.axhline(trained, color=grey, linewidth=0.9, linestyle=svg_dash(REFERENCE_DASHES["trained"]))
        ax.text(0.5, trained * 1.2, f"trained {trained:,}", fontsize=8, color=grey)
        ax.axhline(context, color=grey, linewidth=0.9, linestyle=svg_dash(REFERENCE_DASHES["stretched"]))
        ax.text(0.5, context * 1.2, f"context {context:,}", fontsize=8, color=grey)
        ax.set_yscale("log")
        ax.set_xlabel("rotation pair i (0 = fastest)")
        ax.set_ylabel("wavelength in tokens")
        ax.set_title(f"{source}: base {rope.base:g}", fontsize=10)
        ax.legend(fontsize=8)
    save(ctx, fig, "real_config_wavelengths")
