"""The workbench's who-bit-whom proof and ch. 7's give their numbers from one function, and where they
differ the workbench says why.

The two score a query against a key turned (query seat - key seat) x theta apart, but with other vectors:
the workbench gives each word a fixed vector made from the word, ch. 7 scores one fixed pair. The
workbench therefore also prints the score of ch. 7's pair at its own seats; at the chapter's +30/-30
degrees those are ch. 7's scores (to float64 rounding), whatever the sentences' words and seats.
"""

from __future__ import annotations

import pytest
import torch

from posenc.teaching.explorer import views
from posenc.teaching.lesson.chapters import rope
from posenc.teaching.lesson.rotation import order_turn


@pytest.mark.parametrize(
    ("a", "b", "query", "key"),
    [
        ("dog bites man", "man bites dog", "bites", "dog"),  # the workbench's defaults
        ("the dog bit man", "the man bit dog", "bit", "dog"),  # ch. 7's sentences
        ("yesterday the dog bit man", "the man bit dog", "bit", "dog"),  # other seats, the same turns
    ],
)
def test_the_workbench_prints_chapter_sevens_scores_beside_its_own(a, b, query, key):
    facts = rope.numbers()
    view = views.word_order_view(a, b, query, key, rope.ORDER_DEGREES)
    assert view["lesson_q"] == list(rope.ORDER_VECTORS[0]) and view["lesson_k"] == list(rope.ORDER_VECTORS[1])
    turns = [facts["rope.relative.A"], facts["rope.relative.B"]]  # the chapter's, from radians: 29.999999999999996
    assert [s["relative_angle_deg"] for s in view["sentences"]] == pytest.approx(turns, abs=1e-12)
    chapter = [facts["rope.relative.score.A"], facts["rope.relative.score.B"]]
    # other seats, the same turn: equal to float64 rounding (the seats' own angles round differently)
    assert [s["score_rope_lesson"] for s in view["sentences"]] == pytest.approx(chapter, abs=1e-12)
    # the workbench's own vectors are others, so its own scores are other numbers: the reason it must say so
    assert view["q"] != view["lesson_q"]
    assert all(abs(s["score_rope"] - c) > 1e-3 for s, c in zip(view["sentences"], chapter))


def test_the_lesson_pair_follows_the_turn_not_the_seats():
    """Sentences whose turns are not ch. 7's: the chapter's pair is still scored at the workbench's turn."""
    view = views.word_order_view("bites a b dog", "dog bites", "bites", "dog", 45.0)
    for s in view["sentences"]:
        q, k = (torch.tensor(v, dtype=torch.float64) for v in rope.ORDER_VECTORS)
        expected = order_turn(q, k, s["query_seat"], s["key_seat"], 45.0)["score_rope"]
        assert s["score_rope_lesson"] == expected
