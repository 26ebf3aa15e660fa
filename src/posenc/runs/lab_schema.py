"""The lab's run files, typed: one definition that the lab's writer (``posenc.measuring.lab``) and the explorer's
reader share, kept in the run-file layer so that neither app imports the other.

A run folder holds four JSON files and one checkpoint per scheme. Each JSON file is an object with
two stamp fields beside its content::

    {"schema_version": 2, "kind": "results", ...}

``kind`` is one of :data:`KINDS`; ``schema_version`` is :data:`SCHEMA_VERSION` for files this version
writes. Files without a stamp were written by posenc before the files were versioned (version 1).
Reading an older or newer file raises :class:`RunFileError` naming the file, the two versions and
what to do, and so does a file that is truncated, corrupt or of the wrong kind.

The typed content of ``results.json`` (:class:`Results` and its parts) is defined below; ``config.json``
is :class:`~posenc.measuring.lab.config.LabConfig`, ``corpus.json`` is ``Corpus.summary()`` and
``progress.json`` is the record of finished work (:class:`Progress`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from .files import ReadError, read_capped

#: Version of every run file this posenc writes. 2 added the stamp, passkey retrieval, the learning
#: rate sweep and interval verdicts.
SCHEMA_VERSION = 2
#: The committed run summaries (``kind: "summary"``), shipped with the package: the lab writes them
#: (``python -m posenc.measuring.lab.summary``) and the explorer shows them without a run folder.
SUMMARIES_DIR = Path(__file__).parent / "lab_summaries"
KINDS = ("config", "corpus", "progress", "results", "checkpoint", "summary")
#: The stamp on every smoke report and view.
MACHINERY_CHECK = "machinery check: numbers carry no meaning"
#: Below these a run checks the machinery only: its numbers get no verdicts (training steps,
#: validation windows, passkey trials per cell).
MIN_STEPS, MIN_WINDOWS, MIN_TRIALS = 200, 32, 30
#: What a user can do about a broken file of the lab's own run folder.
LAB_ADVICE = (
    "delete it and run `posenc lab --resume RUN` to redo only what it held, or start the "
    "run over with `posenc lab --out RUN --fresh`"
)


class RunFileError(ValueError):
    """A run file that cannot be used: missing stamp fields, another version, corrupt, truncated.

    ``str(err)`` is one line: the file, what is wrong with it, and what to do.
    """

    def __init__(self, path, problem: str, advice: str = LAB_ADVICE):
        self.path, self.problem, self.advice = str(path), problem, advice
        super().__init__(f"{self.path}: {problem}; {advice.replace('RUN', _run_of(path))}")


def _run_of(path) -> str:
    path = Path(path)
    parent = path.parent.parent if path.parent.name == "checkpoints" else path.parent
    return str(parent)


def stamp(kind: str, content: dict) -> dict:
    """``content`` with the stamp fields first (a new dict)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {list(KINDS)}, got {kind!r}")
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": kind,
        **{k: v for k, v in content.items() if k not in ("schema_version", "kind")},
    }


def machinery_check_reason(cfg: Any) -> Optional[str]:
    """Why a run of config ``cfg`` is too small for its numbers to mean anything, or None.

    Decided by the run's size, whatever its preset is called: fewer than :data:`MIN_STEPS`
    training steps, fewer than :data:`MIN_WINDOWS` validation windows, or (with retrieval) fewer
    than :data:`MIN_TRIALS` keys per cell."""
    if not isinstance(cfg, dict):
        return f"no readable config (got {type(cfg).__name__})"
    reasons = []
    steps, windows, trials = cfg.get("steps"), cfg.get("eval_windows"), cfg.get("retrieval_trials")
    if not isinstance(steps, int) or steps < MIN_STEPS:
        reasons.append(f"{steps} training steps (fewer than {MIN_STEPS})")
    if not isinstance(windows, int) or windows < MIN_WINDOWS:
        reasons.append(f"{windows} validation windows (fewer than {MIN_WINDOWS})")
    if isinstance(trials, int) and 0 < trials < MIN_TRIALS:
        reasons.append(f"{trials} passkey trials per cell (fewer than {MIN_TRIALS})")
    return "; ".join(reasons) or None


def version_of(data: Any) -> Optional[int]:
    """The schema version a loaded file declares: an int, 1 for an unstamped object, None if the
    file is not an object at all."""
    if not isinstance(data, dict):
        return None
    version = data.get("schema_version", 1)
    return version if isinstance(version, int) and not isinstance(version, bool) else None


def check_stamp(kind: str, data: Any, path, advice: str = LAB_ADVICE) -> dict:
    """Return ``data`` without its stamp if it is a ``kind`` file of this version, else raise
    :class:`RunFileError` saying which version it is and what to do."""
    if not isinstance(data, dict):
        raise RunFileError(path, f"does not hold a JSON object (found {type(data).__name__})", advice)
    version = version_of(data)
    if version is None:
        raise RunFileError(path, f"has schema_version {data.get('schema_version')!r}, not an integer", advice)
    if version < SCHEMA_VERSION:
        raise RunFileError(
            path,
            f"was written by an older posenc (run-file version {version}; this posenc reads version {SCHEMA_VERSION})",
            advice,
        )
    if version > SCHEMA_VERSION:
        raise RunFileError(
            path,
            f"was written by a newer posenc (run-file version {version}; this "
            f"posenc reads up to {SCHEMA_VERSION}): upgrade posenc to read it",
            "or " + advice,
        )
    if data.get("kind") != kind:
        raise RunFileError(path, f"is a {data.get('kind')!r} file, expected {kind!r}", advice)
    return {k: v for k, v in data.items() if k not in ("schema_version", "kind")}


#: Largest run file read (bytes) and deepest nesting of its JSON; the lab writes far less of both.
MAX_FILE_BYTES = 64 * 2**20
MAX_DEPTH = 32


def json_depth(data: Any, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of parsed JSON (a scalar is 0), counted without recursion; stops past ``limit``."""
    deepest, stack = 0, [(data, 0)]
    while stack:
        value, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limit:
            break
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
    return deepest


def read_json_limited(path, advice: str = LAB_ADVICE, max_bytes: int = MAX_FILE_BYTES, max_depth: int = MAX_DEPTH):
    """Parsed JSON of ``path``, read as a regular file with a size cap (:func:`posenc.runs.read_capped`)
    and a nesting limit; :class:`RunFileError` (one line naming the file) for anything but a regular
    file, or a file that is too large, too deep, unreadable, not UTF-8 or not JSON."""
    path = Path(path)
    try:
        raw = read_capped(path, advice, max_bytes)
    except ReadError as err:
        raise RunFileError(path, err.problem, advice) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise RunFileError(path, "is not UTF-8 text (corrupt)", advice) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise RunFileError(
            path, f"is not valid JSON (truncated or corrupt: {err.msg} at line {err.lineno})", advice
        ) from None
    except RecursionError:
        data = None
    if data is None and text.strip() != "null" or json_depth(data, max_depth) > max_depth:
        raise RunFileError(path, f"nests its JSON deeper than {max_depth} levels; not read", advice)
    return data


def load_json_file(path, kind: str, advice: str = LAB_ADVICE, max_bytes: Optional[int] = None):
    """Read and check a ``kind`` JSON file; ``None`` if it does not exist.

    Raises :class:`RunFileError` for a file that is unreadable, not UTF-8, not JSON (a truncated
    write), larger than ``max_bytes`` (default :data:`MAX_FILE_BYTES`), nested deeper than
    :data:`MAX_DEPTH`, or of another kind or version.
    """
    path = Path(path)
    if not path.exists():
        return None
    data = read_json_limited(path, advice, max_bytes=MAX_FILE_BYTES if max_bytes is None else max_bytes)
    return check_stamp(kind, data, path, advice)


# -- the typed content of results.json -------------------------------------------------------------
#: Names of the distance bins of passkey retrieval, in report order.
RETRIEVAL_BINS = ("near", "mid", "far")
#: Verdict outcomes (see posenc.measuring.lab.verdicts).
VERDICTS = ("seen", "within noise", "not seen", "not measured")


def _num(value) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:  # an int past float64 (400 digits)
        return None
    return value if math.isfinite(value) else None


def _pair(value) -> Optional[Tuple[float, float]]:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        lo, hi = _num(value[0]), _num(value[1])
        if lo is not None and hi is not None:
            return (lo, hi)
    return None


def _int(value) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value, limit: int = 300) -> Optional[str]:
    return value[:limit] if isinstance(value, str) else None


def _dict(value) -> Dict[str, Any]:
    return value if isinstance(value, dict) else {}


def length_key(key) -> Optional[int]:
    """A positive evaluation length from a JSON key (``"128"`` -> 128), else None."""
    try:
        length = int(str(key))
    except ValueError:
        return None
    return length if length > 0 else None


@dataclass
class RetrievalCell:
    """Passkey retrieval at one length and one distance bin (means over trials, 95% intervals)."""

    accuracy: Optional[float] = None  # greedy exact match, 0..1
    accuracy_ci: Optional[Tuple[float, float]] = None
    logp_bits: Optional[float] = None  # mean log2 p(key)
    logp_bits_ci: Optional[Tuple[float, float]] = None
    trials: Optional[int] = None
    distance: Optional[Tuple[float, float]] = None  # inclusive range of the bin

    @classmethod
    def parse(cls, raw, where: str, notes: List[str]) -> Optional["RetrievalCell"]:
        if not isinstance(raw, dict):
            notes.append(f"{where}: not a retrieval result")
            return None
        cell = cls(
            _num(raw.get("accuracy")),
            _pair(raw.get("accuracy_ci")),
            _num(raw.get("logp_bits")),
            _pair(raw.get("logp_bits_ci")),
            _int(raw.get("trials")),
            _pair(raw.get("distance")),
        )
        if cell.accuracy is None:
            notes.append(f"{where}: accuracy is not a finite number")
        return cell


@dataclass
class EvalEntry:
    """One model at one length: bits per byte (95% intervals), retrieval, and notes."""

    bpb: Optional[float] = None
    bpb_ci: Optional[Tuple[float, float]] = None
    bpb_last_quarter: Optional[float] = None
    bpb_last_quarter_ci: Optional[Tuple[float, float]] = None
    bpb_final32: Optional[float] = None
    bpb_final32_ci: Optional[Tuple[float, float]] = None
    n_windows: Optional[int] = None
    cannot: bool = False  # a learned table past its rows
    note: Optional[str] = None
    retrieval: Dict[str, RetrievalCell] = field(default_factory=dict)
    finetuned: Optional["EvalEntry"] = None  # extension entries only

    @classmethod
    def parse(cls, raw, where: str, notes: List[str]) -> Optional["EvalEntry"]:
        if not isinstance(raw, dict):
            notes.append(f"{where}: not an evaluation result")
            return None
        entry = cls(cannot=raw.get("cannot") is True, note=_text(raw.get("note")), n_windows=_int(raw.get("n_windows")))
        for key in ("bpb", "bpb_last_quarter", "bpb_final32"):
            setattr(entry, key, _num(raw.get(key)))
            setattr(entry, key + "_ci", _pair(raw.get(key + "_ci")))
            if key in raw and getattr(entry, key) is None:
                notes.append(f"{where}: {key} is not a finite number")
        retrieval = raw.get("retrieval")
        if isinstance(retrieval, dict):
            for name in RETRIEVAL_BINS:
                if name in retrieval:
                    cell = RetrievalCell.parse(retrieval[name], f"{where}, retrieval {name}", notes)
                    if cell is not None:
                        entry.retrieval[name] = cell
        elif retrieval is not None:
            notes.append(f"{where}: retrieval is not an object")
        if "finetuned" in raw:
            entry.finetuned = cls.parse(raw["finetuned"], f"{where}, fine-tuned", notes)
        return entry


@dataclass
class Side:
    """One side of a verdict's comparison."""

    label: str = ""
    value: Optional[float] = None
    ci: Optional[Tuple[float, float]] = None

    @classmethod
    def parse(cls, raw) -> Optional["Side"]:
        if not isinstance(raw, dict):
            return None
        return cls(_text(raw.get("label"), 120) or "", _num(raw.get("value")), _pair(raw.get("ci")))


@dataclass
class Verdict:
    """A claim from the literature and what this run's intervals say about it."""

    claim: str = ""
    verdict: str = "not measured"  # one of VERDICTS
    evidence: str = ""
    group: str = "perplexity"  # perplexity, retrieval, retrieval-logp, extension, extension-retrieval(-logp)
    scheme: Optional[str] = None  # what the claim is about, for side-by-side
    expected: Optional[str] = None  # what the literature reports
    a: Optional[Side] = None
    b: Optional[Side] = None

    @classmethod
    def parse(cls, raw) -> Optional["Verdict"]:
        if not isinstance(raw, dict) or not isinstance(raw.get("claim"), str):
            return None
        given = raw.get("verdict")
        verdict = given if isinstance(given, str) and given in VERDICTS else "not measured"
        if "verdict" not in raw and isinstance(raw.get("seen"), bool):  # run-file version 1
            verdict = "seen" if raw["seen"] else "not seen"
        return cls(
            raw["claim"][:300],
            verdict,
            _text(raw.get("evidence"), 600) or "",
            _text(raw.get("group"), 40) or "perplexity",
            _text(raw.get("scheme"), 40),
            _text(raw.get("expected"), 200),
            Side.parse(raw.get("a")),
            Side.parse(raw.get("b")),
        )


@dataclass
class SchemeResult:
    train: Dict[str, Any] = field(default_factory=dict)  # steps, final_bpb, parameters, lr, ...
    eval: Dict[str, EvalEntry] = field(default_factory=dict)
    loss_by_position: Dict[str, List[Optional[float]]] = field(default_factory=dict)


@dataclass
class Results:
    """The content of ``results.json``. Lengths are JSON keys (strings) of byte counts."""

    config: Dict[str, Any] = field(default_factory=dict)
    corpus: Dict[str, Any] = field(default_factory=dict)
    complete: Optional[bool] = None
    machinery_check: bool = False  # a smoke run: numbers carry no meaning
    train_len: Optional[int] = None
    eval_lengths: List[int] = field(default_factory=list)
    schemes: Dict[str, SchemeResult] = field(default_factory=dict)
    extension: Dict[str, Dict[str, EvalEntry]] = field(default_factory=dict)
    lr_sweep: Dict[str, Dict[str, Any]] = field(default_factory=dict)  # scheme -> {rates, chosen}
    verdicts: List[Verdict] = field(default_factory=list)
    # the processes that ran it: {"world_size": int, "backend": "gloo" | "nccl" | None}; {} in older files
    distributed: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, data: dict, max_entries: int = 64) -> Tuple["Results", List[str]]:
        """Typed results from a checked ``results.json`` payload, and notes on every entry that was
        missing or malformed (dropped, never guessed)."""
        notes: List[str] = []
        out = cls(
            complete=data.get("complete") if isinstance(data.get("complete"), bool) else None,
            machinery_check=data.get("machinery_check") is True,
        )
        out.config = _dict(data.get("config"))
        if not out.config:
            notes.append("config is missing")
        out.corpus = _dict(data.get("corpus"))
        out.distributed = _dict(data.get("distributed"))
        out.train_len = _int(data.get("train_len"))
        if out.train_len is None or out.train_len < 1:
            notes.append("train_len is missing")
            out.train_len = None
        lengths = data.get("eval_lengths")
        if isinstance(lengths, list):
            out.eval_lengths = sorted({v for v in map(length_key, lengths[:max_entries]) if v})
        else:
            notes.append("eval_lengths is missing")
        raw = data.get("schemes")
        if not isinstance(raw, dict) or not raw:
            notes.append("schemes is missing: no per-scheme results yet")
            raw = {}
        for name, entry in list(raw.items())[:max_entries]:
            name = str(name)[:40]
            if not isinstance(entry, dict):
                notes.append(f"scheme {name!r} has no results")
                continue
            result = SchemeResult(train=_dict(entry.get("train")))
            evals = entry.get("eval")
            if not isinstance(evals, dict):
                notes.append(f"scheme {name!r}: no evaluation results")
                evals = {}
            result.eval = _per_length(evals, f"scheme {name!r}", "is not a length with results", notes, max_entries)
            curves = entry.get("loss_by_position")
            if isinstance(curves, dict):
                for key, values in list(curves.items())[:max_entries]:
                    if length_key(key) is None or not isinstance(values, list):
                        notes.append(
                            f"scheme {name!r}: loss_by_position entry {str(key)[:40]!r} is not a list of losses"
                        )
                        continue
                    result.loss_by_position[str(length_key(key))] = [_num(v) for v in values]
            else:
                notes.append(f"scheme {name!r}: no loss_by_position")
            out.schemes[name] = result
        raw_ext = data.get("extension")
        if isinstance(raw_ext, dict):
            for method, per_len in list(raw_ext.items())[:max_entries]:
                method = str(method)[:40]
                if not isinstance(per_len, dict):
                    notes.append(f"extension {method!r}: no results")
                    continue
                out.extension[method] = _per_length(
                    per_len, f"extension {method!r}", "is not a length", notes, max_entries
                )
        else:
            notes.append("extension is missing: no context-extension results")
        sweep = data.get("lr_sweep")
        if isinstance(sweep, dict):
            out.lr_sweep = {str(k)[:40]: v for k, v in list(sweep.items())[:max_entries] if isinstance(v, dict)}
        raw_verdicts = data.get("verdicts")
        if isinstance(raw_verdicts, list):
            out.verdicts = [v for v in map(Verdict.parse, raw_verdicts[:max_entries]) if v is not None]
        if not out.eval_lengths:
            out.eval_lengths = sorted({int(k) for s in out.schemes.values() for k in s.eval})
        if out.complete is False:
            notes.append("the run is not complete: results so far")
        return out, notes


def _per_length(raw: dict, where: str, not_length: str, notes: List[str], max_entries: int) -> Dict[str, EvalEntry]:
    """The evaluation entries of ``raw`` by length (at most ``max_entries`` read); a key that is not a
    length (``where: entry K <not_length>``) or a malformed entry is dropped with a note."""
    table: Dict[str, EvalEntry] = {}
    for key, e in list(raw.items())[:max_entries]:
        if length_key(key) is None:
            notes.append(f"{where}: entry {str(key)[:40]!r} {not_length}")
            continue
        parsed = EvalEntry.parse(e, f"{where}, length {key}", notes)
        if parsed is not None:
            table[str(length_key(key))] = parsed
    return table


#: the bounds of what a measurement writes into a lab cell: bits per byte (a byte model's loss is a
#: few bits; 1e6 is far past any loss and far below where a sum over windows could overflow), CPU
#: seconds, and ``log2 p(key)`` of a passkey
MAX_BPB = 1e6
MAX_SECONDS = 1e12
MAX_LOGP_BITS = 1e12
MAX_COUNT = 2**53


def _within(value: Any, low: float, high: float) -> bool:
    """Whether ``value`` is a number (not a bool) from ``low`` to ``high``: NaN, infinity, a string and an
    int of 400 digits are not (an int of any size compares exactly)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and low <= value <= high


def _numbers(value: Any, low: float, high: float, size: Optional[int] = None, whole: bool = False) -> bool:
    """Whether ``value`` is a list (of ``size`` when given) of numbers from ``low`` to ``high``."""
    return (
        isinstance(value, list)
        and (size is None or len(value) == size)
        and all(_within(v, low, high) and (not whole or v == int(v)) for v in value)
    )


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:40]}... ({len(text)} characters)"


def _unsafe(value: Any, where: str = "") -> Optional[str]:
    """Where ``value`` holds something no results file should (``None`` when nothing): a number that
    is NaN, infinite or past float64 (a 400-digit int), anywhere inside lists and objects."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return None
    if isinstance(value, (int, float)):
        return None if -1e300 <= value <= 1e300 else f"{where or 'a field'} holds {_shown(value)}"
    if isinstance(value, list):
        for i, item in enumerate(value):
            problem = _unsafe(item, f"{where}[{i}]")
            if problem is not None:
                return problem
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            problem = _unsafe(item, f"{where}.{key}" if where else str(key)[:40])
            if problem is not None:
                return problem
        return None
    return f"{where or 'a field'} holds a {type(value).__name__}"


def _retrieval_problem(cell: Any) -> Optional[str]:
    """Why ``cell`` is not one distance bin's passkey result as the lab measures it (``None`` if it is)."""
    if not isinstance(cell, dict):
        return "is not an object"
    trials = cell.get("trials")
    if not (isinstance(trials, int) and _within(trials, 1, MAX_COUNT)):
        return f"has trials {_shown(trials)}, not a count >= 1"
    checks = (
        ("accuracy", _within(cell.get("accuracy"), 0.0, 1.0), "a number from 0 to 1"),
        ("accuracy_ci", _numbers(cell.get("accuracy_ci"), 0.0, 1.0, 2), "two numbers from 0 to 1"),
        ("logp_bits", _within(cell.get("logp_bits"), -MAX_LOGP_BITS, 0.0), "a number <= 0"),
        ("logp_bits_ci", _numbers(cell.get("logp_bits_ci"), -MAX_LOGP_BITS, 0.0, 2), "two numbers <= 0"),
        ("correct", _numbers(cell.get("correct"), 0, 1, trials, whole=True), f"{trials} exact matches, each 0 or 1"),
        ("logp", _numbers(cell.get("logp"), -MAX_LOGP_BITS, 0.0, trials), f"{trials} numbers <= 0"),
        ("distance", _numbers(cell.get("distance"), 0, MAX_COUNT, 2, whole=True), "two whole numbers"),
    )
    for key, ok, allowed in checks:
        if not ok:
            return f"has {key} {_shown(cell.get(key))}, not {allowed}"
    return None


def check_progress_cell(cell: Any, finetuned: bool = False) -> Optional[str]:
    """Why ``cell`` cannot be a finished evaluation of ``progress.json`` (``None`` when it can): one
    model at one length as :func:`posenc.measuring.lab.evaluate.evaluate_at` returns it (or a learned
    table that ``cannot`` go past its rows), every number finite and in range, every list as long as its
    count says; with ``finetuned`` (an extension cell) a fine-tuned evaluation may sit inside, checked
    alike. A string, NaN or a 400-digit number planted anywhere in it is refused."""
    if not isinstance(cell, dict):
        return "is not an object"
    unsafe = _unsafe(cell)
    if unsafe is not None:
        return f"has {unsafe}, not a finite number"
    if finetuned and "finetuned" in cell:
        inner = check_progress_cell(cell["finetuned"])
        if inner is not None:
            return f"(fine-tuned) {inner}"
        if "bpb" not in cell:  # the fine-tuned result alone (the plain one not stored)
            return None
    if "cpu_seconds" in cell and not _within(cell["cpu_seconds"], 0.0, MAX_SECONDS):
        return f"has cpu_seconds {_shown(cell['cpu_seconds'])}, not a number of seconds >= 0"
    if "note" in cell and not isinstance(cell["note"], str):
        return f"has note {_shown(cell['note'])}, not text"
    if cell.get("cannot") is True:
        return None
    windows = cell.get("n_windows")
    if not (isinstance(windows, int) and _within(windows, 1, MAX_COUNT)):
        return f"has n_windows {_shown(windows)}, not a count >= 1"
    for key in ("bpb", "bpb_last_quarter", "bpb_final32"):
        if not _within(cell.get(key), 0.0, MAX_BPB):
            return f"has {key} {_shown(cell.get(key))}, not a finite number of bits per byte"
        if not _numbers(cell.get(key + "_ci"), 0.0, MAX_BPB, 2):
            return f"has {key}_ci {_shown(cell.get(key + '_ci'))}, not two numbers of bits per byte"
        if key + "_windows" in cell and not _numbers(cell[key + "_windows"], 0.0, MAX_BPB, windows):
            return f"has {key}_windows {_shown(cell[key + '_windows'])}, not {windows} numbers of bits per byte"
    if not _numbers(cell.get("loss_by_position"), 0.0, MAX_BPB):
        return f"has loss_by_position {_shown(cell.get('loss_by_position'))}, not a list of losses"
    retrieval = cell.get("retrieval")
    if retrieval is not None:
        if not isinstance(retrieval, dict) or not set(retrieval) <= set(RETRIEVAL_BINS):
            return f"has retrieval {_shown(retrieval)}, not an object of the bins {', '.join(RETRIEVAL_BINS)}"
        for name, bin_cell in retrieval.items():
            problem = _retrieval_problem(bin_cell)
            if problem is not None:
                return f"retrieval {name} {problem}"
    return None


@dataclass
class Progress:
    """The content of ``progress.json``: finished work, so ``--resume`` redoes nothing.

    ``eval[scheme][length]`` and ``extension[method][length]`` (with ``finetuned`` inside) hold the
    evaluation dicts as :func:`posenc.measuring.lab.evaluate.evaluate_at` returns them (with the CPU seconds
    the step took, ``cpu_seconds``); ``lr_sweep[scheme][rate]`` the selection loss of each sweep run
    (``None`` where that run diverged); ``cpu_seconds`` the CPU time (user + system, every thread)
    the run's process has spent so far, summed over every session that resumed it.
    """

    eval: Dict[str, Dict[str, dict]] = field(default_factory=dict)
    extension: Dict[str, Dict[str, dict]] = field(default_factory=dict)
    lr_sweep: Dict[str, Dict[str, Optional[float]]] = field(default_factory=dict)
    cpu_seconds: float = 0.0

    @classmethod
    def from_dict(cls, data: dict, path) -> "Progress":
        """The progress ``data`` holds, every finished cell checked as a measurement could have made it
        (:func:`check_progress_cell`): a resumed run copies them into ``results.json`` as they are."""
        known = {f.name for f in fields(cls)}
        for key, value in data.items():
            if key not in known:
                raise RunFileError(path, f"has an unknown field {key!r} (known: {sorted(known)})")
            if key == "cpu_seconds":
                if not _within(value, 0.0, MAX_SECONDS):
                    raise RunFileError(path, f"field 'cpu_seconds' is not a number of seconds >= 0: {_shown(value)}")
            elif not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
                raise RunFileError(path, f"field {key!r} is not an object of objects")
        for key in ("eval", "extension"):
            for name, per_len in data.get(key, {}).items():
                for length, cell in per_len.items():
                    problem = check_progress_cell(cell, finetuned=key == "extension")
                    if problem is not None:
                        where = f"{key} {str(name)[:40]!r} at {str(length)[:40]!r}"
                        raise RunFileError(path, f"cell {where} {problem}")
        for name, rates in data.get("lr_sweep", {}).items():
            for rate, score in rates.items():
                if score is not None and not _within(score, 0.0, MAX_BPB):
                    where = f"lr_sweep {str(name)[:40]!r} at {str(rate)[:40]!r}"
                    raise RunFileError(path, f"cell {where} is {_shown(score)}, not bits per byte or null")
        values: Dict[str, Any] = {k: data.get(k, {}) for k in known}
        values["cpu_seconds"] = float(data.get("cpu_seconds", 0.0))
        # Extension results stored before "dynamic_ntk" took its rope type's name "dynamic".
        ext = dict(values["extension"])
        if "dynamic_ntk" in ext:
            ext.setdefault("dynamic", ext.pop("dynamic_ntk"))
        values["extension"] = ext
        return cls(**values)

    def to_dict(self) -> dict:
        return {
            "eval": self.eval,
            "extension": self.extension,
            "lr_sweep": self.lr_sweep,
            "cpu_seconds": self.cpu_seconds,
        }
