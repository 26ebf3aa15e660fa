"""Section: RoPE turns queries and keys by an angle proportional to their seat.

The text and numbers are the lesson's chapter "RoPE: turn, don't add"
(:mod:`posenc.teaching.lesson.chapters.rope`); this section prints them, records the numbers and draws the
clock dials' figure.
"""

from __future__ import annotations

import math

import torch

from ..lesson.chapters.rope import (  # noqa: F401  (the chapter's helpers, for callers of the tour)
    HEAD_DIM,
    SENTENCES,
    distance_verdict,
    sign_check,
    wrap_degrees,
)
from ..lesson.formats import signed
from ..lesson.palette import ROLE_COLOURS
from ..lesson.rotation import DIAL_THETA, KEY, QUERY, SEAT_PAIRS, THETA, hand_angles, pair_score, rotate_2d  # noqa: F401
from ._plot import new_figure, save
from .telling import tell

CHAPTER = "rope"


def rope_demo(ctx) -> None:
    numbers = tell(ctx, CHAPTER)
    _draw_dials(ctx, torch.tensor([numbers[f"rope.dial.{seat}"] for seat in range(4)]))


def _distance_verdict(ctx) -> str:
    """The chapter's sentence under the score table, from the scores in ``ctx.facts``; records what it rests on."""
    text, facts = distance_verdict(ctx.facts)
    for key, value in facts.items():
        ctx.record(key, value)
    return text


def _draw_dials(ctx, angles: torch.Tensor) -> None:
    colours = {"dog": ROLE_COLOURS["key"], "bit": ROLE_COLOURS["query"]}  # "bit" queries, "dog" is the key
    fig = new_figure(10, 5.4)
    axes = fig.subplots(2, 4)
    for row, (name, words) in enumerate(SENTENCES.items()):
        for seat, word in enumerate(words):
            ax = axes[row][seat]
            ax.add_patch(_circle())
            for tick in range(12):
                a = math.radians(30 * tick)
                ax.plot([0.9 * math.cos(a), math.cos(a)], [0.9 * math.sin(a), math.sin(a)], color="0.6", linewidth=0.8)
            a = math.radians(float(angles[seat]))
            colour = colours.get(word, "0.35")
            ax.plot([0, 0.8], [0, 0], color="0.75", linewidth=1.5, linestyle="--")  # unturned hand
            if angles[seat] > 0:
                ax.add_patch(_wedge(float(angles[seat]), colour))
            ax.annotate(
                "",
                xy=(0.8 * math.cos(a), 0.8 * math.sin(a)),
                xytext=(0, 0),
                arrowprops=dict(arrowstyle="-|>", color=colour, linewidth=2.2),
            )
            ax.set_title(
                f'seat {seat}: "{word}"\n{float(angles[seat]):.0f}°',
                fontsize=9,
                color=colour if word in colours else "black",
            )
            ax.set_xlim(-1.15, 1.15)
            ax.set_ylim(-1.15, 1.15)
            ax.set_aspect("equal")
            ax.axis("off")
        axes[row][0].text(-1.6, 0, f"sentence {name}", rotation=90, va="center", ha="center", fontsize=10)
    step = ctx.facts["rope.dial.step_degrees"]
    fig.suptitle(
        f"RoPE clock dials: each seat turns the vector by {signed(step, 0)}° "
        f"(dog to bit: {signed(ctx.facts['rope.relative.A'], 0)}° in A, "
        f"{signed(ctx.facts['rope.relative.B'], 0)}° in B)",
        fontsize=11,
    )
    save(ctx, fig, "rope_clock_dials")


def _circle():
    from matplotlib.patches import Circle

    return Circle((0, 0), 1.0, fill=False, color="0.4", linewidth=1.2)


def _wedge(degrees: float, colour):
    """The shaded turn from 0 to ``degrees``, counter-clockwise (matplotlib's own direction)."""
    from matplotlib.patches import Wedge

    return Wedge((0, 0), 0.45, 0.0, degrees, color=colour, alpha=0.18)
