"""Rotary position embeddings: tables, rotation, layouts, scalings, positions.

* :mod:`.tables`       frequencies and cos/sin tables, exact at long positions, behind a bounded cache;
* :mod:`.scaling`      one frozen config and one pure function per rope type (context extension);
* :mod:`.registry`     one :class:`ScalingDescriptor` per rope type, and what loops over them;
* :mod:`.hfconfig`     Hugging Face ``config.json`` rope fields <-> :class:`RotaryEmbedding` arguments;
* :mod:`.apply`        the rotation of queries and keys: the reference and the one fused entry;
* :mod:`.op`           the same rotation as one ``torch.library`` op, ``torch.ops.posenc.rotary``;
* :mod:`.kernels`      the fused C and Triton kernels behind that entry;
* :mod:`.embedding`    :class:`RotaryEmbedding`, RoPE as a module with cached tables;
* :mod:`.layout`       half-split and interleaved pairs, and the weight permutation between them;
* :mod:`.positions`    position ids from padded, packed and decoding batches;
* :mod:`.mrope`        M-RoPE's three position streams (Qwen2-VL and later);
* :mod:`.layer_types`  local and global layers, each with its own base and scaling.
"""

from . import op  # noqa: F401  (registers torch.ops.posenc.rotary)
from .apply import apply_rotary, apply_rotary_at, rotate_reference
from .embedding import RotaryEmbedding
from .layer_types import LayerTypedRotaryEmbedding
from .layout import LAYOUTS, permute_for_half_split, permute_for_interleaved
from .mrope import (
    SECTION_LAYOUTS,
    MRotaryEmbedding,
    image_stream_positions,
    mrope_angles,
    mrope_streams,
    text_stream_positions,
)
from .positions import (
    position_ids_from_attention_mask,
    position_ids_from_cu_seqlens,
    position_ids_from_document_ids,
    position_ids_from_offsets,
)
from .registry import (
    HFRope,
    Parameter,
    ScalingDescriptor,
    TransformersSpelling,
    get_descriptor,
    register_scaling,
    softmax_scale,
    unregister_scaling,
)
from .scaling import (
    DYNAMIC_TYPES,
    REGISTRY,
    DefaultScaling,
    DynamicNTKScaling,
    LinearScaling,
    Llama3Scaling,
    LongRoPEScaling,
    NTKScaling,
    ProportionalScaling,
    YaRNScaling,
    rope_frequencies,
    scaling_from_dict,
    scaling_to_dict,
    yarn_softmax_scale,
)
from .tables import rope_angles, rope_cos_sin, rope_inv_freq, rope_table

__all__ = [
    "DYNAMIC_TYPES",
    "DefaultScaling",
    "DynamicNTKScaling",
    "HFRope",
    "LAYOUTS",
    "LayerTypedRotaryEmbedding",
    "LinearScaling",
    "MRotaryEmbedding",
    "Llama3Scaling",
    "LongRoPEScaling",
    "NTKScaling",
    "Parameter",
    "ProportionalScaling",
    "REGISTRY",
    "SECTION_LAYOUTS",
    "RotaryEmbedding",
    "ScalingDescriptor",
    "TransformersSpelling",
    "YaRNScaling",
    "apply_rotary",
    "apply_rotary_at",
    "get_descriptor",
    "image_stream_positions",
    "mrope_angles",
    "mrope_streams",
    "permute_for_half_split",
    "permute_for_interleaved",
    "position_ids_from_attention_mask",
    "position_ids_from_cu_seqlens",
    "position_ids_from_document_ids",
    "position_ids_from_offsets",
    "register_scaling",
    "rope_angles",
    "rope_cos_sin",
    "rope_frequencies",
    "rope_inv_freq",
    "rope_table",
    "rotate_reference",
    "scaling_from_dict",
    "scaling_to_dict",
    "softmax_scale",
    "text_stream_positions",
    "unregister_scaling",
    "yarn_softmax_scale",
]
