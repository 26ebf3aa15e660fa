"""torchtune: the RoPE module its component builders construct for the model family.

torchtune builds models from its own builders, not from ``config.json``; the mapping follows
them (``torchtune/models/*/_component_builders.py``, 0.6.1):

* Llama 3.1 / 3.2 / 3.3 (``rope_type: llama3``): ``Llama3ScaledRoPE(dim=head_dim,
  max_seq_len=max_seq_len, base=rope_base, scale_factor=scale_factor)``: only ``rope_theta`` and
  ``factor`` reach it; ``low_freq_factor``, ``high_freq_factor`` and
  ``original_max_position_embeddings`` keep the class defaults 1, 4 and 8192;
* Llama 2 / 3, Code Llama, Mistral (no scaling): ``RotaryPositionalEmbeddings(dim=head_dim,
  max_seq_len=max_seq_len, base=rope_base)``;
* Qwen2 / 2.5: ``Qwen2RotaryPositionalEmbeddings(dim, max_seq_len, base)``; Phi-3:
  ``Phi3RotaryPositionalEmbeddings(dim, max_seq_len, base)`` (both half-split, no scaling).

``max_seq_len`` is the config's ``max_position_embeddings``. The Llama and Mistral modules rotate
adjacent pairs: torchtune's ``convert_weights.hf_to_tune`` permutes the Hugging Face q/k
projections into that order, so the adapter permutes q and k the same way, rotates, and permutes
back. Every other rope type (YaRN, LongRoPE, linear, dynamic), partial rotary and families
torchtune has no builder for are not supported. No softmax factor: torchtune's attention scales by
``head_dim ** -0.5``.
"""

from __future__ import annotations

from typing import Any, Dict, Tuple

import torch

from .common import (
    PerConfig,
    declare,
    half_to_pairs,
    head_dim,
    pairs_to_half,
    partial_factor,
    rope_type,
    theta,
    unsupported_reason,
)

PAIRED = ("llama", "mistral")  # builders whose RoPE rotates adjacent pairs (hf_to_tune permutes)


def _module(config: Dict[str, Any]):
    if config.get("rope_interleave") and config.get("model_type") not in ("deepseek_v2", "deepseek_v3"):
        raise NotImplementedError(
            f"not supported: torchtune's {config.get('model_type')} builder does not read rope_interleave"
        )
    family, kind = config.get("model_type"), rope_type(config)
    dim, length, base = head_dim(config), int(config.get("max_position_embeddings", 4096)), theta(config)
    if partial_factor(config) != 1.0:
        raise NotImplementedError("not supported: torchtune's RoPE modules rotate the whole head")
    if family == "llama" and kind == "llama3":
        from torchtune.models.llama3_1 import Llama3ScaledRoPE

        factor = config.get("rope_parameters", config.get("rope_scaling"))["factor"]
        return Llama3ScaledRoPE(dim=dim, max_seq_len=length, base=base, scale_factor=factor), True
    if kind != "default":
        raise NotImplementedError(f"not supported: torchtune has no {kind!r} rope for {family!r}")
    if family in PAIRED:
        from torchtune.modules import RotaryPositionalEmbeddings

        return RotaryPositionalEmbeddings(dim=dim, max_seq_len=length, base=base), True
    if family == "qwen2":
        from torchtune.models.qwen2._positional_embeddings import Qwen2RotaryPositionalEmbeddings

        return Qwen2RotaryPositionalEmbeddings(dim=dim, max_seq_len=length, base=base), False
    if family == "phi3":
        from torchtune.models.phi3._position_embeddings import Phi3RotaryPositionalEmbeddings

        return Phi3RotaryPositionalEmbeddings(dim=dim, max_seq_len=length, base=base), False
    raise NotImplementedError(f"not supported: torchtune has no builder for {family!r}")


_MODULE = PerConfig(_module)


def rotate(config: Dict[str, Any], q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor) -> Tuple:
    rope, paired = _MODULE(config)
    ids = positions[None]  # (1, tokens): input_pos
    out = []
    for x in (q, k):
        x = half_to_pairs(x) if paired else x
        y = rope(x[None], input_pos=ids)[0]  # torchtune: (batch, seq, heads, head_dim)
        out.append(pairs_to_half(y) if paired else y)
    return out[0], out[1]


def _version() -> str:
    from importlib.metadata import version

    return version("torchtune")


declare(
    rotate,
    "torchtune",
    _version(),
    lambda config: unsupported_reason(_MODULE, config),
    lambda config: int(config.get("max_position_embeddings", 4096)) - 1,  # the cache: max_seq_len rows
)
