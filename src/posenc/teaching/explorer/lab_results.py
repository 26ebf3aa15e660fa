"""Reading a ``posenc lab`` run folder for the lab results view.

The file's shape is defined once, in :mod:`posenc.runs.lab_schema` (the lab writes it with the same
module): ``results.json`` carries a schema stamp, per-scheme bits per byte with 95% intervals, passkey
retrieval per distance bin, the context-extension results, the learning-rate sweep and the interval
verdicts. This module turns it into the page's JSON.

A run may be unfinished, so nothing here trusts the file: every missing or malformed entry is
dropped and described in ``notes``, numbers that are not finite become ``None``, and long loss curves
are averaged into at most :data:`MAX_CURVE_POINTS` buckets so the page stays responsive. A file from
an older posenc (run-file version 1, before the stamp) is shown as far as it can be read, with a note
saying so; a file from a newer posenc is not read, and the page says to upgrade. The folder is fixed
when the server starts; no request can name another path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ...runs.lab_schema import (
    MACHINERY_CHECK,
    RETRIEVAL_BINS,
    SCHEMA_VERSION,
    SUMMARIES_DIR,
    EvalEntry,
    Results,
    RunFileError,
    load_json_file,
    machinery_check_reason,
    read_json_limited,
    version_of,
)
from ...runs.lab_schema import VERDICTS as VERDICT_NAMES

RESULTS_FILE = "results.json"
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_CURVE_POINTS = 512
MAX_ENTRIES = 64  # schemes, lengths or methods kept from one file
EVAL_KEYS = ("bpb", "bpb_last_quarter", "bpb_final32")
#: What to do about a results file the view cannot use.
ADVICE = "rerun the lab (`posenc lab --resume RUN` rewrites results.json when the run is recorded)"


def bucket_curve(
    values: List[Optional[float]], points: int = MAX_CURVE_POINTS
) -> Tuple[List[float], List[Optional[float]]]:
    """``(positions, losses)``: the curve itself, or the means of ``points`` equal buckets (at their
    centres) if it is longer than that."""
    n = len(values)
    if n <= points:
        return [float(i) for i in range(n)], values
    positions, means = [], []
    for b in range(points):
        lo, hi = b * n // points, (b + 1) * n // points
        finite = [v for v in values[lo:hi] if v is not None]
        positions.append((lo + hi - 1) / 2)
        means.append(sum(finite) / len(finite) if finite else None)
    return positions, means


def _interval(value) -> Optional[List[Optional[float]]]:
    """``[lo, hi]`` of a stored interval when it is a list of two numbers, else None."""
    if not isinstance(value, list) or len(value) != 2:
        return None
    return [_number(value[0]), _number(value[1])]


def _pair(value) -> Optional[List[Optional[float]]]:
    return [value[0], value[1]] if value is not None else None


def _retrieval(entry: Optional[EvalEntry]) -> Dict[str, dict]:
    if entry is None:
        return {}
    return {
        name: {
            "accuracy": cell.accuracy,
            "accuracy_ci": _pair(cell.accuracy_ci),
            "logp_bits": cell.logp_bits,
            "logp_bits_ci": _pair(cell.logp_bits_ci),
            "trials": cell.trials,
            "distance": _pair(cell.distance),
        }
        for name, cell in entry.retrieval.items()
        if name in RETRIEVAL_BINS
    }


def _row(entry: EvalEntry) -> dict:
    row = {name: getattr(entry, name) for name in EVAL_KEYS}
    row["bpb_ci"] = _pair(entry.bpb_ci)
    row["cannot"] = entry.cannot
    row["note"] = entry.note
    row["retrieval"] = _retrieval(entry)
    row["finetuned_bpb"] = entry.finetuned.bpb if entry.finetuned is not None else None
    row["finetuned_bpb_ci"] = _pair(entry.finetuned.bpb_ci) if entry.finetuned is not None else None
    row["finetuned_retrieval"] = _retrieval(entry.finetuned)
    return row


def read_lab_results(run_dir: Optional[Path], points: int = MAX_CURVE_POINTS) -> dict:
    """The lab results of ``run_dir`` in the page's shape, or why there are none.

    ``points`` (1 .. :data:`MAX_CURVE_POINTS`) bounds each loss curve; fewer points average more
    positions together, which smooths a noisy curve.

    Returns a dict with ``available`` (bool), ``notes`` (what was missing or malformed) and, when
    available, ``run`` (the folder's name), ``machinery_check`` and ``stamp`` (a smoke run: its
    numbers carry no meaning), ``train_len``, ``eval_lengths``, ``config``, ``schemes``
    (``{name: {"eval": {length: row}, "loss_by_position": {length: curve}, "train": {...}}}``),
    ``extension`` (``{method: {length: row}}``), ``lr_sweep`` and ``verdicts``. A row holds the bits
    per byte, ``retrieval`` (``{bin: {"accuracy", "accuracy_ci", "logp_bits", ...}}``) and the
    fine-tuned numbers where run.
    """
    if isinstance(points, bool) or not isinstance(points, int) or not 1 <= points <= MAX_CURVE_POINTS:
        raise ValueError(f"points must be an integer in 1..{MAX_CURVE_POINTS}, got {points!r}")
    if run_dir is None:
        return _shipped_summaries()
    run = Path(run_dir).name
    path = Path(run_dir) / RESULTS_FILE
    if not path.is_file():
        return {
            "available": False,
            "run": run,
            "notes": [f"{RESULTS_FILE} not found in the lab run folder {run!r} (the run may still be training)"],
        }
    data, notes = _read_results(path, run)
    if data is None:
        return {"available": False, "run": run, "notes": notes}
    results, parse_notes = Results.parse(data, MAX_ENTRIES)
    notes += parse_notes
    schemes = {
        name: {
            "eval": {k: _row(e) for k, e in s.eval.items()},
            "loss_by_position": _curves(s.loss_by_position, points),
            "train": _plain(s.train),
        }
        for name, s in results.schemes.items()
    }
    extension = {method: {k: _row(e) for k, e in per_len.items()} for method, per_len in results.extension.items()}
    # Stamped by the run's size (steps, windows, trials), whatever its preset is called.
    machinery = results.machinery_check or machinery_check_reason(results.config) is not None
    return {
        "available": bool(schemes),
        "run": run,
        "train_len": results.train_len,
        "eval_lengths": results.eval_lengths,
        "config": _plain(results.config),
        "machinery_check": machinery,
        "stamp": MACHINERY_CHECK if machinery else None,
        "schemes": schemes,
        "extension": extension,
        "complete": results.complete,
        "lr_sweep": _plain(results.lr_sweep),
        "verdicts": [_verdict(v) for v in results.verdicts],
        "notes": notes,
    }


def _shipped_summaries() -> dict:
    """No run given: the run summaries that ship with posenc, and how to show a run of one's own."""
    summaries, summary_notes = committed_summaries()
    return {
        "available": False,
        "summaries": summaries,
        "notes": [
            "no lab run given: showing the run summaries that ship with posenc"
            if summaries
            else "no lab run given and no run summary ships with this posenc",
            "start the console with `posenc explore --lab-run RUN_DIR` to see a run of your own",
        ]
        + summary_notes,
    }


def _read_results(path: Path, run: str) -> Tuple[Optional[Any], List[str]]:
    """The parsed results file and notes about it; ``None`` (with the reason as the note) when unreadable.

    A file written before run files were versioned (version 1) is shown as far as it can be read.
    """
    try:
        return load_json_file(path, "results", ADVICE, max_bytes=MAX_FILE_BYTES), []
    except RunFileError as err:
        raw = _peek(path)
        if version_of(raw) != 1:
            return None, [f"{RESULTS_FILE} could not be read: {err.problem}; {err.advice.replace('RUN', run)}"]
        note = (
            f"{RESULTS_FILE} was written by an older posenc (run-file version 1; this "
            f"version writes {SCHEMA_VERSION}): shown as far as it can be read, without "
            f"retrieval or interval verdicts; {ADVICE.replace('RUN', run)}"
        )
        return raw, [note]


def _number(value) -> Optional[float]:
    """A finite number, else ``None`` (shown as "not measured")."""
    import math

    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def summary_view(summary: dict) -> dict:
    """A committed run summary (:mod:`posenc.measuring.lab.summary`) in the page's shape: per model and length
    the bits per byte of every seed with their mean and standard deviation, exact matches ``[k, n]``
    per seed and distance bin, and the verdicts per seed and across seeds. Anything missing or not
    finite is ``None``: not measured."""
    import statistics

    seeds = [str(s) for s in summary.get("seeds") or []][:MAX_ENTRIES]
    numbers = summary.get("numbers") or {}
    models: Dict[str, Dict[str, dict]] = {}
    for seed in seeds:
        per = numbers.get(seed) or {}
        for model, cells in list(per.items())[:MAX_ENTRIES]:
            for length, cell in list((cells or {}).items())[:MAX_ENTRIES]:
                row = models.setdefault(str(model)[:60], {}).setdefault(
                    str(length), {"bpb": {}, "cannot": False, "retrieval": {}}
                )
                if not isinstance(cell, dict):
                    continue
                row["cannot"] = row["cannot"] or bool(cell.get("cannot"))
                row["bpb"][seed] = _number(cell.get("bpb"))
                for b in RETRIEVAL_BINS:
                    kn = cell.get(b)
                    if isinstance(kn, list) and len(kn) == 2 and all(_number(v) is not None for v in kn):
                        row["retrieval"].setdefault(b, {})[seed] = [int(kn[0]), int(kn[1])]
    for per_len in models.values():
        for row in per_len.values():
            values = [v for v in row["bpb"].values() if v is not None]
            row["bpb_mean"] = statistics.fmean(values) if values else None
            row["bpb_sd"] = statistics.stdev(values) if len(values) > 1 else None
            row["bpb_seeds"] = len(values)
    verdicts = []
    for v in (summary.get("verdicts") or [])[:256]:
        if not isinstance(v, dict):
            continue
        verdicts.append(
            {
                "claim": str(v.get("claim", ""))[:300],
                "verdict": v.get("verdict") if v.get("verdict") in VERDICT_NAMES else "not measured",
                "by_seed": {str(k): str(x) for k, x in (v.get("by_seed") or {}).items()},
                "evidence": str(v.get("evidence", ""))[:600],
                "expected": v.get("expected"),
                "group": v.get("group"),
                "scheme": v.get("scheme"),
                "effect_mean": _number(v.get("effect_mean")),
                "effect_sd": _number(v.get("effect_sd")),
                # The p beside an adjusted verdict is the adjusted one (Holm over the claims);
                # summaries written before it was kept show their raw p under the same name.
                "p": _number(v.get("p_holm", v.get("p"))),
                "p_raw": _number(v.get("p")),
                "effect_ci": _interval(v.get("effect_ci")),
                "one_seed": v.get("one_seed") is True,
            }
        )
    machinery = bool(summary.get("machinery_check"))
    return {
        "name": str(summary.get("name", ""))[:100],
        "command": str(summary.get("command", ""))[:500],
        "seeds": seeds,
        "complete": summary.get("complete") is True,
        "machinery_check": machinery,
        "stamp": MACHINERY_CHECK if machinery else None,
        "train_len": summary.get("train_len"),
        "eval_lengths": [n for n in (summary.get("eval_lengths") or []) if isinstance(n, int)][:MAX_ENTRIES],
        "models": models,
        "verdicts": [] if machinery else verdicts,
        "cpu_seconds": {str(k): _number(v) for k, v in (summary.get("cpu_seconds") or {}).items()},
    }


def committed_summaries(folder: Optional[Path] = None) -> Tuple[List[dict], List[str]]:
    """The run summaries that ship with posenc, in the page's shape, and notes on any unreadable."""
    folder = SUMMARIES_DIR if folder is None else Path(folder)
    out, notes = [], []
    for path in sorted(folder.glob("*.json"), key=lambda p: p.stem)[:MAX_ENTRIES]:
        try:
            data = load_json_file(path, "summary", "reinstall posenc", max_bytes=MAX_FILE_BYTES)
        except RunFileError as err:
            notes.append(f"{path.name} could not be read: {err.problem}")
            continue
        if data is not None:
            out.append(summary_view(data))
    return out, notes


def _peek(path: Path):
    """The parsed JSON of ``path`` if it is valid JSON within the size and depth limits (to tell an
    old file from a broken one)."""
    try:
        return read_json_limited(path, max_bytes=MAX_FILE_BYTES)
    except RunFileError:
        return None


def _curves(raw: Dict[str, list], points: int) -> Dict[str, dict]:
    curves = {}
    for key, values in raw.items():
        positions, losses = bucket_curve(values, points)
        curves[key] = {"positions": positions, "loss": losses, "points": len(values)}
    return curves


def _verdict(v) -> dict:
    side = lambda s: None if s is None else {"label": s.label, "value": s.value, "ci": _pair(s.ci)}
    return {
        "claim": v.claim,
        "verdict": v.verdict,
        "seen": {"seen": True, "not seen": False}.get(v.verdict),
        "evidence": v.evidence,
        "group": v.group,
        "scheme": v.scheme,
        "expected": v.expected,
        "a": side(v.a),
        "b": side(v.b),
    }


def _plain(value, depth: int = 0):
    """A JSON-safe copy of a config value (finite numbers, short strings, shallow nesting)."""
    import math

    if depth > 4:
        return None
    if isinstance(value, dict):
        return {str(k)[:60]: _plain(v, depth + 1) for k, v in list(value.items())[:MAX_ENTRIES]}
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in list(value)[:MAX_ENTRIES]]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return None
        return value
    return str(value)[:200]
