"""Chapter "The PyTorch demo": the text around the demo's code (the code and its output are the figure)."""

from __future__ import annotations

from ..prose import Block
from ..rotation import KEY, QUERY, THETA, pair_score

#: the seats of the demo's query and key, the figure's default move and the try-this's
SEATS = (1, 3)
SHIFTS = (100, 10_000)


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
            "try",
            f"""move the pair by {far:,} seats: the two scores still agree to five decimals
            ({n[f"demo.score.moved.{far}"]:.5f})."""
            if agree
            else f"""move the pair by {far:,} seats: the two scores drift apart in the fifth decimal
            ({n["demo.score"]:.5f} and {n[f"demo.score.moved.{far}"]:.5f}).""",
            "after",
        ),
    ]
