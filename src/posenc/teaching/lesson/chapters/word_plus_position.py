"""Chapter "Word + position = input": the position vector is added to the word vector, number by number,
and which of the two is longer depends on how the word vectors are scaled."""

from __future__ import annotations

import math
from typing import Dict, Tuple

import torch
import torch.nn.functional as F

from ....sinusoidal import SinusoidalPositionalEncoding
from ..prose import Block
from ..vectors import split_words, word_vector
from ._check import Check, Evidence
from ._figures import Figure, Word
from ._ranges import Range, checked

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
            "plain",
            """Each word walks in carrying a list of numbers for what it means, and its seat adds a second list
            on top.""",
            "intro",
        ),
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
            "caption",
            """Three rows of bars with the same number of bars: the word vector, the position vector of the chosen
            seat, and their sum, which is what the first layer reads.""",
            "input-caption",
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
            f"""At GPT-2's scale the position vector is about {gpt2:.0f} times the word, and the word is drowned:
            the sum is almost the position alone. Rule 1 of [chapter 4](#three-rules), bounded values, does not
            prevent this. Bounded values are necessary, not sufficient: they keep the position from growing with
            the seat, so the balance is the same at every seat, but they do not choose the balance. The scale of
            the word vectors does: the 2017 Transformer multiplies them by √d_model so that they are not drowned,
            and training moves the balance further (GPT-2's own position table is learned, not sine waves).""",
            "after",
        ),
        Block(
            "try",
            """move the seat: only the middle row changes, and the bottom row is always the top two added. Switch
            the scale to 0.02 and watch the sum look like the position alone.""",
            "after",
        ),
    ]


# -- the figure: a word vector, its seat's position vector, and their sum --
#: parameter -> (minimum, maximum, default, help) of the figure (the explorer's API publishes it)
FIGURE_RANGES: Dict[str, Range] = {
    "seat": (0, 4095, 3, "a seat (position) in the sentence"),
    "embed_std": (0.001, 10.0, 1.0, "standard deviation of the word vector's entries"),
    "input_d_model": (2, 64, 16, "width of both vectors (even)"),
}


def word_plus_position(word: str, seat: int, d_model: int, embed_std: float) -> dict:
    """A word vector, the sinusoidal position vector of ``seat``, and their sum (same width)."""
    split_words(word, "word")
    checked(FIGURE_RANGES, "seat", seat)
    checked(FIGURE_RANGES, "input_d_model", d_model, argument="d_model", even=True)
    checked(FIGURE_RANGES, "embed_std", embed_std)
    encoding = SinusoidalPositionalEncoding(d_model).double()
    w = word_vector(word, d_model) * embed_std  # (d,)
    x = encoding(w.view(1, 1, d_model), offset=seat)[0, 0]  # (d,) = w + PE[seat]
    p = x - w
    return {
        "word": word,
        "seat": seat,
        "d_model": d_model,
        "embed_std": embed_std,
        "word_vector": w.tolist(),
        "position_vector": p.tolist(),
        "input": x.tolist(),
        "word_norm": float(w.norm()),
        "position_norm": float(p.norm()),
        "ratio": float(p.norm() / w.norm()),
        "cosine_input_word": float(F.cosine_similarity(x, w, dim=0)),
    }


#: route -> figure function (the explorer serves it at /api/lesson/<route>)
FIGURES = {"input": Figure(word_plus_position, word=Word("dog"), d_model="input_d_model")}


# -- the knowledge check the manifest lists under this chapter (the quiz collects it) --
def _added() -> Evidence:
    """Width and size of a position vector beside a word vector, at the teaching layer's stated scale.

    The scale is :mod:`posenc.teaching.input_sizes`' (TinyLM's N(0, 0.02^2) embeddings times sqrt(d_model)),
    the same function ``posenc tour`` prints from, so the two agree by construction and a test checks it.
    """
    from ....sinusoidal import SinusoidalPositionalEncoding
    from ...input_sizes import D_MODEL, position_word_lengths

    d_model = D_MODEL
    sizes = position_word_lengths(d_model)
    pe = SinusoidalPositionalEncoding(d_model, max_len=2048)
    tokens = torch.zeros(1, 3, d_model)
    out = pe(tokens)  # (1, 3, d)
    largest = float(pe.pe.abs().max())
    pe_norm = pe.pe.to(torch.float64).norm(dim=-1)  # (max_len,)
    unscaled = sizes["ratio"] * sizes["embed_scale"]  # without the sqrt(d) factor
    raw = sizes["raw_ratio"][1000]
    return (
        [
            f"Three token vectors of width {d_model} in, {tuple(out.shape)} out: the width is unchanged.",
            f"Every value lies in [-1, 1] (largest |value| over {pe.pe.shape[0]} rows: {largest:.6f}) "
            f"and every row has the same length |PE| = sqrt(d/2) = {float(pe_norm.min()):.4f} .. "
            f"{float(pe_norm.max()):.4f}.",
            f"Scale used here and in posenc tour: posenc's TinyLM, word vectors N(0, "
            f"{sizes['embedding_std']}^2) times sqrt(d_model) = {sizes['embed_scale']:.1f}, mean length "
            f"{sizes['word_norm']:.2f}. The position vector is {sizes['ratio']:.2f}x the word's length: "
            f"the same size, so neither drowns the other.",
            f"Raw integers instead: seat 1000 as 1000 in every coordinate is {raw:,.0f}x the word's length. "
            f"(Without the sqrt(d_model) factor the sine code would be {unscaled:.1f}x, which is why the "
            f"2017 Transformer scales its embeddings.)",
        ],
        {
            "shape": list(out.shape),
            "max_abs": largest,
            "d_model": d_model,
            "embedding_std": sizes["embedding_std"],
            "embed_scale": sizes["embed_scale"],
            "pe_norm": [float(pe_norm.min()), float(pe_norm.max())],
            "embedding_norm": sizes["word_norm"],
            "ratio": sizes["ratio"],
            "ratio_unscaled": unscaled,
            "raw_ratio_1000": raw,
        },
    )


CHECKS: Tuple[Check, ...] = (
    Check(
        "added",
        "input encodings",
        "A sinusoidal or learned position vector meets a token's embedding before the first layer. "
        "How are the two combined?",
        (
            "The position vector is glued onto the end, so the width doubles.",
            "They have the same width d_model and are summed element by element.",
            "The position vector replaces the embedding in the first layer only.",
        ),
        1,
        (
            "Concatenation would double the width, and every weight matrix after it; the schemes add instead.",
            "Same width, plain sum; the position values are bounded and of fixed size, unlike raw integers.",
            "The model needs both what the word is and where it is; nothing is thrown away.",
        ),
        _added,
    ),
)
