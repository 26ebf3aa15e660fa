"""Knowledge checks: short questions whose answers are explained by a computation run on demand.

Each check has a prompt, a few choices, the index of the right one, a sentence of feedback per
choice, and a function that runs posenc to produce the evidence. The page never learns the right
answer in advance: it sends the reader's choice to ``GET /api/quiz/{id}/answer?choice=N`` and shows
the feedback together with the numbers that were just computed.

Every check is written in the chapter module the manifest lists it under (``CHECKS`` of
:mod:`posenc.teaching.lesson.chapters`, with the computation that is its evidence); this module collects them in
the manifest's order (:func:`collect_checks`) and answers.
"""

from __future__ import annotations

from types import ModuleType
from typing import Dict, List, Mapping, Sequence, Tuple

from ..._checks import check_int
from ..lesson.chapters import MODULES, Check
from ..lesson.manifest import CHAPTERS, Chapter


def collect_checks(chapters: Sequence[Chapter], modules: Mapping[str, ModuleType]) -> Tuple[Check, ...]:
    """Every check the manifest lists, in its (reading) order: for each chapter the ids of its entry's
    ``checks``, each the very object its module's ``CHECKS`` writes.

    Raises ``ValueError`` naming the chapter when its module writes other checks than its manifest entry
    lists, and naming the id when two chapters list the same check.
    """
    collected: List[Check] = []
    for chapter in chapters:
        written = {check.id: check for check in getattr(modules[chapter.id], "CHECKS", ())}
        if sorted(written) != sorted(chapter.checks):
            raise ValueError(
                f"chapter {chapter.id!r} lists the checks {list(chapter.checks)} in the manifest, but its module "
                f"writes {list(written)}"
            )
        collected.extend(written[check_id] for check_id in chapter.checks)
    ids = [check.id for check in collected]
    twice = sorted({check_id for check_id in ids if ids.count(check_id) > 1})
    if twice:
        raise ValueError(f"each check must be listed under one chapter only, but {twice} are listed twice")
    return tuple(collected)


#: every check, in the manifest's order (``GET /api/quiz`` lists them so, as the lesson's pages show them)
CHECKS: Tuple[Check, ...] = collect_checks(CHAPTERS, MODULES)

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
