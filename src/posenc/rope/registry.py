"""The scaling registry: one :class:`ScalingDescriptor` per rope type, and everything that loops over it.

A descriptor holds the facts about one rope type: its name (one spelling, the Hugging Face
``rope_type``), its frozen config class (whose ``validate(rotary_dim)`` is the validator), its pure
frequency function, whether its frequencies depend on the current length, the softmax-scale factor it
needs outside the tables, its parameter space (the numeric fields one may vary, with ranges and
steps), the wavelengths bounding its ramp, how it is set for a context-extension ratio, and, in one
field (:class:`TransformersSpelling`), how Hugging Face configs and ``transformers`` spell it. Nothing
here is presentation (labels, colours, what a page shows first: :mod:`posenc.teaching.lesson.palette`) or an
app's choice (how the lab picks a factor for a length: :mod:`posenc.runs.extension`).

The library's own scalings are registered by :mod:`posenc.rope.scaling`; code outside the package adds
one with :func:`register_scaling`::

    from dataclasses import dataclass
    from typing import ClassVar
    from posenc.rope.registry import ScalingDescriptor, register_scaling

    @dataclass(frozen=True)
    class HalfSpeed:
        factor: float = 2.0
        rope_type: ClassVar[str] = "half_speed"
        def validate(self, rotary_dim): ...

    register_scaling(ScalingDescriptor("half_speed", HalfSpeed, my_frequencies, summary=..., source=...))

Hugging Face interop (:mod:`posenc.rope.hfconfig`), the explorer, the lab, eval and the docs tables
read the registry, so the new type round-trips through ``config.json`` dicts, appears in the explorer
and is a ``posenc lab --extension-methods`` choice without further edits (see CONTRIBUTING.md).
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Set as AbstractSet
from dataclasses import MISSING, dataclass, field
from typing import (
    Any,
    Callable,
    Dict,
    FrozenSet,
    Iterable,
    Iterator,
    Mapping,
    Optional,
    Set,
    Tuple,
    Type,
)

import torch

from .._checks import check_config_float, check_config_int

Frequencies = Tuple[torch.Tensor, float]

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
#: keys of a rope dict that belong to the whole rotary embedding, not to one scaling
COMMON_HF_KEYS = frozenset({"rope_type", "type", "rope_theta", "partial_rotary_factor"})


# -- the parameter space -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Parameter:
    """One numeric field of a scaling config that one may vary, with its range and step.

    ``name`` is the config field (and Hugging Face key); ``minimum <= default <= maximum``, and values
    between are reached in multiples of ``step`` (the explorer's sliders, ``posenc eval --search``).
    """

    name: str
    minimum: float
    maximum: float
    step: float
    default: float

    def __post_init__(self) -> None:
        for key in ("minimum", "maximum", "step", "default"):
            check_config_float(f"Parameter {self.name!r}: {key}", getattr(self, key))
        if not self.minimum <= self.default <= self.maximum or not self.step > 0:
            raise ValueError(
                f"Parameter {self.name!r}: need minimum <= default <= maximum and step > 0, got "
                f"{self.minimum}, {self.default}, {self.maximum}, step {self.step}"
            )


# -- Hugging Face reading context ----------------------------------------------------------------------
@dataclass(frozen=True)
class HFRope:
    """What a descriptor's Hugging Face reader sees: the rope dict of one layer type and the config.

    Attributes:
        rope_type: the registered name the dict resolved to.
        rope: the rope dict (``rope_parameters`` or ``rope_scaling``), as given.
        config: the whole config as a dict (``text_config`` already unwrapped).
        head_dim: features per head.
        partial: ``partial_rotary_factor`` (1 when absent).
        max_positions: ``max_position_embeddings`` (or ``n_positions``, or 2048).
    """

    rope_type: str
    rope: Mapping[str, Any]
    config: Mapping[str, Any]
    head_dim: int
    partial: float
    max_positions: int

    def get(self, key: str, default: Any = None) -> Any:
        """``rope[key]`` when present and not null, else ``default``."""
        value = self.rope.get(key)
        return default if value is None else value

    def require(self, key: str) -> Any:
        """``rope[key]``, or a ``ValueError`` naming the rope type and the missing key."""
        value = self.rope.get(key)
        if value is None:
            raise ValueError(f"{self.rope_type!r} rope dict is missing its required key {key!r}")
        return value

    def original(self) -> int:
        """The trained length ``original_max_position_embeddings``: from the top level of the config
        (Phi-3 keeps it there, and ``transformers`` gives it precedence), else the rope dict, else
        ``max_position_embeddings``."""
        top = self.config.get("original_max_position_embeddings")
        if top is not None:
            return check_config_int("config field original_max_position_embeddings", top, whole_float=True)
        inner = self.rope.get("original_max_position_embeddings")
        if inner is not None:
            return check_config_int(
                "config field original_max_position_embeddings (in the rope dict)", inner, whole_float=True
            )
        return self.max_positions

    def ratio(self, original: int) -> float:
        """``factor`` when given (a finite number >= 1), else ``max_positions / original``, the
        context-extension ratio ``transformers`` derives (which must then be >= 1 too)."""
        factor = self.rope.get("factor")
        if factor is not None:
            return check_config_float("config field factor", factor, minimum=1.0)
        derived = self.max_positions / original
        if derived < 1:
            raise ValueError(
                f"{self.rope_type!r} rope dict has no factor, and the one derived from the "
                f"lengths, max_position_embeddings / original_max_position_embeddings = "
                f"{self.max_positions} / {original}, is below 1; give factor"
            )
        return derived


@dataclass(frozen=True)
class TransformersSpelling:
    """How Hugging Face configs and ``transformers`` spell one rope type.

    Attributes:
        aliases: older names of the type still found in published configs (``"su"`` for longrope).
        model_type_aliases: ``{model_type: name}`` for configs of one model family that spell this type
            with another type's name (Phi-3 writes ``"yarn"`` for LongRoPE); applied to ``config.json``
            dicts only, as ``transformers`` translates them when it builds a config.
        keys: the keys a rope dict of this type may hold besides :data:`COMMON_HF_KEYS`; ``None``
            means the config's field names.
        read: ``HFRope -> config``; ``None`` reads each config field from the rope dict by name, with
            the dataclass defaults.
        write: ``config -> (rope dict fields, top-level config fields)``; ``None`` writes every field
            that is not ``None`` under its own name.
        rotary_fraction_field: the config field that holds ``partial_rotary_factor`` for types whose
            table spans the whole head and leave pairs unrotated themselves (Gemma 4's proportional).
        known: ``transformers`` knows this ``rope_type``.
        equivalent: for types ``transformers`` lacks: ``(config, base, rotary_dim) -> (base, config or
            None, explanation)``, an equal configuration it can load.
    """

    aliases: Tuple[str, ...] = ()
    model_type_aliases: Mapping[str, str] = field(default_factory=dict)
    keys: Optional[FrozenSet[str]] = None
    read: Optional[Callable[[HFRope], Any]] = None
    write: Optional[Callable[[Any], Tuple[Dict[str, Any], Dict[str, Any]]]] = None
    rotary_fraction_field: Optional[str] = None
    known: bool = True
    equivalent: Optional[Callable[[Any, float, int], Tuple[float, Any, str]]] = None


# -- the descriptor ------------------------------------------------------------------------------------
def _one(config: Any) -> float:
    return 1.0


def config_fields(config_class: Any) -> Tuple[dataclasses.Field[Any], ...]:
    """The dataclass fields of a scaling config class (``rope_type`` is a ClassVar, so not among them)."""
    return dataclasses.fields(config_class)


@dataclass(frozen=True)
class ScalingDescriptor:
    """The facts about one rope type.

    Args:
        name: the rope type, as in Hugging Face ``rope_type`` (lower case, ``[a-z][a-z0-9_]*``); the
            config class's ``rope_type`` class variable must equal it.
        config_class: a frozen dataclass with ``validate(rotary_dim)`` that raises ``ValueError``.
        frequencies: the pure function ``(config, rotary_dim, base, seq_len=None) -> (inv_freq,
            attention_factor)``, float64 ``inv_freq`` of shape (rotary_dim // 2,).
        summary: one line for the docs table: what happens to ``theta_i``.
        source: where the method comes from (paper, model, config field names).
        length_dependent: the frequencies change with the current length (the config class must then
            have ``original_max_position_embeddings``: up to it the length-free frequencies apply).
        softmax_scale: ``config -> float``, what the attention must multiply ``1/sqrt(d)`` by outside
            the rotary tables (DeepSeek's YaRN); 1 for most types.
        parameters: the parameter space: the config fields one may vary, each a :class:`Parameter`
            with its range and step (a name shared by two types must be defined alike, which
            :func:`register_scaling` checks).
        ramp: for a rule "keep, ramp, divide by factor" (YaRN, Llama 3): ``config -> (keep_below,
            divide_above)``, the wavelengths bounding the ramp; ``None`` for other rules.
        extension: ``(factor, original) -> config``: the type set to stretch a context trained on
            ``original`` positions ``factor`` times, its other fields at their published values;
            ``None`` when a ratio alone does not define it (LongRoPE's searched factors).
        transformers: how Hugging Face configs and ``transformers`` spell the type.
    """

    name: str
    config_class: Type[Any]
    frequencies: Callable[..., Frequencies]
    summary: str
    source: str
    length_dependent: bool = False
    softmax_scale: Callable[[Any], float] = _one
    parameters: Tuple[Parameter, ...] = ()
    ramp: Optional[Callable[[Any], Tuple[float, float]]] = None
    extension: Optional[Callable[[float, int], Any]] = None
    transformers: TransformersSpelling = field(default_factory=TransformersSpelling)

    def __post_init__(self) -> None:
        parameters = tuple(self.parameters)
        if not all(isinstance(p, Parameter) for p in parameters):
            raise ValueError(f"{self.name!r}: parameters must be Parameter instances, got {parameters!r}")
        object.__setattr__(self, "parameters", parameters)

    # -- the validator and the pure function --------------------------------------------------------
    def validate(self, config: Any, rotary_dim: Optional[int] = None) -> None:
        """Raise ``ValueError`` unless ``config`` is a valid config of this type for ``rotary_dim``."""
        if not isinstance(config, self.config_class):
            raise ValueError(f"{self.name!r} scaling: config must be a {self.config_class.__name__}, got {config!r}")
        config.validate(rotary_dim)

    # -- Hugging Face -------------------------------------------------------------------------------
    def allowed_hf_keys(self) -> FrozenSet[str]:
        """Keys a rope dict of this type may hold, the common ones included."""
        spelling = self.transformers
        own = (
            spelling.keys if spelling.keys is not None else frozenset(f.name for f in config_fields(self.config_class))
        )
        return frozenset(own - {spelling.rotary_fraction_field}) | COMMON_HF_KEYS

    def read_hf(self, ctx: HFRope) -> Any:
        """The config a rope dict describes (validated)."""
        if self.transformers.read is not None:
            return self.transformers.read(ctx)
        kwargs: Dict[str, Any] = {}
        for f in config_fields(self.config_class):
            if f.name == self.transformers.rotary_fraction_field:
                kwargs[f.name] = ctx.partial
                continue
            value = ctx.rope.get(f.name)
            if value is None:
                if f.default is MISSING and f.default_factory is MISSING:
                    ctx.require(f.name)
                continue
            kwargs[f.name] = list(value) if isinstance(value, tuple) else value
        return self.config_class(**kwargs)

    def write_hf(self, config: Any) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        """``(rope dict fields without rope_type, top-level config fields)`` describing ``config``."""
        if self.transformers.write is not None:
            rope, top = self.transformers.write(config)
            return dict(rope), dict(top)
        return config_to_fields(config, skip=(self.transformers.rotary_fraction_field,)), {}


def config_to_fields(config: Any, skip: Iterable[Optional[str]] = ()) -> Dict[str, Any]:
    """``{field: value}`` of a config dataclass, without ``None`` values, tuples as lists."""
    out: Dict[str, Any] = {}
    for f in config_fields(type(config)):
        if f.name in skip:
            continue
        value = getattr(config, f.name)
        if value is not None:
            out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


# -- the registry -------------------------------------------------------------------------------------
#: rope type -> descriptor, in registration order (the order tables and pages list them in)
REGISTRY: Dict[str, ScalingDescriptor] = {}
#: older spelling -> registered name
ALIASES: Dict[str, str] = {}
_BUILTIN: Set[str] = set()
_LOCK = threading.Lock()


def register_scaling(descriptor: ScalingDescriptor, *, builtin: bool = False) -> ScalingDescriptor:
    """Add a rope type to the registry; returns the descriptor.

    ``builtin=True`` (posenc's own types) keeps the type from being unregistered.

    Raises ``ValueError`` if the name or an alias is taken or malformed, or if the config class does
    not fit the descriptor (a dataclass whose ``rope_type`` is ``name``, with ``validate``; a
    length-dependent type needs ``original_max_position_embeddings``), and ``TypeError`` if
    ``descriptor`` is not a :class:`ScalingDescriptor`.
    """
    if not isinstance(descriptor, ScalingDescriptor):
        raise TypeError(f"descriptor must be a ScalingDescriptor, got {type(descriptor).__name__}")
    name, cls = descriptor.name, descriptor.config_class
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"scaling name must match [a-z][a-z0-9_]* (at most 40 characters), got {name!r}")
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise ValueError(f"{name!r}: config_class must be a dataclass, got {cls!r}")
    if getattr(cls, "rope_type", None) != name:
        raise ValueError(f"{name!r}: config_class.rope_type must be {name!r}, got {getattr(cls, 'rope_type', None)!r}")
    if not callable(getattr(cls, "validate", None)) or not callable(descriptor.frequencies):
        raise ValueError(f"{name!r}: config_class needs a validate(rotary_dim) method and frequencies must be callable")
    field_names = {f.name for f in config_fields(cls)}
    if descriptor.length_dependent and "original_max_position_embeddings" not in field_names:
        raise ValueError(
            f"{name!r}: a length-dependent scaling needs the field "
            "original_max_position_embeddings (the length up to which it is length-free)"
        )
    fraction = descriptor.transformers.rotary_fraction_field
    if fraction is not None and fraction not in field_names:
        raise ValueError(f"{name!r}: rotary_fraction_field {fraction!r} is not a field of {cls.__name__}")
    own = descriptor.parameters
    for parameter in own:
        if parameter.name not in field_names:
            raise ValueError(f"{name!r}: parameter {parameter.name!r} is not a field of {cls.__name__}")
    with _LOCK:
        shared = scaling_parameters()
        for parameter in own:
            if parameter.name in shared and shared[parameter.name] != parameter:
                raise ValueError(
                    f"{name!r}: parameter {parameter!r} differs from the registered {shared[parameter.name]!r}; "
                    "a name shared by two scalings is one parameter, so define it alike"
                )
        taken = set(REGISTRY) | set(ALIASES)
        for spelling in (name, *descriptor.transformers.aliases):
            if not isinstance(spelling, str) or not _NAME.match(spelling):
                raise ValueError(f"{name!r}: alias {spelling!r} must match [a-z][a-z0-9_]*")
            if spelling in taken:
                raise ValueError(f"rope type {spelling!r} is already registered; unregister_scaling it first")
        REGISTRY[name] = descriptor
        for alias in descriptor.transformers.aliases:
            ALIASES[alias] = name
        if builtin:
            _BUILTIN.add(name)
    return descriptor


def unregister_scaling(name: str) -> ScalingDescriptor:
    """Remove a rope type added with :func:`register_scaling` (posenc's own types stay)."""
    with _LOCK:
        if name in _BUILTIN:
            raise ValueError(f"{name!r} is one of posenc's own scalings and cannot be unregistered")
        if name not in REGISTRY:
            raise ValueError(f"{name!r} is not registered; registered: {sorted(REGISTRY)}")
        descriptor = REGISTRY.pop(name)
        for alias in descriptor.transformers.aliases:
            ALIASES.pop(alias, None)
    return descriptor


def resolve_name(name: object, model_type: Optional[str] = None) -> str:
    """The registered name for ``name`` (aliases and per-model spellings resolved), or ``ValueError``."""
    if not isinstance(name, str):
        raise ValueError(f"rope_type must be a string, one of {sorted(REGISTRY)}, got {name!r}")
    if model_type is not None:
        for desc in REGISTRY.values():
            if desc.transformers.model_type_aliases.get(model_type) == name:
                return desc.name
    name = ALIASES.get(name, name)
    if name not in REGISTRY:
        extra = f" (or the older spellings {sorted(ALIASES)})" if ALIASES else ""
        raise ValueError(f"rope_type must be one of {sorted(REGISTRY)}{extra}, got {name!r}")
    return name


def get_descriptor(name: str) -> ScalingDescriptor:
    """The descriptor of a rope type (aliases accepted)."""
    return REGISTRY[resolve_name(name)]


def descriptor_of(config: Any) -> ScalingDescriptor:
    """The descriptor of a config instance (``None`` is the default type)."""
    if config is None:
        return REGISTRY["default"]
    rope_type = getattr(type(config), "rope_type", None)
    desc = REGISTRY.get(rope_type) if isinstance(rope_type, str) else None
    if desc is None or not isinstance(config, desc.config_class):
        raise ValueError(f"scaling must be a config of a registered rope type {sorted(REGISTRY)}, got {config!r}")
    return desc


def softmax_scale(config: Any) -> float:
    """What the attention must multiply ``1/sqrt(d)`` by for ``config`` (1 for most types)."""
    return float(descriptor_of(config).softmax_scale(config))


def is_length_dependent(config: Any) -> bool:
    """True when the frequencies of ``config`` change with the current length."""
    return descriptor_of(config).length_dependent


def extension_types() -> Tuple[str, ...]:
    """The rope types an extension ratio sets (those with an ``extension``), in registration order."""
    return tuple(d.name for d in REGISTRY.values() if d.extension is not None)


def scaling_parameters() -> Dict[str, Parameter]:
    """Every registered type's parameters by name, in registration order (a name shared by several
    types appears once: registration keeps their definitions equal)."""
    out: Dict[str, Parameter] = {}
    for descriptor in list(REGISTRY.values()):
        for parameter in descriptor.parameters:
            out.setdefault(parameter.name, parameter)
    return out


class LiveNames(AbstractSet[str]):
    """A read-only set of registered names chosen by a predicate, evaluated on every use, so a type
    registered later is a member too (``DYNAMIC_TYPES``)."""

    def __init__(self, predicate: Callable[[ScalingDescriptor], bool], doc: str = "") -> None:
        self._predicate = predicate
        self.__doc__ = doc

    def _names(self) -> FrozenSet[str]:
        return frozenset(d.name for d in list(REGISTRY.values()) if self._predicate(d))

    def __contains__(self, name: object) -> bool:
        desc = REGISTRY.get(name) if isinstance(name, str) else None
        return desc is not None and bool(self._predicate(desc))

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._names()))

    def __len__(self) -> int:
        return len(self._names())

    def __hash__(self) -> int:
        return hash(self._names())

    def __repr__(self) -> str:
        return f"LiveNames({sorted(self._names())})"
