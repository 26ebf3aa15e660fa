"""RoPE frequency scalings ("context extension"): one frozen config + one pure function per rope type.

A model trained on sequences of ``L0`` tokens has never seen the slow rotations that positions past
``L0`` produce. Every scaling here changes the frequencies ``theta_i = base ** (-2i / d)``
(``d`` = rotary dimension, ``0 <= i < d/2``) so that a longer context maps onto angles the model
knows, and some also scale the cos/sin tables by an ``attention_factor``.

Each rope type is:

* a frozen dataclass holding its parameters, named as in Hugging Face ``rope_scaling`` /
  ``rope_parameters`` dicts, with a ``validate(rotary_dim)`` method that raises ``ValueError`` naming
  the rope type, the field, the value and the allowed range (construction validates everything that
  does not depend on ``rotary_dim``);
* a pure function ``(config, rotary_dim, base, seq_len=None) -> (inv_freq, attention_factor)``
  returning float64 frequencies of shape (rotary_dim // 2,) and a Python float;
* one :class:`~posenc.rope.registry.ScalingDescriptor` in :data:`REGISTRY` that ties them together
  with its length dependence, its softmax scale, its parameter space, its setting for an extension
  ratio and its Hugging Face spelling (see :mod:`posenc.rope.registry`, and CONTRIBUTING.md for adding
  a type).

``seq_len`` matters only to the two types that change with the current length (``dynamic`` and
``longrope``); the others ignore it. :func:`rope_frequencies` is the one entry point.

All arithmetic is float64. ``transformers`` computes the same formulas in float32, which agrees to
~1e-7 relative (see ``tests/test_hf_parity.py``).
"""

from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar, Dict, NoReturn, Optional, Tuple

import torch

from .._checks import check_config_float, check_config_int, check_float, refuse
from .registry import (
    ALIASES,
    COMMON_HF_KEYS,
    REGISTRY,
    Frequencies,
    HFRope,
    LiveNames,
    Parameter,
    ScalingDescriptor,
    TransformersSpelling,
    config_to_fields,
    descriptor_of,
    register_scaling,
    resolve_name,
)
from .tables import rope_inv_freq

__all__ = [
    "ALIASES",
    "DYNAMIC_TYPES",
    "REGISTRY",
    "DefaultScaling",
    "DynamicNTKScaling",
    "LinearScaling",
    "Llama3Scaling",
    "LongRoPEScaling",
    "NTKScaling",
    "ProportionalScaling",
    "YaRNScaling",
    "longrope_attention_factor",
    "ntk_base",
    "rope_frequencies",
    "scaling_from_dict",
    "scaling_to_dict",
    "yarn_attention_factor",
    "yarn_get_mscale",
    "yarn_softmax_scale",
]


#: the longest length a config may give: float64 holds every integer up to it exactly
MAX_LENGTH = 2**53
#: the largest attention factor, ``mscale`` or ``mscale_all_dim`` a config may give. Published configs
#: use about 0.7 to 1.4; the bound keeps the cos/sin tables and the softmax scale ``m ** 2`` finite
#: with a wide margin (``m = 0.1 * mscale * ln(factor) + 1`` stays below 1e6 for any float64 factor).
MAX_TABLE_FACTOR = 1e3
#: the smallest per-pair LongRoPE factor: a pair may turn at most this many times faster than
#: unscaled RoPE's (published factors are 1 to about 60); below it ``theta_i / f_i`` leaves float64.
MIN_PAIR_FACTOR = 1e-6


# -- validation helpers ----------------------------------------------------------------------------
def _field(config: Any, field: str) -> str:
    """How an error names a config field: ``'yarn' scaling: beta_fast``."""
    return f"{config.rope_type!r} scaling: {field}"


def _fail(config: Any, field: str, value: object, allowed: str) -> NoReturn:
    refuse(_field(config, field), value, allowed)


def _number(config: Any, field: str, **bounds: Any) -> float:
    """The field ``field`` of ``config``, a finite float within ``bounds`` (see :func:`check_config_float`)."""
    return check_config_float(_field(config, field), getattr(config, field), **bounds)


def _factor(config: Any, field: str = "factor") -> float:
    return _number(config, field, minimum=1.0)


def _length(config: Any, field: str = "original_max_position_embeddings") -> int:
    return check_config_int(_field(config, field), getattr(config, field), maximum=MAX_LENGTH)


def _optional_positive(config: Any, field: str, maximum: float) -> None:
    if getattr(config, field) is not None:
        _number(config, field, greater_than=0.0, maximum=maximum, allowed=f"None or a number > 0 and <= {maximum:g}")


def _check_rotary_dim(config: Any, rotary_dim: object) -> None:
    if rotary_dim is not None:
        check_config_int(_field(config, "rotary_dim"), rotary_dim, minimum=2, maximum=None, even=True)


def _rotary_dim_and_factor(config: Any, rotary_dim: object) -> None:
    """What every type scaled by a ``factor`` checks first: the rotated width, then the factor."""
    _check_rotary_dim(config, rotary_dim)
    _factor(config)


class _Validated:
    """Validates everything that does not depend on ``rotary_dim`` at construction time."""

    def __post_init__(self) -> None:
        self.validate(None)

    def validate(self, rotary_dim: Optional[int]) -> None:
        """Raise ``ValueError`` unless the config is valid for ``rotary_dim`` (each type defines it)."""
        raise NotImplementedError


# -- default -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DefaultScaling(_Validated):
    """No scaling: ``theta_i = base ** (-2i / d)`` (Su et al. 2021, RoFormer).

    Hugging Face ``rope_type="default"`` (or no ``rope_scaling`` at all); ``base`` is ``rope_theta``.
    """

    rope_type: ClassVar[str] = "default"

    def validate(self, rotary_dim: Optional[int]) -> None:
        _check_rotary_dim(self, rotary_dim)


def _default(config: DefaultScaling, rotary_dim: int, base: float, seq_len: Optional[int] = None) -> Frequencies:
    return rope_inv_freq(rotary_dim, base), 1.0


# -- linear (position interpolation) ----------------------------------------------------------------
@dataclass(frozen=True)
class LinearScaling(_Validated):
    """Position interpolation: ``theta_i' = theta_i / s``.

    Chen et al. 2023, "Extending Context Window of Large Language Models via Positional
    Interpolation" (and kaiokendev's SuperHOT). Squeezing positions ``0 .. s*L0`` into ``0 .. L0`` is the
    same as dividing every frequency by ``s``. Hugging Face: ``{"rope_type": "linear", "factor": s}``.

    Args:
        factor: ``s >= 1``, the ratio of the new context length to the trained one.
    """

    factor: float
    rope_type: ClassVar[str] = "linear"

    def validate(self, rotary_dim: Optional[int]) -> None:
        _rotary_dim_and_factor(self, rotary_dim)


def _linear(config: LinearScaling, rotary_dim: int, base: float, seq_len: Optional[int] = None) -> Frequencies:
    return rope_inv_freq(rotary_dim, base) / float(config.factor), 1.0


# -- static NTK-aware -------------------------------------------------------------------------------
def ntk_base(base: float, scale: float, rotary_dim: int) -> float:
    """NTK-aware base change: ``base * scale ** (d / (d - 2))``.

    The exponent makes the slowest pair (``i = d/2 - 1``) turn exactly ``scale`` times slower while the
    fastest pair (``i = 0``, ``theta_0 = 1`` for every base) is unchanged. For ``d = 2`` that fastest
    pair is the only one and the exponent is undefined; nothing changes, so the base is returned as is.
    """
    if rotary_dim == 2:
        return base
    try:
        new_base = float(base * scale ** (rotary_dim / (rotary_dim - 2)))
    except OverflowError:
        new_base = math.inf
    if not math.isfinite(new_base):
        raise ValueError(
            f"the NTK base base * scale ** (d / (d - 2)) = {base!r} * {scale!r} ** "
            f"({rotary_dim} / {rotary_dim - 2}) is beyond float64; use a smaller factor"
        )
    return new_base


@dataclass(frozen=True)
class NTKScaling(_Validated):
    """Static NTK-aware scaling: ``base' = base * s ** (d / (d - 2))``, ``theta_i' = base' ** (-2i/d)``.

    bloc97, "NTK-Aware Scaled RoPE allows LLaMA models to have extended (8k+) context size without
    any fine-tuning" (r/LocalLLaMA, 2023); analysed in Peng et al. 2023 (YaRN, section 3.1). High
    frequencies are kept (extrapolated), low ones interpolated, with a smooth change in between.
    ``transformers`` has no static variant (only ``dynamic``); in a config this is usually written as a
    raised ``rope_theta``. posenc name: ``{"rope_type": "ntk", "factor": s}``.

    Args:
        factor: ``s >= 1``.
    """

    factor: float
    rope_type: ClassVar[str] = "ntk"

    def validate(self, rotary_dim: Optional[int]) -> None:
        _rotary_dim_and_factor(self, rotary_dim)


def _ntk(config: NTKScaling, rotary_dim: int, base: float, seq_len: Optional[int] = None) -> Frequencies:
    return rope_inv_freq(rotary_dim, ntk_base(base, float(config.factor), rotary_dim)), 1.0


# -- dynamic NTK ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DynamicNTKScaling(_Validated):
    """Dynamic NTK: the NTK base change with a scale that grows with the current length ``L``.

    emozilla, "Dynamically Scaled RoPE further increases performance of long context LLaMA with zero
    fine-tuning" (r/LocalLLaMA, 2023). With ``L = max(seq_len, L0)``::

        s_eff = s * L / L0 - (s - 1)           # 1 at L = L0, s at L = 2 * L0 ... linear in L
        base' = base * s_eff ** (d / (d - 2))

    Up to ``L0`` the frequencies are the default ones. Because they change with ``L``, keys cached at
    one length and queries at another are rotated with different frequencies; see
    :meth:`posenc.rope.RotaryEmbedding.freeze_frequencies`. Hugging Face:
    ``{"rope_type": "dynamic", "factor": s}``, with ``L0`` taken from the config's
    ``max_position_embeddings``.

    Args:
        factor: ``s >= 1``.
        original_max_position_embeddings: ``L0``, the trained context length.
    """

    factor: float
    original_max_position_embeddings: int
    rope_type: ClassVar[str] = "dynamic"

    def validate(self, rotary_dim: Optional[int]) -> None:
        _rotary_dim_and_factor(self, rotary_dim)
        _length(self)


def _dynamic(config: DynamicNTKScaling, rotary_dim: int, base: float, seq_len: Optional[int] = None) -> Frequencies:
    original = config.original_max_position_embeddings
    length = original if seq_len is None else max(int(seq_len), original)
    scale = 1.0 + float(config.factor) * (length - original) / original  # = s L / L0 - (s - 1), exact at L0
    return rope_inv_freq(rotary_dim, ntk_base(base, scale, rotary_dim)), 1.0


# -- YaRN -------------------------------------------------------------------------------------------
def yarn_get_mscale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's attention temperature term ``0.1 * mscale * ln(s) + 1`` (1 for ``s <= 1``)."""
    if factor <= 1.0:
        return 1.0
    return 0.1 * mscale * math.log(factor) + 1.0


def _yarn_correction_dim(rotations: float, rotary_dim: int, base: float, original: int) -> float:
    """The (fractional) pair index whose wavelength fits ``rotations`` full turns into ``original``."""
    # a sum of logs, not the log of a quotient: finite for every positive finite rotation count
    return rotary_dim * (math.log(original) - math.log(rotations) - math.log(2 * math.pi)) / (2 * math.log(base))


@dataclass(frozen=True)
class YaRNScaling(_Validated):
    """YaRN: "NTK-by-parts" interpolation plus an attention temperature.

    Peng, Quesnelle, Fan, Shippole 2023, "YaRN: Efficient Context Window Extension of Large Language
    Models". Pairs that turn more than ``beta_fast`` times over the trained length ``L0`` are kept;
    pairs turning fewer than ``beta_slow`` times are interpolated (``theta / s``); in between a linear
    ramp over the pair index mixes the two::

        low  = d * ln(L0 / (2 pi beta_fast)) / (2 ln base)     # floor() if truncate
        high = d * ln(L0 / (2 pi beta_slow)) / (2 ln base)     # ceil()  if truncate
        low, high = max(low, 0), min(high, d - 1)              # high += 0.001 if equal
        ramp_i = clamp((i - low) / (high - low), 0, 1)
        theta_i' = theta_i / s * ramp_i + theta_i * (1 - ramp_i)

    The cos/sin tables are multiplied by ``attention_factor`` (so q.k by its square): the given value,
    else ``m(s, mscale) / m(s, mscale_all_dim)`` when both are given (DeepSeek-V2/V3), else ``m(s, 1)``,
    with ``m(s, k) = 0.1 k ln(s) + 1``.

    DeepSeek-V2/V3 set ``mscale == mscale_all_dim``, so this table factor is exactly 1, and apply the
    temperature in the softmax scale instead: their attention multiplies ``1/sqrt(d_qk)`` by
    ``m(s, mscale_all_dim) ** 2``. Code that uses only the rotary tables loses that factor; read it from
    :func:`yarn_softmax_scale`.

    Hugging Face keys (``rope_type="yarn"``): ``factor``, ``original_max_position_embeddings``,
    ``beta_fast`` (32), ``beta_slow`` (1), ``mscale``, ``mscale_all_dim``, ``attention_factor``,
    ``truncate`` (True; gpt-oss sets False).

    Args:
        factor: ``s >= 1``.
        original_max_position_embeddings: ``L0``.
        beta_fast, beta_slow: rotation counts bounding the ramp, ``beta_fast > beta_slow > 0``.
        mscale, mscale_all_dim: DeepSeek's temperature multipliers; give both or neither
            (``transformers`` silently ignores ``mscale`` alone, DeepSeek's own code does not).
        attention_factor: explicit table factor (> 0), overriding the rule above.
        truncate: round the ramp ends to whole pair indices.
    """

    factor: float
    original_max_position_embeddings: int
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    mscale: Optional[float] = None
    mscale_all_dim: Optional[float] = None
    attention_factor: Optional[float] = None
    truncate: bool = True
    rope_type: ClassVar[str] = "yarn"

    def validate(self, rotary_dim: Optional[int]) -> None:
        _rotary_dim_and_factor(self, rotary_dim)
        _length(self)
        _number(self, "beta_slow", greater_than=0.0)
        _number(
            self, "beta_fast", greater_than=self.beta_slow, allowed=f"a finite number > beta_slow={self.beta_slow!r}"
        )
        _optional_positive(self, "mscale", MAX_TABLE_FACTOR)
        _optional_positive(self, "mscale_all_dim", MAX_TABLE_FACTOR)
        if (self.mscale is None) != (self.mscale_all_dim is None):
            missing = "mscale_all_dim" if self.mscale_all_dim is None else "mscale"
            _fail(
                self,
                missing,
                None,
                "given together with "
                f"{'mscale' if missing == 'mscale_all_dim' else 'mscale_all_dim'} (both or neither)",
            )
        _optional_positive(self, "attention_factor", MAX_TABLE_FACTOR)
        if not isinstance(self.truncate, bool):
            _fail(self, "truncate", self.truncate, "True or False")


def yarn_attention_factor(config: YaRNScaling) -> float:
    """The factor YaRN puts on the cos/sin tables (see :class:`YaRNScaling`)."""
    if config.attention_factor is not None:
        return float(config.attention_factor)
    if config.mscale is not None and config.mscale_all_dim is not None:
        return yarn_get_mscale(config.factor, config.mscale) / yarn_get_mscale(config.factor, config.mscale_all_dim)
    return yarn_get_mscale(config.factor)


def yarn_softmax_scale(config: YaRNScaling) -> float:
    """Extra softmax-scale multiplier DeepSeek-V2/V3 apply outside the rotary tables.

    ``m(s, mscale_all_dim) ** 2`` when ``mscale_all_dim`` is set, else 1. Multiply the usual
    ``1 / sqrt(head_dim)`` by it to reproduce those models' attention.
    """
    if config.mscale_all_dim is None:
        return 1.0
    return yarn_get_mscale(config.factor, config.mscale_all_dim) ** 2


def _yarn(config: YaRNScaling, rotary_dim: int, base: float, seq_len: Optional[int] = None) -> Frequencies:
    original = config.original_max_position_embeddings
    low = _yarn_correction_dim(config.beta_fast, rotary_dim, base, original)
    high = _yarn_correction_dim(config.beta_slow, rotary_dim, base, original)
    if config.truncate:
        low, high = float(math.floor(low)), float(math.ceil(high))  # floats: finite, any size
    low, high = max(low, 0.0), min(high, rotary_dim - 1.0)
    if low == high:
        high += 0.001  # a step instead of a ramp; avoids dividing by zero
    index = torch.arange(rotary_dim // 2, dtype=torch.float64, device="cpu")
    ramp = ((index - low) / (high - low)).clamp(0.0, 1.0)  # 0: keep theta_i, 1: theta_i / s
    theta = rope_inv_freq(rotary_dim, base)
    inv_freq = theta / float(config.factor) * ramp + theta * (1.0 - ramp)
    return inv_freq, yarn_attention_factor(config)


# -- Llama 3 ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Llama3Scaling(_Validated):
    """Llama 3.1's frequency-band scaling.

    Meta, "The Llama 3 Herd of Models" (2024) and its reference code (``apply_scaling`` in
    ``llama/model.py``). With wavelength ``lambda_i = 2 pi / theta_i``::

        lambda_i < L0 / high_freq_factor  ->  theta_i              (fast pairs: unchanged)
        lambda_i > L0 / low_freq_factor   ->  theta_i / s          (slow pairs: interpolated)
        otherwise, with g = (L0 / lambda_i - low_freq_factor) / (high_freq_factor - low_freq_factor):
                                              (1 - g) * theta_i / s + g * theta_i

    Llama 3.1/3.2/3.3 ship ``factor=8`` (32 for 3.2 1B/3B), ``low_freq_factor=1``,
    ``high_freq_factor=4``, ``original_max_position_embeddings=8192``, ``rope_theta=500000``.
    Hugging Face: ``rope_type="llama3"`` with those keys.

    Args:
        factor: ``s >= 1``.
        low_freq_factor: > 0.
        high_freq_factor: > ``low_freq_factor``.
        original_max_position_embeddings: ``L0``.
    """

    factor: float
    low_freq_factor: float
    high_freq_factor: float
    original_max_position_embeddings: int
    rope_type: ClassVar[str] = "llama3"

    def validate(self, rotary_dim: Optional[int]) -> None:
        _rotary_dim_and_factor(self, rotary_dim)
        _number(self, "low_freq_factor", greater_than=0.0)
        _number(
            self,
            "high_freq_factor",
            greater_than=self.low_freq_factor,
            allowed=f"a finite number > low_freq_factor={self.low_freq_factor!r}",
        )
        _length(self)


def _llama3(config: Llama3Scaling, rotary_dim: int, base: float, seq_len: Optional[int] = None) -> Frequencies:
    original = config.original_max_position_embeddings
    factor, low, high = float(config.factor), float(config.low_freq_factor), float(config.high_freq_factor)
    theta = rope_inv_freq(rotary_dim, base)
    wavelength = 2 * math.pi / theta
    smooth = (original / wavelength - low) / (high - low)
    mixed = (1.0 - smooth) * theta / factor + smooth * theta
    inv_freq = torch.where(wavelength > original / low, theta / factor, mixed)
    inv_freq = torch.where(wavelength < original / high, theta, inv_freq)
    return inv_freq, 1.0


# -- LongRoPE ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LongRoPEScaling(_Validated):
    """LongRoPE: a searched rescale factor per frequency, one set for short and one for long inputs.

    Ding et al. 2024, "LongRoPE: Extending LLM Context Window Beyond 2 Million Tokens"; shipped by
    Phi-3 (``rope_scaling.type`` ``"longrope"``, earlier ``"su"``)::

        theta_i' = theta_i / f_i,   f = long_factor if seq_len > L0 else short_factor

    Both tables are multiplied by ``attention_factor``: the given value, else
    ``sqrt(1 + ln(s) / ln(L0))`` with ``s = factor`` (1 when ``s <= 1``). Hugging Face configs often omit
    ``factor``; it is then ``max_position_embeddings / original_max_position_embeddings`` (Phi-3 mini
    128k: 131072 / 4096 = 32), which :func:`posenc.hf.scaling_from_hf` fills in.

    Hugging Face keys (``rope_type="longrope"``): ``short_factor``, ``long_factor``,
    ``original_max_position_embeddings`` (Phi-3 keeps it at the top level of the config),
    ``attention_factor``, ``factor``.

    Args:
        short_factor, long_factor: ``rotary_dim // 2`` finite numbers > 0 each (stored as tuples).
        original_max_position_embeddings: ``L0``.
        attention_factor: explicit table factor (> 0).
        factor: context-extension ratio ``s >= 1`` used by the default attention factor; ``None``
            means 1 (no attention scaling).
    """

    short_factor: Tuple[float, ...]
    long_factor: Tuple[float, ...]
    original_max_position_embeddings: int
    attention_factor: Optional[float] = None
    factor: Optional[float] = None
    rope_type: ClassVar[str] = "longrope"

    def __post_init__(self) -> None:
        for name in ("short_factor", "long_factor"):
            value = getattr(self, name)
            if isinstance(value, (list, tuple, torch.Tensor)):
                value = tuple(
                    float(v) if isinstance(v, torch.Tensor) else v
                    for v in (value.tolist() if isinstance(value, torch.Tensor) else value)
                )
                object.__setattr__(self, name, value)
        super().__post_init__()

    def validate(self, rotary_dim: Optional[int]) -> None:
        _check_rotary_dim(self, rotary_dim)
        for name in ("short_factor", "long_factor"):
            value = getattr(self, name)
            if not isinstance(value, tuple) or not value:
                _fail(self, name, value, "a non-empty list of numbers")
            for j, f in enumerate(value):
                check_config_float(_field(self, f"{name}[{j}]"), f, minimum=MIN_PAIR_FACTOR)
            if rotary_dim is not None and len(value) != rotary_dim // 2:
                _fail(
                    self,
                    f"len({name})",
                    len(value),
                    f"rotary_dim // 2 = {rotary_dim // 2} (one factor per rotation pair)",
                )
        _length(self)
        _optional_positive(self, "attention_factor", MAX_TABLE_FACTOR)
        if self.factor is not None:
            _factor(self)
            if self.factor > 1 and self.attention_factor is None and self.original_max_position_embeddings < 2:
                # the derived attention factor divides by log(original_max_position_embeddings)
                _fail(
                    self,
                    "original_max_position_embeddings",
                    self.original_max_position_embeddings,
                    "an integer >= 2 when the attention factor is derived from factor > 1 "
                    "(it divides by log(original_max_position_embeddings)); or give attention_factor",
                )

    def uses_long_factor(self, seq_len: Optional[int]) -> bool:
        """True when ``seq_len`` is past ``original_max_position_embeddings`` (long regime)."""
        return seq_len is not None and seq_len > self.original_max_position_embeddings


def longrope_attention_factor(config: LongRoPEScaling) -> float:
    """The factor LongRoPE puts on both cos/sin tables (see :class:`LongRoPEScaling`)."""
    if config.attention_factor is not None:
        return float(config.attention_factor)
    factor = 1.0 if config.factor is None else config.factor
    if factor <= 1.0:
        return 1.0
    return math.sqrt(1.0 + math.log(factor) / math.log(config.original_max_position_embeddings))


def _longrope(config: LongRoPEScaling, rotary_dim: int, base: float, seq_len: Optional[int] = None) -> Frequencies:
    chosen = config.long_factor if config.uses_long_factor(seq_len) else config.short_factor
    factors = torch.tensor([float(f) for f in chosen], dtype=torch.float64, device="cpu")
    return rope_inv_freq(rotary_dim, base) / factors, longrope_attention_factor(config)


# -- proportional (Gemma-style partial rotation with the head's denominator) -------------------------
@dataclass(frozen=True)
class ProportionalScaling(_Validated):
    """Partial rotation whose exponent keeps the full head dimension as denominator.

    Hugging Face ``rope_type="proportional"`` (Gemma 4): with ``n = int(p * d // 2)`` rotated pairs,
    ``theta_i' = base ** (-2i / d) / s`` for ``i < n`` and ``0`` (no rotation) for the other
    ``d/2 - n`` pairs. Unlike ``partial_rotary_factor`` elsewhere, the table still covers the whole
    head (pass ``rotary_dim = head_dim``), and the unrotated features are the *last pairs* of the
    layout (in half-split: the tail of each half), not the tail of the head.

    Args:
        partial_rotary_factor: ``p`` in (0, 1].
        factor: ``s >= 1`` (Hugging Face default 1).
    """

    partial_rotary_factor: float = 1.0
    factor: float = 1.0
    rope_type: ClassVar[str] = "proportional"

    def validate(self, rotary_dim: Optional[int]) -> None:
        _check_rotary_dim(self, rotary_dim)
        _number(self, "partial_rotary_factor", greater_than=0.0, maximum=1.0, allowed="a number in (0, 1]")
        _factor(self)


def _proportional(
    config: ProportionalScaling, rotary_dim: int, base: float, seq_len: Optional[int] = None
) -> Frequencies:
    rotated = int(config.partial_rotary_factor * rotary_dim // 2)
    inv_freq = rope_inv_freq(rotary_dim, base) / float(config.factor)
    inv_freq[rotated:] = 0.0
    return inv_freq, 1.0


# -- Hugging Face readers and writers that differ from "one key per field" ---------------------------
def _zero_is_unset(value: Any) -> Any:
    """``transformers`` treats ``mscale: 0`` like an absent key (``if mscale and mscale_all_dim``)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0:
        return None
    return value


def _dynamic_from_hf(ctx: HFRope) -> DynamicNTKScaling:
    # transformers reads the trained length of dynamic NTK from max_position_embeddings only
    return DynamicNTKScaling(ctx.require("factor"), ctx.max_positions)


def _dynamic_to_hf(config: DynamicNTKScaling) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    return {"factor": config.factor}, {"max_position_embeddings": config.original_max_position_embeddings}


def _yarn_from_hf(ctx: HFRope) -> YaRNScaling:
    original = ctx.original()
    return YaRNScaling(
        ctx.ratio(original),
        original,
        beta_fast=ctx.get("beta_fast", 32.0),
        beta_slow=ctx.get("beta_slow", 1.0),
        mscale=_zero_is_unset(ctx.get("mscale")),
        mscale_all_dim=_zero_is_unset(ctx.get("mscale_all_dim")),
        attention_factor=ctx.get("attention_factor"),
        truncate=ctx.get("truncate", True),
    )


def _llama3_from_hf(ctx: HFRope) -> Llama3Scaling:
    return Llama3Scaling(
        ctx.require("factor"), ctx.require("low_freq_factor"), ctx.require("high_freq_factor"), ctx.original()
    )


def _longrope_from_hf(ctx: HFRope) -> LongRoPEScaling:
    original = ctx.original()
    factor = ctx.get("factor")
    if factor is None and ctx.get("attention_factor") is None:
        # Derived from the lengths; a context no longer than the trained one means no attention scaling.
        # (With an explicit attention_factor the factor would change nothing, so none is made up.)
        factor = max(ctx.max_positions / original, 1.0)
    return LongRoPEScaling(
        ctx.require("short_factor"),
        ctx.require("long_factor"),
        original,
        attention_factor=ctx.get("attention_factor"),
        factor=factor,
    )


def _longrope_to_hf(config: LongRoPEScaling) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    rope = config_to_fields(config)
    if config.factor is None and config.attention_factor is None:
        # A reader fills a missing factor from the context lengths; pin the factor this config uses.
        rope["attention_factor"] = longrope_attention_factor(config)
    return rope, {}


def _ntk_for_transformers(config: NTKScaling, base: float, rotary_dim: int) -> Tuple[float, None, str]:
    new_base = ntk_base(base, config.factor, rotary_dim)
    d = rotary_dim
    worked = (
        f"{base:g} * {config.factor:g} ** ({d} / {d - 2}) = {new_base!r}"
        if d > 2
        else f"{base:g} (with d = 2 the only pair is the fastest, which NTK never moves)"
    )
    note = (
        f"transformers has no static NTK rope type: static NTK is the default RoPE with "
        f"rope_theta = base * factor ** (d / (d - 2)) = {worked}, so a config.json written for "
        f'transformers holds that rope_theta with rope_type "default".'
    )
    return new_base, None, note


def _yarn_thresholds(config: YaRNScaling) -> Tuple[float, float]:
    original = config.original_max_position_embeddings
    return original / config.beta_fast, original / config.beta_slow


def _llama3_thresholds(config: Llama3Scaling) -> Tuple[float, float]:
    original = config.original_max_position_embeddings
    return original / config.high_freq_factor, original / config.low_freq_factor


# -- the registry entries ----------------------------------------------------------------------------
#: the extension ratio every type that has one shares: one parameter, defined alike for all
_FACTOR = Parameter("factor", 1.0, 64.0, 1.0, 8.0)

for _descriptor in (
    ScalingDescriptor(
        "default",
        DefaultScaling,
        _default,
        summary="`theta_i`",
        source="Su et al. 2021, RoFormer",
        # Qwen2-VL and Qwen2.5-VL config.json files: {"type": "mrope", "mrope_section": [...]} is the
        # default frequencies with M-RoPE's streams (posenc.rope.mrope), as transformers reads it
        transformers=TransformersSpelling(
            model_type_aliases={t: "mrope" for t in ("qwen2_vl", "qwen2_vl_text", "qwen2_5_vl", "qwen2_5_vl_text")}
        ),
    ),
    ScalingDescriptor(
        "linear",
        LinearScaling,
        _linear,
        summary="`theta_i / s`",
        source="Chen et al. 2023, position interpolation; kaiokendev (SuperHOT)",
        parameters=(_FACTOR,),
        extension=lambda factor, original: LinearScaling(factor),
    ),
    ScalingDescriptor(
        "ntk",
        NTKScaling,
        _ntk,
        summary="`base' = base * s ** (d / (d - 2))`, `theta_i' = base' ** (-2i/d)`",
        source='bloc97 2023 (r/LocalLLaMA), "NTK-aware scaled RoPE"',
        parameters=(_FACTOR,),
        extension=lambda factor, original: NTKScaling(factor),
        transformers=TransformersSpelling(known=False, equivalent=_ntk_for_transformers),
    ),
    ScalingDescriptor(
        "dynamic",
        DynamicNTKScaling,
        _dynamic,
        summary="NTK with `s_eff = 1 + s (max(L, L0) - L0) / L0`",
        source='emozilla 2023 (r/LocalLLaMA), "dynamically scaled RoPE"',
        length_dependent=True,
        parameters=(_FACTOR,),
        extension=DynamicNTKScaling,
        transformers=TransformersSpelling(keys=frozenset({"factor"}), read=_dynamic_from_hf, write=_dynamic_to_hf),
    ),
    ScalingDescriptor(
        "yarn",
        YaRNScaling,
        _yarn,
        summary="ramp between `theta_i` and `theta_i / s` (below)",
        source="Peng et al. 2023, YaRN; DeepSeek-V2 (mscale)",
        softmax_scale=yarn_softmax_scale,
        # the paper's beta_fast 32 and beta_slow 1 are the config's defaults
        parameters=(
            _FACTOR,
            Parameter("beta_fast", 2.0, 64.0, 1.0, 32.0),
            Parameter("beta_slow", 0.25, 4.0, 0.25, 1.0),
        ),
        ramp=_yarn_thresholds,
        extension=YaRNScaling,
        transformers=TransformersSpelling(read=_yarn_from_hf),
    ),
    ScalingDescriptor(
        "llama3",
        Llama3Scaling,
        _llama3,
        summary="three wavelength bands (below)",
        source='Meta 2024, "The Llama 3 Herd of Models", reference `apply_scaling`',
        parameters=(
            _FACTOR,
            Parameter("low_freq_factor", 0.5, 4.0, 0.5, 1.0),
            Parameter("high_freq_factor", 1.0, 16.0, 0.5, 4.0),
        ),
        ramp=_llama3_thresholds,
        # Llama 3.1's published bands: low_freq_factor 1, high_freq_factor 4
        extension=lambda factor, original: Llama3Scaling(factor, 1.0, 4.0, original),
        transformers=TransformersSpelling(read=_llama3_from_hf),
    ),
    ScalingDescriptor(
        "longrope",
        LongRoPEScaling,
        _longrope,
        summary="`theta_i / f_i`, `f = long_factor if L > L0 else short_factor`",
        source='Ding et al. 2024, LongRoPE; Phi-3 (`"su"` in early configs)',
        length_dependent=True,
        transformers=TransformersSpelling(
            aliases=("su",),
            # Phi-3 and Phi-4-multimodal config.json files: transformers builds "yarn" as LongRoPE
            model_type_aliases={"phi3": "yarn", "phi4_multimodal": "yarn"},
            read=_longrope_from_hf,
            write=_longrope_to_hf,
        ),
    ),
    ScalingDescriptor(
        "proportional",
        ProportionalScaling,
        _proportional,
        summary="`theta_i / s` with the head's `d`, for the first `int(p d / 2)` pairs; 0 for the rest",
        source="Hugging Face `transformers` (Gemma 4)",
        transformers=TransformersSpelling(rotary_fraction_field="partial_rotary_factor"),
    ),
):
    register_scaling(_descriptor, builtin=True)
del _descriptor

#: rope types whose frequencies depend on the current sequence length (a live view of the registry)
DYNAMIC_TYPES = LiveNames(
    lambda d: d.length_dependent, "rope types whose frequencies depend on the current sequence length"
)


def rope_frequencies(scaling: Any, rotary_dim: int, base: float, seq_len: Optional[int] = None) -> Frequencies:
    """``(inv_freq, attention_factor)`` for any registered scaling config (``None`` = default).

    Args:
        scaling: a config instance of a registered rope type, or ``None``.
        rotary_dim: rotated features per head (even).
        base: ``rope_theta``.
        seq_len: current sequence length (only the length-dependent types, :data:`DYNAMIC_TYPES`,
            use it).

    Returns:
        float64 ``inv_freq`` of shape (rotary_dim // 2,) and the float ``attention_factor``.
    """
    check_float("base", base, greater_than=1.0)
    scaling = DefaultScaling() if scaling is None else scaling
    descriptor = descriptor_of(scaling)
    descriptor.validate(scaling, rotary_dim)
    if seq_len is not None:
        check_config_int("seq_len", seq_len, maximum=None, allowed="None or an integer >= 1")
    inv_freq, attention_factor = descriptor.frequencies(scaling, rotary_dim, float(base), seq_len)
    attention_factor = float(attention_factor)
    # The validators bound every field; this is the guarantee itself, for registered types too.
    if not (math.isfinite(attention_factor) and attention_factor > 0 and bool(torch.isfinite(inv_freq).all())):
        raise ValueError(
            f"{descriptor.name!r} scaling {scaling!r} with rotary_dim={rotary_dim}, base={base!r} gives "
            f"frequencies or an attention factor that are not finite positive numbers (attention factor "
            f"{attention_factor!r}); allowed: fields whose tables stay finite"
        )
    return inv_freq, attention_factor


# -- dict round trip --------------------------------------------------------------------------------
def scaling_from_dict(d: Optional[Dict[str, Any]]) -> Any:
    """Build a scaling config from a ``rope_scaling`` / ``rope_parameters``-style dict.

    ``rope_type`` (or the legacy ``type``) selects the type; the other keys are its config fields,
    taken as written (no Hugging Face defaults: :mod:`posenc.rope.hfconfig` reads whole configs). The
    keys ``rope_theta`` and ``partial_rotary_factor``, which new-style ``rope_parameters`` keep in the
    same dict, are not scaling fields and are ignored here. Any other unknown key raises, so a misspelt
    field is never dropped silently. ``None`` or ``{}`` gives :class:`DefaultScaling`.
    """
    if not d:
        return DefaultScaling()
    if not isinstance(d, dict):
        raise TypeError(f"rope scaling must be a dict, got {type(d).__name__}")
    descriptor = REGISTRY[resolve_name(d.get("rope_type", d.get("type", "default")))]
    cls = descriptor.config_class
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(d) - names - COMMON_HF_KEYS)
    if unknown:
        raise ValueError(f"{descriptor.name!r} scaling: unknown keys {unknown}; allowed keys are {sorted(names)}")
    kwargs = {k: v for k, v in d.items() if k in names}
    missing = sorted(f.name for f in fields(cls) if f.name not in kwargs and f.default is MISSING)
    if missing:
        raise ValueError(f"{descriptor.name!r} scaling: missing required keys {missing}")
    return cls(**kwargs)


def scaling_to_dict(cfg: Any) -> Dict[str, Any]:
    """The Hugging Face-style dict of a scaling config (``rope_type`` plus fields that are not None)."""
    descriptor = descriptor_of(cfg)
    cfg = DefaultScaling() if cfg is None else cfg
    return {"rope_type": descriptor.name, **config_to_fields(cfg)}
