"""``posenc eval --search TYPE``: tune a scaling's parameters for a loaded model without training.

The objective is the bits per byte of the model at one **target length** ``T`` on **search windows**:
``--search-windows`` windows of ``T`` target tokens, each read once from position 0, placed in the
text *between* the report's windows (:func:`search_window_ends`), so the numbers the report shows for
the best configuration are measured on tokens the search never saw.

What is searched comes from the scaling registry, not from a list here:

* a type whose descriptor offers numeric parameters (its ``parameters``: YaRN's ``factor``,
  ``beta_fast``, ``beta_slow``; Llama 3's ``factor``, ``low_freq_factor``, ``high_freq_factor``; the
  ``factor`` of linear, NTK-aware and dynamic NTK) is tuned by a **compass search** over those
  parameters inside their ranges (``minimum``, ``maximum``, moves in multiples of ``step``): from the
  type's lab default at ``T`` (``factor = T / L0``), each parameter in turn is moved up and down by a
  step size; a move that lowers the objective is kept; a sweep without one halves the step sizes,
  down to the parameter's ``step``;
* a type whose config holds one factor per rotary pair (``long_factor``: LongRoPE) is tuned by the
  **evolutionary search** of LongRoPE (Ding et al. 2024, section 3.2): a first population of the
  per-pair factors that position interpolation, NTK-aware scaling and YaRN amount to at ``T``
  (``f_i = theta_i / theta_i'`` from each one's frequencies), then generations of mutated children
  kept monotone (``f_i`` never falls as the wavelength grows) and inside ``[1, 1.25 s]``
  (``s = T / L0``), the best half of each generation surviving. ``short_factor`` stays 1 (the model
  as trained up to ``L0``).

The **default** a search is compared with is its starting point: the lab default for a type with
parameters, uniform factors ``s`` (position interpolation written as LongRoPE) for LongRoPE. It is
evaluated first and only a configuration with a lower objective replaces it, so the best found is
never worse than the default *on the search windows*; whether it is better on the report's windows is
what the report measures. Every evaluation is saved to ``search.json`` as it finishes; the search is
deterministic given ``--seed``, so running the same command again replays the saved evaluations and
goes on from where it stopped.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from ...rope.registry import REGISTRY, config_fields, resolve_name
from ...runs.extension import extension_config
from .files import MAX_NATS_PER_TOKEN, EvalError, read_stamped, settings_changed, stamp, write_json
from .scalings import ScalingSpec, SpecError

#: Bound of LongRoPE's search space: each factor in ``[1, LONGROPE_MAX_STRETCH * s]`` (the paper's).
LONGROPE_MAX_STRETCH = 1.25
#: Per-pair factor field of the types searched per pair.
PER_PAIR_FIELD = "long_factor"


@dataclass(frozen=True)
class Candidate:
    """One configuration the search evaluates: the explicit config fields of a scaling spec."""

    params: Dict[str, Any]

    def key(self) -> str:
        """A canonical text of the parameters (floats rounded to 9 significant digits)."""
        return json.dumps({k: _rounded(v) for k, v in sorted(self.params.items())}, sort_keys=True)


def _rounded(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    if isinstance(value, float):
        return float(f"{value:.9g}")
    return value


def searchable() -> List[str]:
    """The registered types ``--search`` can tune: those with numeric parameters or per-pair factors."""
    out = []
    for name, d in REGISTRY.items():
        names = {f.name for f in config_fields(d.config_class)}
        if d.parameters or PER_PAIR_FIELD in names:
            out.append(name)
    return out


def search_type(text: str) -> str:
    """The registered type ``--search`` names, or :class:`SpecError` listing those it can tune."""
    try:
        name = resolve_name(text.strip())
    except ValueError:
        name = None
    if name not in searchable():
        raise SpecError(f"--search {text!r}: choose one of {', '.join(searchable())}")
    return name


def search_window_ends(n_tokens: int, report_ends: np.ndarray, span: int, target: int, count: int) -> np.ndarray:
    """End offsets (exclusive) of ``count`` windows of ``target + 1`` tokens, none overlapping a report
    window (``[end - span - 1, end)`` for each report end), spread evenly over the free text."""
    taken = sorted((int(e) - span - 1, int(e)) for e in report_ends)
    free, start = [], 0
    for lo, hi in taken:
        if lo > start:
            free.append((start, lo))
        start = max(start, hi)
    if start < n_tokens:
        free.append((start, n_tokens))
    slots: List[int] = []  # every possible end, gap by gap, in windows of target + 1 tokens
    for lo, hi in free:
        fits = (hi - lo) // (target + 1)
        slots += [lo + (j + 1) * (target + 1) for j in range(fits)]
    if len(slots) < count:
        raise ValueError(
            f"the text leaves room for {len(slots)} search windows of {target + 1} tokens beside the report's "
            f"windows, fewer than --search-windows {count}; give a longer --text, fewer windows or a shorter "
            "--search-length"
        )
    pick = np.linspace(0, len(slots) - 1, count).round().astype(int)
    return np.asarray([slots[i] for i in pick], dtype=np.int64)


# -- starting points --------------------------------------------------------------------------------------
def _parameters(name: str):
    return REGISTRY[name].parameters


def default_candidate(name: str, target: int, trained: int, rotary_dim: int, base: float) -> Candidate:
    """The starting point and the comparison: the lab default at ``target`` (uniform LongRoPE factors)."""
    d = REGISTRY[name]
    if name in _per_pair_types():
        s = max(1.0, target / trained)
        return _longrope(name, [s] * (rotary_dim // 2), target, trained)
    params: Dict[str, Any] = {}
    config = extension_config(d, target, trained) if d.extension is not None else None
    for p in _parameters(name):
        value = getattr(config, p.name) if config is not None else p.default
        params[p.name] = float(min(p.maximum, max(p.minimum, value)))
    return Candidate(params)


def _per_pair_types() -> List[str]:
    return [n for n in REGISTRY if PER_PAIR_FIELD in {f.name for f in config_fields(REGISTRY[n].config_class)}]


def _longrope(name: str, factors: Sequence[float], target: int, trained: int) -> Candidate:
    s = max(1.0, target / trained)
    names = {f.name for f in config_fields(REGISTRY[name].config_class)}
    params: Dict[str, Any] = {PER_PAIR_FIELD: [float(f) for f in factors]}
    if "short_factor" in names:
        params["short_factor"] = [1.0] * len(factors)
    if "original_max_position_embeddings" in names:
        params["original_max_position_embeddings"] = trained
    if "factor" in names:
        params["factor"] = s
    return Candidate(params)


def per_pair_seeds(name: str, target: int, trained: int, rotary_dim: int, base: float) -> List[Candidate]:
    """LongRoPE's first population: the per-pair factors ``theta_i / theta_i'`` of every registered type
    with a lab default and length-free frequencies at ``target``, made monotone and bounded."""
    import torch

    from ...rope import rope_frequencies

    plain, _ = rope_frequencies(None, rotary_dim, base)
    s = max(1.0, target / trained)
    out = [default_candidate(name, target, trained, rotary_dim, base)]
    for d in REGISTRY.values():
        if d.extension is None or d.length_dependent:
            continue
        inv, _ = rope_frequencies(extension_config(d, target, trained), rotary_dim, base)
        factors = (plain / inv).to(torch.float64).tolist()
        out.append(_longrope(name, _project(factors, s), target, trained))
    unique: Dict[str, Candidate] = {}
    for c in out:
        unique.setdefault(c.key(), c)
    return list(unique.values())


def _project(factors: Sequence[float], s: float) -> List[float]:
    """Bounded in ``[1, 1.25 s]`` and non-decreasing from the fastest pair to the slowest."""
    top = LONGROPE_MAX_STRETCH * s
    out, low = [], 1.0
    for f in factors:
        value = min(top, max(low, float(f)))
        out.append(value)
        low = value
    return out


# -- the search -------------------------------------------------------------------------------------------
Objective = Callable[[Candidate], Optional[float]]


def compass_search(name: str, start: Candidate, objective: Objective, budget: int) -> None:
    """Coordinate (compass) search over the descriptor's parameters from ``start``; see the module docstring.

    ``objective`` returns ``None`` for an invalid configuration (not counted); the caller counts the
    evaluations and stops the search by raising :class:`Budget`.
    """
    params = _parameters(name)
    if not params:
        return
    best = start
    best_value = objective(best)
    if best_value is None:
        raise SpecError(f"--search {name}: its default configuration is not valid for this model")
    steps = {p.name: max(p.step, _on_grid((p.maximum - p.minimum) / 8, p.step)) for p in params}
    while True:
        improved = False
        for p in params:
            for sign in (1, -1):
                value = min(p.maximum, max(p.minimum, best.params[p.name] + sign * steps[p.name]))
                if value == best.params[p.name]:
                    continue
                trial = Candidate({**best.params, p.name: value})
                got = objective(trial)
                if got is not None and got < best_value:
                    best, best_value, improved = trial, got, True
                    break
        if not improved:
            if all(steps[p.name] <= p.step for p in params):
                return
            steps = {p.name: max(p.step, _on_grid(steps[p.name] / 2, p.step)) for p in params}


def _on_grid(value: float, step: float) -> float:
    return max(step, round(value / step) * step)


def evolutionary_search(
    name: str, seeds: List[Candidate], objective: Objective, *, target: int, trained: int, rng: np.random.Generator
) -> None:
    """LongRoPE's evolutionary search over per-pair factors; runs until :class:`Budget` is raised."""
    s = max(1.0, target / trained)
    scored = [(v, c) for c in seeds if (v := objective(c)) is not None]
    if not scored:
        raise SpecError(f"--search {name}: no starting configuration is valid for this model")
    size = max(4, len(scored))
    while True:
        scored.sort(key=lambda vc: vc[0])
        parents = [c for _, c in scored[: max(2, size // 2)]]
        children = []
        for _ in range(size):
            a = np.asarray(parents[rng.integers(len(parents))].params[PER_PAIR_FIELD])
            if rng.random() < 0.3 and len(parents) > 1:  # crossover: each pair from one of two parents
                b = np.asarray(parents[rng.integers(len(parents))].params[PER_PAIR_FIELD])
                a = np.where(rng.random(a.size) < 0.5, a, b)
            mask = rng.random(a.size) < max(1.0 / a.size, 0.3)
            child = a * np.exp(np.where(mask, rng.normal(0.0, 0.15, a.size), 0.0))
            children.append(_longrope(name, _project(child.tolist(), s), target, trained))
        known = {c.key() for _, c in scored}
        fresh = [c for c in children if c.key() not in known]
        if not fresh:  # the population has collapsed onto points already measured
            return
        for c in fresh:
            v = objective(c)
            if v is not None and c.key() not in known:
                scored.append((v, c))
                known.add(c.key())
        scored.sort(key=lambda vc: vc[0])
        scored = scored[:size]


class Budget(Exception):
    """Raised by the objective when the evaluation budget is spent."""


# -- running it on a model --------------------------------------------------------------------------------
def search_spec(name: str, candidate: Candidate, label: str) -> ScalingSpec:
    """A fixed spec (no fitting) holding ``candidate``'s parameters."""
    return ScalingSpec(label, name, dict(candidate.params), fit=False)


def describe(candidate: Candidate) -> Dict[str, Any]:
    """Parameters for a report: per-pair factors as a list, other numbers as they are."""
    return {k: (list(v) if isinstance(v, (list, tuple)) else v) for k, v in candidate.params.items()}


def short(candidate: Candidate) -> str:
    """One line: ``factor=4, beta_fast=24`` or the per-pair factors' range."""
    parts = []
    for k, v in candidate.params.items():
        if k in ("original_max_position_embeddings", "short_factor"):
            continue
        if isinstance(v, (list, tuple)):
            parts.append(f"{k} {min(v):.3g}..{max(v):.3g} over {len(v)} pairs")
        else:
            parts.append(f"{k}={v:g}")
    return ", ".join(parts)


def run_search(
    *,
    name: str,
    evaluate: Callable[[ScalingSpec], np.ndarray],
    target: int,
    trained: int,
    rotary_dim: int,
    base: float,
    budget: int,
    seed: int,
    window_bytes: np.ndarray,
    store: Path,
    settings: Dict[str, Any],
    fresh: bool,
    on_evaluation: Optional[Callable[[int, int], None]] = None,
) -> Dict[str, Any]:
    """Search ``name``'s parameters; ``evaluate(spec)`` gives the nats of each search window (W,).

    Returns the search's record (``default``, ``best``, ``evaluations``); see the module docstring.
    Evaluations are stored in ``store`` as they finish and replayed from it.
    """
    saved = _saved_evaluations(store, settings, fresh)
    history: List[Dict[str, Any]] = []
    order: Dict[str, Any] = {}
    descriptor = REGISTRY[name]

    def objective(candidate: Candidate) -> Optional[float]:
        key = candidate.key()
        if key in order:
            return order[key]["bpb"]
        spec = search_spec(name, candidate, "search")
        try:
            from .scalings import scaled_config

            descriptor.validate(scaled_config(spec, target, trained), rotary_dim)
        except (ValueError, TypeError):
            return None
        if len(order) >= budget:
            raise Budget
        if key in saved:
            nats = np.asarray(saved[key]["nats"], dtype=np.float64)
        else:
            nats = np.asarray(evaluate(spec), dtype=np.float64)
            saved[key] = {"params": describe(candidate), "nats": [float(v) for v in nats]}
            write_json(store, stamp("search", {"settings": settings, "evaluations": saved}))
        bpb = bits_per_byte(nats, window_bytes)
        order[key] = {"candidate": candidate, "bpb": bpb, "nats": nats}
        history.append({"params": describe(candidate), "bpb": bpb})
        if on_evaluation is not None:
            on_evaluation(len(order), budget)
        return bpb

    start = default_candidate(name, target, trained, rotary_dim, base)
    try:
        if name in _per_pair_types():
            seeds = per_pair_seeds(name, target, trained, rotary_dim, base)
            rng = np.random.default_rng([seed, target, 7919])
            evolutionary_search(name, seeds, objective, target=target, trained=trained, rng=rng)
        else:
            compass_search(name, start, objective, budget)
    except Budget:
        pass
    if start.key() not in order:
        raise SpecError(f"--search {name}: its default configuration is not valid for this model")
    return _record(name, target, budget, order, start.key(), history)


def _saved_evaluations(store: Path, settings: Dict[str, Any], fresh: bool) -> Dict[str, Any]:
    """The evaluations ``store`` holds for these ``settings`` (none when absent or ``fresh``); a file of
    other settings or not a search file is :class:`EvalError`."""
    if not store.exists() or fresh:
        return {}
    data = read_stamped(store, "search", "add --fresh to start over")
    changed = settings_changed(data.get("settings"), settings)
    if changed:
        raise EvalError(
            f"{store} holds a search with other settings ({', '.join(changed)}); choose another --out or add --fresh"
        )
    saved = data.get("evaluations")
    if not isinstance(saved, dict):
        raise EvalError(f"{store}: 'evaluations' is not a mapping; add --fresh to start over")
    windows, most = settings["windows"], MAX_NATS_PER_TOKEN * settings["target_length"]
    for key, entry in saved.items():
        nats = entry.get("nats") if isinstance(entry, dict) else None
        if (
            not isinstance(nats, list)
            or len(nats) != windows
            # NaN compares False; an int of any size compares exactly (math.isfinite raised on 400 digits)
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= most for v in nats)
        ):
            raise EvalError(
                f"{store}: evaluation {str(key)[:80]!r} needs nats as {windows} finite numbers (one per search "
                f"window) from 0 to {MAX_NATS_PER_TOKEN:g} per token scored; add --fresh to start over"
            )
    return saved


def bits_per_byte(nats: np.ndarray, window_bytes: np.ndarray) -> float:
    """Bits per byte of windows scored together: their total bits over their total bytes (the standard
    definition, lm-evaluation-harness's ``bits_per_byte``), not the mean of each window's ratio."""
    return float(np.sum(nats) / math.log(2.0) / np.sum(window_bytes))


def _record(
    name: str, target: int, budget: int, order: Dict[str, Any], start_key: str, history: List[Dict[str, Any]]
) -> Dict[str, Any]:
    """The search's record from its evaluations in ``order`` (key -> candidate, bpb, nats)."""
    best_key = min(order, key=lambda k: order[k]["bpb"])
    default, best = order[start_key], order[best_key]
    return {
        "type": name,
        "target_length": target,
        "budget": budget,
        "evaluations": len(order),
        "default": {"params": describe(default["candidate"]), "candidate": default["candidate"]},
        "best": {"params": describe(best["candidate"]), "candidate": best["candidate"]},
        "default_nats": default["nats"],
        "best_nats": best["nats"],
        "history": history,
        "parameters": [dataclasses.asdict(p) for p in _parameters(name)],
    }
