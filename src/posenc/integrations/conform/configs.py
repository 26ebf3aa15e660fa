"""The configs conform checks: the fixtures, any ``config.json``, and generated configs for every
rope type of the registry at the edges of its parameters.

A generated config is a small Llama-shaped ``config.json`` (head size :data:`HEAD_DIM`, trained length
:data:`ORIGINAL`) whose rope dict is one registered type, written by posenc's own writer
(:func:`posenc.rope.hfconfig.to_hf_dict`). For each type, looping over the registry:

* the type as its ``extension`` sets it for a factor of 8 (its published other fields), or its config
  class's defaults, or, for a type whose fields have no defaults, per-pair factors ramping from 1 and
  the trained length;
* each parameter of its parameter space at its minimum and at its maximum (the others as above);
* each optional number (``attention_factor``, ``mscale``, ...) given as 1.0 on its own, and all of
  them but ``attention_factor`` at 1.0 together (``mscale == mscale_all_dim == 1``); each bool flipped;
* the same type on half the head (``partial_rotary_factor`` 0.5), and in the interleaved layout
  (``rope_interleave: true``).

A value the type's validator refuses is no config and is left out. A config with one rope dict per
layer type is checked once per layer type (:func:`per_layer_type`).
"""

from __future__ import annotations

import dataclasses
import json
import typing
from dataclasses import MISSING
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ...fixtures import fixture_names, load_fixture
from ...rope.hfconfig import rope_dicts, to_hf_dict
from ...rope.registry import REGISTRY, ScalingDescriptor

HEAD_DIM = 32
ORIGINAL = 4096
FACTOR = 8.0
#: config file size conform reads at most (a config.json is a few KB)
MAX_CONFIG_BYTES = 4 * 2**20


@dataclasses.dataclass(frozen=True)
class ConfigCase:
    """One config to check: its name in the table, where it comes from, the dict (or why there is none)."""

    name: str
    source: str  # "fixture", "file" or "generated"
    config: Optional[Dict[str, Any]]
    problem: Optional[str] = None


def fixtures() -> List[ConfigCase]:
    return [ConfigCase(name, "fixture", load_fixture(name)) for name in fixture_names()]


def from_file(path: Path) -> ConfigCase:
    """A ``config.json`` file as a case; a file conform cannot read becomes a case with its problem."""
    name = str(path)
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            return ConfigCase(name, "file", None, f"{path} is larger than {MAX_CONFIG_BYTES} bytes; not a config.json")
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return ConfigCase(name, "file", None, f"cannot read {path}: {' '.join(str(exc).split())}")
    if not isinstance(data, dict):
        return ConfigCase(name, "file", None, f"{path} holds a JSON {type(data).__name__}, not a config object")
    return ConfigCase(name, "file", data)


def _required_value(f: dataclasses.Field, rotary_dim: int, j: int) -> Any:
    """A value for a field without a default: the trained length, or per-pair factors ramping from 1."""
    if f.name == "original_max_position_embeddings":
        return ORIGINAL
    if "Tuple" in str(f.type) or "tuple" in str(f.type):
        n = rotary_dim // 2
        top = 1.0 + 3.0 * (j + 1)
        return tuple(1.0 + (top - 1.0) * i / max(n - 1, 1) for i in range(n))
    return FACTOR


def _base_config(descriptor: ScalingDescriptor, rotary_dim: int) -> Any:
    if descriptor.extension is not None:
        return descriptor.extension(FACTOR, ORIGINAL)
    cls = descriptor.config_class
    kwargs = {}
    for j, f in enumerate(dataclasses.fields(cls)):
        if f.default is MISSING and f.default_factory is MISSING:
            kwargs[f.name] = _required_value(f, rotary_dim, j)
    return cls(**kwargs)


def _optional_numbers(config: Any) -> List[str]:
    hints = typing.get_type_hints(type(config))
    return [
        f.name
        for f in dataclasses.fields(config)
        if f.default is None and "float" in str(hints.get(f.name, "")) and getattr(config, f.name) is None
    ]


def _variants(descriptor: ScalingDescriptor, base: Any) -> Iterator[Tuple[str, Dict[str, Any]]]:
    yield "", {}
    for parameter in descriptor.parameters:
        for value in (parameter.minimum, parameter.maximum):
            yield f"{parameter.name}={value:g}", {parameter.name: value}
    fraction = descriptor.transformers.rotary_fraction_field
    if fraction is not None:
        yield f"{fraction}=0.5", {fraction: 0.5}
    numbers = _optional_numbers(base)
    for name in numbers:
        yield f"{name}=1", {name: 1.0}
    together = [n for n in numbers if n != "attention_factor"]
    if len(together) > 1:
        yield ",".join(f"{n}=1" for n in together), {n: 1.0 for n in together}
    for f in dataclasses.fields(base):
        value = getattr(base, f.name)
        if isinstance(value, bool):
            yield f"{f.name}={not value}", {f.name: not value}


def _as_config(scaling: Any, rotary_dim: int, layout: str, max_positions: int) -> Dict[str, Any]:
    rope = SimpleNamespace(
        head_dim=HEAD_DIM,
        rotary_dim=rotary_dim,
        base=10000.0,
        scaling=None if scaling.rope_type == "default" else scaling,
        max_position_embeddings=max_positions,
        layout=layout,
    )
    config = to_hf_dict(rope)
    config.update(
        {"model_type": "llama", "hidden_size": 2 * HEAD_DIM, "num_attention_heads": 2, "num_key_value_heads": 2}
    )
    return config


def generated() -> List[ConfigCase]:
    """The generated configs of every registered rope type (see the module notes)."""
    cases, seen = [], set()
    for descriptor in list(REGISTRY.values()):
        base = _base_config(descriptor, HEAD_DIM)
        factor = getattr(base, "factor", None) or 1.0
        for label, changes in _variants(descriptor, base):
            try:
                scaling = dataclasses.replace(base, **changes) if changes else base
                scaling.validate(HEAD_DIM)
            except (ValueError, TypeError):
                continue  # the validator refuses it: not a config
            top = int(max(getattr(scaling, "factor", None) or factor, 1.0) * ORIGINAL)
            config = _as_config(scaling, HEAD_DIM, "half", top)
            key = json.dumps(config, sort_keys=True)
            if key not in seen:
                seen.add(key)
                cases.append(ConfigCase(f"{descriptor.name}" + (f" {label}" if label else ""), "generated", config))
        if descriptor.transformers.rotary_fraction_field is None:
            try:
                partial = _base_config(descriptor, HEAD_DIM // 2)
                partial.validate(HEAD_DIM // 2)
            except (ValueError, TypeError):
                continue
            top = int(factor * ORIGINAL)
            cases.append(
                ConfigCase(
                    f"{descriptor.name} partial=0.5", "generated", _as_config(partial, HEAD_DIM // 2, "half", top)
                )
            )
        top = int(factor * ORIGINAL)
        cases.append(
            ConfigCase(f"{descriptor.name} interleaved", "generated", _as_config(base, HEAD_DIM, "interleaved", top))
        )
    return cases


def per_layer_type(case: ConfigCase) -> List[ConfigCase]:
    """A config with one rope dict per layer type (Gemma 3, some gpt-oss files) as one case per
    layer type, each a plain config holding that type's dict as its ``rope_parameters`` (a config
    conform or posenc cannot read stays one case, and is reported as it is)."""
    if case.config is None:
        return [case]
    try:
        dicts = rope_dicts(case.config)
    except (ValueError, TypeError):
        return [case]
    if list(dicts) == [None]:
        return [case]
    out = []
    for layer_type, rope in dicts.items():
        config = {k: v for k, v in case.config.items() if k != "rope_scaling"}
        config["rope_parameters"] = dict(rope)
        out.append(ConfigCase(f"{case.name} [{layer_type}]", case.source, config))
    return out


def resolve(specs: List[str]) -> List[ConfigCase]:
    """The cases named on the command line: ``all``, ``fixtures``, ``generated``, a fixture's name, a
    ``config.json`` path or a folder of them; a name that is none of these is a case with its problem."""
    cases: List[ConfigCase] = []
    names = fixture_names()
    for spec in specs or ["all"]:
        path = Path(spec)
        if spec in ("all", "fixtures"):
            cases += fixtures()
        if spec in ("all", "generated"):
            cases += generated()
        if spec in ("all", "fixtures", "generated"):
            continue
        if spec in names:
            cases.append(ConfigCase(spec, "fixture", load_fixture(spec)))
        elif path.is_dir():
            cases += [from_file(p) for p in sorted(path.glob("*.json"))]
        elif path.exists():
            cases.append(from_file(path))
        else:
            cases.append(
                ConfigCase(
                    spec,
                    "file",
                    None,
                    f"{spec!r} is no file, folder, fixture ({', '.join(names)}) or one of all, fixtures, generated",
                )
            )
    return [one for case in cases for one in per_layer_type(case)]
