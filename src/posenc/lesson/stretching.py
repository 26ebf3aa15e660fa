"""When a stretched RoPE model meets angles it never saw in training.

A RoPE model trained on ``trained_len`` tokens turned pair ``i`` by ``theta_i`` per seat, so over its
training texts the pair swept the angles ``0 .. trained_len * theta_i`` (one step past the last seat,
``trained_len - 1``). A pair that went round at least once in training (``trained_len * theta_i >=
2 pi``) has seen every angle. Any other pair is **past training** at ``length`` tokens when, with the
frequencies a scaling gives it, the last seat's angle ``(length - 1) * theta'_i`` is larger than
``trained_len * theta_i``: the model would read an angle that never occurred in training.

Plain RoPE puts every partial-turn pair past training as soon as the text is longer; linear scaling
(position interpolation) by ``length / trained_len`` puts none there; NTK-aware scaling leaves some of
the slow pairs past it (slowed too little); YaRN slows the slow pairs by the full factor. The tour
(``posenc tour --section extension``) and the explorer's lesson (chapter "Stretching RoPE") count with
:func:`past_training`.
"""

from __future__ import annotations

import math

import torch

from .._checks import check_int, check_tensor


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
        bool tensor (pairs,): ``True`` where the pair is past training.
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
    partial_turn = seen < 2 * math.pi
    overshoot = (length - 1) * inv_freq.double() > seen
    return partial_turn & overshoot


__all__ = ["past_training"]
