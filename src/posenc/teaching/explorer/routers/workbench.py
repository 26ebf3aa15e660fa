"""The workbench's API: the console's figures, the scaling registry, fixtures, config and checks."""

from __future__ import annotations

import inspect
import typing
from typing import Any, Callable, Optional

from fastapi import APIRouter, Query, Request

from .. import quiz, scaling_view, views
from ..limits import LIMITS, Limit, as_dict
from .params import limited, name, scaling_parameters, text, word

router = APIRouter()

#: ``/api/precision``'s listed position reaches as far as the positions checked
_ERROR_POS = Limit(0, LIMITS["max_position"].maximum, 1_000_000, "position whose per-pair errors are listed")


def _limit(key: str, **kwargs):
    return limited(LIMITS[key], **kwargs)


def _serve(path: str, view: Callable[..., dict], name: str, **queries: Any) -> None:
    """Serves ``view`` at ``GET path`` as the endpoint ``name``: each of its parameters is a query
    parameter of the same name and type, checked against the explorer's limit of that name
    (:data:`~posenc.teaching.explorer.limits.LIMITS`) unless ``queries`` gives its ``Query``."""
    types, names = typing.get_type_hints(view), list(inspect.signature(view).parameters)
    if set(queries) - set(names):
        raise ValueError(
            f"{name}: queries {sorted(set(queries) - set(names))} name no parameter of {view.__name__}{names}"
        )

    def endpoint(**query: Any) -> dict:
        return view(**query)

    endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(
                p,
                inspect.Parameter.KEYWORD_ONLY,
                default=queries[p] if p in queries else _limit(p),
                annotation=types[p],
            )
            for p in names
        ]
    )
    endpoint.__name__ = name
    router.get(path)(endpoint)


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
_serve("/api/sinusoidal", views.sinusoidal_view, "sinusoidal")
_serve("/api/sinusoidal/cell", views.sinusoidal_cell, "sinusoidal_cell")


@router.get("/api/fingerprint")
def fingerprint(
    text: str = text("the dog bites the man"), d_model: int = _limit("d_model"), base: float = _limit("base")
):
    return views.fingerprint_view(text, d_model, base)


# -- 2. RoPE clock dials -------------------------------------------------------------------------
_serve("/api/rope/dials", views.rope_dials, "rope_dials")


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
_serve(
    "/api/scores",
    views.scores_view,
    "scores",
    sin_base=_limit("base"),
    compare_base=_limit("base", default=None, description="a second RoPE base to compare"),
)


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
_serve("/api/alibi", views.alibi_view, "alibi")


# -- 6. precision --------------------------------------------------------------------------------
_serve("/api/precision", views.precision_view, "precision", pos=limited(_ERROR_POS))


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
