"""posenc.teaching.lesson.vectors: the teaching layer's example vectors, defined once and usable with torch alone."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch

from posenc.rope.tables import rope_inv_freq
from posenc.teaching.lesson import vectors


def test_the_lesson_imports_no_web_framework_and_no_explorer():
    """The tour reads the lesson with only torch installed: importing every chapter must not pull in
    the explorer or its web framework."""
    code = (
        "import sys, posenc.teaching.lesson.chapters, posenc.teaching.lesson.vectors; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('fastapi', 'starlette', 'uvicorn') "
        "or m.startswith('posenc.teaching.explorer')))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def test_the_explorer_uses_the_one_definition():
    from posenc.teaching.explorer import limits, views

    for name in ("split_words", "word_vector", "example_vector", "wrap_angle", "rotate_at", "angle_errors"):
        assert getattr(views, name) is getattr(vectors, name), name
    assert limits.as_dict()["words"] == vectors.MAX_WORDS
    assert limits.as_dict()["text_chars"] == vectors.MAX_TEXT_CHARS
    assert limits.as_dict()["word_chars"] == vectors.MAX_WORD_CHARS


@pytest.mark.parametrize(
    "text,match",
    [
        ("", "at least one word"),
        ("   ", "at least one word"),
        ("a " * (vectors.MAX_WORDS + 1), f"at most {vectors.MAX_WORDS} words"),
        ("x" * (vectors.MAX_TEXT_CHARS + 1), f"at most {vectors.MAX_TEXT_CHARS} characters"),
        ("y" * (vectors.MAX_WORD_CHARS + 1), f"at most {vectors.MAX_WORD_CHARS} characters"),
    ],
)
def test_split_words_refuses_bad_text_naming_the_argument(text, match):
    with pytest.raises(ValueError, match=match) as err:
        vectors.split_words(text, "sentence")
    assert "sentence" in str(err.value)
    with pytest.raises(TypeError, match="sentence must be a string"):
        vectors.split_words(3, "sentence")  # type: ignore[arg-type]


def test_word_vectors_are_fixed_per_word_and_ignore_case():
    a, b = vectors.word_vector("Dog", 16), vectors.word_vector("dog", 16)
    assert a.dtype == torch.float64 and a.shape == (16,)
    assert torch.equal(a, b)
    assert not torch.equal(a, vectors.word_vector("man", 16))
    assert not torch.equal(a, vectors.word_vector("dog", 16, salt=1))


def test_wrap_angle_folds_into_the_half_open_circle():
    angles = torch.tensor([-math.pi, math.pi, 3 * math.pi, -7.0, 0.0, 100.0, -2 * math.pi], dtype=torch.float64)
    wrapped = vectors.wrap_angle(angles)
    assert bool(((wrapped > -math.pi) & (wrapped <= math.pi)).all())
    turns = (angles - wrapped) / vectors.TWO_PI
    assert torch.allclose(turns, turns.round(), atol=1e-12)  # the same angle, whole turns apart
    assert float(wrapped[0]) == math.pi


def test_rotate_at_keeps_lengths_and_scores_depend_only_on_the_gap():
    inv_freq = rope_inv_freq(16, 10000.0)
    q, k = vectors.example_vector(16, 1), vectors.example_vector(16, 2)
    rotated = vectors.rotate_at(q, [0, 7, 1000], inv_freq)  # (3, 16)
    assert torch.allclose(rotated.norm(dim=-1), q.norm().expand(3), atol=1e-12)
    near = vectors.rotate_at(q, [12], inv_freq)[0] @ vectors.rotate_at(k, [10], inv_freq)[0]
    far = vectors.rotate_at(q, [512], inv_freq)[0] @ vectors.rotate_at(k, [510], inv_freq)[0]
    assert abs(float(near - far)) < 1e-12


def test_angle_errors_are_small_for_posenc_and_large_for_float32_far_out():
    errors = vectors.angle_errors(torch.tensor([1_000_000]), rope_inv_freq(128, 10000.0))
    assert set(errors) == {"bfloat16", "float16", "float32", "posenc"}
    assert float(errors["posenc"].max()) < 1e-6
    assert float(errors["float32"].max()) > 1e-2  # float32 spacing near a million is 0.0625
    assert math.isinf(float(errors["float16"].max()))  # a million is past float16's largest value
