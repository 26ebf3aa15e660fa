"""The ranges a chapter's figure functions accept, declared once in the chapter's module.

A chapter module that draws figures lists ``FIGURE_RANGES``: parameter name -> ``(minimum, maximum,
default, help)``, an integer parameter unless the default is a float. Its figure functions check every
argument against it with :func:`checked` (so they are safe to call directly), and the explorer's API
publishes the same table as its query limits.
"""

from __future__ import annotations

from typing import Dict, Tuple, Union

from ..._checks import check_float, check_int

Number = Union[int, float]
#: (minimum, maximum, default, help)
Range = Tuple[Number, Number, Number, str]


def checked(ranges: Dict[str, Range], name: str, value: object) -> Number:
    """``value`` checked against ``ranges[name]`` (an int, or a float when the default is a float)."""
    minimum, maximum, default, _ = ranges[name]
    if isinstance(default, float):
        return check_float(name, value, minimum=float(minimum), maximum=float(maximum))
    return check_int(name, value, minimum=int(minimum), maximum=int(maximum))


__all__ = ["Number", "Range", "checked"]
