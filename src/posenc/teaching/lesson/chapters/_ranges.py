"""The ranges a chapter's figure functions accept, declared once in the chapter's module.

A chapter module that draws figures lists ``FIGURE_RANGES``: parameter name -> ``(minimum, maximum,
default, help)``, an integer parameter unless the default is a float. Its figure functions check every
argument against it with :func:`checked` (so they are safe to call directly), and the explorer's API
publishes the same table as its query limits.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple, Union

from ...._checks import check_float, check_int

Number = Union[int, float]
#: (minimum, maximum, default, help)
Range = Tuple[Number, Number, Number, str]


def checked(
    ranges: Dict[str, Range], name: str, value: object, *, argument: Optional[str] = None, even: bool = False
) -> Number:
    """``value`` checked against ``ranges[name]`` (an int, or a float when the default is a float).

    ``argument`` is the name an error gives the value (the function's parameter, when a figure maps
    it to a range named otherwise: ``d_model`` checked against ``wave_d_model``); ``even`` also
    refuses an odd integer.
    """
    minimum, maximum, default, _ = ranges[name]
    shown = name if argument is None else argument
    if isinstance(default, float):
        return check_float(shown, value, minimum=float(minimum), maximum=float(maximum))
    return check_int(shown, value, minimum=int(minimum), maximum=int(maximum), even=even)


__all__ = ["Number", "Range", "checked"]
