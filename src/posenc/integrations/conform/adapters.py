"""The built-in adapters: posenc's own rotary embedding, and the installed ``transformers``.

Each is a function of the adapter protocol (:mod:`posenc.integrations.conform`), holding one rotary
module per config across calls as an engine holds its cache, so a length-dependent scaling that
forgets to reset shows. ``transformers`` is imported only when its adapter is first called.

* :func:`posenc_rotate`: :class:`posenc.rope.RotaryEmbedding` built from
  ``rotary_kwargs_from_hf(config, strict=False)`` (keys a rope type does not use are ignored, as
  ``transformers`` ignores them), its tables and rotation,
  and the family's softmax scale (:func:`~.reference.family_softmax_scale`).
* :func:`transformers_rotate`: the config built by ``transformers.AutoConfig.for_model``, the
  family's own rotary embedding class (its ``ROPE_INIT_FUNCTIONS``, its dynamic update, its attention
  scaling), rotated by the family's own functions on the rotated slice: ``apply_rotary_pos_emb``
  (Llama's where the family has none), ``apply_rotary_pos_emb_interleave`` for ``rope_interleave``
  (a family without one does not read that field: such configs are not supported), GPT-J's
  ``create_sinusoidal_positions`` and rotation (its table built up to the largest position asked:
  GPT-J's own attention holds ``n_positions`` rows and cannot index past them), DeepSeek-V2's
  complex rotation. The softmax scale is
  read from the family's attention module built on the meta device (multi-head latent attention
  folds YaRN's ``mscale_all_dim`` into it).
"""

from __future__ import annotations

import importlib
import inspect
import json
import threading
from typing import Any, Callable, Dict, Optional, Tuple, Union

import torch

from ...rope.embedding import RotaryEmbedding
from ...rope.hfconfig import rotary_kwargs_from_hf
from .reference import family_softmax_scale

Rotated = Union[Tuple[torch.Tensor, torch.Tensor], Tuple[torch.Tensor, torch.Tensor, float]]
#: config keys that describe the file, not the model (the fixtures' provenance)
NOT_MODEL_KEYS = ("source", "note")


class _PerConfig:
    """One object per config (its JSON text is the key), built on first use, thread-safe."""

    def __init__(self, build: Callable[[Dict[str, Any]], Any]) -> None:
        self.build = build
        self.made: Dict[str, Any] = {}
        self.lock = threading.Lock()

    def __call__(self, config: Dict[str, Any]) -> Any:
        key = json.dumps(config, sort_keys=True, default=str)
        with self.lock:
            if key not in self.made:
                self.made[key] = self.build(config)
            return self.made[key]


#: the posenc adapter's cache size: small, so that far positions take the per-call rows (the path a
#: long context takes past the default 64 MiB cache) without tabulating every row below them
POSENC_CACHE_BYTES = 1 << 14


class _SmallCacheRotary(RotaryEmbedding):
    cache_limit_bytes = POSENC_CACHE_BYTES


def _posenc_modules(config: Dict[str, Any]) -> Tuple[Dict[torch.dtype, RotaryEmbedding], float]:
    modules: Dict[torch.dtype, RotaryEmbedding] = {}
    for dtype in (torch.float32, torch.float64):
        # as transformers reads a config: keys the rope type does not use are ignored, not refused
        rope = _SmallCacheRotary(**rotary_kwargs_from_hf(config, strict=False))
        modules[dtype] = rope.double() if dtype == torch.float64 else rope  # .double(): float64 tables
    return modules, family_softmax_scale(config, modules[torch.float32].scaling)


_POSENC = _PerConfig(_posenc_modules)


def posenc_rotate(config: Dict[str, Any], q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor) -> Rotated:
    """posenc's own rotation of ``(tokens, heads, head_dim)`` q and k (the adapter protocol): a
    :class:`~posenc.rope.RotaryEmbedding` per config, cast with ``.double()`` for float64 calls."""
    modules, scale = _POSENC(config)
    rope = modules.get(q.dtype, modules[torch.float32])
    q_rot, k_rot = rope(q[None], k[None], positions[None], heads_first=False)
    return q_rot[0], k_rot[0], scale


posenc_rotate.engine = "posenc"  # type: ignore[attr-defined]


def _version_of_posenc() -> str:
    from ... import __version__

    return __version__


posenc_rotate.version = _version_of_posenc()  # type: ignore[attr-defined]


# -- transformers -----------------------------------------------------------------------------------
def _family(model_type: str) -> Any:
    """The modeling module of a model type (``gemma3_text`` lives in ``gemma3``)."""
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    module = model_type_to_module_name(model_type)
    return importlib.import_module(f"transformers.models.{module}.modeling_{module}")


class _TransformersRotary:
    """The family's rotary code for one config, as ``transformers`` builds it."""

    def __init__(self, config: Dict[str, Any]) -> None:
        from transformers import AutoConfig

        fields = {k: v for k, v in config.items() if k not in NOT_MODEL_KEYS}
        self.model_type = str(fields.pop("model_type", "llama"))
        self.hf = AutoConfig.for_model(self.model_type, **fields)
        self.family = _family(self.model_type)
        self.interleaved = self.model_type == "gptj" or (
            bool(getattr(self.hf, "rope_interleave", False)) and hasattr(self.family, "apply_rotary_pos_emb_interleave")
        )
        self.rotary_dim = getattr(self.hf, "rotary_dim", None) if self.model_type == "gptj" else None
        self.rotary: Any = None
        if self.model_type != "gptj":
            rotary_class = next(
                getattr(self.family, name) for name in dir(self.family) if name.endswith("RotaryEmbedding")
            )
            self.layer_type = None
            if "layer_type" in inspect.signature(rotary_class.forward).parameters:
                # a family with one rope per layer type (Gemma 3): the config's one rope dict for
                # every layer type the family knows, read back for one of them
                self.layer_type = sorted(set(self.hf.layer_types))[0]
                flat = dict(self.hf.rope_parameters)
                self.hf.rope_parameters = {t: dict(flat) for t in set(self.hf.layer_types)}
            self.rotary = rotary_class(self.hf)
        self.scale = self._softmax_multiplier()

    def _softmax_multiplier(self) -> float:
        attention = [getattr(self.family, n) for n in dir(self.family) if n.endswith("Attention") and "Flash" not in n]
        for cls in attention:
            try:
                with torch.device("meta"):
                    module = cls(self.hf, layer_idx=0)
            except Exception:  # not the family's attention, or one that needs more than a config
                continue
            qk = getattr(module, "qk_head_dim", None)
            if qk is not None and getattr(module, "scaling", None) is not None:
                return float(module.scaling) * float(qk) ** 0.5
        return 1.0

    def rotate(self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor) -> Rotated:
        ids = positions[None]  # (1, T)
        if self.model_type == "gptj":
            return (*self._gptj(q, k, positions), self.scale)
        if self.model_type == "deepseek_v2":
            freqs_cis = self.rotary(q, ids)  # (1, T, r/2) complex
            q4, k4 = q.transpose(0, 1)[None], k.transpose(0, 1)[None]  # (1, H, T, D)
            q_rot, k_rot = self.family.apply_rotary_emb(q4, k4, freqs_cis)
            return q_rot[0].transpose(0, 1), k_rot[0].transpose(0, 1), self.scale
        if self.layer_type is None:
            cos, sin = self.rotary(q, ids)  # (1, T, r) or, in some families, (1, T, r/2)
            inv_freq = self.rotary.inv_freq
        else:
            cos, sin = self.rotary(q, ids, self.layer_type)
            inv_freq = getattr(self.rotary, f"{self.layer_type}_inv_freq")
        r = 2 * int(inv_freq.shape[-1])  # the rotated width: one frequency per pair
        q4, k4 = q.transpose(0, 1)[None], k.transpose(0, 1)[None]  # (1, H, T, D)
        qr, kr = q4[..., :r], k4[..., :r]
        if self.interleaved:
            qr, kr = self.family.apply_rotary_pos_emb_interleave(qr, kr, cos, sin)
            # it returns the pairs in half-split order; put them back where the input had them
            qr, kr = _interleave(qr), _interleave(kr)
        else:
            apply = getattr(self.family, "apply_rotary_pos_emb", None) or _family("llama").apply_rotary_pos_emb
            qr, kr = apply(qr, kr, cos, sin)  # the family's own function, on the rotated slice
        q_rot = torch.cat((qr, q4[..., r:]), dim=-1)[0].transpose(0, 1)
        k_rot = torch.cat((kr, k4[..., r:]), dim=-1)[0].transpose(0, 1)
        return q_rot.contiguous(), k_rot.contiguous(), self.scale

    def _gptj(self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        r = int(self.rotary_dim or q.shape[-1])
        table = self.family.create_sinusoidal_positions(int(positions.max()) + 1, r)  # (L, r): sin, cos
        sin, cos = table[positions].to(q.dtype)[None].chunk(2, dim=-1)  # (1, T, r/2) each
        outs = []
        for x in (q, k):
            x4 = x[None]  # (1, T, H, D): GPT-J rotates sequence-first
            rot = self.family.apply_rotary_pos_emb(x4[..., :r], sin, cos)
            outs.append(torch.cat((rot, x4[..., r:]), dim=-1)[0])
        return outs[0], outs[1]


def _interleave(x: torch.Tensor) -> torch.Tensor:
    """Half-split order ``(a_0 .. a_n, b_0 .. b_n)`` back to pairs ``(a_0, b_0, a_1, b_1, ...)``."""
    half = x.shape[-1] // 2
    return torch.stack((x[..., :half], x[..., half:]), dim=-1).flatten(-2)


_TRANSFORMERS = _PerConfig(_TransformersRotary)


def transformers_rotate(config: Dict[str, Any], q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor) -> Rotated:
    """The installed ``transformers``' rotation of ``(tokens, heads, head_dim)`` q and k (the adapter protocol)."""
    with torch.no_grad():
        return _TRANSFORMERS(config).rotate(q, k, positions)


def _transformers_supports(config: Dict[str, Any]) -> Union[bool, str]:
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
    rope_type = rope.get("rope_type", rope.get("type", "default")) if isinstance(rope, dict) else "default"
    if rope_type not in ROPE_INIT_FUNCTIONS and rope_type not in ("default", "su", "mrope"):
        return f"transformers has no rope type {rope_type!r} (its ROPE_INIT_FUNCTIONS: {sorted(ROPE_INIT_FUNCTIONS)})"
    model_type = str(config.get("model_type", "llama"))
    if config.get("rope_interleave") and not hasattr(_family(model_type), "apply_rotary_pos_emb_interleave"):
        return f"transformers' {model_type} does not read rope_interleave (its attention rotates half-split pairs)"
    return True


def _transformers_version() -> Optional[str]:
    try:
        import transformers
    except ImportError:
        return None
    return str(transformers.__version__)


transformers_rotate.engine = "transformers"  # type: ignore[attr-defined]
transformers_rotate.supports = _transformers_supports  # type: ignore[attr-defined]


#: the built-in adapters by the name ``posenc conform --adapter`` takes
BUILTIN = {"posenc": posenc_rotate, "transformers": transformers_rotate}


def engine_version(adapter: Callable[..., Any]) -> str:
    """The adapter's ``version`` attribute, else (for the transformers adapter) the installed release."""
    version = getattr(adapter, "version", None)
    if version is None and adapter is transformers_rotate:
        version = _transformers_version()
    return str(version) if version is not None else "unknown"
