"""RoPE frequency scalings: one frozen config + one pure function per rope type.

Each scaling maps ``(config, rotary_dim, base)`` to ``(inv_freq, attention_factor)``: the float64
frequencies (shape (rotary_dim // 2,)) and the factor that multiplies the cos/sin tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar, Dict, Optional, Tuple, Type

import torch

from .tables import rope_inv_freq


@dataclass(frozen=True)
class DefaultScaling:
    """No scaling: ``theta_i = base ** (-2i / d)`` (Su et al. 2021). HF ``rope_type="default"``."""

    rope_type: ClassVar[str] = "default"

    def validate(self, rotary_dim: int) -> None:
        return None


def _default(config: DefaultScaling, rotary_dim: int, base: float,
             seq_len: Optional[int] = None) -> Tuple[torch.Tensor, float]:
    return rope_inv_freq(rotary_dim, base), 1.0


#: rope_type -> (config class, pure function)
REGISTRY: Dict[str, Tuple[Type, Callable[..., Tuple[torch.Tensor, float]]]] = {
    "default": (DefaultScaling, _default),
}


def rope_frequencies(scaling, rotary_dim: int, base: float,
                     seq_len: Optional[int] = None) -> Tuple[torch.Tensor, float]:
    """``(inv_freq, attention_factor)`` for any registered scaling config (``None`` = default)."""
    scaling = DefaultScaling() if scaling is None else scaling
    rope_type = getattr(scaling, "rope_type", None)
    if rope_type not in REGISTRY:
        raise ValueError(f"scaling must be a config of a registered rope type {sorted(REGISTRY)}, "
                         f"got {scaling!r}")
    scaling.validate(rotary_dim)
    return REGISTRY[rope_type][1](scaling, rotary_dim, base, seq_len)
