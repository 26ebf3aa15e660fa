"""Chapter "Word + position = input": the position vector is added to the word vector, number by number,
and which of the two is longer depends on how the word vectors are scaled."""

from __future__ import annotations

import math

import torch

from ...sinusoidal import SinusoidalPositionalEncoding
from ..prose import Block

#: the figure's default width, at which the chapter's lengths are measured
WIDTH = 16
#: the word-vector scales the figure offers: label -> the standard deviation of one entry at WIDTH
SCALES = {
    "N(0, 1): nn.Embedding's default": 1.0,
    "N(0, 0.02²): GPT-2 / BERT initialisation": 0.02,
    "0.02 × √d: the 2017 Transformer": 0.02 * math.sqrt(WIDTH),
}
#: how many word vectors are drawn to measure a mean length, and the seats the position is measured at
SAMPLES = 4096
SEATS = (0, 3, 60, 1000)


def numbers() -> dict:
    """The lengths of word and position vectors at each scale, measured with posenc at width 16."""
    n: dict = {"input.width": WIDTH}
    pe = SinusoidalPositionalEncoding(WIDTH, max_len=max(SEATS) + 1).double()
    lengths = pe.encodings(torch.tensor(SEATS)).double().norm(dim=-1)  # (len(SEATS),)
    n["input.position_norm.min"] = float(lengths.min())
    n["input.position_norm.max"] = float(lengths.max())
    n["input.position_norm.closed_form"] = math.sqrt(WIDTH / 2)
    generator = torch.Generator().manual_seed(0)
    unit = torch.randn(SAMPLES, WIDTH, generator=generator, dtype=torch.float64)
    for i, std in enumerate(SCALES.values()):
        word_norm = float((unit * std).norm(dim=-1).mean())
        n[f"input.scale.{i}.std"] = std
        n[f"input.scale.{i}.word_norm"] = word_norm
        n[f"input.scale.{i}.ratio"] = n["input.position_norm.max"] / word_norm
    return n


def prose(n: dict) -> list[Block]:
    """The chapter's text with the numbers of :func:`numbers`."""
    rows = [("word vectors", "word length", "position length", "position / word")]
    for i, label in enumerate(SCALES):
        rows.append(
            (
                label,
                f"{n[f'input.scale.{i}.word_norm']:.2f}",
                f"{n['input.position_norm.max']:.2f}",
                f"{n[f'input.scale.{i}.ratio']:.2f}",
            )
        )
    gpt2 = n["input.scale.1.ratio"]
    return [
        Block(
            "p",
            """The seat number is stamped on before the first layer. The word's meaning vector comes out of an
            embedding table (`nn.Embedding`). A position vector of *exactly the same width* d_model is added to
            it, number by number:""",
            "intro",
        ),
        Block("formula", "input(t) = word(t) + position(t)", "intro"),
        Block(
            "p",
            """Nothing is glued on, so the width stays d_model and so does every weight matrix after it. The
            picture below adds the two vectors with posenc's `SinusoidalPositionalEncoding`.""",
            "intro",
        ),
        Block(
            "note",
            f"""Which of the two is longer depends on how the word vectors are scaled, so a fair comparison always
            names the scale. A sine/cosine position vector always has length √(d/2) ({n["input.position_norm.min"]:.2f}
            at width {WIDTH}, at every seat from {SEATS[0]} to {SEATS[-1]}). Word vectors with `nn.Embedding`'s
            default entries (standard deviation 1) are longer than that; with the small initialisation GPT-2 and
            BERT use (0.02) the position vector dominates a freshly initialised model, which is why the 2017
            Transformer multiplies word vectors by √d_model first. The knowledge check below states the scale its
            numbers use.""",
            "after",
        ),
        Block(
            "table",
            f"""Mean length of {SAMPLES:,} random word vectors at each scale, and of the sine position vector, at
            width {WIDTH}""",
            "after",
            rows=tuple(rows),
        ),
        Block(
            "p",
            f"""At GPT-2's scale the position vector is about {gpt2:.0f} times the word, yet this does not break
            rule 1 of [chapter 4](#three-rules): the ratio is the same at every seat, so the position never buries
            the meaning *further* into a text. The balance is set once, by the scale of the word vectors, and
            training moves it (GPT-2's own position table is learned, not sine waves).""",
            "after",
        ),
        Block(
            "try",
            """move the seat: only the middle row changes, and the bottom row is always the top two added. Switch
            the scale to 0.02 and watch the sum look like the position alone.""",
            "after",
        ),
    ]
