"""Chapter "Two ideas that fail": raw integers and 0..1 fractions as position codes, and why both fail."""

from __future__ import annotations

import functools
from typing import Dict

import torch
import torch.nn.functional as F

from ....sinusoidal import SinusoidalPositionalEncoding, sinusoidal_table
from ...input_sizes import D_MODEL, VOCAB, position_word_lengths, tinylm_word_vectors
from ..prose import Block
from ._ranges import Range, checked

#: Positions at which the raw-integer code is compared with the word vectors.
POSITIONS = (1, 10, 100, 500, 1000)
#: Sentence lengths for the fraction code.
LENGTHS = (4, 100)
#: the two-number word vector of the first example, and its seat
EXAMPLE_WORD = (0.42, -0.15)
EXAMPLE_SEAT = 500


@functools.lru_cache(maxsize=4)
def _word_vectors(d_model: int, seed: int) -> torch.Tensor:
    return tinylm_word_vectors(d_model, seed)[:2]


def word_vectors(d_model: int = D_MODEL, seed: int = 0) -> torch.Tensor:
    """Two word vectors ("dog", "man"): rows 0 and 1 of TinyLM's scaled embeddings, float64 (2, d_model).

    The scale is the one :mod:`posenc.teaching.input_sizes` states for the whole teaching layer: N(0, 0.02^2)
    entries times sqrt(d_model). The chapter's text and its figure read this one pair.
    """
    return _word_vectors(d_model, seed).clone()


def sine_band() -> torch.Tensor:
    """cos("dog" + PE(p), "man" + PE(p)) at every seat p = 0 .. BAND_SEATS - 1, shape (BAND_SEATS,)."""
    dog, man = word_vectors()
    waves = sinusoidal_table(BAND_SEATS, D_MODEL).double()  # (BAND_SEATS, D_MODEL)
    return F.cosine_similarity(dog + waves, man + waves, dim=-1)


def fraction_positions(length: int) -> torch.Tensor:
    """Seat ``i`` of a ``length``-word sentence coded as ``i / length``, shape (length,)."""
    return torch.arange(length, dtype=torch.float64) / length


def numbers() -> dict:
    """Both ideas measured at posenc's teaching scale (:mod:`posenc.teaching.input_sizes`)."""
    n: dict = {}
    word = torch.tensor(EXAMPLE_WORD, dtype=torch.float64)
    n["naive.example.word"] = word.tolist()
    n["naive.example.stamped"] = (word + EXAMPLE_SEAT).tolist()
    words = word_vectors()
    dog, man = words[0], words[1]
    sizes = position_word_lengths(D_MODEL)
    sinus = SinusoidalPositionalEncoding(D_MODEL)
    n["naive.d_model"] = D_MODEL
    n["naive.embedding_std"] = sizes["embedding_std"]
    n["naive.embed_scale"] = sizes["embed_scale"]
    n["naive.scale_ratio"] = sizes["ratio"]
    n["naive.word_norm"] = sizes["word_norm"]
    n["naive.cosine.no_position"] = float(F.cosine_similarity(dog, man, dim=0))
    band = sine_band()
    n["naive.sine_band.low"], n["naive.sine_band.high"] = float(band.min()), float(band.max())
    for pos in POSITIONS:
        raw = torch.full((D_MODEL,), float(pos), dtype=torch.float64)
        wave = sinus.encodings(torch.tensor(pos)).double()
        n[f"naive.raw.ratio.{pos}"] = float(raw.norm() / sizes["word_norm"])
        n[f"naive.raw.cosine.{pos}"] = float(F.cosine_similarity(dog + raw, man + raw, dim=0))
        n[f"naive.sinusoidal.ratio.{pos}"] = float(wave.norm() / sizes["word_norm"])
        n[f"naive.sinusoidal.cosine.{pos}"] = float(F.cosine_similarity(dog + wave, man + wave, dim=0))
    for length in LENGTHS:
        codes = fraction_positions(length)
        n[f"naive.fraction.step.{length}"] = float(torch.diff(codes)[0])
        # the sinusoidal module builds each sentence's codes without knowing its length
        pe = sinus(torch.zeros(1, length, D_MODEL))[0].double()  # (length, d_model)
        n[f"naive.sinusoidal.step.{length}"] = float((pe[3] - pe[2]).norm())
        n[f"naive.fraction.codes.{length}"] = codes[:4].tolist()
    n["naive.fraction.step_ratio"] = n["naive.fraction.step.4"] / n["naive.fraction.step.100"]
    return n


def _vector(values) -> str:
    return "[" + ", ".join(f"{v:.2f}" for v in values) + "]"


def prose(n: dict) -> list[Block]:
    """The chapter's text with the numbers of :func:`numbers`."""
    raw_rows = [("seat", "raw: size", "raw: cos", "sine: size", "sine: cos")]
    for pos in POSITIONS:
        raw_rows.append(
            (
                str(pos),
                f"{n[f'naive.raw.ratio.{pos}']:,.0f}x",
                f"{n[f'naive.raw.cosine.{pos}']:.6f}",
                f"{n[f'naive.sinusoidal.ratio.{pos}']:.2f}x",
                f"{n[f'naive.sinusoidal.cosine.{pos}']:+.3f}",
            )
        )
    step_rows = [("sentence", "fraction codes", "one step", "sine: |PE(3) - PE(2)|")]
    for length in LENGTHS:
        shown = ", ".join(f"{v:.2f}" for v in n[f"naive.fraction.codes.{length}"])
        step_rows.append(
            (
                f"{length} words",
                shown + ", ...",
                f"{n[f'naive.fraction.step.{length}']:.2f}",
                f"{n[f'naive.sinusoidal.step.{length}']:.4f}",
            )
        )
    step4, step100 = n["naive.fraction.step.4"], n["naive.fraction.step.100"]
    sine_cosines = [n[f"naive.sinusoidal.cosine.{pos}"] for pos in POSITIONS]
    sine_low, sine_high = min(sine_cosines), max(sine_cosines)
    return [
        Block(
            "plain",
            """Each word enters the model as a list of numbers (its meaning). To tell the model where the word
            sits, we add a second list of the same length (its seat). The question is what numbers to put in
            that second list.""",
            "intro",
        ),
        Block(
            "p",
            "Why not write the seat number down as it is? Two obvious attempts show what a position code must not do.",
            "intro",
        ),
        Block("h3", "Bad idea 1: add the raw integer", "idea1"),
        Block(
            "p",
            f"""Add 1 to every number of the first word, 2 to the second, 500 to the five-hundredth. The
            two-number word vector {_vector(n["naive.example.word"])} at seat {EXAMPLE_SEAT} becomes
            {_vector(n["naive.example.word"])} + {EXAMPLE_SEAT} = **{_vector(n["naive.example.stamped"])}**.
            Word vectors hold small numbers, roughly between −1 and 1, so far into a text the seat number is
            all that is left: two different words end up pointing the same way.""",
            "idea1",
        ),
        Block(
            "caption",
            """How alike "dog" and "man" look (cosine similarity, 1 = the same direction): on their own, with the
            raw seat number added, and with a sine/cosine code of that seat added instead.""",
            "raw-caption",
        ),
        Block(
            "p",
            f"""Now with real word vectors. **The scale used here, and by the knowledge checks:** posenc's
            TinyLM at width d_model = {D_MODEL}, whose word vectors start as N(0, {n["naive.embedding_std"]}^2)
            entries and are multiplied by sqrt(d_model) = {n["naive.embed_scale"]:.1f} before the position is
            added (as the 2017 Transformer does). Over its {VOCAB} word vectors the average length is
            {n["naive.word_norm"]:.2f}; a sine position vector is {n["naive.scale_ratio"]:.2f} times that long
            at every seat. The table compares the length of the position term with the word term, and how
            similar two different words (“dog” and “man”) look once both carry the same position (cosine
            similarity; without position it is {n["naive.cosine.no_position"]:+.3f}).""",
            "idea1-measured",
        ),
        Block(
            "table",
            """How much the position term outweighs the word term: its length over the word's (size), and
            cos(dog, man) once both carry it (cos), with the raw seat and with the sine code""",
            "idea1-measured",
            rows=tuple(raw_rows),
        ),
        Block(
            "p",
            f"""With raw integers the position grows without bound: by seat 1000 it is
            {n["naive.raw.ratio.1000"]:,.0f} times longer than the word, and “dog” and “man” point in almost
            exactly the same direction. The meaning is drowned. A sine/cosine code has the same length at
            every seat (its squared length is d_model/2 = {D_MODEL // 2}), about as long as the word itself.
            It does pull “dog” and “man” together, from {n["naive.cosine.no_position"]:+.3f} to between
            {sine_low:+.3f} and {sine_high:+.3f}, but by the same amount at seat 1 as at seat
            {max(POSITIONS):,}: the pull is bounded, where the raw integer's grows until the words are one
            direction.""",
            "idea1-measured",
        ),
        Block("h3", "Bad idea 2: fractions from 0 to 1", "idea2"),
        Block(
            "p",
            """Divide by the length, so the first word is 0 and the last one is close to 1. Now the numbers stay
            small, but one step from a word to its neighbour is worth a different amount in every sentence.""",
            "idea2",
        ),
        Block(
            "caption",
            "The codes of the first seats on a ruler from 0 to 1, and the size of one step.",
            "frac-caption",
        ),
        Block("table", "One step of the fraction code and of the sine code", "idea2-measured", rows=tuple(step_rows)),
        Block(
            "p",
            f"""Neighbouring words are {step4:.2f} apart in a 4-word sentence but {step100:.2f} apart in a
            100-word one ({n["naive.fraction.step_ratio"]:.0f} times less), so “one word later” has no fixed
            meaning. (Coding the last word as exactly 1.0 instead, i / (length − 1), gives steps of 1/3 and
            1/99: the same problem.) The sinusoidal code gives the same step between seats 2 and 3 in both
            sentences, because each seat's vector never depends on the length.""",
            "idea2-measured",
        ),
        Block(
            "note",
            f"""The sine code pulls “dog” and “man” together too, from {n["naive.cosine.no_position"]:+.3f} to
            between {n["naive.sine_band.low"]:+.3f} and {n["naive.sine_band.high"]:+.3f} over seats 0 to
            {BAND_SEATS - 1:,}, depending on the seat: the same vector is added to both, and at this scale it is
            {n["naive.scale_ratio"]:.2f} times as long as a word. What matters for rule 1 is that the pull stops
            there. The sine code's length is fixed, √(d/2), so the similarity stays in one band at every seat
            (printed under that figure), while the raw integer keeps growing and pushes it to 1. In a real
            model the balance is set once, by the scale of the word vectors ([chapter 2](#word-plus-position))
            and by training, which spreads meaning and position over hundreds of directions; a code that grows
            with the seat would upset that balance further into every text.""",
            "after",
            id="sine-pull",
        ),
        Block(
            "p",
            """So a good code must be (1) bounded, (2) consistent from one step to the next, and (3) different
            for every seat. The next chapter measures these three rules.""",
            "after",
        ),
        Block(
            "try",
            """push the seat to 2000 and watch “dog” and “man” become the same direction (similarity 1.000) with
            the raw seat, while the sine code stays in its band. Then set the sentence to 100 words: the step
            shrinks from 0.25 to 0.01.""",
            "after",
        ),
    ]


# -- the figure: a raw seat stamped on a word, and the fraction code of a sentence --
#: parameter -> (minimum, maximum, default, help) of the figure (the explorer's API publishes it)
FIGURE_RANGES: Dict[str, Range] = {
    "raw_seat": (0, 100_000, 500, "the seat whose raw integer is added"),
    "sentence_len": (2, 100_000, 4, "words in the sentence coded by fractions"),
}
#: the figure's sine band: the similarity of "dog" and "man" with the sine code of each seat 0 .. BAND_SEATS - 1
BAND_SEATS = 2001


def bad_ideas(raw_seat: int, sentence_len: int) -> dict:
    """Bad idea 1: add the seat number itself. Bad idea 2: code seat i of L words as i / L."""
    checked(FIGURE_RANGES, "raw_seat", raw_seat)
    checked(FIGURE_RANGES, "sentence_len", sentence_len)
    word = torch.tensor(EXAMPLE_WORD, dtype=torch.float64)
    stamped = word + raw_seat
    # the seat's raw code against the two-number word it is added to, as the figure prints them
    pair_raw = torch.full((2,), float(raw_seat), dtype=torch.float64)
    # the text's "dog" and "man" (TinyLM's word vectors at width D_MODEL), and how alike they look once stamped
    dog, man = word_vectors()
    raw = torch.full((D_MODEL,), float(raw_seat), dtype=torch.float64)
    wave = sinusoidal_table(1, D_MODEL, start=raw_seat)[0].double()
    pulled = sine_band()  # (BAND_SEATS,): bounded, so the pull never grows with the seat
    fractions = fraction_positions(sentence_len)
    shown = fractions[:8]
    step = float(fractions[1] - fractions[0])
    reference = fraction_positions(4)
    return {
        "raw_seat": raw_seat,
        "word": list(EXAMPLE_WORD),
        "stamped": stamped.tolist(),
        "raw_ratio": float(pair_raw.norm() / word.norm()),
        "raw_ratio_dog": float(raw.norm() / dog.norm()),
        "d_model": D_MODEL,
        "cosine_words": float(F.cosine_similarity(dog, man, dim=0)),
        "cosine_raw": float(F.cosine_similarity(dog + raw, man + raw, dim=0)),
        "cosine_sine": float(F.cosine_similarity(dog + wave, man + wave, dim=0)),
        "cosine_sine_range": [float(pulled.min()), float(pulled.max())],
        "word_length": float(dog.norm()),
        "sine_length": float(wave.norm()),
        "sentence_len": sentence_len,
        "fractions": shown.tolist(),
        "step": step,
        "step_4_words": float(reference[1] - reference[0]),
        "meaning_of_step": step * 4,  # the 1-word step, in units of the 4-word sentence's step
    }


#: route -> figure function (the explorer serves it at /api/lesson/<route>)
FIGURES = {"bad-ideas": bad_ideas}
