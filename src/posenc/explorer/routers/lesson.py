"""The guided lesson's API: one route per figure, each calling its chapter module's figure function
(:mod:`posenc.lesson.chapters`), within the limits of :mod:`posenc.explorer.lesson`."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request

from ...lesson import chapters as written
from ...lesson.prose import PLAIN_LABEL, TRY_LABEL, as_dict
from .. import lesson
from ..limits import Limit
from .params import limited, name, text, word

router = APIRouter(prefix="/api/lesson")


def _limit(key: str):
    return limited(lesson.LESSON_LIMITS[key])


@router.get("/chapters")
def chapters():
    return lesson.chapters() | {"limits": lesson.limits_dict()}


@router.get("/prose/{chapter}")
def prose(chapter: str):
    """The text of a chapter written in :mod:`posenc.lesson.chapters`: the blocks the tour prints."""
    try:
        blocks = written.blocks(chapter)
    except KeyError as err:
        raise HTTPException(status_code=404, detail=err.args[0]) from None
    return {
        "chapter": chapter,
        "labels": {"plain": PLAIN_LABEL, "try": TRY_LABEL},
        "blocks": [as_dict(b) for b in blocks],
    }


@router.get("/bag")
def bag(text: str = text("the dog bit the man"), shuffle: int = _limit("shuffle"), scheme: str = name("nope")):
    return written.bag_of_tiles.bag_of_tiles(text, shuffle, scheme)


@router.get("/input")
def word_plus_position(
    word: str = word("dog"),
    seat: int = _limit("seat"),
    d_model: int = limited(Limit(2, 64, 16, "width of both vectors (even)")),
    embed_std: float = _limit("embed_std"),
):
    return written.word_plus_position.word_plus_position(word, seat, d_model, embed_std)


@router.get("/bad-ideas")
def bad_ideas(raw_seat: int = _limit("raw_seat"), sentence_len: int = _limit("sentence_len")):
    return written.bad_ideas.bad_ideas(raw_seat, sentence_len)


@router.get("/rules")
def rules(length: int = _limit("rules_len"), d_model: int = limited(Limit(2, 256, 64, "width of the codes (even)"))):
    return written.three_rules.three_rules(length, d_model)


@router.get("/clock")
def clock(seat: int = _limit("wave_seat"), d_model: int = _limit("wave_d_model")):
    return written.clock_hands.clock_hands(seat, d_model)


@router.get("/learned")
def learned(tokens: int = _limit("tokens"), stretch_to: int = _limit("stretch_to")):
    return written.learned_tables.learned_wall(tokens, stretch_to)


@router.get("/rotate")
def rotate(
    a: float = _limit("a"),
    b: float = _limit("b"),
    seat: int = _limit("rot_seat"),
    theta_deg: float = _limit("theta_deg"),
):
    return written.rope.rotate_vector(a, b, seat, theta_deg)


@router.get("/rope")
def rope(
    head_dim: int = _limit("rope_head_dim"), m: int = _limit("m"), n: int = _limit("n"), shift: int = _limit("shift")
):
    return written.rope.rope_clock(head_dim, m, n, shift)


@router.get("/order")
def order(
    sentence: int = limited(Limit(0, 1, 0, "0: the dog bit the man; 1: swapped")), degrees: float = _limit("order_deg")
):
    return written.rope.word_order(sentence, degrees)


@router.get("/stretch")
def stretch(
    factor: float = _limit("factor"), train_len: int = _limit("train_len"), head_dim: int = _limit("stretch_head_dim")
):
    return written.stretching_rope.stretching(factor, train_len, head_dim)


@router.get("/alibi")
def alibi(heads: int = _limit("alibi_heads"), distance: int = _limit("alibi_distance")):
    return written.alibi_penalty.alibi_penalty(heads, distance)


@router.get("/compare")
def compare(length: int = _limit("compare_len")):
    return written.comparison.compare(length)


@router.get("/demo")
def demo(shift: int = _limit("shift"), d_model: int = _limit("demo_d_model")):
    return written.pytorch_demo.run_demo(shift, d_model)


@router.get("/mistakes")
def mistakes(steps: int = _limit("steps"), d_model: int = _limit("concat_d_model"), shift: int = _limit("shift")):
    return written.common_mistakes.mistakes(steps, d_model, shift)


@router.get("/big-picture")
def big_picture(scheme: str = name("rope")):
    return written.big_picture.big_picture(scheme)


@router.get("/attention")
def attention(request: Request, text: str = text("the dog bit the man")):
    return written.big_picture.attention_map(text, request.app.state.lab_run)


@router.get("/pairs")
def pairs(m: int = _limit("m"), n: int = _limit("n")):
    return written.rope.pair_layouts(m, n)
