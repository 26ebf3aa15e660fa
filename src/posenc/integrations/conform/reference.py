"""The exact answer for a config, and the same computation under a misreading of it.

A :class:`Reading` is everything a rotary embedding takes from a ``config.json``: the head size, the
rotated width and where it starts, the layout, the frequencies for a given length, the attention
factor on the cos/sin tables, the softmax-scale multiplier, how positions are counted and which
length a length-dependent scaling sees. :func:`reading_from_config` reads a config as posenc reads it
(:func:`posenc.rope.hfconfig.rotary_kwargs_from_hf`, :func:`posenc.rope.scaling.rope_frequencies`),
which is the exact answer; :mod:`.hypotheses` changes one field of it to model one misreading, and
:func:`rotate_exact` computes either in float64 with angles exact at any position
(:func:`posenc.rope.tables.rope_angles`).

Conventions (the ones ``transformers`` and every checkpoint on the Hub use): pair ``i`` of a query
or key at position ``m`` turns by ``m * theta_i``; in the half-split layout (GPT-NeoX, Llama) pair
``i`` is features ``(i, i + r/2)`` of the rotated slice, in the interleaved layout (GPT-J, DeepSeek
with ``rope_interleave``) it is ``(2i, 2i + 1)``; the rotation is ``(a, b) -> (a cos - b sin,
a sin + b cos)``; the rotated slice is the first ``r = int(head_dim * partial_rotary_factor)``
features and the rest pass through; the attention factor multiplies the cos/sin tables (so the
rotated features of q and k), and the softmax-scale multiplier the score ``q . k`` beside the usual
``1 / sqrt(head_dim)``.

The softmax-scale multiplier is the model family's. Multi-head latent attention (DeepSeek-V2/V3 and
the families built like them, whose configs give ``qk_rope_head_dim``) multiplies ``1 / sqrt(d)`` by
``(0.1 * mscale_all_dim * ln(factor) + 1) ** 2`` (DeepSeek-V2's reference code;
``transformers.modeling_rope_utils.yarn_apply_mscale``); every other family multiplies it by 1,
whatever the rope dict holds (:func:`family_softmax_scale`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

import torch

from ...rope.apply import rotate_reference
from ...rope.hfconfig import ConfigFields, rotary_kwargs_from_hf
from ...rope.registry import descriptor_of, softmax_scale
from ...rope.scaling import rope_frequencies
from ...rope.tables import rope_angles

#: lengths as a length-dependent scaling sees them: the length of each call (``"call"``, as
#: ``transformers`` does: the largest position + 1), the longest so far (``"running"``: a cache never
#: reset), or one fixed length (``"fixed"``)
LENGTH_RULES = ("call", "running", "fixed")


@dataclass(frozen=True)
class Reading:
    """How one rotary embedding reads a config (the exact one, or a misreading of it).

    Attributes:
        head_dim: features per head of q and k.
        rotary_dim: rotated features ``r`` (even, ``<= head_dim``).
        start: index of the first rotated feature (0; a wrong slice starts elsewhere).
        layout: ``"half"`` or ``"interleaved"``.
        frequencies: ``seq_len -> inv_freq``, float64 of shape ``(rotary_dim // 2,)``.
        table_factor: the attention factor on the cos/sin tables.
        softmax_multiplier: what the attention multiplies ``1 / sqrt(head_dim)`` by.
        shift: added to every position before its angle is formed.
        length_rule: one of :data:`LENGTH_RULES`; ``fixed_length`` for ``"fixed"``.
        fixed_length: the length a ``"fixed"`` rule always uses.
        table_dtype: the cos/sin tables are rounded to it (``None``: kept in float64).
        length_dependent: the frequencies change with the length (dynamic NTK, LongRoPE).
    """

    head_dim: int
    rotary_dim: int
    layout: str
    frequencies: Callable[[Optional[int]], torch.Tensor]
    table_factor: float
    softmax_multiplier: float = 1.0
    start: int = 0
    shift: int = 0
    length_rule: str = "call"
    fixed_length: Optional[int] = None
    table_dtype: Optional[torch.dtype] = None
    length_dependent: bool = False

    def replace(self, **changes: Any) -> "Reading":
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class ConfigFacts:
    """What conform reads from a config besides the :class:`Reading`: the lengths and the scaling.

    Attributes:
        rope_type: the registered rope type.
        scaling: posenc's scaling config (``None`` for the default type).
        base: ``rope_theta``.
        max_positions: ``max_position_embeddings`` (the model's maximum).
        original: the trained length: ``original_max_position_embeddings`` when the scaling has one,
            else ``max_positions``.
        mla: the config is one of multi-head latent attention (``qk_rope_head_dim`` given).
    """

    rope_type: str
    scaling: Any
    base: float
    max_positions: int
    original: int
    mla: bool


def family_softmax_scale(config: Dict[str, Any], scaling: Any) -> float:
    """What the model family's attention multiplies ``1 / sqrt(head_dim)`` by (see the module notes):
    :func:`posenc.rope.registry.softmax_scale` for multi-head latent attention, else 1."""
    return softmax_scale(scaling) if _is_mla(config) else 1.0


def _is_mla(config: Dict[str, Any]) -> bool:
    return ConfigFields(config).get("qk_rope_head_dim") is not None


def frequencies_of(scaling: Any, rotary_dim: int, base: float) -> Callable[[Optional[int]], torch.Tensor]:
    """``seq_len -> inv_freq`` (float64) of ``scaling`` for a rotated width and base."""

    def frequencies(seq_len: Optional[int]) -> torch.Tensor:
        return rope_frequencies(scaling, rotary_dim, base, seq_len)[0]

    return frequencies


def read_config(config: Dict[str, Any]) -> Tuple[Reading, ConfigFacts]:
    """The exact :class:`Reading` of a config dict and its :class:`ConfigFacts`.

    Raises:
        ValueError, TypeError: for a config posenc cannot read (the message names the field).
    """
    kwargs = rotary_kwargs_from_hf(config, strict=False)
    scaling, rotary_dim, base = kwargs["scaling"], kwargs["rotary_dim"], kwargs["base"]
    descriptor = descriptor_of(scaling)
    _, factor = rope_frequencies(scaling, rotary_dim, base)
    original = getattr(scaling, "original_max_position_embeddings", None) or kwargs["max_position_embeddings"]
    reading = Reading(
        head_dim=kwargs["head_dim"],
        rotary_dim=rotary_dim,
        layout=kwargs["layout"],
        frequencies=frequencies_of(scaling, rotary_dim, base),
        table_factor=factor,
        softmax_multiplier=family_softmax_scale(config, scaling),
        length_dependent=descriptor.length_dependent,
    )
    facts = ConfigFacts(
        rope_type=descriptor.name,
        scaling=scaling,
        base=base,
        max_positions=kwargs["max_position_embeddings"],
        original=int(original),
        mla=_is_mla(config),
    )
    return reading, facts


class LengthHistory:
    """The lengths the calls of one config have seen, in order, for the ``"running"`` length rule."""

    def __init__(self) -> None:
        self.longest = 0

    def length_for(self, reading: Reading, positions: torch.Tensor) -> Optional[int]:
        """The length the scaling sees for this call (``None`` for a length-free scaling)."""
        call = int(positions.max()) + 1 if positions.numel() else 1
        self.longest = max(self.longest, call)
        if not reading.length_dependent:
            return None
        if reading.length_rule == "fixed":
            return reading.fixed_length
        return self.longest if reading.length_rule == "running" else call


def exact_tables(
    reading: Reading, positions: torch.Tensor, seq_len: Optional[int]
) -> Tuple[torch.Tensor, torch.Tensor]:
    """cos and sin (times the table factor) at ``positions``, float64, shape ``(tokens, rotary_dim // 2)``."""
    inv_freq = reading.frequencies(seq_len)
    angles = rope_angles(positions.to(torch.int64) + reading.shift, inv_freq)  # (T, r/2), exact
    cos, sin = angles.cos() * reading.table_factor, angles.sin() * reading.table_factor
    if reading.table_dtype is not None:
        cos, sin = cos.to(reading.table_dtype).to(torch.float64), sin.to(reading.table_dtype).to(torch.float64)
    return cos, sin


def rotate_exact(reading: Reading, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """``x`` rotated as ``reading`` says, in float64.

    Args:
        x: (tokens, heads, head_dim) in any floating dtype (read as float64).
        cos, sin: (tokens, rotary_dim // 2) from :func:`exact_tables`.
    """
    x = x.to(torch.float64)
    lo, hi = reading.start, reading.start + reading.rotary_dim
    part = rotate_reference(x[..., lo:hi], cos[:, None, :], sin[:, None, :], layout=reading.layout)
    return torch.cat((x[..., :lo], part, x[..., hi:]), dim=-1)


def scores(q: torch.Tensor, k: torch.Tensor, multiplier: float) -> torch.Tensor:
    """``multiplier * q . k`` per head, float64, shape ``(heads, tokens, tokens)`` (the ``1/sqrt(d)`` left out)."""
    q64, k64 = q.to(torch.float64).transpose(0, 1), k.to(torch.float64).transpose(0, 1)  # (H, T, D)
    # a broadcast product, not a matmul: exact float64 sums, and faster than BLAS at these sizes
    return multiplier * (q64[:, :, None, :] * k64[:, None, :, :]).sum(-1)


def scaling_fields(scaling: Any) -> Dict[str, Any]:
    """The fields of a scaling config as a dict (``{}`` for the default type)."""
    if scaling is None:
        return {}
    return {f.name: getattr(scaling, f.name) for f in dataclasses.fields(scaling)}


def unchecked_scaling(scaling: Any, **changes: Any) -> Any:
    """A copy of ``scaling`` with ``changes``, not validated: a misreading may break the validator's
    rules (``beta_fast < beta_slow`` after a swap), and the pure function still computes it."""
    cls: Any = type(scaling)
    out = object.__new__(cls)
    for name, value in {**scaling_fields(scaling), **changes}.items():
        object.__setattr__(out, name, value)
    return out


def raw_frequencies(scaling: Any, rotary_dim: int, base: float) -> Callable[[Optional[int]], torch.Tensor]:
    """``seq_len -> inv_freq`` of the scaling's pure function, called without its validator."""
    function = descriptor_of(scaling).frequencies

    def frequencies(seq_len: Optional[int]) -> torch.Tensor:
        return function(scaling, rotary_dim, float(base), seq_len)[0].to(torch.float64)

    return frequencies
