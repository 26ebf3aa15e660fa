"""What an extension method named in a run stands for: the scaling config at a target length.

A lab run's ``extension_methods`` and an eval run's scaling specs name rope types; both apps extend a
model trained on ``L0`` positions to a length ``L`` the same way, so the numbers of the two runs
describe the same configurations. The scaling registry knows how each type is set for an extension
ratio (:attr:`posenc.rope.registry.ScalingDescriptor.extension`); the one choice made here is which
ratio:

* ``L / L0`` for a type whose frequencies are fixed once configured (linear, NTK-aware, YaRN,
  Llama 3);
* :data:`ADAPTIVE_FACTOR` for a type whose frequencies follow the current length (dynamic NTK): it
  does not know the target length, its scale grows with the input instead
  (``s_eff = 2 L / L0 - 1`` at length ``L``), and 2 is the factor Hugging Face's examples give it.

Needs only the standard library: the descriptor is handed in.
"""

from __future__ import annotations

from typing import Any

#: The factor of a scaling whose frequencies follow the current length (Hugging Face examples use 2.0).
ADAPTIVE_FACTOR = 2.0


def extension_factor(descriptor: Any, length: int, original: int) -> float:
    """The extension ratio a run gives ``descriptor``'s type for inputs of ``length`` positions of a
    model trained on ``original``."""
    return ADAPTIVE_FACTOR if descriptor.length_dependent else length / original


def extension_config(descriptor: Any, length: int, original: int) -> Any:
    """The scaling config a run uses to extend a model trained on ``original`` positions to ``length``
    with ``descriptor``'s type (one that has an ``extension``)."""
    if descriptor.extension is None:
        raise ValueError(f"{descriptor.name!r} is not set by an extension ratio alone (it has no extension)")
    return descriptor.extension(extension_factor(descriptor, length, original), original)
