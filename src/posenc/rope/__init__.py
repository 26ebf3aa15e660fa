"""Rotary position embeddings: tables, rotation, layouts, scalings."""

from .apply import apply_rotary, rotate_reference
from .embedding import RotaryEmbedding
from .layout import LAYOUTS, permute_for_half_split, permute_for_interleaved
from .scaling import REGISTRY, DefaultScaling, rope_frequencies
from .tables import rope_angles, rope_cos_sin, rope_inv_freq, rope_table

__all__ = [
    "LAYOUTS", "REGISTRY", "DefaultScaling", "RotaryEmbedding", "apply_rotary",
    "permute_for_half_split", "permute_for_interleaved", "rope_angles", "rope_cos_sin",
    "rope_frequencies", "rope_inv_freq", "rope_table", "rotate_reference",
]
