"""``posenc inspect CONFIG``: a real model's position encoding, explained on one screen.

CONFIG is a ``config.json`` file, a model folder holding one, or (from Python) a ``transformers``
config object or a config dict. The report says:

* the rope type, ``rope_theta``, rotated and unrotated features per head, and the pair layout; the
  rotated width is the one the family's own ``transformers`` code uses when ``transformers`` is
  installed (it ignores ``partial_rotary_factor`` with the default rope type in Llama, Qwen 2/3,
  Mistral, Gemma, gpt-oss and Falcon), with a sentence saying why when the config says otherwise;
* the trained context (``original_max_position_embeddings``, or ``max_position_embeddings`` for
  unscaled models) and the extended one (``max_position_embeddings``);
* per rotation pair: its wavelength (tokens per full turn, ``2 pi / theta_i``) and what the scaling
  does to it: **kept** (unchanged), **interpolated** (divided by the full factor), **ramped** (YaRN and
  Llama 3 blend between the two), **rebased** (NTK: a changed base), **searched** (LongRoPE's per-pair
  factors, found by search), read from the library's own frequency functions at the extended length;
* the attention factor on the cos/sin tables and any extra softmax-scale factor (DeepSeek);
* a precision audit at the largest position the model claims (``max_position_embeddings - 1``):
  the angle and cos/sin error of the usual ``transformers`` computation (float32 frequencies, float32
  ``position * inv_freq``, cos/sin rounded to the model's ``torch_dtype``) against float64, and the
  same for posenc's tables (angles reduced in float64, one rounding to float32);
* risks: frequencies rounded to bf16 by ``model.to(torch.bfloat16)``, positions past the range where
  float32 or bf16 hold every integer, rope types whose frequencies change during generation, and a
  missing ``original_max_position_embeddings``.

Python API: :func:`inspect_config` returns the report as a dict (the ``--json`` output);
:func:`format_report` renders it; :func:`plot_wavelengths` draws the figure of ``--plot``.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import torch

from .hf import config_dict, rotary_kwargs_from_hf, unused_rope_keys
from .integrations.transformers import UnsupportedModelError, rotary_kwargs_in_code
from .rope.hfconfig import ConfigFields, rope_dicts
from .rope.mrope import INTERLEAVED_SECTION_MODEL_TYPES, MROPE_HF_KEYS, mrope_streams
from .rope.registry import get_descriptor, softmax_scale
from .rope.scaling import DYNAMIC_TYPES, rope_frequencies
from .rope.tables import rope_cos_sin
from .runs import ReadError, read_capped, save_figure

#: largest integer every smaller integer of which the type holds exactly (2 ** (mantissa bits + 1))
EXACT_INTEGERS = {"float16": 2**11, "bfloat16": 2**8, "float32": 2**24, "float64": 2**53}
#: label of the pairs that are neither kept nor fully interpolated, per rope type
_BETWEEN = {
    "yarn": "ramped",
    "llama3": "ramped",
    "ntk": "rebased",
    "dynamic": "rebased",
    "longrope": "searched",
    "linear": "interpolated",
    "proportional": "interpolated",
}
#: positions audited: the last few the model claims (angle error grows with the position)
_AUDIT_POSITIONS = 16
#: the most bytes read from a config file: published config.json files are a few kilobytes
MAX_CONFIG_BYTES = 1 << 24
#: the deepest nesting of arrays and objects accepted in a config (published ones nest 3 or 4 deep)
MAX_CONFIG_DEPTH = 32
_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


class InspectError(ValueError):
    """The CONFIG argument cannot be read: a missing path, a folder without config.json, bad JSON."""


# -- reading --------------------------------------------------------------------------------------------
def load_config(source) -> Tuple[Dict[str, Any], str]:
    """``(config dict, where it came from)`` for a path, a folder, a dict or a ``transformers`` config."""
    if isinstance(source, dict):
        return dict(source), "dict"
    if hasattr(source, "to_dict") and not isinstance(source, (str, Path)):
        return config_dict(source), type(source).__name__
    if not isinstance(source, (str, Path)):
        raise TypeError(f"config must be a path, a dict or a transformers config, got {type(source).__name__}")
    path = Path(source)
    if path.is_dir():
        path = path / "config.json"
        if not path.exists():
            raise InspectError(f"{path.parent} is a folder without a config.json")
    if not path.exists():
        raise InspectError(f"{path} does not exist (give a config.json or a model folder)")
    data = json_config(path)
    if not isinstance(data, dict):
        raise InspectError(f"{path} holds a JSON {type(data).__name__}, not a config object")
    return data, str(path)


def json_config(path: Path) -> Any:
    """The JSON value in the regular file ``path``, read with bounded size and nesting.

    Refused with :class:`InspectError`: anything but a regular file (a FIFO would block, a device
    such as ``/dev/zero`` never ends), more than :data:`MAX_CONFIG_BYTES`, text that is not UTF-8
    JSON, and nesting deeper than :data:`MAX_CONFIG_DEPTH`.
    """
    try:
        raw = read_capped(path, "a config.json is a regular file of a few kilobytes", max_bytes=MAX_CONFIG_BYTES)
    except ReadError as exc:
        raise InspectError(str(exc)) from None
    if _nesting(raw) > MAX_CONFIG_DEPTH:
        raise InspectError(f"{path} nests arrays or objects deeper than {MAX_CONFIG_DEPTH} levels")
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InspectError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise InspectError(f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None


def _nesting(raw: bytes, limit: int = MAX_CONFIG_DEPTH) -> int:
    """The deepest nesting of ``[`` and ``{`` in JSON text outside strings, counted up to just past
    ``limit`` (the parser would recurse that deep; invalid JSON is left to the parser)."""
    depth = 0
    for bracket in _STRINGS.sub(b"", raw).translate(None, _NOT_BRACKETS):
        depth += 1 if bracket in b"[{" else -1
        if depth > limit:
            return depth
    return 0


def _dtype_name(data: Dict[str, Any]) -> Tuple[str, bool, Optional[str]]:
    """The model's dtype name, whether the config states it (``torch_dtype`` or ``dtype``), and, where
    it states one that is no floating dtype (``[1]``, ``"int8"``), ``key=value`` as given (else
    ``None``): such a config is audited as float32 and told so, not taken for one that gives none."""
    invalid = None
    for key in ("torch_dtype", "dtype"):
        value = data.get(key)
        given = value
        if isinstance(value, torch.dtype):
            value = str(value).replace("torch.", "")
        if isinstance(value, str) and value.replace("torch.", "") in EXACT_INTEGERS:
            return value.replace("torch.", ""), True, None
        if given is not None and invalid is None:
            invalid = f"{key}={repr(given)[:60]}"
    return "float32", False, invalid


# -- the report -----------------------------------------------------------------------------------------
def inspect_config(config, layer_type: Optional[str] = None) -> Dict[str, Any]:
    """The report of ``posenc inspect`` for ``config`` as a JSON-ready dict.

    Args:
        config: a ``config.json`` path, a model folder, a config dict, or a ``transformers`` config.
        layer_type: for configs with one rope dict per layer type.

    Raises:
        InspectError: a path that cannot be read as a config.
        ValueError: rope fields posenc refuses (the message names the field).
    """
    data, source = load_config(config)
    kwargs = rotary_kwargs_from_hf(data, layer_type=layer_type, strict=False)  # unused keys: a risk below
    # the rotated width the family's own transformers code uses (when transformers is installed),
    # which is what posenc.integrations.transformers.patch rotates too; per layer type where the
    # config has one rope dict per layer type
    try:
        kwargs, width_note = rotary_kwargs_in_code(data, layer_type=layer_type)
    except UnsupportedModelError as exc:
        width_note = f"transformers' code cannot run this config: {exc}"
    scaling, base = kwargs["scaling"], kwargs["base"]
    head_dim, rotary_dim = kwargs["head_dim"], kwargs["rotary_dim"]
    max_positions = kwargs["max_position_embeddings"]
    if max_positions > 2**53:
        raise ValueError(
            f"max_position_embeddings must be <= 2**53 (where float64 still holds every position), got {max_positions}"
        )
    rope_type = getattr(scaling, "rope_type", "default")
    trained = getattr(scaling, "original_max_position_embeddings", None) or max_positions
    factor = getattr(scaling, "factor", None)
    dtype, dtype_given, dtype_invalid = _dtype_name(data)

    default_freq, _ = rope_frequencies(None, rotary_dim, base)
    scaled_freq, attention_factor = rope_frequencies(scaling, rotary_dim, base, max_positions)
    short_freq = None
    if rope_type == "longrope":
        short_freq, _ = rope_frequencies(scaling, rotary_dim, base, trained)
    pairs = _pairs(default_freq, scaled_freq, short_freq, rope_type, factor)

    report = {
        "source": source,
        "model_type": data.get("model_type"),
        "rope_type": rope_type,
        "rope_theta": base,
        "head_dim": head_dim,
        "rotary_dim": rotary_dim,
        "unrotated_dim": head_dim - rotary_dim,
        "rotated_pairs": rotary_dim // 2,
        "rotary_dim_note": width_note,
        "layout": kwargs["layout"],
        "trained_context": trained,
        "extended_context": max_positions,
        "factor": factor,
        "attention_factor": attention_factor,
        "softmax_scale_factor": softmax_scale(scaling),
        "torch_dtype": dtype,
        "torch_dtype_given": dtype_given,
        "torch_dtype_invalid": dtype_invalid,
        "pairs": pairs,
        "pair_groups": _groups(pairs),
        "precision": _audit(scaled_freq, attention_factor, max_positions, dtype),
    }
    report["risks"] = _risks(report, data, layer_type, scaling, scaled_freq)
    mrope = _mrope_refusal(data, layer_type, rotary_dim)
    if mrope is not None:
        report["risks"].append({"risk": "an M-RoPE section posenc refuses", "detail": mrope})
    # M-RoPE's keys choose its position streams (posenc.rope.mrope), whatever the rope type
    unused = [k for k in unused_rope_keys(data, layer_type) if k not in MROPE_HF_KEYS]
    if unused:
        report["risks"].append(
            {
                "risk": "rope keys the type does not use",
                "detail": f"{unused} in the {rope_type!r} rope dict change nothing (transformers warns and "
                "ignores them too); a misspelt key is one of these.",
            }
        )
    return report


def _mrope_refusal(data: Dict[str, Any], layer_type: Optional[str], rotary_dim: int) -> Optional[str]:
    """Why posenc's M-RoPE reader refuses the rope dict's ``mrope_section`` (and ``mrope_interleaved``),
    or ``None`` when there is none or it is read: the streams of the pairs cannot be made from it."""
    rope = rope_dicts(data).get(layer_type, {})
    if not isinstance(rope, dict) or "mrope_section" not in rope:
        return None
    flag = rope.get("mrope_interleaved")
    if flag is not None and not isinstance(flag, bool):
        return f"mrope_interleaved must be true or false, got {flag!r}"
    interleaved = bool(flag) or data.get("model_type") in INTERLEAVED_SECTION_MODEL_TYPES
    try:
        mrope_streams(rope["mrope_section"], rotary_dim // 2, "interleaved" if interleaved else "chunked")
    except (TypeError, ValueError) as exc:
        return f"{exc}; transformers' M-RoPE module would fail or read other pairs than the config means"
    return None


def _pairs(
    default_freq: torch.Tensor,
    scaled_freq: torch.Tensor,
    short_freq: Optional[torch.Tensor],
    rope_type: str,
    factor: Optional[float],
) -> List[Dict[str, Any]]:
    out = []
    for i, (d, s) in enumerate(zip(default_freq.tolist(), scaled_freq.tolist())):
        if not (d > 0 and s > 0 and math.isfinite(2 * math.pi / d) and math.isfinite(2 * math.pi / s)):
            raise ValueError(
                f"pair {i} turns at {s!r} rad per token ({d!r} unscaled): its wavelength 2*pi/theta is "
                "beyond float64, so it cannot be described; allowed: rope_theta and factors that keep "
                "every frequency above about 1e-300"
            )
        ratio = d / s  # > 1: the pair turns slower than unscaled
        if abs(ratio - 1.0) < 1e-9:
            kind = "kept"
        elif factor is not None and abs(ratio - factor) < 1e-9 * factor and rope_type != "longrope":
            kind = "interpolated"
        else:
            kind = _BETWEEN.get(rope_type, "scaled")
        entry = {
            "pair": i,
            "wavelength": 2 * math.pi / d,
            "scaled_wavelength": 2 * math.pi / s,
            "ratio": ratio,
            "kind": kind,
        }
        if short_freq is not None:
            entry["short_ratio"] = d / float(short_freq[i])
        out.append(entry)
    return out


def _groups(pairs: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Consecutive pairs with the same kind, as ranges (what the one-screen table shows)."""
    groups: List[Dict[str, Any]] = []
    for p in pairs:
        if groups and groups[-1]["kind"] == p["kind"]:
            g = groups[-1]
            g["last"] = p["pair"]
            g["ratio_min"], g["ratio_max"] = min(g["ratio_min"], p["ratio"]), max(g["ratio_max"], p["ratio"])
            g["wavelength_max"], g["scaled_wavelength_max"] = p["wavelength"], p["scaled_wavelength"]
        else:
            groups.append(
                {
                    "kind": p["kind"],
                    "first": p["pair"],
                    "last": p["pair"],
                    "ratio_min": p["ratio"],
                    "ratio_max": p["ratio"],
                    "wavelength_min": p["wavelength"],
                    "wavelength_max": p["wavelength"],
                    "scaled_wavelength_min": p["scaled_wavelength"],
                    "scaled_wavelength_max": p["scaled_wavelength"],
                }
            )
    return groups


def transformers_style_cos_sin(
    positions: torch.Tensor, inv_freq64: torch.Tensor, attention_factor: float, dtype: torch.dtype
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """cos, sin and angle as ``transformers`` computes them: float32 frequencies and angles.

    ``inv_freq`` is rounded to float32 (transformers computes it in float32), the angle
    ``position * inv_freq`` is formed in float32, cos/sin are taken in float32, scaled, and cast to
    ``dtype``. Returns float64 tensors of shape (*positions.shape, rotary_dim // 2).
    """
    angle32 = positions.to(torch.float32)[..., None] * inv_freq64.to(torch.float32)
    cos = (angle32.cos() * attention_factor).to(dtype).to(torch.float64)
    sin = (angle32.sin() * attention_factor).to(dtype).to(torch.float64)
    return cos, sin, angle32.to(torch.float64)


def _angle_error(angle: torch.Tensor, positions: torch.Tensor, inv_freq64: torch.Tensor) -> float:
    """Largest |angle - exact| modulo 2 pi (exact: float64 product; its own error is ~1e-10 rad)."""
    exact = positions.to(torch.float64)[..., None] * inv_freq64
    diff = torch.remainder(angle - exact + math.pi, 2 * math.pi) - math.pi
    return float(diff.abs().max())


def _audit(inv_freq64: torch.Tensor, attention_factor: float, max_positions: int, dtype: str) -> Dict[str, Any]:
    last = max_positions - 1
    positions = torch.arange(max(0, last - _AUDIT_POSITIONS + 1), last + 1, dtype=torch.int64)
    exact_angle = positions.to(torch.float64)[..., None] * inv_freq64
    exact_cos, exact_sin = exact_angle.cos() * attention_factor, exact_angle.sin() * attention_factor
    torch_dtype = getattr(torch, dtype)
    cos, sin, angle = transformers_style_cos_sin(positions, inv_freq64, attention_factor, torch_dtype)
    ours_cos, ours_sin = rope_cos_sin(positions, inv_freq64, attention_factor, torch.float32)

    def err(a, b, c, d):
        return float(max((a - b).abs().max(), (c - d).abs().max()))

    return {
        "position": last,
        "positions_audited": [int(positions[0]), last],
        "dtype": dtype,
        "transformers": {
            "angle_error": _angle_error(angle, positions, inv_freq64),
            "cos_sin_error": err(cos, exact_cos, sin, exact_sin),
            "tables_dtype": dtype,
        },
        # float64 angle: the rounding of inv_freq and of the product, each half an ulp (2**-53 relative)
        "posenc": {
            "angle_error": float(2 * last * inv_freq64.max()) * 2.0**-53,
            "cos_sin_error": err(ours_cos.double(), exact_cos, ours_sin.double(), exact_sin),
            "tables_dtype": "float32",
        },
    }


def _risks(
    report: Dict[str, Any], data: Dict[str, Any], layer_type: Optional[str], scaling, inv_freq64: torch.Tensor
) -> List[Dict[str, str]]:
    risks = []
    dtype, last = report["torch_dtype"], report["extended_context"] - 1
    if dtype in ("bfloat16", "float16"):
        rounded = inv_freq64.to(getattr(torch, dtype)).to(torch.float64)
        drift = float((last * (rounded - inv_freq64)).abs().max())
        risks.append(
            {
                "risk": "inv_freq stored in " + dtype,
                "detail": f"model.to(torch.{dtype}) rounds transformers' inv_freq buffer; the angle at "
                f"position {last:,} then moves by up to {drift:.3g} rad "
                f"({drift / (2 * math.pi):.3g} turns). posenc keeps its tables in float32.",
            }
        )
    for name in dict.fromkeys(("float32", dtype)):
        limit = EXACT_INTEGERS[name]
        if last >= limit:
            risks.append(
                {
                    "risk": f"positions past {name}'s exact-integer range",
                    "detail": f"{name} holds every integer only up to {limit:,}; this model claims "
                    f"positions up to {last:,}. Positions must stay integers (or float64) "
                    "until the angle is formed.",
                }
            )
    if report["rope_type"] in DYNAMIC_TYPES:
        what = (
            "the NTK base grows with the length"
            if report["rope_type"] == "dynamic"
            else f"the short factors switch to the long ones past {report['trained_context']:,} tokens"
        )
        risks.append(
            {
                "risk": "frequencies change during generation",
                "detail": f"{what}: keys cached before the change and queries after it were rotated "
                "with different frequencies. posenc offers freeze_frequencies(N).",
            }
        )
    # the fields as the reader sees them: a text_config unwrapped, this layer type's rope dict
    rope = rope_dicts(data).get(layer_type, {})
    if (
        reads_trained_length(report["rope_type"])
        and ConfigFields(data).get("original_max_position_embeddings") is None
        and rope.get("original_max_position_embeddings") is None
    ):
        risks.append(
            {
                "risk": "missing original_max_position_embeddings",
                "detail": f"{report['rope_type']} needs the trained length; it falls back to "
                f"max_position_embeddings={report['extended_context']:,}, which makes the "
                "scaling start at the extended length instead of the trained one.",
            }
        )
    audit = report["precision"]["transformers"]
    if audit["angle_error"] > 1e-3:
        risks.append(
            {
                "risk": "float32 angles at the longest context",
                "detail": f"transformers' float32 angle is off by {audit['angle_error']:.2g} rad at "
                f"position {last:,} (cos/sin by {audit['cos_sin_error']:.2g}); posenc's "
                f"tables by {report['precision']['posenc']['cos_sin_error']:.2g}.",
            }
        )
    return risks


def reads_trained_length(rope_type: str) -> bool:
    """Whether a rope dict of ``rope_type`` may give the trained length
    ``original_max_position_embeddings`` (its registry descriptor lists the key), so that a config
    without it leaves the reader to fall back on ``max_position_embeddings``."""
    return "original_max_position_embeddings" in get_descriptor(rope_type).allowed_hf_keys()


# -- rendering ------------------------------------------------------------------------------------------
def _n(x: float) -> str:
    if x == 0:
        return "0"
    if abs(x) >= 1e5 or abs(x) < 1e-2:
        return f"{x:.3g}"
    return f"{x:,.4g}" if abs(x) < 1000 else f"{x:,.0f}"


def format_report(report: Dict[str, Any]) -> str:
    """The one-screen text of ``posenc inspect``."""
    r = report
    lines = [
        f"{r['source']}  ({r['model_type'] or 'model type not given'})",
        f"  rope type      {r['rope_type']}" + (f", factor {_n(r['factor'])}" if r["factor"] else ""),
        f"  rope_theta     {_n(r['rope_theta'])}",
        f"  features       {r['rotary_dim']} of {r['head_dim']} per head rotated ({r['rotated_pairs']} pairs), "
        f"{r['unrotated_dim']} unrotated; layout {r['layout']}",
        *textwrap.wrap(r["rotary_dim_note"] or "", width=100, initial_indent=" " * 17, subsequent_indent=" " * 17),
        f"  context        trained {r['trained_context']:,}, extended {r['extended_context']:,}",
        f"  attention      cos/sin × {r['attention_factor']:.6g}"
        + (f", softmax scale × {r['softmax_scale_factor']:.6g}" if r["softmax_scale_factor"] != 1.0 else ""),
        "",
        "  pairs      what the scaling does            wavelength (tokens per turn) -> scaled",
    ]
    for g in r["pair_groups"]:
        span = f"{g['first']}" if g["first"] == g["last"] else f"{g['first']}-{g['last']}"
        ratio = (
            f"× {g['ratio_min']:.4g}"
            if abs(g["ratio_max"] - g["ratio_min"]) < 1e-9 * g["ratio_max"]
            else f"× {g['ratio_min']:.4g} .. {g['ratio_max']:.4g}"
        )
        what = g["kind"] if g["kind"] == "kept" else f"{g['kind']} {ratio}"
        wave = f"{_n(g['wavelength_min'])} .. {_n(g['wavelength_max'])}"
        if g["kind"] != "kept":
            wave += f" -> {_n(g['scaled_wavelength_min'])} .. {_n(g['scaled_wavelength_max'])}"
        lines.append(f"  {span:<10} {what:<32} {wave}")
    p = r["precision"]
    lines += [
        "",
        f"  precision at position {p['position']:,} ({p['dtype']})       angle error   cos/sin error",
        f"    transformers (float32 angles, {p['transformers']['tables_dtype']} tables)"
        f"{'':<{max(0, 8 - len(p['transformers']['tables_dtype']))}}{p['transformers']['angle_error']:10.2g}"
        f"   {p['transformers']['cos_sin_error']:10.2g}",
        f"    posenc (float64 angles, float32 tables)       {'< %.0e' % p['posenc']['angle_error']:>10}"
        f"   {p['posenc']['cos_sin_error']:10.2g}",
    ]
    if r.get("torch_dtype_invalid"):
        lines.append(
            f"    (the config's {r['torch_dtype_invalid']} is not a floating dtype "
            f"({', '.join(EXACT_INTEGERS)}): audited as float32)"
        )
    elif not r["torch_dtype_given"]:
        lines.append("    (the config gives no torch_dtype: audited as float32)")
    lines += ["", "  risks" if r["risks"] else "  risks: none found"]
    for risk in r["risks"]:
        lines += textwrap.wrap(
            f"{risk['risk']}: {risk['detail']}", width=100, initial_indent="    - ", subsequent_indent="      "
        )
    return "\n".join(lines)


def plot_wavelengths(report: Dict[str, Any], path) -> Path:
    """Write the per-pair wavelength figure (default vs scaled, with the two context lengths)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    pairs = report["pairs"]
    idx = [p["pair"] for p in pairs]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.semilogy(idx, [p["wavelength"] for p in pairs], "o-", ms=3, label=f"rope_theta={_n(report['rope_theta'])}")
    if report["rope_type"] != "default":
        ax.semilogy(
            idx,
            [p["scaled_wavelength"] for p in pairs],
            "s-",
            ms=3,
            label=f"{report['rope_type']} at {report['extended_context']:,} tokens",
        )
    ax.axhline(report["trained_context"], color="grey", ls="--", lw=1, label="trained context")
    if report["extended_context"] != report["trained_context"]:
        ax.axhline(report["extended_context"], color="grey", ls=":", lw=1, label="extended context")
    ax.set_xlabel("rotation pair i")
    ax.set_ylabel("wavelength 2π/θᵢ (tokens)")
    # the source is a path: its text is shown as written, never parsed as mathtext ($...$)
    ax.set_title(f"{report['source']}: {report['rotary_dim']} rotated features", parse_math=False)
    ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        save_figure(fig, path)  # atomically: a link at path is replaced, never written through
    finally:
        plt.close(fig)
    return path


# -- command line ---------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="a config.json file or a model folder holding one")
    parser.add_argument("--json", action="store_true", help="print the report as JSON instead of text")
    parser.add_argument(
        "--plot",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write the per-pair wavelength figure (.png, .svg or .pdf)",
    )
    parser.add_argument(
        "--layer-type", default=None, help="for configs with one rope dict per layer type: which one to inspect"
    )


def run(args: argparse.Namespace) -> int:
    if args.plot is not None and args.plot.suffix.lower() not in (".png", ".svg", ".pdf"):
        print(f"posenc inspect: --plot must end in .png, .svg or .pdf, got {str(args.plot)!r}", file=sys.stderr)
        return 2
    try:
        report = inspect_config(args.config, layer_type=args.layer_type)
        # JSON has no Infinity or NaN: a report holding one is refused here, not printed invalid
        text = json.dumps(report, indent=2, allow_nan=False) if args.json else format_report(report)
    except (InspectError, ValueError, TypeError) as exc:
        print(f"posenc inspect: {exc}", file=sys.stderr)
        return 2
    if args.plot is not None:
        try:
            plot_wavelengths(report, args.plot)
        except OSError as exc:
            print(f"posenc inspect: cannot write {args.plot}: {exc.strerror or exc}", file=sys.stderr)
            return 2
    print(text)
    if args.plot is not None and not args.json:
        print(f"\nwrote {args.plot}")
    return 0
