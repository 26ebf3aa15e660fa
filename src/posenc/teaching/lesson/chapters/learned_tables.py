"""Chapter "Learned tables and the 512 wall": a learned position table ends at its last row; a
sinusoidal one never ends."""

from __future__ import annotations

from typing import Dict, Tuple

import torch

from ....learned import LearnedPositionalEmbedding, PositionOutOfRangeError
from ....model import local_random
from ....sinusoidal import SinusoidalPositionalEncoding
from ..formats import signed
from ..prose import Block
from ._check import Check, Evidence
from ._ranges import Range, checked

#: BERT's table: 512 rows. A narrow width; the limit does not depend on it.
ROWS = 512
D_MODEL = 64
#: Rows after stretching the table.
EXTENDED = 1024


def interpolation_source(row: int, old_rows: int, new_rows: int) -> float:
    """Where new row ``row`` sits on the old table when ``extend`` stretches endpoints onto endpoints."""
    return row * (old_rows - 1) / (new_rows - 1)


def numbers() -> dict:
    """A BERT-sized learned table asked past its last row, stretched, and a sine table beside it."""
    n: dict = {}
    with local_random(0):
        learned = LearnedPositionalEmbedding(ROWS, D_MODEL)
    old = learned.weight.detach().clone()  # (ROWS, D_MODEL)
    n["learned.rows"] = learned.max_len
    try:
        learned.encodings(torch.tensor([[510, 511, 512]]))
        n["learned.error"] = None
    except PositionOutOfRangeError as err:
        n["learned.error"] = {
            "type": type(err).__name__,
            "position": err.position,
            "max_len": err.max_len,
            "message": str(err),
        }
    learned.extend(EXTENDED)
    source = interpolation_source(ROWS, ROWS, EXTENDED)
    low, frac = int(source), source - int(source)
    row = learned.encodings(torch.tensor([ROWS]))[0].detach().double()  # (D_MODEL,)
    expected = (1 - frac) * old[low].double() + frac * old[low + 1].double()
    n["learned.extended.rows"] = learned.max_len
    n["learned.extended.source"] = source
    n["learned.extended.row512_interp_error"] = float((row - expected).abs().max())
    n["learned.extended.first_row_error"] = float((learned.weight[0].detach() - old[0]).abs().max())
    n["learned.extended.last_row_error"] = float((learned.weight[-1].detach() - old[-1]).abs().max())
    sinus = SinusoidalPositionalEncoding(D_MODEL, max_len=ROWS)
    n["learned.sinusoidal.cached_before"] = sinus.pe.shape[0]
    vector = sinus.encodings(torch.tensor([ROWS]))[0].double()  # (D_MODEL,)
    n["learned.sinusoidal.cached_after"] = sinus.pe.shape[0]
    n["learned.sinusoidal.row512"] = vector.tolist()
    n["learned.sinusoidal.row512_norm"] = float(vector.norm())
    return n


def prose(n: dict) -> list[Block]:
    """The chapter's text with the numbers of :func:`numbers`."""
    err = n["learned.error"]
    stopped = (
        Block("p", f"`{err['type']}`: {err['message']}", "measured", id="learned-error")
        if err
        else Block("p", "**No error was raised: the table did not stop at its last row.**", "measured")
    )
    source = n["learned.extended.source"]
    low = int(source)
    values = n["learned.sinusoidal.row512"]
    row = (
        ("column", "0", "1", "2", "3", "...", f"{D_MODEL - 2}", f"{D_MODEL - 1}", "length"),
        (
            f"seat {ROWS}",
            *(signed(v, 3) for v in values[:4]),
            "",
            *(signed(v, 3) for v in values[-2:]),
            f"{n['learned.sinusoidal.row512_norm']:.3f}",
        ),
    )
    return [
        Block(
            "plain",
            """Another way is to let the model learn one vector per seat, like a numbered list. It works, but
            the list has a last entry, and beyond it the model has nothing.""",
            "intro",
        ),
        Block(
            "p",
            """BERT, RoBERTa, GPT-2 and GPT-3 skip the formula. They keep a second lookup table,
            `nn.Embedding(max_len, d_model)`, with one row per seat, and let backpropagation learn the rows like
            any other weight. Simple, and it works well on the lengths it was trained on.""",
            "intro",
        ),
        Block(
            "p",
            """The catch: the table has exactly `max_len` rows. BERT's has 512, seats 0 to 511. A 513th token
            asks for a row that was never made. posenc's `LearnedPositionalEmbedding` stops with a clear error
            there; one way round is to stretch the table by interpolation, squeezing the new seats in between the
            old rows (then fine-tune, since the new rows are only estimates).""",
            "intro",
        ),
        Block(
            "caption",
            f"""The table's {ROWS} rows and the seats the input asks for; the message is the one posenc raises, run
            just now.""",
            "wall-caption",
        ),
        Block(
            "caption",
            """Column 0 of the table's last rows (line) and the stretched table's rows placed at old seats (dots):
            every new row lies between two original ones. The table here is untrained, so its rows are the
            random ones it starts from; a trained model's table stretches the same way.""",
            "stretch-caption",
        ),
        Block(
            "try",
            """set the tokens to 512, then 513. Then stretch the table past your token count and read the status
            again.""",
            "after",
        ),
        Block("h3", "Measured: the wall, the stretch and the sine code", "measured"),
        Block(
            "p",
            f"""We build `posenc.LearnedPositionalEmbedding({ROWS}, {D_MODEL})`, a {ROWS}-row table like BERT's,
            and ask it for seats 510, 511 and 512:""",
            "measured",
        ),
        stopped,
        Block(
            "p",
            f"""The way out without truncating: `extend({EXTENDED})` stretches the learned rows over {EXTENDED}
            seats by linear interpolation (the same idea as position interpolation for RoPE). The table now has
            {n["learned.extended.rows"]} rows. New row 0 is old row 0 and new row {EXTENDED - 1} is old row
            {ROWS - 1} (differences {n["learned.extended.first_row_error"]:.1e} and
            {n["learned.extended.last_row_error"]:.1e}); new row {ROWS} sits at old position {source:.4f}, a mix
            of old rows {low} and {low + 1} (largest deviation from that mix
            {n["learned.extended.row512_interp_error"]:.1e}). Every seat moved, so the model must be fine-tuned
            to the stretched table: interpolation gives starting points, not trained rows.""",
            "measured",
        ),
        Block(
            "p",
            f"""A sinusoidal table of the same {n["learned.sinusoidal.cached_before"]} rows has no such wall:
            seat {ROWS} is just the waves continued. Asking `SinusoidalPositionalEncoding({D_MODEL},
            max_len={ROWS})` for seat {ROWS} grows its cache to {n["learned.sinusoidal.cached_after"]} rows and
            returns:""",
            "measured",
        ),
        Block("table", f"The sine code of seat {ROWS}", "measured", rows=row),
        Block(
            "p",
            f"""Columns 0 and 1 are sin({ROWS}) and cos({ROWS}); the length is sqrt(d_model/2), as at every seat.
            Whether a model trained on shorter texts *uses* those new seats well is another matter (the lab
            measures it), but the encoding itself is defined everywhere.""",
            "measured",
        ),
    ]


# -- the figure: a 512-row table fed too many tokens, and a stretched copy --
#: parameter -> (minimum, maximum, default, help) of the figure (the explorer's API publishes it)
FIGURE_RANGES: Dict[str, Range] = {
    "tokens": (1, 4096, 513, "tokens fed to the learned table"),
    "stretch_to": (513, 4096, 1024, "rows of the learned table after interpolation"),
}
#: the width of the figure's table (narrow so the page stays light; the limit does not depend on it)
FIGURE_WIDTH = 8


def _learned_table() -> LearnedPositionalEmbedding:
    with local_random(0):
        return LearnedPositionalEmbedding(ROWS, FIGURE_WIDTH)


def learned_wall(tokens: int, stretch_to: int) -> dict:
    """Feed ``tokens`` positions to a 512-row learned table; stretch a copy to ``stretch_to`` rows.

    The error message is the library's own :class:`PositionOutOfRangeError`. The stretched table
    comes from :meth:`LearnedPositionalEmbedding.extend` (linear interpolation); column 0 of the last
    rows of both tables is returned so the page can draw where the new rows come from.
    """
    checked(FIGURE_RANGES, "tokens", tokens)
    checked(FIGURE_RANGES, "stretch_to", stretch_to)
    table = _learned_table()
    x = torch.zeros(1, tokens, FIGURE_WIDTH)
    try:
        out = table(x)
        result = {"ok": True, "shape": list(out.shape), "error": None}
    except PositionOutOfRangeError as err:
        result = {
            "ok": False,
            "shape": None,
            "error": str(err),
            "error_type": type(err).__name__,
            "first_missing": err.position,
        }
    stretched = _learned_table()
    stretched.extend(stretch_to, method="interpolate")
    try:  # the stretched table is asked for the same seats, by the same call
        stretched(x)
        stretched_ok = True
    except PositionOutOfRangeError:
        stretched_ok = False
    window = 16  # the last rows, where the two tables differ most
    old_rows = list(range(ROWS - window, ROWS))
    # the first new row at or after the window's first old seat, so each drawn row has a trained row on either side
    new_start = -(-(ROWS - window) * (stretch_to - 1) // (ROWS - 1))
    new_rows = list(range(new_start, stretch_to))
    scale = (ROWS - 1) / (stretch_to - 1)
    with torch.no_grad():
        old_col = table.weight[old_rows, 0].tolist()
        new_col = stretched.weight[new_rows, 0].tolist()
    return {
        "max_len": ROWS,
        "d_model": FIGURE_WIDTH,
        "tokens": tokens,
        **result,
        "rows_used": min(tokens, ROWS),
        "stretch_to": stretch_to,
        "stretched_reads_tokens": stretched_ok,
        "old_positions": old_rows,
        "old_values": old_col,
        "new_positions": new_rows,
        "new_values": new_col,
        "new_at_old_scale": [r * scale for r in new_rows],
        "squeeze": scale,
    }


#: route -> figure function (the explorer serves it at /api/lesson/<route>)
FIGURES = {"learned": learned_wall}


# -- the knowledge checks the manifest lists under this chapter (the quiz collects them) --
def _learned_limit() -> Evidence:
    from ....learned import LearnedPositionalEmbedding, PositionOutOfRangeError

    with local_random(0):
        table = LearnedPositionalEmbedding(max_len=512, d_model=4)
        plain = torch.nn.Embedding(512, 4)  # the bare PyTorch table a BERT-style model looks its rows up in
    try:
        table.encodings(torch.arange(600))
        message = "no error"
    except PositionOutOfRangeError as err:
        message = str(err)
    try:
        plain(torch.arange(600))
        plain_error, plain_message = "none", "no error"
    except IndexError as err:  # what torch raises for a row past the table's end
        plain_error, plain_message = type(err).__name__, str(err)
    return (
        [
            f"posenc's LearnedPositionalEmbedding(max_len=512) asked for positions 0..599 says: {message}",
            f"PositionOutOfRangeError {'is' if issubclass(PositionOutOfRangeError, IndexError) else 'is not'} a "
            "subclass of IndexError, so code that catches IndexError catches it too.",
            f"A plain torch.nn.Embedding(512, 4) asked for the same rows raises {plain_error}: {plain_message}",
        ],
        {
            "max_len": 512,
            "requested": 600,
            "error": message,
            "is_index_error": issubclass(PositionOutOfRangeError, IndexError),
            "plain_error": plain_error,
            "plain_message": plain_message,
        },
    )


CHECKS: Tuple[Check, ...] = (
    Check(
        "learned-limit",
        "learned tables",
        "A model has a learned position table with 512 rows (BERT-style) and is given 600 tokens. "
        "What happens at position 512?",
        (
            "The table wraps round and position 512 reuses row 0.",
            "New rows are filled in from sine waves on the fly.",
            "There is no row 512: the lookup fails unless the input is cut or the table is stretched.",
        ),
        2,
        (
            "Nothing wraps: reusing row 0 would make position 512 look like the first token.",
            "A learned table has no formula to fall back on; rows that were never trained do not exist.",
            "The table ends at row 511. posenc says so with a PositionOutOfRangeError (an IndexError) that "
            "offers truncation or interpolation; a plain nn.Embedding only says 'index out of range in self'.",
        ),
        _learned_limit,
    ),
)
