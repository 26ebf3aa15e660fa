"""Knowledge checks: short questions whose answers are explained by a computation run on demand.

Each check has a prompt, a few choices, the index of the right one, a sentence of feedback per
choice, and a function that runs posenc to produce the evidence. The page never learns the right
answer in advance: it sends the reader's choice to ``GET /api/quiz/{id}/answer?choice=N`` and shows
the feedback together with the numbers that were just computed.

Every check is written in the chapter module the manifest lists it under (``CHECKS`` of
:mod:`posenc.lesson.chapters`, with the computation that is its evidence); this module collects them
and answers.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

from .._checks import check_int
from ..lesson.chapters import MODULES
from ..lesson.chapters._check import Check
from ..lesson.manifest import CHAPTERS

#: every check, collected from the chapter modules in the manifest's (reading) order
_WRITTEN: Dict[str, Check] = {
    check.id: check for chapter in CHAPTERS for check in getattr(MODULES[chapter.id], "CHECKS", ())
}
#: the order ``GET /api/quiz`` (the workbench's list of checks) has always given them; the lesson's
#: pages show them in reading order, from the manifest
ORDER = (
    "bag-of-words",
    "added",
    "learned-limit",
    "relative",
    "qk-only",
    "llama3-bands",
    "fast-columns",
    "alibi-head0",
    "precision",
    "linear-vs-ntk",
)
if sorted(ORDER) != sorted(_WRITTEN):
    raise RuntimeError(f"the quiz's order {ORDER} must list every check of the chapters once: {sorted(_WRITTEN)}")
CHECKS: Tuple[Check, ...] = tuple(_WRITTEN[check_id] for check_id in ORDER)

BY_ID: Dict[str, Check] = {check.id: check for check in CHECKS}


def questions() -> List[dict]:
    return [check.public() for check in CHECKS]


def answer(check_id: str, choice: int) -> dict:
    """Feedback for ``choice`` on check ``check_id``, with evidence computed now."""
    if check_id not in BY_ID:
        raise ValueError(f"check id must be one of {sorted(BY_ID)}, got {check_id!r}")
    check = BY_ID[check_id]
    check_int("choice", choice, minimum=0, maximum=len(check.choices) - 1)
    lines, values = check.evidence()
    return {
        "id": check.id,
        "choice": choice,
        "correct": choice == check.answer,
        "answer": check.answer,
        "feedback": check.feedback[choice],
        "explanation": check.feedback[check.answer],
        "evidence": lines,
        "values": values,
    }
