"""Reading a ``posenc eval`` output folder for the explorer's eval view.

``results.json`` (``"schema": "posenc.eval/results"``, see :mod:`posenc.measuring.eval.report`) holds bits per
byte per scaling and length with bootstrap intervals, the passkey grid per scaling (length × depth,
exact-match accuracy with Wilson intervals, ``log2 p(key)``), what was skipped, and the search when
one ran. This module turns it into the page's JSON without trusting the file: it is read with a size
and a nesting limit, a file of another schema or version is refused with a note, every malformed
entry is dropped and described in ``notes``, and numbers that are not finite become ``None``. The
folder is fixed when the server starts; no request can name another path.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Dict, List, Optional

from ...runs.lab_schema import RunFileError, read_json_limited

RESULTS_FILE = "results.json"
SCHEMA = "posenc.eval/results"
#: the versions read: 2 adds the checkpoint's digest, exact depth keys and each trial's offset and key
SCHEMA_VERSIONS = (1, 2)
SCHEMA_VERSION = SCHEMA_VERSIONS[-1]
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_ENTRIES = 64  # scalings, lengths or depths kept from one file
PPL_KEYS = ("bpb", "ppl", "final_bpb", "final_ppl")
PASSKEY_KEYS = ("accuracy", "logp_bits")


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _dict(value: Any) -> Dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> List[Any]:
    return value if isinstance(value, list) else []


def _interval(value: Any) -> Optional[List[Optional[float]]]:
    if not isinstance(value, list) or len(value) != 2:
        return None
    lo, hi = _number(value[0]), _number(value[1])
    return None if lo is None or hi is None else [lo, hi]


def _entry(raw: Any, keys) -> Optional[Dict[str, Any]]:
    if not isinstance(raw, dict):
        return None
    out: Dict[str, Any] = {}
    for key in keys:
        out[key] = _number(raw.get(key))
        if f"{key}_ci" in raw:
            out[f"{key}_ci"] = _interval(raw.get(f"{key}_ci"))
    for key in ("windows", "trials"):
        if isinstance(raw.get(key), int) and not isinstance(raw.get(key), bool):
            out[key] = raw[key]
    return out


def read_eval_results(run_dir: Optional[Path]) -> Dict[str, Any]:
    """The eval results of ``run_dir`` in the page's shape, or why there are none.

    Returns ``available`` (bool), ``notes`` and, when available: ``run`` (the folder's name),
    ``model``, ``model_type``, ``trained_context``, ``lengths``, ``depths``, ``complete``,
    ``scalings`` (``[{"label", "name", "how"}]`` in the report's order; ``name`` is the rope type), ``perplexity``
    (``{label: {length: {"bpb", "bpb_ci", "ppl", "ppl_ci", "final_bpb", ...}}}``), ``passkey``
    (``{label: {length: {depth: {"accuracy", "accuracy_ci", "logp_bits", "logp_bits_ci", "trials"}}}}``),
    ``skipped`` (``{what: why}``) and ``search`` (the search's record, or ``None``).
    """
    if run_dir is None:
        return {
            "available": False,
            "notes": ["no eval run given: start the console with `posenc explore --eval-run DIR`"],
        }
    run = Path(run_dir).name
    data = _load(Path(run_dir) / RESULTS_FILE, run)
    if "available" in data:  # why there are none
        return data
    notes: List[str] = []
    lengths = [n for n in _list(data.get("lengths")) if isinstance(n, int) and not isinstance(n, bool) and n > 0]
    lengths = sorted(set(lengths))[:MAX_ENTRIES]
    depths = [d for d in (_number(v) for v in _list(data.get("depths"))) if d is not None and 0 <= d <= 1][:MAX_ENTRIES]
    scalings = _scalings(data.get("scalings"), notes)
    labels = [s["label"] for s in scalings]
    skipped = _dict(data.get("skipped"))
    trained = data.get("trained_context")
    return {
        "available": True,
        "notes": notes,
        "run": run,
        "model": Path(str(data.get("model", ""))).name,
        "model_type": str(data.get("model_type", "")),
        "trained_context": trained if isinstance(trained, int) and not isinstance(trained, bool) else None,
        "lengths": lengths,
        "depths": depths,
        "complete": bool(data.get("complete")),
        "scalings": scalings,
        "perplexity": _perplexity(_dict(data.get("perplexity")), labels, lengths, notes),
        "passkey": _passkey(_dict(data.get("passkey")), labels, lengths, depths),
        "skipped": {str(k)[:100]: str(v)[:300] for k, v in list(skipped.items())[:MAX_ENTRIES]},
        "search": _search(data.get("search")),
    }


def _load(path: Path, run: str) -> Dict[str, Any]:
    """The results file's top-level dict, or the page's ``{"available": False, ...}`` saying why not."""
    if not path.is_file():
        return {
            "available": False,
            "run": run,
            "notes": [f"{RESULTS_FILE} not found in the eval folder {run!r} (the evaluation may not have started)"],
        }
    advice = "run `posenc eval` again with the same --out to rewrite it"
    try:
        data = read_json_limited(path, advice, max_bytes=MAX_FILE_BYTES)
    except RunFileError as err:
        return {"available": False, "run": run, "notes": [f"{RESULTS_FILE} could not be read: {err.problem}; {advice}"]}
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        return {
            "available": False,
            "run": run,
            "notes": [f"{RESULTS_FILE} in {run!r} is not a posenc eval results file"],
        }
    if data.get("schema_version") not in SCHEMA_VERSIONS:
        return {
            "available": False,
            "run": run,
            "notes": [
                f"{RESULTS_FILE} is version {data.get('schema_version')!r}; this posenc reads versions "
                f"{', '.join(map(str, SCHEMA_VERSIONS))}: use the posenc that wrote it, or {advice}"
            ],
        }
    return data


def _scalings(raw: Any, notes: List[str]) -> List[Dict[str, str]]:
    scalings = []
    for s in _list(raw)[:MAX_ENTRIES]:
        if isinstance(s, dict) and isinstance(s.get("label"), str):
            name = str(s["name"]) if isinstance(s.get("name"), str) else ""
            scalings.append({"label": s["label"], "name": name[:40], "how": str(s.get("how", ""))[:300]})
        else:
            notes.append("a scaling without a label was dropped")
    return scalings


def _perplexity(raw: Dict[str, Any], labels: List[str], lengths: List[int], notes: List[str]) -> Dict[str, Any]:
    perplexity: Dict[str, Dict[str, Any]] = {}
    for label in labels:
        row = raw.get(label, {})
        perplexity[label] = {}
        for n in lengths:
            if isinstance(row, dict) and str(n) in row:
                entry = _entry(row[str(n)], PPL_KEYS)
                if entry is None or entry["bpb"] is None:
                    notes.append(f"perplexity of {label} at {n}: malformed entry dropped")
                    continue
                perplexity[label][str(n)] = entry
    return perplexity


def _passkey(raw: Dict[str, Any], labels: List[str], lengths: List[int], depths: List[float]) -> Dict[str, Any]:
    passkey: Dict[str, Dict[str, Any]] = {}
    for label in labels:
        grid = raw.get(label)
        if not isinstance(grid, dict):
            continue
        passkey[label] = {}
        for n in lengths:
            cells = grid.get(str(n))
            if not isinstance(cells, dict):
                continue
            passkey[label][str(n)] = {}
            by_value: Dict[float, Any] = {}
            for key, cell in list(cells.items())[: MAX_ENTRIES * 4]:
                value = _depth_of(key)
                if value is not None:
                    by_value.setdefault(value, cell)
            for d in depths:
                cell = _entry(by_value.get(d), PASSKEY_KEYS)
                if cell is not None and cell["accuracy"] is not None:
                    passkey[label][str(n)][js_number(d)] = cell
    return passkey


def _depth_of(key: Any) -> Optional[float]:
    """The depth a results key names (``"0.25"``; version 1 wrote ``f"{d:g}"``, version 2 the exact
    shortest decimal), or ``None``."""
    try:
        value = float(str(key)[:40])
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def js_number(value: float) -> str:
    """``String(value)`` of the page's JavaScript, which looks a depth's cell up by it: the shortest
    decimal that reads back as the same number (``0``, ``0.25``, ``1e-7``)."""
    text = repr(float(value))
    if text.endswith(".0"):
        text = text[:-2]
    if "e" in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}e{'+' if int(exponent) > 0 else '-'}{abs(int(exponent))}"
    return text


def _search(raw: Any) -> Optional[Dict[str, Any]]:
    if not isinstance(raw, dict):
        return None
    out: Dict[str, Any] = {
        "type": str(raw.get("type", "")),
        "target_length": raw.get("target_length") if isinstance(raw.get("target_length"), int) else None,
        "evaluations": raw.get("evaluations") if isinstance(raw.get("evaluations"), int) else None,
    }
    for role in ("default", "best"):
        e = raw.get(role)
        if not isinstance(e, dict):
            return None
        params = _dict(e.get("params"))
        out[role] = {
            "label": str(e.get("label", role)),
            "params": {
                str(k): (
                    [_number(x) for x in v[:1024]]
                    if isinstance(v, list)
                    else _number(v)
                    if not isinstance(v, str)
                    else v
                )
                for k, v in list(params.items())[:16]
            },
            **(_entry(e, ("search_bpb", "held_out_bpb")) or {}),
        }
    diff = raw.get("held_out_difference")
    out["held_out_difference"] = _entry(diff, ("bpb",)) if isinstance(diff, dict) else None
    return out
