"""Chapter "The PyTorch demo": the text around the demo's code (the code and its output are the figure)."""

from __future__ import annotations

import contextlib
import inspect
import io
from typing import Dict

from ...._checks import check_int
from ..prose import Block
from ..rotation import KEY, QUERY, THETA, pair_score
from . import rope
from ._figures import Figure
from ._ranges import Range, checked

#: the seats of the demo's query and key, the figure's default move and the try-this's
SEATS = (1, 3)
SHIFTS = (100, 10_000)
#: the line the page's caption tells the reader to run: the demo at its defaults
RUN_IT = 'python -c "from posenc.teaching.lesson.chapters.pytorch_demo import pytorch_demo; pytorch_demo()"'


def numbers() -> dict:
    """The demo's angle per seat and the score of its pair, where it starts and moved along."""
    q_seat, k_seat = SEATS
    n: dict = {"demo.theta": THETA, "demo.score": pair_score(QUERY, KEY, q_seat, k_seat)}
    for shift in SHIFTS:
        n[f"demo.score.moved.{shift}"] = pair_score(QUERY, KEY, q_seat + shift, k_seat + shift)
    return n


def prose(n: dict) -> list[Block]:
    """The chapter's text with the numbers of :func:`numbers`."""
    q_seat, k_seat = SEATS
    far = SHIFTS[-1]
    agree = f"{n['demo.score']:.5f}" == f"{n[f'demo.score.moved.{far}']:.5f}"
    return [
        Block(
            "plain",
            """The whole story in a few lines of code: two words two seats apart get the same match wherever they
            sit.""",
            "intro",
        ),
        Block(
            "p",
            f"""The whole story in code, first from scratch and then with posenc. Part 1 builds the sinusoidal table
            from its formula: the frequency of column pair i is 10000^(−2i/d), written as exp(2i · (−ln 10000 / d)),
            with sines in the even columns and cosines in the odd ones. Part 2 writes the 2-D rotation out by hand,
            θ = {n["demo.theta"]} radians per seat, and scores a query at seat {q_seat} against a key at seat
            {k_seat}, then the same pair moved further along. Part 3 asks posenc for the same table and the same
            turn. The server ran the code just now with your settings, and its output is printed underneath:
            {n["demo.score"]:.5f} four times, because two seats apart is two seats apart wherever the phrase
            sits.""",
            "intro",
        ),
        Block(
            "caption",
            f"""Source of `posenc.teaching.lesson.chapters.pytorch_demo.pytorch_demo` and what it printed. Run it
            yourself with `{RUN_IT}`: at its defaults it prints the score {n["demo.score"]:.5f} for seats {q_seat}
            and {k_seat} and again for seats {q_seat + SHIFTS[0]} and {k_seat + SHIFTS[0]}.""",
            "demo-caption",
        ),
        Block(
            "try",
            f"""move the pair by {far:,} seats: the two scores still agree to five decimals
            ({n[f"demo.score.moved.{far}"]:.5f})."""
            if agree
            else f"""move the pair by {far:,} seats: the two scores drift apart in the fifth decimal
            ({n["demo.score"]:.5f} and {n[f"demo.score.moved.{far}"]:.5f}).""",
            "after",
        ),
    ]


# -- the figure: the demo's source and what it prints when run now --
#: parameter -> (minimum, maximum, default, help) of the figure (the explorer's API publishes it)
FIGURE_RANGES: Dict[str, Range] = {
    "demo_d_model": (2, 64, 4, "width of the demo's sinusoidal table (even)"),
    "shift": rope.FIGURE_RANGES["shift"],  # the RoPE chapter's move of every seat
}


def pytorch_demo(shift: int = 100, d_model: int = 4) -> None:
    """The classic demo written out from scratch, then the same numbers from posenc."""
    import math

    import torch

    from posenc import apply_rotary, sinusoidal_table
    from posenc.rope import rope_cos_sin

    # 1. The sinusoidal table of the 2017 Transformer, straight from its formula
    def build_sinusoidal_pe(max_len: int, d_model: int) -> torch.Tensor:
        pe = torch.zeros(max_len, d_model)
        positions = torch.arange(max_len, dtype=torch.float).unsqueeze(1)  # (max_len, 1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(positions * div_term)  # even columns: sine waves
        pe[:, 1::2] = torch.cos(positions * div_term)  # odd columns: cosine waves
        return pe

    table = build_sinusoidal_pe(max_len=10, d_model=d_model)
    print("seat 0 wave vector:", [round(v, 3) for v in table[0].tolist()])
    print("seat 1 wave vector:", [round(v, 3) for v in table[1].tolist()])

    # 2. RoPE on one pair: turn a 2-D vector by seat * theta
    def apply_rope_2d(vec: torch.Tensor, seat: int, theta: float = 0.5) -> torch.Tensor:
        angle = seat * theta
        cos_a, sin_a = math.cos(angle), math.sin(angle)
        x1, x2 = vec[0], vec[1]
        return torch.tensor([x1 * cos_a - x2 * sin_a, x1 * sin_a + x2 * cos_a])

    q_word = torch.tensor([1.0, 0.5])
    k_word = torch.tensor([0.8, 0.2])
    near = torch.dot(apply_rope_2d(q_word, 1), apply_rope_2d(k_word, 3))
    far = torch.dot(apply_rope_2d(q_word, 1 + shift), apply_rope_2d(k_word, 3 + shift))
    print(f"score, seats 1 and 3: {near.item():.5f}")
    print(f"score, seats {1 + shift} and {3 + shift}: {far.item():.5f}")

    # 3. The same with posenc: its table, and its rotation with theta = 0.5 for the one pair
    print("posenc's table matches:", torch.allclose(sinusoidal_table(10, d_model), table, atol=1e-6))
    theta = torch.tensor([0.5])  # (pairs,) radians per seat

    def posenc_score(m: int, n: int) -> float:
        cos, sin = rope_cos_sin(torch.tensor([m, n]), theta)  # (2, 1) each
        both = torch.stack([q_word, k_word]).view(1, 1, 2, 2)  # (batch, heads, seq, dim)
        turned, _ = apply_rotary(both, both, cos, sin)
        return float(turned[0, 0, 0] @ turned[0, 0, 1])

    print(f"posenc, seats 1 and 3: {posenc_score(1, 3):.5f}")
    print(f"posenc, seats {1 + shift} and {3 + shift}: {posenc_score(1 + shift, 3 + shift):.5f}")


def run_demo(shift: int, d_model: int) -> dict:
    """The source of :func:`pytorch_demo` and what it prints when run now."""
    checked(FIGURE_RANGES, "shift", shift)
    checked(FIGURE_RANGES, "demo_d_model", d_model)
    check_int("d_model", d_model, minimum=2, maximum=64, even=True)
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        pytorch_demo(shift=shift, d_model=d_model)
    source = inspect.getsource(pytorch_demo)
    return {"shift": shift, "d_model": d_model, "source": source, "output": buffer.getvalue().rstrip("\n").split("\n")}


#: route -> figure function (the explorer serves it at /api/lesson/<route>)
FIGURES = {"demo": Figure(run_demo, d_model="demo_d_model")}
