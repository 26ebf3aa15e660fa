"""Resolution change for axial RoPE: one frozen config and one pure function per method, in a registry.

A vision or diffusion transformer trained on a ``16 x 16`` grid of patches has seen coordinates
``0 .. 15`` on each axis. At a larger resolution (``32 x 32``) the coordinates run past what it knows,
exactly as a text model's positions run past its trained length. The methods here change the
frequencies of each axis of :class:`~posenc.rope.AxialRotaryEmbedding` so that the new grid maps onto
angles the model has seen; each axis has its own factor ``s_a`` (``target_a / trained_a``; 1 for an axis
that does not grow, such as FLUX's text/frame axis).

Each method is, in the shape of the text scalings of :mod:`posenc.rope.scaling` (whose registry speaks
Hugging Face's ``rope_type`` and config keys, which no vision config has):

* a frozen dataclass holding its parameters, with ``validate(axes_dim)`` raising ``ValueError`` that
  names the method, the field, the value and what is allowed (construction validates everything that
  does not depend on the axes);
* a pure function ``(config, axes_dim, bases) -> per-axis frequencies``: a tuple of float64 tensors,
  axis ``a``'s of shape ``(axes_dim[a] // 2,)``;
* one :class:`AxialScalingDescriptor` in :data:`AXIAL_SCALINGS`, with its summary, its source and
  ``extension(trained_grid, target_grid) -> config``, the config for a change of resolution.

Code outside posenc adds a method with :func:`register_axial_scaling`.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, is_dataclass
from typing import Any, Callable, ClassVar, Dict, Optional, Sequence, Set, Tuple, Type

import torch

from .._checks import check_config_float, check_config_int, refuse
from .scaling import ntk_base
from .tables import rope_inv_freq

AxisFrequencies = Tuple[torch.Tensor, ...]
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


def _name(config: Any, field: str) -> str:
    return f"{config.rope_type!r} axial scaling: {field}"


def _factors(config: Any, axes_dim: Optional[Sequence[int]], *, minimum: Optional[float]) -> Tuple[float, ...]:
    """``config.factors`` as floats, one per axis (``axes_dim`` given), each finite and in range."""
    factors = config.factors
    if isinstance(factors, (str, bytes)) or not isinstance(factors, Sequence) or not factors:
        refuse(_name(config, "factors"), factors, "a non-empty sequence of numbers, one per axis")
    if axes_dim is not None and len(factors) != len(axes_dim):
        refuse(
            _name(config, "factors"),
            list(factors),
            f"one factor per axis: {len(axes_dim)} for axes_dim {list(axes_dim)}",
        )
    out = []
    for i, value in enumerate(factors):
        if minimum is None:
            out.append(check_config_float(_name(config, f"factors[{i}]"), value, greater_than=0.0, maximum=1e6))
        else:
            out.append(check_config_float(_name(config, f"factors[{i}]"), value, minimum=minimum, maximum=1e6))
    return tuple(out)


# -- position interpolation per axis ------------------------------------------------------------------
@dataclass(frozen=True)
class AxialInterpolation:
    """Position interpolation per axis: ``theta_{a,i}' = theta_{a,i} / s_a``.

    Rotating coordinate ``x`` by ``theta / s`` is rotating ``x / s`` by ``theta``: the grid at the new
    resolution is squeezed onto the trained one. This is Chen et al. 2023 ("Extending Context Window of
    Large Language Models via Positional Interpolation") applied to each axis, and what EVA-02 and timm's
    ``RotaryEmbeddingCat(ref_feat_shape=...)`` do when the patch grid changes (their coordinates become
    ``x * ref / feat``: ``s = feat / ref``). Applied to the frequencies rather than to the coordinates,
    integer coordinates keep their exact angles (see :mod:`posenc.rope.tables`).

    Args:
        factors: ``s_a > 0`` for each axis (``< 1`` stretches a grid smaller than the trained one).
    """

    factors: Tuple[float, ...]
    rope_type: ClassVar[str] = "interpolate"

    def __post_init__(self) -> None:
        self.validate(None)

    def validate(self, axes_dim: Optional[Sequence[int]]) -> None:
        _factors(self, axes_dim, minimum=None)


def _interpolate(config: AxialInterpolation, axes_dim: Sequence[int], bases: Sequence[float]) -> AxisFrequencies:
    factors = _factors(config, axes_dim, minimum=None)
    return tuple(rope_inv_freq(d, b) / s for d, b, s in zip(axes_dim, bases, factors))


# -- NTK-aware base change per axis -------------------------------------------------------------------
@dataclass(frozen=True)
class AxialNTK:
    """NTK-aware base change per axis: ``base_a' = base_a * s_a ** (d_a / (d_a - 2))``.

    The text method of bloc97 (2023; :class:`posenc.rope.NTKScaling`), per axis with that axis's rotary
    dimension ``d_a``: the fastest pair of each axis keeps its frequency (fine detail stays as trained)
    and the slowest turns ``s_a`` times slower (the whole grid spans what the trained grid spanned). An
    axis of one pair (``d_a = 2``) is left as it is. Used for resolution change in diffusion
    transformers (e.g. the NTK variants of FLUX's ``theta`` at high resolution).

    Args:
        factors: ``s_a >= 1`` for each axis.
    """

    factors: Tuple[float, ...]
    rope_type: ClassVar[str] = "ntk"

    def __post_init__(self) -> None:
        self.validate(None)

    def validate(self, axes_dim: Optional[Sequence[int]]) -> None:
        _factors(self, axes_dim, minimum=1.0)


def _ntk(config: AxialNTK, axes_dim: Sequence[int], bases: Sequence[float]) -> AxisFrequencies:
    factors = _factors(config, axes_dim, minimum=1.0)
    return tuple(rope_inv_freq(d, ntk_base(b, s, d)) for d, b, s in zip(axes_dim, bases, factors))


# -- the descriptor and the registry ------------------------------------------------------------------
@dataclass(frozen=True)
class AxialScalingDescriptor:
    """The facts about one resolution-change method of axial RoPE.

    Args:
        name: the method (``[a-z][a-z0-9_]*``); the config class's ``rope_type`` must equal it.
        config_class: a frozen dataclass with ``validate(axes_dim)`` that raises ``ValueError``.
        frequencies: ``(config, axes_dim, bases) -> per-axis float64 frequencies``.
        summary: one line: what happens to ``theta_{a,i}``.
        source: where the method comes from.
        extension: ``(trained_grid, target_grid) -> config``, the method set for a change of
            resolution (one size per axis each); ``None`` if sizes alone do not define it.
    """

    name: str
    config_class: Type[Any]
    frequencies: Callable[[Any, Sequence[int], Sequence[float]], AxisFrequencies]
    summary: str
    source: str
    extension: Optional[Callable[[Tuple[int, ...], Tuple[int, ...]], Any]] = None


#: method name -> descriptor, in registration order
AXIAL_SCALINGS: Dict[str, AxialScalingDescriptor] = {}
_BUILTIN: Set[str] = set()
_LOCK = threading.Lock()


def register_axial_scaling(descriptor: AxialScalingDescriptor, *, builtin: bool = False) -> AxialScalingDescriptor:
    """Add a method to :data:`AXIAL_SCALINGS`; ``ValueError`` if the name is taken or the class does not fit."""
    if not isinstance(descriptor, AxialScalingDescriptor):
        raise TypeError(f"descriptor must be an AxialScalingDescriptor, got {type(descriptor).__name__}")
    name, cls = descriptor.name, descriptor.config_class
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"axial scaling name must match [a-z][a-z0-9_]*, got {name!r}")
    if not (isinstance(cls, type) and is_dataclass(cls)) or getattr(cls, "rope_type", None) != name:
        raise ValueError(f"{name!r}: config_class must be a dataclass whose rope_type is {name!r}, got {cls!r}")
    if not callable(getattr(cls, "validate", None)) or not callable(descriptor.frequencies):
        raise ValueError(f"{name!r}: config_class needs validate(axes_dim) and frequencies must be callable")
    with _LOCK:
        if name in AXIAL_SCALINGS:
            raise ValueError(f"axial scaling {name!r} is already registered; unregister_axial_scaling it first")
        AXIAL_SCALINGS[name] = descriptor
        if builtin:
            _BUILTIN.add(name)
    return descriptor


def unregister_axial_scaling(name: str) -> AxialScalingDescriptor:
    """Remove a method added with :func:`register_axial_scaling` (posenc's own stay)."""
    with _LOCK:
        if name in _BUILTIN:
            raise ValueError(f"{name!r} is one of posenc's own axial scalings and cannot be unregistered")
        if name not in AXIAL_SCALINGS:
            raise ValueError(f"{name!r} is not registered; registered: {sorted(AXIAL_SCALINGS)}")
        return AXIAL_SCALINGS.pop(name)


def axial_descriptor_of(config: Any) -> AxialScalingDescriptor:
    """The descriptor of a config instance, or ``ValueError`` naming the registered methods."""
    name = getattr(type(config), "rope_type", None)
    desc = AXIAL_SCALINGS.get(name) if isinstance(name, str) else None
    if desc is None or not isinstance(config, desc.config_class):
        raise ValueError(
            f"scaling must be None or a config of a registered axial scaling {sorted(AXIAL_SCALINGS)}, got {config!r}"
        )
    return desc


def axial_frequencies(config: Any, axes_dim: Sequence[int], bases: Sequence[float]) -> AxisFrequencies:
    """Per-axis float64 frequencies of ``config`` (``None``: unscaled ``base_a ** (-2i / d_a)``), validated."""
    if config is None:
        return tuple(rope_inv_freq(d, b) for d, b in zip(axes_dim, bases))
    desc = axial_descriptor_of(config)
    config.validate(axes_dim)
    out = tuple(desc.frequencies(config, axes_dim, bases))
    if len(out) != len(axes_dim) or any(f.shape != (d // 2,) for f, d in zip(out, axes_dim)):
        raise ValueError(
            f"{desc.name!r} axial scaling returned frequencies of the wrong shapes for axes_dim {axes_dim}"
        )
    if not all(bool(torch.isfinite(f).all()) and bool((f > 0).all()) for f in out):
        raise ValueError(f"{desc.name!r} axial scaling gave a frequency that is not finite and > 0")
    return tuple(f.to(torch.float64) for f in out)


def axial_extension(name: str, trained_grid: Sequence[int], target_grid: Sequence[int]) -> Any:
    """The config of method ``name`` for a model trained on ``trained_grid`` run on ``target_grid``.

    Both grids give one size per axis (``(frames, height, width)``, or ``(1, h, w)``-style for an axis
    that does not change).
    """
    desc = AXIAL_SCALINGS.get(name) if isinstance(name, str) else None
    if desc is None or desc.extension is None:
        with_extension = sorted(n for n, d in AXIAL_SCALINGS.items() if d.extension is not None)
        raise ValueError(f"name must be one of {with_extension}, got {name!r}")
    if len(trained_grid) != len(target_grid) or not trained_grid:
        raise ValueError(
            "trained_grid and target_grid need one size per axis each, got "
            f"{list(trained_grid)} and {list(target_grid)}"
        )
    trained = tuple(check_config_int(f"trained_grid[{i}]", v) for i, v in enumerate(trained_grid))
    target = tuple(check_config_int(f"target_grid[{i}]", v) for i, v in enumerate(target_grid))
    return desc.extension(trained, target)


def _ratios(trained: Tuple[int, ...], target: Tuple[int, ...]) -> Tuple[float, ...]:
    return tuple(b / a for a, b in zip(trained, target))


for _descriptor in (
    AxialScalingDescriptor(
        "interpolate",
        AxialInterpolation,
        _interpolate,
        summary="theta_{a,i} / s_a: each axis's coordinates squeezed onto the trained grid",
        source="Chen et al. 2023 (position interpolation), per axis; EVA-02 and timm's ref_feat_shape",
        extension=lambda trained, target: AxialInterpolation(_ratios(trained, target)),
    ),
    AxialScalingDescriptor(
        "ntk",
        AxialNTK,
        _ntk,
        summary="base_a * s_a ** (d_a / (d_a - 2)) per axis: fine detail kept, the slowest pair s_a times slower",
        source="bloc97 2023 (NTK-aware base change), per axis",
        extension=lambda trained, target: AxialNTK(tuple(max(1.0, r) for r in _ratios(trained, target))),
    ),
):
    register_axial_scaling(_descriptor, builtin=True)
