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

from ...._checks import check_choice
from ....learned import LearnedPositionalEmbedding, PositionOutOfRangeError
from ....model import local_random
from ....sinusoidal import sinusoidal_table
from ...input_sizes import D_MODEL, position_word_lengths
from .. import trained
from ..formats import sci, sci_or_rounding
from ..mistakes import ROUNDING_LEVEL
from ..prose import Block, see_also
from ..rotation import KEY, QUERY, pair_score
from ..vectors import split_words
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
    # the trained models the figures read by default, and what each figure shows with and without training
    info = trained.summary()
    n["big.trained.train_len"] = info["train_len"]
    n["big.trained.steps"] = info["config"]["steps"]
    n["big.trained.layers"] = info["config"]["n_layers"]
    n["big.trained.width"] = info["config"]["d_model"]
    n["big.trained.parameters"] = info["models"]["rope"]["parameters"]
    n["big.trained.learned_extra"] = info["models"]["learned"]["parameters"] - n["big.trained.parameters"]
    for name, entry in info["models"].items():
        for length, value in entry["bpb"].items():
            n[f"big.trained.{name}.bpb.{length}"] = value
    for model in MODELS:
        for name, (first, last) in _all_order_differences(model).items():
            n[f"big.{model}.{name}.first"], n[f"big.{model}.{name}.last"] = first, last
        maps = attention_map(ATTENTION_TEXT, model)
        for m in maps["maps"]:
            weights = torch.tensor(m["weights"])
            n[f"big.{model}.{m['scheme']}.nearby"] = nearby_share(weights)
            n[f"big.{model}.{m['scheme']}.itself"] = float(weights[-1, -1])
        for entry in attention_distance(model)["schemes"]:
            n[f"big.{model}.{entry['scheme']}.near"] = entry["near"]
            n[f"big.{model}.{entry['scheme']}.far"] = entry["far"]
    n["big.even_nearby"] = 2 / len(split_words(ATTENTION_TEXT))
    queries = attention_distance("trained")["queries"]
    n["big.queries.1"], n["big.queries.few"] = queries[1], queries[FEW_FROM]
    evenly = [e for e in attention_distance("untrained")["schemes"] if e["scheme"] != "alibi"]
    n["big.untrained.even_deviation"] = max(abs(v - 1) for e in evenly for v in e["curve"])
    untrained_maps = attention_map(ATTENTION_TEXT, "untrained")["maps"]
    n["big.untrained.map_deviation"] = max(
        even_deviation(torch.tensor(m["weights"])) for m in untrained_maps if m["scheme"] != "alibi"
    )
    mixed = attention_map(MIXED_TEXT)
    n["big.mixed.words"] = len(mixed["words"])
    for m in mixed["maps"]:
        last = m["weights"][-1]
        n[f"big.mixed.{m['scheme']}.long"], n[f"big.mixed.{m['scheme']}.before"] = last[0], last[-2]
    return n


def _rounding_or_sci(value: float) -> str:
    """A float32 difference at rounding level is printed as such
    (:func:`~posenc.teaching.lesson.formats.sci_or_rounding`)."""
    return sci_or_rounding(value, bag.NOPE_TOLERANCE)


def _num(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if value >= 10**-digits else f"{value:.2e}"


def _bpb_list(n: dict) -> str:
    names = {"nope": "none", "sinusoidal": "sinusoidal", "learned": "learned", "rope": "RoPE", "alibi": "ALiBi"}
    length = n["big.trained.train_len"]
    parts = [f"{n[f'big.trained.{s}.bpb.{length}']:.2f} ({names[s]})" for s in bag.FIGURE_SCHEMES]
    return ", ".join(parts[:-1]) + " and " + parts[-1]


NAMES = {"nope": "none", "sinusoidal": "sinusoidal", "learned": "learned", "rope": "RoPE", "alibi": "ALiBi"}


def _listed(parts: list[str]) -> str:
    return ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else "".join(parts)


def _training_changes(n: dict) -> str:
    """Each scheme's change at the end, before training -> after, grouped by whether training raised it."""
    up: list[str] = []
    down: list[str] = []
    for s in bag.FIGURE_SCHEMES:
        before, after = n[f"big.untrained.{s}.last"], n[f"big.trained.{s}.last"]
        (up if after > before else down).append(f"{NAMES[s]} ({_num(before)} → {_num(after)})")
    said = []
    if up:
        said.append(f"training raised the end change for {_listed(up)}")
    if down:
        said.append(f"lowered it for {_listed(down)}")
    return ", and ".join(said)


def _mixed_list(n: dict) -> str:
    return _listed([f"{n[f'big.mixed.{s}.long']:.0%} ({NAMES[s]})" for s in bag.FIGURE_SCHEMES])


def _itself_list(n: dict) -> str:
    return _listed([f"{n[f'big.trained.{s}.itself']:.0%}" for s in bag.FIGURE_SCHEMES if s != "nope"])


def _longest(n: dict) -> int:
    return max(trained.summary()["eval_lengths"])


def _growth(n: dict, scheme: str) -> float | None:
    """How much a scheme's bits per byte grow from its training length to the longest (None: no rows)."""
    short, long = (n[f"big.trained.{scheme}.bpb.{m}"] for m in (n["big.trained.train_len"], _longest(n)))
    return None if long is None else long - short


def _longer_list(n: dict) -> str:
    parts = []
    for s in bag.FIGURE_SCHEMES:
        short = n[f"big.trained.{s}.bpb.{n['big.trained.train_len']}"]
        long = n[f"big.trained.{s}.bpb.{_longest(n)}"]
        parts.append(f"{NAMES[s]} {short:.2f} → " + (f"{long:.2f}" if long is not None else "no rows to read it"))
    return _listed(parts)


def _longer_verdict(n: dict) -> str:
    """The schemes that grow least and most, and the one that cannot read the longer text at all."""
    grown = {s: _growth(n, s) for s in bag.FIGURE_SCHEMES}
    readable = {s: g for s, g in grown.items() if g is not None}
    least, most = min(readable, key=lambda s: readable[s]), max(readable, key=lambda s: readable[s])
    cannot = [NAMES[s] for s, g in grown.items() if g is None]
    said = f"{NAMES[least]} stays flattest, {NAMES[most]} loses the most"
    if cannot:
        said += f", and the {_listed(cannot)} table has no rows past its training length"
    return said + "."


def _share_list(n: dict, model: str) -> str:
    names = {"sinusoidal": "sinusoidal", "learned": "learned", "rope": "RoPE", "alibi": "ALiBi"}
    parts = [f"{n[f'big.{model}.{s}.nearby']:.0%} ({names[s]})" for s in bag.FIGURE_SCHEMES if s != "nope"]
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def _language_note() -> str:
    if trained.corpus()["english"]:
        return "The sentences below are English, the language they learned (short and plain as they are)."
    return """They learned from Python, not English: the English sentences below are text they read as bytes
    like any other, not the text they know."""


def _language_of_pair() -> str:
    return "in the language the models learned" if trained.corpus()["english"] else "in a language they never read"


def prose(n: dict) -> list[Block]:
    """The chapter's text with the numbers of :func:`numbers`."""
    corpus = trained.corpus()  # what the trained models read (the packaged summary says)
    rows = (
        ("key point", "measured now"),
        (
            'Without position, attention cannot tell "the dog bit the man" from "the man bit the dog" '
            "(pooled outputs, NoPE vs RoPE)",
            f"{_rounding_or_sci(n['big.nope_difference'])} vs {sci(n['big.rope_difference'])}",
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
            "p",
            f"""**A trained model on screen.** The figures below read small trained models unless you switch
            them: one byte-level TinyLM per scheme ({n["big.trained.layers"]} layers, width
            {n["big.trained.width"]}, {n["big.trained.parameters"]:,} weights each, the learned table
            {n["big.trained.learned_extra"]:,} more), trained by `posenc lab --preset lesson` for
            {n["big.trained.steps"]:,} steps on texts of {n["big.trained.train_len"]} bytes of
            {corpus["text"]}, and shipped with posenc. On {corpus["held_out"]} they need {_bpb_list(n)} bits
            per byte at their training length, where a uniform guess needs 8. {_language_note()} The model
            menu of each figure switches to the same model before training, with the weights it started from;
            trained or not, every figure reads the model causally, as it was trained, and the line above each
            figure says which one it shows.""",
            "picture-after",
        ),
        Block(
            "caption",
            f"""How much the state of the full stop changes between “{ENDED_SENTENCES[0]}” and
            “{ENDED_SENTENCES[1]}”, after the model's first block and at its end (the final hidden state, from
            which it predicts the next byte). Each full stop has read the same bytes in another order, causally,
            as the model was trained. The axis is logarithmic and shared by every scheme, trained and
            untrained.""",
            "big-caption",
        ),
        Block(
            "try",
            f"""switch the scheme to none: after the first block the change is rounding, trained or not. The full
            stop's attention reads the same bytes either way, and nothing tells it their order. At the end it is
            not ({_num(n["big.trained.nope.last"])} trained): under the causal mask each earlier byte has read a
            different beginning of the sentence, so from the second layer on the mask itself carries the order.
            Every other scheme changes the full stop after the first block already. Then switch the model, to
            compare each model with itself before training: {_training_changes(n)}.""",
            "figure-after",
        ),
        Block(
            "p",
            f"""**What this comparison can show, and what it cannot.** It shows, one model at a time, whether
            the model's reading of a sentence depends on the order of its words, and whether training made it
            depend more. It cannot show that the model knows who bit whom: any change of the state counts,
            useful or not. It is one pair of sentences, {_language_of_pair()}, and the starting weights are
            drawn afresh the way TinyLM draws them, not the exact draw the lab began from.""",
            "figure-after",
        ),
        Block("h3", "Who attends to whom", "attention"),
        Block(
            "p",
            """Position changes more than an output: it changes where each word looks. One attention layer
            reads your sentence under every scheme. Each row is a word asking, each column a word it can attend
            to; the darker the cell, the more of the row's attention it gets (every row adds up to 1, and every
            grid, trained or not, is shaded on one scale from 0 to 1), and the ring marks the word the row
            attends to most. The models read causally: a word sees only itself and the words before it, so the
            upper right of every grid is empty.""",
            "attention",
        ),
        Block(
            "p",
            f"""The models read bytes, and a word is several bytes. The grid folds them per byte: a cell is how
            much the row's bytes give each byte of the column's word, as a share of the row, so a long word
            gets no more attention for its length alone. In “{MIXED_TEXT}” the last word gives the long word,
            three words back, {_mixed_list(n)}, less than the word just before it gets under every scheme.
            A word's cell with itself includes its own earlier bytes, since a byte also reads the letters
            before it in its word. Trained, the words look close by: in “{ATTENTION_TEXT}” the last word gives
            itself and the word before it {_share_list(n, "trained")} of its attention (itself alone
            {_itself_list(n)}), where an even spread over the five words would give
            {n["big.even_nearby"]:.0%}. NoPE is the exception ({n["big.trained.nope.nearby"]:.0%}, about even):
            without positions it cannot know which word is near.""",
            "attention",
        ),
        Block(
            "caption",
            """Attention weights of the first attention layer of each scheme's model (trained, or the same model
            before training), heads averaged, causal, computed the way the layer computes them
            (`posenc.teaching.lesson.attention`), each word's bytes folded into the word per byte. Every grid is
            shaded on one fixed scale, from 0 (white) to 1 (darkest), trained or not, as the legend under each
            grid says.""",
            "attn-caption",
        ),
        Block(
            "try",
            f"""switch the model to untrained: before training every scheme but ALiBi spreads each row evenly
            over the words it can see (at most {n["big.untrained.map_deviation"]:.1%} off). ALiBi's penalty leans
            to near words before any training: its last word gives itself and the word before it
            {n["big.untrained.alibi.nearby"]:.0%} untrained and {n["big.trained.alibi.nearby"]:.0%} trained. Then
            type a sentence of your own, with long and short words.""",
            "attention-after",
        ),
        Block("h3", "Near and far: ALiBi's penalty against RoPE's turns", "distance"),
        Block(
            "p",
            f"""ALiBi subtracts a penalty that grows with the distance from every score, fixed before any training
            ([chapter 9](#alibi-penalty)); RoPE only turns queries and keys, and what its model makes of the
            turns is learned. The figure measures how much attention a byte gives the byte one, two, … up to
            {n["big.trained.train_len"] - 1} bytes back, on {corpus["held_out"]}, as a multiple of an even spread
            (1 = every byte it can see gets the same share). Untrained, every scheme but ALiBi spreads evenly
            (at most {n["big.untrained.even_deviation"]:.1%} off at any distance), while ALiBi already gives the
            {NEAR_BYTES} bytes just before {_num(n["big.untrained.alibi.near"], 2)} times an even share and bytes
            {FAR_FROM} or more back {_num(n["big.untrained.alibi.far"], 2)} times: its penalty alone.
            Trained, ALiBi's curve barely moves ({_num(n["big.trained.alibi.near"], 2)} and
            {_num(n["big.trained.alibi.far"], 2)}), while RoPE has learned to look close
            ({_num(n["big.trained.rope.near"], 2)} and {_num(n["big.trained.rope.far"], 2)}) with a shape of its
            own, and so have the sinusoidal and learned models. NoPE stays near even
            ({_num(n["big.trained.nope.near"], 2)} and {_num(n["big.trained.nope.far"], 2)}). Each point of a
            curve averages the queries that reach that far back: {n["big.queries.1"]:,} at one byte back,
            {n["big.queries.few"]:,} or fewer from {FEW_FROM} bytes back.""",
            "distance",
        ),
        Block(
            "caption",
            """Attention a byte gives the byte k back, divided by an even spread's share, in the first layer of
            each scheme's model (heads averaged, causal), averaged over every byte of the held-out windows the
            models' summary is measured on; both axes logarithmic, the dashed line at 1 an even spread. The
            curves' far right rests on few queries and jumps (the text above gives the counts).""",
            "dist-caption",
        ),
        Block(
            "try",
            """switch the model to untrained: four curves fall onto the line of an even spread and ALiBi's stays
            where it was. What ALiBi knows about distance it was given; what RoPE knows, it learned.""",
            "distance-after",
        ),
        Block("h3", "Can it read longer texts than it was trained on?", "distance-after"),
        Block(
            "p",
            f"""The same models, measured on texts {_longest(n) // n["big.trained.train_len"]} times longer than
            they were trained on ({n["big.trained.train_len"]} bytes, then {_longest(n)}), in bits per byte
            (lower is better): {_longer_list(n)}. {_longer_verdict(n)} `posenc lab` measures this on larger
            models, with and without the scalings of [chapter 8](#stretching-rope).""",
            "distance-after",
        ),
        Block(
            "p",
            """Positional encodings give a transformer both things at once: the speed of reading a whole text
            in parallel, and the knowledge of which word came first, second and last. With meaning (word
            vectors) and order (positions) in place, the tokens are ready for the heart of the transformer:
            self-attention.""",
            "closing",
        ),
        see_also("Next: the [workbench](#workbench), ten views for going deeper."),
    ]


# -- which model the figures read ---------------------------------------------------------------------------
#: the figures' ``model`` parameter: each scheme's trained model (the default), or the same model before
#: training (:func:`~posenc.teaching.lesson.trained.initial_model`); both read causally, as trained
MODELS = ("trained", "untrained")


def _check_model(model: str) -> str:
    return check_choice("model", model, set(MODELS))


def _lesson_model(model: str, scheme: str):
    return trained.model(scheme) if model == "trained" else trained.initial_model(scheme)


def _source(model: str, scheme: str) -> dict:
    if model == "trained":
        return {"kind": "trained", "text": f"the lesson's trained {scheme} model (posenc lab --preset lesson), causal"}
    return {
        "kind": "untrained",
        "text": f"the lesson's {scheme} model untrained (the weights it started training from, drawn as TinyLM "
        "draws them), causal",
    }


# -- the figure: does the model's reading of the sentence change with the order? -----------------------------
#: the two orders the figure compares, each ended by the same byte (a full stop), so that the state read
#: at the end is the state of one byte that has seen the same bytes in another order
ENDED_SENTENCES = tuple(f"{s}." for s in ORDER_SENTENCES)


def _end_states(lm, sentence: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The state of the sentence's last byte after the first block and after the whole model (the final
    normalised hidden state, from which the next byte is predicted), causal as the model was trained."""
    idx, _ = trained.sentence_bytes(sentence.split())
    pos = torch.arange(idx.shape[1]).unsqueeze(0)  # (1, S)
    with torch.no_grad():
        x = lm.scheme.embed(lm.tok(idx).to(torch.float64) * lm.embed_scale, pos)  # (1, S, d)
        first = lm.blocks[0](x, lm.scheme, pos, True)[0, -1]  # (d,)
        last = lm.hidden_states(idx, causal=True)[0, -1]  # (d,)
    return first, last


def _order_differences(scheme: str, model: str) -> tuple[float, float]:
    (first_a, last_a), (first_b, last_b) = (_end_states(_lesson_model(model, scheme), s) for s in ENDED_SENTENCES)
    return float((first_a - first_b).abs().max()), float((last_a - last_b).abs().max())


@functools.lru_cache(maxsize=None)
def _all_order_differences(model: str) -> dict[str, tuple[float, float]]:
    return {name: _order_differences(name, model) for name in bag.FIGURE_SCHEMES}


def big_picture(scheme: str, model: str = "trained") -> dict:
    """ "the dog bit man." against "the man bit dog." with ``scheme``: does the state at the full stop,
    which has seen the same bytes in another order, change? Read causally, as the models were trained.

    ``model`` "trained" reads the lesson's trained byte-level model of the scheme, "untrained" the same
    model with the weights it started from. ``first_difference`` is the largest change of the full
    stop's state after the first block, ``last_difference`` of its final hidden state. ``scale`` is the
    largest change under any scheme of either model and ``smallest`` the smallest above rounding, so a
    figure drawn on them keeps one axis while the scheme and the model change; a change at or under
    :data:`ROUNDING_LEVEL` is flagged as rounding.
    """
    check_choice("scheme", scheme, set(bag.FIGURE_SCHEMES))
    _check_model(model)
    first, last = _all_order_differences(model)[scheme]
    values = [v for m in MODELS for pair in _all_order_differences(m).values() for v in pair]
    return {
        "scheme": scheme,
        "model": model,
        "source": _source(model, scheme),
        "sentences": list(ENDED_SENTENCES),
        "first_difference": first,
        "last_difference": last,
        "first_rounding": first <= ROUNDING_LEVEL,
        "last_rounding": last <= ROUNDING_LEVEL,
        "rounding_level": ROUNDING_LEVEL,
        "scale": max(values),
        "smallest": min(v for v in values if v > ROUNDING_LEVEL),
        "order_visible": max(first, last) > ROUNDING_LEVEL,
    }


# -- the figure: who attends to whom --
#: words the attention map draws at most (a grid of words x words)
ATTENTION_MAX_WORDS = 12
#: the sentence the attention maps open on, which the text measures
ATTENTION_TEXT = "the dog bit the man"
#: a long word among short ones, which the text reads to show that the fold gives length no weight
MIXED_TEXT = "aaaaaaaaaaaa b c d"


@functools.lru_cache(maxsize=8)
def _lab_model(run: str, scheme: str):
    """The lab's trained ``scheme`` model of run folder ``run``, or the reason there is none."""
    from ....runs.lab_run import RunModelError, read_run_model

    try:
        model = read_run_model(Path(run), scheme).model
    except RunModelError as err:
        return None, str(err)
    return model.double(), None


def attention_map(text: str, model: str = "trained", lab_run: Path | None = None) -> dict:
    """Which word attends to which in ``text``, under every scheme: the weights of one attention
    layer (heads averaged; row = the word asking, column = the word it attends to; every row sums
    to 1), causal as the models were trained, so a word sees itself and the words before it.

    The models read bytes; a word's bytes are folded into the word per byte
    (:func:`~posenc.teaching.lesson.attention.by_word`), so a long word does not collect attention by its
    length alone. ``model`` "trained" reads each scheme's trained model (the lesson's, or the one of
    ``lab_run``, a ``posenc lab`` run folder, where it trained that scheme), "untrained" the lesson's
    model of the scheme with the weights it started from. The sentence may have at most the models'
    training length in bytes. Each map says which model it is.
    """
    _check_model(model)
    words = split_words(text)
    if len(words) > ATTENTION_MAX_WORDS:
        raise ValueError(f"text must have at most {ATTENTION_MAX_WORDS} words for the attention map, got {len(words)}")
    trained.check_fits(words)
    maps: list[dict] = []
    for name in bag.FIGURE_SCHEMES:
        lm, _ = _lab_model(str(lab_run), name) if lab_run is not None and model == "trained" else (None, None)
        if lm is not None and name == "learned" and trained.sentence_bytes(words)[0].shape[1] > lm.config.max_len:
            lm = None  # the run's table has no row for the sentence's last bytes; the lesson's has
        if lm is not None:
            text_of = f"the lab's trained {name} model of the run given, first layer, causal"
            source = {"kind": "trained", "text": text_of}
        else:
            lm, source = _lesson_model(model, name), _source(model, name)
            source["text"] += ", first layer"
        maps.append({"scheme": name, "weights": trained.word_attention(lm, words).tolist(), "source": source})
    return {"words": words, "maps": maps, "model": model, "trained": model == "trained"}


def even_deviation(weights: torch.Tensor) -> float:
    """How far a causal word map (W, W) is from an even spread: the largest gap between a cell a word
    can see and ``1 / (i + 1)``, the share of each of the ``i + 1`` words row ``i`` sees."""
    rows = torch.arange(weights.shape[0], dtype=weights.dtype).unsqueeze(1) + 1  # (W, 1)
    even = (1 / rows).expand_as(weights).tril()
    return float((weights - even).abs().max())


def nearby_share(weights: torch.Tensor) -> float:
    """How much of its attention the last word of a map gives itself and the word before it (a share
    in [0, 1]); an even spread over the W words it sees gives 2 / W."""
    return float(weights[-1, -2:].sum())


# -- the figure: attention by distance (ALiBi's fixed penalty against what RoPE learned) ---------------------
#: how many bytes back the figure reads (the models' training length)
def _distance_length() -> int:
    return trained.train_len()


#: the nearest keys and the far ones the chapter's text compares (bytes back)
NEAR_BYTES = 4
FAR_FROM = 32
#: from this many bytes back the text warns that each point of a curve averages few queries
FEW_FROM = 115


@functools.lru_cache(maxsize=None)
def _distance_curves(model: str) -> dict[str, list[float]]:
    windows = trained.read_windows()
    length = _distance_length()
    curves = {}
    for name in bag.FIGURE_SCHEMES:
        lm = _lesson_model(model, name)
        curves[name] = [float(v) for v in trained.attention_by_distance(lm, windows, length)]
    return curves


def attention_distance(model: str = "trained") -> dict:
    """How much attention a byte gives the byte ``k`` back, ``k = 0 .. L - 1``, as a multiple of an
    even spread over the bytes it sees (1 = even): the first layer of each scheme's model, causal,
    heads averaged, on the validation windows of the lesson's models (``L`` = their training length).

    ``model`` "trained" reads the trained models; "untrained" the same models with the weights they
    started training from. ``near`` is the mean over the nearest :data:`NEAR_BYTES` distances
    (1 .. NEAR_BYTES bytes back), ``far`` over :data:`FAR_FROM` bytes back and more.
    """
    _check_model(model)
    curves = _distance_curves(model)
    schemes = []
    for name, curve in curves.items():
        schemes.append(
            {
                "scheme": name,
                "curve": curve,
                "near": sum(curve[1 : NEAR_BYTES + 1]) / NEAR_BYTES,
                "far": sum(curve[FAR_FROM:]) / len(curve[FAR_FROM:]),
                "source": _source(model, name),
            }
        )
    return {
        "model": model,
        "length": _distance_length(),
        "windows": int(trained.read_windows().shape[0]),
        "held_out": trained.corpus()["held_out"],
        # how many queries each distance's point averages: a query k bytes into a window is the first to
        # see a key k bytes back, so distance k has L - k queries per window
        "queries": [int(trained.read_windows().shape[0]) * (_distance_length() - k) for k in range(_distance_length())],
        "few_from": FEW_FROM,
        "near_bytes": NEAR_BYTES,
        "far_from": FAR_FROM,
        "schemes": schemes,
    }


#: route -> figure function (the explorer serves each at /api/lesson/<route>)
FIGURES = {
    "big-picture": Figure(big_picture, scheme=Choice("rope"), model=Choice("trained")),
    "attention": Figure(attention_map, text=Text(ATTENTION_TEXT), model=Choice("trained"), lab_run=LAB_RUN),
    "attention-distance": Figure(attention_distance, model=Choice("trained")),
}
