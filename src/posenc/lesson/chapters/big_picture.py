"""Chapter "Key points and the big picture": each key point with one number measured again now.

The chapter recomputes its own evidence (it reads no other chapter's numbers), so ``posenc tour
--section big-picture`` stands on its own. Its figures: :func:`big_picture` ("the dog bit man" against
"the man bit dog" through chapter 1's fixed block) and :func:`attention_map` (who attends to whom in the
learner's sentence, under every scheme, from a trained ``posenc lab`` model where one is given).
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

from ..._checks import check_choice
from ...input_sizes import D_MODEL, position_word_lengths
from ...learned import LearnedPositionalEmbedding, PositionOutOfRangeError
from ...model import local_random
from ...sinusoidal import sinusoidal_table
from ..attention import attention_weights, by_word
from ..formats import sci
from ..mistakes import ROUNDING_LEVEL
from ..prose import Block
from ..rotation import KEY, QUERY, pair_score
from ..vectors import split_words, word_vector
from . import bag_of_tiles as bag
from ._figures import LAB_RUN, Choice, Figure, Text
from .rope import ORDER_SENTENCES

#: Seats over which the sine table's bound is checked again.
BOUND_SEATS = 4096
#: The learned table of the key points: BERT's 512 rows (a narrow width; the limit does not depend on it).
LEARNED_ROWS = 512


def _pooled_difference(scheme: str) -> float:
    model = bag.tiny_model(scheme)
    a = bag.hidden(model, bag.SENTENCE_A, False).mean(0)  # (d_model,)
    b = bag.hidden(model, bag.SENTENCE_B, False).mean(0)
    return float((a - b).abs().max())


def numbers() -> dict:
    """One measurement per key point."""
    n: dict = {}
    n["big.nope_difference"] = _pooled_difference("nope")
    n["big.rope_difference"] = _pooled_difference("rope")
    n["big.position_over_word"] = position_word_lengths(D_MODEL)["ratio"]
    n["big.sine_max_abs"] = float(sinusoidal_table(BOUND_SEATS, D_MODEL).abs().max())
    with local_random(0):  # its rows are not read; drawn off torch's global generator all the same
        table = LearnedPositionalEmbedding(LEARNED_ROWS, 8)
    try:
        table.encodings(torch.tensor([LEARNED_ROWS]))
        n["big.learned_refuses_last_plus_one"] = False
    except PositionOutOfRangeError:
        n["big.learned_refuses_last_plus_one"] = True
    n["big.rope_score_near"] = pair_score(QUERY, KEY, 1, 3)
    n["big.rope_score_far"] = pair_score(QUERY, KEY, 101, 103)
    return n


def prose(n: dict) -> list[Block]:
    """The chapter's text with the numbers of :func:`numbers`."""
    rows = (
        ("key point", "measured now"),
        (
            'Without position, attention cannot tell "the dog bit the man" from "the man bit the dog" '
            "(pooled outputs, NoPE vs RoPE)",
            f"{sci(n['big.nope_difference'])} vs {sci(n['big.rope_difference'])}",
        ),
        (
            f"A sine position vector has the word's width ({D_MODEL}) and is added to it; at TinyLM's scale "
            "it is about as long as the word",
            f"{n['big.position_over_word']:.2f}x",
        ),
        (
            f"Sine values stay in [−1, 1] (largest |value| over {BOUND_SEATS:,} seats)",
            f"{n['big.sine_max_abs']:.6f}",
        ),
        (
            f"A learned table of {LEARNED_ROWS} rows has no row {LEARNED_ROWS}",
            "refused" if n["big.learned_refuses_last_plus_one"] else "NOT refused",
        ),
        (
            "RoPE: the score depends only on the gap (seats 1 vs 3, then 101 vs 103)",
            f"{n['big.rope_score_near']:.5f}, {n['big.rope_score_far']:.5f}",
        ),
    )
    return [
        Block(
            "plain",
            """A transformer reads every word at the same moment, which makes it fast; position information
            is the small extra that keeps that speed without losing the order of the words.""",
            "intro",
        ),
        Block(
            "item",
            """Attention reads all tokens at once and compares them by content, so without positions it cannot
            tell “dog bit man” from “man bit dog” ([chapter 1](#bag-of-tiles)).""",
            "key-points",
        ),
        Block(
            "item",
            """Classic encodings have the width of the word vectors and are added to them, token by token
            ([chapter 2](#word-plus-position)).""",
            "key-points",
        ),
        Block(
            "item",
            """Sinusoidal codes use waves of many speeds, like the hands of a clock, and stay within [−1, 1] at
            any length ([chapter 5](#clock-hands)).""",
            "key-points",
        ),
        Block(
            "item",
            """Learned tables (BERT, GPT-2) are trained rows and end at their last row
            ([chapter 6](#learned-tables)).""",
            "key-points",
        ),
        Block(
            "item",
            """RoPE turns queries and keys pair by pair, so a score depends only on the distance between two
            tokens ([chapter 7](#rope)), and slowing the turns stretches the context
            ([chapter 8](#stretching-rope)).""",
            "key-points",
        ),
        Block("table", "Key points, each measured again now", "measured", rows=rows),
        Block("h3", "Two ways to read a sentence", "picture"),
        Block(
            "p",
            """**Without positions:** all words at once → order lost → “dog bit man” = “man bit dog”.""",
            "lanes",
        ),
        Block(
            "p",
            """**With positions:** stamp or turn each word by its seat → all words at once on the GPU → order
            kept.""",
            "lanes",
        ),
        Block(
            "p",
            """**The big picture.** Without a position scheme, processing every word in parallel costs the
            model the order of the words: a sentence becomes a bag of tiles. With one, each word carries its
            seat, as a wave pattern added to its vector (sinusoidal), a learned row (BERT, GPT-2), a turn of
            its query and key (RoPE) or a penalty on far-away keys (ALiBi), and the model keeps both the speed
            of reading everything at once and the order. Which scheme to pick is mostly a question of length:
            learned tables stop at their last row, sine waves never stop but models trained on short texts use
            new seats poorly, and RoPE models are stretched with scalings ([chapter 8](#stretching-rope);
            `posenc lab` measures each one).""",
            "picture-after",
        ),
        Block(
            "caption",
            """How much the vector one posenc attention block gives "dog" changes between "the dog bit the man" and
            "the man bit the dog" (no causal mask).""",
            "big-caption",
        ),
        Block(
            "try",
            """switch the scheme to none: the change drops to rounding level. Every other scheme tells the two
            sentences apart.""",
            "figure-after",
        ),
        Block("h3", "Who attends to whom", "attention"),
        Block(
            "p",
            """Position changes more than an output: it changes where each word looks. One attention layer
            reads your sentence under every scheme. Each row is a word asking, each column a word it can attend
            to; the darker the cell, the more of the row's attention it gets (every row adds up to 1, and the
            shade scale is stretched over the weights on the page), and the ring marks the word the row attends
            to most. ALiBi changes the grid least: its penalty is small across a few words.""",
            "attention",
        ),
        Block(
            "caption",
            """Attention weights of one posenc attention layer, heads averaged, computed the way the layer computes
            them (`posenc.lesson.attention`); one grid per scheme, all shaded on one scale, from the smallest
            weight on the page (lightest) to the largest (darkest), as the legend under each grid says.""",
            "attn-caption",
        ),
        Block(
            "try",
            """look at the two rows of “the”. With none they are the same row: without positions a word asks
            the same question wherever it sits. Every other scheme gives them different rows. Then type a
            sentence of your own.""",
            "attention-after",
        ),
        Block(
            "p",
            """Positional encodings give a transformer both things at once: the speed of reading a whole text
            in parallel, and the knowledge of which word came first, second and last. With meaning (word
            vectors) and order (positions) in place, the tokens are ready for the heart of the transformer:
            self-attention.""",
            "closing",
        ),
        Block(
            "see-also",
            "Next: the [workbench](#workbench), ten views for going deeper.",
            "see-also",
        ),
    ]


# -- the figure: does the output for "dog" change when the words swap? (its one parameter is the scheme) --
def _order_differences(scheme: str) -> tuple[float, float]:
    a, b = ORDER_SENTENCES[0].split(), ORDER_SENTENCES[1].split()
    out_a, out_b = bag.run_block(a, scheme), bag.run_block(b, scheme)
    dog = float((out_a[a.index("dog")] - out_b[b.index("dog")]).abs().max())
    man = float((out_a[a.index("man")] - out_b[b.index("man")]).abs().max())
    return dog, man


def big_picture(scheme: str) -> dict:
    """ "the dog bit man" against "the man bit dog" through one block with ``scheme``: does the
    output for "dog" change? Without a causal mask, so only the scheme can tell.

    ``scale`` is the largest change under any scheme, so a figure drawn on it keeps one axis while
    the scheme changes; a change at or under :data:`ROUNDING_LEVEL` is flagged as rounding.
    """
    check_choice("scheme", scheme, set(bag.FIGURE_SCHEMES))
    dog, man = _order_differences(scheme)
    scale = max(max(_order_differences(name)) for name in bag.FIGURE_SCHEMES)
    return {
        "scheme": scheme,
        "sentences": list(ORDER_SENTENCES),
        "dog_difference": dog,
        "man_difference": man,
        "dog_rounding": dog <= ROUNDING_LEVEL,
        "man_rounding": man <= ROUNDING_LEVEL,
        "rounding_level": ROUNDING_LEVEL,
        "scale": scale,
        "order_visible": max(dog, man) > ROUNDING_LEVEL,
    }


# -- the figure: who attends to whom --
#: words the attention map draws at most (a grid of words x words)
ATTENTION_MAX_WORDS = 12


@functools.lru_cache(maxsize=8)
def _lab_model(run: str, scheme: str):
    """The lab's trained ``scheme`` model of run folder ``run``, or the reason there is none."""
    from ...lab.export import ExportError, load_run_model

    try:
        model, _ = load_run_model(Path(run), scheme)
    except ExportError as err:
        return None, str(err)
    return model.double(), None


def _lab_attention(model, words: list[str]) -> torch.Tensor:
    """Word-by-word weights (W, W) of the first layer of a trained byte-level TinyLM (causal, heads
    averaged): the sentence is read as the bytes of its words joined by spaces, each space counted
    with the word after it."""
    data, spans = b"", []
    for i, word in enumerate(words):
        start = len(data)
        data += (b" " if i else b"") + word.encode()
        spans.append((start, len(data)))
    idx = torch.tensor([list(data)])  # (1, bytes)
    pos = torch.arange(idx.shape[1]).unsqueeze(0)
    with torch.no_grad():
        x = model.scheme.embed(model.tok(idx).double() * model.embed_scale, pos)  # (1, S, d)
        block = model.blocks[0]
        weights = attention_weights(block.attn, block.norm1(x), model.scheme, pos, causal=True)  # (1, H, S, S)
    return by_word(weights[0].mean(0), spans)


def attention_map(text: str, lab_run: Path | None = None) -> dict:
    """Which word attends to which in ``text``, under every scheme: the weights of one attention
    layer (heads averaged; row = the word asking, column = the word it attends to; every row sums
    to 1).

    With ``lab_run`` (a ``posenc lab`` run folder) a scheme the lab trained is read by its trained
    model's first layer (causal, as it was trained, bytes folded into words); every other scheme by
    the lesson's fixed untrained block (chapter 1's, no causal mask). Each scheme says which.
    """
    words = split_words(text)
    if len(words) > ATTENTION_MAX_WORDS:
        raise ValueError(f"text must have at most {ATTENTION_MAX_WORDS} words for the attention map, got {len(words)}")
    x = torch.stack([word_vector(w, bag.BLOCK_D_MODEL) for w in words]).unsqueeze(0)  # (1, W, d)
    pos = torch.arange(len(words)).unsqueeze(0)  # (1, W)
    block = bag.fixed_block()
    maps: list[dict] = []
    for name in bag.FIGURE_SCHEMES:
        model, why = _lab_model(str(lab_run), name) if lab_run is not None else (None, "no lab run was given")
        if model is not None:
            weights = _lab_attention(model, words)
            source = {"kind": "trained", "text": f"the lab's trained {name} model, first layer, causal"}
        else:
            scheme = bag.fixed_scheme(name)
            with torch.no_grad():
                inner = block.norm1(scheme.embed(x, pos))
                weights = attention_weights(block.attn, inner, scheme, pos, causal=False)[0].mean(0)  # (W, W)
            source = {"kind": "untrained", "text": f"the untrained block of chapter 1 ({why})"}
        maps.append({"scheme": name, "weights": weights.tolist(), "source": source})
    trained = any(m["source"]["kind"] == "trained" for m in maps)
    return {"words": words, "maps": maps, "trained": trained}


#: route -> figure function (the explorer serves each at /api/lesson/<route>)
FIGURES = {
    "big-picture": Figure(big_picture, scheme=Choice("rope")),
    "attention": Figure(attention_map, text=Text("the dog bit the man"), lab_run=LAB_RUN),
}
