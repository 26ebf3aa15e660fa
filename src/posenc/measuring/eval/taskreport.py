"""The tasks' part of ``results.json`` and ``results.md``, from the finished task and passkey cells.

``tasks[task][scaling][length]``: ``accuracy``, ``accuracy_ci`` (95% Wilson), ``recall`` (RULER's
partial score), ``trials``; a needle task also ``depths[depth]`` with the same numbers and the trial
``records``, the others their ``records`` directly. ``task_summary``: ``pooled`` (the tasks pooled:
those measured at every length under every scaling, the passkey included when it ran), ``excluded``
(the others, with why) and ``scalings[scaling]`` (:func:`posenc.measuring.eval.scoring.summary`).
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

import numpy as np

from . import scoring
from .files import depth_key
from .taskrun import PREFIX
from .tasks import TASKS


def _cell_summary(cells: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    correct = [c for cell in cells for c in cell["correct"]]
    recall = [r for cell in cells for r in cell["recall"]]
    return {**scoring.share(correct), "recall": float(np.mean(recall))}


def build(
    cells: Dict[str, Any], labels: Sequence[str], lengths: Sequence[int], depths: Sequence[float], ev: Any
) -> Dict[str, Any]:
    """``{"tasks": ..., "task_summary": ...}`` of the finished ``cells`` (see the module docstring);
    ``ev`` gives the tasks, the passkey trials, the trained context and the threshold."""
    tasks: Dict[str, Any] = {}
    outcomes: Dict[str, Dict[int, List[float]]] = {label: {} for label in labels}
    measured: Dict[str, set] = {}
    for name in ev.tasks:
        grid = TASKS[name].depth_grid
        for label in labels:
            for n in lengths:
                keys = [
                    f"{PREFIX}{name}|{label}|{n}" + (f"|{depth_key(d)}" if grid else "")
                    for d in (depths if grid else [0])
                ]
                found = [cells[k] for k in keys if k in cells]
                if len(found) != len(keys):
                    continue
                entry = _cell_summary(found)
                if grid:
                    entry["depths"] = {
                        depth_key(d): {**_cell_summary([c]), "records": c["trials"]} for d, c in zip(depths, found)
                    }
                else:
                    entry["records"] = found[0]["trials"]
                tasks.setdefault(name, {}).setdefault(label, {})[str(n)] = entry
                measured.setdefault(name, set()).add((label, n))
    if ev.passkey_trials:
        for label in labels:
            for n in lengths:
                found = [cells.get(f"passkey|{label}|{n}|{depth_key(d)}") for d in depths]
                if all(c is not None for c in found):
                    measured.setdefault("passkey", set()).add((label, n))
    everywhere = {(label, n) for label in labels for n in lengths}
    pooled = [t for t in ["passkey", *ev.tasks] if measured.get(t) == everywhere]
    excluded = {
        t: "not measured at every length under every scaling"
        for t in ["passkey", *ev.tasks]
        if t not in pooled and (t != "passkey" or ev.passkey_trials)
    }
    for t in pooled:
        for label in labels:
            for n in lengths:
                outcomes[label].setdefault(n, []).extend(_outcomes(cells, t, label, n, depths))
    summary = scoring.summary(outcomes, lengths, ev.trained, ev.threshold) if pooled else {}
    return {"tasks": tasks, "task_summary": {"pooled": pooled, "excluded": excluded, "scalings": summary}}


def _outcomes(cells: Dict[str, Any], task: str, label: str, n: int, depths: Sequence[float]) -> List[float]:
    if task == "passkey":
        return [c for d in depths for c in cells[f"passkey|{label}|{n}|{depth_key(d)}"]["correct"]]
    if TASKS[task].depth_grid:
        return [c for d in depths for c in cells[f"{PREFIX}{task}|{label}|{n}|{depth_key(d)}"]["correct"]]
    return list(cells[f"{PREFIX}{task}|{label}|{n}"]["correct"])


def _pct(entry: Dict[str, Any]) -> str:
    lo, hi = entry["accuracy_ci"]
    return f"{entry['accuracy']:.0%} [{lo:.0%}, {hi:.0%}]"


def markdown(results: Dict[str, Any]) -> str:
    """The tasks' tables: exact matches per task, scaling and length; then per scaling the pooled
    score, the effective length and the retention."""
    tasks, summary = results.get("tasks") or {}, results.get("task_summary") or {}
    if not tasks and not summary.get("scalings"):
        return ""
    lengths = results["lengths"]
    lines: List[str] = []
    if tasks:
        lines += [
            "",
            "## Tasks",
            "",
            "Exact matches of greedy continuations, 95% Wilson interval (docs/eval.md, Tasks).",
            "",
        ]
        lines += [
            "| task | scaling | " + " | ".join(str(n) for n in lengths) + " |",
            "|---|---|" + "---|" * len(lengths),
        ]
    for name, by_label in tasks.items():
        for label, row in by_label.items():
            lines.append(
                f"| {name} | {label} | "
                + " | ".join(_pct(row[str(n)]) if str(n) in row else "-" for n in lengths)
                + " |"
            )
    scal = summary.get("scalings") or {}
    if scal:
        first = next(iter(scal.values()))
        at = first["retention"]["length"]
        where = f"at {at}" if at is not None else "at the trained context (no length evaluated there)"
        lines += [
            "",
            "## Effective length and retention",
            "",
            f"Pooled over {', '.join(summary['pooled'])}. Effective length: the longest length whose score, and every "
            f"shorter one's, is at least {first['threshold']:.1%} (point estimate / Wilson lower end). Retention: the "
            f"score {where} over the unscaled model's (bar {scoring.RETENTION_BAR:.1%}).",
            "",
            "| scaling | " + " | ".join(str(n) for n in lengths) + " | effective length | retention |",
            "|---|" + "---|" * len(lengths) + "---|---|",
        ]
        for label, e in scal.items():
            ratio = e["retention"]["ratio"]
            cells = [_pct(e["lengths"][str(n)]) if str(n) in e["lengths"] else "-" for n in lengths]
            eff = f"{e['effective_length'] or '-'} / {e['effective_length_lower'] or '-'}"
            lines.append(
                f"| {label} | " + " | ".join(cells) + f" | {eff} | " + ("-" if ratio is None else f"{ratio:.1%}") + " |"
            )
    if summary.get("excluded"):
        lines += [""] + [f"- not pooled: {t} ({why})" for t, why in summary["excluded"].items()]
    return "\n".join(lines) + "\n"
