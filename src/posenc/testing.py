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

For an engine of one's own, :func:`assert_conforms` holds its rotation to the exact answer on every
fixture and every rope type in one line (``posenc conform``'s checks, with the causes of a wrong
answer named).

Needs ``transformers`` installed when a model is built; importing this module does not.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

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
    # Salesforce/codegen-350M-mono: GPT-J's rotary code, 32 of 64 features rotated
    "codegen-350m": ("codegen", {"n_embd": 1024, "n_head": 16, "n_positions": 2048, "rotary_dim": 32}),
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


#: the sizes of a tiny DeepSeek V2/V3 model (its ``q_lora_rank`` is set per family in :func:`tiny_config`)
_MLA_FIELDS: Dict[str, object] = dict(
    hidden_size=64, intermediate_size=64, num_attention_heads=2, num_key_value_heads=2
)
_MLA_FIELDS.update(qk_nope_head_dim=16, v_head_dim=16, kv_lora_rank=32)  # the latent attention
_MLA_FIELDS.update(moe_intermediate_size=32, n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1)
_MLA_FIELDS.update(first_k_dense_replace=LAYERS)


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
    elif model_type == "codegen":  # its attention splits the heads over 4 groups: 4 heads
        small = {
            "vocab_size": VOCAB,
            "n_layer": LAYERS,
            "n_embd": 4 * head_dim,
            "n_head": 4,
            "n_inner": 64,
            "tie_word_embeddings": False,
            "pad_token_id": 0,
        }
    elif model_type in ("deepseek_v3", "deepseek_v2"):
        # multi-head latent attention; V2-Lite projects its queries without a low-rank step
        small.update(_MLA_FIELDS, q_lora_rank=32 if model_type == "deepseek_v3" else None)
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
    The angle and cos/sin are plain torch float64 operations, not posenc's tables; they are rounded
    once to the dtype of ``x`` (float64 in :func:`float64_reference`).

    The output format is the original module's own, read from its output: ``cat(theta, theta)``
    (Llama), ``repeat_interleave`` (Cohere), one entry per frequency (gpt-oss), one complex tensor
    (Llama 4, DeepSeek-V2), ``(sin, cos)`` (GPT-J); a module called with a ``layer_type`` gets that
    layer type's rope dict. M-RoPE position ids (3, batch, seq) must be text (three equal streams).
    """

    def __init__(self, config, model_type: str, original: Optional[nn.Module] = None):
        super().__init__()
        from .integrations import discovery
        from .integrations.hints import HINTS
        from .integrations.transformers import rotary_kwargs_in_code

        originals = None if original is None else [original]
        layer_types: Tuple[Optional[str], ...] = (None,)
        if original is not None:
            layer_types = discovery.rotary_layer_types(original, config) or (None,)
        self.ropes = {}
        for layer_type in layer_types:
            kwargs, _ = rotary_kwargs_in_code(config, originals, layer_type=layer_type)
            self.ropes[layer_type] = (kwargs["scaling"], kwargs["base"], kwargs["rotary_dim"])
        self.scaling, self.base, self.rotary_dim = self.ropes[layer_types[0]]
        if layer_types != (None,):  # what the families keep, for model code that loops over them
            self.layer_types = list(layer_types)
            self.rope_type = {k: str(getattr(v[0], "rope_type", "default")) for k, v in self.ropes.items()}
        self.model_type = model_type
        self.config = config  # read by some families' model code (Granite-SWA's rope dicts)
        hint = HINTS.get(model_type)
        self.sin_first = bool(hint is not None and hint.sin_first)  # GPT-J's (sin, cos)
        self.form = "cat"  # the form of the original's output (its order does not change it)
        if original is not None:
            self.form, _ = discovery.rotary_output_form(original, layer_types[0], config=config)

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor, layer_type: Optional[str] = None):
        if position_ids.dim() == 3:  # M-RoPE: text only here, where the three streams are one
            if not bool((position_ids == position_ids[:1]).all()):
                raise ValueError("ExactRotary computes text positions only: the three M-RoPE streams differ")
            position_ids = position_ids[0]
        scaling, base, rotary_dim = self.ropes[layer_type if layer_type in self.ropes else next(iter(self.ropes))]
        seq_len = int(position_ids.max()) + 1
        inv_freq, factor = rope_frequencies(scaling, rotary_dim, base, seq_len)
        angles = position_ids.to(torch.float64)[..., None] * inv_freq.to(x.device)  # (B, S, r/2)
        cos, sin = angles.cos() * factor, angles.sin() * factor
        if self.form == "complex":  # freqs_cis = cos + i sin, complex128 here
            out = torch.complex(cos, sin)
            return out if x.dtype == torch.float64 else out.to(torch.complex64)
        if self.form == "cat":
            cos, sin = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)
        elif self.form == "interleave":
            cos, sin = cos.repeat_interleave(2, -1), sin.repeat_interleave(2, -1)
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        return (sin, cos) if self.sin_first else (cos, sin)


def float64_reference(model: nn.Module) -> nn.Module:
    """A float64 copy of ``model`` (unpatched) whose rotary module(s) compute exactly.

    Everything else (the rotation, attention, the rest of the network) is the ``transformers`` code,
    run in float64. Only the language model's rotary modules are replaced (a vision tower keeps
    its own). ``model`` must not be patched by posenc.
    """
    from .integrations.transformers import language_model_of

    if model.__dict__.get("_posenc_patch") is not None:
        raise ValueError("float64_reference needs the unpatched model; undo the posenc patch first")
    ref: Any = copy.deepcopy(model).to(torch.float64)  # a transformers model: it has .config
    scope = language_model_of(ref)
    config = getattr(scope, "config", ref.config)
    slots = [
        (parent, attr, child)
        for parent in scope.modules()
        for attr, child in parent.named_children()
        if type(child).__name__.endswith("RotaryEmbedding") and "Vision" not in type(child).__name__
    ]
    if not slots:
        raise ValueError(f"no rotary embedding module found in {type(model).__name__}")
    for parent, attr, child in slots:
        setattr(parent, attr, ExactRotary(config, config.model_type, child))
    return ref


def logits(
    model: nn.Module, input_ids: torch.Tensor, position_ids: Optional[torch.Tensor] = None, **kwargs
) -> torch.Tensor:
    """float64 logits of one forward without gradients."""
    with torch.no_grad():
        return model(input_ids, position_ids=position_ids, **kwargs).logits.to(torch.float64)


def decode_vs_full(model: Any, input_ids: torch.Tensor, new: int) -> float:
    """Max |logits of cached decoding - logits of one full forward| over ``new`` greedy steps.

    How far the keys a KV cache keeps disagree with the ones a full forward computes: near the
    model's float32 noise when positions are read the same way at every step (``patch``'s
    ``freeze_frequencies`` for the length-dependent rope types), far above it when they are not.
    """
    with torch.no_grad():
        out = model.generate(
            input_ids,
            max_new_tokens=new,
            min_new_tokens=new,
            do_sample=False,
            pad_token_id=0,
            output_logits=True,
            return_dict_in_generate=True,
        )
        steps = torch.stack(out.logits, 1).double()  # (B, new, V)
        full = model(out.sequences[:, :-1]).logits[:, input_ids.shape[1] - 1 :].double()
    return float((steps - full).abs().max())


# -- any model type ------------------------------------------------------------------------------------
#: small values for the size fields a ``transformers`` config may have; only fields the config
#: class has are set (``num_experts`` etc. for MoE families, the ``*_lora_rank`` of MLA)
SMALL_FIELDS: Dict[str, object] = {
    "vocab_size": VOCAB,
    "hidden_size": 64,
    "intermediate_size": 64,
    "ffn_hidden_size": 64,
    "num_hidden_layers": LAYERS,
    "num_layers": LAYERS,
    "n_layer": LAYERS,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "num_experts": 4,
    "num_local_experts": 4,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32,
    "n_shared_experts": 1,
    "n_group": 1,
    "topk_group": 1,
    "kv_lora_rank": 32,
    "q_lora_rank": 32,
    "qk_rope_head_dim": 16,
    "qk_nope_head_dim": 16,
    "v_head_dim": 16,
    "tie_word_embeddings": False,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
}


def _partial_rotary_factors(rope: Any) -> List[float]:
    """Every ``partial_rotary_factor`` in a ``rope_parameters`` dict (one, or one per layer type)."""
    if not isinstance(rope, dict):
        return []
    found = [rope["partial_rotary_factor"]] if isinstance(rope.get("partial_rotary_factor"), (int, float)) else []
    return found + [f for v in rope.values() if isinstance(v, dict) for f in _partial_rotary_factors(v)]


#: counts that a family may hold below the small value (ZAYA routes each token to one expert, a family
#: may have no shared expert): the tiny config never asks for more than the family's default
AT_MOST_DEFAULT = ("num_experts_per_tok", "n_shared_experts", "topk_group")


def _head_size(fields: Dict[str, Any], renamed: Dict[str, str]) -> Optional[int]:
    """Features per head: ``head_dim``, or the width over the heads (GPT-J keeps no ``head_dim``)."""
    if isinstance(fields.get("head_dim"), int):
        return fields["head_dim"]
    width, heads = (fields.get(renamed.get(k, k)) for k in ("hidden_size", "num_attention_heads"))
    return width // heads if isinstance(width, int) and isinstance(heads, int) and heads > 0 else None


def _shrunk(defaults: Dict[str, Any], layers: int = LAYERS, renamed: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """The small fields for a config whose defaults are ``defaults`` (``config.to_dict()``).

    ``renamed`` is the config class's ``attribute_map`` (DBRX's ``d_model`` is its ``hidden_size``):
    a small field is set under the name the config stores it by.
    """
    renamed = renamed or {}
    small = {}
    for key, value in SMALL_FIELDS.items():
        name = renamed.get(key, key)
        if name in defaults:
            small[name] = value
            default = defaults[name]
            if key in AT_MOST_DEFAULT and isinstance(default, int) and not isinstance(default, bool):
                small[name] = min(int(value), default)  # type: ignore[call-overload]
    heads = renamed.get("num_attention_heads", "num_attention_heads")
    if "kv_lora_rank" in defaults and heads in small:  # MLA: one latent, every head
        small[renamed.get("num_key_value_heads", "num_key_value_heads")] = small[heads]
    for key in ("num_hidden_layers", "num_layers", "n_layer"):
        if renamed.get(key, key) in small:
            small[renamed.get(key, key)] = layers
    if "head_dim" in small:
        factors = _partial_rotary_factors(defaults.get("rope_parameters"))
        # a head whose rotated width int(head_dim * factor) is odd has no pairs to rotate: widen it
        head = next((d for d in range(16, 129, 8) if all(int(d * f) >= 2 and int(d * f) % 2 == 0 for f in factors)), 16)
        small["head_dim"] = head
    rotary, full, tiny = defaults.get("rotary_dim"), _head_size(defaults, renamed), _head_size(small, renamed)
    if isinstance(rotary, int) and full and tiny and 0 < rotary < full:  # the same share of the head
        small["rotary_dim"] = max(2, tiny * rotary // full // 2 * 2)
    depth = defaults.get(renamed.get("num_hidden_layers", "num_hidden_layers"))
    for key, value in defaults.items():
        if key == "per_layer_config" and isinstance(value, dict):  # overrides for layers past the tiny depth
            small[key] = {k: v for k, v in value.items() if str(k).isdigit() and int(k) < layers}
        elif key.endswith("_config") and isinstance(value, dict):
            small[key] = {**value, **_shrunk(value, layers)}
        elif key == "attn_layer_indices" and value is None:  # Bamba: no attention layer by default
            small[key] = [layers - 1]
        elif key == "block_types" and isinstance(value, list):  # RecurrentGemma's repeating pattern
            small[key] = list(dict.fromkeys(value))[-layers:]
        elif key in small and isinstance(value, list) and len(value) == depth:  # a size per layer (Gemma 3n)
            small[key] = [small[key]] * layers
        elif isinstance(value, list) and len(value) == depth and len(value) > layers:
            # one entry per layer (layer_types and the like): every kind that occurs, in order
            kinds = list(dict.fromkeys(map(repr, value)))
            chosen = [value[[repr(v) for v in value].index(kind)] for kind in kinds][:layers]
            small[key] = (chosen * layers)[:layers]
    return small


def _layer_types(*kinds: str) -> Dict[str, Any]:
    return {"layer_types": list(kinds), "num_hidden_layers": len(kinds)}


def _dbrx(small: Dict[str, Any], defaults: Dict[str, Any]) -> Dict[str, Any]:
    # DBRX's attention reads attn_config.rope_theta and clips q/k/v by clip_qkv, which every released
    # config sets (dbrx-instruct: 500000 and 8) and the config class's defaults lack
    theta = defaults["rope_parameters"]["rope_theta"]
    return {"attn_config": {**small.get("attn_config", {}), "rope_theta": theta, "clip_qkv": 8.0}}


def _blt(small: Dict[str, Any], defaults: Dict[str, Any]) -> Dict[str, Any]:
    # as transformers' own BLT tests build it: the model's cache reads a top-level num_hidden_layers, the
    # hash embeddings get a small vocabulary (the default's 500,002 rows would dominate the model),
    # bytes are not re-patched by the entropy model; the global transformer twice the local width
    wide = 2 * int(small["encoder_config"]["hidden_size"])
    local = {"hidden_size_global": wide}
    return {
        "num_hidden_layers": LAYERS,
        "encoder_hash_byte_group_vocab": 64,
        "patch_in_forward": False,
        "encoder_config": {**small["encoder_config"], **local},
        "decoder_config": {**small["decoder_config"], **local},
        "global_config": {**small["global_config"], "hidden_size": wide, "num_attention_heads": wide // 16},
    }


def _dory(small: Dict[str, Any], defaults: Dict[str, Any]) -> Dict[str, Any]:
    # one input, one recurrent and one output layer (the defaults' 16 + 40 + 16 do not fit 2), local
    # and global attention both present
    return {
        **_layer_types("sliding_attention", "full_attention", "sliding_attention"),
        "n_input_layers": 1,
        "n_recurrent_layers": 1,
        "n_output_layers": 1,
    }


def _lfm2_moe(small: Dict[str, Any], defaults: Dict[str, Any]) -> Dict[str, Any]:
    # the defaults leave layer_types unset, which the model cannot build; LFM2-8B-A1B interleaves
    # short convolutions with attention, and its first layers are dense
    return {**_layer_types("conv", "full_attention"), "num_dense_layers": 1}


def _granitemoehybrid(small: Dict[str, Any], defaults: Dict[str, Any]) -> Dict[str, Any]:
    # the defaults are all Mamba layers without positions; the rotary configuration of the family
    # (position_embedding_type="rope") with one Mamba and one attention layer, Mamba heads that fit width 64
    return {
        **_layer_types("linear_attention", "full_attention"),
        "position_embedding_type": "rope",
        "mamba_n_heads": 8,
        "mamba_d_head": 16,
        "mamba_d_state": 16,
        "mamba_chunk_size": 16,
    }


def _gemma3n_text(small: Dict[str, Any], defaults: Dict[str, Any]) -> Dict[str, Any]:
    # the last layers reuse an earlier layer's keys and values (15 of 35 by default); 2 of 4 here, so a
    # local and a global layer each compute their own and one of each borrows them; the per-layer
    # input embeddings get the tiny vocabulary
    kinds = ("sliding_attention", "full_attention") * 2
    return {
        **_layer_types(*kinds),
        "num_kv_shared_layers": 2,
        "intermediate_size": [small["intermediate_size"][0]] * len(kinds),
        "activation_sparsity_pattern": [0.95] + [0.0] * (len(kinds) - 1),
        "vocab_size_per_layer_input": VOCAB,
        "hidden_size_per_layer_input": 16,
        "laurel_rank": 8,
    }


def _dots3_note_text(small: Dict[str, Any], defaults: Dict[str, Any]) -> Dict[str, Any]:
    # the sliding-window layers override the MLA shape per layer (half the heads, their own latent and
    # rotated share); their overrides are shrunk like the rest, and the indexer of the other layers too
    sliding = {
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "q_lora_rank": 32,
        "kv_lora_rank": 32,
        "head_dim": 32,
        "qk_nope_head_dim": 16,
        "qk_rope_head_dim": 16,
        "v_head_dim": 16,
    }
    layers = small["layer_types"]
    return {
        "head_dim": 32,  # 16 of 32 features rotated on the indexed layers
        "index_head_dim": 16,
        "index_n_heads": 4,
        "per_layer_config": {str(i): sliding for i, kind in enumerate(layers) if kind == "sliding_attention"},
    }


def _dots3_note(small: Dict[str, Any], defaults: Dict[str, Any]) -> Dict[str, Any]:
    text, vision, audio = small["text_config"], small["vision_config"], small["audio_config"]
    # the vision and audio adapters map the shrunk encoder widths to the shrunk text width
    out = {"adapter_out_dim": text["hidden_size"]}
    return {
        "text_config": {**text, **_dots3_note_text(text, defaults["text_config"])},
        "vision_config": {**vision, **out, "adapter_in_dim": vision["hidden_size"]},
        "audio_config": {**audio, **out, "adapter_input_size": audio["hidden_size"]},
    }


def _cohere_compass_text(small: Dict[str, Any], defaults: Dict[str, Any]) -> Dict[str, Any]:
    # the defaults give no rope dict at all, which the model cannot build; as in Cohere 2, local layers
    # rotate (here with interleaved M-RoPE sections over the 8 frequencies of a 16-feature head) and
    # global layers take no positions
    return {
        **_layer_types("sliding_attention", "full_attention"),
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 50000.0, "mrope_section": [4, 2, 2]},
            "full_attention": None,
        },
    }


#: fields a family's released configs carry (or transformers' own model tests set) that its config
#: class's defaults lack, or that a tiny depth must change: ``model_type -> f(small fields, defaults) -> fields``
def _qwen4_exp(small: Dict[str, Any], defaults: Dict[str, Any]) -> Dict[str, Any]:
    # the defaults leave the QSA indexer of the "indexed_attention" layers unset, which cannot build;
    # one key head as the family requires, a budget that is a multiple of the compression ratio
    fields = dict(
        indexer_n_heads=2, indexer_kv_heads=1, indexer_head_dim=16, indexer_budget=8, indexer_compress_ratio=4
    )
    if "text_config" in defaults:
        return {"text_config": {**small.get("text_config", {}), **fields}}
    return fields


def _kolibri1_1(small: Dict[str, Any], defaults: Dict[str, Any]) -> Dict[str, Any]:
    # the indexer's heads must fit the query heads of one key head (4 // 2 in a tiny model, 12 by default)
    return {"index_num_heads": max(1, small.get("num_attention_heads", 4) // small.get("num_key_value_heads", 2))}


FAMILY_FIELDS: Dict[str, Callable[[Dict[str, Any], Dict[str, Any]], Dict[str, Any]]] = {
    "qwen4_exp": _qwen4_exp,
    "qwen4_exp_text": _qwen4_exp,
    "kolibri1_1": _kolibri1_1,
    "dbrx": _dbrx,
    "blt": _blt,
    "dory": _dory,
    "lfm2_moe": _lfm2_moe,
    "granitemoehybrid": _granitemoehybrid,
    "gemma3n_text": _gemma3n_text,
    "dots3_note_text": _dots3_note_text,
    "dots3_note": _dots3_note,
    "cohere_compass_text": _cohere_compass_text,
}


def _zaya_weights(model: nn.Module) -> None:
    # ZAYA scales each key head by a learned temperature that starts at zero, which makes every attention
    # uniform and the positions irrelevant; a trained model's are not zero
    for name, p in model.named_parameters():
        if name.endswith("qk_norm.temp"):
            p.fill_(1.0)


#: weights a family initialises to a value that hides the positions (see :func:`tiny_model_of_type`)
FAMILY_WEIGHTS: Dict[str, Callable[[nn.Module], None]] = {"zaya": _zaya_weights}


def tiny_config_of_type(model_type: str, **overrides):
    """A small config of any ``transformers`` model type: its defaults with :data:`SMALL_FIELDS`.

    Every rope field keeps the family's default. Fields with one entry per layer keep each kind of
    layer the default has (up to :data:`LAYERS` of them), so a family that alternates local and
    global attention keeps both.
    """
    from transformers import AutoConfig

    config_class = type(AutoConfig.for_model(model_type))
    defaults = config_class().to_dict()
    small = _shrunk(defaults, renamed=dict(getattr(config_class, "attribute_map", {})))
    family = FAMILY_FIELDS.get(model_type)
    if family is not None:
        small.update(family(small, defaults))
    return AutoConfig.for_model(model_type, **{**small, **overrides})


def tiny_model_of_type(model_type: str, seed: int = 0, attn_implementation: str = "eager", **overrides) -> nn.Module:
    """A randomly initialised causal LM of any model type (see :func:`tiny_config_of_type`)."""
    from transformers import AutoModelForCausalLM

    config = tiny_config_of_type(model_type, **overrides)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=attn_implementation)
    if hasattr(model.config, "_experts_implementation"):
        model.config._experts_implementation = "eager"
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 1.0 / math.sqrt(p.shape[-1]))
        family = FAMILY_WEIGHTS.get(model.config.model_type)
        if family is not None:
            family(model)
    return model.eval()


# -- coverage: one model type, patched and checked ------------------------------------------------------
@dataclass(frozen=True)
class Coverage:
    """What patching a tiny model of one ``transformers`` model type gave.

    Every logit comparison is with :func:`float64_reference` (the unpatched code in float64, its
    angles computed exactly in float64), and its bound is that reference's own float32 rounding: the
    same model cast to float32, its exact tables rounded once to float32 (``noise``). Two blocks of
    :data:`COVERAGE_SEQ` positions are checked: ``0..31`` and a far block ending near the trained
    length (:func:`far_block_start`), where float32 angles go wrong.

    Attributes:
        model_type: the ``config.model_type``.
        status: ``"supported"`` (patched, and every check holds: logits within :data:`NOISE_FACTOR`
            times ``noise`` of the reference in both blocks, the same greedy tokens with the KV cache,
            bit-identical logits in both blocks after ``undo()``), ``"refused"`` (``patch`` raised
            :class:`~posenc.integrations.transformers.UnsupportedModelError`; ``detail`` is its message
            and ``untouched`` says whether the model was left exactly as it was), ``"error"`` (patched,
            but it raised or a check failed; ``detail`` says which), or ``"untested"`` (the tiny model
            could not be built or run unpatched, or its float64 reference cannot be made or run;
            ``detail`` says why).
        detail: the refusal, the failed checks or the build error; empty for a supported type.
        logit_error: max |patched - reference| logit at positions 0..31.
        noise: max |reference in float32 - reference| logit at positions 0..31.
        same_generation: greedy tokens with the KV cache equal to unpatched.
        undo_exact: logits after ``undo()`` bit-identical to before ``patch``, in both blocks.
        untouched: after a refusal, logits bit-identical (both blocks) and no module replaced.
        far_start: the first position of the far block.
        far_error: max |patched - reference| logit in the far block.
        far_noise: max |reference in float32 - reference| logit in the far block.
        plain_far_error: max |unpatched - reference| logit in the far block (what the patch improves).
    """

    model_type: str
    status: str
    detail: str = ""
    logit_error: float = float("nan")
    noise: float = float("nan")
    same_generation: bool = False
    undo_exact: bool = False
    untouched: bool = False
    far_start: int = 0
    far_error: float = float("nan")
    far_noise: float = float("nan")
    plain_far_error: float = float("nan")

    @property
    def proven(self) -> bool:
        """Supported, and every check holds (recomputed from the numbers, not the status)."""
        return (
            self.status == "supported"
            and self.logit_error <= NOISE_FACTOR * self.noise + 1e-6
            and self.far_error <= NOISE_FACTOR * self.far_noise + 1e-6
            and self.same_generation
            and self.undo_exact
        )


#: a supported type's patched logits are within this many times the model's own float32 noise (plus 1e-6)
NOISE_FACTOR = 4.0
#: tokens per checked block: positions 0..31, and as many in the far block
COVERAGE_SEQ = 32
#: the far block ends at most here (a tiny model at a trained length of 10M would gain nothing more)
FAR_LIMIT = 32768


def far_block_start(config: Any, seq: int = COVERAGE_SEQ) -> int:
    """The first position of the far block: ``seq`` positions ending at
    ``min(max_position_embeddings, FAR_LIMIT)`` (2048 when the config gives no trained length)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    trained = getattr(text, "max_position_embeddings", None)
    trained = trained if isinstance(trained, int) and trained > seq else 2048
    return min(trained, FAR_LIMIT) - seq


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:200]


def _modules_of(model: nn.Module) -> List[Tuple[str, int, Optional[object]]]:
    return [(name, id(m), m.__dict__.get("forward")) for name, m in model.named_modules()]


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max())


def coverage(model_type: str, seq: int = COVERAGE_SEQ, new_tokens: int = 6) -> Coverage:
    """Build a tiny ``model_type`` model (:func:`tiny_model_of_type`), patch it, and hold it to the exact
    float64 reference at positions ``0..seq-1`` and in a far block (see :class:`Coverage`)."""
    from .integrations.discovery import UnsupportedModelError
    from .integrations.transformers import patch

    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(3, VOCAB, (2, seq), generator=gen)

    def both(m: Any) -> Tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad():
            return m(ids).logits, m(ids, position_ids=far).logits

    try:
        model: Any = tiny_model_of_type(model_type)  # a transformers model: it has .generate
        start = far_block_start(model.config, seq)
        far = torch.arange(start, start + seq).expand(2, seq)
        before, before_far = both(model)
    except Exception as exc:  # the generic tiny config does not fit this family
        return Coverage(model_type, "untested", _one_line(exc))
    modules = _modules_of(model)
    try:
        handle = patch(model)
    except UnsupportedModelError as exc:
        after, after_far = both(model)
        untouched = (
            torch.equal(after, before)
            and torch.equal(after_far, before_far)
            and _modules_of(model) == modules
            and "_posenc_patch" not in model.__dict__
        )
        return Coverage(model_type, "refused", str(exc), untouched=untouched, far_start=start)
    except Exception as exc:  # anything else is a bug in the patch: reported, never a pass
        return Coverage(model_type, "error", _one_line(exc), far_start=start)
    prompt = ids[:1, :6]
    settings = dict(max_new_tokens=new_tokens, do_sample=False, use_cache=True, pad_token_id=0)
    try:
        patched, patched_far = both(model)
        with torch.no_grad():
            tokens = model.generate(prompt, attention_mask=torch.ones_like(prompt), **settings)
    except Exception as exc:  # a bug in the patch for this family: reported, never a pass
        handle.undo()
        return Coverage(model_type, "error", "patched: " + _one_line(exc), far_start=start)
    handle.undo()
    undone, undone_far = both(model)
    with torch.no_grad():
        plain = model.generate(prompt, attention_mask=torch.ones_like(prompt), **settings)
    same = torch.equal(tokens, plain)
    exact_undo = torch.equal(undone, before) and torch.equal(undone_far, before_far)
    try:  # the yardstick: exact angles in float64, and its own float32 rounding as the bound
        reference = float64_reference(model)
        exact, exact_far = both(reference)
        rounded, rounded_far = both(reference.to(torch.float32))
    except Exception as exc:
        return Coverage(model_type, "untested", "the float64 reference does not run: " + _one_line(exc))
    numbers = dict(
        logit_error=_max_diff(patched, exact),
        noise=_max_diff(rounded, exact),
        same_generation=same,
        undo_exact=exact_undo,
        far_start=start,
        far_error=_max_diff(patched_far, exact_far),
        far_noise=_max_diff(rounded_far, exact_far),
        plain_far_error=_max_diff(before_far, exact_far),
    )
    row = Coverage(model_type, "supported", **numbers)  # type: ignore[arg-type]
    if row.proven:
        return row
    failed = []
    if not row.logit_error <= NOISE_FACTOR * row.noise + 1e-6:
        failed.append(f"logits at 0..{seq - 1} differ by {row.logit_error:.3g}, over {NOISE_FACTOR:g}x {row.noise:.3g}")
    if not row.far_error <= NOISE_FACTOR * row.far_noise + 1e-6:
        failed.append(
            f"logits at {start}..{start + seq - 1} differ by {row.far_error:.3g}, "
            f"over {NOISE_FACTOR:g}x {row.far_noise:.3g}"
        )
    if not same:
        failed.append("greedy generation differs")
    if not exact_undo:
        failed.append("undo() not bit-identical")
    return Coverage(model_type, "error", "patched: " + "; ".join(failed), **numbers)  # type: ignore[arg-type]


# -- the coverage table in docs/transformers.md ------------------------------------------------------------
COVERAGE_BEGIN = "<!-- coverage table: begin (generated by benchmarks/transformers_coverage.py) -->"
COVERAGE_END = "<!-- coverage table: end -->"


def rotation_found(model_type: str, census: Optional[Dict[str, Any]] = None) -> str:
    """How discovery classifies the rotary functions of ``model_type``'s modeling module, in words."""
    from .integrations import discovery

    found = (census or discovery.census())[model_type]
    parts = [f"`{f.name}`: {f.describe()}" + (" (one tensor)" if f.arity == "single" else "") for f in found.functions]
    parts += [f"`{name}`: no match" for name, _ in found.refused]
    return "; ".join(parts) or "no rotary function called by an attention class"


def coverage_markdown(rows: List[Coverage], census: Optional[Dict[str, Any]] = None) -> str:
    """The coverage table (between :data:`COVERAGE_BEGIN` and :data:`COVERAGE_END`) for ``rows``."""
    from .integrations import discovery

    census = census or discovery.census()
    supported = sum(r.status == "supported" for r in rows)
    ratios = sorted(r.plain_far_error / r.far_error for r in rows if r.status == "supported" and r.far_error > 0)
    far = ""
    if ratios:
        middle = len(ratios) // 2
        median = ratios[middle] if len(ratios) % 2 else (ratios[middle - 1] + ratios[middle]) / 2
        far = (
            f" Each supported type is held to an exact float64 reference at positions 0..{COVERAGE_SEQ - 1} and "
            f"in a far block ending near its trained length (at most {FAR_LIMIT}); there the unpatched model is "
            f"a median {median:.1f}x further from the reference than the patched one ({len(ratios)} types)."
        )
    lines = [
        COVERAGE_BEGIN,
        f"{supported} of {len(rows)} causal-LM model types with a rotary embedding are supported "
        f"(transformers {_transformers_version()})." + far,
        "",
        "| `model_type` | patch | rotary functions the attention calls, as discovery classifies them | why not |",
        "|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: r.model_type):
        why = "" if r.status == "supported" else r.detail.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| `{r.model_type}` | {r.status} | {rotation_found(r.model_type, census)} | {why} |")
    lines.append(COVERAGE_END)
    return "\n".join(lines)


def read_coverage_table(text: str) -> Dict[str, Tuple[str, str, str]]:
    """``model_type -> (status, rotation, why not)`` from a document holding a coverage table."""
    start, end = text.index(COVERAGE_BEGIN), text.index(COVERAGE_END)
    out = {}
    for line in text[start:end].splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip().strip("|").replace("\\|", "\x00").split("|")]
            cells = [c.replace("\x00", "|") for c in cells]
            if cells[0] != "`model_type`":  # the header row
                out[cells[0].strip("`")] = (cells[1], cells[2], cells[3])
    return out


def _transformers_version() -> str:
    import transformers

    return transformers.__version__


def assert_conforms(
    rotate: Callable[..., Any],
    configs: Optional[List[Any]] = None,
    *,
    dtypes: Tuple[str, ...] = ("float32", "float64"),
    precision: Optional[float] = None,
) -> Any:
    """Fail unless an engine's rotation gets the exact answer on ``configs``: one line in a test suite.

    ``rotate`` follows conform's adapter protocol (:mod:`posenc.integrations.conform`)::

        from posenc import testing

        def test_my_rope_conforms():
            testing.assert_conforms(my_engine.rotate, configs=["llama-3.1-8b", "generated"])

    ``configs`` are what ``posenc conform --config`` takes (fixture names, ``generated``, paths) or
    config dicts; ``None`` checks every fixture and generated config. Precision loss (error growing
    with position, as float32 angle arithmetic gives) passes unless it exceeds ``precision``; configs
    the adapter declares unsupported are skipped.

    Returns:
        the :class:`posenc.integrations.conform.Report`, for further assertions.

    Raises:
        AssertionError: naming each config with a wrong answer (and its named causes), an error, or
            precision loss past ``precision``.
    """
    from .integrations.conform import conform  # conform stands beside testing in interop

    report = conform(rotate, configs, dtypes=dtypes, precision=precision)
    over = {id(r) for r in report.over_tolerance()}
    bad = [r for r in report.results if r.status in ("wrong", "error") or id(r) in over]
    if bad:
        lines = []
        for r in bad:
            worst = max(r.checks, key=lambda c: (c.status == "wrong", c.error), default=None)
            where = f" ({worst.check} {worst.error:.3g} {worst.unit} at {worst.group}, {worst.dtype})" if worst else ""
            detail = "; ".join(r.causes) if r.causes else (r.message or "")
            lines.append(f"{r.config}: {r.status}{where}{': ' + detail if detail else ''}")
        raise AssertionError(f"{len(bad)} of {len(report.results)} configs do not conform:\n" + "\n".join(lines))
    return report
