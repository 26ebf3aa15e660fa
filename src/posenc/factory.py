"""Build any position scheme by name, as the CLI, the lab and the explorer do."""

from __future__ import annotations

from typing import Any, Optional

from torch import nn

from ._checks import check_choice, check_int
from .alibi import ALiBi
from .learned import LearnedPositionalEmbedding
from .rope.embedding import RotaryEmbedding
from .rope.fope import FourierRotaryEmbedding
from .rope.xpos import XPosEmbedding
from .schemes import NoPE, PositionScheme
from .sinusoidal import SinusoidalPositionalEncoding
from .t5 import T5RelativeBias

SCHEMES = ("nope", "sinusoidal", "learned", "rope", "alibi", "t5", "xpos", "fope")
#: the schemes that rotate pairs of a head's features (their heads need an even width)
ROTARY_SCHEMES = ("rope", "xpos", "fope")


def make_scheme(
    name: str,
    *,
    d_model: int,
    n_heads: int,
    max_len: int = 1024,
    rope_base: float = 10000.0,
    rotary_dim: Optional[int] = None,
    rope_layout: str = "half",
    rope_scaling: Any = None,
) -> PositionScheme:
    """Create the scheme ``name`` for a model of width ``d_model`` with ``n_heads`` heads.

    ``max_len`` is the row count of a learned table (the only scheme with a hard limit) and FoPE's
    training length (its frequencies with a longer period are clipped); the ``rope_*`` arguments
    configure RoPE (``rope_base``, ``rotary_dim`` and ``rope_layout`` also xPos and FoPE) and are
    ignored by the others. ``"t5"`` is T5's bias with decoder (causal) buckets, as the reference model
    is a decoder; ``"xpos"`` uses ``scale_base=512``.
    """
    check_choice("scheme", name, set(SCHEMES))
    check_int("d_model", d_model, minimum=1)
    check_int("n_heads", n_heads, minimum=1)
    if name == "nope":
        return NoPE()
    if name == "sinusoidal":
        return SinusoidalPositionalEncoding(d_model, max_len=max_len)
    if name == "learned":
        return LearnedPositionalEmbedding(max_len, d_model)
    if d_model % n_heads:
        raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
    if name == "alibi":
        return ALiBi(n_heads)
    if name == "t5":
        t5 = T5RelativeBias(n_heads, bidirectional=False)
        # T5's initialisation of the table (transformers' T5PreTrainedModel: std factor * d_model ** -0.5)
        nn.init.normal_(t5.relative_attention_bias.weight, std=d_model**-0.5)
        return t5
    head_dim = d_model // n_heads
    if name == "xpos":
        return XPosEmbedding(
            head_dim, base=rope_base, rotary_dim=rotary_dim, layout=rope_layout, max_position_embeddings=max_len
        )
    if name == "fope":
        return FourierRotaryEmbedding(
            head_dim,
            n_heads,
            base=rope_base,
            rotary_dim=rotary_dim,
            layout=rope_layout,
            max_position_embeddings=max_len,
        )
    return RotaryEmbedding(
        d_model // n_heads,
        base=rope_base,
        rotary_dim=rotary_dim,
        layout=rope_layout,
        scaling=rope_scaling,
        max_position_embeddings=max_len,
    )
