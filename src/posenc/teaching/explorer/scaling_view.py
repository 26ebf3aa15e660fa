"""Wavelength per rotation pair under each RoPE scaling, the shipped config fixtures, and the
"copy as config" view.

A pair with frequency ``theta_i`` repeats every ``2 pi / theta_i`` positions, its wavelength. Pairs
whose wavelength is shorter than the training context ``L0`` have turned through every angle in
training; the others have only seen part of their circle, and positions past ``L0`` show them angles
they never saw. Every context-extension method is a rule for which wavelengths to stretch and by how
much; this module asks :func:`posenc.rope.scaling.rope_frequencies` for the answer of each rule.

Every curve reports the range of slow-down ratios old/new frequency. Only the methods built from a
ramp (``ramp`` in their explorer metadata: YaRN and Llama 3) also split the pairs three ways: ``kept``
(ratio 1), ``divided`` (ratio ``factor``) and ``blended`` (the ramp between). NTK, dynamic NTK and
LongRoPE slow almost every pair by a different amount, so such counts would say nothing true about them.
The split and the count of pairs that turn fully in training are the lesson's
(:func:`posenc.teaching.lesson.stretching.band_masks`,
:func:`~posenc.teaching.lesson.stretching.partial_turn`), so chapter "Stretching RoPE" and this view
count alike.

The overlays and their sliders come from the scaling registry (:mod:`posenc.rope.registry`): every
registered type with parameters is an overlay, each of its ``Parameter``s is a slider (range and
step; its label from the palette), and the requests carry those parameters by name, checked here
against the registry (:func:`scaling_settings`). ``GET /api/scalings`` hands the same facts to the
page, with the colours, labels, dashes and first-shown overlays of :mod:`posenc.teaching.lesson.palette`.
"""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from importlib import resources
from types import SimpleNamespace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import torch

from ..._checks import check_choice, check_int
from ...rope.embedding import RotaryEmbedding
from ...rope.hfconfig import CONFIG_ATTRIBUTES, rope_dicts, rotary_kwargs_from_hf, to_hf_dict
from ...rope.layout import LAYOUTS
from ...rope.registry import REGISTRY, ScalingDescriptor, config_fields, scaling_parameters
from ...rope.scaling import DYNAMIC_TYPES, rope_frequencies, scaling_to_dict
from ...rope.tables import rope_inv_freq
from ..lesson.palette import SCALING_COLOURS, SHOWN_SCALINGS, parameter_label, scaling_style
from ..lesson.stretching import band_masks, partial_turn
from ..lesson.vectors import TWO_PI

_MAX_FIXTURE_BYTES = 1024 * 1024
_FIXTURE_NAME = re.compile(r"^[A-Za-z0-9._\-/#]{1,120}$")


def methods() -> Tuple[str, ...]:
    """The overlays the page can toggle, in the order it draws them: every registered type with
    parameters to vary."""
    return tuple(d.name for d in REGISTRY.values() if d.parameters)


def config_methods() -> Tuple[str, ...]:
    """What "copy as config" accepts: no scaling, or one of the overlays."""
    return ("default",) + methods()


def ramp_methods() -> Tuple[str, ...]:
    """The methods whose rule is "keep, ramp, divide"; only these are split three ways."""
    return tuple(d.name for d in REGISTRY.values() if d.parameters and d.ramp is not None)


_RANGE = ("minimum", "maximum", "step", "default")


def _metadata(d: ScalingDescriptor) -> Dict[str, Any]:
    """One type's facts from its descriptor (parameters with ranges, flags), with what the page shows
    first and the parameters' labels from the palette (every type has the same keys)."""
    return {
        "name": d.name,
        "overlay": bool(d.parameters),
        "shown": bool(d.parameters) and d.name in SHOWN_SCALINGS,
        "ramp": bool(d.parameters) and d.ramp is not None,
        "parameters": [
            {"name": p.name, "label": parameter_label(p.name), **{k: getattr(p, k) for k in _RANGE}}
            for p in d.parameters
        ],
        "length_dependent": d.length_dependent,
        "in_transformers": d.transformers.known,
        "lab": d.extension is not None,
        "aliases": list(d.transformers.aliases),
    }


def scalings_metadata() -> List[dict]:
    """What ``GET /api/scalings`` returns: one entry per registered type, in registration order, with
    the palette's label, colour and dash."""
    out, extra = [], 0
    for descriptor in list(REGISTRY.values()):
        out.append(_metadata(descriptor) | scaling_style(descriptor.name, extra))
        extra += descriptor.name not in SCALING_COLOURS
    return out


def __getattr__(name: str):
    # METHODS, CONFIG_METHODS and RAMP_METHODS read the registry on every access, so a type registered
    # after import is an overlay too.
    live = {"METHODS": methods, "CONFIG_METHODS": config_methods, "RAMP_METHODS": ramp_methods}
    if name in live:
        return live[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def scaling_settings(given: Mapping[str, Any]) -> Dict[str, float]:
    """Every registered scaling parameter's value: ``given`` where it names one, else its default.

    ``given`` maps parameter names (:func:`posenc.rope.registry.scaling_parameters`) to numbers or
    their text (a query string's values). Raises ``ValueError`` naming an unknown name, or a value
    that is not a finite number inside the parameter's range.
    """
    parameters = scaling_parameters()
    settings = {name: float(p.default) for name, p in parameters.items()}
    for name, value in given.items():
        if name not in parameters:
            raise ValueError(f"unknown parameter {name!r}; the scalings' parameters are {sorted(parameters)}")
        p = parameters[name]
        try:
            number = float(value) if not isinstance(value, bool) else math.nan
        except (TypeError, ValueError, OverflowError):
            number = math.nan
        if not (math.isfinite(number) and p.minimum <= number <= p.maximum):
            label = parameter_label(name)
            what = "" if label == name else f" ({label})"
            raise ValueError(f"{name}{what} must be a number from {p.minimum:g} to {p.maximum:g}, got {value!r}")
        settings[name] = number
    return settings


def make_scaling(method: str, settings: Mapping[str, float], original: int):
    """The posenc scaling config for ``method`` (``None`` for ``"default"``) from
    :func:`scaling_settings`' values and the trained length ``original``.

    Each config field takes the setting of the same name (``original_max_position_embeddings`` is
    ``original``); fields that are no parameter keep the dataclass default.
    """
    check_choice("method", method, set(config_methods()))
    if method == "default":
        return None
    descriptor = REGISTRY[method]
    named = {**settings, "original_max_position_embeddings": original}
    kwargs = {f.name: named[f.name] for f in config_fields(descriptor.config_class) if f.name in named}
    return descriptor.config_class(**kwargs)


def parse_methods(text: str) -> List[str]:
    """``"linear,yarn"`` -> ``["linear", "yarn"]``, refusing unknown or repeated names."""
    names = [part.strip() for part in text.split(",") if part.strip()] if text else []
    for name in names:
        check_choice("methods", name, set(methods()))
    if len(set(names)) != len(names):
        raise ValueError(f"methods must not repeat a name, got {text!r}")
    return names


def classify(ratio: torch.Tensor, factor: Optional[float]) -> dict:
    """Split pairs by ``ratio = new / old frequency`` into kept, divided by ``factor`` and blended.

    Meaningful only for the ramp methods (:func:`ramp_methods`); see :func:`slowdown` for the others.
    """
    kept, divided, blended = band_masks(ratio, factor)  # the lesson's split, one definition
    index = torch.nonzero(blended).flatten().tolist()
    return {
        "kept": int(kept.sum()),
        "divided": int(divided.sum()),
        "blended": int(blended.sum()),
        "ramp": [index[0], index[-1]] if index else None,
        "pair_class": ["kept" if k else "divided" if d else "blended" for k, d in zip(kept.tolist(), divided.tolist())],
    }


def slowdown(ratio: torch.Tensor) -> Optional[List[float]]:
    """``[least, most]`` slow-down ``old / new frequency`` over the rotated pairs (``None`` if none rotate)."""
    rotated = ratio[ratio > 0]
    if rotated.numel() == 0:
        return None
    slow = 1 / rotated
    return [float(slow.min()), float(slow.max())]


def _curve(scaling, rotary_dim: int, base: float, seq_len: Optional[int], factor: Optional[float]) -> dict:
    default = rope_inv_freq(rotary_dim, base)
    inv_freq, attention_factor = rope_frequencies(scaling, rotary_dim, base, seq_len)
    ratio = inv_freq / default
    wavelength = [TWO_PI / f if f > 0 else None for f in inv_freq.tolist()]  # 0: a pair left unrotated
    rope_type = getattr(scaling, "rope_type", "default")
    ramp = rope_type in ramp_methods()
    split = (
        classify(ratio, factor)
        if ramp
        else {"kept": None, "divided": None, "blended": None, "ramp": None, "pair_class": None}
    )
    return {
        "inv_freq": inv_freq.tolist(),
        "wavelength": wavelength,
        "ratio": ratio.tolist(),
        "attention_factor": attention_factor,
        "rope_type": rope_type,
        "split": ramp,
        "slowdown": slowdown(ratio),
        "config": scaling_to_dict(scaling) if scaling is not None else {"rope_type": "default"},
        **split,
    }


def wavelengths_view(
    rotary_dim: int,
    base: float,
    train_len: int,
    methods: Sequence[str],
    *,
    seq_len: int,
    settings: Optional[Mapping[str, Any]] = None,
) -> dict:
    """Wavelength of every pair, unscaled and under each method in ``methods``.

    ``train_len`` is both the marked training context and the scalings'
    ``original_max_position_embeddings``; ``seq_len`` is the current length the length-dependent
    methods (dynamic NTK) adapt to; ``settings`` are the scalings' parameters (:func:`scaling_settings`,
    defaults where absent). ``thresholds`` holds, for the ramp methods, the wavelengths below
    which pairs are kept and above which they are divided by the factor.
    """
    check_int("rotary_dim", rotary_dim, minimum=2, even=True)
    default = rope_inv_freq(rotary_dim, base)
    wavelength = (TWO_PI / default).tolist()
    settings = scaling_settings(settings or {})
    factor = settings.get("factor")
    overlays, thresholds = {}, {}
    for method in methods:
        descriptor = REGISTRY[method]
        cfg = make_scaling(method, settings, train_len)
        overlays[method] = _curve(cfg, rotary_dim, base, seq_len if descriptor.length_dependent else None, factor)
        if descriptor.ramp is not None:
            thresholds[method] = [float(t) for t in descriptor.ramp(cfg)]
    return {
        "rotary_dim": rotary_dim,
        "base": base,
        "train_len": train_len,
        "settings": settings,
        "factor": factor,
        "extended_len": None if factor is None else train_len * factor,
        "seq_len": seq_len,
        "pairs": list(range(rotary_dim // 2)),
        "default": {"inv_freq": default.tolist(), "wavelength": wavelength},
        "full_turns_in_training": int((~partial_turn(default, train_len)).sum()),
        "methods": overlays,
        "thresholds": thresholds,
    }


# -- fixtures ---------------------------------------------------------------------------------------
def _fixture_root():
    return resources.files("posenc").joinpath("fixtures")


@lru_cache(maxsize=1)
def _fixture_files() -> Dict[str, str]:
    """``{name: json text}`` for every config fixture shipped with posenc (read once)."""
    root = _fixture_root()
    found: Dict[str, str] = {}
    if not root.is_dir():
        return found

    def walk(node, prefix: str) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
            elif child.name.endswith(".json"):
                text = child.read_text(encoding="utf-8")
                if len(text) <= _MAX_FIXTURE_BYTES:
                    found[prefix + child.name[:-5]] = text

    walk(root, "")
    return found


def _stated_factor(config: dict, layer_type: Optional[str]) -> Optional[float]:
    """The ``factor`` the config writes down, or ``None``: readers may derive one (LongRoPE takes
    ``max_position_embeddings / original``), but the page shows only what the file says."""
    factor = rope_dicts(config).get(layer_type, {}).get("factor")
    return float(factor) if isinstance(factor, (int, float)) and not isinstance(factor, bool) else None


def _layer_types(config: dict) -> List[Optional[str]]:
    try:
        return list(rope_dicts(config))
    except (ValueError, TypeError):
        return [None]  # fixture_list then reports the reader's error for this fixture


@lru_cache(maxsize=1)
def fixtures() -> Dict[str, Tuple[dict, Optional[str]]]:
    """``{name: (config dict, layer_type)}``, one entry per rope dict of every fixture that parses."""
    out: Dict[str, Tuple[dict, Optional[str]]] = {}
    for name, text in _fixture_files().items():
        try:
            config = json.loads(text)
        except json.JSONDecodeError:
            continue
        if not isinstance(config, dict):
            continue
        for layer_type in _layer_types(config):
            out[name if layer_type is None else f"{name}#{layer_type}"] = (config, layer_type)
    return out


def _rotary_kwargs(name: str) -> dict:
    config, layer_type = fixtures()[name]
    return rotary_kwargs_from_hf(config, layer_type=layer_type, strict=False)


def fixture_list() -> List[dict]:
    """One summary per fixture: name, model type, rope type, base, widths, context lengths."""
    rows: List[Dict[str, Any]] = []
    for name, (config, layer_type) in fixtures().items():
        try:
            kw = _rotary_kwargs(name)
        except (ValueError, TypeError, KeyError) as err:
            rows.append({"name": name, "error": str(err)})
            continue
        scaling = kw["scaling"]
        row: Dict[str, Any] = {
            "name": name,
            "model_type": config.get("model_type"),
            "rope_type": getattr(scaling, "rope_type", "default"),
            "base": kw["base"],
            "head_dim": kw["head_dim"],
            "rotary_dim": kw["rotary_dim"],
            "max_position_embeddings": kw["max_position_embeddings"],
            "original_max_position_embeddings": getattr(scaling, "original_max_position_embeddings", None),
            "factor": _stated_factor(config, layer_type),
        }
        rows.append(row)
    return rows


def fixture_view(name: str) -> dict:
    """Wavelengths of a fixture's RoPE as configured, beside the same RoPE without scaling.

    Types whose frequencies depend on the length (dynamic, longrope) are shown at the trained length
    and at the advertised ``max_position_embeddings``; for LongRoPE these are its two lists, the
    short factors (``short``) and the long factors (``long``). ``factor`` is the one the config
    states (``None`` when it states none).
    """
    if not isinstance(name, str) or not _FIXTURE_NAME.match(name) or name not in fixtures():
        raise ValueError(f"fixture must be one of {sorted(fixtures())}, got {name!r}")
    kw = _rotary_kwargs(name)
    scaling, rotary_dim, base = kw["scaling"], kw["rotary_dim"], kw["base"]
    rope_type = getattr(scaling, "rope_type", "default")
    config, layer_type = fixtures()[name]
    factor = _stated_factor(config, layer_type)
    original = getattr(scaling, "original_max_position_embeddings", None) or kw["max_position_embeddings"]
    used_factor = getattr(scaling, "factor", None)
    longest = max(kw["max_position_embeddings"], original + 1)
    if rope_type == "longrope":
        curves = {
            "short": _curve(scaling, rotary_dim, base, None, used_factor),
            "long": _curve(scaling, rotary_dim, base, longest, used_factor),
        }
    else:
        curves = {"configured": _curve(scaling, rotary_dim, base, None, used_factor)}
        if rope_type in DYNAMIC_TYPES:
            curves["at_max_position_embeddings"] = _curve(scaling, rotary_dim, base, longest, used_factor)
    default = rope_inv_freq(rotary_dim, base)
    # the fields the reader takes RoPE from (hfconfig's list) and the advertised length
    rope_fields = {k: config[k] for k in (*CONFIG_ATTRIBUTES, "max_position_embeddings") if k in config}
    return {
        "name": name,
        "model_type": config.get("model_type"),
        "layer_type": layer_type,
        "rope_type": rope_type,
        "base": base,
        "head_dim": kw["head_dim"],
        "rotary_dim": rotary_dim,
        "layout": kw["layout"],
        "max_position_embeddings": kw["max_position_embeddings"],
        "train_len": original,
        "factor": factor,
        "pairs": list(range(rotary_dim // 2)),
        "default": {"inv_freq": default.tolist(), "wavelength": (TWO_PI / default).tolist()},
        "curves": curves,
        "config_fields": rope_fields,
    }


# -- copy as config ---------------------------------------------------------------------------------
def config_view(
    head_dim: int,
    rotary_dim: int,
    base: float,
    layout: str,
    method: str,
    *,
    max_position_embeddings: int,
    original: int,
    settings: Optional[Mapping[str, Any]] = None,
) -> dict:
    """The current RoPE settings as posenc arguments and as Hugging Face config fields.

    ``settings`` are the scalings' parameters (:func:`scaling_settings`); ``original`` is the
    trained length, the scaling's ``original_max_position_embeddings``.

    For a type ``transformers`` does not know (its descriptor's ``transformers_equivalent``; static
    NTK, which is exactly a larger base ``base * factor ** (d / (d - 2))``), the Hugging Face dicts
    describe the equal configuration ``transformers`` can load (for NTK: a ``default`` RoPE with that
    ``rope_theta``) and ``hf_note`` says so, while the posenc snippet keeps the posenc type.
    """
    check_int("rotary_dim", rotary_dim, minimum=2, maximum=head_dim, even=True)
    check_choice("layout", layout, set(LAYOUTS))
    scaling = make_scaling(method, scaling_settings(settings or {}), original)
    # Validate the whole combination with the real module; one cached row keeps it cheap whatever
    # max_position_embeddings says (the number only travels into the config dicts).
    rope = RotaryEmbedding(
        head_dim, base=base, rotary_dim=rotary_dim, layout=layout, scaling=scaling, max_position_embeddings=1
    )
    hf_note = None
    descriptor = REGISTRY[method]
    described = SimpleNamespace(
        head_dim=rope.head_dim,
        rotary_dim=rope.rotary_dim,
        base=rope.base,
        scaling=rope.scaling,
        max_position_embeddings=max_position_embeddings,
    )
    if descriptor.transformers.equivalent is not None and scaling is not None:
        # transformers lacks this rope type: describe the equal configuration it can load
        described.base, described.scaling, hf_note = descriptor.transformers.equivalent(
            scaling, rope.base, rope.rotary_dim
        )
    scaling_dict = scaling_to_dict(scaling) if scaling is not None else None
    kwargs = {
        "head_dim": head_dim,
        "base": base,
        "rotary_dim": rotary_dim,
        "layout": layout,
        "max_position_embeddings": max_position_embeddings,
    }
    return {
        "posenc": {**kwargs, "scaling": scaling_dict},
        "hf_rope_parameters": to_hf_dict(described, style="rope_parameters"),
        "hf_rope_scaling": to_hf_dict(described, style="rope_scaling"),
        "python": _python_snippet(kwargs, scaling_dict),
        "attention_factor": rope.attention_factor,
        "hf_note": hf_note,
    }


def _python_snippet(kwargs: dict, scaling: Optional[dict]) -> str:
    args = "".join(f"    {k}={v!r},\n" for k, v in kwargs.items())
    if scaling is None:
        return f"from posenc import RotaryEmbedding\n\nrope = RotaryEmbedding(\n{args})\n"
    return (
        "from posenc import RotaryEmbedding\nfrom posenc.rope.scaling import scaling_from_dict\n\n"
        f"scaling = scaling_from_dict({_dict_lines(scaling)})\n"
        f"rope = RotaryEmbedding(\n{args}    scaling=scaling,\n)\n"
    )


def _dict_lines(values: dict) -> str:
    """A dict literal with one key per line, so the snippet fits a narrow panel."""
    body = "".join(f"    {k!r}: {v!r},\n" for k, v in values.items())
    return "{\n" + body + "}"
