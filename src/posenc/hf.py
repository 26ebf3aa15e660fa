"""Hugging Face interop: ``config.json`` rope fields <-> :class:`posenc.rope.RotaryEmbedding`.

Configs describe RoPE with a handful of fields spread over the config, in two generations:

* legacy (most ``config.json`` files on the Hub): top-level ``rope_theta`` and
  ``partial_rotary_factor``, and a ``rope_scaling`` dict whose type is in ``type`` (oldest) or
  ``rope_type``;
* new style (transformers 5): one ``rope_parameters`` dict that also holds ``rope_theta`` and
  ``partial_rotary_factor``.

The head size is ``head_dim`` if set, else ``hidden_size // num_attention_heads``; the rotated width
is ``int(head_dim * partial_rotary_factor)``. GPT-NeoX's ``rotary_pct`` / ``rotary_emb_base``, GPT-J's
``rotary_dim`` / ``n_embd`` / ``n_head`` and DeepSeek's ``qk_rope_head_dim`` / ``rope_interleave`` are
read too. Defaults and precedence follow ``transformers``:

* ``rope_theta`` defaults to 10000;
* ``dynamic`` takes its trained length from ``max_position_embeddings``;
* ``yarn``, ``llama3`` and ``longrope`` take ``original_max_position_embeddings`` from the top level
  of the config if present there (Phi-3 keeps it there), else from the rope dict, else
  ``max_position_embeddings``;
* ``yarn`` and ``longrope`` with no ``factor`` use ``max_position_embeddings / original``.

Checkpoints on the Hub use the half-split layout (``layout="half"``) except GPT-J and DeepSeek-V2/V3
(``rope_interleave``), whose q/k rows are in interleaved pair order.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Optional

from ._checks import check_int
from .rope.scaling import (
    ALIASES, REGISTRY, DefaultScaling, DynamicNTKScaling, LinearScaling, Llama3Scaling, LongRoPEScaling,
    NTKScaling, ProportionalScaling, YaRNScaling,
)

DEFAULT_THETA = 10000.0
DEFAULT_MAX_POSITIONS = 2048

_KNOWN_KEYS = {
    "default": set(),
    "linear": {"factor"},
    "ntk": {"factor"},
    "dynamic": {"factor", "original_max_position_embeddings"},
    "yarn": {"factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "mscale",
             "mscale_all_dim", "attention_factor", "truncate"},
    "llama3": {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"},
    "longrope": {"short_factor", "long_factor", "original_max_position_embeddings", "attention_factor",
                 "factor"},
    "proportional": {"factor"},
}
_COMMON_KEYS = {"rope_type", "type", "rope_theta", "partial_rotary_factor"}
#: model types whose checkpoints keep q/k rows in interleaved pair order
_INTERLEAVED_MODEL_TYPES = {"gptj", "deepseek_v2", "deepseek_v3"}


class _Fields:
    """Uniform read access to a ``transformers`` config object or a plain dict."""

    def __init__(self, config):
        if isinstance(config, dict):
            self.data = config
        elif hasattr(config, "to_dict"):
            data = dict(config.to_dict())
            for key in ("head_dim", "rope_parameters", "rope_scaling", "rope_theta",
                        "partial_rotary_factor", "original_max_position_embeddings"):
                if hasattr(config, key):
                    data[key] = getattr(config, key)
            self.data = data
        else:
            raise TypeError(f"config must be a transformers config or a dict, got {type(config).__name__}")
        text = self.data.get("text_config")
        if not self.has_shape() and isinstance(text, dict):
            self.data = {**text}
        elif not self.has_shape() and text is not None and hasattr(text, "to_dict"):
            self.data = _Fields(text).data

    def has_shape(self) -> bool:
        return any(self.get(k) is not None for k in ("head_dim", "hidden_size", "n_embd", "qk_rope_head_dim"))

    def get(self, key: str, default=None):
        value = self.data.get(key, default)
        return default if value is None else value


def _rope_dict(fields: _Fields, layer_type: Optional[str]) -> Dict[str, Any]:
    rope = fields.get("rope_parameters") or fields.get("rope_scaling") or {}
    if not isinstance(rope, dict):
        raise ValueError(f"rope_parameters / rope_scaling must be a dict, got {rope!r}")
    nested = {k: v for k, v in rope.items() if isinstance(v, dict)}
    if nested:
        if layer_type is None:
            raise ValueError(f"this config has one rope dict per layer type {sorted(nested)}; pass "
                             "layer_type= to choose one")
        if layer_type not in nested:
            raise ValueError(f"layer_type must be one of {sorted(nested)}, got {layer_type!r}")
        return dict(nested[layer_type])
    if layer_type is not None:
        raise ValueError(f"layer_type={layer_type!r} given but the config has a single rope dict")
    return dict(rope)


def _given(rope: Dict[str, Any], key: str, default):
    """``rope[key]`` when present and not null, else ``default`` (0 stays 0 and gets validated)."""
    value = rope.get(key)
    return default if value is None else value


def _head_dim(fields: _Fields) -> int:
    for key in ("qk_rope_head_dim", "head_dim"):
        if fields.get(key) is not None:
            return int(fields.get(key))
    hidden = fields.get("hidden_size", fields.get("n_embd"))
    heads = fields.get("num_attention_heads", fields.get("n_head"))
    if hidden is None or heads is None:
        raise ValueError("config must give head_dim, or hidden_size and num_attention_heads")
    check_int("hidden_size", hidden, minimum=1)
    check_int("num_attention_heads", heads, minimum=1)
    if hidden % heads:
        raise ValueError(f"hidden_size={hidden} is not divisible by num_attention_heads={heads}")
    return hidden // heads


def scaling_from_hf(config, layer_type: Optional[str] = None, strict: bool = True):
    """The posenc scaling config a ``transformers`` config (object or dict) describes.

    Args:
        config: a ``PretrainedConfig`` or the dict of a ``config.json``.
        layer_type: for configs with one rope dict per layer type (Gemma 3, gpt-oss style nesting).
        strict: raise on keys the rope type does not use (a misspelt key would otherwise change
            nothing, silently).
    """
    return _read(config, layer_type, strict)["scaling"]


def rotary_kwargs_from_hf(config, layer_type: Optional[str] = None, strict: bool = True) -> Dict[str, Any]:
    """Keyword arguments of :class:`posenc.rope.RotaryEmbedding` for a ``transformers`` config."""
    return _read(config, layer_type, strict)


def _read(config, layer_type, strict) -> Dict[str, Any]:
    fields = _Fields(config)
    rope = _rope_dict(fields, layer_type)
    rope_type = rope.get("rope_type", rope.get("type")) or "default"
    rope_type = ALIASES.get(rope_type, rope_type)
    if fields.get("model_type") == "phi3" and rope_type == "yarn":
        rope_type = "longrope"             # Phi-3 configs use "yarn" for LongRoPE, as transformers reads them
    if rope_type not in REGISTRY:
        raise ValueError(f"rope_type must be one of {sorted(REGISTRY)} (or legacy 'su'), got {rope_type!r}")
    if strict:
        unknown = sorted(set(rope) - _KNOWN_KEYS[rope_type] - _COMMON_KEYS)
        if unknown:
            raise ValueError(f"{rope_type!r} rope dict has keys it does not use: {unknown} (allowed: "
                             f"{sorted(_KNOWN_KEYS[rope_type] | _COMMON_KEYS)}); pass strict=False to ignore")

    base = rope.get("rope_theta")
    if base is None:
        base = fields.get("rope_theta", fields.get("rotary_emb_base", DEFAULT_THETA))
    head_dim = _head_dim(fields)
    partial = rope.get("partial_rotary_factor")
    if partial is None:
        partial = fields.get("partial_rotary_factor", fields.get("rotary_pct", 1.0))
    if fields.get("rotary_dim") is not None:           # GPT-J style: an explicit width
        rotary_dim = int(fields.get("rotary_dim"))
    else:
        rotary_dim = int(head_dim * partial)
    max_positions = int(fields.get("max_position_embeddings", fields.get("n_positions", DEFAULT_MAX_POSITIONS)))

    def original() -> int:
        top = fields.get("original_max_position_embeddings")
        if top is not None:
            return int(top)
        return int(rope.get("original_max_position_embeddings") or max_positions)

    def factor_or_ratio(orig: int):
        factor = rope.get("factor")
        return max_positions / orig if factor is None else factor

    if rope_type == "default":
        scaling = None
    elif rope_type == "linear":
        scaling = LinearScaling(rope["factor"] if "factor" in rope else _missing(rope_type, "factor"))
    elif rope_type == "ntk":
        scaling = NTKScaling(rope["factor"] if "factor" in rope else _missing(rope_type, "factor"))
    elif rope_type == "dynamic":
        scaling = DynamicNTKScaling(rope["factor"] if "factor" in rope else _missing(rope_type, "factor"),
                                    max_positions)
    elif rope_type == "yarn":
        orig = original()
        mscale, mscale_all_dim = rope.get("mscale") or None, rope.get("mscale_all_dim") or None
        scaling = YaRNScaling(factor_or_ratio(orig), orig,
                              beta_fast=_given(rope, "beta_fast", 32.0),
                              beta_slow=_given(rope, "beta_slow", 1.0),
                              mscale=mscale, mscale_all_dim=mscale_all_dim,
                              attention_factor=rope.get("attention_factor"),
                              truncate=rope.get("truncate", True))
    elif rope_type == "llama3":
        for key in ("factor", "low_freq_factor", "high_freq_factor"):
            if key not in rope:
                _missing(rope_type, key)
        scaling = Llama3Scaling(rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"], original())
    elif rope_type == "longrope":
        for key in ("short_factor", "long_factor"):
            if key not in rope:
                _missing(rope_type, key)
        orig = original()
        # a ratio below 1 (context shorter than the trained length) means no attention scaling
        scaling = LongRoPEScaling(rope["short_factor"], rope["long_factor"], orig,
                                  attention_factor=rope.get("attention_factor"),
                                  factor=max(factor_or_ratio(orig), 1.0))
    else:                                                # proportional
        scaling = ProportionalScaling(partial_rotary_factor=partial, factor=rope.get("factor", 1.0))
        rotary_dim = head_dim

    if rotary_dim < 2 or rotary_dim % 2:
        raise ValueError(f"the rotated width int(head_dim * partial_rotary_factor) = int({head_dim} * "
                         f"{partial}) = {rotary_dim} must be an even number >= 2")
    interleaved = fields.get("rope_interleave", fields.get("model_type") in _INTERLEAVED_MODEL_TYPES)
    return {"head_dim": head_dim, "base": float(base), "rotary_dim": rotary_dim,
            "layout": "interleaved" if interleaved else "half", "scaling": scaling,
            "max_position_embeddings": max_positions}


def _missing(rope_type: str, key: str):
    raise ValueError(f"{rope_type!r} rope dict is missing its required key {key!r}")


def to_hf_dict(rope, style: str = "rope_parameters") -> Dict[str, Any]:
    """The rope-related ``config.json`` fields of a :class:`posenc.rope.RotaryEmbedding`.

    Args:
        rope: the module.
        style: ``"rope_parameters"`` (transformers 5: ``rope_theta`` inside the dict) or
            ``"rope_scaling"`` (legacy: top-level ``rope_theta``, ``rope_scaling`` null for default).

    ``from_hf_config(to_hf_dict(rope))`` rebuilds an equal module (layout aside: configs do not carry
    it). A ``dynamic`` scaling's trained length is written as ``max_position_embeddings``, as
    ``transformers`` reads it from there.
    """
    if style not in ("rope_parameters", "rope_scaling"):
        raise ValueError(f"style must be 'rope_parameters' or 'rope_scaling', got {style!r}")
    scaling = rope.scaling if rope.scaling is not None else DefaultScaling()
    params: Dict[str, Any] = {"rope_type": scaling.rope_type}
    for name in sorted(_KNOWN_KEYS[scaling.rope_type]):
        value = getattr(scaling, name, None)
        if value is not None:
            params[name] = list(value) if isinstance(value, tuple) else value
    out: Dict[str, Any] = {"head_dim": rope.head_dim, "max_position_embeddings": rope.max_position_embeddings}
    if scaling.rope_type == "dynamic":
        params.pop("original_max_position_embeddings")
        out["max_position_embeddings"] = scaling.original_max_position_embeddings
    if scaling.rope_type == "longrope" and scaling.attention_factor is None and scaling.factor is None:
        # a reader fills a missing factor from the context lengths; pin the factor this module uses
        params["attention_factor"] = rope.attention_factor
    partial = rope.rotary_dim / rope.head_dim
    while int(rope.head_dim * partial) < rope.rotary_dim:   # readers take int(head_dim * factor)
        partial = math.nextafter(partial, math.inf)
    if scaling.rope_type == "proportional":
        partial = scaling.partial_rotary_factor
    if style == "rope_parameters":
        params["rope_theta"] = rope.base
        if partial != 1.0:
            params["partial_rotary_factor"] = partial
        out["rope_parameters"] = params
    else:
        out["rope_theta"] = rope.base
        if partial != 1.0:
            out["partial_rotary_factor"] = partial
        out["rope_scaling"] = None if scaling.rope_type == "default" else params
    return {key: out[key] for key in sorted(out)}
