"""Chapter "A bag of tiles": without position information, attention sees a bag of tiles.

Self-attention mixes every token with every other through weights that depend only on the tokens'
contents. Permute the input and, with no causal mask and no position scheme, the output is the same
set of vectors in the permuted order (permutation equivariance). Any order-free summary of it, such
as the mean over the sequence, is then identical for "the dog bit the man" and "the man bit the dog".

The chapter's figure (:func:`bag_of_tiles`) runs the learner's sentence and a shuffle of it through one
fixed attention block (:func:`fixed_block`, which the big picture's figures reuse).
"""

from __future__ import annotations

import random
from typing import Dict, Tuple

import torch

from ...._checks import check_choice
from ....factory import make_scheme
from ....learned import LearnedPositionalEmbedding
from ....model import Block as AttentionBlock
from ....model import ModelConfig, TinyLM, local_random
from ....schemes import PositionScheme
from ..formats import sci, sci_or_rounding
from ..mistakes import ROUNDING_LEVEL
from ..prose import Block
from ..vectors import split_words, word_vector
from ._check import Check, Evidence
from ._figures import Choice, Figure, Text
from ._ranges import Range, checked

SENTENCE_A = "the dog bit the man"
SENTENCE_B = "the man bit the dog"
#: Each word is one token here, so a word swap is exactly a token permutation.
VOCAB = {"the": 0, "dog": 1, "bit": 2, "man": 3}
#: NoPE pooled outputs must agree to float32 rounding (~1e-7 here) ...
NOPE_TOLERANCE = 1e-5
#: ... and every scheme must move them by far more than that.
SCHEME_MARGIN = 1e-4

#: the schemes the lesson's chapters compare (one trained model each, ``posenc lab --preset lesson``);
#: the library's later ones (``posenc.factory.SCHEMES``: T5's bias, xPos, FoPE) are in the lab
SCHEMES = ("nope", "sinusoidal", "learned", "rope", "alibi")

WHERE = {
    "nope": "nowhere",
    "sinusoidal": "input vectors",
    "learned": "input vectors",
    "rope": "queries and keys",
    "alibi": "attention logits",
}


def token_ids(sentence: str) -> torch.Tensor:
    """Word-level token ids of ``sentence``, shape (1, words)."""
    words = sentence.split()
    unknown = [w for w in words if w not in VOCAB]
    if unknown:
        raise ValueError(f"sentence contains words {unknown} outside the lesson's vocabulary {sorted(VOCAB)}")
    return torch.tensor([[VOCAB[w] for w in words]])


def permutation(src: str, dst: str) -> torch.Tensor:
    """Indices ``perm`` with ``dst.split() == [src.split()[i] for i in perm]`` (same multiset)."""
    a, b = src.split(), dst.split()
    if sorted(a) != sorted(b):
        raise ValueError(f"{dst!r} is not a reordering of {src!r}")
    free = list(range(len(a)))
    perm = []
    for word in b:
        i = next(j for j in free if a[j] == word)
        free.remove(i)
        perm.append(i)
    return torch.tensor(perm)


def tiny_model(scheme: str, seed: int = 0) -> TinyLM:
    """The small reference LM of this chapter (untrained; order-blindness is structural)."""
    config = ModelConfig(scheme=scheme, vocab_size=len(VOCAB), d_model=32, n_layers=2, n_heads=4, max_len=16)
    with local_random(seed):  # the weights of torch.manual_seed(seed), without touching torch's global RNG
        model = TinyLM(config)
    return model.eval()


@torch.no_grad()
def hidden(model: TinyLM, sentence: str, causal: bool) -> torch.Tensor:
    """Final hidden states of the sentence, shape (words, d_model)."""
    return model.hidden_states(token_ids(sentence), causal=causal)[0]


def numbers() -> dict:
    """The two sentences through :func:`tiny_model` under every scheme, unmasked, and NoPE masked."""
    out: dict = {}
    perm = permutation(SENTENCE_A, SENTENCE_B)
    out["bag.permutation"] = perm.tolist()
    nope = tiny_model("nope")
    h_a, h_b = hidden(nope, SENTENCE_A, False), hidden(nope, SENTENCE_B, False)
    out["bag.nope.permuted_max_diff"] = float((h_b - h_a[perm]).abs().max())
    for name in SCHEMES:
        model = nope if name == "nope" else tiny_model(name)
        pooled_a = hidden(model, SENTENCE_A, False).mean(0)  # (d_model,)
        pooled_b = hidden(model, SENTENCE_B, False).mean(0)
        out[f"bag.{name}.pooled_max_diff"] = float((pooled_a - pooled_b).abs().max())
        if name == "rope":  # the same model's largest change of one word's output, before the average
            per_word = hidden(model, SENTENCE_A, False)[perm] - hidden(model, SENTENCE_B, False)  # (words, d)
            out["bag.rope.word_max_diff"] = float(per_word.abs().max())
    out["bag.token_std"] = float(nope.tok.weight.detach().std())
    smallest = min(out[f"bag.{name}.pooled_max_diff"] for name in SCHEMES if name != "nope")
    nope_diff = out["bag.nope.pooled_max_diff"]
    out["bag.smallest_scheme_over_nope"] = smallest / nope_diff if nope_diff > 0 else None
    pooled_a = hidden(nope, SENTENCE_A, True).mean(0)
    pooled_b = hidden(nope, SENTENCE_B, True).mean(0)
    out["bag.nope_causal.pooled_max_diff"] = float((pooled_a - pooled_b).abs().max())
    # the page's figure read backwards: unmasked ALiBi's penalty -slope*|i - j| cannot tell the two apart
    words = split_words(MIRROR_TEXT)
    mirror = next(s for s in range(1, 10_000) if shuffled_order(len(words), s) == list(range(len(words)))[::-1])
    out["bag.mirror.shuffle"] = mirror
    for name in FIGURE_SCHEMES:
        out[f"bag.mirror.{name}.largest_difference"] = bag_of_tiles(MIRROR_TEXT, mirror, name)["largest_difference"]
    return out


def _difference(value: float) -> str:
    """A pooled difference as the table prints it: NoPE's is float32 rounding, whose digits differ
    between two processes that sum in another order, so the level is printed, not the noise."""
    return sci_or_rounding(value, NOPE_TOLERANCE)


def _seen(name: str, diff: float) -> str:
    if name == "nope":
        return "no: identical bags" if diff < NOPE_TOLERANCE else "unexpectedly yes"
    return "yes" if diff > SCHEME_MARGIN else "no"


def prose(n: dict) -> list[Block]:
    """The chapter's text with the numbers of :func:`numbers`."""
    ratio = n["bag.smallest_scheme_over_nope"]
    compared = (
        f"far above NoPE's, which is float32 rounding (below {NOPE_TOLERANCE:.0e})"
        if ratio is not None
        else "far above NoPE's, which is exactly zero"
    )
    rows = [("scheme", "position enters", "max |pooled A - pooled B|", "order visible?")]
    rows += [
        (name, WHERE[name], _difference(diff), _seen(name, diff))
        for name, diff in ((name, n[f"bag.{name}.pooled_max_diff"]) for name in SCHEMES)
    ]
    return [
        Block(
            "plain",
            """A transformer looks at all the words of a sentence at the same moment, like tiles shaken out
            of a bag. Unless something tells it, it cannot know which word came first.""",
            "intro",
        ),
        Block(
            "p",
            """A recurrent network reads a sentence one word after the other, so it always knows which word
            came first. A transformer drops that loop and reads every word at the same moment, which is what
            makes it fast on a GPU. Its attention step then compares each word with every other word by what
            the words *are*. Nothing in that comparison says where a word sits.""",
            "intro",
        ),
        Block(
            "p",
            """Take “The dog bit the man.” and “The man bit the dog.” The same five words, one an everyday
            accident, the other front-page news. Without position information, attention treats either
            sentence like letter tiles shaken in a bag: every word comes out with exactly the same vector in
            both, only listed in a different order. The word for this is *permutation-equivariant*: permute
            the words going in, and the outputs come out permuted the same way, each one unchanged. The cure,
            used by nearly every transformer, is to give each word a seat number it carries into attention.
            The rest of this lesson is about how to write that seat number down.""",
            "intro",
        ),
        Block(
            "caption",
            f"""Each tile is a word; beside it, the {BLOCK_D_MODEL} numbers one posenc attention block (no causal
            mask) puts out for that word: in the sentence as written (top strip), after the shuffle (middle
            strip), and the difference between the two (thin bottom strip). Blue is below zero and red above, on
            the scale of the legend; the difference has a scale of its own, so that a small change still shows.""",
            "bag-caption",
        ),
        Block(
            "try",
            """with *none*, the difference strip stays white: every word's output is the same to about
            10⁻¹⁶, which is rounding. Then pick *sinusoidal* or *RoPE* and shuffle again: the difference
            strip fills with colour.""",
            "after",
        ),
        Block(
            "note",
            """Why are RoPE's changes so small, against outputs near ±1? The blocks of this chapter are
            *untrained*: their weights are random and their words are fixed random vectors.
            RoPE only turns queries and keys, so it can change an output only through the attention weights,
            and a random block has no reason to attend sharply. A trained model learns queries and keys that
            make those turns matter: the [last chapter](#big-picture) measures the same block, and the lab's
            trained models read text in order. The sine code is added to the input itself, so even the
            untrained block shows it at once.""",
            "after",
            id="bag-why-small",
        ),
        Block(
            "note",
            f"""One scheme is fooled by a sentence read backwards. Without a causal mask ALiBi's penalty is
            −slope·|i − j|: it grows with the distance but ignores which word comes first, so every word of a
            sentence and of its mirror image gets the same output. Type “{MIRROR_TEXT}”, pick *ALiBi* and press
            shuffle until it reads “{" ".join(reversed(split_words(MIRROR_TEXT)))}”: the difference strip turns
            white again (largest change {sci(n["bag.mirror.alibi.largest_difference"])}, rounding), where RoPE's
            is {n["bag.mirror.rope.largest_difference"]:.3f} and the sine code's
            {n["bag.mirror.sinusoidal.largest_difference"]:.3f}. ALiBi was made for decoders, whose causal mask
            supplies the direction ([chapter 9](#alibi-penalty)).""",
            "after",
            id="bag-alibi-mirror",
        ),
        Block(
            "note",
            """No causal mask here on purpose: a decoder's mask (each word sees only the words before it)
            leaks a little order by itself, so this block has none and only the position scheme can tell.""",
            "after",
        ),
        Block("h3", "Measured: two sentences through a small model", "measured"),
        Block(
            "p",
            f"""We feed **“{SENTENCE_A}”** and **“{SENTENCE_B}”** (one token per word) through posenc's
            reference model, `posenc.TinyLM` (2 layers, width 32, 4 heads, untrained), with attention
            *unmasked* (every token sees every other, as in an encoder), and average each sentence's output
            vectors into one pooled vector. Where position is used at all, the model's input for each word is
            its word vector *plus* a position vector of the same width: input = word + position.""",
            "measured",
        ),
        Block(
            "p",
            f"""With no position scheme (NoPE), sentence B's five output vectors equal sentence A's taken in
            the order {n["bag.permutation"]}: largest difference:
            **{_difference(n["bag.nope.permuted_max_diff"])}**.""",
            "measured",
        ),
        Block("table", "Pooled outputs of the two sentences, unmasked attention", "measured", rows=tuple(rows)),
        Block(
            "p",
            f"""The differences look small because the model is untrained and its word vectors are tiny
            (standard deviation {n["bag.token_std"]:.3f}), but even the smallest is {compared}.""",
            "measured",
        ),
        Block(
            "p",
            f"""RoPE's {sci(n["bag.rope.pooled_max_diff"])} here and its
            {n["bag.mirror.rope.largest_difference"]:.3f} in the mirror-image note above measure different
            things, both live: there, the largest change of any one word's output in the figure's single
            attention block; here, the change of the *average* of five outputs after TinyLM's two layers, whose
            word vectors are tiny. Averaging hides
            part of it: in this model the largest change of one word's output is
            {sci(n["bag.rope.word_max_diff"])}.""",
            "measured",
        ),
        Block(
            "p",
            f"""NoPE leaves the two sentences indistinguishable; every position scheme separates them. One
            aside: a decoder's *causal* mask already breaks the symmetry, because token t sees exactly t+1
            tokens. The same NoPE model with the causal mask gives pooled outputs that differ by
            {sci(n["bag.nope_causal.pooled_max_diff"])}. That is why decoder-only models without any position
            encoding can still pick up some order, but only indirectly.""",
            "measured",
        ),
    ]


# -- the figure: a sentence and a shuffle of it through one attention block --
#: parameter -> (minimum, maximum, default, help) of the figure (the explorer's API publishes it)
FIGURE_RANGES: Dict[str, Range] = {
    "shuffle": (0, 9999, 0, "which shuffle of the words (0 keeps the sentence as written)"),
}
#: the schemes the figure (and the big picture's) can run
FIGURE_SCHEMES = tuple(SCHEMES)
#: the sentence the chapter reads backwards through the figure (ALiBi without a mask cannot tell)
MIRROR_TEXT = "dog bit man"
#: the check's two sentences: the mirror sentence and the same words read backwards
CHECK_SENTENCES = (MIRROR_TEXT, " ".join(reversed(MIRROR_TEXT.split())))
#: the width and heads of the figure's attention block, whose words are
#: :func:`posenc.teaching.lesson.vectors.word_vector`
BLOCK_D_MODEL = 16
BLOCK_HEADS = 2


def fixed_block(d_model: int = BLOCK_D_MODEL, heads: int = BLOCK_HEADS) -> AttentionBlock:
    """posenc's reference attention block with fixed (seed 0), untrained weights, float64, in eval mode."""
    with local_random(0):  # fixed weights, drawn without touching torch's global RNG
        block = AttentionBlock(d_model, n_heads=heads)
    return block.double().eval()


def fixed_scheme(name: str, d_model: int = BLOCK_D_MODEL, heads: int = BLOCK_HEADS) -> PositionScheme:
    """Scheme ``name`` for :func:`fixed_block`, float64; a learned table gets fixed rows (seed 1), so the
    figure is the same on every call."""
    with local_random(0):  # a learned table's first rows are drawn here, not from torch's global RNG
        scheme = make_scheme(name, d_model=d_model, n_heads=heads, max_len=64)
    if isinstance(scheme, LearnedPositionalEmbedding):  # a fixed table, so the page is reproducible
        with torch.no_grad():
            g = torch.Generator().manual_seed(1)
            scheme.weight.copy_(torch.randn(tuple(scheme.weight.shape), generator=g) * 0.5)
    return scheme.double()


def run_block(words: list[str], scheme_name: str, causal: bool = False) -> torch.Tensor:
    """Outputs (len(words), d) of :func:`fixed_block` reading ``words`` with ``scheme_name``."""
    block = fixed_block()
    scheme = fixed_scheme(scheme_name)
    x = torch.stack([word_vector(w, BLOCK_D_MODEL) for w in words]).unsqueeze(0)  # (1, S, d)
    pos = torch.arange(len(words)).unsqueeze(0)  # (1, S)
    with torch.no_grad():
        return block(scheme.embed(x, pos), scheme, pos, causal=causal)[0]  # (S, d)


def shuffled_order(count: int, shuffle: int) -> list[int]:
    """A permutation of ``range(count)``: the identity for ``shuffle=0``, else a seeded shuffle
    that differs from the identity whenever ``count > 1``."""
    order = list(range(count))
    if shuffle == 0 or count < 2:
        return order
    rng = random.Random(shuffle)
    while order == list(range(count)):
        rng.shuffle(order)
    return order


def shuffle_giving(text: str, wanted: str) -> int:
    """The first shuffle (1 .. 9999) of :func:`shuffled_order` that turns the words of ``text`` into those
    of ``wanted``; ``ValueError`` if none does."""
    words, target = split_words(text), split_words(wanted)
    for shuffle in range(1, int(FIGURE_RANGES["shuffle"][1]) + 1):
        if [words[i] for i in shuffled_order(len(words), shuffle)] == target:
            return shuffle
    raise ValueError(f"wanted must be a shuffle of the words of {text!r}, got {wanted!r}")


#: the shuffle that turns "the dog bit the man" into "the man bit the dog" (the page's button)
SWAP_SHUFFLE = shuffle_giving(SENTENCE_A, SENTENCE_B)


def bag_of_tiles(text: str, shuffle: int, scheme: str) -> dict:
    """Run the sentence and a shuffle of it through one attention block (no causal mask).

    For each word, the output vector it gets in the sentence as written and in the shuffled one,
    and the largest difference between the two. With ``scheme="nope"`` the differences are rounding
    only: attention without positions is permutation-equivariant.
    """
    words = split_words(text)
    checked(FIGURE_RANGES, "shuffle", shuffle)
    check_choice("scheme", scheme, set(FIGURE_SCHEMES))
    order = shuffled_order(len(words), shuffle)
    shuffled = [words[i] for i in order]
    out_a = run_block(words, scheme)  # (S, d)
    out_b = run_block(shuffled, scheme)
    back = out_b[torch.tensor([order.index(i) for i in range(len(words))])]  # row i = word i
    diff = (out_a - back).abs().amax(dim=-1)  # (S,)
    return {
        "words": words,
        "order": order,
        "shuffled": shuffled,
        "scheme": scheme,
        "d_model": BLOCK_D_MODEL,
        "outputs": out_a.tolist(),
        "outputs_shuffled": back.tolist(),
        "delta": (back - out_a).tolist(),  # (S, d): shuffled minus as written, word by word
        "difference": diff.tolist(),
        "largest_difference": float(diff.max()),
        "rounding_level": ROUNDING_LEVEL,
        # the exact pair of the chapter, which the page's button shows: the sentence and the shuffle of it
        "pair": {"text": SENTENCE_A, "shuffle": SWAP_SHUFFLE, "shuffled": SENTENCE_B},
    }


#: route -> figure function (the explorer serves it at /api/lesson/<route>)
FIGURES = {"bag": Figure(bag_of_tiles, text=Text("the dog bit the man"), scheme=Choice("nope"))}


# -- the knowledge check the manifest lists under this chapter (the quiz collects it) --
def _bag_of_words() -> Evidence:
    """ "dog bit man" and "man bit dog" through :func:`fixed_block`, no causal mask: the output for
    "dog" without positions and with sinusoidal ones."""
    order_a, order_b = (sentence.split() for sentence in CHECK_SENTENCES)
    a, b = run_block(order_a, "nope"), run_block(order_b, "nope")
    same = float((a[order_a.index("dog")] - b[order_b.index("dog")]).abs().max())  # "dog" in each sentence
    a_pe, b_pe = run_block(order_a, "sinusoidal"), run_block(order_b, "sinusoidal")
    differ = float((a_pe[order_a.index("dog")] - b_pe[order_b.index("dog")]).abs().max())
    return (
        [
            f"A posenc attention block with no positions, no causal mask: the vector out for "
            f'"dog" differs between the two sentences by {same:.1e}.',
            f"Add sinusoidal positions and it differs by {differ:.3f}.",
        ],
        {"nope_difference": same, "sinusoidal_difference": differ},
    )


CHECKS: Tuple[Check, ...] = (
    Check(
        "bag-of-words",
        "why positions",
        f'Attention with no position information and no causal mask reads "{CHECK_SENTENCES[0]}" and '
        f'"{CHECK_SENTENCES[1]}". Does the vector it produces for "dog" differ?',
        (
            "No: the same words give the same outputs, just listed in another order.",
            "Yes: the softmax weighs earlier words more.",
            "Yes: the query projection depends on where a word sits.",
        ),
        0,
        (
            "Without positions attention sees a bag of words.",
            "The softmax only sees scores, and the scores only see the words.",
            "The projections are the same matrix for every seat.",
        ),
        _bag_of_words,
    ),
)
