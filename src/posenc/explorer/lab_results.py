"""Reading a ``posenc lab`` run folder for the lab results view.

The lab writes ``results.json`` into its run folder::

    {"config": {...}, "train_len": int, "eval_lengths": [int, ...],
     "schemes": {name: {"eval": {"<length>": {"bpb": float, "bpb_ci": [lo, hi],
                                               "bpb_last_quarter": float, "bpb_final32": float}},
                        "loss_by_position": {"<length>": [float per position, ...]}}},
     "extension": {method: {"<length>": {"bpb": float, ...}}}}

and, when it has them, ``complete`` (false while a run is still going), ``verdicts`` (``[{"claim",
"seen", "evidence"}]``), ``cannot``/``note`` on an evaluation the scheme could not do (a learned table
past its rows) and ``finetuned`` results under an extension method. Losses are bits per byte.

A run may be unfinished or from an older version, so nothing here trusts the file: every missing or
malformed entry is dropped and described in ``notes``, numbers that are not finite become ``None``,
and long loss curves are averaged into at most :data:`MAX_CURVE_POINTS` buckets so the page stays
responsive. The folder is fixed when the server starts; no request can name another path.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Dict, List, Optional, Tuple

RESULTS_FILE = "results.json"
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_CURVE_POINTS = 512
MAX_ENTRIES = 64          # schemes, lengths or methods kept from one file
EVAL_KEYS = ("bpb", "bpb_last_quarter", "bpb_final32")


def _number(value) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _length_key(key) -> Optional[int]:
    try:
        length = int(str(key))
    except ValueError:
        return None
    return length if length > 0 else None


def bucket_curve(values: List[Optional[float]],
                 points: int = MAX_CURVE_POINTS) -> Tuple[List[float], List[Optional[float]]]:
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


def _eval_table(raw, where: str, notes: List[str]) -> Dict[str, dict]:
    table: Dict[str, dict] = {}
    if not isinstance(raw, dict):
        notes.append(f"{where}: no evaluation results")
        return table
    for key, entry in list(raw.items())[:MAX_ENTRIES]:
        length = _length_key(key)
        if length is None or not isinstance(entry, dict):
            notes.append(f"{where}: entry {str(key)[:40]!r} is not a length with results")
            continue
        row = {name: _number(entry.get(name)) for name in EVAL_KEYS}
        ci = entry.get("bpb_ci")
        row["bpb_ci"] = ([_number(ci[0]), _number(ci[1])]
                         if isinstance(ci, (list, tuple)) and len(ci) == 2 else None)
        row["cannot"] = entry.get("cannot") is True
        row["note"] = entry["note"][:200] if isinstance(entry.get("note"), str) else None
        finetuned = entry.get("finetuned")
        row["finetuned_bpb"] = _number(finetuned.get("bpb")) if isinstance(finetuned, dict) else None
        for name in EVAL_KEYS:
            if row[name] is None and name in entry:
                notes.append(f"{where}, length {length}: {name} is not a finite number")
        table[str(length)] = row
    return table


def _curves(raw, where: str, notes: List[str], points: int) -> Dict[str, dict]:
    curves: Dict[str, dict] = {}
    if not isinstance(raw, dict):
        notes.append(f"{where}: no loss_by_position")
        return curves
    for key, values in list(raw.items())[:MAX_ENTRIES]:
        length = _length_key(key)
        if length is None or not isinstance(values, list):
            notes.append(f"{where}: loss_by_position entry {str(key)[:40]!r} is not a list of losses")
            continue
        positions, losses = bucket_curve([_number(v) for v in values], points)
        curves[str(length)] = {"positions": positions, "loss": losses, "points": len(values)}
    return curves


def read_lab_results(run_dir: Optional[Path], points: int = MAX_CURVE_POINTS) -> dict:
    """The lab results of ``run_dir`` in the page's shape, or why there are none.

    ``points`` (1 .. :data:`MAX_CURVE_POINTS`) bounds each loss curve; fewer points average more
    positions together, which smooths a noisy curve.

    Returns a dict with ``available`` (bool), ``notes`` (what was missing or malformed) and, when
    available, ``run`` (the folder's name), ``train_len``, ``eval_lengths``, ``config``, ``schemes``
    (``{name: {"eval": {length: row}, "loss_by_position": {length: curve}}}``) and ``extension``
    (``{method: {length: row}}``).
    """
    if isinstance(points, bool) or not isinstance(points, int) or not 1 <= points <= MAX_CURVE_POINTS:
        raise ValueError(f"points must be an integer in 1..{MAX_CURVE_POINTS}, got {points!r}")
    if run_dir is None:
        return {"available": False, "notes": ["no lab run given: start the console with "
                                              "`posenc explore --lab-run RUN_DIR`"]}
    path = Path(run_dir) / RESULTS_FILE
    if not path.is_file():
        return {"available": False, "run": Path(run_dir).name,
                "notes": [f"{RESULTS_FILE} not found in the lab run folder {Path(run_dir).name!r} "
                          "(the run may still be training)"]}
    if path.stat().st_size > MAX_FILE_BYTES:
        return {"available": False, "run": Path(run_dir).name,
                "notes": [f"{RESULTS_FILE} is larger than {MAX_FILE_BYTES // 2**20} MiB; not read"]}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        return {"available": False, "run": Path(run_dir).name,
                "notes": [f"{RESULTS_FILE} could not be read: {err}"]}
    if not isinstance(data, dict):
        return {"available": False, "run": Path(run_dir).name,
                "notes": [f"{RESULTS_FILE} does not hold a JSON object"]}

    notes: List[str] = []
    train_len = data.get("train_len")
    if not isinstance(train_len, int) or isinstance(train_len, bool) or train_len < 1:
        notes.append("train_len is missing")
        train_len = None
    lengths = data.get("eval_lengths")
    if isinstance(lengths, list):
        eval_lengths = sorted({v for v in map(_length_key, lengths[:MAX_ENTRIES]) if v is not None})
    else:
        notes.append("eval_lengths is missing")
        eval_lengths = []
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    if not config:
        notes.append("config is missing")

    schemes: Dict[str, dict] = {}
    raw_schemes = data.get("schemes")
    if not isinstance(raw_schemes, dict) or not raw_schemes:
        notes.append("schemes is missing: no per-scheme results yet")
    else:
        for name, entry in list(raw_schemes.items())[:MAX_ENTRIES]:
            name = str(name)[:40]
            if not isinstance(entry, dict):
                notes.append(f"scheme {name!r} has no results")
                continue
            schemes[name] = {"eval": _eval_table(entry.get("eval"), f"scheme {name!r}", notes),
                             "loss_by_position": _curves(entry.get("loss_by_position"),
                                                         f"scheme {name!r}", notes, points)}
    extension: Dict[str, dict] = {}
    raw_ext = data.get("extension")
    if isinstance(raw_ext, dict):
        for method, entry in list(raw_ext.items())[:MAX_ENTRIES]:
            extension[str(method)[:40]] = _eval_table(entry, f"extension {str(method)[:40]!r}", notes)
    else:
        notes.append("extension is missing: no context-extension results")
    if not eval_lengths:
        found = {int(k) for s in schemes.values() for k in s["eval"]}
        eval_lengths = sorted(found)
    complete = data.get("complete")
    if complete is False:
        notes.append("the run is not complete: results so far")
    return {"available": bool(schemes), "run": Path(run_dir).name, "train_len": train_len,
            "eval_lengths": eval_lengths, "config": _plain(config), "schemes": schemes,
            "extension": extension, "complete": complete if isinstance(complete, bool) else None,
            "verdicts": _verdicts(data.get("verdicts")), "notes": notes}


def _verdicts(raw) -> List[dict]:
    """``[{"claim": str, "seen": bool | None, "evidence": str}]`` from whatever the file holds."""
    if not isinstance(raw, list):
        return []
    out = []
    for item in raw[:MAX_ENTRIES]:
        if isinstance(item, dict) and isinstance(item.get("claim"), str):
            seen = item.get("seen")
            out.append({"claim": item["claim"][:300], "seen": seen if isinstance(seen, bool) else None,
                        "evidence": str(item.get("evidence", ""))[:300]})
    return out


def _plain(value, depth: int = 0):
    """A JSON-safe copy of a config value (finite numbers, short strings, shallow nesting)."""
    if depth > 4:
        return None
    if isinstance(value, dict):
        return {str(k)[:60]: _plain(v, depth + 1) for k, v in list(value.items())[:MAX_ENTRIES]}
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in list(value)[:MAX_ENTRIES]]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return _number(value) if isinstance(value, float) else value
    return str(value)[:200]
