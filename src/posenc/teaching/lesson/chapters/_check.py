"""A knowledge check: a question whose answer is explained by a computation run on demand.

A chapter module lists its checks in ``CHECKS`` (the ids the manifest names under the chapter);
the explorer's quiz collects them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Dict, List, Tuple

#: the evidence of an explanation: sentences with the numbers filled in, and the raw numbers
Evidence = Tuple[List[str], Dict[str, object]]


@dataclass(frozen=True)
class Check:
    id: str
    topic: str
    prompt: str
    choices: Tuple[str, ...]
    answer: int
    feedback: Tuple[str, ...]  # one sentence per choice
    evidence: Callable[[], Evidence]

    @property
    def question(self) -> str:
        """The question the prompt asks: its first sentence that ends in a question mark (a prompt may set
        the scene first, "Seats 4 and 5 are neighbours. Which columns ...?"), or the whole prompt."""
        sentences = re.split(r"(?<=[.?!])\s+", " ".join(self.prompt.split()))
        return next((s for s in sentences if s.endswith("?")), " ".join(self.prompt.split()))

    def public(self) -> dict:
        """What the page may see before an answer is given (no answer, no feedback)."""
        return {
            "id": self.id,
            "topic": self.topic,
            "prompt": self.prompt,
            "question": self.question,
            "choices": list(self.choices),
        }


__all__ = ["Check", "Evidence"]
