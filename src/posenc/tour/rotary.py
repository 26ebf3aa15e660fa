"""Section: RoPE turns queries and keys by an angle proportional to their seat.

Everything here goes through the library's own rotation (:func:`posenc.rope.apply_rotary` with
tables from :func:`posenc.rope.rope_cos_sin`, and the :class:`posenc.RotaryEmbedding` module), with
one rotation pair (a 2-D vector) so that every number can be checked by hand.
"""

from __future__ import annotations

import math
from typing import Dict

import torch

from ..explorer.palette import ROLE_COLOURS
from ..lesson.rotation import DIAL_THETA, KEY, QUERY, SEAT_PAIRS, THETA, hand_angles, pair_score, rotate_2d  # noqa: F401
from ..rope import RotaryEmbedding
from ._plot import new_figure, save
from ._show import plain, prose, sci, signed, table, verdict

SENTENCES = {"A": ("The", "dog", "bit", "man"), "B": ("The", "man", "bit", "dog")}
#: A full-size head for the module check.
HEAD_DIM = 64


def wrap_degrees(angle: float) -> float:
    """Map an angle to (-180, 180]."""
    wrapped = math.fmod(angle, 360.0)
    if wrapped > 180.0:
        wrapped -= 360.0
    elif wrapped <= -180.0:
        wrapped += 360.0
    return wrapped


def rope_demo(ctx) -> None:
    plain(
        ctx,
        """Modern models add nothing to the word. Inside attention they turn small pieces of
    each query and key like clock hands, further the later the word sits, so that only the gap
    between two words changes their match.""",
    )
    prose(
        ctx,
        f"""Modern LLMs (Llama, Mistral, Qwen, DeepSeek) add nothing to the input. Inside
    every attention layer, RoPE splits each query and key into pairs of numbers and turns pair i of
    the token at seat m by the angle m * theta_i. The score of query seat m against key seat n is then
    a function of m - n alone: turning both by the same extra angle leaves their dot product
    unchanged. The lesson's example: one pair, theta = {THETA} rad, q = {list(QUERY)},
    k = {list(KEY)}, turned by posenc's [cyan]apply_rotary[/].""",
    )
    t = table("query seat", "key seat", "gap", "score q.k", "equals seats 1 vs 3?")
    near = None
    for m, n in SEAT_PAIRS:
        score = ctx.record(f"rope.demo.score.{m}.{n}", pair_score(QUERY, KEY, m, n))
        near = score if near is None else near
        same = round(score, 5) == round(near, 5)
        t.add_row(
            str(m),
            str(n),
            str(n - m),
            f"{score:.5f}",
            verdict(same, "yes, to 5 decimals", "no") if (m, n) != SEAT_PAIRS[0] else "",
        )
    ctx.console.print(t)
    ctx.record("rope.demo.score_near", ctx.facts["rope.demo.score.1.3"])
    ctx.record("rope.demo.score_far", ctx.facts["rope.demo.score.101.103"])
    prose(ctx, _distance_verdict(ctx))

    _module_check(ctx)
    _dials(ctx)


def _seats(pairs) -> str:
    """``[(1, 3), (101, 103)]`` -> ``"seats 1 vs 3 and 101 vs 103"``."""
    text = [f"{m:,} vs {n:,}" for m, n in pairs]
    return "seats " + (", ".join(text[:-1]) + " and " + text[-1] if len(text) > 1 else text[0])


def _distance_verdict(ctx) -> str:
    """The sentence under the score table, built from the recorded scores (to 5 decimals).

    Pairs at the first pair's gap should score the same, every other gap differently; the sentence
    says which pairs did, and the closing claim is made only when all of them did.
    """
    first = SEAT_PAIRS[0]
    near = round(ctx.facts[f"rope.demo.score.{first[0]}.{first[1]}"], 5)
    gap = first[1] - first[0]
    same = [p for p in SEAT_PAIRS if round(ctx.facts[f"rope.demo.score.{p[0]}.{p[1]}"], 5) == near]
    other = [p for p in SEAT_PAIRS if p not in same]
    ctx.record("rope.demo.same_score_pairs", [list(p) for p in same])
    ctx.record("rope.demo.other_score_pairs", [list(p) for p in other])
    held = all(n - m == gap for m, n in same) and all(n - m != gap for m, n in other)
    ctx.record("rope.demo.distance_only", held)
    text = f"{_seats(same).capitalize()} give the same score"
    if other:
        gaps = sorted({n - m for m, n in other})
        apart = " or ".join(str(g) for g in gaps)
        text += f"; {_seats(other)}, {apart} apart, do not"
    if held:
        return text + ". Attention reads distance, not address."
    return text + (
        f". [bold red]That is NOT as claimed:[/] every pair {gap} apart should score the "
        "same and every other gap differently."
    )


def _module_check(ctx) -> None:
    rope = RotaryEmbedding(HEAD_DIM)
    q = torch.randn(1, 1, 1, HEAD_DIM)  # (batch, heads, seq, head_dim)
    k = torch.randn(1, 1, 1, HEAD_DIM)
    scores: Dict[int, float] = {}
    for start in (0, 1_000, 100_000):
        q_rot, _ = rope(q, q, position_ids=torch.tensor([[start + 5]]))
        k_rot, _ = rope(k, k, position_ids=torch.tensor([[start + 2]]))
        scores[start] = float((q_rot * k_rot).sum())
    spread = max(scores.values()) - min(scores.values())
    ctx.record("rope.module.scores", scores)
    ctx.record("rope.module.spread", spread)
    prose(
        ctx,
        f"""The same holds for a full {HEAD_DIM}-wide head with {HEAD_DIM // 2} pairs turning at
    {HEAD_DIM // 2} speeds, through the [cyan]posenc.RotaryEmbedding[/] module: a random query 3 seats
    after a random key scores {scores[0]:.6f} at seats 5/2, {scores[1_000]:.6f} at 1005/1002 and
    {scores[100_000]:.6f} at 100005/100002 (spread {sci(spread)}, float32 rounding).""",
    )


def sign_check(theta: float = DIAL_THETA) -> torch.Tensor:
    """(1, 0) turned by one seat of ``theta`` with the library's rotation, float64 shape (2,).

    With RoPE's matrix ``(a, b) -> (a cos - b sin, a sin + b cos)`` a positive angle moves (1, 0) to
    (cos, sin): its second coordinate is positive, a counter-clockwise turn on ordinary axes.
    """
    return rotate_2d(torch.tensor([[1.0, 0.0]]), [1], theta)[0]


def _sign_convention(ctx) -> None:
    moved = sign_check()
    ctx.record("rope.sign.turned_x", float(moved[0]))
    ctx.record("rope.sign.turned_y", float(moved[1]))
    ctx.record("rope.sign.counter_clockwise", bool(moved[1] > 0))
    prose(
        ctx,
        f"""[bold]Which way the hands turn.[/] Everywhere in posenc (this tour, the explorer,
    the figures) a positive angle turns counter-clockwise, as in school geometry: RoPE's 2x2
    matrix sends (a, b) to (a cos - b sin, a sin + b cos), and posenc's [cyan]apply_rotary[/] turns
    (1, 0) by one seat of {math.degrees(DIAL_THETA):.0f} degrees to ({signed(float(moved[0]), 3)},
    {signed(float(moved[1]), 3)}), up and to the left of where it started. The lesson calls the same
    +30 degree step "clockwise" because it reads its dials like a clock; drawn in a mirror, one
    turn looks like the other. What attention uses is the signed angle [italic]between[/] two hands,
    and that sign is the same in both pictures: positive when the query sits after the key.""",
    )


def _dials(ctx) -> None:
    seats = list(range(4))
    angles = hand_angles(seats)
    for seat in seats:
        ctx.record(f"rope.dial.{seat}", float(angles[seat]))
    step = ctx.record("rope.dial.step_degrees", math.degrees(DIAL_THETA))
    prose(
        ctx,
        f"""The clock picture: with theta = {step:.0f} degrees per seat, RoPE turns the vector
    (1, 0), which points at 0 degrees, to {", ".join(f"{float(a):.0f}" for a in angles)} degrees at
    seats {seats[0]}-{seats[-1]}.""",
    )
    _sign_convention(ctx)
    t = table("sentence", "dog at", "bit at", "dog's hand", "bit's hand", "dog to bit")
    relative = {}
    for name, words in SENTENCES.items():
        dog, bit = words.index("dog"), words.index("bit")
        turn = wrap_degrees(float(angles[bit] - angles[dog]))
        relative[name] = ctx.record(f"rope.relative.{name}", turn)
        t.add_row(
            f"{name}: {' '.join(words)}",
            str(dog),
            str(bit),
            f"{float(angles[dog]):.0f} deg",
            f"{float(angles[bit]):.0f} deg",
            f"{turn:+.0f} deg",
        )
    ctx.console.print(t)
    bit_q, dog_k = QUERY, KEY
    score_a = ctx.record("rope.relative.score.A", pair_score(bit_q, dog_k, 2, 1, DIAL_THETA))
    score_b = ctx.record("rope.relative.score.B", pair_score(bit_q, dog_k, 2, 3, DIAL_THETA))
    prose(
        ctx,
        f"""In sentence A "dog" sits one seat before "bit", so the turn from dog to bit is
    {relative["A"]:+.0f} degrees; in sentence B it sits one seat after, and the turn flips to
    {relative["B"]:+.0f} degrees. The words are the same, only the sign of the angle between them
    changed, and the attention score follows: with "bit" querying q = {list(bit_q)} and "dog" keyed
    k = {list(dog_k)}, the score is {score_a:.5f} in A and {score_b:.5f} in B. Values are never turned:
    they carry what a token says, not where it is. Figure [cyan]rope_clock_dials.png[/] draws both
    sentences: each word's hand, the unturned hand at 0 degrees as a faint grey line, and the turn
    between them shaded.""",
    )
    _draw_dials(ctx, angles)


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
                f'seat {seat}: "{word}"\n{float(angles[seat]):.0f} deg',
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
        f"RoPE clock dials: each seat turns the vector by {step:+.0f} degrees "
        f"(dog to bit: {ctx.facts['rope.relative.A']:+.0f} deg in A, "
        f"{ctx.facts['rope.relative.B']:+.0f} deg in B)",
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
