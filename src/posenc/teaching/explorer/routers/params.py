"""Query parameters made from the explorer's limits: one helper, so a range is written once."""

from __future__ import annotations

import inspect
from typing import Any, Callable, Dict, Optional

from fastapi import Query, Request

from ...lesson.vectors import MAX_TEXT_CHARS, MAX_WORD_CHARS
from ..limits import Limit

_UNSET: Any = object()


def limited(limit: Limit, *, default: Any = _UNSET, alias: Optional[str] = None, description: Optional[str] = None):
    """A ``Query`` accepting ``limit``'s closed range, an integer unless the limit's default is a float.

    ``default`` replaces the limit's default (``None`` makes the parameter optional); floats refuse
    ``inf`` and ``nan``.
    """
    is_float = isinstance(limit.default, float)
    cast = float if is_float else int
    return Query(
        cast(limit.default) if default is _UNSET else default,
        ge=cast(limit.minimum),
        le=cast(limit.maximum),
        description=limit.help if description is None else description,
        alias=alias,
        allow_inf_nan=False if is_float else None,
    )


def text(default: str):
    """A sentence of at most :data:`~posenc.teaching.lesson.vectors.MAX_TEXT_CHARS` characters. An empty or blank one
    reaches the handler, whose :func:`~posenc.teaching.lesson.vectors.split_words` refuses it in words a reader
    understands ("text must contain at least one word, got ''"), not the validator's "String should have
    at least 1 character"."""
    return Query(default, max_length=MAX_TEXT_CHARS)


def word(default: str):
    """One word: at least one character, at most :data:`~posenc.teaching.lesson.vectors.MAX_WORD_CHARS`."""
    return Query(default, min_length=1, max_length=MAX_WORD_CHARS)


def name(default: Optional[str] = None, max_length: int = 20):
    """A name chosen from a list the handler checks (a scheme, a method, a layout)."""
    return Query(... if default is None else default, max_length=max_length)


def scaling_parameters(request: Request, route: Callable[..., Any]) -> Dict[str, str]:
    """The query parameters ``route`` does not declare: the scalings' parameters, by name, as given.

    :func:`posenc.teaching.explorer.scaling_view.scaling_settings` checks them against the registry, so a
    scaling registered with a parameter of its own is accepted here without a change. A name given
    twice is refused.
    """
    declared = set(inspect.signature(route).parameters)
    given: Dict[str, str] = {}
    for key, value in request.query_params.multi_items():
        if key in declared:
            continue
        if key in given:
            raise ValueError(f"{key} is given more than once")
        given[key] = value
    return given
