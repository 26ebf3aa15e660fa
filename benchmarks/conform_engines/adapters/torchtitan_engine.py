"""torchtitan: its shared RoPE modules (``torchtitan/models/common/rope.py``, 0.3.0) configured as
its model registries configure them for each family.

* Llama 3 (``models/llama3/__init__.py``): ``ComplexRoPE.Config(dim=head_dim, max_seq_len, theta,
  scaling="llama")`` with ``scaling_factor``, ``low_freq_factor``, ``high_freq_factor`` and
  ``original_max_position_embeddings`` from the rope dict; without scaling ``scaling="none"``. It
  rotates adjacent pairs: ``Llama3StateDictAdapter.from_hf`` reverse-permutes the Hugging Face q/k
  projections into that order, so the adapter permutes q and k, rotates and permutes back;
* DeepSeek-V3 (``models/deepseek_v3/__init__.py``, ``model.py``): ``ComplexRoPE.Config(dim=
  qk_rope_head_dim, theta, scaling="yarn", rope_factor=factor, beta_fast, beta_slow,
  original_seq_len=original_max_position_embeddings)`` on interleaved pairs; the YaRN temperature
  goes into the softmax scale: ``qk_head_dim ** -0.5 * (0.1 * mscale * ln(rope_factor) + 1) ** 2``
  with the model's one ``mscale`` (Hugging Face's ``mscale_all_dim``);
* gpt-oss (``models/gpt_oss/__init__.py``, ``model.py``): ``CosSinRoPE.Config(dim=head_dim, theta,
  scaling="yarn", rope_factor, beta_fast, beta_slow, truncate, original_seq_len)``, half-split;
  softmax scale ``head_dim ** -0.5 * (0.1 * ln(rope_factor) + 1) ** 2`` (the tables carry no factor).

Other families with the default type use Llama 3's ``ComplexRoPE`` the same way (torchtitan's
registries do so for Qwen 3). Linear, dynamic, LongRoPE and partial rotary are not supported.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Tuple

import torch

from .common import (
    PerConfig,
    declare,
    half_to_pairs,
    head_dim,
    pairs_to_half,
    partial_factor,
    rope_dict,
    rope_type,
    theta,
    unsupported_reason,
)


def _build(config: Dict[str, Any]):
    """(module, adjacent pairs after the converter's permutation, softmax multiplier)."""
    if config.get("rope_interleave") and config.get("model_type") not in ("deepseek_v2", "deepseek_v3"):
        raise NotImplementedError(
            f"not supported: torchtitan's {config.get('model_type')} builder does not read rope_interleave"
        )
    from torchtitan.models.common.rope import ComplexRoPE, CosSinRoPE

    family, kind, rope = config.get("model_type"), rope_type(config), rope_dict(config)
    length = int(config.get("max_position_embeddings", 4096))
    if family in ("deepseek_v2", "deepseek_v3"):
        if kind not in ("yarn", "default"):
            raise NotImplementedError(f"not supported: torchtitan's DeepSeek-V3 has no {kind!r} rope")
        dim = int(config["qk_rope_head_dim"])
        fields = dict(dim=dim, max_seq_len=length, theta=theta(config))
        multiplier = 1.0
        if kind == "yarn":
            fields.update(
                scaling="yarn",
                rope_factor=float(rope["factor"]),
                beta_fast=float(rope.get("beta_fast", 32.0)),
                beta_slow=float(rope.get("beta_slow", 1.0)),
                original_seq_len=int(rope["original_max_position_embeddings"]),
            )
            mscale = float(rope.get("mscale_all_dim", 1.0))
            if fields["rope_factor"] > 1:  # deepseek_v3/model.py: the temperature in the softmax scale
                multiplier = (0.1 * mscale * math.log(fields["rope_factor"]) + 1.0) ** 2
        return ComplexRoPE(ComplexRoPE.Config(**fields)), False, multiplier
    if partial_factor(config) != 1.0:
        raise NotImplementedError("not supported: torchtitan's RoPE modules rotate the whole head")
    dim = head_dim(config)
    if family == "gpt_oss":
        fields = dict(
            dim=dim,
            max_seq_len=length,
            theta=theta(config),
            scaling="yarn",
            rope_factor=float(rope["factor"]),
            beta_fast=float(rope.get("beta_fast", 32.0)),
            beta_slow=float(rope.get("beta_slow", 1.0)),
            truncate=bool(rope.get("truncate", True)),
            original_seq_len=int(rope["original_max_position_embeddings"]),
        )
        multiplier = (0.1 * math.log(fields["rope_factor"]) + 1.0) ** 2 if fields["rope_factor"] > 1 else 1.0
        return CosSinRoPE(CosSinRoPE.Config(**fields)), False, multiplier
    if kind == "llama3":
        fields = dict(
            dim=dim,
            max_seq_len=length,
            theta=theta(config),
            scaling="llama",
            scaling_factor=float(rope["factor"]),
            low_freq_factor=float(rope["low_freq_factor"]),
            high_freq_factor=float(rope["high_freq_factor"]),
            original_max_position_embeddings=int(rope["original_max_position_embeddings"]),
        )
        return ComplexRoPE(ComplexRoPE.Config(**fields)), True, 1.0
    if kind != "default":
        raise NotImplementedError(f"not supported: torchtitan has no {kind!r} rope for {family!r}")
    return ComplexRoPE(ComplexRoPE.Config(dim=dim, max_seq_len=length, theta=theta(config))), True, 1.0


_BUILT = PerConfig(_build)


def rotate(config: Dict[str, Any], q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor) -> Tuple:
    rope, paired, multiplier = _BUILT(config)
    qx, kx = (half_to_pairs(q), half_to_pairs(k)) if paired else (q, k)
    qr, kr = rope(qx[None], kx[None], positions[None])  # (batch, seq, heads, head_dim)
    qr, kr = qr[0], kr[0]
    if paired:
        qr, kr = pairs_to_half(qr), pairs_to_half(kr)
    return qr, kr, multiplier


def _version() -> str:
    from importlib.metadata import version

    return version("torchtitan")


declare(
    rotate,
    "torchtitan",
    _version(),
    lambda config: unsupported_reason(_BUILT, config),
    lambda config: int(_BUILT(config)[0].cache.shape[0]) - 1,  # _maybe_check_max_pos refuses past it
)
