"""Section: the two obvious position codes, raw integers and 0..1 fractions, and why both fail."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..input_sizes import D_MODEL, VOCAB, position_word_lengths, tinylm_word_vectors
from ..sinusoidal import SinusoidalPositionalEncoding
from ._show import plain, prose, table

#: Positions at which the raw-integer code is compared with the word vectors.
POSITIONS = (1, 10, 100, 500, 1000)
#: Sentence lengths for the fraction code.
LENGTHS = (4, 100)


def word_vectors(d_model: int = D_MODEL, seed: int = 0) -> torch.Tensor:
    """Two word vectors ("dog", "man"): rows 0 and 1 of TinyLM's scaled embeddings, float64 (2, d_model).

    The scale is the one :mod:`posenc.input_sizes` states for the whole teaching layer: N(0, 0.02^2)
    entries times sqrt(d_model).
    """
    return tinylm_word_vectors(d_model, seed)[:2]


def fraction_positions(length: int) -> torch.Tensor:
    """Seat ``i`` of a ``length``-word sentence coded as ``i / length``, shape (length,)."""
    return torch.arange(length, dtype=torch.float64) / length


def plain_seat_numbers(ctx) -> None:
    plain(
        ctx,
        """Each word enters the model as a list of numbers (its meaning). To tell the model
    where the word sits, we add a second list of the same length (its seat). The question is what
    numbers to put in that second list.""",
    )
    prose(
        ctx,
        """The first idea: add the seat number itself to every coordinate of the word vector.
    The lesson's two-number word vector [0.42, -0.15] at seat 500 becomes:""",
    )
    word = torch.tensor([0.42, -0.15], dtype=torch.float64)
    stamped = word + 500
    ctx.record("naive.example.word", word.tolist())
    ctx.record("naive.example.stamped", stamped.tolist())
    ctx.console.print(f"  {word.tolist()} + 500 = [bold]{[round(v, 2) for v in stamped.tolist()]}[/]", highlight=False)
    ctx.console.print()

    words = word_vectors()
    dog, man = words[0], words[1]
    sizes = position_word_lengths(D_MODEL)
    sinus = SinusoidalPositionalEncoding(D_MODEL)
    ctx.record("naive.d_model", D_MODEL)
    ctx.record("naive.embedding_std", sizes["embedding_std"])
    ctx.record("naive.embed_scale", sizes["embed_scale"])
    ctx.record("naive.scale_ratio", sizes["ratio"])
    prose(
        ctx,
        f"""Now with real word vectors. [bold]The scale used here, and by the explorer's
    knowledge checks:[/] posenc's TinyLM at width d_model = {D_MODEL}, whose word vectors start as
    N(0, {sizes["embedding_std"]}^2) entries and are multiplied by sqrt(d_model) =
    {sizes["embed_scale"]:.1f} before the position is added (as the 2017 Transformer does). Over its
    {VOCAB} word vectors the average length is {sizes["word_norm"]:.2f};
    a sine position vector is {sizes["ratio"]:.2f} times that long at every seat. The table compares
    the length of the position term with the word term, and how similar two different words ("dog"
    and "man") look once both carry the same position (cosine similarity; without position it is
    {F.cosine_similarity(dog, man, dim=0):+.3f}).""",
    )
    ctx.record("naive.word_norm", sizes["word_norm"])
    ctx.record("naive.cosine.no_position", float(F.cosine_similarity(dog, man, dim=0)))

    t = table(
        "seat",
        "raw:\n|pos| / |word|",
        "cos(dog, man)",
        "sine:\n|pos| / |word|",
        "cos(dog, man)",
        title="How much the position term outweighs the word term",
    )
    for pos in POSITIONS:
        raw = torch.full((D_MODEL,), float(pos), dtype=torch.float64)
        wave = sinus.encodings(torch.tensor(pos)).double()
        raw_ratio = ctx.record(f"naive.raw.ratio.{pos}", float(raw.norm() / sizes["word_norm"]))
        raw_cos = ctx.record(f"naive.raw.cosine.{pos}", float(F.cosine_similarity(dog + raw, man + raw, dim=0)))
        sin_ratio = ctx.record(f"naive.sinusoidal.ratio.{pos}", float(wave.norm() / sizes["word_norm"]))
        sin_cos = ctx.record(
            f"naive.sinusoidal.cosine.{pos}", float(F.cosine_similarity(dog + wave, man + wave, dim=0))
        )
        t.add_row(str(pos), f"{raw_ratio:,.0f}x", f"{raw_cos:.6f}", f"{sin_ratio:.2f}x", f"{sin_cos:+.3f}")
    ctx.console.print(t)
    prose(
        ctx,
        f"""With raw integers the position grows without bound: by seat 1000 it is
    {ctx.facts["naive.raw.ratio.1000"]:,.0f} times longer than the word, and "dog" and "man" point in
    almost exactly the same direction. The meaning is drowned. A sine/cosine code has the same length
    at every seat (its squared length is d_model/2 = {D_MODEL // 2}), about as long as the word
    itself, so "dog" and "man" stay clearly apart wherever they sit.""",
    )

    prose(
        ctx,
        """The second idea: divide the seat by the sentence length, so every code lies in
    [0, 1). Bounded, but the size of one step now depends on how long the text is:""",
    )
    t = table("sentence", "fraction codes", "one step", "sine: |PE(3) - PE(2)|")
    for length in LENGTHS:
        codes = fraction_positions(length)
        step = ctx.record(f"naive.fraction.step.{length}", float(torch.diff(codes)[0]))
        # The sinusoidal module builds each sentence's codes without knowing its length.
        pe = sinus(torch.zeros(1, length, D_MODEL))[0].double()  # (length, d_model)
        wave_step = ctx.record(f"naive.sinusoidal.step.{length}", float((pe[3] - pe[2]).norm()))
        shown = ", ".join(f"{v:.2f}" for v in codes[:4].tolist())
        t.add_row(f"{length} words", shown + ", ...", f"{step:.2f}", f"{wave_step:.4f}")
    ctx.console.print(t)
    ratio = ctx.facts["naive.fraction.step.4"] / ctx.facts["naive.fraction.step.100"]
    ctx.record("naive.fraction.step_ratio", ratio)
    prose(
        ctx,
        f"""Neighbouring words are {ctx.facts["naive.fraction.step.4"]:.2f} apart in a 4-word
    sentence but {ctx.facts["naive.fraction.step.100"]:.2f} apart in a 100-word one ({ratio:.0f} times
    less), so "one word later" has no fixed meaning. (Coding the last word as exactly 1.0 instead,
    i / (length - 1), gives steps of 1/3 and 1/99: the same problem.) The sinusoidal code gives the
    same step between seats 2 and 3 in both sentences, because each seat's vector never depends on
    the length. So a good code must be (1) bounded, (2) consistent from one step to the next, and
    (3) different for every seat. The next section measures these three rules.""",
    )
