"""The workbench's API: the console's figures, the scaling registry, fixtures, config and checks."""

from __future__ import annotations

from typing import Optional

from fastapi import APIRouter, Query, Request

from .. import quiz, scaling_view, views
from ..limits import LIMITS, Limit, as_dict
from .params import limited, name, scaling_parameters, text, word

router = APIRouter()

#: ``/api/precision``'s listed position reaches as far as the positions checked
_ERROR_POS = Limit(0, LIMITS["max_position"].maximum, 1_000_000, "position whose per-pair errors are listed")


def _limit(key: str, **kwargs):
    return limited(LIMITS[key], **kwargs)


@router.get("/api/meta")
def meta(request: Request):
    return {
        "limits": as_dict(),
        "methods": list(scaling_view.METHODS),
        "config_methods": list(scaling_view.CONFIG_METHODS),
        "checks": len(quiz.CHECKS),
        "lab": request.app.state.lab_run is not None,
    }


# -- 1. wave fingerprint -------------------------------------------------------------------------
@router.get("/api/sinusoidal")
def sinusoidal(length: int = _limit("length"), d_model: int = _limit("d_model"), base: float = _limit("base")):
    return views.sinusoidal_view(length, d_model, base)


@router.get("/api/sinusoidal/cell")
def sinusoidal_cell(
    pos: int = _limit("pos"), dim: int = _limit("dim"), d_model: int = _limit("d_model"), base: float = _limit("base")
):
    return views.sinusoidal_cell(pos, dim, d_model, base)


@router.get("/api/fingerprint")
def fingerprint(
    text: str = text("the dog bites the man"), d_model: int = _limit("d_model"), base: float = _limit("base")
):
    return views.fingerprint_view(text, d_model, base)


# -- 2. RoPE clock dials -------------------------------------------------------------------------
@router.get("/api/rope/dials")
def rope_dials(
    head_dim: int = _limit("head_dim"),
    base: float = _limit("base"),
    q_pos: int = _limit("q_pos"),
    k_pos: int = _limit("k_pos"),
    offset: int = _limit("offset"),
    seed: int = _limit("seed"),
):
    return views.rope_dials(head_dim, base, q_pos, k_pos, offset, seed)


@router.get("/api/rope/order")
def rope_order(
    text_a: str = text("dog bites man"),
    text_b: str = text("man bites dog"),
    query_word: str = word("bites"),
    key_word: str = word("dog"),
    degrees: float = _limit("degrees"),
):
    return views.word_order_view(text_a, text_b, query_word, key_word, degrees)


# -- 3. score vs distance ------------------------------------------------------------------------
@router.get("/api/scores")
def scores(
    head_dim: int = _limit("head_dim"),
    base: float = _limit("base"),
    d_model: int = _limit("d_model"),
    sin_base: float = _limit("base"),
    heads: int = _limit("heads"),
    max_distance: int = _limit("max_distance"),
    compare_base: Optional[float] = _limit("base", default=None, description="a second RoPE base to compare"),
):
    return views.scores_view(head_dim, base, d_model, sin_base, heads, max_distance, compare_base)


# -- 4. wavelengths and scalings -----------------------------------------------------------------
@router.get("/api/scalings")
def scalings():
    return {"scalings": scaling_view.scalings_metadata()}


@router.get("/api/wavelengths")
def wavelengths(
    request: Request,
    rotary_dim: int = _limit("rotary_dim"),
    base: float = _limit("base"),
    train_len: int = _limit("train_len"),
    methods: str = Query("", max_length=100, description="comma-separated overlays: " + ",".join(scaling_view.METHODS)),
    seq_len: int = _limit("seq_len"),
):
    """Any other query parameter is a scaling parameter (``factor``, ``beta_fast``, ...), checked
    against the registry's definition of it."""
    return scaling_view.wavelengths_view(
        rotary_dim,
        base,
        train_len,
        scaling_view.parse_methods(methods),
        seq_len=seq_len,
        settings=scaling_parameters(request, wavelengths),
    )


@router.get("/api/fixtures")
def fixtures():
    return {"fixtures": scaling_view.fixture_list()}


@router.get("/api/fixture")
def fixture(name: str = name(max_length=120)):
    return scaling_view.fixture_view(name)


# -- 5. ALiBi ------------------------------------------------------------------------------------
@router.get("/api/alibi")
def alibi(
    heads: int = _limit("heads"),
    head: int = _limit("head"),
    matrix_len: int = _limit("matrix_len"),
    head_dim: int = _limit("head_dim"),
    base: float = _limit("base"),
    seed: int = _limit("seed"),
):
    return views.alibi_view(heads, head, matrix_len, head_dim, base, seed)


# -- 6. precision --------------------------------------------------------------------------------
@router.get("/api/precision")
def precision(
    head_dim: int = _limit("head_dim"),
    base: float = _limit("base"),
    max_position: int = _limit("max_position"),
    pos: int = limited(_ERROR_POS),
):
    return views.precision_view(head_dim, base, max_position, pos)


# -- 8. knowledge checks -------------------------------------------------------------------------
@router.get("/api/quiz")
def quiz_list():
    return {"checks": quiz.questions()}


@router.get("/api/quiz/{check_id}/answer")
def quiz_answer(check_id: str, choice: int = limited(Limit(0, 9, 0, "the chosen answer"), default=...)):
    return quiz.answer(check_id, choice)


# -- 9. copy as config ---------------------------------------------------------------------------
@router.get("/api/config")
def config(
    request: Request,
    head_dim: int = _limit("head_dim"),
    rotary_dim: Optional[int] = _limit("rotary_dim", default=None),
    base: float = _limit("base"),
    layout: str = name("half"),
    method: str = name("default"),
    max_position_embeddings: int = _limit("max_position_embeddings"),
    original_max_position_embeddings: int = _limit("original_max_position_embeddings"),
):
    """Any other query parameter is a scaling parameter, as for ``/api/wavelengths``."""
    return scaling_view.config_view(
        head_dim,
        head_dim if rotary_dim is None else rotary_dim,
        base,
        layout,
        method,
        max_position_embeddings=max_position_embeddings,
        original=original_max_position_embeddings,
        settings=scaling_parameters(request, config),
    )
