"""posenc: positional encodings for PyTorch transformers.

Every way the field tells a transformer where a token sits, behind one interface
(:class:`posenc.schemes.PositionScheme`): additive sinusoidal tables, learned tables, rotary
embeddings (RoPE) with their context-extension scalings, ALiBi, and none at all (NoPE).
"""

from .alibi import ALiBi, alibi_bias, alibi_slopes
from .factory import SCHEMES, make_scheme
from .learned import LearnedPositionalEmbedding, PositionOutOfRangeError
from .model import Block, CausalSelfAttention, ModelConfig, TinyLM
from .rope import RotaryEmbedding, apply_rotary, apply_rotary_at, permute_for_half_split, permute_for_interleaved
from .schemes import NoPE, PositionScheme
from .sinusoidal import SinusoidalPositionalEncoding, sinusoidal_frequencies, sinusoidal_table

__version__ = "0.1.0"

__all__ = [
    "ALiBi",
    "Block",
    "CausalSelfAttention",
    "LearnedPositionalEmbedding",
    "ModelConfig",
    "NoPE",
    "PositionOutOfRangeError",
    "PositionScheme",
    "RotaryEmbedding",
    "SCHEMES",
    "SinusoidalPositionalEncoding",
    "TinyLM",
    "alibi_bias",
    "alibi_slopes",
    "apply_rotary",
    "apply_rotary_at",
    "make_scheme",
    "permute_for_half_split",
    "permute_for_interleaved",
    "sinusoidal_frequencies",
    "sinusoidal_table",
]
