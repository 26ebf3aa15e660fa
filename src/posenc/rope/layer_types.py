"""RoPE per layer type: local (sliding-window) and global layers with their own base and scaling.

Gemma 3 (Gemma Team 2025, "Gemma 3 Technical Report", section 2.2) interleaves five local
sliding-window attention layers with one global layer, and gives them different rotary
frequencies: the local layers keep ``base = 10,000`` (they never see more than the window, 1024
tokens), the global layers take ``base = 1,000,000`` and, in the 4B, 12B and 27B models, linear
scaling by 8 (trained at 32k, served at 128k). A layer of type ``T`` rotates pair ``i`` of the token
at position ``m`` by ``m * theta_i^(T)``, where ``theta^(T)`` are the (scaled) frequencies of type
``T``'s own rope dict; everything else about RoPE is unchanged.

In ``transformers`` configs:

* transformers 5: ``layer_types`` (one entry per layer, ``"sliding_attention"`` or
  ``"full_attention"``) and one rope dict per type,
  ``rope_parameters = {"sliding_attention": {...}, "full_attention": {...}}``;
* Gemma 3's ``config.json`` on the Hub: ``rope_local_base_freq`` (the local base), ``rope_theta``
  and ``rope_scaling`` (the global layers'), and ``sliding_window_pattern`` (every ``n``-th layer
  global) or ``layer_types``;
* Gemma 2: ``layer_types`` alternate local and global, but one rope dict serves both, so both types
  get the same tables.

:class:`LayerTypedRotaryEmbedding` holds one exact :class:`~posenc.rope.RotaryEmbedding` per layer
type (each with its own cached tables, scaling and length behaviour) and the type of every layer.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch
from torch import nn

from .._checks import PositionsLike, check_config_int, check_int
from ..schemes import PositionScheme
from .embedding import RotaryEmbedding

#: Gemma 3's local base, ``transformers``' default for ``rope_local_base_freq``
GEMMA3_LOCAL_BASE = 10000.0
#: Gemma 3's global base when ``rope_theta`` is not given (``transformers``' default)
GEMMA3_GLOBAL_BASE = 1_000_000.0
#: model types whose single-dict configs mean Gemma 3's two bases
GEMMA3_TYPES = frozenset({"gemma3", "gemma3_text"})
#: Gemma 3's default ``sliding_window_pattern``: layers ``6, 12, ...`` (1-based) are global
GEMMA3_PATTERN = 6


class LayerTypedRotaryEmbedding(PositionScheme):
    """One RoPE per layer type (Gemma 3's local and global layers); see the module notes.

    Args:
        ropes: ``layer type -> RotaryEmbedding``; all with one ``head_dim``.
        layer_types: the type of every layer, in order (``config.layer_types``); each must have a rope.

    Shape:
        ``forward(q, k, position_ids=None, offset=0, *, layer_type)``: as
        :meth:`posenc.rope.RotaryEmbedding.forward`, with the layer's type (or use :meth:`layer` to get
        the rope of layer ``i``).
    """

    name = "rope-per-layer-type"
    accepts_positions = True

    def __init__(self, ropes: Mapping[str, RotaryEmbedding], layer_types: Sequence[str]) -> None:
        super().__init__()
        if not isinstance(ropes, Mapping) or not ropes:
            raise ValueError(f"ropes must be a non-empty mapping of layer type -> RotaryEmbedding, got {ropes!r}")
        for kind, rope in ropes.items():
            if not isinstance(kind, str) or not kind:
                raise TypeError(f"layer types must be non-empty strings, got {kind!r}")
            if not isinstance(rope, RotaryEmbedding):
                raise TypeError(f"ropes[{kind!r}] must be a posenc RotaryEmbedding, got {type(rope).__name__}")
        head_dims = {kind: rope.head_dim for kind, rope in ropes.items()}
        if len(set(head_dims.values())) != 1:
            raise ValueError(f"every layer type's rope must have one head_dim, got {head_dims}")
        if isinstance(layer_types, str) or not isinstance(layer_types, Sequence) or not layer_types:
            raise ValueError(f"layer_types must be a non-empty sequence of layer types, got {layer_types!r}")
        missing = sorted({t for t in layer_types if t not in ropes}, key=str)
        if missing:
            raise ValueError(f"layer_types names {missing}, which have no rope; ropes are given for {sorted(ropes)}")
        self.ropes = nn.ModuleDict(dict(ropes))
        self.layer_types: List[str] = list(layer_types)
        self.head_dim = next(iter(head_dims.values()))

    @classmethod
    def from_hf_config(cls, config: Any) -> "LayerTypedRotaryEmbedding":
        """Build from a ``transformers`` config object or ``config.json`` dict (see the module notes).

        Per-type rope dicts are read with :func:`posenc.rope.hfconfig.rotary_kwargs_from_hf`
        (``layer_type=``); keys a type does not use are accepted, as ``transformers`` accepts them.

        Raises:
            ValueError: no ``layer_types`` and nothing to derive them from (``num_hidden_layers``),
                a layer type without a rope dict, or any field the rope readers refuse.
        """
        from .hfconfig import ConfigFields, rope_dicts, rotary_kwargs_from_hf

        data = dict(ConfigFields(config).data)
        layer_types = _layer_types(data)
        nested = {k for k in rope_dicts(data) if k is not None}
        if not nested and (data.get("rope_local_base_freq") is not None or data.get("model_type") in GEMMA3_TYPES):
            data = _gemma3_rope_parameters(data)
            nested = {"sliding_attention", "full_attention"}
        ropes: Dict[str, RotaryEmbedding] = {}
        for kind in dict.fromkeys(layer_types):
            if nested and kind not in nested:
                raise ValueError(
                    f"config layer type {kind!r} has no rope dict; the config gives them for {sorted(nested)}"
                )
            kwargs = rotary_kwargs_from_hf(data, layer_type=kind if nested else None, strict=False)
            ropes[kind] = RotaryEmbedding(**kwargs)
        return cls(ropes, layer_types)

    def layer(self, index: int) -> RotaryEmbedding:
        """The rope of layer ``index`` (0-based)."""
        check_int("index", index, minimum=0, maximum=len(self.layer_types) - 1)
        return self.ropes[self.layer_types[index]]  # type: ignore[return-value]

    def rope_of(self, layer_type: str) -> RotaryEmbedding:
        """The rope of a layer type."""
        if layer_type not in self.ropes:
            raise ValueError(f"layer_type must be one of {sorted(self.ropes)}, got {layer_type!r}")
        return self.ropes[layer_type]  # type: ignore[return-value]

    def cos_sin(self, position_ids: PositionsLike, layer_type: str) -> Tuple[torch.Tensor, torch.Tensor]:
        """Half-width cos/sin of ``layer_type``'s rope: (batch, seq) -> (batch, seq, rotary_dim // 2)."""
        return self.rope_of(layer_type).cos_sin(position_ids)

    def rotate(
        self, q: torch.Tensor, k: torch.Tensor, position_ids: PositionsLike, layer_type: Optional[str] = None
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """Rotate q and k (batch, heads, seq, head_dim) with the rope of ``layer_type`` (required)."""
        if layer_type is None:
            raise ValueError(f"layer_type is required: one of {sorted(self.ropes)}")
        return self.rope_of(layer_type).rotate(q, k, position_ids)

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        position_ids: Optional[PositionsLike] = None,
        offset: Union[int, torch.Tensor] = 0,
        *,
        layer_type: str,
        heads_first: bool = True,
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """:meth:`posenc.rope.RotaryEmbedding.forward` with the rope of ``layer_type``."""
        return self.rope_of(layer_type).forward(q, k, position_ids, offset, heads_first=heads_first)

    def extra_repr(self) -> str:
        counts = {kind: self.layer_types.count(kind) for kind in self.ropes}
        return f"layers={len(self.layer_types)}, per type={counts}"


def _layer_types(data: Dict[str, Any]) -> List[str]:
    """``layer_types`` as given, or Gemma 3's rule from ``sliding_window_pattern`` and the depth."""
    given = data.get("layer_types")
    if given is not None:
        if isinstance(given, str) or not isinstance(given, Sequence) or not given:
            raise ValueError(f"config field layer_types must be a non-empty list of strings, got {given!r}")
        for i, kind in enumerate(given):
            if not isinstance(kind, str):
                raise ValueError(f"config field layer_types[{i}] must be a string, got {kind!r}")
        return list(given)
    if data.get("num_hidden_layers") is None:
        raise ValueError("config has no layer_types and no num_hidden_layers to derive them from")
    layers = check_config_int("config field num_hidden_layers", data["num_hidden_layers"], whole_float=True)
    pattern = check_config_int(
        "config field sliding_window_pattern", data.get("sliding_window_pattern", GEMMA3_PATTERN), whole_float=True
    )
    return ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(layers)]


def _gemma3_rope_parameters(data: Dict[str, Any]) -> Dict[str, Any]:
    """A Gemma 3 ``config.json`` with ``rope_local_base_freq`` as per-type rope dicts, as
    ``transformers``' ``Gemma3TextConfig`` reads it: the local layers the default type at the local
    base, the global layers ``rope_scaling`` (or the default type) at ``rope_theta``."""
    out = {k: v for k, v in data.items() if k not in ("rope_scaling", "rope_parameters")}
    scaling = data.get("rope_scaling") or data.get("rope_parameters") or {}
    full = {**scaling, "rope_theta": scaling.get("rope_theta", data.get("rope_theta", GEMMA3_GLOBAL_BASE))}
    full.setdefault("rope_type", full.pop("type", "default"))
    local = data.get("rope_local_base_freq")
    sliding = {"rope_type": "default", "rope_theta": GEMMA3_LOCAL_BASE if local is None else local}
    out["rope_parameters"] = {"sliding_attention": sliding, "full_attention": full}
    return out
