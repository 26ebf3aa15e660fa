"""The numbers behind each view of the explorer, computed by posenc's own functions.

Every function here takes plain Python values that the API has already range-checked against
:mod:`posenc.teaching.explorer.limits`, calls the library (``sinusoidal_table``, ``rope_inv_freq``,
``rope_cos_sin``, ``apply_rotary``, ``alibi_slopes``, ``alibi_bias`` ...), and returns a dict that
is ready to be sent as JSON. Nothing is recomputed in the browser: the page only draws these numbers,
so a picture can never drift from the mathematics it claims to show. Words, example vectors and turns
are :mod:`posenc.teaching.lesson.vectors`' (the lesson's figures and checks use the same ones), and what a view
shares with a lesson chapter is computed by the lesson's one function: the dials and the word-order
proof by :mod:`posenc.teaching.lesson.rotation` (as chapter "RoPE" draws them), a table cell's hand by
:func:`posenc.teaching.lesson.chapters.clock_hands.wave_hand`.

Conventions: RoPE vectors use the half-split layout (pair ``i`` is ``(x[i], x[i + d/2])``), the one
Hugging Face uses; angles are in radians unless a key says ``_deg``. Positive angles turn
counter-clockwise, as RoPE's matrix ``(a, b) -> (a cos - b sin, a sin + b cos)`` does, and a relative
angle is the query's turn minus the key's, ``(query seat - key seat) * theta``: positive when the query
sits after the key (the convention ``posenc tour`` uses too). ``-inf`` entries of a causal
mask are sent as ``null`` because JSON has no infinities.
"""

from __future__ import annotations

import math
from typing import List, Optional, Sequence

import torch

from ..._checks import check_float, check_int
from ...alibi import alibi_bias, alibi_slopes
from ...rope.tables import rope_angles, rope_inv_freq
from ...sinusoidal import sinusoidal_frequencies, sinusoidal_table
from ..lesson.chapters.clock_hands import wave_hand
from ..lesson.chapters.rope import ORDER_VECTORS
from ..lesson.rotation import order_turn, turn_dials
from ..lesson.vectors import (
    TWO_PI,
    angle_errors,
    example_vector,
    half_pairs,
    rotate_at,
    split_words,
    word_vector,
    wrap_angle,
)
from .limits import MAX_SCORE_POINTS


# -- shared pieces -------------------------------------------------------------------------------
def _masked(matrix: torch.Tensor) -> List[List[Optional[float]]]:
    return [[None if math.isinf(v) else v for v in row] for row in matrix.tolist()]


# -- 1. wave fingerprint ---------------------------------------------------------------------------
def sinusoidal_view(length: int, d_model: int, base: float) -> dict:
    """The sinusoidal table (length x d_model, float32 as the module stores it) and its waves."""
    table = sinusoidal_table(length, d_model, base)  # (L, d)
    freqs = sinusoidal_frequencies(d_model, base)  # (ceil(d/2),)
    return {
        "length": length,
        "d_model": d_model,
        "base": base,
        "table": table.tolist(),
        "frequencies": freqs.tolist(),
        "wavelengths": (TWO_PI / freqs).tolist(),
        "min": float(table.min()),
        "max": float(table.max()),
    }


def sinusoidal_cell(pos: int, dim: int, d_model: int, base: float) -> dict:
    """Everything needed to fill in the formula of one table cell with real numbers."""
    check_int("dim", dim, minimum=0, maximum=d_model - 1)
    pair = dim // 2
    hand = wave_hand(pos, pair, d_model, base)  # the lesson's clock hands read the same
    freq = hand["frequency"]
    return {
        "pos": pos,
        "dim": dim,
        "pair": pair,
        "d_model": d_model,
        "base": base,
        "function": "sin" if dim % 2 == 0 else "cos",
        "exponent": 2 * pair / d_model,
        "denominator": base ** (2 * pair / d_model),
        "frequency": freq,
        "wavelength": hand["wavelength"],
        "angle": hand["angle"],
        "angle_reduced": hand["angle_reduced"],
        "value": hand["sin" if dim % 2 == 0 else "cos"],
    }


def fingerprint_view(text: str, d_model: int, base: float) -> dict:
    """One position vector per word of ``text`` (its seat), and the distance between every two seats.

    The distance matrix shows two of the three properties at once: no two seats share a vector
    (off-diagonal entries are > 0), and the distance between seats ``p`` and ``p + k`` does not depend
    on ``p`` (every diagonal of the matrix is constant).
    """
    words = split_words(text)
    table = sinusoidal_table(len(words), d_model, base).to(torch.float64)  # (W, d)
    dist = torch.cdist(table, table)  # (W, W)
    return {
        "words": words,
        "d_model": d_model,
        "base": base,
        "vectors": table.to(torch.float32).tolist(),
        "distances": dist.tolist(),
    }


# -- 2. RoPE clock dials ---------------------------------------------------------------------------
def dial_vectors(head_dim: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The dials' query and key, each (head_dim,) float64: fixed example vectors of ``seed``."""
    return example_vector(head_dim, seed), example_vector(head_dim, seed + 10_000)


def order_vectors(query_word: str, key_word: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The word-order proof's 2-D query and key: each word's fixed vector (the query salted 1, the key 2)."""
    return word_vector(query_word, 2, salt=1), word_vector(key_word, 2, salt=2)


def rope_dials(head_dim: int, base: float, q_pos: int, k_pos: int, offset: int, seed: int) -> dict:
    """Per-pair angles and 2-D vectors of a query and a key, before and after moving both by ``offset``.

    The query and key are fixed example vectors (``seed``). Pair ``i`` turns by ``theta_i`` per seat;
    the angle between the query's and the key's hands is ``(q_pos - k_pos) * theta_i`` and the score
    ``q' . k'`` depends on nothing else, so it is the same at ``(q_pos + offset, k_pos + offset)``.

    ``q_pairs_unrotated`` / ``k_pairs_unrotated`` are the pairs before any turn (the dials' ghost
    hands); ``q_turn_deg`` / ``k_turn_deg`` are the turns ``m * theta_i`` and ``n * theta_i`` at the
    moved seats ``m = q_pos + offset``, ``n = k_pos + offset``, in [0, 360) degrees (counter-clockwise).
    """
    check_int("head_dim", head_dim, minimum=2, even=True)
    inv_freq = rope_inv_freq(head_dim, base)  # (d/2,) float64
    q, k = dial_vectors(head_dim, seed)
    turn = turn_dials(q, k, q_pos, k_pos, offset, inv_freq)  # the lesson's RoPE dials compute the same
    angles = rope_angles(torch.tensor([q_pos, k_pos, q_pos + offset, k_pos + offset]), inv_freq)  # (4, d/2) in [0, 2pi)
    relative = wrap_angle(turn.gap_angle)

    def pairs(v: torch.Tensor) -> List[List[float]]:  # (d,) -> d/2 x [a, b]
        return half_pairs(v).tolist()

    return {
        "head_dim": head_dim,
        "base": base,
        "q_pos": q_pos,
        "k_pos": k_pos,
        "offset": offset,
        "seed": seed,
        "layout": "half",
        "theta": inv_freq.tolist(),
        "theta_deg": torch.rad2deg(inv_freq).tolist(),
        "wavelength": (TWO_PI / inv_freq).tolist(),
        "q_angle": angles[0].tolist(),
        "k_angle": angles[1].tolist(),
        "q_angle_moved": angles[2].tolist(),
        "k_angle_moved": angles[3].tolist(),
        "relative_angle": relative.tolist(),
        "relative_angle_deg": torch.rad2deg(relative).tolist(),
        "q_pairs": pairs(turn.q_rot[0]),
        "k_pairs": pairs(turn.k_rot[0]),
        "q_pairs_unrotated": pairs(q),
        "k_pairs_unrotated": pairs(k),
        "q_turn_deg": torch.rad2deg(angles[2]).tolist(),
        "k_turn_deg": torch.rad2deg(angles[3]).tolist(),
        "q_pairs_moved": pairs(turn.q_rot[1]),
        "k_pairs_moved": pairs(turn.k_rot[1]),
        "pair_scores": turn.pair_scores[0].tolist(),
        "pair_scores_moved": turn.pair_scores[1].tolist(),
        "score": turn.scores[0],
        "score_moved": turn.scores[1],
        "score_unrotated": turn.score_unrotated,
    }


def word_order_view(text_a: str, text_b: str, query_word: str, key_word: str, degrees: float) -> dict:
    """The "dog bites man" / "man bites dog" proof on a one-pair RoPE clock.

    One rotation pair turning ``degrees`` per seat (``inv_freq = radians(degrees)``), as in a
    2-D drawing. Each word gets a fixed 2-D content vector. Without positions the score of
    ``query_word`` attending to ``key_word`` is the same in both sentences (same two vectors); with
    RoPE it depends on the signed seat difference, whose angle flips sign when the words swap places.

    ``relative_angle_deg`` is the turn from the key's hand to the query's,
    ``(query seat - key seat) * degrees``, counter-clockwise positive: for "dog bites man" with query
    "bites" and key "dog" it is +degrees, the tour's "dog to bit" angle for its sentence A.

    ``score_rope_lesson`` scores the lesson's fixed pair (``lesson_q`` against ``lesson_k``, the vectors
    ch. 7 uses) at the same seats: the page prints it beside the words' own score, so a learner sees that
    the two differ only in the vectors, and at ch. 7's +30/-30 degrees it is ch. 7's printed score.
    """
    check_float("degrees", degrees, minimum=1.0, maximum=179.0)
    inv_freq = torch.tensor([math.radians(degrees)], dtype=torch.float64)
    q, k = order_vectors(query_word, key_word)
    lesson_q, lesson_k = (torch.tensor(v, dtype=torch.float64) for v in ORDER_VECTORS)
    sentences = []
    for name, text in (("text_a", text_a), ("text_b", text_b)):
        words = split_words(text, name)
        lowered = [w.lower() for w in words]
        for role, word in (("query_word", query_word), ("key_word", key_word)):
            if word.lower() not in lowered:
                raise ValueError(f"{role} {word!r} does not occur in {name} {text!r}")
        qi, ki = lowered.index(query_word.lower()), lowered.index(key_word.lower())
        seat_angles = rope_angles(torch.arange(len(words)), inv_freq)[:, 0]  # (W,)
        turn = order_turn(q, k, qi, ki, degrees)  # the lesson's "who bit whom" clock computes the same
        sentences.append(
            {
                "text": text,
                "words": words,
                "seat_angles_deg": torch.rad2deg(seat_angles).tolist(),
                "query_seat": qi,
                "key_seat": ki,
                "query_minus_key_seats": qi - ki,
                "relative_angle_deg": turn["relative_angle_deg"],
                "score_rope": turn["score_rope"],
                "score_nope": turn["score_nope"],
                "score_rope_lesson": order_turn(lesson_q, lesson_k, qi, ki, degrees)["score_rope"],
                "q_rotated": turn["q_rotated"].tolist(),
                "k_rotated": turn["k_rotated"].tolist(),
            }
        )
    return {
        "degrees": degrees,
        "query_word": query_word,
        "key_word": key_word,
        "q": q.tolist(),
        "k": k.tolist(),
        "lesson_q": lesson_q.tolist(),
        "lesson_k": lesson_k.tolist(),
        "sentences": sentences,
    }


# -- 3. score vs relative distance ------------------------------------------------------------------
def _rope_decay(head_dim: int, base: float, distances: List[int]) -> torch.Tensor:
    """``q' . k' / head_dim`` for ``q = k = ones``, query at each distance, key at 0 -> (D,)."""
    inv_freq = rope_inv_freq(head_dim, base)
    ones = torch.ones(head_dim, dtype=torch.float64)
    q_rot = rotate_at(ones, distances, inv_freq)  # (D, hd)
    k_rot = rotate_at(ones, [0], inv_freq)[0]  # (hd,)
    return (q_rot @ k_rot) / head_dim


#: ``score_distances`` keeps every distance up to this one, then spaces the rest geometrically.
DENSE_DISTANCES = 128


def octave_means(values: torch.Tensor, at: Sequence[int]) -> torch.Tensor:
    """Mean of ``values[j]`` over ``d / sqrt(2) <= j <= d * sqrt(2)`` for each ``d`` in ``at`` -> (len(at),).

    ``values`` holds one number per distance ``0..len - 1``. The window is one octave wide around ``d``
    (the same width everywhere on a log-distance axis); at ``d = 0`` it is just distance 0.
    """
    n = values.shape[0]
    prefix = torch.cat((values.new_zeros(1), values.cumsum(0)))  # (n + 1,)
    d = torch.tensor(list(at), dtype=torch.float64)
    lo = torch.ceil(d / math.sqrt(2)).long().clamp(0, n - 1)
    hi = torch.floor(d * math.sqrt(2)).long().clamp(0, n - 1)
    hi = torch.maximum(hi, lo)
    return (prefix[hi + 1] - prefix[lo]) / (hi - lo + 1).to(values.dtype)


def score_distances(max_distance: int, points: int = MAX_SCORE_POINTS) -> List[int]:
    """Every distance ``0..max_distance`` if there are at most ``points``; else every distance up to
    :data:`DENSE_DISTANCES` and geometrically spaced ones after it (``max_distance`` included), so the
    response stays the same size however far it reaches and a log-distance axis is evenly covered."""
    if max_distance + 1 <= points:
        return list(range(max_distance + 1))
    dense = list(range(DENSE_DISTANCES + 1))
    rest = points - len(dense)
    grid = (
        torch.logspace(math.log10(DENSE_DISTANCES), math.log10(max_distance), rest + 1, dtype=torch.float64)
        .round()
        .long()
    )
    return sorted(set(dense) | set(grid.tolist()) | {max_distance})


def scores_view(
    head_dim: int,
    base: float,
    d_model: int,
    sin_base: float,
    heads: int,
    max_distance: int,
    compare_base: Optional[float] = None,
) -> dict:
    """How each scheme's score between two positions changes with their distance ``0..max_distance``.

    Sampled at :func:`score_distances` (at most :data:`MAX_SCORE_POINTS` distances); the values at the
    sampled distances are exact.

    * RoPE: ``q' . k'`` for ``q = k = ones(head_dim)``, query at position ``d``, key at 0, divided by
      ``head_dim`` (so distance 0 gives 1). This is the long-range decay curve of RoFormer section
      3.4.3: the sum of ``cos(d * theta_i)`` over pairs, which shrinks (with ripples) as ``d`` grows.
    * sinusoidal: ``PE[d] . PE[0] / (d_model / 2)``, the similarity of two position vectors.
    * ALiBi: the bias each head adds at distance ``d``, ``-slope_h * d``.

    ``compare_base`` adds the RoPE curve for a second base (``rope_compare``), to see how a larger
    ``rope_theta`` stretches the decay over longer distances. ``rope_trend`` is the RoPE curve
    averaged over one octave of distances around each sampled one (:func:`octave_means` of the exact
    score at every distance), which shows the decay under the ripples of the fast pairs.
    """
    check_int("head_dim", head_dim, minimum=2, even=True)
    distances = score_distances(max_distance)
    index = torch.tensor(distances)  # (P,)
    rope = _rope_decay(head_dim, base, distances)  # (P,)
    trend = octave_means(_rope_decay(head_dim, base, list(range(max_distance + 1))), distances)  # (P,)
    compare = None if compare_base is None else _rope_decay(head_dim, compare_base, distances).tolist()
    table = sinusoidal_table(max_distance + 1, d_model, sin_base, dtype=torch.float64)[index]  # (P, d)
    sinus = (table @ table[0]) / (d_model / 2)  # (P,)
    slopes = alibi_slopes(heads)
    bias = alibi_bias(slopes, torch.tensor([max_distance]), max_distance - index)[:, 0, :]  # (H, P)
    return {
        "head_dim": head_dim,
        "base": base,
        "d_model": d_model,
        "sin_base": sin_base,
        "heads": heads,
        "max_distance": max_distance,
        "distances": distances,
        "rope": rope.tolist(),
        "rope_trend": trend.tolist(),
        "sinusoidal": sinus.tolist(),
        "compare_base": compare_base,
        "rope_compare": compare,
        "alibi_slopes": slopes.tolist(),
        "alibi": bias.tolist(),
    }


# -- 5. ALiBi beside RoPE ----------------------------------------------------------------------------
def alibi_view(heads: int, head: int, matrix_len: int, head_dim: int, base: float, seed: int) -> dict:
    """ALiBi's bias matrix for one head and all slopes, beside a RoPE score matrix of the same size.

    The RoPE matrix puts the same content vector at every position, so every entry is
    ``x' (at i) . x' (at j) / sqrt(head_dim)`` and depends only on ``i - j``: its diagonals are
    constant, like ALiBi's. Entries above the diagonal are masked (causal) and sent as ``null``.
    """
    check_int("head", head, minimum=0, maximum=heads - 1)
    check_int("head_dim", head_dim, minimum=2, even=True)
    slopes = alibi_slopes(heads)
    pos = torch.arange(matrix_len)
    bias = alibi_bias(slopes, pos, pos)  # (H, L, L)
    x = example_vector(head_dim, seed)
    rotated = rotate_at(x, range(matrix_len), rope_inv_freq(head_dim, base))  # (L, hd)
    scores = rotated @ rotated.T / math.sqrt(head_dim)  # (L, L)
    scores = scores.masked_fill(pos.unsqueeze(0) > pos.unsqueeze(1), float("-inf"))
    return {
        "heads": heads,
        "head": head,
        "matrix_len": matrix_len,
        "head_dim": head_dim,
        "base": base,
        "seed": seed,
        "slopes": slopes.tolist(),
        "slopes_log2": torch.log2(slopes).tolist(),
        "bias": _masked(bias[head]),
        "rope_scores": _masked(scores),
    }


# -- 6. precision ------------------------------------------------------------------------------------
def _position_grid(max_position: int, points: int = 48) -> List[int]:
    grid = torch.logspace(0, math.log10(max_position), points, dtype=torch.float64).round().long()
    return sorted(set(grid.tolist()) | {max_position})


def precision_view(head_dim: int, base: float, max_position: int, pos: int) -> dict:
    """Worst RoPE angle error over the pairs at positions up to ``max_position``, per dtype.

    Also the per-pair errors at the single position ``pos``. ``null`` marks positions that a dtype
    cannot hold at all (float16 overflows past 65504).
    """
    check_int("head_dim", head_dim, minimum=2, even=True)
    inv_freq = rope_inv_freq(head_dim, base)
    grid = _position_grid(max_position)
    errors = angle_errors(torch.tensor(grid, dtype=torch.int64), inv_freq)
    at_pos = angle_errors(torch.tensor([pos], dtype=torch.int64), inv_freq)

    def finite(values: List[float]) -> List[Optional[float]]:
        return [v if math.isfinite(v) else None for v in values]

    return {
        "head_dim": head_dim,
        "base": base,
        "max_position": max_position,
        "pos": pos,
        "positions": grid,
        "max_error": {name: finite(err.max(dim=-1).values.tolist()) for name, err in errors.items()},
        "at_pos": {name: finite(err[0].tolist()) for name, err in at_pos.items()},
        "theta": inv_freq.tolist(),
    }
