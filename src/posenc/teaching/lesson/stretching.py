"""When a stretched RoPE model meets angles it never saw in training.

A RoPE model trained on ``trained_len`` tokens turned pair ``i`` by ``theta_i`` per seat, so over its
training texts (seats ``0 .. trained_len - 1``) the pair swept the angles ``0 .. (trained_len - 1) *
theta_i`` in steps of ``theta_i``. The bound used here is one step further, ``trained_len * theta_i``:
the model only ever saw whole seats, so an angle less than one step past the last one it saw is no
farther from it than two neighbouring seats are from each other, and counts as seen. A pair with
``trained_len * theta_i >= 2 pi`` has come within one step of every angle; the others turned only part
of a circle (:func:`partial_turn`). Such a pair is **past training** at ``length`` tokens when, with
the frequencies a scaling gives it, the last seat's angle ``(length - 1) * theta'_i`` is larger than
``trained_len * theta_i``: the model would read an angle that never occurred in training. Linear
scaling by ``length / trained_len`` ends just inside the bound: its last angle ``(length - 1) *
theta_i * trained_len / length`` lies between ``(trained_len - 1) * theta_i`` and ``trained_len *
theta_i``.

Plain RoPE puts every partial-turn pair past training as soon as the text is longer; linear scaling
(position interpolation) by ``length / trained_len`` puts none there; NTK-aware scaling leaves some of
the slow pairs past it (slowed too little); YaRN slows the slow pairs by the full factor. The tour
(``posenc tour --section extension``) and the explorer's lesson (chapter "Stretching RoPE") count with
:func:`past_training`.

The scalings built from a ramp (YaRN, Llama 3) split the pairs three ways by the ratio new / old
frequency: *kept* (ratio 1), *divided* by the factor (ratio 1 / factor) and *blended* between;
:func:`band_masks` is that split, for the lesson's chapter, the tour and the explorer's wavelength view.
"""

from __future__ import annotations

import math
from typing import Optional, Tuple

import torch

from ..._checks import check_int, check_tensor

#: how far a pair's ratio new / old frequency may be from 1 (kept) or 1 / factor (divided) and count as it
BAND_TOLERANCE = 1e-9


def partial_turn(trained_inv_freq: torch.Tensor, trained_len: int) -> torch.Tensor:
    """Which pairs turned less than once over ``trained_len`` tokens, ``trained_len * theta_i < 2 pi``:
    bool tensor (pairs,). The other pairs have seen every angle in training."""
    check_tensor("trained_inv_freq", trained_inv_freq, ndim=1, floating=True)
    check_int("trained_len", trained_len, minimum=1)
    return trained_len * trained_inv_freq.double() < 2 * math.pi


def band_masks(ratio: torch.Tensor, factor: Optional[float]) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Split pairs by ``ratio`` = new / old frequency (shape (pairs,)) into ``(kept, divided, blended)``
    bool masks: kept where the ratio is 1, divided where it is ``1 / factor`` (only for a factor above
    1), blended elsewhere, each within :data:`BAND_TOLERANCE`."""
    check_tensor("ratio", ratio, ndim=1, floating=True)
    kept = (ratio - 1).abs() <= BAND_TOLERANCE
    if factor is not None and factor > 1:
        divided = (ratio * factor - 1).abs() <= BAND_TOLERANCE
    else:
        divided = torch.zeros_like(kept)
    return kept, divided, ~(kept | divided)


def past_training(
    inv_freq: torch.Tensor, trained_inv_freq: torch.Tensor, trained_len: int, length: int
) -> torch.Tensor:
    """Which pairs meet angles never seen in training when ``length`` tokens are read.

    Args:
        inv_freq: (pairs,) the frequencies used now (after a scaling), radians per seat.
        trained_inv_freq: (pairs,) the frequencies the model was trained with.
        trained_len: the training context length, in tokens.
        length: the length read now, in tokens.

    Returns:
        bool tensor (pairs,): ``True`` where the pair turned less than once in training and its angle at the
        last seat, ``(length - 1) * inv_freq``, is larger than ``trained_len * trained_inv_freq`` (one step
        past the last trained seat: an angle within one step of the last one seen counts as seen).
    """
    check_tensor("inv_freq", inv_freq, ndim=1, floating=True)
    check_tensor("trained_inv_freq", trained_inv_freq, ndim=1, floating=True)
    if inv_freq.shape != trained_inv_freq.shape:
        raise ValueError(
            f"inv_freq and trained_inv_freq must have the same shape, got {tuple(inv_freq.shape)} "
            f"and {tuple(trained_inv_freq.shape)}"
        )
    check_int("trained_len", trained_len, minimum=1)
    check_int("length", length, minimum=1)
    seen = trained_len * trained_inv_freq.double()  # (pairs,) the angles swept in training
    overshoot = (length - 1) * inv_freq.double() > seen
    return partial_turn(trained_inv_freq, trained_len) & overshoot


__all__ = ["BAND_TOLERANCE", "band_masks", "partial_turn", "past_training"]
