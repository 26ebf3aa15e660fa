"""Hugging Face ``config.json`` rope fields <-> :class:`~posenc.rope.RotaryEmbedding` arguments.

This is the core of posenc's Hugging Face interop; it needs no ``transformers`` (a config object is
read through its ``to_dict()``). :mod:`posenc.hf` re-exports it as the public entry point.

Configs describe RoPE with a handful of fields spread over the config, in two generations:

* legacy (most ``config.json`` files on the Hub): top-level ``rope_theta`` and
  ``partial_rotary_factor``, and a ``rope_scaling`` dict whose type is in ``type`` (oldest) or
  ``rope_type``;
* new style (transformers 5): one ``rope_parameters`` dict that also holds ``rope_theta`` and
  ``partial_rotary_factor``.

The head size is ``qk_rope_head_dim`` (DeepSeek) or ``head_dim`` if set, else ``hidden_size //
num_attention_heads`` (GPT-J: ``n_embd // n_head``); the rotated width is ``int(head_dim *
partial_rotary_factor)`` (GPT-NeoX: ``rotary_pct``), or an explicit top-level ``rotary_dim`` (GPT-J).
``rope_theta`` (GPT-NeoX: ``rotary_emb_base``) defaults to 10000, as in ``transformers``; a value
inside the rope dict takes precedence over the top-level one, also as in ``transformers``.

Everything specific to one rope type (its keys, their defaults, where its trained length comes from,
its older spellings) is in its :class:`~posenc.rope.registry.ScalingDescriptor`; this module only loops
over the registry.

Reading is strict. Numbers must be numbers: a string (``"64"``), a bool, NaN or infinity is refused, and
so is a whole-number field with a fractional part (``head_dim=64.9`` is not truncated). Lengths and
factors must be positive. A config holding both ``rope_parameters`` and ``rope_scaling`` must have them
agree: ``transformers`` 5 silently keeps ``rope_scaling`` and drops ``rope_parameters``, which is rarely
what the author meant, so posenc raises instead. Every refusal is a ``ValueError`` naming the field and
the value (a ``TypeError`` when the config itself is not a dict or a config object).

A ``config.json`` dict is read as written and a ``transformers`` config object as built. They differ
in one respect: some families spell a rope type with another type's name in their files (Phi-3 and
Phi-4-multimodal write ``"yarn"`` for LongRoPE), which ``transformers`` translates when it builds
the config; a built config's ``rope_type`` is what its rotary module runs, so a ``"yarn"`` set
on a Phi-3 config object afterwards is YaRN, in ``transformers`` and here.

Checkpoints on the Hub use the half-split layout except GPT-J and DeepSeek-V2/V3 (``rope_interleave``),
whose q/k rows are in interleaved pair order.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

from .._checks import MAX_EXACT_INT, check_config_float, check_config_int
from .registry import REGISTRY, HFRope, ScalingDescriptor, descriptor_of, resolve_name

DEFAULT_THETA = 10000.0
DEFAULT_MAX_POSITIONS = 2048
#: the largest head size read from a config: far above the heads of published models (64 to 512), and
#: small enough that a hostile config cannot make the module build tables of many gigabytes
MAX_HEAD_DIM = 8192
#: model types whose checkpoints keep q/k rows in interleaved pair order
INTERLEAVED_MODEL_TYPES = frozenset({"gptj", "deepseek_v2", "deepseek_v3"})


#: rope fields a ``transformers`` config object may hold outside ``to_dict()`` (properties and
#: attribute maps); :func:`config_dict` reads them as attributes
CONFIG_ATTRIBUTES = (
    "head_dim",
    "rope_parameters",
    "rope_scaling",
    "rope_theta",
    "partial_rotary_factor",
    "original_max_position_embeddings",
)


def config_dict(config: Any) -> Dict[str, Any]:
    """The fields of a ``transformers`` config object as a plain dict (:data:`CONFIG_ATTRIBUTES`
    included), or a copy of a ``config.json`` dict."""
    if isinstance(config, dict):
        return dict(config)
    if not hasattr(config, "to_dict"):
        raise TypeError(f"config must be a transformers config or a dict, got {type(config).__name__}")
    data = dict(config.to_dict())
    for key in CONFIG_ATTRIBUTES:
        if hasattr(config, key):
            data[key] = getattr(config, key)
    # names the config class maps to the fields it stores (DBRX keeps hidden_size as d_model)
    for alias in getattr(type(config), "attribute_map", None) or {}:
        if alias not in data and hasattr(config, alias):
            data[alias] = getattr(config, alias)
    return data


class ConfigFields:
    """Uniform read access to a ``transformers`` config object or a plain ``config.json`` dict.

    ``built`` tells the two apart where they mean different things: a dict is a config as written,
    whose rope type may be a family's older spelling that ``transformers`` translates when it builds
    the config (Phi-3's ``"yarn"`` for LongRoPE); a config object is built, and its rotary module runs
    the ``rope_type`` it holds as it stands (a ``"yarn"`` set on a Phi-3 config after it was built is
    YaRN).
    """

    def __init__(self, config: Any) -> None:
        self.built = not isinstance(config, dict)
        self.data: Dict[str, Any] = config if isinstance(config, dict) else config_dict(config)
        text = self.data.get("text_config")
        if not self.has_shape() and isinstance(text, dict):
            self.data = {**text}
        elif not self.has_shape() and text is not None and hasattr(text, "to_dict"):
            self.data = ConfigFields(text).data

    def has_shape(self) -> bool:
        return any(self.get(k) is not None for k in ("head_dim", "hidden_size", "n_embd", "qk_rope_head_dim"))

    def get(self, key: str, default: Any = None) -> Any:
        value = self.data.get(key, default)
        return default if value is None else value


def _normalised(rope: Dict[str, Any], fields: ConfigFields) -> Dict[str, Any]:
    """A rope dict as the model would use it: ``type`` spelt ``rope_type``, ``rope_theta`` and
    ``partial_rotary_factor`` filled from the top level when absent (as ``transformers`` does)."""
    out = dict(rope)
    if "type" in out:
        out.setdefault("rope_type", out.pop("type"))
    out.setdefault("rope_type", "default")
    out.setdefault("rope_theta", fields.get("rope_theta", DEFAULT_THETA))
    partial = fields.get("partial_rotary_factor")
    if partial is not None:
        out.setdefault("partial_rotary_factor", partial)
    return out


def _choose_rope(fields: ConfigFields) -> Dict[str, Any]:
    params, legacy = fields.get("rope_parameters"), fields.get("rope_scaling")
    for name, value in (("rope_parameters", params), ("rope_scaling", legacy)):
        if value is not None and not isinstance(value, dict):
            raise ValueError(f"config field {name} must be a dict or null, got {value!r}")
    if params and legacy:
        a, b = _normalised(params, fields), _normalised(legacy, fields)
        shown = lambda d, key: repr(d[key]) if key in d else "absent"
        for key in ["rope_type"] + sorted(set(a) | set(b) - {"rope_type"}, key=str):
            if key not in a or key not in b or a[key] != b[key]:
                raise ValueError(
                    f"config fields rope_parameters and rope_scaling disagree on {key!r}: "
                    f"{shown(a, key)} vs {shown(b, key)} (transformers 5 silently uses rope_scaling and "
                    f"drops rope_parameters); keep only one of them"
                )
    return params or legacy or {}


def _beside_layer_types(rope: Dict[str, Any]) -> List[str]:
    """The plain keys of a rope dict that also holds per-layer-type dicts, sorted ([] for other dicts)."""
    if not any(isinstance(v, dict) for v in rope.values()):
        return []
    return sorted((k for k, v in rope.items() if v is not None and not isinstance(v, dict)), key=str)


def rope_keys_beside_layer_types(config: Any) -> List[str]:
    """Plain keys of a config's rope dict beside its per-layer-type dicts, sorted.

    ``transformers`` reads a layer type's rope from ``rope_parameters[layer_type]`` alone (Gemma 3's
    rotary module, ``ROPE_INIT_FUNCTIONS`` given a ``layer_type``); its standardisation and validation
    look at the per-layer-type dicts only. Keys set beside them, as ``config.rope_parameters.update(
    {"rope_type": "yarn", "factor": 8.0})`` on a Gemma 3 config does, change nothing there; so in
    posenc with ``strict=False`` (``strict=True`` refuses them).
    """
    return _beside_layer_types(_choose_rope(ConfigFields(config)))


def _rope_dict(fields: ConfigFields, layer_type: Optional[str], strict: bool = True) -> Dict[str, Any]:
    rope = _choose_rope(fields)
    nested = {k: v for k, v in rope.items() if isinstance(v, dict)}
    if nested:
        # a layer type mapped to None has no rope (Beam's NoPE 'full_attention' layers)
        nope = sorted((k for k, v in rope.items() if v is None), key=str)
        plain = _beside_layer_types(rope)
        if layer_type is not None and layer_type in nope:
            raise ValueError(
                f"layer_type {layer_type!r} has no rope dict (None: those layers use no position encoding); "
                f"the rotary layer types are {sorted(nested, key=str)}"
            )
        if plain and (strict or layer_type is None):
            raise ValueError(
                f"the rope dict mixes per-layer-type dicts {sorted(nested, key=str)} with plain "
                f"keys {plain}; give one or the other"
                + (
                    " (with layer_type= and strict=False the plain keys are ignored, as transformers ignores them)"
                    if strict
                    else ""
                )
            )
        if layer_type is None:
            raise ValueError(
                f"this config has one rope dict per layer type {sorted(nested, key=str)}; pass "
                "layer_type= to choose one"
            )
        if layer_type not in nested:
            raise ValueError(f"layer_type must be one of {sorted(nested, key=str)}, got {layer_type!r}")
        return dict(nested[layer_type])
    if layer_type is not None:
        raise ValueError(f"layer_type={layer_type!r} given but the config has a single rope dict")
    return dict(rope)


def rope_dicts(config: Any) -> Dict[Optional[str], Dict[str, Any]]:
    """Every rope dict of a config, by layer type (``{None: dict}`` for a config with a single one).

    The dicts are as written (no defaults filled in); the same precedence and conflict rules as
    :func:`rotary_kwargs_from_hf` apply.
    """
    rope = _choose_rope(ConfigFields(config))
    nested = {k: dict(v) for k, v in rope.items() if isinstance(v, dict)}
    if nested:
        return {k: nested[k] for k in sorted(nested, key=str)}
    return {None: dict(rope)}


def _head_dim(fields: ConfigFields) -> int:
    for key in ("qk_rope_head_dim", "head_dim"):
        if fields.get(key) is not None:
            return _bounded_head_dim(key, fields.get(key))
    hidden_key = "hidden_size" if fields.get("hidden_size") is not None else "n_embd"
    heads_key = "num_attention_heads" if fields.get("num_attention_heads") is not None else "n_head"
    hidden, heads = fields.get(hidden_key), fields.get(heads_key)
    if hidden is None or heads is None:
        raise ValueError("config must give head_dim, or hidden_size and num_attention_heads")
    hidden, heads = _whole(hidden_key, hidden), _whole(heads_key, heads)
    if hidden % heads:
        raise ValueError(f"config field {hidden_key}={hidden} is not divisible by {heads_key}={heads}")
    return _bounded_head_dim(f"{hidden_key} // {heads_key}", hidden // heads)


def _bounded_head_dim(name: str, value: object) -> int:
    return _whole(name, value, minimum=2, maximum=MAX_HEAD_DIM)


def _whole(key: str, value: object, minimum: int = 1, maximum: int = MAX_EXACT_INT) -> int:
    """A whole-number field of a config (``64.0`` is 64, ``64.9`` is refused)."""
    return check_config_int(f"config field {key}", value, minimum=minimum, maximum=maximum, whole_float=True)


def rotary_kwargs_from_hf(config: Any, layer_type: Optional[str] = None, strict: bool = True) -> Dict[str, Any]:
    """Keyword arguments of :class:`posenc.rope.RotaryEmbedding` for a ``transformers`` config.

    Args:
        config: a ``PretrainedConfig`` or the dict of a ``config.json``.
        layer_type: for configs with one rope dict per layer type (Gemma 3, gpt-oss style nesting).
        strict: raise on keys the rope type does not use (a misspelt key would otherwise change
            nothing, silently), and on plain keys beside per-layer-type dicts, which no layer type
            uses (:func:`rope_keys_beside_layer_types`). Values are always checked.

    Returns:
        ``head_dim``, ``base``, ``rotary_dim``, ``layout``, ``scaling`` (``None`` for the default type) and
        ``max_position_embeddings``.
    """
    fields = ConfigFields(config)
    rope = _rope_dict(fields, layer_type, strict)
    descriptor = _descriptor(rope, fields)
    if strict:
        unknown = _unused_keys(rope, descriptor)
        if unknown:
            raise ValueError(
                f"{descriptor.name!r} rope dict has keys it does not use: {unknown} (allowed: "
                f"{sorted(descriptor.allowed_hf_keys())}); rotary_kwargs_from_hf(config, strict=False) ignores "
                "them, as transformers does with a warning"
            )
    model_type = fields.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise ValueError(f"config field model_type must be a string, got {model_type!r}")

    base = _base(rope, fields)
    head_dim = _head_dim(fields)
    partial = _partial(rope, fields)
    positions_key = "max_position_embeddings" if fields.get("max_position_embeddings") is not None else "n_positions"
    max_positions = _whole(positions_key, fields.get(positions_key, DEFAULT_MAX_POSITIONS))
    rotary_dim = _rotary_dim(fields, descriptor, head_dim, partial)

    ctx = HFRope(descriptor.name, rope, fields.data, head_dim, partial, max_positions)
    scaling = descriptor.read_hf(ctx)
    descriptor.validate(scaling, rotary_dim)
    return {
        "head_dim": head_dim,
        "base": base,
        "rotary_dim": rotary_dim,
        "layout": "interleaved" if _interleaved(fields, model_type) else "half",
        "scaling": None if descriptor.name == "default" else scaling,
        "max_position_embeddings": max_positions,
    }


def _base(rope: Dict[str, Any], fields: ConfigFields) -> float:
    """The rotary base: the rope dict's ``rope_theta``, else the config's, else GPT-NeoX's ``rotary_emb_base``."""
    base_key = (
        "rope_theta"
        if rope.get("rope_theta") is not None or fields.get("rope_theta") is not None
        else "rotary_emb_base"
    )
    base = rope.get("rope_theta")
    if base is None:
        base = fields.get("rope_theta", fields.get("rotary_emb_base", DEFAULT_THETA))
    return check_config_float(f"config field {base_key}", base, greater_than=1.0)


def _partial(rope: Dict[str, Any], fields: ConfigFields) -> float:
    """The rotated fraction of the head: ``partial_rotary_factor`` (rope dict first), else ``rotary_pct``, else 1."""
    partial_key = "partial_rotary_factor"
    partial = rope.get("partial_rotary_factor")
    if partial is None:
        partial = fields.get("partial_rotary_factor")
        if partial is None and fields.get("rotary_pct") is not None:
            partial_key, partial = "rotary_pct", fields.get("rotary_pct")
    if partial is None:
        return 1.0
    return check_config_float(f"config field {partial_key}", partial, greater_than=0.0, maximum=1.0)


def _rotary_dim(fields: ConfigFields, descriptor: ScalingDescriptor, head_dim: int, partial: float) -> int:
    """The rotated width, as transformers computes it, checked to be even and within the head."""
    explicit = fields.get("rotary_dim")  # GPT-J style: an explicit width
    if explicit is not None:
        rotary_dim = _whole("rotary_dim", explicit, minimum=2)
    elif descriptor.transformers.rotary_fraction_field is not None:
        rotary_dim = head_dim  # the scaling leaves pairs unrotated itself
    else:
        # transformers' rope functions take int(config.head_dim * partial_rotary_factor); an MLA config
        # whose head_dim is not its rotated qk_rope_head_dim (Dots 3: 256 and 64) gives the factor against it
        whole = fields.get("head_dim") if fields.get("qk_rope_head_dim") is not None else None
        rotary_dim = int((whole if isinstance(whole, int) and whole > head_dim else head_dim) * partial)
    if rotary_dim < 2 or rotary_dim % 2 or rotary_dim > head_dim:
        raise ValueError(
            f"the rotated width int(head_dim * partial_rotary_factor) = int({head_dim} * "
            f"{partial!r}) = {rotary_dim} must be an even number from 2 to head_dim"
            if explicit is None
            else f"config field rotary_dim must be an even number from 2 to head_dim={head_dim}, got {rotary_dim}"
        )
    return rotary_dim


def _interleaved(fields: ConfigFields, model_type: Optional[str]) -> bool:
    """Whether pairs are adjacent: the config's ``rope_interleave``, else the model type's known layout."""
    interleaved = fields.data.get("rope_interleave")
    if interleaved is None:
        return model_type in INTERLEAVED_MODEL_TYPES
    if not isinstance(interleaved, bool):
        raise ValueError(f"config field rope_interleave must be true or false, got {interleaved!r}")
    return interleaved


def _descriptor(rope: Dict[str, Any], fields: ConfigFields) -> ScalingDescriptor:
    raw_type = rope.get("rope_type", rope.get("type"))
    raw_type = "default" if raw_type is None else raw_type
    # a family's own spellings are translated when transformers builds the config, not after
    model_type = None if fields.built else fields.get("model_type")
    return REGISTRY[resolve_name(raw_type, model_type if isinstance(model_type, str) else None)]


def _unused_keys(rope: Dict[str, Any], descriptor: ScalingDescriptor) -> List[str]:
    allowed = descriptor.allowed_hf_keys()
    return sorted((k for k in rope if k not in allowed), key=str)


def unused_rope_keys(config: Any, layer_type: Optional[str] = None) -> List[str]:
    """Keys of the config's rope dict that its rope type does not use, sorted.

    ``transformers`` accepts them with a warning (a ``default`` dict holding
    ``original_max_position_embeddings``, yarn keys left over after a switch to ``linear``); so does
    ``rotary_kwargs_from_hf(config, strict=False)``. A misspelt key is among them: it changes nothing.
    With ``layer_type``, the keys of that layer type's own dict (plain keys beside the per-layer-type
    dicts are :func:`rope_keys_beside_layer_types`).
    """
    fields = ConfigFields(config)
    rope = _rope_dict(fields, layer_type, strict=False)
    return _unused_keys(rope, _descriptor(rope, fields))


def scaling_from_hf(config: Any, layer_type: Optional[str] = None, strict: bool = True) -> Any:
    """The posenc scaling config a ``transformers`` config (object or dict) describes (``None`` for
    the default rope type); see :func:`rotary_kwargs_from_hf`."""
    return rotary_kwargs_from_hf(config, layer_type, strict)["scaling"]


def to_hf_dict(rope: Any, style: str = "rope_parameters") -> Dict[str, Any]:
    """The rope-related ``config.json`` fields of a :class:`posenc.rope.RotaryEmbedding`.

    Args:
        rope: the module (or any object with ``head_dim``, ``rotary_dim``, ``base``, ``scaling``,
            ``max_position_embeddings`` and optionally ``layout``).
        style: ``"rope_parameters"`` (transformers 5: ``rope_theta`` inside the dict) or
            ``"rope_scaling"`` (legacy: top-level ``rope_theta``, ``rope_scaling`` null for default).

    ``rotary_kwargs_from_hf(to_hf_dict(rope))`` gives back the module's arguments, with two rules that
    follow from what configs can say: a ``dynamic`` scaling's trained length is written as
    ``max_position_embeddings`` (``transformers`` reads it from there), so the module's own
    ``max_position_embeddings`` comes back as that length; a LongRoPE config with neither ``factor`` nor
    ``attention_factor`` is written with its attention factor pinned (a reader would otherwise derive a
    factor from the context lengths), so it comes back with ``attention_factor`` set to the same value.
    The interleaved layout is written as ``rope_interleave: true`` (DeepSeek's field). A rotated width
    that ``partial_rotary_factor`` cannot express (proportional scaling on part of the head) is written
    as a top-level ``rotary_dim`` (GPT-J's field), which ``transformers`` reads for GPT-J only.
    """
    if style not in ("rope_parameters", "rope_scaling"):
        raise ValueError(f"style must be 'rope_parameters' or 'rope_scaling', got {style!r}")
    descriptor = descriptor_of(rope.scaling)
    scaling = rope.scaling if rope.scaling is not None else descriptor.config_class()
    fields, top = descriptor.write_hf(scaling)
    params: Dict[str, Any] = {"rope_type": descriptor.name, **{k: fields[k] for k in sorted(fields)}}
    out: Dict[str, Any] = {"head_dim": rope.head_dim, "max_position_embeddings": rope.max_position_embeddings}
    out.update(top)
    if descriptor.transformers.rotary_fraction_field is not None:
        partial = getattr(scaling, descriptor.transformers.rotary_fraction_field)
        if rope.rotary_dim != rope.head_dim:
            out["rotary_dim"] = rope.rotary_dim
    else:
        partial = rope.rotary_dim / rope.head_dim
        while int(rope.head_dim * partial) < rope.rotary_dim:  # readers take int(head_dim * factor)
            partial = math.nextafter(partial, math.inf)
    if getattr(rope, "layout", "half") == "interleaved":
        out["rope_interleave"] = True
    if style == "rope_parameters":
        params["rope_theta"] = rope.base
        if partial != 1.0:
            params["partial_rotary_factor"] = partial
        out["rope_parameters"] = params
    else:
        out["rope_theta"] = rope.base
        if partial != 1.0:
            out["partial_rotary_factor"] = partial
        out["rope_scaling"] = None if descriptor.name == "default" else params
    return {key: out[key] for key in sorted(out)}
