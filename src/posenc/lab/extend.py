"""Context extension of the trained RoPE model, without retraining and with a short fine-tune.

RoPE has no trained parameters, so extending a RoPE model means swapping its
:class:`~posenc.rope.RotaryEmbedding` for one whose frequencies are rescaled for a longer input
(``model.scheme = RotaryEmbedding(head_dim, base, scaling=...)``). For a target length ``L`` and
training length ``L0`` the static methods use ``factor = L / L0``:

=============  ===============================================================  ====================
method         scaling                                                          origin
=============  ===============================================================  ====================
none           plain RoPE, frequencies unchanged                                Su et al. 2021
linear         ``LinearScaling(factor)``: position interpolation                 Chen et al. 2023
ntk            ``NTKScaling(factor)``: NTK-aware base change                     bloc97 2023
dynamic_ntk    ``DynamicNTKScaling(2, L0)`` evaluated at the input length        emozilla 2023
yarn           ``YaRNScaling(factor, L0)`` (beta_fast 32, beta_slow 1)           Peng et al. 2023
llama3         ``Llama3Scaling(factor, 1, 4, L0)``                               Meta, Llama 3.1
=============  ===============================================================  ====================

Dynamic NTK does not know the target length: its configured factor stays fixed (2, a common choice)
and the NTK scale grows with the length it is given, ``s_eff = 2 L / L0 - 1``. The lab evaluates each
window in one forward pass, so the whole window is rotated with the frequencies of its own length:
exactly NTK with ``s_eff``, which is how it is built here (:func:`dynamic_effective_scaling`).

The fine-tune follows the position-interpolation paper: a few hundred steps of next-byte training at
the new length with the scaled frequencies, a small constant learning rate after a short warmup, and
the same data for every method.
"""

from __future__ import annotations

import copy

import numpy as np

from ..model import TinyLM
from ..rope import (DynamicNTKScaling, LinearScaling, Llama3Scaling, NTKScaling, RotaryEmbedding,
                    YaRNScaling)
from .config import LabConfig
from .distributed import Dist
from .train import make_optimizer, train_steps

#: The configured factor of dynamic NTK (Hugging Face examples use 2.0).
DYNAMIC_FACTOR = 2.0


def dynamic_effective_scaling(length: int, train_len: int) -> NTKScaling:
    """Static NTK equal to ``DynamicNTKScaling(DYNAMIC_FACTOR, train_len)`` at ``seq_len=length``."""
    length = max(length, train_len)
    return NTKScaling(DYNAMIC_FACTOR * length / train_len - (DYNAMIC_FACTOR - 1.0))


def scaling_for(method: str, length: int, train_len: int):
    """The scaling config of ``method`` for inputs of ``length`` bytes (``None`` for plain RoPE)."""
    factor = length / train_len
    if method == "none":
        return None
    if method == "linear":
        return LinearScaling(factor)
    if method == "ntk":
        return NTKScaling(factor)
    if method == "dynamic_ntk":
        DynamicNTKScaling(DYNAMIC_FACTOR, train_len).validate(None)
        return dynamic_effective_scaling(length, train_len)
    if method == "yarn":
        return YaRNScaling(factor, train_len, beta_fast=32.0, beta_slow=1.0)
    if method == "llama3":
        return Llama3Scaling(factor, 1.0, 4.0, train_len)
    raise ValueError(f"method must be one of none, linear, ntk, dynamic_ntk, yarn, llama3; "
                     f"got {method!r}")


def extended_model(rope_model: TinyLM, method: str, length: int, train_len: int) -> TinyLM:
    """A copy of the trained RoPE model whose rotary embedding is rescaled for ``length``."""
    old = rope_model.scheme
    if not isinstance(old, RotaryEmbedding):
        raise TypeError(f"context extension needs a RoPE model, got scheme {type(old).__name__}")
    model = copy.deepcopy(rope_model)
    model.scheme = RotaryEmbedding(old.head_dim, base=old.base, rotary_dim=old.rotary_dim,
                                   layout=old.layout, scaling=scaling_for(method, length, train_len),
                                   max_position_embeddings=length)
    device = next(rope_model.parameters()).device
    return model.to(device)


def finetune(model: TinyLM, train: np.ndarray, cfg: LabConfig, length: int, *, device,
             d: Dist = Dist(), on_step=None) -> TinyLM:
    """Fine-tune ``model`` in place for ``cfg.finetune_steps`` steps at ``length``.

    The data order depends on the seed and the length only, so every method sees the same bytes.
    """
    optimizer = make_optimizer(model, cfg.finetune_lr, cfg.weight_decay)
    train_steps(model, optimizer, train, start=0, total=cfg.finetune_steps, length=length,
                batch=cfg.finetune_batch, lr=cfg.finetune_lr,
                warmup=max(1, cfg.finetune_steps // 10), min_ratio=1.0, grad_clip=cfg.grad_clip,
                seed=cfg.seed * 1_000_003 + length, device=device, d=d, on_step=on_step)
    return model
