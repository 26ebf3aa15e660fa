"""The RULER-style task generators and their scoring (``posenc.measuring.eval.tasks``, ``scoring``).

Every generator runs with a byte-level tokenizer (a lab export's) and a BPE tokenizer trained here;
each prompt is checked by an independent solver that reads only the prompt's text.
"""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np
import pytest

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

import task_support  # noqa: E402

from posenc.measuring.eval import scoring, taskrun, tasks  # noqa: E402
from posenc.measuring.eval.measure import wilson_interval  # noqa: E402
from posenc.measuring.eval.tasks import TASKS, Frame, Source, TaskTooLong  # noqa: E402

LENGTHS = {"byte": 1024, "bpe": 512}


@pytest.fixture(scope="module", params=["byte", "bpe"])
def ctx(request):
    text = task_support.sample_text()
    tok = task_support.byte_tokenizer() if request.param == "byte" else task_support.bpe_tokenizer(text)
    if request.param == "byte":
        text = text.encode("ascii", "ignore").decode()
    ids = np.asarray(task_support.encode_all(tok, text), dtype=np.int64)
    bos = None if request.param == "byte" else tok.bos_token_id
    c = taskrun.context(tok, ids, bos, chat=False)
    return {"ctx": c, "tok": tok, "kind": request.param, "n": LENGTHS[request.param]}


def _prompts(ctx, name, depth=0.5, trials=3, seed=0, n=None):
    return taskrun.prompts(ctx["ctx"], name, n or ctx["n"], depth if TASKS[name].depth_grid else None, trials, seed)


# -- an independent solver, from the prompt's text alone -----------------------------------------------
def solve(name: str, text: str) -> list:
    """The answers a perfect reader of ``text`` gives, by the task's rules (not the generator's code)."""
    family = TASKS[name].family
    question = text[text.rindex("\n") :]
    if family == "niah":
        pairs = re.findall(r"Remember: (\S+) has the magic (?:number|UUID) (\S+)\.\n", text)
        keys = re.findall(r"\b([0-9a-f-]{36}|[a-z]{5,10})\b", question.split("?")[0].split(" of ", 1)[1])
        return [v for k in keys for kk, v in pairs if kk == k]
    if family == "vt":
        value = re.search(r"hold the value (\d+)", question).group(1)
        held, chain = set(), re.findall(r"VAR ([A-Z]{5}) = (VAR [A-Z]{5}|\d+)\.", text)
        for a, b in chain:  # statements are written in order: each names one written before it
            if b == value or (b.startswith("VAR ") and b[4:] in held):
                held.add(a)
        return [a for a, _ in chain if a in held]
    if family == "cwe":
        counts = Counter(re.findall(r"^\d+\. (\S+)$", text, flags=re.M))
        return [w for w, _ in counts.most_common(10)]
    words = text.split("coded words.\n", 1)[1].split("\nWhich", 1)[0].split()
    return [w for w, _ in Counter(words).most_common(3)]


@pytest.mark.parametrize("name", list(TASKS))
def test_the_answer_is_recoverable_from_the_prompt_alone(ctx, name):
    for p in _prompts(ctx, name):
        text = ctx["ctx"].source.decode(p.ids)
        got = solve(name, text)
        assert sorted(got) == sorted(p.answers), (name, got, p.answers)
        assert scoring.score(" " + ", ".join(got), p.answers) == (True, 1.0)


@pytest.mark.parametrize("name", [n for n, t in TASKS.items() if t.family in ("niah", "vt")])
def test_no_key_or_answer_leaks_into_the_haystack(ctx, name):
    src = ctx["ctx"].source
    for p in _prompts(ctx, name, trials=4):
        ids = list(p.ids)
        needles = p.record["needles"]
        kept = list(ids)
        for nd in sorted(needles, key=lambda x: -x["position"]):  # cut each planted sentence out
            size = _planted_size(src, name, nd, needles)
            assert ids[nd["position"] : nd["position"] + size] == _planted_ids(src, name, nd, needles)
            del kept[nd["position"] : nd["position"] + size]
        question_at = src.decode(kept).rindex("\n")
        haystack = src.decode(kept)[:question_at]
        for nd in needles:
            assert nd["value"] not in haystack and nd["key"] not in haystack.split("below.", 1)[1]
        assert all(a not in haystack for a in p.answers)


def _planted_ids(src: Source, name: str, nd: dict, needles: list) -> list:
    if TASKS[name].family == "vt":
        first = nd is needles[0]
        prev = needles[needles.index(nd) - 1]["key"] if not first else None
        return src.encode(f"\nVAR {nd['key']} = {nd['value'] if first else 'VAR ' + prev}.\n")
    kind = "UUID" if TASKS[name].value == "uuid" else "number"
    return src.encode(f"\nRemember: {nd['key']} has the magic {kind} {nd['value']}.\n")


def _planted_size(src, name, nd, needles) -> int:
    return len(_planted_ids(src, name, nd, needles))


@pytest.mark.parametrize("name", list(TASKS))
def test_prompts_are_a_pure_function_of_the_seed_and_fill_the_length(ctx, name):
    a, b = _prompts(ctx, name, seed=3), _prompts(ctx, name, seed=3)
    assert [p.ids for p in a] == [p.ids for p in b] and [p.record for p in a] == [p.record for p in b]
    c = _prompts(ctx, name, seed=4)
    assert [p.ids for p in a] != [p.ids for p in c]
    for p in a:
        assert len(p.ids) == ctx["n"] if TASKS[name].haystack != "words" else 0.8 * ctx["n"] < len(p.ids) <= ctx["n"]
        assert p.record["prompt_tokens"] == len(p.ids)
    # a trial is rebuilt alone from its coordinates: trial 2 of three equals the only trial of its own rng
    t = TASKS[name]
    alone = tasks.build(
        t,
        ctx["ctx"].source,
        ctx["n"],
        0.5 if t.depth_grid else None,
        tasks.trial_rng(3, name, ctx["n"], 0.5 if t.depth_grid else None, 2),
        ctx["ctx"].frame,
    )
    assert alone.ids == a[2].ids


def test_needles_sit_at_their_depth(ctx):
    src = ctx["ctx"].source
    intro = len(ctx["ctx"].frame.head) + len(src.encode("Magic numbers are hidden in the text below. Remember them.\n"))
    for depth in (0.0, 0.25, 1.0):
        for p in _prompts(ctx, "niah_single_2", depth=depth):
            nd = p.record["needles"][0]
            key = nd["key"]
            tail = len(src.encode(f"\nWhat is the magic number of {key}?")) + len(
                src.encode(f" Answer: {key} has the magic number")
            )
            budget = len(p.ids) - intro - _planted_size(src, "niah_single_2", nd, p.record["needles"]) - tail
            place = nd["position"] - intro  # tokens of haystack before the needle
            assert nd["depth"] == depth
            # at round(depth * budget), or moved back to a line's end at most SNAP_TOKENS before it
            assert 0 <= round(depth * budget) - place <= tasks.SNAP_TOKENS


def test_too_short_a_length_is_refused_with_the_tokens_needed(ctx):
    with pytest.raises(TaskTooLong, match="needs about"):
        _prompts(ctx, "niah_multivalue", n=40)
    with pytest.raises(TaskTooLong):
        _prompts(ctx, "cwe", n=60)


def test_the_chat_frame_wraps_the_task_and_the_answer_opening_follows_it():
    text = task_support.sample_text()
    tok = task_support.bpe_tokenizer(text, chat=True)
    ids = np.asarray(task_support.encode_all(tok, text), dtype=np.int64)
    c = taskrun.context(tok, ids, tok.bos_token_id, chat=True)
    p = taskrun.prompts(c, "niah_single_2", 512, 0.5, 1, 0)[0]
    decoded = tok.decode(p.ids)
    assert decoded.startswith("<s><|user|>\nMagic numbers") and "<|end|>\n<|assistant|>\n Answer:" in decoded
    assert p.ids[0] == tok.bos_token_id and p.ids.count(tok.bos_token_id) == 1
    plain = task_support.bpe_tokenizer(text)
    with pytest.raises(Exception, match="no chat template"):
        taskrun.context(plain, ids, plain.bos_token_id, chat=True)


# -- scoring ------------------------------------------------------------------------------------------
def test_exact_match_and_recall():
    assert scoring.score(" 1234567.", ["1234567"]) == (True, 1.0)
    assert scoring.score(" 1234576", ["1234567"]) == (False, 0.0)
    assert scoring.score("abc, DEF and x", ["abc", "def", "ghi", "jkl"]) == (False, 0.5)
    assert scoring.score("", ["a"]) == (False, 0.0)
    with pytest.raises(ValueError, match="answers"):
        scoring.score("x", [])


@pytest.mark.parametrize("k,n", [(0, 1), (0, 10), (3, 10), (10, 10), (7, 64), (64, 64), (1, 1000)])
def test_wilson_interval_matches_scipy(k, n):
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    lo, hi = wilson_interval(k, n)
    assert lo == pytest.approx(ci.low, abs=1e-12) and hi == pytest.approx(ci.high, abs=1e-12)
    # and the textbook formula, written out once more
    z, p = 1.959963984540054, k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert lo == pytest.approx(max(0.0, centre - half), abs=1e-12) and hi == pytest.approx(
        min(1.0, centre + half), abs=1e-12
    )


def test_effective_length_is_the_last_length_of_an_unbroken_run_above_the_threshold():
    assert scoring.effective_length({64: 1.0, 128: 0.9, 256: 0.5, 512: 0.95}, 0.856) == 128  # 512 passes alone
    assert scoring.effective_length({64: 0.8, 128: 0.9}, 0.856) is None
    assert scoring.effective_length({64: 0.9, 128: 0.9}, 0.856) == 128
    assert scoring.effective_length({64: 0.856}, 0.856) == 64
    with pytest.raises(ValueError, match="threshold"):
        scoring.effective_length({64: 1.0}, float("nan"))


def test_summary_pools_trials_and_reads_retention_at_the_trained_length():
    outcomes = {
        "none": {64: [1, 1, 1, 0], 128: [1, 0, 0, 0]},
        "yarn:2": {64: [1, 1, 0, 0], 128: [1, 1, 1, 0]},
    }
    s = scoring.summary(outcomes, [64, 128], trained=64, threshold=0.7)
    assert s["none"]["effective_length"] == 64 and s["yarn:2"]["effective_length"] is None
    assert s["none"]["lengths"]["128"]["accuracy_ci"] == list(wilson_interval(1, 4))
    assert s["yarn:2"]["retention"] == {"length": 64, "ratio": pytest.approx(2 / 3), "bar": 0.985, "keeps": False}
    assert s["none"]["retention"]["ratio"] == 1.0 and s["none"]["retention"]["keeps"] is True
    assert scoring.retention(0.5, 0.0) is None


def test_parse_tasks():
    assert tasks.parse_tasks("small") == tasks.SMALL
    assert tasks.parse_tasks("ruler") == tuple(TASKS) and len(TASKS) == 11
    assert tasks.parse_tasks("vt,niah_single_1,vt") == ("niah_single_1", "vt")
    assert tasks.parse_tasks("none") == ()
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        tasks.parse_tasks("nope")


def test_zipf_counts():
    assert tasks.zipf_counts(20, 2.0) == [20, 5, 2, 1]
    assert tasks.zipf_counts(0, 2.0) == []


def test_frame_head_is_written_first():
    tok = task_support.byte_tokenizer()
    text = task_support.sample_text().encode("ascii", "ignore").decode()
    ids = np.asarray(task_support.encode_all(tok, text), dtype=np.int64)
    c = taskrun.context(tok, ids, None, chat=False)
    framed = taskrun.Context(c.source, Frame(head=(7, 7), tail=(9,)), None)
    p = taskrun.prompts(framed, "niah_single_1", 512, 0.0, 1, 0)[0]
    assert p.ids[:2] == [7, 7] and len(p.ids) == 512 and 9 in p.ids[-40:]
