"""The scalings ``posenc eval`` compares, parsed from the scaling registry, and how each is applied.

A spec names a registered rope type (:mod:`posenc.rope.registry`), or ``none`` (plain RoPE with the
model's base) or ``model`` (the checkpoint's own rope config, unchanged), with optional parameters::

    none,model,linear,linear:4,ntk:4,dynamic,yarn:4:beta_fast=16:beta_slow=2,llama3:8

* ``name:F`` fixes the ``factor`` to ``F`` at every length (a deployed config does this);
* ``name`` alone, for a type an extension ratio sets, **fits** the config to each evaluation length
  ``L`` exactly as ``posenc lab`` extends its models (:func:`posenc.runs.extension.extension_config`),
  i.e. ``factor = L / L0`` (and dynamic NTK's factor 2, whose scale grows with the length itself);
* ``key=value`` sets any other field of the type's config class (names from the dataclass, so a new
  type's parameters work without edits here). ``original_max_position_embeddings`` defaults to
  the model's trained context ``L0``.

Each config is validated by its descriptor before anything runs. :func:`scaled_config` gives the
config at a length; :func:`applied` installs it on a loaded ``transformers`` model through
:func:`posenc.integrations.transformers.patch` (exact tables) and restores the model afterwards.
"""

from __future__ import annotations

import dataclasses
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ...rope import RotaryEmbedding
from ...rope.hfconfig import rotary_kwargs_from_hf, to_hf_dict
from ...rope.registry import REGISTRY, config_fields, extension_types, resolve_name
from ...rope.scaling import MAX_LENGTH
from ...runs.extension import extension_config

#: plain RoPE with the model's own base, whatever its config says
NONE = "none"
#: the checkpoint's own rope config, as written
MODEL = "model"


class SpecError(ValueError):
    """A scaling spec that cannot be used, with the spec, the problem and what is allowed."""


@dataclass(frozen=True)
class ScalingSpec:
    """One column of the comparison.

    Attributes:
        label: the spec as written (``"yarn:4"``), the key of every result.
        name: ``none``, ``model`` or a registered rope type.
        params: explicit config fields (``factor`` included when given).
        fit: the factor follows each evaluation length (``L / L0``), as the lab extends.
    """

    label: str
    name: str
    params: Dict[str, Any] = field(default_factory=dict)
    fit: bool = False

    def to_dict(self) -> Dict[str, Any]:
        return {"label": self.label, "name": self.name, "params": dict(self.params), "fit": self.fit}


def default_specs(model_has_scaling: bool) -> List[str]:
    """``model`` (when the checkpoint has a scaling of its own), ``none`` and every registered type
    an extension ratio sets, fitted to each length."""
    return ([MODEL] if model_has_scaling else []) + [NONE] + list(extension_types())


def _value(text: str, spec: str, key: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        number = float(text)
    except ValueError:
        raise SpecError(f"scaling {spec!r}: parameter {key}={text!r} is not a number or true/false") from None
    return int(number) if number.is_integer() and key == "original_max_position_embeddings" else number


def parse_spec(text: str) -> ScalingSpec:
    """One spec ``name[:factor][:key=value]...`` (see the module docstring)."""
    parts = [p.strip() for p in text.strip().split(":")]
    raw = parts[0]
    if raw in (NONE, MODEL):
        if len(parts) > 1:
            raise SpecError(f"scaling {text!r}: {raw!r} takes no parameters")
        return ScalingSpec(raw, raw)
    try:
        name = resolve_name(raw)
    except ValueError:
        known = ", ".join([NONE, MODEL] + [n for n in REGISTRY if n != "default"])
        raise SpecError(f"unknown scaling {raw!r} in {text!r}; choose from {known}") from None
    if name == "default":
        raise SpecError(f"scaling {text!r}: the default rope type is spelt {NONE!r} here")
    descriptor = REGISTRY[name]
    names = {f.name for f in config_fields(descriptor.config_class)}
    params: Dict[str, Any] = {}
    for k, part in enumerate(parts[1:]):
        if "=" in part:
            key, _, value = part.partition("=")
            key = key.strip()
        elif k == 0:
            key, value = "factor", part
        else:
            raise SpecError(f"scaling {text!r}: {part!r} must be key=value (only the factor may stand alone)")
        if key not in names:
            raise SpecError(
                f"scaling {text!r}: {name!r} has no parameter {key!r}; its parameters are {', '.join(sorted(names))}"
            )
        if key in params:
            raise SpecError(f"scaling {text!r}: {key!r} is given twice")
        params[key] = _value(value.strip(), text, key)
    required = [
        f.name
        for f in config_fields(descriptor.config_class)
        if f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
        and f.name not in params
        and f.name != "original_max_position_embeddings"  # the trained context, filled in for every type
    ]
    if required and descriptor.extension is None:
        hint = " (--search finds them)" if name in _searchable_per_pair() else ""
        raise SpecError(
            f"scaling {text!r}: {name!r} needs {', '.join(required)}, which are not numbers a spec can give "
            f"(one factor per rotary pair){hint}"
            if any(_is_list_field(descriptor.config_class, r) for r in required)
            else f"scaling {text!r}: {name!r} needs {', '.join(required)}; give each as key=value"
        )
    fit = "factor" in names and "factor" not in params
    if fit and descriptor.extension is None:
        raise SpecError(f"scaling {text!r}: {name!r} has no default for a length; give its factor, e.g. {name}:4")
    return ScalingSpec(text.strip(), name, params, fit)


def _is_list_field(config_class: Any, name: str) -> bool:
    field_type = {f.name: f.type for f in config_fields(config_class)}[name]
    return any(word in str(field_type) for word in ("List", "list", "Sequence", "Tuple", "tuple"))


def _searchable_per_pair() -> List[str]:
    return [n for n, d in REGISTRY.items() if "long_factor" in {f.name for f in config_fields(d.config_class)}]


def parse_specs(text: str) -> List[ScalingSpec]:
    """Comma-separated specs; each label once."""
    specs = [parse_spec(t) for t in text.split(",") if t.strip()]
    if not specs:
        raise SpecError(f"--scalings {text!r} names no scaling")
    labels = [s.label for s in specs]
    repeated = sorted({x for x in labels if labels.count(x) > 1})
    if repeated:
        raise SpecError(f"--scalings names {repeated} more than once")
    return specs


def scaled_config(spec: ScalingSpec, length: int, trained: int) -> Any:
    """The scaling config of ``spec`` for inputs of ``length`` tokens of a model trained on ``trained``.

    ``None`` means plain RoPE; for ``model`` this is not called (the checkpoint's config is used).
    """
    if spec.name == NONE:
        return None
    if spec.name == MODEL:
        raise ValueError("the 'model' spec keeps the checkpoint's config; there is nothing to build")
    descriptor = REGISTRY[spec.name]
    names = {f.name for f in config_fields(descriptor.config_class)}
    params = dict(spec.params)
    if "original_max_position_embeddings" in names:
        params.setdefault("original_max_position_embeddings", trained)
    try:
        if descriptor.extension is not None:
            target = max(length, trained) if spec.fit else trained
            config = dataclasses.replace(extension_config(descriptor, target, trained), **params)
        else:
            config = descriptor.config_class(**params)
    except TypeError as err:
        raise SpecError(f"scaling {spec.label!r}: {err}") from None
    return config


def check_spec(spec: ScalingSpec, lengths: List[int], trained: int, rotary_dim: int) -> None:
    """Validate the configs of ``spec`` at every length (the descriptor's validator, which raises)."""
    if spec.name in (NONE, MODEL):
        return
    descriptor = REGISTRY[spec.name]
    for length in lengths:
        try:
            config = scaled_config(spec, length, trained)
            descriptor.validate(config, rotary_dim)
        except ValueError as err:
            raise SpecError(f"scaling {spec.label!r} at length {length}: {err}") from None
        factor = getattr(config, "factor", None)
        if isinstance(factor, (int, float)) and trained * float(factor) > MAX_LENGTH:
            # the extended context (trained x factor) is a position count: it must be one
            raise SpecError(
                f"scaling {spec.label!r}: factor {factor:g} extends the trained context {trained} past "
                f"2**53 positions; give a factor of at most {MAX_LENGTH / trained:g}"
            )


def rope_of(config: Any) -> Dict[str, Any]:
    """posenc's reading of a ``transformers`` config: ``RotaryEmbedding`` keyword arguments."""
    return rotary_kwargs_from_hf(config, strict=False)


def trained_context(config: Any) -> int:
    """The context the checkpoint was trained on: its scaling's ``original_max_position_embeddings``
    when it has one, else ``max_position_embeddings``."""
    kwargs = rope_of(config)
    original = getattr(kwargs["scaling"], "original_max_position_embeddings", None)
    return int(original or kwargs["max_position_embeddings"])


def rope_fields(config: Any, scaling: Any, max_positions: int, base: Optional[float] = None) -> Dict[str, Any]:
    """The rope fields of ``config`` with ``scaling`` (and ``base``, when given) in place, in the
    config's own style (``rope_parameters`` for transformers 5 configs, else ``rope_scaling`` plus
    ``rope_theta``)."""
    kwargs = rope_of(config)
    rope = RotaryEmbedding(
        kwargs["head_dim"],
        base=kwargs["base"] if base is None else base,
        rotary_dim=kwargs["rotary_dim"],
        layout=kwargs["layout"],
        scaling=scaling,
        max_position_embeddings=max_positions,
    )
    has_parameters = (config.get("rope_parameters") if isinstance(config, dict) else None) is not None or (
        not isinstance(config, dict) and getattr(config, "rope_parameters", None) is not None
    )
    fields = to_hf_dict(rope, style="rope_parameters" if has_parameters else "rope_scaling")
    fields.pop("head_dim")  # a shape field, never changed by a scaling
    if kwargs["layout"] == "half":
        fields.pop("rope_interleave", None)
    params = fields.get("rope_parameters") or fields.get("rope_scaling")
    if params is not None and not has_parameters:
        # transformers 4 configs keep the rotated share beside rope_scaling (partial_rotary_factor,
        # rotary_pct), and the copy keeps those fields as they are
        params.pop("partial_rotary_factor", None)
    owns_share = scaling is not None and "partial_rotary_factor" in {f.name for f in config_fields(type(scaling))}
    if has_parameters and not owns_share:  # (a type with a share of its own, proportional, wrote it above)
        # Always written: a family whose default share is not 1 (GPT-NeoX's 0.25, Phi's 0.5) would rotate
        # only that share of each head if the field were left out, a different model than the one measured.
        fields["rope_parameters"]["partial_rotary_factor"] = rotated_share(
            config, kwargs["head_dim"], kwargs["rotary_dim"]
        )
    return fields


def rotated_share(config: Any, head_dim: int, rotary_dim: int) -> float:
    """The ``partial_rotary_factor`` that makes ``transformers`` rotate ``rotary_dim`` of ``head_dim``
    features (it takes ``int(head_dim * factor)``): the config's own value when it gives that, else
    ``rotary_dim / head_dim``."""
    if isinstance(config, dict):
        params = config.get("rope_parameters")
        own = [params.get("partial_rotary_factor") if isinstance(params, dict) else None]
        own += [config.get("partial_rotary_factor")]
    else:
        params = getattr(config, "rope_parameters", None)
        own = [params.get("partial_rotary_factor") if isinstance(params, dict) else None]
        own += [getattr(config, "partial_rotary_factor", None)]
    for value in own + [rotary_dim / head_dim]:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and int(head_dim * value) == rotary_dim:
            return float(value)
    raise ValueError(f"no partial_rotary_factor rotates {rotary_dim} of {head_dim} features in transformers")


@contextmanager
def applied(model: Any, spec: ScalingSpec, length: int, trained: int) -> Iterator[Any]:
    """``model`` with ``spec``'s scaling for ``length`` in its config and posenc's patch installed.

    The config attributes changed are put back and the patch undone on exit, so one loaded model
    serves every scaling. Length-dependent types follow each call's length, as ``transformers``
    does; every forward here is one whole window, so that is the window's length.
    """
    from ...integrations.transformers import patch

    config = model.config
    saved: List[Tuple[str, bool, Any]] = []
    swapped: List[Tuple[Any, str, Any]] = []
    rescaled: List[Tuple[Any, str, Any]] = []
    try:
        if spec.name != MODEL:
            scaling, base = in_transformers_terms(config, scaled_config(spec, length, trained))
            factor = float(getattr(scaling, "factor", 1.0) or 1.0)
            new = rope_fields(config, scaling, max(trained, round(trained * factor)), base)
            for key, value in new.items():
                saved.append((key, hasattr(config, key), getattr(config, key, None)))
                setattr(config, key, value)
            swapped = _rebuild_rotary_modules(model)
            rescaled = _rebuild_softmax_scales(model)
        # the tables are held to the rebuilt modules; a family without rotary modules has none to be held to
        unchecked = spec.name != MODEL and not swapped
        handle = patch(model, _check_tables=not unchecked)
        try:
            yield model
        finally:
            handle.undo()
    finally:
        for module, name, value in reversed(rescaled):
            setattr(module, name, value)
        for parent, name, module in reversed(swapped):
            setattr(parent, name, module)
        for key, had, value in reversed(saved):
            if had:
                setattr(config, key, value)
            else:
                delattr(config, key)


def in_transformers_terms(config: Any, scaling: Any) -> Tuple[Any, Optional[float]]:
    """``(scaling, base)`` as ``--write-config`` writes them: a type ``transformers`` lacks becomes its
    equivalent (static NTK: the default type with a raised ``rope_theta``), so the model measured is
    the one the written config builds, run by the family's own rotary code; ``base`` is ``None``
    when the config's own stays."""
    if scaling is None:
        return None, None
    descriptor = REGISTRY[type(scaling).rope_type]
    spelling = descriptor.transformers
    if spelling.known or spelling.equivalent is None:
        return scaling, None
    kwargs = rope_of(config)
    base, equivalent, _ = spelling.equivalent(scaling, kwargs["base"], kwargs["rotary_dim"])
    return equivalent, base


def _rebuild_rotary_modules(model: Any) -> List[Tuple[Any, str, Any]]:
    """Rebuild each rotary module of ``model`` from its (edited) config, as loading the written
    config would, so the unpatched model runs the scaling in ``transformers``' own code and
    :func:`~posenc.integrations.transformers.patch` holds posenc's tables to it. Returns
    ``(parent, name, original)`` for each module replaced, to put back."""
    swapped: List[Tuple[Any, str, Any]] = []
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if not type(child).__name__.endswith("RotaryEmbedding") or getattr(child, "config", None) is None:
                continue
            buffer = next(iter(child.buffers()), None)
            try:
                rebuilt = type(child)(config=child.config)
            except (KeyError, ValueError):  # a type transformers lacks (static NTK): nothing to hold it to
                continue
            if buffer is not None:
                rebuilt = rebuilt.to(buffer.device)
            setattr(parent, name, rebuilt)
            swapped.append((parent, name, child))
    return swapped


def _rebuild_softmax_scales(model: Any) -> List[Tuple[Any, str, Any]]:
    """Give each attention module the numbers its constructor derives from the (edited) config.

    Some families fold a rope parameter into the attention's softmax scale when the module is built
    (``self.scaling = yarn_apply_mscale(config.rope_parameters, ...)`` in DeepSeek-V2/V3, MiniCPM3,
    GLM-4-MoE-Lite, LongCat, Youtu, ...): the loaded model keeps the checkpoint's scale whatever rope
    config is set later. Each module that knows its config and layer is built again on the meta device
    (no memory) from the edited config, and every number attribute that differs is taken from it, so
    the model measured is the one the written config builds. Returns ``(module, name, old value)``."""
    import torch

    changed: List[Tuple[Any, str, Any]] = []
    for module in model.modules():
        config, layer = getattr(module, "config", None), getattr(module, "layer_idx", None)
        numbers = {k: v for k, v in vars(module).items() if isinstance(v, float) and not k.startswith("_")}
        if config is None or not isinstance(layer, int) or "scaling" not in numbers:
            continue
        try:
            with torch.device("meta"):
                fresh = type(module)(config, layer)
        except Exception:  # a constructor of another signature: nothing derived to compare
            continue
        for name, value in numbers.items():
            new = getattr(fresh, name, None)
            if isinstance(new, float) and new != value:
                changed.append((module, name, value))
                setattr(module, name, new)
    return changed


def written_config(source: Dict[str, Any], spec: ScalingSpec, trained: int) -> Tuple[Dict[str, Any], str]:
    """A copy of a ``config.json`` dict with ``spec``'s scaling in ``transformers``' own format.

    Returns the new dict and a note. A type ``transformers`` lacks is written as its equivalent when
    the descriptor has one (static NTK becomes a raised ``rope_theta``); otherwise :class:`SpecError`.
    """
    if spec.name == MODEL:
        raise SpecError("--write-config needs a scaling to write; 'model' is the config as it is")
    if spec.fit:
        raise SpecError(
            f"--write-config needs a fixed factor; {spec.label!r} follows each length. Give e.g. {spec.name}:4"
        )
    scaling = scaled_config(spec, trained, trained)
    note = ""
    out = dict(source)
    kwargs = rope_of(source)
    descriptor = REGISTRY[spec.name] if spec.name != NONE else REGISTRY["default"]
    if not descriptor.transformers.known:
        if descriptor.transformers.equivalent is None:
            raise SpecError(f"transformers has no rope type {spec.name!r} and posenc knows no equivalent config")
        base, scaling, _ = descriptor.transformers.equivalent(scaling, kwargs["base"], kwargs["rotary_dim"])
        note = (
            f"transformers has no rope type {spec.name!r}; written as its equivalent, rope type "
            f"{getattr(scaling, 'rope_type', 'default')!r} with rope_theta {base!r} (the same frequencies)"
        )
        out["rope_theta"] = base
        if isinstance(out.get("rope_parameters"), dict):
            out["rope_parameters"] = {**out["rope_parameters"], "rope_theta": base}
    factor = float(getattr(scaling, "factor", 1.0) or 1.0)
    out.update(rope_fields(out, scaling, max(trained, round(trained * factor))))
    return out, note


def spec_summary(spec: ScalingSpec, trained: int, lengths: List[int]) -> str:
    """How the spec sets its config, for the report."""
    if spec.name == NONE:
        return "plain RoPE with the model's base"
    if spec.name == MODEL:
        return "the checkpoint's own rope config"
    if spec.fit:
        factors = [getattr(scaled_config(spec, n, trained), "factor", None) for n in lengths]
        if all(f is not None and f == max(n, trained) / trained for f, n in zip(factors, lengths)):
            return f"factor L / {trained} at each length L (as posenc lab extends)"
        used = sorted({f for f in factors if f is not None})
        return f"factor {', '.join(f'{f:g}' for f in used)} at every length (as posenc lab extends)"
    shown = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in spec.params.items())
    return shown or "defaults"


def describe_config(config: Optional[Any]) -> Dict[str, Any]:
    """A JSON-ready view of a scaling config."""
    if config is None:
        return {"rope_type": "default"}
    values = {f.name: getattr(config, f.name) for f in config_fields(type(config))}
    return {"rope_type": type(config).rope_type, **{k: v for k, v in values.items() if v is not None}}
