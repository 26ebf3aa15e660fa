"""The guided lesson's API: the chapter list, each chapter's text, and one route per figure.

The figure routes are not written here: every figure a chapter module declares in ``FIGURES``
(:data:`posenc.teaching.lesson.chapters.FIGURES`) is served at ``/api/lesson/<route>`` by :func:`add_figure_routes`,
each query parameter named as the figure function's and checked by :mod:`.params` against the range its
chapter declares (the limits of :mod:`posenc.teaching.explorer.lesson`); the one server-side value, the lab run
folder the explorer was started with, is passed to a parameter declared ``LAB_RUN``.
"""

from __future__ import annotations

import inspect
from typing import Any, Mapping, cast

from fastapi import APIRouter, HTTPException, Request

from ...lesson import chapters as written
from ...lesson.chapters import FIGURES, Parameter, Range, ResolvedFigure
from ...lesson.prose import IN_PAGE, PLAIN_LABEL, TRY_LABEL, as_dict
from .. import lesson
from ..limits import Limit
from .params import limited, name, text, word

router = APIRouter(prefix="/api/lesson")


@router.get("/chapters")
def chapters():
    return lesson.chapters() | {"limits": lesson.limits_dict()}


@router.get("/prose/{chapter}")
def prose(chapter: str):
    """The text of a chapter written in :mod:`posenc.teaching.lesson.chapters`: every block but the notes on the
    tour's own figure files (:data:`posenc.teaching.lesson.prose.IN_PAGE`)."""
    try:
        blocks = written.blocks(chapter)
    except KeyError as err:
        raise HTTPException(status_code=404, detail=err.args[0]) from None
    return {
        "chapter": chapter,
        "labels": {"plain": PLAIN_LABEL, "try": TRY_LABEL},
        "blocks": [as_dict(b) for b in blocks if b.kind in IN_PAGE],
    }


def _query(parameter: Parameter) -> Any:
    """The ``Query`` of one figure parameter: its chapter's range, or its kind of text with its default."""
    if parameter.kind == "range":
        return limited(Limit(*cast(Range, parameter.range)))  # the range LESSON_LIMITS publishes
    helper = {"text": text, "word": word, "choice": name}[parameter.kind]
    return helper(cast(str, parameter.default))  # every text kind has its default (Text, Word, Choice)


def figure_endpoint(figure: ResolvedFigure):
    """The endpoint of ``figure``: its query parameters are the figure function's, in its order, each
    checked by :func:`_query`; a ``LAB_RUN`` parameter gets the app's ``state.lab_run``."""
    if any(p.name == "request" for p in figure.parameters):
        raise ValueError(f"figure {figure.route!r} of chapter {figure.chapter!r}: 'request' is the route's own name")
    served = [p for p in figure.parameters if p.kind == "lab_run"]
    asked = [p for p in figure.parameters if p.kind != "lab_run"]

    def endpoint(request: Request, **query: Any) -> dict:
        return figure.function(**query, **{p.name: request.app.state.lab_run for p in served})

    endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("request", inspect.Parameter.KEYWORD_ONLY, annotation=Request)]
        + [
            inspect.Parameter(
                p.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=_query(p),
                annotation=p.number_type if p.kind == "range" else str,
            )
            for p in asked
        ]
    )
    endpoint.__name__ = figure.route.replace("-", "_")
    endpoint.__doc__ = figure.function.__doc__
    return endpoint


def add_figure_routes(target: APIRouter, figures: Mapping[str, ResolvedFigure]) -> None:
    """Add to ``target`` one ``GET /<route>`` (under its prefix) per figure of ``figures`` (route name ->
    figure)."""
    for route, figure in figures.items():
        target.add_api_route(f"/{route}", figure_endpoint(figure), methods=["GET"], name=f"lesson {route}")


add_figure_routes(router, FIGURES)
