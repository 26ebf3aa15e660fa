"""Hugging Face interop: ``config.json`` rope fields <-> :class:`posenc.rope.RotaryEmbedding`.

The entry point for reading and writing Hugging Face configs. The work is done in the core,
:mod:`posenc.rope.hfconfig`, which loops over the scaling registry (each rope type's keys, defaults
and older spellings live in its :class:`~posenc.rope.registry.ScalingDescriptor`); see that module for
the rules (precedence, defaults, what is refused and why).

Typical use::

    from posenc.hf import rotary_kwargs_from_hf, to_hf_dict
    rope = RotaryEmbedding(**rotary_kwargs_from_hf(config))      # or RotaryEmbedding.from_hf_config
    fields = to_hf_dict(rope)                                     # rope fields of a config.json
"""

from __future__ import annotations

from .rope.hfconfig import (
    CONFIG_ATTRIBUTES,
    DEFAULT_MAX_POSITIONS,
    DEFAULT_THETA,
    INTERLEAVED_MODEL_TYPES,
    MAX_HEAD_DIM,
    config_dict,
    rotary_kwargs_from_hf,
    scaling_from_hf,
    to_hf_dict,
    unused_rope_keys,
)

__all__ = [
    "CONFIG_ATTRIBUTES",
    "DEFAULT_MAX_POSITIONS",
    "DEFAULT_THETA",
    "INTERLEAVED_MODEL_TYPES",
    "MAX_HEAD_DIM",
    "config_dict",
    "rotary_kwargs_from_hf",
    "scaling_from_hf",
    "to_hf_dict",
    "unused_rope_keys",
]
