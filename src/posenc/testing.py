"""Test helpers for integrations: tiny random ``transformers`` models with real position encodings,
and an exact float64 reference.

For anyone testing a RoPE integration (posenc's own, or one of their own) against real model code:

    from posenc import testing

    model = testing.tiny_model("llama-3.1-8b")        # 2 layers, random weights, real rope fields
    exact = testing.float64_reference(model)           # the yardstick
    ids = torch.randint(1, testing.VOCAB, (2, 64))
    error = (testing.logits(model, ids) - testing.logits(exact, ids)).abs().max()

A model here has 2 layers, a small width and a 96-token vocabulary, but every field that decides its
RoPE (``rope_theta``, head size, rotated width, scaling type and parameters, trained and extended
context) is copied from a real public config: the fixtures of :mod:`posenc.fixtures`, plus a few
families posenc ships no fixture for (their ``transformers`` default rope fields); :func:`case_names`
lists them. Nothing is downloaded; the weights are random (seeded). posenc uses them to test and
measure :mod:`posenc.integrations.transformers` on the code paths real checkpoints take.

:func:`float64_reference` turns a copy of such a model into the yardstick: the unpatched
``transformers`` code in float64 with its rotary module's angles computed exactly in float64.

Needs ``transformers`` installed when a model is built; importing this module does not.
"""

from __future__ import annotations

import copy
import importlib
import math
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import nn

from .fixtures import load_fixture
from .hf import rotary_kwargs_from_hf
from .rope.scaling import rope_frequencies

VOCAB = 96
LAYERS = 2

_LLAMA31 = {k: v for k, v in load_fixture("llama-3.1-8b").items() if k not in ("source", "note", "model_type")}

#: case name -> (model_type, rope-deciding config fields); ``fixture:<name>`` cases copy a fixture
CASES: Dict[str, Tuple[str, Dict]] = {
    "llama-3.1-8b": ("fixture", {"name": "llama-3.1-8b"}),
    "llama-3.2-1b": ("fixture", {"name": "llama-3.2-1b"}),
    "codellama-7b": ("fixture", {"name": "codellama-7b"}),
    "llama-linear": ("llama", {**_LLAMA31, "rope_scaling": {"rope_type": "linear", "factor": 4.0}}),
    "llama-dynamic": (
        "llama",
        {**_LLAMA31, "max_position_embeddings": 8192, "rope_scaling": {"rope_type": "dynamic", "factor": 4.0}},
    ),
    "llama-yarn": (
        "llama",
        {
            **_LLAMA31,
            "max_position_embeddings": 32768,
            "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192},
        },
    ),
    "qwen2.5-7b-instruct-yarn": ("fixture", {"name": "qwen2.5-7b-instruct-yarn"}),
    "phi-3.5-mini-instruct": ("fixture", {"name": "phi-3.5-mini-instruct"}),
    "phi-2": ("fixture", {"name": "phi-2"}),
    "gpt-neox-20b": ("fixture", {"name": "gpt-neox-20b"}),
    "gpt-j-6b": ("fixture", {"name": "gpt-j-6b"}),
    "deepseek-v3": ("fixture", {"name": "deepseek-v3"}),
    "deepseek-v2-lite": ("fixture", {"name": "deepseek-v2-lite"}),
    "gpt-oss-20b": ("fixture", {"name": "gpt-oss-20b"}),
    "mistral": ("mistral", {"head_dim": 128, "rope_theta": 1000000.0, "max_position_embeddings": 32768}),
    "qwen3": ("qwen3", {"head_dim": 128, "rope_theta": 1000000.0, "max_position_embeddings": 40960}),
    "gemma": ("gemma", {"head_dim": 256, "rope_theta": 10000.0, "max_position_embeddings": 8192}),
    "falcon": (
        "falcon",
        {
            "hidden_size": 128,
            "num_attention_heads": 2,
            "rope_theta": 10000.0,
            "max_position_embeddings": 2048,
            "alibi": False,
        },
    ),
}


def case_names() -> List[str]:
    """Every case :func:`tiny_model` builds."""
    return list(CASES)


def case_fields(name: str) -> Tuple[str, Dict]:
    """``(model_type, fields)`` of case ``name``: the rope-deciding fields, before shrinking."""
    if name not in CASES:
        raise ValueError(f"case must be one of {case_names()}, got {name!r}")
    model_type, fields = CASES[name]
    if model_type == "fixture":
        fields = {k: v for k, v in load_fixture(fields["name"]).items() if k not in ("source", "note")}
        model_type = fields.pop("model_type")
    return model_type, copy.deepcopy(fields)


def tiny_config(name: str, **overrides):
    """The ``transformers`` config of case ``name``: real rope fields, 2 layers, small width."""
    from transformers import AutoConfig

    model_type, fields = case_fields(name)
    head_dim = rotary_kwargs_from_hf({"model_type": model_type, **fields})["head_dim"]
    small: Dict[str, object] = {
        "vocab_size": VOCAB,
        "num_hidden_layers": LAYERS,
        "tie_word_embeddings": False,
        "pad_token_id": 0,
    }
    if model_type in ("llama", "mistral", "qwen2", "qwen3", "gemma", "gpt_oss"):
        small.update(
            hidden_size=64, intermediate_size=64, num_attention_heads=2, num_key_value_heads=1, head_dim=head_dim
        )
        if model_type == "gpt_oss":
            small.update(num_local_experts=4, num_experts_per_tok=2)
    elif model_type in ("phi3", "phi", "gpt_neox", "falcon"):
        # head size = hidden_size / heads here, so the width follows the real head size
        small.update(hidden_size=2 * head_dim, intermediate_size=64, num_attention_heads=2)
        if model_type == "phi3":
            small["num_key_value_heads"] = 2
    elif model_type == "gptj":
        small = {
            "vocab_size": VOCAB,
            "n_layer": LAYERS,
            "n_embd": 2 * 128,
            "n_head": 2,
            "n_inner": 64,
            "tie_word_embeddings": False,
            "pad_token_id": 0,
        }
    elif model_type == "deepseek_v3":
        small.update(
            hidden_size=64,
            intermediate_size=64,
            moe_intermediate_size=32,
            num_attention_heads=2,
            num_key_value_heads=2,
            qk_nope_head_dim=16,
            v_head_dim=16,
            kv_lora_rank=32,
            q_lora_rank=32,
            n_routed_experts=4,
            num_experts_per_tok=2,
            n_group=1,
            topk_group=1,
            first_k_dense_replace=LAYERS,
        )
    elif model_type == "deepseek_v2":
        small.update(
            hidden_size=64,
            intermediate_size=64,
            moe_intermediate_size=32,
            num_attention_heads=2,
            num_key_value_heads=2,
            qk_nope_head_dim=16,
            v_head_dim=16,
            kv_lora_rank=32,
            q_lora_rank=None,
            n_routed_experts=4,
            num_experts_per_tok=2,
            n_group=1,
            topk_group=1,
            first_k_dense_replace=LAYERS,
        )
    else:
        raise ValueError(f"no tiny shape for model_type {model_type!r}")
    fields = {k: v for k, v in fields.items() if k not in ("n_embd", "n_head")}
    return AutoConfig.for_model(model_type, **{**fields, **small, **overrides})


def tiny_model(name: str, seed: int = 0, attn_implementation: str = "eager", **overrides) -> nn.Module:
    """A randomly initialised ``*ForCausalLM`` of case ``name`` in eval mode (float32, CPU)."""
    from transformers import AutoModelForCausalLM

    config = tiny_config(name, **overrides)
    config._attn_implementation = attn_implementation
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=attn_implementation)
    if hasattr(model.config, "_experts_implementation"):
        model.config._experts_implementation = "eager"  # the grouped-mm experts refuse float64
    with torch.no_grad():
        # the default init (std 0.02) makes tiny logits nearly uniform; larger weights make the
        # attention pattern, and so the positions, matter to the output
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 1.0 / math.sqrt(p.shape[-1]))
    return model.eval()


# -- the float64 yardstick ------------------------------------------------------------------------------
class ExactRotary(nn.Module):
    """A model's rotary module, recomputed exactly: float64 angles and cos/sin, in its output format.

    The frequencies come from :func:`posenc.rope.rope_frequencies` (float64; parity with
    ``transformers``' own functions is tested to 1e-6 relative in ``tests/test_hf_parity.py``), at the
    call's length ``max(position_ids) + 1`` as ``transformers`` chooses for the length-dependent types.
    The angle and cos/sin are plain torch float64 operations, not posenc's tables.
    """

    def __init__(self, config, model_type: str, original: Optional[nn.Module] = None):
        super().__init__()
        from .integrations.transformers import rotary_kwargs_in_code  # the width the family's code uses

        kwargs, _ = rotary_kwargs_in_code(config, None if original is None else [original])
        self.scaling, self.base, self.rotary_dim = kwargs["scaling"], kwargs["base"], kwargs["rotary_dim"]
        self.model_type = model_type

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor):
        seq_len = int(position_ids.max()) + 1
        inv_freq, factor = rope_frequencies(self.scaling, self.rotary_dim, self.base, seq_len)
        angles = position_ids.to(torch.float64)[..., None] * inv_freq.to(x.device)  # (B, S, r/2)
        cos, sin = angles.cos() * factor, angles.sin() * factor
        if self.model_type == "gptj":
            return sin.to(x.dtype), cos.to(x.dtype)
        if self.model_type == "deepseek_v2":  # freqs_cis = cos + i sin, complex128 here
            return torch.complex(cos, sin)
        if self.model_type != "gpt_oss":  # gpt-oss keeps the half-width form
            cos, sin = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)
        return cos.to(x.dtype), sin.to(x.dtype)


def float64_reference(model: nn.Module) -> nn.Module:
    """A float64 copy of ``model`` (unpatched) whose rotary module(s) compute exactly.

    Everything else (the rotation, attention, the rest of the network) is the ``transformers`` code,
    run in float64. ``model`` must not be patched by posenc.
    """
    if model.__dict__.get("_posenc_patch") is not None:
        raise ValueError("float64_reference needs the unpatched model; undo the posenc patch first")
    ref: Any = copy.deepcopy(model).to(torch.float64)  # a transformers model: it has .config
    model_type = ref.config.model_type
    module = importlib.import_module(type(ref).__module__)
    slots = [
        (parent, attr, child)
        for parent in ref.modules()
        for attr, child in parent.named_children()
        if type(child).__name__.endswith("RotaryEmbedding") and type(child).__module__ == module.__name__
    ]
    if not slots:
        raise ValueError(f"no rotary embedding module found in {type(model).__name__}")
    for parent, attr, child in slots:
        setattr(parent, attr, ExactRotary(ref.config, model_type, child))
    return ref


def logits(
    model: nn.Module, input_ids: torch.Tensor, position_ids: Optional[torch.Tensor] = None, **kwargs
) -> torch.Tensor:
    """float64 logits of one forward without gradients."""
    with torch.no_grad():
        return model(input_ids, position_ids=position_ids, **kwargs).logits.to(torch.float64)
