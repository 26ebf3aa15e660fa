"""RULER's synthetic task families, generated offline and deterministically: prompts only, no model.

Hsieh et al. 2024, "RULER: What's the Real Context Size of Your Long-Context Language Models?"
(arXiv:2404.06654) measure a long-context model with synthetic tasks whose answer sits in the
prompt: needle retrieval in several variants, variable tracking over several hops, and two
aggregation tasks. This module writes such prompts for any tokenizer and any haystack text; the
wording is posenc's own, the families and their parameters are RULER's:

==================  =========  ========================================================================
task                haystack   what is planted and asked
==================  =========  ========================================================================
niah_single_1       noise      one word -> 7-digit number
niah_single_2       essay      one word -> 7-digit number
niah_single_3       essay      one word -> UUID
niah_multikey_1     essay      4 needles with distinct words; one is asked
niah_multikey_2     needles    the haystack is itself made of word -> number needles; one is asked
niah_multikey_3     needles    UUID -> UUID needles; one is asked
niah_multivalue     essay      4 numbers for one word; all 4 are asked
niah_multiquery     essay      4 needles with distinct words; all 4 are asked
vt                  noise      a chain ``VAR A = 12345``, ``VAR B = VAR A``, ... (4 hops); every name asked
cwe                 words      a numbered list: 10 words 30 times each among words 3 times each;
                               the 10 common ones asked
fwe                 words      words with Zipf (alpha 2) frequencies; the 3 most frequent asked
==================  =========  ========================================================================

*noise* is one sentence repeated; *essay* is the evaluation text itself (``--text``, by default the
lab corpus: Python source and its docstrings where RULER uses Paul Graham's essays); *needles* is
distractor needles of the task's own form. The essay is read from the text's token stream, so a
haystack of ``B`` tokens is exactly ``B`` tokens of the text; everything else is encoded piece by
piece (``encode`` of each sentence), so every prompt is a concatenation of known pieces and each
needle's position (its first token's index) is exact. Needle tasks place the (first) asked needle at
a depth of the grid (0 = first haystack token, 1 = the last) and every other needle at a depth drawn
from the trial's generator. A prompt holds ``length`` tokens exactly (the list tasks, whose list
cannot be cut, at most ``length``), then the model continues it.

**Determinism.** A trial is a pure function of the seed, the task's name, the length, the depth's
float and the trial's index (its own ``numpy`` generator), of the token stream and of the word list;
so the same trial can be rebuilt alone from what its record holds.

**No leaks.** No key or value of a trial occurs in its haystack's text (drawn again until none
does), and distractor keys and values differ from the asked ones, so the only place an answer is
written is its needle.
"""

from __future__ import annotations

import hashlib
import re
import struct
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

Encode = Callable[[str], List[int]]
Decode = Callable[[Sequence[int]], str]

#: The noise haystack's one sentence, repeated (posenc's own words).
NOISE = " The kettle sang on the stove and the cat slept by the door."
#: How many times a draw of keys and values is retried when one of them occurs in the haystack.
MAX_DRAWS = 64
#: Tokens searched back from a needle's place for the end of a line of the essay, so that a needle
#: never splits a line of the haystack when one ends nearby.
SNAP_TOKENS = 32


class TaskTooLong(ValueError):
    """The task's prompt cannot fit in the length asked for (``needed`` tokens at the least)."""

    def __init__(self, task: str, length: int, needed: int):
        super().__init__(f"{task} needs about {needed} tokens, more than the length {length}")
        self.needed = needed


@dataclass(frozen=True)
class Task:
    """One task of a family: its haystack and what is planted and asked (see the module table)."""

    name: str
    family: str  # "niah", "vt", "cwe" or "fwe"
    haystack: str  # "noise", "essay", "needles" or "words"
    about: str  # what it measures, in a line
    key: str = "word"  # needle keys: "word" or "uuid"
    value: str = "number"  # needle values: "number" (7 digits) or "uuid"
    keys: int = 1  # needles with distinct keys
    values: int = 1  # values planted for each asked key
    queries: int = 1  # keys asked at once

    @property
    def depth_grid(self) -> bool:
        """Whether the task's cells follow the needle depth grid (the needle tasks do)."""
        return self.family == "niah"


TASKS: Dict[str, Task] = {
    t.name: t
    for t in (
        Task("niah_single_1", "niah", "noise", "copy one number from a repetitive haystack"),
        Task("niah_single_2", "niah", "essay", "copy one number from real text"),
        Task("niah_single_3", "niah", "essay", "copy a UUID (long, many tokens) from real text", value="uuid"),
        Task("niah_multikey_1", "niah", "essay", "find the one asked key among 4 planted ones", keys=4),
        Task("niah_multikey_2", "niah", "needles", "find the asked key in a haystack made of needles"),
        Task("niah_multikey_3", "niah", "needles", "the same with UUID keys and values", key="uuid", value="uuid"),
        Task("niah_multivalue", "niah", "essay", "recall all 4 values planted for one key", values=4),
        Task("niah_multiquery", "niah", "essay", "answer 4 keys asked at once", keys=4, queries=4),
        Task("vt", "vt", "noise", "follow a chain of 4 assignments to every name holding a value"),
        Task("cwe", "cwe", "words", "count: name the 10 most common words of a long list"),
        Task("fwe", "fwe", "words", "count: name the 3 most frequent words of a Zipf-distributed text"),
    )
}
#: ``--tasks`` default: one needle task on real text, one with distractors, and the multi-hop one.
SMALL = ("niah_single_2", "niah_multikey_1", "vt")
#: ``--tasks ruler``: every family.
RULER = tuple(TASKS)
#: RULER's variable tracking: one chain of this many hops (each hop one more name).
VT_HOPS = 4
#: RULER's common-word extraction: 10 common words, 30 times each; the others 3 times each.
CWE_COMMON, CWE_FREQ_COMMON, CWE_FREQ_RARE = 10, 30, 3
#: RULER's frequent-word extraction: Zipf exponent and how many of the most frequent are asked.
FWE_ALPHA, FWE_ASKED = 2.0, 3


def parse_tasks(text: str) -> Tuple[str, ...]:
    """``--tasks``: comma-separated names of :data:`TASKS`, ``small``, ``ruler`` or ``none``; in
    :data:`TASKS`' order, without repeats. Raises ``ValueError`` naming the unknown name."""
    names: List[str] = []
    for part in (p.strip() for p in str(text).split(",")):
        if not part:
            continue
        group = {"small": SMALL, "ruler": RULER, "none": ()}.get(part)
        if group is None and part not in TASKS:
            raise ValueError(
                f"--tasks: unknown task {part[:40]!r}; give small, ruler, none or names among {', '.join(TASKS)}"
            )
        names += list(group if group is not None else (part,))
    return tuple(t for t in TASKS if t in names)


# -- what a prompt is ---------------------------------------------------------------------------------
@dataclass
class Prompt:
    """One trial's prompt: ``ids`` (the tokens the model reads), the ``answers`` a correct
    continuation holds, ``max_new`` (how many tokens the model may write) and ``record`` (what the
    trial asked: its haystack offset, needles with positions, answers; JSON-ready)."""

    ids: List[int]
    answers: List[str]
    max_new: int
    record: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Frame:
    """What surrounds a task's own text: ``head`` before it (a chat template's opening, a BOS) and
    ``tail`` between the question and the answer's opening (a chat template's close), as token ids."""

    head: Tuple[int, ...] = ()
    tail: Tuple[int, ...] = ()


@dataclass(frozen=True)
class Source:
    """What prompts are made of: the token stream of the text ``(N,)``, the tokenizer's ``encode``
    and ``decode``, and the word list keys and lists are drawn from (:func:`word_list`)."""

    tokens: np.ndarray
    encode: Encode
    decode: Decode
    words: Tuple[str, ...]
    memo: Dict[str, List[int]] = field(default_factory=dict, compare=False, repr=False)

    def piece(self, text: str) -> List[int]:
        """``encode(text)``, remembered (the list tasks encode the same few pieces thousands of times)."""
        ids = self.memo.get(text)
        if ids is None:
            ids = self.memo[text] = list(self.encode(text))
        return ids


def word_list(text: str, limit: int = 20000) -> Tuple[str, ...]:
    """The lowercase words of 5 to 10 letters of ``text``, sorted and unique, at most ``limit`` of
    them (evenly spaced): the vocabulary keys and the aggregation lists are drawn from."""
    words = sorted(set(re.findall(r"(?<![A-Za-z_])[a-z]{5,10}(?![A-Za-z_0-9])", text)))
    if len(words) > limit:
        words = [words[i] for i in np.linspace(0, len(words) - 1, limit).astype(int)]
    return tuple(words)


def trial_rng(seed: int, task: str, length: int, depth: Optional[float], trial: int) -> np.random.Generator:
    """The generator of one trial: a pure function of its coordinates (a depth by its float's bits)."""
    name = int.from_bytes(hashlib.sha256(task.encode("utf-8")).digest()[:4], "little")
    bits = struct.unpack("<Q", struct.pack("<d", float(depth)))[0] if depth is not None else 0
    return np.random.default_rng([seed, name, length, bits & 0xFFFFFFFF, bits >> 32, trial, 7919])


def build(task: Task, source: Source, length: int, depth: Optional[float], rng: np.random.Generator, frame: Frame):
    """One trial's :class:`Prompt` of ``task`` at ``length`` tokens, the asked needle at ``depth``
    (needle tasks; ``None`` for the others), from ``rng``. Raises :class:`TaskTooLong`."""
    builder = {"niah": _niah, "vt": _vt, "cwe": _cwe, "fwe": _fwe}[task.family]
    return builder(task, source, length, depth, rng, frame)


# -- draws --------------------------------------------------------------------------------------------
def _number(rng: np.random.Generator) -> str:
    return str(int(rng.integers(10**6, 10**7)))


def _uuid(rng: np.random.Generator) -> str:
    """A UUID of version 4's form, from ``rng``'s bits."""
    h = "".join(f"{int(b):02x}" for b in rng.integers(0, 256, size=16))
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) % 4]}{h[17:20]}-{h[20:32]}"


def _draw(kind: str, rng: np.random.Generator, words: Sequence[str]) -> str:
    if kind == "word":
        return str(words[int(rng.integers(0, len(words)))])
    return _number(rng) if kind == "number" else _uuid(rng)


def _distinct(kind: str, count: int, rng: np.random.Generator, words: Sequence[str], taken: set) -> List[str]:
    """``count`` draws of ``kind`` differing from each other and from ``taken`` (which grows)."""
    out: List[str] = []
    for _ in range(count * MAX_DRAWS):
        if len(out) == count:
            break
        item = _draw(kind, rng, words)
        if item not in taken:
            taken.add(item)
            out.append(item)
    if len(out) < count:
        raise ValueError(f"cannot draw {count} distinct {kind}s from a word list of {len(words)}")
    return out


# -- the needle tasks ---------------------------------------------------------------------------------
def _kind(value: str) -> str:
    return "UUID" if value == "uuid" else "number"


def _needle(task: Task, key: str, value: str) -> str:
    return f"\nRemember: {key} has the magic {_kind(task.value)} {value}.\n"


def _question(task: Task, asked: List[str]) -> Tuple[str, str]:
    """``(question, the answer's opening)`` of a needle task asking the keys ``asked``."""
    kind = _kind(task.value)
    if task.queries > 1:
        keys = ", ".join(asked[:-1]) + " and " + asked[-1]
        return (f"\nWhat are the magic {kind}s of {keys}?", " Answer: in that order, they are")
    if task.values > 1:
        return (f"\nWhat are all the magic {kind}s of {asked[0]}?", f" Answer: the magic {kind}s of {asked[0]} are")
    return (f"\nWhat is the magic {kind} of {asked[0]}?", f" Answer: {asked[0]} has the magic {kind}")


def _needles_of(
    task: Task, rng: np.random.Generator, words: Sequence[str]
) -> Tuple[List[Tuple[str, str, bool]], List[str]]:
    """``(needles as (key, value, asked), the answers in order)`` of one draw."""
    taken: set = set()
    keys = _distinct(task.key, task.keys, rng, words, taken)
    needles: List[Tuple[str, str, bool]] = []
    answers: List[str] = []
    for i, key in enumerate(keys):
        asked = i < task.queries
        for value in _distinct(task.value, task.values if asked else 1, rng, words, taken):
            needles.append((key, value, asked))
            if asked:
                answers.append(value)
    return needles, answers


def _haystack(task: Task, source: Source, budget: int, rng: np.random.Generator, avoid: set) -> Tuple[List[int], int]:
    """``(tokens, offset in the stream or -1)`` of a haystack of ``budget`` tokens."""
    if task.haystack == "essay":
        if source.tokens.size < budget + 1:
            raise ValueError(f"the text has {source.tokens.size} tokens, too few for a haystack of {budget}")
        offset = int(rng.integers(0, source.tokens.size - budget + 1))
        return [int(t) for t in source.tokens[offset : offset + budget]], offset
    if task.haystack == "noise":
        unit = source.piece(NOISE)
        return (unit * (budget // len(unit) + 1))[:budget], -1
    ids: List[int] = []  # needles: distractors of the task's own form, then noise up to the budget
    while True:
        key, value = (
            _distinct(task.key, 1, rng, source.words, avoid)[0],
            _distinct(task.value, 1, rng, source.words, avoid)[0],
        )
        more = source.encode(_needle(task, key, value))
        if len(ids) + len(more) > budget:
            break
        ids += more
    unit = source.piece(NOISE)
    return ids + (unit * (budget // len(unit) + 1))[: budget - len(ids)], -1


def _places(task: Task, haystack: List[int], depths: List[float], source: Source) -> List[int]:
    """Where each needle goes in the haystack (token index), from its depth; in an essay, moved back
    to just after a line's end when one is within :data:`SNAP_TOKENS`."""
    places = []
    for d in depths:
        p = int(round(d * len(haystack)))
        if task.haystack == "essay":
            for q in range(p, max(0, p - SNAP_TOKENS) - 1, -1):
                if q == 0 or source.decode(haystack[q - 1 : q]).endswith("\n"):
                    p = q
                    break
        places.append(p)
    return places


def _assemble(head: Sequence[int], haystack: List[int], inserts: List[Tuple[int, List[int]]], tail: Sequence[int]):
    """``(ids, position of each insert)``: ``head``, the haystack with each ``(place, ids)`` inserted
    (in order of place, ties in order given), then ``tail``."""
    order = sorted(range(len(inserts)), key=lambda i: (inserts[i][0], i))
    ids = list(head)
    positions = [0] * len(inserts)
    at = 0
    for i in order:
        place, piece = inserts[i]
        ids += haystack[at:place]
        at = place
        positions[i] = len(ids)
        ids += piece
    ids += haystack[at:]
    return ids + list(tail), positions


def _niah(task: Task, source: Source, length: int, depth: Optional[float], rng: np.random.Generator, frame: Frame):
    intro = source.encode(f"Magic {_kind(task.value)}s are hidden in the text below. Remember them.\n")
    for _ in range(MAX_DRAWS):
        needles, answers = _needles_of(task, rng, source.words)
        asked = list(dict.fromkeys(k for k, _, a in needles if a))
        question, opening = _question(task, asked)
        pieces = [source.encode(_needle(task, k, v)) for k, v, _ in needles]
        tail = source.encode(question) + list(frame.tail) + source.encode(opening)
        budget = length - len(frame.head) - len(intro) - sum(map(len, pieces)) - len(tail)
        if budget < 1:
            raise TaskTooLong(task.name, length, length - budget + 1)
        avoid = {k for k, _, _ in needles} | {v for _, v, _ in needles}
        haystack, offset = _haystack(task, source, budget, rng, set(avoid))
        if not any(s in source.decode(haystack) for s in avoid):
            break
    else:
        raise ValueError(f"{task.name}: every draw of keys and values occurs in its haystack; give another --text")
    depths = [float(depth if depth is not None else 0.5)] + [float(rng.random()) for _ in needles[1:]]
    ids, positions = _assemble(
        list(frame.head) + intro, haystack, list(zip(_places(task, haystack, depths, source), pieces)), tail
    )
    record = {
        "offset": offset,
        "needles": [
            {"key": k, "value": v, "asked": a, "depth": d, "position": p}
            for (k, v, a), d, p in zip(needles, depths, positions)
        ],
        "answers": answers,
    }
    return _prompt(ids, answers, source, record)


def _prompt(ids: List[int], answers: List[str], source: Source, record: Dict[str, Any]) -> Prompt:
    """The prompt with ``max_new``: the tokens of the answers written out as ``" a, b, c"``, plus one
    per answer and two, so a continuation may space or punctuate them as it likes."""
    written = len(source.encode(" " + ", ".join(answers)))
    record["prompt_tokens"] = len(ids)
    return Prompt(ids, answers, written + len(answers) + 2, record)


# -- variable tracking --------------------------------------------------------------------------------
def _name(rng: np.random.Generator) -> str:
    return "".join(chr(65 + int(c)) for c in rng.integers(0, 26, size=5))


def _vt(task: Task, source: Source, length: int, depth: Optional[float], rng: np.random.Generator, frame: Frame):
    value = str(int(rng.integers(10**4, 10**5)))
    names = _distinct_names(VT_HOPS + 1, rng)
    lines = [f"\nVAR {names[0]} = {value}.\n"] + [f"\nVAR {b} = VAR {a}.\n" for a, b in zip(names, names[1:])]
    intro = source.encode("Remember the variable assignments in the text below.\n")
    question = source.encode(f"\nWhich variables hold the value {value}, directly or through other variables?")
    tail = question + list(frame.tail) + source.encode(f" Answer: the variables that hold {value} are")
    pieces = [source.encode(line) for line in lines]
    budget = length - len(frame.head) - len(intro) - sum(map(len, pieces)) - len(tail)
    if budget < 1:
        raise TaskTooLong(task.name, length, length - budget + 1)
    haystack, _ = _haystack(task, source, budget, rng, set())
    depths = sorted(float(d) for d in rng.random(len(lines)))  # in order: each hop after the one it names
    unit = len(source.piece(NOISE))
    places = [min(budget, int(round(d * budget / unit)) * unit) for d in depths]
    ids, positions = _assemble(list(frame.head) + intro, haystack, list(zip(places, pieces)), tail)
    record = {
        "offset": -1,
        "needles": [
            {"key": n, "value": value, "asked": True, "depth": d, "position": p}
            for n, d, p in zip(names, depths, positions)
        ],
        "answers": names,
    }
    return _prompt(ids, names, source, record)


def _distinct_names(count: int, rng: np.random.Generator) -> List[str]:
    names: List[str] = []
    while len(names) < count:
        n = _name(rng)
        if n not in names and n != "VAR":
            names.append(n)
    return names


# -- aggregation: common and frequent words ------------------------------------------------------------
def _list_prompt(task: Task, source: Source, length: int, frame: Frame, fill, question: Tuple[str, str]):
    """A list task's prompt: ``fill(budget) -> (pieces, answers, record)`` gives the list's pieces
    (token lists) within ``budget`` tokens."""
    intro = source.encode(
        "Below is a numbered list of words.\n" if task.family == "cwe" else "Below is a text of coded words.\n"
    )
    tail = source.encode(question[0]) + list(frame.tail) + source.encode(question[1])
    budget = length - len(frame.head) - len(intro) - len(tail)
    pieces, answers, record = fill(budget)
    ids = list(frame.head) + intro + [t for p in pieces for t in p] + tail
    record["offset"] = -1
    record["answers"] = answers
    return _prompt(ids, answers, source, record)


def _fit(pieces_of: Callable[[int], Optional[List[List[int]]]], most: int, budget: int) -> Tuple[int, List[List[int]]]:
    """The largest ``n <= most`` whose pieces fit ``budget`` tokens (pieces grow with ``n``), by bisection."""
    lo, hi, best = 0, most, None
    while lo <= hi:
        mid = (lo + hi) // 2
        pieces = pieces_of(mid)
        if pieces is not None and sum(map(len, pieces)) <= budget:
            best, lo = (mid, pieces), mid + 1
        else:
            hi = mid - 1
    if best is None:
        raise ValueError("nothing fits")
    return best


def _cwe(task: Task, source: Source, length: int, depth: Optional[float], rng: np.random.Generator, frame: Frame):
    words = list(rng.permutation(len(source.words)))

    def fill(budget: int):
        common = [source.words[i] for i in words[:CWE_COMMON]]
        # RULER's 30 and 3 where they fit; shorter prompts keep the ratio 10:1 down to 3:1 (common
        # words still named by their counts alone)
        for freq in range(CWE_FREQ_COMMON, 2, -1):
            rare_freq = max(1, freq // 10)
            order_seed = int(rng.integers(0, 2**32))

            def pieces_of(n_rare: int, freq=freq, rare_freq=rare_freq, order_seed=order_seed):
                rare = [source.words[i] for i in words[CWE_COMMON : CWE_COMMON + n_rare]]
                items = [w for w in common for _ in range(freq)] + [w for w in rare for _ in range(rare_freq)]
                order = np.random.default_rng(order_seed).permutation(len(items))
                return [source.piece(f"{j + 1}.") + source.piece(f" {items[k]}\n") for j, k in enumerate(order)]

            if sum(map(len, pieces_of(0))) > budget:
                continue
            try:
                n_rare, pieces = _fit(pieces_of, min(len(words) - CWE_COMMON, budget // rare_freq), budget)
            except ValueError:
                continue
            record = {"common": common, "common_count": freq, "rare_count": rare_freq, "rare_words": n_rare}
            return pieces, common, record
        raise TaskTooLong(task.name, length, length + 3 * CWE_COMMON * 3)

    k = CWE_COMMON
    return _list_prompt(
        task,
        source,
        length,
        frame,
        fill,
        (f"\nWhich {k} words appear most often in the list above?", f" Answer: the {k} most common words are"),
    )


def _fwe(task: Task, source: Source, length: int, depth: Optional[float], rng: np.random.Generator, frame: Frame):
    words = [source.words[i] for i in rng.permutation(len(source.words))]

    def fill(budget: int):
        order_seed = int(rng.integers(0, 2**32))

        def pieces_of(top: int):
            counts = zipf_counts(top, FWE_ALPHA)
            if len(counts) > len(words):
                return None
            items = [words[r] for r, c in enumerate(counts) for _ in range(c)]
            order = np.random.default_rng(order_seed).permutation(len(items))
            return [source.piece(" " + items[k]) for k in order]

        def separated(top: int) -> bool:  # the asked words are told apart from the next by their counts
            counts = zipf_counts(top, FWE_ALPHA)
            return len(counts) > FWE_ASKED and counts[FWE_ASKED - 1] > counts[FWE_ASKED]

        try:
            top, pieces = _fit(pieces_of, budget, budget)
        except ValueError:
            raise TaskTooLong(task.name, length, length + 64) from None
        while top > 0 and not separated(top):
            top -= 1
        if top == 0:
            raise TaskTooLong(task.name, length, length + 64)
        pieces = pieces_of(top) or []
        counts = zipf_counts(top, FWE_ALPHA)
        return pieces, words[:FWE_ASKED], {"counts": counts[: FWE_ASKED + 2], "distinct_words": len(counts)}

    k = FWE_ASKED
    return _list_prompt(
        task,
        source,
        length,
        frame,
        fill,
        (f"\nWhich {k} coded words occur most often in the text above?", f" Answer: the {k} most frequent are"),
    )


def zipf_counts(top: int, alpha: float) -> List[int]:
    """Counts of a Zipf law with exponent ``alpha`` whose most frequent word occurs ``top`` times:
    ``floor(top / r**alpha)`` for ranks ``r = 1, 2, ...`` while that is at least 1."""
    counts = []
    r = 1
    while top >= 1 and int(top / r**alpha) >= 1:
        counts.append(int(top / r**alpha))
        r += 1
    return counts
