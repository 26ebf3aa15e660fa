"""Run summaries: the small JSON file that every number of the lab's docs comes from.

A summary holds, for one run folder (one seed) or a seeds folder (``seed-<n>/`` per training seed,
made by ``posenc lab --seeds``), the command, the config, every seed's headline numbers (bits per
byte per model and length; exact matches ``k`` of ``n`` per distance bin), every seed's verdicts
(judged again from its run folder under the current rule) and their combination across seeds
(:func:`posenc.measuring.lab.verdicts.combine_seeds`), and the training CPU time per seed. Of the per-unit
values it keeps only what the test across seeds needs: each seed's per-window differences of every
bits-per-byte claim (the windows are shared by the seeds and paired across them), each seed's
standard error for the passkey claims, and the exact-match counts. It holds no checkpoints and no
per-trial values, so it stays small enough to commit (under 1 MB for eight seeds of the standard
preset).

Committed summaries live in ``posenc/runs/lab_summaries/`` (they ship with the package, so ``posenc explore``
shows them without a run folder). ``docs/lab.md`` and the README's lab section show them through
marked blocks::

    <!-- lab-run: quick-3-seeds bpb -->
    ...rendered table...
    <!-- /lab-run -->

``python -m posenc.measuring.lab.summary render`` rewrites every block from the summaries, and
``python -m posenc.measuring.lab.summary check`` (and a test) fails when a block and its summary disagree.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

from .passkey import BIN_NAMES
from .report import cpu_by_scheme
from .schema import SUMMARIES_DIR, RunFileError, load_json_file
from .store import atomic_write_text, write_run_file
from .verdicts import (
    LABELS,
    NOT_MEASURED,
    NOT_SEEN,
    SEEN,
    WITHIN_NOISE,
    combine_seeds,
    machinery_check_reason,
    rule_text_seeds,
    verdicts,
)

#: Files whose marked blocks are rendered from the summaries (relative to the repository root).
DOC_FILES = ("docs/lab.md", "README.md")
BLOCK = re.compile(r"(<!-- lab-run: (?P<name>[\w.-]+) (?P<table>[\w-]+) -->\n)(?P<body>.*?)(<!-- /lab-run -->)", re.S)


def seed_dir(root: Path, seed: int) -> Path:
    """The run folder of training seed ``seed`` inside a seeds folder."""
    return Path(root) / f"seed-{seed}"


def seed_folders(root: Path) -> Dict[int, Path]:
    """``{seed: folder}`` of a seeds folder (``seed-<n>`` subfolders holding a results.json)."""
    out = {}
    for path in sorted(Path(root).glob("seed-*")):
        tail = path.name[len("seed-") :]
        if tail.isdigit() and (path / "results.json").is_file() and not path.is_symlink():
            out[int(tail)] = path
    return dict(sorted(out.items()))


def _finite(value) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _headline(results: dict) -> Dict[str, Any]:
    """``{model: {length: {"bpb": x, "near"|"mid"|"far": [k, n]}}}`` of one run's results."""
    models: Dict[str, Dict[str, dict]] = {}

    def add(model: str, length: str, entry: Any) -> None:
        if not isinstance(entry, dict):
            return
        cell: Dict[str, Any] = {}
        if entry.get("cannot"):
            cell["cannot"] = True
        bpb = _finite(entry.get("bpb"))
        if bpb is not None:
            cell["bpb"] = round(bpb, 4)
        for name, r in (entry.get("retrieval") or {}).items():
            if name in BIN_NAMES and isinstance(r, dict):
                correct, trials = r.get("correct"), r.get("trials")
                acc = _finite(r.get("accuracy"))
                if isinstance(correct, list) and correct:
                    cell[name] = [int(sum(correct)), len(correct)]
                elif acc is not None and isinstance(trials, int) and trials > 0:
                    cell[name] = [round(acc * trials), trials]
        if cell:
            models.setdefault(model, {})[length] = cell

    for name, s in (results.get("schemes") or {}).items():
        for length, entry in ((s or {}).get("eval") or {}).items():
            add(name, length, entry)
    for method, per_len in (results.get("extension") or {}).items():
        for length, entry in (per_len or {}).items():
            add(f"rope+{method}", length, entry)
            if isinstance(entry, dict):
                add(f"rope+{method} ft", length, entry.get("finetuned"))
    return models


def _short_verdicts(vs: List[dict]) -> List[dict]:
    keep = (
        "claim",
        "group",
        "scheme",
        "expected",
        "unit",
        "relation",
        "verdict",
        "test",
        "effect",
        "effect_ci",
        "p",
        "p_holm",
        "holm_tests",
        "n",
        "se",
        "df",
        "units",
        "unit_diffs",
        "counts",
        "evidence",
    )
    return [{k: v.get(k) for k in keep if k in v} for v in vs]


#: How a run's own CPU record is described in a summary.
RECORDED = "recorded by the run itself (time.process_time: user + system, every thread, summed over every session)"


def _cpu(per_seed: Dict[int, dict], given: Dict[int, float], source: str) -> Dict[str, Any]:
    """``cpu_seconds`` per seed (measured outside the run where ``given``, else as the run recorded
    it), how (``cpu_source``) and, where the run recorded it, per scheme (``cpu_by_scheme``)."""
    total, by_scheme, recorded, own_total = {}, {}, [], {}
    for seed, results in sorted(per_seed.items()):
        own = _finite(results.get("cpu_seconds"))
        if own is not None and own > 0:
            own_total[str(seed)] = round(own, 1)
        if seed in given:
            total[str(seed)] = round(float(given[seed]), 1)
        elif own is not None and own > 0:
            total[str(seed)] = round(own, 1)
            recorded.append(seed)
        per = cpu_by_scheme(results)
        if any(v is not None for cell in per.values() for v in cell.values()):
            by_scheme[str(seed)] = {
                k: {part: None if v is None else round(v, 1) for part, v in cell.items()} for k, cell in per.items()
            }
    sources = [source] if given else []
    if recorded:
        sources.append(f"seed {', '.join(map(str, recorded))}: {RECORDED}")
    return {
        "cpu_seconds": total,
        "cpu_source": "; ".join(sources),
        "cpu_recorded": own_total if given else {},
        "cpu_by_scheme": by_scheme,
    }


def summarize(
    root: Path,
    name: str,
    command: str,
    *,
    cpu_seconds: Optional[Dict[int, float]] = None,
    cpu_source: str = "",
    only: Optional[List[int]] = None,
) -> dict:
    """The summary of the run folder or seeds folder ``root`` (see the module docstring).

    ``cpu_seconds`` (``{seed: seconds}``) is the CPU time (user + system) of each seed's run,
    measured outside it (``cpu_source`` says how, e.g. ``/usr/bin/time -v``); a seed not given takes
    the CPU time its run recorded itself, whole and per scheme (training, evaluation). ``only``
    keeps those seeds of a seeds folder (the finished ones while others still train)."""
    root = Path(root)
    found = seed_folders(root)
    if only is not None:
        missing = sorted(set(only) - set(found))
        if missing:
            raise ValueError(f"{root}: no run folder with results.json for seed {', '.join(map(str, missing))}")
        found = {k: v for k, v in found.items() if k in only}
    folders: Dict[Optional[int], Path] = {k: v for k, v in found.items()} if found else {None: root}
    per_seed: Dict[int, dict] = {}
    for seed, folder in folders.items():
        data = load_json_file(folder / "results.json", "results")
        if data is None:
            raise RunFileError(folder / "results.json", "does not exist", "finish or resume the run first")
        per_seed[int(data["config"]["seed"]) if seed is None else seed] = data
    first = next(iter(per_seed.values()))
    config = {k: v for k, v in first["config"].items() if k != "seed"}
    # Every seed's verdicts are judged again under the current rule from its per-window and
    # per-trial values, not copied from what the run wrote (an older rule, or none for a run whose
    # config makes it a machinery check).
    verdicts_by_seed = {s: verdicts(r) for s, r in per_seed.items()}
    return {
        "name": name,
        "command": command,
        "config": config,
        "seeds": sorted(per_seed),
        "complete": all(r.get("complete") is True for r in per_seed.values()),
        "machinery_check": any(machinery_check_reason(r.get("config")) is not None for r in per_seed.values()),
        "train_len": first.get("train_len"),
        "eval_lengths": first.get("eval_lengths"),
        "numbers": {str(s): _headline(r) for s, r in sorted(per_seed.items())},
        "train_seconds": {
            str(s): {
                k: round(float(v["train"]["train_seconds"]), 1)
                for k, v in (r.get("schemes") or {}).items()
                if _finite((v.get("train") or {}).get("train_seconds")) is not None
            }
            for s, r in sorted(per_seed.items())
        },
        **_cpu(per_seed, cpu_seconds or {}, cpu_source),
        "verdicts_by_seed": {str(s): _short_verdicts(v) for s, v in sorted(verdicts_by_seed.items())},
        "verdicts": combine_seeds(verdicts_by_seed),
    }


def recombine(summary: dict) -> dict:
    """``summary`` with its across-seed verdicts recomputed from its per-seed verdicts under the
    current rule (no run folder needed); a ValueError when a per-seed verdict lacks its claimed
    direction (summaries written before it was kept)."""
    for seed, vs in (summary.get("verdicts_by_seed") or {}).items():
        for v in vs:
            if v.get("verdict") != NOT_MEASURED and v.get("relation") not in (">", "<"):
                raise ValueError(
                    f"summary {summary.get('name')!r}, seed {seed}: the verdict {v.get('claim')!r} has no "
                    f"relation ('>' or '<'); write the summary again from its run folder"
                )
    per_seed = {int(s): vs for s, vs in (summary.get("verdicts_by_seed") or {}).items()}
    return dict(summary, verdicts=combine_seeds(per_seed))


def load_summaries(folder: Path = SUMMARIES_DIR) -> Dict[str, dict]:
    """Every summary in ``folder``, by name (its file name without ``.json``)."""
    out = {}
    for path in sorted(Path(folder).glob("*.json")):
        data = load_json_file(path, "summary")
        if data is not None:
            out[path.stem] = data
    return out


# -- rendering ---------------------------------------------------------------------------------
def _mean_sd(values: List[float]) -> str:
    if not values:
        return "—"
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{np.mean(values):.3f} ± {np.std(values, ddof=1):.3f}"


def _models(summary: dict, prefix: bool) -> List[str]:
    names: List[str] = []
    for per in summary["numbers"].values():
        for model in per:
            if model.startswith("rope+") == prefix and model not in names:
                names.append(model)
    return names


def _cells(summary: dict, model: str, length: str, key: str) -> list:
    return [
        per[model][length][key]
        for per in summary["numbers"].values()
        if model in per and length in per[model] and key in per[model][length]
    ]


def _length_columns(summary: dict, lengths: List[str]) -> str:
    """The column heads of the evaluation lengths, each with its multiple of the training length."""
    return " | ".join(f"{n} ({int(n) // summary['train_len']}x)" for n in lengths)


def _add_row(lines: List[str], first: str, cells: List[str]) -> None:
    """Add the row ``| first | cells |`` to ``lines``, unless every cell is empty ("—")."""
    if any(c != "—" for c in cells):
        lines.append(f"| {first} | " + " | ".join(cells) + " |")


def table_bpb(summary: dict, extension: bool = False) -> str:
    lengths = [str(n) for n in summary["eval_lengths"]]
    if extension:
        lengths = lengths[1:]
    seeds = len(summary["seeds"])
    lines = [f"| model | {_length_columns(summary, lengths)} |", "|---" * (len(lengths) + 1) + "|"]
    for model in _models(summary, extension):
        cells = []
        for n in lengths:
            if _cells(summary, model, n, "cannot"):
                cells.append("cannot")
            else:
                cells.append(_mean_sd(_cells(summary, model, n, "bpb")))
        _add_row(lines, model, cells)
    note = (
        f"Bits per byte, mean ± standard deviation over {seeds} training seeds."
        if seeds > 1
        else "Bits per byte, **one training seed**."
    )
    if not summary.get("complete"):
        note += " The run is unfinished: these are the numbers recorded so far."
    return "\n".join(lines + ["", note])


def table_retrieval(summary: dict, extension: bool = False) -> str:
    lengths = [str(n) for n in summary["eval_lengths"]]
    seeds = len(summary["seeds"])
    lines = [
        f"| model | keys | {_length_columns(summary, lengths)} |",
        "|---" * (len(lengths) + 2) + "|",
    ]
    for model in _models(summary, extension):
        for b in BIN_NAMES:
            cells = []
            for n in lengths:
                kn = _cells(summary, model, n, b)
                cells.append(" / ".join(f"{k}/{m}" for k, m in kn) if kn else "—")
            _add_row(lines, f"{model} | {b}", cells)
    note = (
        f"Exact matches of the 5-digit key, k/n per training seed ({seeds} seeds, in seed order)."
        if seeds > 1
        else "Exact matches of the 5-digit key, k/n, **one training seed**."
    )
    return "\n".join(lines + ["", note])


def _verdict_cell(v: dict) -> str:
    text = f"**{v['verdict']}**" if v["verdict"] == SEEN else v["verdict"]
    return text + " (one seed)" if v.get("one_seed") else text


def _effect_cell(v: dict) -> str:
    """Mean per-seed difference and its 95% interval, in the claim's unit."""
    mean, ci = v.get("effect_mean"), v.get("effect_ci")
    if _finite(mean) is None:
        return "—"
    fmt = (lambda x: f"{x:+.1%}") if v.get("unit") == "percent" else (lambda x: f"{x:+.3f}")
    if isinstance(ci, list) and len(ci) == 2 and all(_finite(c) is not None for c in ci):
        return f"{fmt(mean)} [{fmt(ci[0])}, {fmt(ci[1])}]"
    return fmt(mean)


def _p_cell(p: Any) -> str:
    return "—" if _finite(p) is None else f"{p:.2g}"


def table_verdicts(summary: dict) -> str:
    if summary.get("machinery_check"):
        return "No verdicts: a machinery check."
    seeds = summary["seeds"]
    lines = [
        "| claim | "
        + " | ".join(f"seed {s}" for s in seeds)
        + " | mean difference [95% interval] | Holm-adjusted p across seeds | across seeds |",
        "|---" * (len(seeds) + 4) + "|",
    ]
    for v in summary["verdicts"]:
        by_seed = [v["by_seed"].get(str(s), "not measured") for s in seeds]
        lines.append(
            f"| {v['claim']} | "
            + " | ".join(by_seed)
            + f" | {_effect_cell(v)} | {_p_cell(v.get('p_holm'))} | {_verdict_cell(v)} |"
        )
    tests = max((w.get("holm_tests") or 0 for vs in summary["verdicts_by_seed"].values() for w in vs), default=0)
    claims = max((v.get("holm_tests") or 0 for v in summary["verdicts"]), default=0)
    return "\n".join(lines + ["", rule_text_seeds(tests, len(seeds), claims)])


def _quoted(v: dict) -> str:
    fmt = (lambda x: f"{x:+.1%}") if v.get("unit") == "percent" else (lambda x: f"{x:+.3f}")
    lo, hi = v["effect_ci"]
    unit = {"bpb": " bits per byte", "bits": " bits"}.get(v.get("unit") or "", "")
    return f"{fmt(v['effect_mean'])}{unit} [{fmt(lo)}, {fmt(hi)}], Holm-adjusted p = {v['p_holm']:.2g}"


#: A seed "learned the copy" when it retrieves at least this share of near keys at the training length.
COPY_SHARE = 0.5


def _copy_lines(summary: dict) -> List[str]:
    """Per scheme, which seeds retrieve at least :data:`COPY_SHARE` of the near keys at the training
    length: the copy is learned in a jump whose timing moves with the seed, so this is counted, not
    averaged."""
    first = str(summary["eval_lengths"][0])
    seeds = [str(s) for s in summary["seeds"]]
    parts = []
    for model in _models(summary, False):
        asked = [s for s in seeds if "near" in ((summary["numbers"].get(s) or {}).get(model) or {}).get(first, {})]
        if not asked:
            continue
        learned = [
            s for s in asked if (lambda kn: kn[0] >= COPY_SHARE * kn[1])(summary["numbers"][s][model][first]["near"])
        ]
        which = f" (seed{'s' if len(learned) > 1 else ''} {', '.join(learned)})" if learned else ""
        parts.append(f"{LABELS.get(model, model)} in {len(learned)} of {len(asked)}{which}")
    if not parts:
        return []
    return [
        f"Seeds that retrieve at least {COPY_SHARE:.0%} of the near keys at the training length ({first} "
        f"bytes), per scheme: " + "; ".join(parts) + "."
    ]


def table_findings(summary: dict) -> str:
    """The claims the seeds decide (seen or not seen across seeds), each with its mean difference,
    95% interval and Holm-adjusted p, and how many stay within noise: the one list of findings."""
    if summary.get("machinery_check"):
        return "No findings: a machinery check."
    seeds = len(summary["seeds"])
    if seeds < 2:
        return "No findings: one training seed, so the spread between training runs is not measured."
    decided = [v for v in summary["verdicts"] if v["verdict"] in (SEEN, NOT_SEEN) and v.get("p_holm") is not None]
    noise = sum(v["verdict"] == WITHIN_NOISE for v in summary["verdicts"])
    absent = sum(v["verdict"] == NOT_MEASURED for v in summary["verdicts"])
    lines = [f"Across {seeds} training seeds ({summary['config'].get('preset')} preset):", ""]
    for v in decided:
        word = "holds" if v["verdict"] == SEEN else "is reversed: the difference lies on the other side"
        lines.append(f"- {v['claim']}: {word}, {_quoted(v)}.")
    if not decided:
        lines.append("- no claim is decided: every one is within noise or not measured.")
    lines += ["", *_copy_lines(summary)]
    lines += [
        "",
        f"{len(decided)} claims decided, {noise} within noise (these seeds cannot tell, which is not "
        f'"equal"), {absent} not measured; the verdicts table gives each one.',
    ]
    return "\n".join(lines)


def _seconds(v: float) -> str:
    return f"{v:.1f}" if v < 100 else f"{v:,.0f}"


def table_time(summary: dict) -> str:
    schemes = summary["config"]["schemes"]
    cpu = summary.get("cpu_seconds") or {}
    by_scheme = summary.get("cpu_by_scheme") or {}
    own = summary.get("cpu_recorded") or {}
    head = "| seed | " + " | ".join(LABELS.get(m, m) for m in schemes) + " | training, all schemes |"
    lines = [head + (" CPU time of the whole run |" if cpu else "") + (" CPU time the run recorded |" if own else "")]
    lines.append("|---" * (len(schemes) + 2 + bool(cpu) + bool(own)) + "|")
    for s, per in summary["train_seconds"].items():
        mine = by_scheme.get(s) or {}
        trains = [(mine.get(m) or {}).get("train") for m in schemes]
        cells = [
            ("—" if m not in per else _seconds(per[m])) + ("" if t is None else f" / {_seconds(t)}")
            for m, t in zip(schemes, trains)
        ]
        walls = f"{_seconds(sum(per.values()))}"
        known = [t for t in trains if t is not None]
        if mine and len(known) == len(trains):
            walls += f" / {_seconds(sum(known))}"
        row = f"| {s} | " + " | ".join(cells) + f" | {walls} |"
        if cpu:
            row += f" {_seconds(cpu[s])} |" if s in cpu else " — |"
        if own:
            row += f" {_seconds(own[s])} |" if s in own else " — |"
        lines.append(row)
    note = "Seconds. Training time per scheme is the wall time of its training, as the run records it"
    if "--device cuda" in summary.get("command", ""):
        note = (
            "Seconds, measured on one GPU (the command's `--device cuda`), so they are not the preset's cost "
            "on a CPU. Training time per scheme is the wall time of its training, as the run records it"
        )
    if by_scheme:
        note += " (wall / CPU where the run recorded its CPU time per scheme)"
    if cpu:
        note += f"; the CPU time (user + system) covers the whole run, evaluation included ({summary['cpu_source']})"
    if own:
        note += (
            "; the CPU time the run recorded runs from reading the corpus to writing the results, without "
            "the start of Python and torch or drawing the plots"
        )
    return "\n".join(lines + ["", note + "."])


def unanimous(by_seed: Dict[str, str]) -> str:
    """The verdict of the rule that preceded the across-seed test: **seen** (or **not seen**) when
    every seed's own verdict is, **not measured** when none measured, otherwise within noise."""
    got = set(by_seed.values())
    if len(got) == 1 and got <= {SEEN, NOT_SEEN, NOT_MEASURED}:
        return got.pop()
    return WITHIN_NOISE


#: The three rules of the before/after table, as its note states them.
RULES_NOTE = (
    "Every seed: paired tests under Holm's rule in every seed, seen only when every seed sees it (the "
    "rule before the across-seed test). After: the mean effect over the seeds tested against the spread "
    "between seeds plus the sampling of the windows (paired across seeds) and trials, Holm's rule over the claims"
)


def table_before_after(summary: dict) -> str:
    """The verdicts of the rule before (interval overlap of percentile-bootstrap intervals, one
    seed), of paired tests that every seed must pass on its own, and of the current across-seed rule,
    claim by claim where the claims are the same, each list in its own order otherwise."""
    before = summary.get("verdicts_before")
    if not before:
        return "No earlier-rule verdicts recorded for this run."
    after = {v["claim"]: v for v in summary["verdicts"]}
    n = len(summary["seeds"])
    lines = [
        f"| claim | before: seed {before['seed']}, {before['rule_short']} | every seed: paired tests, Holm "
        f"| after: {n} seed{'s' if n != 1 else ''}, across-seed test, Holm |",
        "|---|---|---|---|",
    ]

    def cell(verdict: Optional[str]) -> str:
        return "not asked" if verdict is None else f"**{verdict}**" if verdict == SEEN else verdict

    middle = {claim: unanimous(v.get("by_seed") or {}) for claim, v in after.items()}
    shown = set()
    for v in before["verdicts"]:
        new = after.get(v["claim"])
        lines.append(
            f"| {v['claim']} | {cell(v['verdict'])} | {cell(middle.get(v['claim']))} | {cell(new and new['verdict'])} |"
        )
        shown.add(v["claim"])
    for claim, new in after.items():
        if claim not in shown:
            lines.append(f"| {claim} | not asked | {cell(middle[claim])} | {cell(new['verdict'])} |")
    counts = []
    for label, got in (
        ("before", [v["verdict"] for v in before["verdicts"]]),
        ("every seed", list(middle.values())),
        ("after", [v["verdict"] for v in after.values()]),
    ):
        counts.append(f"{label}: {got.count(SEEN)} seen and {got.count(NOT_SEEN)} not seen of {len(got)}")
    return "\n".join(lines + ["", f"{before['rule']}. {RULES_NOTE}. " + "; ".join(counts) + "."])


def table_command(summary: dict) -> str:
    return "```bash\n" + summary["command"] + "\n```"


TABLES = {
    "bpb": table_bpb,
    "extension": lambda s: table_bpb(s, extension=True),
    "retrieval": table_retrieval,
    "extension-retrieval": lambda s: table_retrieval(s, extension=True),
    "verdicts": table_verdicts,
    "findings": table_findings,
    "time": table_time,
    "command": table_command,
    "before-after": table_before_after,
}


def render_text(text: str, summaries: Dict[str, dict], where: str = "") -> str:
    """``text`` with every marked block rendered from its summary; ValueError for a block that
    names an unknown summary or table."""

    def one(match: "re.Match[str]") -> str:
        name, table = match.group("name"), match.group("table")
        if name not in summaries:
            raise ValueError(f"{where}: block names the summary {name!r}; committed: {sorted(summaries)}")
        if table not in TABLES:
            raise ValueError(f"{where}: block names the table {table!r}; allowed: {sorted(TABLES)}")
        return match.group(1) + TABLES[table](summaries[name]) + "\n" + match.group(5)

    return BLOCK.sub(one, text)


def stale_blocks(root: Path, summaries: Optional[Dict[str, dict]] = None) -> List[str]:
    """Docs files under ``root`` whose marked blocks differ from their summaries."""
    summaries = load_summaries() if summaries is None else summaries
    stale = []
    for name in DOC_FILES:
        path = Path(root) / name
        text = path.read_text(encoding="utf-8")
        if render_text(text, summaries, name) != text:
            stale.append(name)
    return stale


def parser() -> argparse.ArgumentParser:
    """The command line of ``python -m posenc.measuring.lab.summary``."""
    parser = argparse.ArgumentParser(prog="python -m posenc.measuring.lab.summary", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    w = sub.add_parser("write", help="write the summary of a run (or seeds) folder")
    w.add_argument("run")
    w.add_argument("name", help="summary name (file posenc/runs/lab_summaries/NAME.json)")
    w.add_argument("--command", required=True, help="the command that made the run, as a reader would type it")
    w.add_argument(
        "--cpu-seconds", default="", help="SEED=SECONDS,...: CPU time of each seed's run, measured outside it"
    )
    w.add_argument("--cpu-source", default="", help="how --cpu-seconds was measured")
    w.add_argument("--only", default="", help="SEED,...: summarise only these seeds of a seeds folder")
    r = sub.add_parser("recombine", help="recompute a committed summary's verdicts across seeds")
    r.add_argument("name", help="summary name (file posenc/runs/lab_summaries/NAME.json)")
    for verb in ("render", "check"):
        sub.add_parser(verb, help=f"{verb} the marked blocks of {', '.join(DOC_FILES)}").add_argument(
            "--root", default=".", help="repository root"
        )
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.what == "write":
            cpu = {}
            for item in filter(None, args.cpu_seconds.split(",")):
                seed, _, seconds = item.partition("=")
                try:
                    cpu[int(seed)] = float(seconds)
                except ValueError:
                    raise ValueError(f"--cpu-seconds takes SEED=SECONDS,..., got {item!r}") from None
            if cpu and not args.cpu_source:
                raise ValueError("--cpu-seconds needs --cpu-source, saying how the time was measured")
            try:
                only = [int(x) for x in args.only.split(",")] if args.only else None
            except ValueError:
                raise ValueError(f"--only takes SEED,..., got {args.only!r}") from None
            summary = summarize(
                Path(args.run), args.name, args.command, cpu_seconds=cpu, cpu_source=args.cpu_source, only=only
            )
            write_run_file(SUMMARIES_DIR / f"{args.name}.json", "summary", summary)
            return 0
        if args.what == "recombine":
            path = SUMMARIES_DIR / f"{args.name}.json"
            summary = load_json_file(path, "summary")
            if summary is None:
                raise ValueError(f"no committed summary {args.name!r}; committed: {sorted(load_summaries())}")
            write_run_file(path, "summary", recombine(summary))
            return 0
        summaries = load_summaries()
        if args.what == "check":
            stale = stale_blocks(Path(args.root), summaries)
            for name in stale:
                print(
                    f"{name}: lab-run blocks differ from the summaries; "
                    "run python -m posenc.measuring.lab.summary render"
                )
            return 1 if stale else 0
        for name in DOC_FILES:
            path = Path(args.root) / name
            atomic_write_text(path, render_text(path.read_text(encoding="utf-8"), summaries, name))
        return 0
    except (RunFileError, ValueError, OSError) as err:
        print(f"posenc lab summary: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
