"""Misreadings of a config, each a :class:`~.reference.Reading` with one thing read wrong.

conform names the cause of a wrong answer by recomputing the reference under every misreading that
changes it for this config and keeping those the engine matches within its dtype's noise. A
misreading is stated by the config fields it concerns, never by rope type, so a type registered
later is covered wherever it has those fields: ``factor``, ``original_max_position_embeddings``,
``beta_fast``/``beta_slow``, ``low_freq_factor``/``high_freq_factor``, ``mscale``/``mscale_all_dim``,
``attention_factor``, ``rope_theta`` (and a whole rope dict unread, as an engine that reads only
the legacy top-level fields misses transformers 5's ``rope_parameters``), a length dependence, a
partial rotated width, the layout, the positions and the tables' dtype.

The attention-factor misreadings are the formulas engines have used in place of the config's value:
``1`` (none), ``0.1 ln(factor) + 1`` (YaRN's default, with ``attention_factor``, ``mscale`` and
``mscale_all_dim`` ignored), ``0.1 mscale ln(factor) + 1`` (``mscale_all_dim`` ignored),
``sqrt(1 + ln(factor) / ln(original_max_position_embeddings))`` (LongRoPE's) and the right factor
applied twice; and on the softmax side, the family's multiplier dropped or a multiplier applied by a
family that has none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, List, Optional

import torch

from ...rope.hfconfig import DEFAULT_THETA
from ...rope.registry import REGISTRY
from ...rope.scaling import yarn_get_mscale
from .reference import (
    ConfigFacts,
    Reading,
    frequencies_of,
    raw_frequencies,
    scaling_fields,
    unchecked_scaling,
)


@dataclass(frozen=True)
class Hypothesis:
    """One misreading: the cause as a report names it, and the reading it gives."""

    cause: str
    reading: Reading


def _swapped(facts: ConfigFacts, reading: Reading, a: str, b: str) -> Optional[Reading]:
    fields = scaling_fields(facts.scaling)
    if a not in fields or b not in fields or fields[a] == fields[b] or fields[a] is None or fields[b] is None:
        return None
    wrong = unchecked_scaling(facts.scaling, **{a: fields[b], b: fields[a]})
    return reading.replace(frequencies=raw_frequencies(wrong, reading.rotary_dim, facts.base))


def _scaled_twice(facts: ConfigFacts, reading: Reading) -> Callable[[Optional[int]], torch.Tensor]:
    default = frequencies_of(None, reading.rotary_dim, facts.base)

    def frequencies(seq_len: Optional[int]) -> torch.Tensor:
        once = reading.frequencies(seq_len)
        return once * (once / default(seq_len))  # each pair's ratio to the default, applied twice

    return frequencies


def _at_base(facts: ConfigFacts, reading: Reading, base: float) -> Callable[[Optional[int]], torch.Tensor]:
    if facts.scaling is None:
        return frequencies_of(None, reading.rotary_dim, base)
    return raw_frequencies(facts.scaling, reading.rotary_dim, base)


def factor_formulas(facts: ConfigFacts, reading: Reading) -> List[Hypothesis]:
    """The attention factors engines have computed instead of the config's (module notes)."""
    fields = scaling_fields(facts.scaling)
    factor = fields.get("factor")
    right = reading.table_factor
    formulas = [("1.0", 1.0, " (no attention factor applied)")]
    if isinstance(factor, (int, float)) and factor > 1:
        given = [name for name in ("attention_factor", "mscale", "mscale_all_dim") if fields.get(name) is not None]
        ignored = f" ({', '.join(given)} ignored)" if given else ""
        formulas.append(("0.1*ln(factor)+1", yarn_get_mscale(factor), ignored))
        mscale = fields.get("mscale")
        if mscale is not None:
            formulas.append(("0.1*mscale*ln(factor)+1", yarn_get_mscale(factor, mscale), " (mscale_all_dim ignored)"))
        original = fields.get("original_max_position_embeddings")
        if isinstance(original, int) and original > 1:
            formulas.append(
                (
                    "sqrt(1+ln(factor)/ln(original_max_position_embeddings))",
                    math.sqrt(1 + math.log(factor) / math.log(original)),
                    "",
                )
            )
    formulas.append(("applied twice", right * right, ""))
    out = []
    for formula, value, note in formulas:
        if abs(value - right) > 1e-12 * max(1.0, right):
            cause = f"attention factor {formula} = {value:.6g}{note} where the config gives {right:.6g}"
            out.append(Hypothesis(cause, reading.replace(table_factor=value)))
    return out


def softmax_misreadings(facts: ConfigFacts, reading: Reading) -> List[Hypothesis]:
    scale = REGISTRY[facts.rope_type].softmax_scale(facts.scaling) if facts.scaling is not None else 1.0
    out = []
    if reading.softmax_multiplier != 1.0:
        out.append(
            Hypothesis(
                "softmax scale multiplier (0.1*mscale_all_dim*ln(factor)+1)^2 = "
                f"{reading.softmax_multiplier:.6g} dropped",
                reading.replace(softmax_multiplier=1.0),
            )
        )
    elif scale != 1.0 and not facts.mla:
        out.append(
            Hypothesis(
                f"softmax scale multiplied by (0.1*mscale_all_dim*ln(factor)+1)^2 = {scale:.6g}, which only "
                "multi-head latent attention applies",
                reading.replace(softmax_multiplier=scale),
            )
        )
    return out


def frequency_misreadings(facts: ConfigFacts, reading: Reading) -> List[Hypothesis]:
    out = []
    fields = scaling_fields(facts.scaling)
    if facts.scaling is not None:
        out.append(
            Hypothesis(
                f"{facts.rope_type} scaling dropped (read as the default rope type)",
                reading.replace(frequencies=frequencies_of(None, reading.rotary_dim, facts.base), table_factor=1.0),
            )
        )
        factor = fields.get("factor")
        if isinstance(factor, (int, float)) and factor > 1:
            unscaled = unchecked_scaling(facts.scaling, factor=1.0)
            out.append(
                Hypothesis(
                    f"factor ignored (read as 1, the config gives {factor:g})",
                    reading.replace(frequencies=raw_frequencies(unscaled, reading.rotary_dim, facts.base)),
                )
            )
        original = fields.get("original_max_position_embeddings")
        if isinstance(original, int) and original != facts.max_positions:
            misread = unchecked_scaling(facts.scaling, original_max_position_embeddings=facts.max_positions)
            out.append(
                Hypothesis(
                    f"original_max_position_embeddings ignored ({facts.max_positions} = max_position_embeddings "
                    f"used for {original})",
                    reading.replace(frequencies=raw_frequencies(misread, reading.rotary_dim, facts.base)),
                )
            )
        out.append(
            Hypothesis(
                f"{facts.rope_type} scaling applied twice", reading.replace(frequencies=_scaled_twice(facts, reading))
            )
        )
        out.append(
            Hypothesis(
                f"{facts.rope_type} scaling applied twice, frequencies and attention factor",
                reading.replace(frequencies=_scaled_twice(facts, reading), table_factor=reading.table_factor**2),
            )
        )
    if facts.base != DEFAULT_THETA:
        out.append(
            Hypothesis(
                f"rope_theta ignored ({DEFAULT_THETA:g} used for {facts.base:g})",
                reading.replace(frequencies=_at_base(facts, reading, DEFAULT_THETA)),
            )
        )
        if facts.scaling is not None:
            out.append(
                Hypothesis(
                    f"rope dict unread (rope_parameters in transformers 5's form): the default rope at "
                    f"{DEFAULT_THETA:g}, the config's {facts.rope_type} scaling and rope_theta {facts.base:g} lost",
                    reading.replace(
                        frequencies=frequencies_of(None, reading.rotary_dim, DEFAULT_THETA), table_factor=1.0
                    ),
                )
            )
    for a, b in (("beta_fast", "beta_slow"), ("low_freq_factor", "high_freq_factor")):
        swapped = _swapped(facts, reading, a, b)
        if swapped is not None:
            out.append(Hypothesis(f"{a}/{b} swapped", swapped))
    if reading.length_dependent:
        out.append(
            Hypothesis(
                f"{facts.rope_type} scaling not reset: the longest length seen is kept",
                reading.replace(length_rule="running"),
            )
        )
        out.append(
            Hypothesis(
                f"{facts.rope_type} scaling computed once for max_position_embeddings={facts.max_positions}",
                reading.replace(length_rule="fixed", fixed_length=facts.max_positions),
            )
        )
    return out


def shape_misreadings(facts: ConfigFacts, reading: Reading) -> List[Hypothesis]:
    out = []
    other = "interleaved" if reading.layout == "half" else "half"
    out.append(Hypothesis(f"layout swapped ({other} pairs used for {reading.layout})", reading.replace(layout=other)))
    if reading.rotary_dim < reading.head_dim:
        tail = reading.head_dim - reading.rotary_dim
        out.append(
            Hypothesis(
                f"partial rotary slice wrong: the last {reading.rotary_dim} features rotated, not the first",
                reading.replace(start=tail),
            )
        )
        try:
            whole = frequencies_of(facts.scaling, reading.head_dim, facts.base)
            whole(None)
        except ValueError:
            whole = None
        if whole is not None:
            out.append(
                Hypothesis(
                    f"partial rotary ignored: all {reading.head_dim} features rotated, not {reading.rotary_dim}",
                    reading.replace(rotary_dim=reading.head_dim, frequencies=whole),
                )
            )
            half = reading.rotary_dim // 2
            out.append(
                Hypothesis(
                    "frequencies over head_dim instead of the rotated width (base ** (-2i / head_dim))",
                    reading.replace(frequencies=lambda seq_len: whole(seq_len)[:half]),
                )
            )
    for shift in (1, -1):
        out.append(Hypothesis(f"positions shifted by {shift:+d}", reading.replace(shift=shift)))
    for dtype in (torch.bfloat16, torch.float16):  # coarser than either dtype of a call
        name = str(dtype).replace("torch.", "")
        out.append(Hypothesis(f"cos/sin tables in {name}", reading.replace(table_dtype=dtype)))
    return out


def hypotheses(facts: ConfigFacts, reading: Reading) -> List[Hypothesis]:
    """Every misreading that applies to this config (some may give the exact answer on it: conform
    drops those before it compares)."""
    return (
        frequency_misreadings(facts, reading)
        + factor_formulas(facts, reading)
        + softmax_misreadings(facts, reading)
        + shape_misreadings(facts, reading)
    )
