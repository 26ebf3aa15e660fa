"""The example vectors of the teaching layer: words, fixed vectors, turns and angle errors.

The lesson's figures and knowledge checks and the explorer's workbench views all stand words and
queries/keys in with these, so a word has one vector everywhere: :func:`word_vector` (a fixed
pseudo-random vector per word) and :func:`example_vector` (one per seed). :func:`split_words` is the one
reading of a learner's sentence, with its size bounds (:data:`MAX_TEXT_CHARS`, :data:`MAX_WORDS`,
:data:`MAX_WORD_CHARS`, which the explorer's API publishes). :func:`rotate_at` turns a vector with the
library's own RoPE at float64; :func:`wrap_angle` folds angles into (-pi, pi] (:func:`wrap_degrees`
the same in degrees); :func:`half_pairs` cuts a half-split vector into its rotation pairs;
:func:`angle_errors` measures how far a float32 cos/sin table is off when its angles are formed in a
low dtype.

Conventions: RoPE vectors use the half-split layout (pair ``i`` is ``(x[i], x[i + d/2])``); angles are
in radians; a positive angle turns counter-clockwise.
"""

from __future__ import annotations

import math
import zlib
from typing import Dict, List, Sequence

import torch

from ...rope.apply import apply_rotary
from ...rope.tables import rope_cos_sin

TWO_PI = 2 * math.pi

#: Longest text a learner may type (the fingerprint, word-order, bag and attention figures), in
#: characters and in words, and longest word.
MAX_TEXT_CHARS = 300
MAX_WORDS = 24
MAX_WORD_CHARS = 32


def split_words(text: str, name: str = "text") -> List[str]:
    """Whitespace-separated words of ``text``, refusing empty or oversized input."""
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a string, got {type(text).__name__}")
    if len(text) > MAX_TEXT_CHARS:
        raise ValueError(f"{name} must have at most {MAX_TEXT_CHARS} characters, got {len(text)}")
    words = text.split()
    if not words:
        raise ValueError(f"{name} must contain at least one word, got {text!r}")
    if len(words) > MAX_WORDS:
        raise ValueError(f"{name} must have at most {MAX_WORDS} words, got {len(words)}")
    for word in words:
        if len(word) > MAX_WORD_CHARS:
            raise ValueError(
                f"each word of {name} must have at most {MAX_WORD_CHARS} characters, "
                f"got {word[:MAX_WORD_CHARS]!r}... ({len(word)})"
            )
    return words


def example_vector(dim: int, seed: int) -> torch.Tensor:
    """A fixed pseudo-random float64 vector of shape (dim,), the same for the same seed."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(dim, generator=generator, dtype=torch.float64)


def word_vector(word: str, dim: int, salt: int = 0) -> torch.Tensor:
    """A fixed float64 vector per word (shape (dim,)), standing in for a learned embedding."""
    return example_vector(dim, (zlib.crc32(word.lower().encode("utf-8")) + salt) % (2**31))


def wrap_angle(angle: torch.Tensor) -> torch.Tensor:
    """Angles folded into (-pi, pi]."""
    wrapped = torch.remainder(angle + math.pi, TWO_PI) - math.pi
    return torch.where(wrapped == -math.pi, torch.full_like(wrapped, math.pi), wrapped)


def wrap_degrees(angle: float) -> float:
    """An angle in degrees folded into (-180, 180]."""
    wrapped = math.fmod(angle, 360.0)
    if wrapped > 180.0:
        wrapped -= 360.0
    elif wrapped <= -180.0:
        wrapped += 360.0
    return wrapped


def half_pairs(x: torch.Tensor) -> torch.Tensor:
    """The rotation pairs of a half-split vector: (head_dim,) -> (head_dim / 2, 2), row ``i`` being
    ``(x[i], x[i + head_dim / 2])``."""
    half = x.shape[-1] // 2
    return torch.stack((x[:half], x[half:]), dim=-1)


def rotate_at(x: torch.Tensor, positions: Sequence[int], inv_freq: torch.Tensor) -> torch.Tensor:
    """RoPE-rotate copies of ``x`` (shape (head_dim,)) to each position -> (len(positions), head_dim).

    Runs :func:`posenc.rope.apply.apply_rotary` on float64 tables from
    :func:`posenc.rope.tables.rope_cos_sin`, so the result is the library's rotation without float32
    rounding (the page compares scores that should agree to ~1e-15).
    """
    pos = torch.tensor(list(positions), dtype=torch.float64)
    cos, sin = rope_cos_sin(pos, inv_freq, dtype=torch.float64)  # (P, d/2)
    rows = x.to(torch.float64).expand(len(positions), -1).reshape(1, 1, len(positions), -1)
    rotated, _ = apply_rotary(rows, rows, cos, sin, layout="half")  # (1, 1, P, d)
    return rotated[0, 0]


#: the dtypes a naive table forms its angles in
_NAIVE_DTYPES: Dict[str, torch.dtype] = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def angle_errors(positions: torch.Tensor, inv_freq: torch.Tensor) -> Dict[str, torch.Tensor]:
    """|angle error| of a float32 cos/sin table, per position and pair (shape (P, d/2), float64).

    Every row ends in a float32 table, so they differ only in how the angle was formed. The naive
    rows form ``position * inv_freq`` with both in a low dtype (as code that builds positions in the
    input dtype does), then take cos/sin; the ``posenc`` row is posenc's own table
    (:func:`rope_cos_sin`, angles formed in float64). The angle each table encodes is read back with
    ``atan2`` and compared with the exact one. Positions a dtype cannot hold give ``inf``.
    """
    exact = positions.to(torch.float64).unsqueeze(-1) * inv_freq  # (P, d/2)

    def table_error(cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        recovered = torch.atan2(sin.to(torch.float64), cos.to(torch.float64))
        return wrap_angle(recovered - exact).abs()

    errors = {}
    for name, dtype in _NAIVE_DTYPES.items():
        naive = (positions.to(dtype).unsqueeze(-1) * inv_freq.to(dtype)).to(torch.float64)
        err = table_error(naive.cos().to(torch.float32), naive.sin().to(torch.float32))
        errors[name] = torch.where(torch.isfinite(naive), err, torch.full_like(err, math.inf))
    errors["posenc"] = table_error(*rope_cos_sin(positions, inv_freq, dtype=torch.float32))
    return errors


__all__ = [
    "MAX_TEXT_CHARS",
    "MAX_WORDS",
    "MAX_WORD_CHARS",
    "TWO_PI",
    "angle_errors",
    "example_vector",
    "half_pairs",
    "rotate_at",
    "split_words",
    "word_vector",
    "wrap_angle",
    "wrap_degrees",
]
