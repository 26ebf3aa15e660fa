"""The tasks of :mod:`.tasks` run on a loaded model (``--tasks``): prompts, greedy continuations,
scores (:mod:`.scoring`), the cells ``progress.json`` keeps and their part of ``results.json``.

A cell is one task under one scaling at one length (and one depth for the needle tasks), keyed
``task:<name>|<scaling>|<length>[|<depth>]``. A needle cell holds ``--task-trials`` trials; a cell
of the other tasks holds ``--task-trials x len(--depths)`` trials, so every task weighs the same in a
length's pooled score. Each trial's record holds what it asked (haystack offset, needles with their
keys, values, depths and token positions, the answers) and what the model wrote (``prediction``),
with its exact match and recall: the results file alone gives every number.

``results.json`` gains ``tasks[task][scaling][length]`` (exact matches, Wilson interval, recall,
per depth for the needle tasks, with the records) and ``task_summary`` (per scaling: pooled score per
length, effective length, retention; which tasks are pooled).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from . import scoring
from .files import EvalError, depth_key
from .tasks import TASKS, Frame, Prompt, Source, TaskTooLong, build, parse_tasks, trial_rng, word_list

PREFIX = "task:"


@dataclass(frozen=True)
class Context:
    """What every task cell reads besides the model: the prompts' :class:`~.tasks.Source` and
    :class:`~.tasks.Frame`, and the tokenizer's end-of-sequence id (a continuation stops there)."""

    source: Source
    frame: Frame
    eos: Optional[int]


def parse_flags(args: Any) -> Dict[str, Any]:
    """``--tasks``, ``--task-trials`` (default: ``--passkey-trials``), ``--chat`` and ``--threshold``,
    checked, by field name; :class:`EvalError` names the flag and the value."""
    try:
        names = parse_tasks(args.tasks)
    except ValueError as err:
        raise EvalError(str(err)) from None
    given = args.passkey_trials if args.task_trials is None else args.task_trials
    flag = "--passkey-trials" if args.task_trials is None else "--task-trials"
    text = str(given).strip()
    trials = 0 if text == "0" else _positive_int(flag, text)
    try:
        threshold = float(args.threshold)
    except ValueError:
        threshold = math.nan
    if not 0.0 <= threshold <= 1.0:
        raise EvalError(f"--threshold must be a number from 0 to 1, got {args.threshold!r}")
    return {"tasks": names if trials else (), "task_trials": trials, "chat": bool(args.chat), "threshold": threshold}


def _positive_int(flag: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1 or value > 10**6:
        raise EvalError(f"{flag} must be an integer from 0 to 1000000, got {text[:40]!r}")
    return value


# -- the context ------------------------------------------------------------------------------------------
def context(tokenizer: Any, tokens: np.ndarray, bos: Optional[int], chat: bool) -> Context:
    """The :class:`Context` of a loaded tokenizer and the text's token stream ``(N,)``. With ``chat``
    the tokenizer's chat template frames each prompt as one user message (the answer's opening then
    follows the template's assistant turn); a tokenizer without a template is refused."""

    def encode(text: str) -> List[int]:
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(ids: Sequence[int]) -> str:
        return str(tokenizer.decode(list(ids)))

    head: List[int] = [] if bos is None else [bos]
    tail: List[int] = []
    if chat:
        if not getattr(tokenizer, "chat_template", None):
            raise EvalError("--chat: the checkpoint's tokenizer has no chat template; drop --chat")
        marker = "\u2063posenc-task\u2063"
        framed = tokenizer.apply_chat_template(
            [{"role": "user", "content": marker}], tokenize=False, add_generation_prompt=True
        )
        if framed.count(marker) != 1:
            raise EvalError("--chat: the chat template does not place the user's message once; drop --chat")
        before, after = framed.split(marker)
        head, tail = encode(before), encode(after)
        if bos is not None and head[:1] != [bos]:
            head = [bos] + head
    words = word_list(decode(np.asarray(tokens[:4_000_000]).tolist()))
    if len(words) < 200:
        raise EvalError(f"--text has {len(words)} distinct lowercase words of 5 to 10 letters; the tasks need 200")
    eos = getattr(tokenizer, "eos_token_id", None)
    return Context(Source(np.asarray(tokens), encode, decode, words), Frame(tuple(head), tuple(tail)), eos)


# -- the cells --------------------------------------------------------------------------------------------
def cell_trials(name: str, task_trials: int, depths: Sequence[float]) -> int:
    """Trials of one cell of ``name``: ``task_trials`` per depth for a needle task, else all depths' worth."""
    return task_trials if TASKS[name].depth_grid else task_trials * len(depths)


def prompts(ctx: Context, name: str, n: int, depth: Optional[float], trials: int, seed: int) -> List[Prompt]:
    """The prompts of one cell, a pure function of its coordinates (:func:`~.tasks.trial_rng`)."""
    task = TASKS[name]
    return [build(task, ctx.source, n, depth, trial_rng(seed, name, n, depth, t), ctx.frame) for t in range(trials)]


def jobs(ev: Any, ctx: Context, specs: Sequence[Any], runnable: Sequence[int], skipped: Dict[str, str]) -> List[tuple]:
    """The task cells to measure, ``(kind, spec, length, depth)``; a task that cannot fit a length is
    added to ``skipped`` (``<task>@<length>``) with the tokens it needs."""
    out: List[tuple] = []
    for name in ev.tasks:
        depths: List[Optional[float]] = list(ev.depths) if TASKS[name].depth_grid else [None]
        for n in runnable:
            try:  # every trial of every cell is built once here: a trial that does not fit skips the length
                for d in depths:
                    prompts(ctx, name, n, d, cell_trials(name, ev.task_trials, ev.depths), ev.seed)
            except TaskTooLong as err:
                skipped[f"{name}@{n}"] = str(err)
                continue
            except ValueError as err:
                raise EvalError(f"--tasks {name}: {err}") from None
            for spec in specs:
                out += [(PREFIX + name, spec, n, d) for d in depths]
    return out


def measure_cell(ev: Any, inp: Any, ctx: Context, kind: str, n: int, depth: Optional[float]) -> Dict[str, Any]:
    """One task cell under the scaling already installed: its trials' records, exact matches and recalls."""
    name = kind[len(PREFIX) :]
    trials = prompts(ctx, name, n, depth, cell_trials(name, ev.task_trials, ev.depths), ev.seed)
    per_pass = max(1, ev.batch_size * (ev.span // n))
    written: List[List[int]] = [[] for _ in trials]
    by_size: Dict[int, List[int]] = {}
    for i, p in enumerate(trials):  # the list tasks' prompts may differ in length; each size is a batch
        by_size.setdefault(len(p.ids), []).append(i)
    for members in by_size.values():
        for s in range(0, len(members), per_pass):
            group = members[s : s + per_pass]
            rows = np.array([trials[i].ids for i in group], dtype=np.int64)
            steps = max(trials[i].max_new for i in group)
            out = greedy(inp.model, rows, steps, inp.device)
            for i, row in zip(group, out):
                written[i] = [int(t) for t in row[: trials[i].max_new]]
    records = []
    for p, ids in zip(trials, written):
        if ctx.eos is not None and ctx.eos in ids:
            ids = ids[: ids.index(ctx.eos)]
        prediction = ctx.source.decode(ids)
        exact, recall = scoring.score(prediction, p.answers)
        records.append({**p.record, "prediction": prediction, "correct": float(exact), "recall": recall})
    return {
        "trials": records,
        "correct": [r["correct"] for r in records],
        "recall": [r["recall"] for r in records],
    }


def greedy(model: Any, rows: np.ndarray, steps: int, device: Any) -> np.ndarray:
    """The ``steps`` tokens greedy decoding writes after each row of ``rows`` ``(n, L)``: ``(n, steps)``.

    One pass over the prompts fills the key-value cache; each further token is one step with it. Only
    the last position goes through the output head."""
    import inspect

    import torch

    from .measure import backbone

    base = backbone(model)
    # transformers 5 names the key-value cache ``cache``; earlier releases ``past_key_values``
    name = "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"
    with torch.no_grad():
        x = torch.from_numpy(rows).to(device)
        head = model.get_output_embeddings()
        out = base(input_ids=x, use_cache=True)
        token = head(out.last_hidden_state[:, -1]).float().argmax(-1)  # (n,)
        written = [token]
        for _ in range(steps - 1):
            held = out.get("cache") if out.get("cache") is not None else out.get("past_key_values")
            out = base(input_ids=token[:, None], use_cache=True, **{name: held})
            token = head(out.last_hidden_state[:, -1]).float().argmax(-1)  # (n,)
            written.append(token)
        return torch.stack(written, dim=1).cpu().numpy()


def check_cell(key: str, cell: Any, settings: Dict[str, Any]) -> Optional[str]:
    """Why a stored task cell cannot be one of this evaluation's (``None`` when it can)."""
    parts = key.split("|")
    name = parts[0][len(PREFIX) :]
    if name not in settings.get("tasks", ()) or len(parts) != (4 if TASKS[name].depth_grid else 3):
        return "is not a task cell of this evaluation (task:<name>|scaling|length[|depth])"
    if parts[1] not in {s["label"] for s in settings["scalings"]} or parts[2] not in {
        str(n) for n in settings["lengths"]
    }:
        return "names a scaling or length this evaluation does not measure"
    if len(parts) == 4 and parts[3] not in {depth_key(d) for d in settings["depths"]}:
        return "names a depth this evaluation does not measure"
    if not isinstance(cell, dict):
        return "is not a mapping"
    trials = cell_trials(name, settings["task_trials"], settings["depths"])
    for field in ("correct", "recall"):
        values = cell.get(field)
        if not isinstance(values, list) or len(values) != trials:
            return f"needs {field} as {trials} numbers (one per trial)"
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
                return f"has a {field} value that is not a number from 0 to 1"
    if any(v not in (0, 1) for v in cell["correct"]):
        return "has an exact match other than 0 or 1"
    records = cell.get("trials")
    if not isinstance(records, list) or len(records) != trials or not all(_record_ok(r) for r in records):
        return f"needs trials as {trials} records, each with its prediction and answers"
    return None


def _record_ok(record: Any) -> bool:
    return (
        isinstance(record, dict)
        and isinstance(record.get("prediction"), str)
        and isinstance(record.get("answers"), list)
        and all(isinstance(a, str) for a in record["answers"])
    )
