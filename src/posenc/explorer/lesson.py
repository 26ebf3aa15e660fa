"""The numbers behind the explorer's guided lesson, one function per interactive figure.

The lesson (the landing page of ``posenc explore``) tells the story of positional encodings in
thirteen chapters. Every figure in it asks the server for its numbers, and every function here
answers by running posenc itself: the NoPE / sinusoidal / RoPE / ALiBi schemes inside the reference
attention :class:`~posenc.model.Block`, :class:`~posenc.learned.LearnedPositionalEmbedding` and its
:class:`~posenc.learned.PositionOutOfRangeError`, :func:`~posenc.rope.apply.apply_rotary`,
:func:`~posenc.rope.scaling.rope_frequencies` ... The page draws; it never computes an encoding.

Every parameter is range-checked against :data:`LESSON_LIMITS` (by the API, and again here with
:func:`posenc._checks.check_int` / ``check_float`` so the functions are safe to call directly), and
every computation is small. Measured on one CPU core with every parameter at its maximum, the
heaviest is :func:`posenc.lesson.chapters.three_rules.three_rules` (2048 positions compared pairwise,
about 0.5 s); :func:`mistakes` (ten Adam steps of a one-layer model) takes about 0.2 s and everything
else a few milliseconds.

Sign convention (one for the whole lesson): an angle is positive counter-clockwise, the direction in
which the matrix ``[[cos, -sin], [sin, cos]]`` turns ``(a, b)`` into ``(a cos - b sin, a sin + b cos)``.
RoPE vectors use the half-split layout (pair ``i`` is ``(x[i], x[i + d/2])``).
"""

from __future__ import annotations

import functools
import math
import random
from pathlib import Path

import torch
import torch.nn.functional as F

from .._checks import check_choice, check_float, check_int
from ..factory import SCHEMES, make_scheme
from ..learned import LearnedPositionalEmbedding
from ..lesson import mistakes as lesson_mistakes
from ..lesson.attention import attention_weights, by_word
from ..lesson.chapters import alibi_penalty as alibi_penalty_chapter
from ..lesson.chapters import clock_hands as clock_hands_chapter
from ..lesson.chapters import common_mistakes as common_mistakes_chapter
from ..lesson.chapters import comparison as comparison_chapter
from ..lesson.chapters import learned_tables as learned_tables_chapter
from ..lesson.chapters import pytorch_demo as pytorch_demo_chapter
from ..lesson.chapters import rope as rope_chapter
from ..lesson.chapters import stretching_rope as stretching_rope_chapter
from ..lesson.chapters import three_rules as three_rules_chapter
from ..lesson.manifest import CHAPTERS
from ..lesson.vectors import split_words, word_vector
from ..model import Block
from ..sinusoidal import (
    SinusoidalPositionalEncoding,
    sinusoidal_table,
)
from .limits import Limit

TWO_PI = 2 * math.pi

#: query parameter name -> its limit, for the lesson's endpoints (integers unless the default is a float)
LESSON_LIMITS: dict[str, Limit] = {
    "shuffle": Limit(0, 9999, 0, "which shuffle of the words (0 keeps the sentence as written)"),
    "seat": Limit(0, 4095, 3, "a seat (position) in the sentence"),
    "embed_std": Limit(0.001, 10.0, 1.0, "standard deviation of the word vector's entries"),
    "raw_seat": Limit(0, 100_000, 500, "the seat whose raw integer is added"),
    "sentence_len": Limit(2, 100_000, 4, "words in the sentence coded by fractions"),
}
# the chapters whose figures live in their chapter module declare their ranges there
for _chapter in (
    three_rules_chapter,
    clock_hands_chapter,
    learned_tables_chapter,
    rope_chapter,
    stretching_rope_chapter,
    alibi_penalty_chapter,
    comparison_chapter,
    pytorch_demo_chapter,
    common_mistakes_chapter,
):
    LESSON_LIMITS.update({key: Limit(*r) for key, r in _chapter.FIGURE_RANGES.items()})

#: schemes the bag-of-tiles and big-picture figures can run
BAG_SCHEMES = tuple(SCHEMES)

#: the seed words of the "bad ideas" chapter: a two-number word vector with entries in [-1, 1]
TINY_WORD = (0.42, -0.15)


#: the width of the bag-of-tiles attention block
BAG_D_MODEL = 16
BAG_HEADS = 2


def _int(name: str, value) -> int:
    limit = LESSON_LIMITS[name]
    return check_int(name, value, minimum=int(limit.minimum), maximum=int(limit.maximum))


def _float(name: str, value) -> float:
    limit = LESSON_LIMITS[name]
    return check_float(name, value, minimum=float(limit.minimum), maximum=float(limit.maximum))


def limits_dict() -> dict:
    return {name: limit.to_dict() for name, limit in LESSON_LIMITS.items()}


# -- chapters ------------------------------------------------------------------------------------
# The chapter list is the lesson's one manifest (posenc.lesson.manifest): the page's contents, routes
# and pager, and `posenc tour --list`, come from it.
#: each section of the lesson this course retells -> the chapter that covers it
SOURCE_SECTIONS: dict[str, str] = {
    "The core idea": "bag-of-tiles",
    "The bag of Scrabble tiles problem": "bag-of-tiles",
    "The fix: a seat-number vector": "word-plus-position",
    "Why simple seat numbers fail": "bad-ideas",
    "Bad idea 1: raw integers": "bad-ideas",
    "Bad idea 2: fractions from 0 to 1": "bad-ideas",
    "The three rules": "three-rules",
    "Knowledge check: how encodings combine": "word-plus-position",
    "Sinusoidal encodings (the hands of a clock)": "clock-hands",
    "The wave formulas (even and odd sliders)": "clock-hands",
    "Learned positional embeddings (BERT, GPT-2)": "learned-tables",
    "Method comparison table": "comparison",
    "Knowledge check: BERT and 600 tokens": "learned-tables",
    "RoPE: rotary position embeddings": "rope",
    "Why rotating beats adding": "rope",
    "Context extension (NTK-aware, YaRN)": "stretching-rope",
    "Knowledge check: the relative angle": "rope",
    "Visual: the wave fingerprint": "clock-hands",
    "Visual: the RoPE clock dials": "rope",
    "Visual: dog bit man vs man bit dog": "rope",
    "Python implementation in PyTorch": "pytorch-demo",
    "Key points": "big-picture",
    "Common mistakes": "common-mistakes",
    "The big picture": "big-picture",
}


def chapters() -> dict:
    return {
        "chapters": [{"id": c.id, "title": c.title, "checks": list(c.checks), "tour": list(c.tour)} for c in CHAPTERS],
        "sources": SOURCE_SECTIONS,
    }


# -- 1. the bag of tiles ---------------------------------------------------------------------------
def _block(d_model: int, heads: int) -> Block:
    with torch.random.fork_rng(devices=[]):  # fixed weights without touching the global RNG
        torch.manual_seed(0)
        return Block(d_model, n_heads=heads).double().eval()


def _scheme(name: str, d_model: int, heads: int):
    scheme = make_scheme(name, d_model=d_model, n_heads=heads, max_len=64)
    if isinstance(scheme, LearnedPositionalEmbedding):  # a fixed table, so the page is reproducible
        with torch.no_grad():
            g = torch.Generator().manual_seed(1)
            scheme.weight.copy_(torch.randn(tuple(scheme.weight.shape), generator=g) * 0.5)
    return scheme.double()


def _run_block(words: list[str], scheme_name: str, causal: bool = False) -> torch.Tensor:
    """Outputs (len(words), d) of a fixed posenc Block reading ``words`` with ``scheme_name``."""
    block = _block(BAG_D_MODEL, BAG_HEADS)
    scheme = _scheme(scheme_name, BAG_D_MODEL, BAG_HEADS)
    x = torch.stack([word_vector(w, BAG_D_MODEL) for w in words]).unsqueeze(0)  # (1, S, d)
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


def bag_of_tiles(text: str, shuffle: int, scheme: str) -> dict:
    """Run the sentence and a shuffle of it through one attention block (no causal mask).

    For each word, the output vector it gets in the sentence as written and in the shuffled one,
    and the largest difference between the two. With ``scheme="nope"`` the differences are rounding
    only: attention without positions is permutation-equivariant.
    """
    words = split_words(text)
    _int("shuffle", shuffle)
    check_choice("scheme", scheme, set(BAG_SCHEMES))
    order = shuffled_order(len(words), shuffle)
    shuffled = [words[i] for i in order]
    out_a = _run_block(words, scheme)  # (S, d)
    out_b = _run_block(shuffled, scheme)
    back = out_b[torch.tensor([order.index(i) for i in range(len(words))])]  # row i = word i
    diff = (out_a - back).abs().amax(dim=-1)  # (S,)
    return {
        "words": words,
        "order": order,
        "shuffled": shuffled,
        "scheme": scheme,
        "d_model": BAG_D_MODEL,
        "outputs": out_a.tolist(),
        "outputs_shuffled": back.tolist(),
        "delta": (back - out_a).tolist(),  # (S, d): shuffled minus as written, word by word
        "difference": diff.tolist(),
        "largest_difference": float(diff.max()),
        "rounding_level": ROUNDING_LEVEL,
    }


# -- 2. word + position = input ------------------------------------------------------------------
def word_plus_position(word: str, seat: int, d_model: int, embed_std: float) -> dict:
    """A word vector, the sinusoidal position vector of ``seat``, and their sum (same width)."""
    split_words(word, "word")
    _int("seat", seat)
    check_int("d_model", d_model, minimum=2, maximum=64, even=True)
    _float("embed_std", embed_std)
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


# -- 3. bad ideas --------------------------------------------------------------------------------
def bad_ideas(raw_seat: int, sentence_len: int) -> dict:
    """Bad idea 1: add the seat number itself. Bad idea 2: code seat i of L words as i / L."""
    _int("raw_seat", raw_seat)
    _int("sentence_len", sentence_len)
    word = torch.tensor(TINY_WORD, dtype=torch.float64)
    stamped = word + raw_seat
    # two different 16-wide words with entries in [-1, 1], and how alike they look once stamped
    dog, man = torch.tanh(word_vector("dog", 16)), torch.tanh(word_vector("man", 16))
    raw = torch.full((16,), float(raw_seat), dtype=torch.float64)
    wave = sinusoidal_table(1, 16, start=raw_seat)[0].double()
    # the sine code at every seat the figure offers: bounded, so the pull never grows with the seat
    waves = sinusoidal_table(2001, 16).double()  # (2001, 16)
    pulled = F.cosine_similarity(dog + waves, man + waves, dim=-1)  # (2001,)
    fractions = torch.arange(sentence_len, dtype=torch.float64) / sentence_len
    shown = fractions[:8]
    step = float(fractions[1] - fractions[0])
    reference = torch.arange(4, dtype=torch.float64) / 4
    return {
        "raw_seat": raw_seat,
        "word": list(TINY_WORD),
        "stamped": stamped.tolist(),
        "raw_ratio": float(raw.norm() / dog.norm()),
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


# -- 13. the big picture ---------------------------------------------------------------------------
#: differences at or under this (float64 outputs of size about 1) are rounding, drawn as zero
ROUNDING_LEVEL = lesson_mistakes.ROUNDING_LEVEL


def _order_differences(scheme: str) -> tuple[float, float]:
    a, b = rope_chapter.ORDER_SENTENCES[0].split(), rope_chapter.ORDER_SENTENCES[1].split()
    out_a, out_b = _run_block(a, scheme), _run_block(b, scheme)
    dog = float((out_a[a.index("dog")] - out_b[b.index("dog")]).abs().max())
    man = float((out_a[a.index("man")] - out_b[b.index("man")]).abs().max())
    return dog, man


def big_picture(scheme: str) -> dict:
    """ "the dog bit man" against "the man bit dog" through one block with ``scheme``: does the
    output for "dog" change? Without a causal mask, so only the scheme can tell.

    ``scale`` is the largest change under any scheme, so a figure drawn on it keeps one axis while
    the scheme changes; a change at or under :data:`ROUNDING_LEVEL` is flagged as rounding.
    """
    check_choice("scheme", scheme, set(BAG_SCHEMES))
    dog, man = _order_differences(scheme)
    scale = max(max(_order_differences(name)) for name in BAG_SCHEMES)
    return {
        "scheme": scheme,
        "sentences": list(rope_chapter.ORDER_SENTENCES),
        "dog_difference": dog,
        "man_difference": man,
        "dog_rounding": dog <= ROUNDING_LEVEL,
        "man_rounding": man <= ROUNDING_LEVEL,
        "rounding_level": ROUNDING_LEVEL,
        "scale": scale,
        "order_visible": max(dog, man) > ROUNDING_LEVEL,
    }


# -- who attends to whom -----------------------------------------------------------------------------
#: words the attention map draws at most (a grid of words x words)
ATTENTION_MAX_WORDS = 12


@functools.lru_cache(maxsize=8)
def _lab_model(run: str, scheme: str):
    """The lab's trained ``scheme`` model of run folder ``run``, or the reason there is none."""
    from ..lab.export import ExportError, load_run_model

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
    x = torch.stack([word_vector(w, BAG_D_MODEL) for w in words]).unsqueeze(0)  # (1, W, d)
    pos = torch.arange(len(words)).unsqueeze(0)  # (1, W)
    block = _block(BAG_D_MODEL, BAG_HEADS)
    maps: list[dict] = []
    for name in BAG_SCHEMES:
        model, why = _lab_model(str(lab_run), name) if lab_run is not None else (None, "no lab run was given")
        if model is not None:
            weights = _lab_attention(model, words)
            source = {"kind": "trained", "text": f"the lab's trained {name} model, first layer, causal"}
        else:
            scheme = _scheme(name, BAG_D_MODEL, BAG_HEADS)
            with torch.no_grad():
                inner = block.norm1(scheme.embed(x, pos))
                weights = attention_weights(block.attn, inner, scheme, pos, causal=False)[0].mean(0)  # (W, W)
            source = {"kind": "untrained", "text": f"the untrained block of chapter 1 ({why})"}
        maps.append({"scheme": name, "weights": weights.tolist(), "source": source})
    trained = any(m["source"]["kind"] == "trained" for m in maps)
    return {"words": words, "maps": maps, "trained": trained}


__all__ = [
    "CHAPTERS",
    "LESSON_LIMITS",
    "SOURCE_SECTIONS",
    "bad_ideas",
    "bag_of_tiles",
    "attention_map",
    "big_picture",
    "chapters",
    "word_plus_position",
]
