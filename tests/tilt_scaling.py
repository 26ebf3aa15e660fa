"""A rope type defined outside the package: the toy ``"tilt"`` scaling (its config class, its pure
function and its descriptor), for the tests of the scaling registry and of the apps that loop over it.
Registering it is each test's own business (``register_scaling(TILT)``, then ``unregister_scaling``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Optional

import torch

from posenc.rope import Parameter, ScalingDescriptor
from posenc.rope.tables import rope_inv_freq


@dataclass(frozen=True)
class TiltScaling:
    """Slows pair ``i`` by ``max(tilt_floor, factor ** (i / (n - 1)))`` (``n`` pairs): the slowest
    pair divided by ``factor``, geometric in between, no pair by less than ``tilt_floor``. A toy, not a
    published method; ``tilt_floor`` is a parameter no posenc scaling has."""

    factor: float
    tilt_floor: float = 1.0
    rope_type: ClassVar[str] = "tilt"

    def __post_init__(self):
        self.validate(None)

    def validate(self, rotary_dim: Optional[int]) -> None:
        for name, value in (("factor", self.factor), ("tilt_floor", self.tilt_floor)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 1:
                raise ValueError(f"'tilt' scaling: {name} must be a finite number >= 1, got {value!r}")
        if rotary_dim is not None and (
            isinstance(rotary_dim, bool) or not isinstance(rotary_dim, int) or rotary_dim < 2 or rotary_dim % 2
        ):
            raise ValueError(f"'tilt' scaling: rotary_dim must be an even integer >= 2, got {rotary_dim!r}")


def tilt_frequencies(config: TiltScaling, rotary_dim: int, base: float, seq_len=None):
    pairs = rotary_dim // 2
    exponent = torch.arange(pairs, dtype=torch.float64) / max(pairs - 1, 1)
    return rope_inv_freq(rotary_dim, base) / (config.factor**exponent).clamp(min=config.tilt_floor), 1.0


TILT = ScalingDescriptor(
    "tilt",
    TiltScaling,
    tilt_frequencies,
    summary="`theta_i / s ** (i / (d/2 - 1))`",
    source="a test",
    parameters=(Parameter("factor", 1.0, 64.0, 1.0, 8.0), Parameter("tilt_floor", 1.0, 4.0, 0.5, 1.0)),
    extension=lambda factor, original: TiltScaling(factor),
)
