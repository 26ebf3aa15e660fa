"""The checks: one engine's rotation of one config against the exact answer, and the cause named.

For each config conform calls the adapter once per group of positions and dtype, in this order:
``near`` (0 to 31), ``trained`` (the last four positions below the trained length ``L0``),
``past_original`` (``L0`` on, and ``2 L0 - 1``), ``far`` (the last four below the model's
``max_position_embeddings``, when past ``2 L0``), ``1M`` (the four below ``2**20``, when past the
model's maximum) and ``near_again`` (the near positions once more, after the far ones: a
length-dependent scaling must come back to its short frequencies). A group past the adapter's
``max_position(config)`` (an engine whose cache ends there) is not called, and the result says so.
Each call rotates probe rows (every pair ``(1, 0)``, so the engine's angle and factor can be read
off each pair) and random rows, first in float32 and then in float64.

Five checks per group and dtype, each an error in a unit that means something:

* ``angle``: the largest angle difference of any pair, in radians (read from the probe rows);
* ``factor``: the score multiplier the engine applies (its tables' factor on q times that on k times
  the softmax scale it returns) over the exact one, minus 1: a scale ratio;
* ``q``, ``k``: the largest difference of the rotated random rows, relative to their largest value,
  up to one constant factor (the factor may sit in q, in k or in the softmax scale);
* ``score``: the largest difference of the scores ``softmax_scale * q . k`` between every pair of
  random rows, relative to the largest score: invariant to where the factor sits.

Each error is held to the noise of the call's dtype (:data:`NOISE` times its machine epsilon) and to a
float32 allowance that grows with the angle: ``PRECISION * eps32 * (1 + |m| theta_i)`` for pair ``i``
at position ``m``, the error float32 angle arithmetic gives. Within the noise: ``ok``. Past the noise
but within the allowance: ``precision`` (precision loss). Past both: ``wrong`` (a wrong answer). A
wrong answer is then recomputed under every misreading of :mod:`.hypotheses` that changes the
reference, and the misreadings the engine matches within noise and allowance are its named causes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from .hypotheses import hypotheses
from .reference import ConfigFacts, LengthHistory, Reading, exact_tables, read_config, rotate_exact, scores

#: the noise floor of a call, in machine epsilons of its dtype
NOISE = 32.0
#: the float32 angle-arithmetic allowance, in float32 epsilons per radian of angle (plus one)
PRECISION = 8.0
EPS32 = float(torch.finfo(torch.float32).eps)
CHECKS = ("angle", "factor", "q", "k", "score")
UNITS = {"angle": "rad", "factor": "ratio", "q": "relative", "k": "relative", "score": "relative"}
NEAR = (0, 1, 2, 3, 5, 8, 13, 31)
ONE_MILLION = 2**20
HEADS = 2
DTYPES = {"float32": torch.float32, "float64": torch.float64}


class AdapterError(Exception):
    """The adapter raised or returned something the protocol does not allow (a one-line message)."""


def position_groups(facts: ConfigFacts) -> List[Tuple[str, List[int]]]:
    """The groups of positions, in the order they are called (see the module notes)."""
    original, top = facts.original, facts.max_positions
    groups = [
        ("near", list(NEAR)),
        ("trained", sorted({max(p, 0) for p in range(original - 4, original)})),
        ("past_original", sorted({original, original + 1, original + 2, 2 * original - 1})),
    ]
    if top - 1 > 2 * original - 1:
        groups.append(("far", list(range(top - 4, top))))
    if ONE_MILLION > max(top, 2 * original):
        groups.append(("1M", list(range(ONE_MILLION - 4, ONE_MILLION))))
    groups.append(("near_again", list(NEAR)))
    return groups


@dataclass
class Call:
    """One call of the adapter: its inputs and what the engine returned."""

    group: str
    dtype: str
    positions: torch.Tensor  # (tokens,) int64: the group's positions twice (probe rows, random rows)
    q: torch.Tensor  # (tokens, heads, head_dim) in the call's dtype
    k: torch.Tensor
    probes: int  # the first `probes` rows are probes
    out: Optional[Tuple[torch.Tensor, torch.Tensor, float]] = None


def probe_rows(reading: Reading, count: int) -> torch.Tensor:
    """(count, heads, head_dim) float64: every rotated pair (1, 0), every other feature 1."""
    x = torch.ones(count, HEADS, reading.head_dim, dtype=torch.float64)
    r, lo = reading.rotary_dim, reading.start
    second = torch.arange(r // 2, r) if reading.layout == "half" else torch.arange(1, r, 2)
    x[..., lo + second] = 0.0
    return x


def make_call(reading: Reading, group: str, positions: List[int], dtype: str, seed: int) -> Call:
    gen = torch.Generator().manual_seed(seed)
    count = len(positions)
    probe = probe_rows(reading, count)
    rand_q = torch.randn(count, HEADS, reading.head_dim, generator=gen, dtype=torch.float64)
    rand_k = torch.randn(count, HEADS, reading.head_dim, generator=gen, dtype=torch.float64)
    torch_dtype = DTYPES[dtype]
    pos = torch.tensor(positions + positions, dtype=torch.int64)
    q = torch.cat((probe, rand_q)).to(torch_dtype)
    k = torch.cat((probe, rand_k)).to(torch_dtype)
    return Call(group, dtype, pos, q, k, count)


def call_adapter(
    adapter: Callable[..., Any], config: Dict[str, Any], call: Call
) -> Tuple[torch.Tensor, torch.Tensor, float]:
    """The adapter's ``(q_rot, k_rot, softmax_scale)`` for a call, checked against the protocol.

    Raises:
        AdapterError: one line saying what the adapter did (raised, wrong type, shape, dtype, NaN).
    """
    q, k = call.q.clone(), call.k.clone()
    try:
        result = adapter(dict(config), q, k, call.positions.clone())
    except Exception as exc:  # the adapter's own failure, reported as one line
        text = " ".join(str(exc).split())
        raise AdapterError(f"the adapter raised {type(exc).__name__}: {text[:300]}") from None
    if not isinstance(result, (tuple, list)) or len(result) not in (2, 3):
        raise AdapterError(
            f"the adapter returned {type(result).__name__}; expected (q_rot, k_rot) or (q_rot, k_rot, softmax_scale)"
        )
    scale = 1.0
    if len(result) == 3:
        scale = _scale(result[2])
    outs = []
    for name, got, given in (("q_rot", result[0], call.q), ("k_rot", result[1], call.k)):
        if not isinstance(got, torch.Tensor):
            raise AdapterError(f"the adapter returned {type(got).__name__} for {name}; expected a tensor")
        if tuple(got.shape) != tuple(given.shape):
            raise AdapterError(
                f"the adapter returned {name} of shape {tuple(got.shape)} for q, k of shape {tuple(given.shape)}"
            )
        if got.dtype != given.dtype:
            raise AdapterError(
                f"the adapter returned {name} in {str(got.dtype).replace('torch.', '')} for "
                f"{str(given.dtype).replace('torch.', '')} inputs"
            )
        bad = ~torch.isfinite(got.detach())
        if bool(bad.any()):
            index = tuple(int(i) for i in bad.nonzero()[0])
            raise AdapterError(
                f"the adapter returned a non-finite {name} (first at index {index}, position "
                f"{int(call.positions[index[0]])})"
            )
        outs.append(got.detach().to("cpu", torch.float64))
    return outs[0], outs[1], scale


def _scale(value: Any) -> float:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise AdapterError(f"the adapter returned softmax_scale {value!r}; expected a finite number > 0")
    return float(value)


@dataclass
class Expected:
    """The reference's answer to one call: rotated rows (float64), its score multiplier and frequencies."""

    q: torch.Tensor
    k: torch.Tensor
    scale: float
    inv_freq: torch.Tensor


def expected(reading: Reading, calls: Sequence[Call]) -> List[Expected]:
    """The reference's answer to every call, in call order (a length-dependent reading sees the
    lengths of the calls before, as an engine's cache does)."""
    history = LengthHistory()
    out = []
    for call in calls:
        seq_len = history.length_for(reading, call.positions)
        cos, sin = exact_tables(reading, call.positions, seq_len)
        out.append(
            Expected(
                rotate_exact(reading, call.q, cos, sin),
                rotate_exact(reading, call.k, cos, sin),
                reading.softmax_multiplier,
                reading.frequencies(seq_len),
            )
        )
    return out


@dataclass
class Measure:
    """One check of one call: the largest error, the noise and allowance it is held to, the verdict."""

    error: float
    noise: float
    allowance: float
    status: str


def _verdict(error: torch.Tensor, noise: float, allowance: torch.Tensor) -> Measure:
    error = error.to(torch.float64)
    allowance = torch.broadcast_to(allowance.to(torch.float64), error.shape)
    wrong = bool((error > noise + allowance).any())
    status = "wrong" if wrong else ("precision" if bool((error > noise).any()) else "ok")
    return Measure(float(error.max()), noise, float(allowance.max()), status)


def _pairs(x: torch.Tensor, reading: Reading) -> Tuple[torch.Tensor, torch.Tensor]:
    part = x[..., reading.start : reading.start + reading.rotary_dim]
    half = reading.rotary_dim // 2
    if reading.layout == "half":
        return part[..., :half], part[..., half:]
    return part[..., 0::2], part[..., 1::2]


def measure(call: Call, truth: Reading, exact: Expected, against: Expected) -> Dict[str, Measure]:
    """The five checks of one call's engine output against ``against`` (the exact answer, or a
    misreading's), with the noise of the call's dtype and the allowance of the exact angles."""
    if call.out is None:
        raise ValueError("the call has no engine output")
    eq, ek, escale = call.out
    p = call.probes
    eps = float(torch.finfo(DTYPES[call.dtype]).eps)
    noise = NOISE * eps
    # the allowance follows the frequencies the compared answer turns each probed pair by (their
    # largest where a misreading pairs the features otherwise)
    pairs = truth.rotary_dim // 2
    freqs = against.inv_freq if against.inv_freq.numel() == pairs else against.inv_freq.max().expand(pairs)
    freqs = torch.maximum(freqs, exact.inv_freq)
    angle_span = call.positions[:p].to(torch.float64).abs()[:, None, None] * freqs  # (P, 1, r/2)
    allow = PRECISION * EPS32 * (1.0 + angle_span)
    ea, eb = _pairs(eq[:p], truth)
    ra, rb = _pairs(against.q[:p], truth)
    diff = torch.remainder(torch.atan2(eb, ea) - torch.atan2(rb, ra) + math.pi, 2 * math.pi) - math.pi
    out = {"angle": _verdict(diff.abs(), noise, allow)}

    def multiplier(q: torch.Tensor, k: torch.Tensor, scale: float) -> float:
        qa, qb = _pairs(q[:p], truth)
        ka, kb = _pairs(k[:p], truth)
        return scale * float(torch.hypot(qa, qb).mean()) * float(torch.hypot(ka, kb).mean())

    widest = float(allow.max())
    ratio = multiplier(eq, ek, escale) / multiplier(against.q, against.k, against.scale)
    # a pair read in another pairing than the engine's mixes its angle into its length: the angle's
    # allowance holds for the factor too
    out["factor"] = _verdict(torch.tensor(abs(ratio - 1.0)), noise, torch.tensor(widest))
    for name, got, want in (("q", eq[p:], against.q[p:]), ("k", ek[p:], against.k[p:])):
        c = float((got * want).sum() / (want * want).sum())
        err = (got - c * want).abs().max() / want.abs().max()
        out[name] = _verdict(err, noise, torch.tensor(widest))
    got_s = scores(eq[p:], ek[p:], escale)
    want_s = scores(against.q[p:], against.k[p:], against.scale)
    err = (got_s - want_s).abs().max() / want_s.abs().max()
    out["score"] = _verdict(err, noise * math.sqrt(truth.head_dim), torch.tensor(2 * widest))
    return out


def _fingerprint(answers: Sequence[Expected]) -> torch.Tensor:
    return torch.cat([torch.cat((a.q.flatten(), a.k.flatten())) * math.sqrt(a.scale) for a in answers])


def name_causes(facts: ConfigFacts, truth: Reading, calls: Sequence[Call], exact: Sequence[Expected]) -> List[str]:
    """The misreadings the engine's answers match within noise and allowance (see the module notes);
    misreadings that give this config's exact answer, or another misreading's, are left out."""
    seen = [_fingerprint(exact)]
    matched = []
    for hypothesis in hypotheses(facts, truth):
        try:
            answers = expected(hypothesis.reading, calls)
        except (ValueError, ZeroDivisionError, OverflowError):
            continue  # a misreading the scaling's function cannot compute
        fingerprint = _fingerprint(answers)
        if not bool(torch.isfinite(fingerprint).all()):
            continue
        if any(torch.allclose(fingerprint, other, rtol=0, atol=1e-9 * float(other.abs().max())) for other in seen):
            continue
        seen.append(fingerprint)
        fits = all(
            m.status != "wrong"
            for call, answer, ex in zip(calls, answers, exact)
            for m in measure(call, truth, ex, answer).values()
        )
        if fits:
            matched.append(hypothesis.cause)
    return matched


@dataclass
class CheckResult:
    """One row of the table: a check of one group of positions in one dtype."""

    check: str
    dtype: str
    group: str
    positions: List[int]
    error: float
    unit: str
    noise: float
    allowance: float
    status: str


@dataclass
class ConfigResult:
    """What conform found for one config."""

    config: str
    source: str
    status: str  # ok, precision, wrong, unsupported, error
    rope_type: Optional[str] = None
    layout: Optional[str] = None
    head_dim: Optional[int] = None
    rotary_dim: Optional[int] = None
    message: Optional[str] = None
    causes: List[str] = field(default_factory=list)
    checks: List[CheckResult] = field(default_factory=list)
    #: groups not called, each with why (past the adapter's ``max_position``)
    skipped: List[str] = field(default_factory=list)


def _supported(adapter: Callable[..., Any], config: Dict[str, Any]) -> Optional[str]:
    """``None`` when the adapter supports the config, else its reason (see the adapter protocol)."""
    supports = getattr(adapter, "supports", None)
    if supports is None:
        return None
    try:
        answer = supports(dict(config))
    except Exception as exc:  # the adapter's own failure
        raise AdapterError(
            f"the adapter's supports() raised {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        ) from None
    if answer is True:
        return None
    if answer is False or answer is None:
        return "the adapter does not support this config"
    return str(answer)


def _position_limit(adapter: Callable[..., Any], config: Dict[str, Any]) -> Optional[int]:
    """The adapter's ``max_position(config)`` (the largest position its engine can rotate), or ``None``."""
    max_position = getattr(adapter, "max_position", None)
    if max_position is None:
        return None
    try:
        value = max_position(dict(config))
    except Exception as exc:  # the adapter's own failure
        text = " ".join(str(exc).split())[:300]
        raise AdapterError(f"the adapter's max_position() raised {type(exc).__name__}: {text}") from None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise AdapterError(f"the adapter's max_position() returned {value!r}; expected None or an integer >= 0")
    return value


def check_config(
    adapter: Callable[..., Any],
    name: str,
    source: str,
    config: Dict[str, Any],
    dtypes: Sequence[str] = ("float32", "float64"),
) -> ConfigResult:
    """Every check of one config (see the module notes); never raises for the adapter's or the
    config's faults: they become the result's ``error`` status and one-line message."""
    try:
        truth, facts = read_config(config)
    except (ValueError, TypeError, KeyError) as exc:
        return ConfigResult(
            name, source, "error", message=f"conform cannot read this config: {' '.join(str(exc).split())}"
        )
    result = ConfigResult(name, source, "ok", facts.rope_type, truth.layout, truth.head_dim, truth.rotary_dim)
    try:
        reason = _supported(adapter, config)
        if reason is not None:
            result.status, result.message = "unsupported", reason
            return result
        groups = list(enumerate(position_groups(facts)))
        limit = _position_limit(adapter, config)
        if limit is not None:
            result.skipped = [
                f"{group}: positions up to {max(ps)} are past the adapter's max_position {limit}"
                for _, (group, ps) in groups
                if max(ps) > limit
            ]
            groups = [(i, (group, ps)) for i, (group, ps) in groups if max(ps) <= limit]
            if not groups:
                raise AdapterError(f"the adapter's max_position {limit} leaves no group of positions to check")
        calls = [
            make_call(truth, group, positions, dtype, seed=i) for dtype in dtypes for i, (group, positions) in groups
        ]
        for call in calls:
            call.out = call_adapter(adapter, config, call)
    except AdapterError as exc:
        result.status, result.message = "error", str(exc)
        return result
    exact = expected(truth, calls)
    for call, answer in zip(calls, exact):
        positions = [int(p) for p in call.positions[: call.probes]]
        for check, m in measure(call, truth, answer, answer).items():
            result.checks.append(
                CheckResult(
                    check, call.dtype, call.group, positions, m.error, UNITS[check], m.noise, m.allowance, m.status
                )
            )
    statuses = {c.status for c in result.checks}
    result.status = "wrong" if "wrong" in statuses else ("precision" if "precision" in statuses else "ok")
    if result.status == "wrong":
        result.causes = name_causes(facts, truth, calls, exact) or [
            "unidentified: no single misreading conform knows matches"
        ]
    return result
