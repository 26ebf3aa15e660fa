"""The summary file ``posenc conform --json OUT`` writes, and its reader.

The schema is stable: a reader of ``schema_version`` 1 reads every file written under it; a field
may be added, none removed or changed in meaning (a change of meaning is a new version). One file
holds one engine's run::

    {
      "schema": "posenc.conform.summary",
      "schema_version": 1,
      "engine": {"name": "transformers", "version": "5.25.0", "adapter": "transformers"},
      "posenc_version": "0.1.0", "torch_version": "2.13.0+cpu", "python_version": "3.12.3",
      "date": "2026-12-08",                     # UTC date of the run
      "dtypes": ["float32", "float64"],
      "precision_tolerance": null,              # --precision TOL, or null
      "exit_code": 0,
      "counts": {"ok": 30, "precision": 12, "wrong": 0, "unsupported": 2, "error": 0},
      "configs": [
        {
          "config": "llama-3.1-8b",             # fixture name, file path or generated name
          "source": "fixture",                  # fixture | file | generated
          "rope_type": "llama3",                # null when the config cannot be read
          "layout": "half", "head_dim": 128, "rotary_dim": 128,
          "status": "precision",                # ok | precision | wrong | unsupported | error
          "message": null,                      # why unsupported, or the one-line error
          "causes": [],                         # named causes of a wrong answer
          "skipped": [],                        # groups past the adapter's max_position, with why
          "worst": {                            # per check: the largest error over groups and dtypes
            "angle": {"error": 0.0245, "unit": "rad", "status": "precision",
                      "group": "1M", "dtype": "float32"}, ...
          },
          "checks": [                           # every (check, dtype, group)
            {"check": "angle", "dtype": "float32", "group": "near", "positions": [0, 1, 2, 3, 5, 8, 13, 31],
             "error": 1.2e-07, "unit": "rad", "noise": 3.8e-06, "allowance": 3.0e-05, "status": "ok"}, ...
          ]
        }, ...
      ]
    }

Errors, noise and allowances are written to 4 significant digits. ``check`` is one of ``angle``
(rad), ``factor`` (ratio: the engine's score multiplier over the exact one, minus 1), ``q``, ``k``
(relative, up to one constant factor), ``score`` (relative); ``group`` one of ``near``, ``trained``,
``past_original``, ``far``, ``1M``, ``near_again``; ``source`` one of ``fixture``, ``file``,
``generated``, ``dict`` (a dict passed to :func:`~posenc.integrations.conform.conform`).
``"configs"`` holds one entry per line in the files ``posenc conform`` writes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Union

SCHEMA = "posenc.conform.summary"
SCHEMA_VERSION = 1
CONFIG_STATUSES = ("ok", "precision", "wrong", "unsupported", "error")
#: the fields every summary has, and every config entry
SUMMARY_FIELDS = ("schema", "schema_version", "engine", "date", "exit_code", "counts", "configs")
CONFIG_FIELDS = ("config", "source", "rope_type", "status", "message", "causes", "worst", "checks")
#: the largest summary file :func:`read_summary` reads
MAX_SUMMARY_BYTES = 64 * 2**20


def check_summary(data: Any, where: str = "summary") -> Dict[str, Any]:
    """``data`` if it is a summary of this schema, else ``ValueError`` naming the first thing wrong."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: a conform summary is a JSON object, got {type(data).__name__}")
    if data.get("schema") != SCHEMA:
        raise ValueError(f"{where}: schema must be {SCHEMA!r}, got {data.get('schema')!r}")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"{where}: schema_version must be {SCHEMA_VERSION}, got {data.get('schema_version')!r}")
    missing = [f for f in SUMMARY_FIELDS if f not in data]
    if missing:
        raise ValueError(f"{where}: missing fields {missing}")
    engine = data["engine"]
    if (
        not isinstance(engine, dict)
        or not isinstance(engine.get("name"), str)
        or not isinstance(engine.get("version"), str)
    ):
        raise ValueError(f"{where}: engine must be an object with string name and version, got {engine!r}")
    if not isinstance(data["configs"], list):
        raise ValueError(f"{where}: configs must be a list")
    for i, entry in enumerate(data["configs"]):
        gone = [f for f in CONFIG_FIELDS if not isinstance(entry, dict) or f not in entry]
        if gone:
            raise ValueError(f"{where}: configs[{i}] lacks {gone}")
        if entry["status"] not in CONFIG_STATUSES:
            raise ValueError(
                f"{where}: configs[{i}].status must be one of {list(CONFIG_STATUSES)}, got {entry['status']!r}"
            )
    return data


def read_summary(path: Union[str, Path]) -> Dict[str, Any]:
    """A summary file, checked (``ValueError`` naming the file and the field for anything else)."""
    path = Path(path)
    if path.stat().st_size > MAX_SUMMARY_BYTES:
        raise ValueError(f"{path}: larger than {MAX_SUMMARY_BYTES} bytes; not a conform summary")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None
    return check_summary(data, str(path))


def worst_by_check(checks: List[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """Per check, the entry with the worst status and, among those, the largest error."""
    rank = {"ok": 0, "precision": 1, "wrong": 2}
    out: Dict[str, Dict[str, Any]] = {}
    for row in checks:
        best = out.get(row["check"])
        key = (rank[row["status"]], row["error"])
        if best is None or key > (rank[best["status"]], best["error"]):
            out[row["check"]] = {k: row[k] for k in ("error", "unit", "status", "group", "dtype")}
    return out
