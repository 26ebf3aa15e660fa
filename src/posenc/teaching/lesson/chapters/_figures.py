"""The figures a chapter draws, declared once in the chapter's module.

A chapter module with figures lists ``FIGURES``: route name (the last part of its URL,
``/api/lesson/<route>``) -> its figure function, a pure function returning the figure's data. Each
parameter of the function is one query parameter of the route, under the function's own name:

- a number takes the range of ``FIGURE_RANGES`` (:mod:`._ranges`) named like it, or the range the
  figure maps it to: ``Figure(clock_hands, seat="wave_seat")`` (a range's name is unique across
  chapters, a parameter's name only within its function);
- a text says what it is, with its default: :class:`Text` (a learner's sentence), :class:`Word`,
  :class:`Choice` (a name the function checks against its own list);
- :data:`LAB_RUN` is the ``posenc lab`` run folder the explorer was started with (``None`` without
  one), given by the server and never by a query.

A bare function stands for ``Figure(function)``. :func:`posenc.teaching.lesson.chapters.collect_figures`
resolves every parameter when the chapters are imported and refuses one it cannot place, naming the
chapter, the figure and the parameter; the explorer registers one route per figure from it.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Dict, Literal, Mapping, Tuple, Union

from ._ranges import Number, Range


@dataclass(frozen=True)
class Text:
    """A learner's sentence (split by :func:`posenc.teaching.lesson.vectors.split_words`), with its default."""

    default: str


@dataclass(frozen=True)
class Word:
    """One word, with its default."""

    default: str


@dataclass(frozen=True)
class Choice:
    """A name from a list the figure function checks (a scheme, a layout), with its default."""

    default: str


@dataclass(frozen=True)
class _LabRun:
    def __repr__(self) -> str:
        return "LAB_RUN"


#: the ``posenc lab`` run folder the explorer serves (a ``Path``, or ``None`` without one)
LAB_RUN = _LabRun()

#: how a figure parameter is given: the name of its range, a kind of text, or the lab run
Spec = Union[str, Text, Word, Choice, _LabRun]


class Figure:
    """A figure function with the specs of the parameters whose range is not named like them.

    ``Figure(clock_hands, seat="wave_seat", d_model="wave_d_model")``;
    ``Figure(bag_of_tiles, text=Text("the dog bit the man"), scheme=Choice("nope"))``.
    """

    def __init__(self, function: Callable[..., dict], /, **specs: Spec) -> None:
        self.function = function
        self.specs: Mapping[str, Spec] = MappingProxyType(dict(specs))

    def __repr__(self) -> str:
        given = "".join(f", {name}={spec!r}" for name, spec in self.specs.items())
        return f"Figure({self.function.__name__}{given})"


Kind = Literal["range", "text", "word", "choice", "lab_run"]


@dataclass(frozen=True)
class Parameter:
    """One resolved parameter of a figure function.

    Attributes:
        name: the function's parameter, and the route's query parameter.
        kind: ``"range"`` (a number within :attr:`range`), ``"text"``, ``"word"``, ``"choice"`` (a
            string with :attr:`default`) or ``"lab_run"`` (given by the server).
        range_name: the key of :attr:`range` in ``FIGURE_RANGES`` (the name the API publishes it by).
        range: ``(minimum, maximum, default, help)``, for a number.
        default: the default of a string.
    """

    name: str
    kind: Kind
    range_name: str | None = None
    range: Range | None = None
    default: str | None = None

    @property
    def number_type(self) -> type:
        """``float`` if the range's default is a float, else ``int`` (for a number)."""
        if self.range is None:
            raise ValueError(f"parameter {self.name!r} is a {self.kind}, not a number")
        return float if isinstance(self.range[2], float) else int


@dataclass(frozen=True)
class ResolvedFigure:
    """A declared figure with every parameter placed: what a route is registered from."""

    route: str
    chapter: str
    function: Callable[..., dict]
    parameters: Tuple[Parameter, ...]

    def defaults(self) -> Dict[str, Union[Number, str]]:
        """The value every query parameter takes when the request gives none."""
        values: Dict[str, Union[Number, str]] = {}
        for p in self.parameters:
            if p.range is not None:
                values[p.name] = p.range[2]
            elif p.default is not None:
                values[p.name] = p.default
        return values


_ROUTE = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")


def resolve(chapter: str, route: str, declared: Any, ranges: Mapping[str, Range]) -> ResolvedFigure:
    """Place every parameter of figure ``route`` of chapter ``chapter``, declared as ``declared`` (a
    function or a :class:`Figure`), against the chapter's ``ranges`` (its ``FIGURE_RANGES``).

    Raises ``ValueError`` naming the chapter, the figure and the parameter when the route is not a
    URL word, a parameter has no range and no spec, a spec names a parameter the function lacks or a
    range the chapter does not declare, or a parameter is ``*args``/``**kwargs``.
    """
    where = f"chapter {chapter!r}, figure {route!r}"
    if not isinstance(route, str) or not _ROUTE.fullmatch(route):
        raise ValueError(f"{where}: a route must be lower-case words joined by single hyphens, got {route!r}")
    figure = declared if isinstance(declared, Figure) else Figure(declared)
    if not callable(figure.function):
        raise ValueError(f"{where}: FIGURES must map a route to a function or a Figure, got {declared!r}")
    name = getattr(figure.function, "__name__", repr(figure.function))
    signature = inspect.signature(figure.function)
    unknown = sorted(set(figure.specs) - set(signature.parameters))
    if unknown:
        raise ValueError(f"{where}: {name}() has no parameter {unknown[0]!r}; it takes {list(signature.parameters)}")
    parameters = []
    for p in signature.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ValueError(f"{where}: parameter {p.name!r} of {name}() must be one named value, not *{p.name}")
        spec = figure.specs.get(p.name, p.name)
        if isinstance(spec, str):
            if spec not in ranges:
                mapped = "" if spec == p.name else f" (mapped to range {spec!r})"
                raise ValueError(
                    f"{where}: parameter {p.name!r} of {name}(){mapped} has no range: declare it in the "
                    f"chapter's FIGURE_RANGES (it has {sorted(ranges)}) or map it to one with "
                    f"Figure({name}, {p.name}=<range name>), or give a text spec"
                )
            parameters.append(Parameter(p.name, "range", range_name=spec, range=ranges[spec]))
        elif isinstance(spec, (Text, Word, Choice)):
            kind: Kind = "text" if isinstance(spec, Text) else "word" if isinstance(spec, Word) else "choice"
            parameters.append(Parameter(p.name, kind, default=spec.default))
        elif isinstance(spec, _LabRun):
            parameters.append(Parameter(p.name, "lab_run"))
        else:
            raise ValueError(
                f"{where}: parameter {p.name!r} of {name}() has spec {spec!r}; allowed: the name of a range, "
                f"Text, Word, Choice or LAB_RUN"
            )
    return ResolvedFigure(route, chapter, figure.function, tuple(parameters))


__all__ = ["LAB_RUN", "Choice", "Figure", "Kind", "Parameter", "ResolvedFigure", "Spec", "Text", "Word", "resolve"]
