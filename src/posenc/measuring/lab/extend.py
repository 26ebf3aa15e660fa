"""Context extension of the trained RoPE model, without retraining and with a short fine-tune.

RoPE has no trained parameters, so extending a RoPE model means swapping its
:class:`~posenc.rope.RotaryEmbedding` for one whose frequencies are rescaled for a longer input
(``model.scheme = RotaryEmbedding(head_dim, base, scaling=...)``). The methods are ``none`` (plain
RoPE) and every rope type of the scaling registry that an extension ratio sets
(:func:`posenc.rope.registry.extension_types`), named as the rope type is. For a target length ``L``
and training length ``L0`` the config is the one every measuring app uses,
:func:`posenc.runs.extension.extension_config`, and :func:`method_table` lists them. posenc's own
types give, with ``factor = L / L0``: ``linear`` ->
``LinearScaling(factor)`` (position interpolation), ``ntk`` -> ``NTKScaling(factor)``, ``dynamic`` ->
``DynamicNTKScaling(2, L0)`` frozen at ``L``, ``yarn`` -> ``YaRNScaling(factor, L0)`` (beta_fast 32,
beta_slow 1), ``llama3`` -> ``Llama3Scaling(factor, 1, 4, L0)``. Dynamic NTK was called
``dynamic_ntk`` here before; it now has its rope type's name.

Dynamic NTK does not know the target length: its configured factor stays fixed (2, a common choice)
and the NTK scale grows with the length it is given, ``s_eff = 2 L / L0 - 1``. The lab evaluates each
window in one forward pass, so the whole window is rotated with the frequencies of its own length. Every
length-dependent scaling is therefore frozen at ``L`` (:meth:`RotaryEmbedding.freeze_frequencies`):
for dynamic NTK that is exactly NTK with ``s_eff`` (:func:`dynamic_effective_scaling`), served from the
cached tables.

The fine-tune follows the position-interpolation paper: a few hundred steps of next-byte training at
the new length with the scaled frequencies, a small constant learning rate after a short warmup, and
the same data for every method.
"""

from __future__ import annotations

import copy
from typing import List, Tuple

import numpy as np

from ...model import TinyLM
from ...rope import NTKScaling, RotaryEmbedding
from ...rope.registry import REGISTRY, extension_types
from ...runs.extension import ADAPTIVE_FACTOR, extension_config
from .config import LabConfig
from .distributed import Dist
from .train import make_optimizer, train_steps

#: The configured factor of dynamic NTK (Hugging Face examples use 2.0).
DYNAMIC_FACTOR = ADAPTIVE_FACTOR
#: the method that leaves plain RoPE in place
NO_EXTENSION = "none"


def method_names() -> Tuple[str, ...]:
    """Every method ``scaling_for`` accepts: ``none`` and the registered types an extension ratio sets."""
    return (NO_EXTENSION,) + extension_types()


def method_table(length: int, train_len: int) -> List[Tuple[str, object]]:
    """``[(method, scaling config or None)]`` for an extension from ``train_len`` to ``length``."""
    return [(name, scaling_for(name, length, train_len)) for name in method_names()]


def dynamic_effective_scaling(length: int, train_len: int) -> NTKScaling:
    """Static NTK equal to ``DynamicNTKScaling(DYNAMIC_FACTOR, train_len)`` at ``seq_len=length``."""
    length = max(length, train_len)
    return NTKScaling(DYNAMIC_FACTOR * length / train_len - (DYNAMIC_FACTOR - 1.0))


def scaling_for(method: str, length: int, train_len: int):
    """The scaling config of ``method`` for inputs of ``length`` bytes (``None`` for plain RoPE)."""
    if method == NO_EXTENSION:
        return None
    descriptor = REGISTRY.get(method) if isinstance(method, str) else None
    if descriptor is None or descriptor.extension is None:
        hint = " ('dynamic_ntk' is now spelt 'dynamic')" if method == "dynamic_ntk" else ""
        raise ValueError(f"method must be one of {', '.join(method_names())}; got {method!r}{hint}")
    return extension_config(descriptor, length, train_len)


def extended_model(rope_model: TinyLM, method: str, length: int, train_len: int) -> TinyLM:
    """A copy of the trained RoPE model whose rotary embedding is rescaled for ``length``.

    Length-dependent scalings are frozen at ``length``: each evaluation window is one pass over
    ``length`` tokens, which is the length they would pick themselves.
    """
    old = rope_model.scheme
    if not isinstance(old, RotaryEmbedding):
        raise TypeError(f"context extension needs a RoPE model, got scheme {type(old).__name__}")
    model = copy.deepcopy(rope_model)
    model.scheme = RotaryEmbedding(
        old.head_dim,
        base=old.base,
        rotary_dim=old.rotary_dim,
        layout=old.layout,
        scaling=scaling_for(method, length, train_len),
        max_position_embeddings=length,
    )
    if model.scheme.is_dynamic:
        model.scheme.freeze_frequencies(length)
    device = next(rope_model.parameters()).device
    return model.to(device)


def finetune(
    model: TinyLM, train: np.ndarray, cfg: LabConfig, length: int, *, device, d: Dist = Dist(), on_step=None
) -> TinyLM:
    """Fine-tune ``model`` in place for ``cfg.finetune_steps`` steps at ``length``.

    The data order depends on the seed and the length only, so every method sees the same bytes.
    ``cfg.finetune_retrieval_share`` of the steps (0 by default: plain text, the position-
    interpolation paper's recipe) are passkey sequences at ``length``, with the run's answer weight.
    """
    optimizer = make_optimizer(model, cfg.finetune_lr, cfg.weight_decay)
    train_steps(
        model,
        optimizer,
        train,
        start=0,
        total=cfg.finetune_steps,
        length=length,
        batch=cfg.finetune_batch,
        lr=cfg.finetune_lr,
        warmup=max(1, cfg.finetune_steps // 10),
        min_ratio=1.0,
        grad_clip=cfg.grad_clip,
        seed=cfg.seed * 1_000_003 + length,
        device=device,
        d=d,
        on_step=on_step,
        retrieval_share=cfg.finetune_retrieval_share,
        answer_weight=cfg.retrieval_answer_weight,
    )
    return model
