"""The guided lesson's API: one route per figure, each calling its chapter module's figure function
(:mod:`posenc.lesson.chapters`), within the limits of :mod:`posenc.explorer.lesson`."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request

from ...lesson import chapters as written
from ...lesson.chapters import alibi_penalty as alibi_penalty_chapter
from ...lesson.chapters import bad_ideas as bad_ideas_chapter
from ...lesson.chapters import bag_of_tiles as bag_of_tiles_chapter
from ...lesson.chapters import big_picture as big_picture_chapter
from ...lesson.chapters import clock_hands as clock_hands_chapter
from ...lesson.chapters import common_mistakes as common_mistakes_chapter
from ...lesson.chapters import comparison as comparison_chapter
from ...lesson.chapters import learned_tables as learned_tables_chapter
from ...lesson.chapters import pytorch_demo as pytorch_demo_chapter
from ...lesson.chapters import rope as rope_chapter
from ...lesson.chapters import stretching_rope as stretching_rope_chapter
from ...lesson.chapters import three_rules as three_rules_chapter
from ...lesson.chapters import word_plus_position as word_plus_position_chapter
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
    return bag_of_tiles_chapter.bag_of_tiles(text, shuffle, scheme)


@router.get("/input")
def word_plus_position(
    word: str = word("dog"),
    seat: int = _limit("seat"),
    d_model: int = limited(Limit(2, 64, 16, "width of both vectors (even)")),
    embed_std: float = _limit("embed_std"),
):
    return word_plus_position_chapter.word_plus_position(word, seat, d_model, embed_std)


@router.get("/bad-ideas")
def bad_ideas(raw_seat: int = _limit("raw_seat"), sentence_len: int = _limit("sentence_len")):
    return bad_ideas_chapter.bad_ideas(raw_seat, sentence_len)


@router.get("/rules")
def rules(length: int = _limit("rules_len"), d_model: int = limited(Limit(2, 256, 64, "width of the codes (even)"))):
    return three_rules_chapter.three_rules(length, d_model)


@router.get("/clock")
def clock(seat: int = _limit("wave_seat"), d_model: int = _limit("wave_d_model")):
    return clock_hands_chapter.clock_hands(seat, d_model)


@router.get("/learned")
def learned(tokens: int = _limit("tokens"), stretch_to: int = _limit("stretch_to")):
    return learned_tables_chapter.learned_wall(tokens, stretch_to)


@router.get("/rotate")
def rotate(
    a: float = _limit("a"),
    b: float = _limit("b"),
    seat: int = _limit("rot_seat"),
    theta_deg: float = _limit("theta_deg"),
):
    return rope_chapter.rotate_vector(a, b, seat, theta_deg)


@router.get("/rope")
def rope(
    head_dim: int = _limit("rope_head_dim"), m: int = _limit("m"), n: int = _limit("n"), shift: int = _limit("shift")
):
    return rope_chapter.rope_clock(head_dim, m, n, shift)


@router.get("/order")
def order(
    sentence: int = limited(Limit(0, 1, 0, "0: the dog bit the man; 1: swapped")), degrees: float = _limit("order_deg")
):
    return rope_chapter.word_order(sentence, degrees)


@router.get("/stretch")
def stretch(
    factor: float = _limit("factor"), train_len: int = _limit("train_len"), head_dim: int = _limit("stretch_head_dim")
):
    return stretching_rope_chapter.stretching(factor, train_len, head_dim)


@router.get("/alibi")
def alibi(heads: int = _limit("alibi_heads"), distance: int = _limit("alibi_distance")):
    return alibi_penalty_chapter.alibi_penalty(heads, distance)


@router.get("/compare")
def compare(length: int = _limit("compare_len")):
    return comparison_chapter.compare(length)


@router.get("/demo")
def demo(shift: int = _limit("shift"), d_model: int = _limit("demo_d_model")):
    return pytorch_demo_chapter.run_demo(shift, d_model)


@router.get("/mistakes")
def mistakes(steps: int = _limit("steps"), d_model: int = _limit("concat_d_model"), shift: int = _limit("shift")):
    return common_mistakes_chapter.mistakes(steps, d_model, shift)


@router.get("/big-picture")
def big_picture(scheme: str = name("rope")):
    return big_picture_chapter.big_picture(scheme)


@router.get("/attention")
def attention(request: Request, text: str = text("the dog bit the man")):
    return big_picture_chapter.attention_map(text, request.app.state.lab_run)


@router.get("/pairs")
def pairs(m: int = _limit("m"), n: int = _limit("n")):
    return rope_chapter.pair_layouts(m, n)
