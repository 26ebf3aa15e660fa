"""What the adapters share: the config's plain fields, and the softmax scale's unit."""

from __future__ import annotations

import math
from typing import Any, Dict, Optional


def rope_dict(config: Dict[str, Any]) -> Dict[str, Any]:
    """The config's rope dict as written (``rope_parameters`` in transformers 5, else
    ``rope_scaling``), with ``{}`` for a config that has neither."""
    return dict(config.get("rope_parameters") or config.get("rope_scaling") or {})


def rope_type(config: Dict[str, Any]) -> str:
    """``rope_type`` (or the older ``type``) of the config's rope dict; ``"default"`` without one."""
    rope = rope_dict(config)
    return str(rope.get("rope_type", rope.get("type", "default")))


def theta(config: Dict[str, Any], default: float = 10000.0) -> float:
    """``rope_theta`` wherever the config keeps it (the rope dict, the top level, GPT-NeoX's
    ``rotary_emb_base``)."""
    rope = rope_dict(config)
    for value in (rope.get("rope_theta"), config.get("rope_theta"), config.get("rotary_emb_base")):
        if value is not None:
            return float(value)
    return default


def softmax_multiplier(engine_scale: Optional[float], engine_head_dim: int) -> Optional[float]:
    """The engine's softmax scale in units of ``1 / sqrt(d)`` of the engine's own q·k width ``d``.

    DeepSeek's attention (MLA) scales q·k over ``qk_nope_head_dim + qk_rope_head_dim`` features, of
    which the rotate protocol sees only the rotated ones; the unit makes its factor comparable with
    posenc's ``softmax_scale_factor``.
    """
    return None if engine_scale is None else float(engine_scale) * math.sqrt(engine_head_dim)


def half_to_pairs(x):
    """``(..., d)`` from half-split order (pair ``i`` at ``i, i + d/2``) to adjacent pairs (``2i,
    2i + 1``): the permutation the engines' checkpoint converters apply to Hugging Face q/k
    projections (torchtune ``convert_weights.hf_to_tune``'s ``_permute``, torchtitan's
    ``state_dict_adapter.from_hf``), here applied to q and k themselves."""
    d = x.shape[-1]
    return x.reshape(*x.shape[:-1], 2, d // 2).transpose(-1, -2).reshape(x.shape)


def pairs_to_half(x):
    """The inverse of :func:`half_to_pairs`."""
    d = x.shape[-1]
    return x.reshape(*x.shape[:-1], d // 2, 2).transpose(-1, -2).reshape(x.shape)


def head_dim(config: Dict[str, Any]) -> int:
    """``head_dim``, else ``hidden_size // num_attention_heads`` (the Hugging Face rule; GPT-J spells
    them ``n_embd`` and ``n_head``)."""
    if config.get("head_dim"):
        return int(config["head_dim"])
    hidden = config.get("hidden_size", config.get("n_embd"))
    return int(hidden) // int(config.get("num_attention_heads", config.get("n_head")))


def partial_factor(config: Dict[str, Any]) -> float:
    """The rotated share of a head as the config writes it (1.0 without one)."""
    rope = rope_dict(config)
    for value in (rope.get("partial_rotary_factor"), config.get("partial_rotary_factor"), config.get("rotary_pct")):
        if value is not None:
            return float(value)
    if config.get("rotary_dim"):
        return float(config["rotary_dim"]) / head_dim(config)
    return 1.0


def unsupported_reason(build, config: Dict[str, Any]):
    """The conform protocol's ``supports(config)``: ``True`` when ``build(config)`` works, else the
    reason ``build`` gave as ``NotImplementedError("not supported: ...")``."""
    try:
        build(config)
    except NotImplementedError as error:
        return str(error).replace("not supported: ", "", 1)
    return True


def declare(rotate, engine: str, version: str, supports, max_position=None) -> None:
    """The protocol's optional attributes on ``rotate``; ``max_position(config)`` is the largest
    position the engine can rotate for that config (the last row of its cos/sin cache): conform does
    not call the groups of positions past it and says so."""
    rotate.engine, rotate.version, rotate.supports = engine, version, supports
    if max_position is not None:
        rotate.max_position = max_position


class PerConfig:
    """``build(config)`` once per config, kept across calls as an engine keeps its cache (the last
    config only: the tables of a long-context config are large)."""

    def __init__(self, build) -> None:
        self.build, self.key, self.value = build, None, None

    def __call__(self, config: Dict[str, Any]):
        key = repr(sorted(config.items()))
        if key != self.key:
            self.key, self.value = None, None
            self.value, self.key = self.build(config), key
        return self.value
