"""Bounds on every number the explorer's API accepts.

Each request is answered by a computation whose size is fixed by these bounds, so no query string can
make the server allocate more than a few megabytes or work for long. Measured with every parameter at
its maximum on one CPU core: the heaviest requests are ``/api/scores`` (about 0.4 s, 0.7 MB, its
distances sampled at :data:`MAX_SCORE_POINTS` points) and ``/api/sinusoidal`` (about 0.3 s, 1.3 MB);
the "bag of words" knowledge check, which runs an attention block, takes about 0.5 s; everything else
answers in tens of milliseconds. The table is published at ``GET /api/meta``; the page's sliders stay
inside it. The bounds on a learner's text are :func:`posenc.teaching.lesson.vectors.split_words`' own
(:data:`~posenc.teaching.lesson.vectors.MAX_TEXT_CHARS`, ``MAX_WORDS``, ``MAX_WORD_CHARS``), published here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Dict, Union

from ...rope.registry import scaling_parameters
from ..lesson.palette import parameter_label
from ..lesson.vectors import MAX_TEXT_CHARS, MAX_WORD_CHARS, MAX_WORDS

Number = Union[int, float]


@dataclass(frozen=True)
class Limit:
    """Allowed closed range and default of one query parameter."""

    minimum: Number
    maximum: Number
    default: Number
    help: str

    def to_dict(self) -> dict:
        return asdict(self)


#: query parameter name -> its limit. Integers unless the default is a float.
LIMITS: Dict[str, Limit] = {
    # sinusoidal table: length x d_model numbers travel to the page
    "length": Limit(1, 256, 64, "positions (rows) in the table"),
    "d_model": Limit(2, 256, 64, "width of the position vectors"),
    "base": Limit(2.0, 1.0e9, 10000.0, "the 10000 of sin(pos / base^(2i/d))"),
    "pos": Limit(0, 1_000_000, 5, "a position"),
    "dim": Limit(0, 255, 0, "a column of the sinusoidal table"),
    # RoPE
    "head_dim": Limit(2, 256, 16, "features per attention head (even)"),
    "rotary_dim": Limit(2, 256, 16, "features rotated per head (even, <= head_dim)"),
    "q_pos": Limit(0, 1_000_000, 3, "position of the query"),
    "k_pos": Limit(0, 1_000_000, 1, "position of the key"),
    "offset": Limit(0, 1_000_000, 0, "amount both positions are moved by"),
    "seed": Limit(0, 9999, 0, "seed of the example query/key vectors"),
    "degrees": Limit(1.0, 179.0, 30.0, "rotation per seat of the one-pair clock, in degrees"),
    # score vs distance
    # the whole range by default: RoPE's decay runs over every scale of distance (head_dim 16: the
    # mean score falls from 1 at distance 0 to about 0.15 over 1024..2048)
    "max_distance": Limit(1, 2048, 2048, "largest relative distance plotted"),
    "heads": Limit(1, 64, 8, "attention heads (ALiBi slopes)"),
    "head": Limit(0, 63, 0, "the ALiBi head whose bias matrix is drawn"),
    "matrix_len": Limit(2, 64, 16, "query and key positions in the matrices"),
    # precision
    "max_position": Limit(2, 2**31, 2**20, "largest position checked"),
    # wavelengths and scalings (each scaling's own parameters, factor among them, are defined once by
    # its registry entry: posenc.rope.registry.scaling_parameters, GET /api/scalings)
    "train_len": Limit(2, 10_000_000, 4096, "context length the model was trained with"),
    "original_max_position_embeddings": Limit(2, 10_000_000, 8192, "training context of the scaled model"),
    "seq_len": Limit(1, 100_000_000, 32768, "current sequence length (dynamic NTK)"),
    "max_position_embeddings": Limit(1, 100_000_000, 8192, "positions the config advertises"),
}


def scaling_limit(name: str) -> Limit:
    """The limit of a RoPE scaling's parameter ``name``, read from its registry descriptor's
    :class:`~posenc.rope.registry.Parameter`, the one definition of its range and default (a figure
    that offers the parameter outside the wavelength view uses this, never a range of its own).

    Raises ``ValueError`` naming ``name`` and the parameters the registered scalings have.
    """
    parameters = scaling_parameters()
    if name not in parameters:
        raise ValueError(f"no registered scaling has a parameter named {name!r}; they have {sorted(parameters)}")
    p = parameters[name]
    return Limit(float(p.minimum), float(p.maximum), float(p.default), parameter_label(name))


#: Most distances ``/api/scores`` samples; longer ranges are spread over this many points.
MAX_SCORE_POINTS = 513


def as_dict() -> dict:
    """The limits in the shape ``GET /api/meta`` returns them."""
    return {name: limit.to_dict() for name, limit in LIMITS.items()} | {
        "text_chars": MAX_TEXT_CHARS,
        "words": MAX_WORDS,
        "word_chars": MAX_WORD_CHARS,
    }
