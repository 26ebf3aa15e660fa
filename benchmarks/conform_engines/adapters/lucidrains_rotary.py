"""rotary-embedding-torch: ``RotaryEmbedding`` and ``apply_rotary_emb``
(``rotary_embedding_torch/rotary_embedding_torch.py``, 0.9.1).

The library reads no config: the mapping is the constructor's own arguments,
``RotaryEmbedding(dim=rotated width, theta=rope_theta, interpolate_factor=factor)`` for the default
and ``linear`` types (``interpolate_factor`` divides positions, as linear scaling does). Its
``forward(positions)`` gives the angles at any positions, given as ``rotate_queries_or_keys``
builds them in ``get_seq_pos`` (in the input's dtype, divided by ``interpolate_factor``), and
``apply_rotary_emb(freqs, t)`` rotates the first ``dim`` features in adjacent pairs; a config in
half-split order (all but GPT-J, DeepSeek and ``rope_interleave: true``) is permuted into pairs
inside the rotated slice and back. ``theta_rescale_factor`` (NTK-aware) and xPos have no Hugging
Face type that matches; other rope types are not supported.
"""

from __future__ import annotations

from typing import Any, Dict, Tuple

import torch

from .common import declare, half_to_pairs, head_dim, pairs_to_half, partial_factor, rope_dict, rope_type, theta

INTERLEAVED = ("gptj", "deepseek_v2", "deepseek_v3")


def rotate(config: Dict[str, Any], q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor) -> Tuple:
    from rotary_embedding_torch import RotaryEmbedding, apply_rotary_emb

    kind = rope_type(config)
    dim = int(config["qk_rope_head_dim"]) if config.get("qk_rope_head_dim") else head_dim(config)
    rotary = dim if config.get("qk_rope_head_dim") else int(dim * partial_factor(config))
    factor = float(rope_dict(config)["factor"]) if kind == "linear" else 1.0
    rope = RotaryEmbedding(dim=rotary, theta=theta(config), interpolate_factor=factor, cache_if_possible=False)
    # get_seq_pos's positions: in the input's dtype, divided by interpolate_factor
    freqs = rope(positions.to(q.dtype) / rope.interpolate_factor)  # (tokens, rotary)
    paired = config.get("model_type") not in INTERLEAVED and not config.get("rope_interleave")
    out = []
    for x in (q, k):
        x = x.transpose(0, 1)  # (heads, tokens, head_dim): seq_dim -2
        if paired:
            x = torch.cat([half_to_pairs(x[..., :rotary]), x[..., rotary:]], -1)
        y = apply_rotary_emb(freqs, x)
        if paired:
            y = torch.cat([pairs_to_half(y[..., :rotary]), y[..., rotary:]], -1)
        out.append(y.transpose(0, 1))
    return out[0], out[1]


def supports(config: Dict[str, Any]):
    kind = rope_type(config)
    return (
        True
        if kind in ("default", "linear")
        else f"rotary-embedding-torch has no {kind!r} rope (default and linear only)"
    )


def _version() -> str:
    from importlib.metadata import version

    return version("rotary-embedding-torch")


declare(rotate, "rotary-embedding-torch", _version(), supports)
