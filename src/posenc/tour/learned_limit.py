"""Section: a learned position table ends at its last row; a sinusoidal one never ends."""

from __future__ import annotations

import torch

from ..learned import LearnedPositionalEmbedding, PositionOutOfRangeError
from ..sinusoidal import SinusoidalPositionalEncoding
from ._show import plain, prose, signed, table

#: BERT's table: 512 rows. The tour uses a narrow width; the limit does not depend on it.
ROWS = 512
D_MODEL = 64
#: Rows after stretching the table.
EXTENDED = 1024


def interpolation_source(row: int, old_rows: int, new_rows: int) -> float:
    """Where new row ``row`` sits on the old table when ``extend`` stretches endpoints onto endpoints."""
    return row * (old_rows - 1) / (new_rows - 1)


def learned_overflow(ctx) -> None:
    plain(
        ctx,
        """Another way is to let the model learn one vector per seat, like a numbered list.
    It works, but the list has a last entry, and beyond it the model has nothing.""",
    )
    prose(
        ctx,
        f"""BERT and GPT-2 learn one vector per seat in a second embedding table. We build
    [cyan]posenc.LearnedPositionalEmbedding({ROWS}, {D_MODEL})[/], a {ROWS}-row table like BERT's,
    and ask it for seats 510, 511 and 512:""",
    )
    learned = LearnedPositionalEmbedding(ROWS, D_MODEL)
    old = learned.weight.detach().clone()  # (ROWS, D_MODEL)
    ctx.record("learned.rows", learned.max_len)
    try:
        learned.encodings(torch.tensor([[510, 511, 512]]))
        ctx.record("learned.error", None)
        ctx.console.print("[bold red]No error was raised: the table did not stop at its last row.[/]")
    except PositionOutOfRangeError as err:
        ctx.record(
            "learned.error",
            {"type": type(err).__name__, "position": err.position, "max_len": err.max_len, "message": str(err)},
        )
        ctx.console.print(f"  [bold red]{type(err).__name__}[/]: {err}", highlight=False)
    ctx.console.print()

    learned.extend(EXTENDED)
    source = interpolation_source(ROWS, ROWS, EXTENDED)
    low = int(source)
    frac = source - low
    row = learned.encodings(torch.tensor([ROWS]))[0].detach().double()  # (D_MODEL,)
    expected = (1 - frac) * old[low].double() + frac * old[low + 1].double()
    ctx.record("learned.extended.rows", learned.max_len)
    ctx.record("learned.extended.source", source)
    ctx.record("learned.extended.row512_interp_error", float((row - expected).abs().max()))
    ctx.record("learned.extended.first_row_error", float((learned.weight[0].detach() - old[0]).abs().max()))
    ctx.record("learned.extended.last_row_error", float((learned.weight[-1].detach() - old[-1]).abs().max()))
    prose(
        ctx,
        f"""The way out without truncating: [cyan]extend({EXTENDED})[/] stretches the learned
    rows over {EXTENDED} seats by linear interpolation (the same idea as position interpolation for
    RoPE). The table now has {learned.max_len} rows. New row 0 is old row 0 and new row
    {EXTENDED - 1} is old row {ROWS - 1} (differences {ctx.facts["learned.extended.first_row_error"]:.1e}
    and {ctx.facts["learned.extended.last_row_error"]:.1e}); new row {ROWS} sits at old position
    {source:.4f}, a mix of old rows {low} and {low + 1} (largest deviation from that mix
    {ctx.facts["learned.extended.row512_interp_error"]:.1e}). Every seat moved, so the model must be
    fine-tuned to the stretched table: interpolation gives starting points, not trained rows.""",
    )

    sinus = SinusoidalPositionalEncoding(D_MODEL, max_len=ROWS)
    cached_before = ctx.record("learned.sinusoidal.cached_before", sinus.pe.shape[0])
    vector = sinus.encodings(torch.tensor([ROWS]))[0].double()  # (D_MODEL,)
    ctx.record("learned.sinusoidal.cached_after", sinus.pe.shape[0])
    ctx.record("learned.sinusoidal.row512", vector.tolist())
    ctx.record("learned.sinusoidal.row512_norm", float(vector.norm()))
    prose(
        ctx,
        f"""A sinusoidal table of the same {cached_before} rows has no such wall: seat {ROWS}
    is just the waves continued. Asking [cyan]SinusoidalPositionalEncoding({D_MODEL},
    max_len={ROWS})[/] for seat {ROWS} grows its cache to {sinus.pe.shape[0]} rows and returns:""",
    )
    t = table("column", "0", "1", "2", "3", "...", f"{D_MODEL - 2}", f"{D_MODEL - 1}", "length")
    values = vector.tolist()
    t.add_row(
        f"seat {ROWS}",
        *(signed(v, 3) for v in values[:4]),
        "",
        *(signed(v, 3) for v in values[-2:]),
        f"{vector.norm():.3f}",
    )
    ctx.console.print(t)
    prose(
        ctx,
        f"""Columns 0 and 1 are sin({ROWS}) and cos({ROWS}); the length is sqrt(d_model/2), as at
    every seat. Whether a model trained on shorter texts [italic]uses[/] those new seats well is
    another matter (the lab measures it), but the encoding itself is defined everywhere.""",
    )
