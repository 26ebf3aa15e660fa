"""Section: the key points of the tour, each with one number measured again now, and the big picture.

The section recomputes its own evidence (it does not read other sections' facts), so
``posenc tour --section big-picture`` stands on its own.
"""

from __future__ import annotations

import torch

from ..input_sizes import D_MODEL, position_word_lengths
from ..learned import LearnedPositionalEmbedding, PositionOutOfRangeError
from ..sinusoidal import sinusoidal_table
from . import bag, rotary
from ._show import plain, prose, sci, table

#: Seats over which the sine table's bound is checked again.
BOUND_SEATS = 4096
#: The learned table of the key points: BERT's 512 rows (a narrow width; the limit does not depend on it).
LEARNED_ROWS = 512


def _pooled_difference(scheme: str) -> float:
    model = bag.tiny_model(scheme)
    a = bag.hidden(model, bag.SENTENCE_A, False).mean(0)  # (d_model,)
    b = bag.hidden(model, bag.SENTENCE_B, False).mean(0)
    return float((a - b).abs().max())


def big_picture(ctx) -> None:
    plain(
        ctx,
        """A transformer reads every word at the same moment, which makes it fast; position
    information is the small extra that keeps that speed without losing the order of the words.""",
    )

    nope = ctx.record("big.nope_difference", _pooled_difference("nope"))
    rope = ctx.record("big.rope_difference", _pooled_difference("rope"))
    sizes = position_word_lengths(D_MODEL)
    ratio = ctx.record("big.position_over_word", sizes["ratio"])
    bound = ctx.record("big.sine_max_abs", float(sinusoidal_table(BOUND_SEATS, D_MODEL).abs().max()))
    table_ = LearnedPositionalEmbedding(LEARNED_ROWS, 8)
    try:
        table_.encodings(torch.tensor([LEARNED_ROWS]))
        refused = ctx.record("big.learned_refuses_last_plus_one", False)
    except PositionOutOfRangeError:
        refused = ctx.record("big.learned_refuses_last_plus_one", True)
    near = ctx.record("big.rope_score_near", rotary.pair_score(rotary.QUERY, rotary.KEY, 1, 3))
    far = ctx.record("big.rope_score_far", rotary.pair_score(rotary.QUERY, rotary.KEY, 101, 103))

    t = table("key point", "measured now", title="Key points")
    t.add_row(
        'Without position, attention cannot tell "the dog bit the man" from "the man bit the '
        'dog" (pooled outputs, NoPE vs RoPE)',
        f"{sci(nope)} vs {sci(rope)}",
    )
    t.add_row(
        f"A sine position vector has the word's width ({D_MODEL}) and is added to it; at "
        "TinyLM's scale it is about as long as the word",
        f"{ratio:.2f}x",
    )
    t.add_row(f"Sine values stay in [-1, 1] (largest |value| over {BOUND_SEATS:,} seats)", f"{bound:.6f}")
    t.add_row(
        f"A learned table of {LEARNED_ROWS} rows has no row {LEARNED_ROWS}", "refused" if refused else "NOT refused"
    )
    t.add_row("RoPE: the score depends only on the gap (seats 1 vs 3, then 101 vs 103)", f"{near:.5f}, {far:.5f}")
    ctx.console.print(t)

    prose(
        ctx,
        """[bold]The big picture.[/] Without a position scheme, processing every word in
    parallel costs the model the order of the words: a sentence becomes a bag of tiles. With one,
    each word carries its seat, as a wave pattern added to its vector (sinusoidal), a learned row
    (BERT, GPT-2), a turn of its query and key (RoPE) or a penalty on far-away keys (ALiBi), and the
    model keeps both the speed of reading everything at once and the order. Which scheme to pick is
    mostly a question of length: learned tables stop at their last row, sine waves never stop but
    models trained on short texts use new seats poorly, and RoPE models are stretched with scalings
    (the extension section, and [cyan]posenc lab[/] measures each one). Next comes attention itself,
    which is where RoPE and ALiBi do their work.""",
    )
