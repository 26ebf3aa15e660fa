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
* :mod:`.layer_types`  local and global layers, each with its own base and scaling;
* :mod:`.axial`        N-dimensional (axial) RoPE for image and video grids, and RoPE-Mixed;
* :mod:`.axial_scaling` resolution change of axial RoPE: one descriptor per method, in a registry;
* :mod:`.context_parallel` the global positions of a rank's shard of a context-parallel sequence;
* :mod:`.xpos`         xPos: RoPE with a decay per pair (Sun et al. 2022);
* :mod:`.fope`         FoPE: each pair's cos and sin a learned Fourier series (Hua et al. 2024).
"""

from . import op  # noqa: F401  (registers torch.ops.posenc.rotary)
from .apply import apply_rotary, apply_rotary_at, rotate_reference
from .axial import (
    AxialRotaryEmbedding,
    MixedRotaryEmbedding,
    grid_coordinates,
    normalized_grid_coordinates,
)
from .axial_scaling import (
    AXIAL_SCALINGS,
    AxialInterpolation,
    AxialNTK,
    AxialScalingDescriptor,
    axial_extension,
    register_axial_scaling,
    unregister_axial_scaling,
)
from .context_parallel import (
    CP_SPLITS,
    context_parallel_positions,
    context_parallel_shard,
    context_parallel_unshard,
)
from .embedding import RotaryEmbedding
from .fope import FourierRotaryEmbedding, fope_cos_sin, fope_frequencies
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
from .xpos import XPosEmbedding, xpos_scales, xpos_zeta

__all__ = [
    "AXIAL_SCALINGS",
    "AxialInterpolation",
    "AxialNTK",
    "AxialRotaryEmbedding",
    "AxialScalingDescriptor",
    "CP_SPLITS",
    "MixedRotaryEmbedding",
    "axial_extension",
    "context_parallel_positions",
    "context_parallel_shard",
    "context_parallel_unshard",
    "grid_coordinates",
    "normalized_grid_coordinates",
    "register_axial_scaling",
    "unregister_axial_scaling",
    "DYNAMIC_TYPES",
    "DefaultScaling",
    "DynamicNTKScaling",
    "FourierRotaryEmbedding",
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
    "XPosEmbedding",
    "YaRNScaling",
    "apply_rotary",
    "apply_rotary_at",
    "fope_cos_sin",
    "fope_frequencies",
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
    "xpos_scales",
    "xpos_zeta",
    "yarn_softmax_scale",
]
