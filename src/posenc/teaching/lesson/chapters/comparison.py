"""Chapter "The methods side by side": the comparison table's live columns, and which scheme stops first."""

from __future__ import annotations

from typing import Dict, cast

import torch

from ....factory import make_scheme
from ....learned import PositionOutOfRangeError
from ....model import local_random
from ....schemes import PositionScheme
from ....t5 import T5RelativeBias
from ..prose import Block
from ..stretching import past_training
from ._figures import Figure
from ._ranges import Range, checked

#: the training length every scheme of the table is built for, and the lengths the "try this" compares
TRAINED = 512
LENGTHS = (512, 576)
SCHEMES = ("sinusoidal", "learned", "rope", "alibi", "t5", "nope")
#: the width and heads the table's schemes are built with
D_MODEL, HEADS = 32, 4


def built(name: str, d_model: int = D_MODEL, heads: int = HEADS) -> PositionScheme:
    """Scheme ``name`` for ``TRAINED`` tokens; a learned table's rows are drawn from a generator of its
    own (seed 0), never from torch's global one (only its size and its limit are read here)."""
    with local_random(0):
        return make_scheme(name, d_model=d_model, n_heads=heads, max_len=TRAINED)


def reads(name: str, length: int) -> bool:
    """Whether scheme ``name``, built for ``TRAINED`` tokens, places ``length`` tokens (its own hooks)."""
    scheme = built(name).double()
    pos = torch.arange(length).unsqueeze(0)
    try:
        with torch.no_grad():
            scheme.embed(torch.zeros(1, length, D_MODEL, dtype=torch.float64), pos)
            q = torch.ones(1, HEADS, length, D_MODEL // HEADS, dtype=torch.float64)
            scheme.rotate(q, q, pos)
            scheme.bias(pos[0, -1:], pos[0])
    except PositionOutOfRangeError:
        return False
    return True


def extra_parameters(name: str) -> int:
    """The trainable numbers scheme ``name`` adds to a model (built as for :func:`reads`)."""
    scheme = built(name)
    return sum(p.numel() for p in scheme.parameters() if p.requires_grad)


def numbers() -> dict:
    """Which schemes read each length of :data:`LENGTHS`, and the trainable numbers each adds."""
    n: dict = {"compare.trained": TRAINED, "compare.d_model": D_MODEL}
    for length in LENGTHS:
        n[f"compare.reads.{length}"] = [s for s in SCHEMES if reads(s, length)]
    for name in SCHEMES:
        n[f"compare.params.{name}"] = extra_parameters(name)
    return n


#: scheme -> (method, how it works, longer than trained, used in): the table's words, one row per
#: scheme of :data:`SCHEMES`, in that order (the page adds a live column to these rows in that order)
ROWS = {
    "sinusoidal": (
        "sinusoidal",
        "fixed sin/cos added to the input ([chapter 5](#clock-hands), [fingerprint](#fingerprint))",
        "the waves go on forever ([rules](#three-rules)), but the model never saw the far seats",
        "the 2017 Transformer",
    ),
    "learned": (
        "learned table",
        "a trained `nn.Embedding(L_max, d)` added to the input ([chapter 6](#learned-tables))",
        "no: a hard wall at L_max, 512 in BERT ([the live error](#learned-tables))",
        "BERT, RoBERTa, GPT-2, GPT-3",
    ),
    "rope": (
        "RoPE",
        "turns queries and keys by *m*θ in every layer ([chapter 7](#rope), [dials](#dials))",
        "yes with a scaling: 128k tokens and more ([chapter 8](#stretching-rope), [wavelengths](#wavelengths)); "
        "plain RoPE loses quality past its training length ([lab](#lab))",
        "Llama 3, Mistral, DeepSeek, Gemma, Qwen",
    ),
    "alibi": (
        "ALiBi",
        "subtracts slope × distance from each score ([chapter 9](#alibi-penalty), [ALiBi view](#alibi))",
        "yes, the penalty is defined at any distance ([score vs distance](#scores))",
        "BLOOM, MPT",
    ),
    "t5": (
        "T5 bias",
        "adds a learned number per head and distance bucket to each score, where ALiBi subtracts slope × "
        "distance ([chapter 9](#alibi-penalty)): one bucket per near distance, wider ones farther out, one "
        "for every distance from 128 on",
        "yes: a longer text meets no distance bucket a model trained past 128 tokens has not seen; how well "
        "it reads them is measured in the [lab](#lab)",
        "T5, Flan-T5, mT5, UL2",
    ),
    "nope": (
        "none (NoPE)",
        "nothing; only a causal mask hints at order ([chapter 1](#bag-of-tiles))",
        "no seat to run out of, and nothing to tell order by ([chapter 1](#bag-of-tiles)); how well it reads "
        "longer texts is measured in the [lab](#lab)",
        "research models",
    ),
}
#: the table's header (the page appends one live column: whether each scheme reads the chosen length)
HEADER = ("method", "how it works", "longer than trained", "used in", "extra trainable numbers")


def prose(n: dict) -> list[Block]:
    """The chapter's text with the numbers of :func:`numbers`."""
    short, long = LENGTHS
    stopped = [s for s in n[f"compare.reads.{short}"] if s not in n[f"compare.reads.{long}"]]
    names = {"learned": "the learned table", "sinusoidal": "the sinusoidal code", "rope": "RoPE", "alibi": "ALiBi"}
    which = " and ".join(names.get(s, s) for s in stopped) or "no scheme"
    return [
        Block(
            "plain",
            """Six ways of telling a model where each word sits, side by side: how each one works, and what
            happens to it on a text longer than any it was trained on.""",
            "intro",
        ),
        Block(
            "p",
            f"""What the table says about how each scheme works and how it copes with longer texts links to the
            chapter or view where posenc shows it; the “used in” column only names well-known models built that
            way. The numbers are computed now: posenc builds each scheme for a model trained on
            {n["compare.trained"]} tokens, counts the trainable numbers it adds, and asks it to place the number of
            tokens you choose. Placing a position without an error is not reading the text well: past
            {n["compare.trained"]} tokens the live column also says what the model never met in training (for
            RoPE, the pairs [chapter 8](#stretching-rope) marks past training), and the [lab](#lab) measures how
            trained models read such texts.""",
            "intro",
        ),
        Block(
            "table",
            f"""Position schemes compared, each built by posenc for a model trained on {n["compare.trained"]} tokens
            at width {n["compare.d_model"]}""",
            "table",
            id="cmp-table",
            rows=(HEADER, *((*ROWS[s], f"{n[f'compare.params.{s}']:,}") for s in SCHEMES)),
        ),
        Block(
            "try",
            f"""slide the length from {short} to {long}: only {which} stops, with the same message as in
            [chapter 6](#learned-tables).""",
            "after",
        ),
    ]


# -- the figure: each scheme asked to place a number of tokens --
#: parameter -> (minimum, maximum, default, help) of the figure (the explorer's API publishes it)
FIGURE_RANGES: Dict[str, Range] = {
    "compare_len": (1, 8192, 1024, "tokens each scheme is asked to read"),
}


def untrained(name: str, length: int, scheme: PositionScheme) -> tuple[str, str]:
    """``(status, sentence)`` of the live column for scheme ``name`` placing ``length`` tokens without an
    error: ``"trained"`` when nothing it meets was met in training, else ``"untrained"`` and what was not.

    RoPE's count of pairs past training is chapter 8's (:func:`posenc.teaching.lesson.stretching.past_training`, the
    lesson's one definition), on the scheme's own frequencies.
    """
    if length <= TRAINED:
        return "trained", f"✓ within the {TRAINED:,} tokens trained"
    one = length == TRAINED + 1
    seats = f"seat {TRAINED:,} was" if one else f"seats {TRAINED:,}–{length - 1:,} were"
    distances = f"distance {TRAINED:,} was" if one else f"distances {TRAINED:,}–{length - 1:,} were"
    if name == "rope":
        inv_freq = cast(torch.Tensor, scheme.inv_freq)  # (pairs,)
        past, pairs = int(past_training(inv_freq, inv_freq, TRAINED, length).sum()), inv_freq.numel()
        if not past:
            return "trained", f"✓ placed; none of its {pairs} pairs past training yet (chapter 8)"
        return "untrained", f"⚠ placed, but {past} of its {pairs} pairs turn past training (chapter 8)"
    if name == "alibi":
        return "untrained", f"⚠ placed, but {distances} never trained"
    if name == "t5":  # the buckets the last query reads, against those a trained length reads
        t5 = cast(T5RelativeBias, scheme)
        seen = t5.buckets(torch.tensor([TRAINED - 1]), torch.arange(TRAINED)).unique()
        now = t5.buckets(torch.tensor([length - 1]), torch.arange(length)).unique()
        if bool(torch.isin(now, seen).all()):
            return "trained", f"✓ placed; every distance from {t5.max_distance} on reads one bucket, trained on"
        return "untrained", f"⚠ placed, but {int((~torch.isin(now, seen)).sum())} of its buckets never trained"
    if name == "nope":
        return "untrained", f"⚠ nothing to place, but no text past {TRAINED:,} tokens was trained on"
    return "untrained", f"⚠ placed, but {seats} never trained"


def compare(length: int) -> dict:
    """Ask each scheme, as posenc builds it for a model trained on 512 tokens, to place ``length``
    tokens: its own hook (embed, rotate or bias) runs at every position. Reports where the scheme
    acts, its extra trainable numbers, whether it placed them (the error is the library's own), and
    the live column's ``status`` and ``says``: ``"refused"``, ``"untrained"`` (placed, but past what a
    model trained on 512 tokens met: :func:`untrained`) or ``"trained"``. Placing is not reading well."""
    checked(FIGURE_RANGES, "compare_len", length)
    d_model, heads = 32, 4
    pos = torch.arange(length).unsqueeze(0)  # (1, L)
    rows = []
    for name in SCHEMES:
        scheme = built(name, d_model, heads).double()
        extra = sum(p.numel() for p in scheme.parameters() if p.requires_grad)
        where = {
            "sinusoidal": "input",
            "learned": "input",
            "rope": "queries and keys",
            "alibi": "attention logits",
            "t5": "attention logits",
            "nope": "nowhere",
        }[name]
        row: dict[str, object] = {"scheme": name, "where": where, "extra_parameters": extra}
        try:
            with torch.no_grad():
                x = scheme.embed(torch.zeros(1, length, d_model, dtype=torch.float64), pos)
                q = torch.ones(1, heads, length, d_model // heads, dtype=torch.float64)
                q, _ = scheme.rotate(q, q, pos)
                # the last query against every key: the row a long input needs most
                bias = scheme.bias(pos[0, -1:], pos[0])
            finite = bool(
                torch.isfinite(x).all() and torch.isfinite(q).all() and (bias is None or torch.isfinite(bias).all())
            )
            status, says = untrained(name, length, scheme)
            row |= {"reads": True, "finite": finite, "error": None, "status": status, "says": says}
        except PositionOutOfRangeError as err:
            says = f"✗ refused: {str(err).split('. ')[0]}"
            row |= {"reads": False, "finite": None, "error": str(err), "status": "refused", "says": says}
        rows.append(row)
    return {"length": length, "trained_len": TRAINED, "d_model": d_model, "schemes": rows}


#: route -> figure function (the explorer serves it at /api/lesson/<route>)
FIGURES = {"compare": Figure(compare, length="compare_len")}
