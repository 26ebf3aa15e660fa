"""x-transformers: the rotary module its ``AttentionLayers`` builds, and its
``apply_rotary_pos_emb``.

``Decoder(dim, depth=1, heads, attn_dim_head=head_dim, rotary_pos_emb=True, rotary_emb_dim=...,
rotary_interpolation_factor=..., rotary_base_rescale_factor=...)`` builds the ``RotaryEmbedding``
(``x_transformers/x_transformers.py``, 2.31.10); the adapter takes ``decoder.rotary_pos_emb`` from
it and rotates as ``Attention.forward`` does (``apply_rotary_pos_emb(t, freqs, scale)`` on ``(batch,
heads, seq, head_dim)``, the first ``rotary_emb_dim`` features, adjacent pairs). The mapping from a
Hugging Face config, through the only knobs ``AttentionLayers`` has:

* ``rotary_emb_dim`` = the rotated width (``partial_rotary_factor * head_dim``; x-transformers'
  own default is half the head);
* ``rotary_interpolation_factor`` = ``factor`` of a ``linear`` rope;
* ``rope_theta``: ``AttentionLayers`` passes no base to ``RotaryEmbedding`` (10000 always), only
  ``rotary_base_rescale_factor``, which multiplies the base by ``r ** (d / (d - 2))``; the adapter
  sets ``r = (rope_theta / 10000) ** ((d - 2) / d)``, which gives ``rope_theta`` back.

The module rotates adjacent pairs: a config in half-split order (every family but GPT-J and
DeepSeek, and no ``rope_interleave: true``) is permuted into pairs inside the rotated slice and
back. Other rope types are not supported.
"""

from __future__ import annotations

from typing import Any, Dict, Tuple

import torch

from .common import declare, half_to_pairs, head_dim, pairs_to_half, partial_factor, rope_dict, rope_type, theta

INTERLEAVED = ("gptj", "deepseek_v2", "deepseek_v3")


def rotate(config: Dict[str, Any], q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor) -> Tuple:
    from x_transformers import Decoder
    from x_transformers.x_transformers import apply_rotary_pos_emb

    kind = rope_type(config)
    dim = int(config["qk_rope_head_dim"]) if config.get("qk_rope_head_dim") else head_dim(config)
    rotary = int(dim * partial_factor(config)) if not config.get("qk_rope_head_dim") else dim
    rescale = (theta(config) / 10000.0) ** ((rotary - 2) / rotary)
    decoder = Decoder(
        dim=dim,
        depth=1,
        heads=1,
        attn_dim_head=dim,
        rotary_pos_emb=True,
        rotary_emb_dim=rotary,
        rotary_interpolation_factor=float(rope_dict(config)["factor"]) if kind == "linear" else 1.0,
        rotary_base_rescale_factor=rescale,
    )
    freqs, scale = decoder.rotary_pos_emb(positions)  # (1, tokens, rotary)
    paired = config.get("model_type") not in INTERLEAVED and not config.get("rope_interleave")
    out = []
    for x in (q, k):
        x = x.transpose(0, 1)[None]  # (1, heads, tokens, head_dim)
        if paired:
            x = torch.cat([half_to_pairs(x[..., :rotary]), x[..., rotary:]], -1)
        y = apply_rotary_pos_emb(x, freqs, scale)
        if paired:
            y = torch.cat([pairs_to_half(y[..., :rotary]), y[..., rotary:]], -1)
        out.append(y[0].transpose(0, 1))
    return out[0], out[1]


def supports(config: Dict[str, Any]):
    kind = rope_type(config)
    return True if kind in ("default", "linear") else f"x-transformers has no {kind!r} rope (default and linear only)"


def _version() -> str:
    from importlib.metadata import version

    return version("x-transformers")


declare(rotate, "x-transformers", _version(), supports)
