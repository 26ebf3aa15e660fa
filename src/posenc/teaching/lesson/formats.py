"""The lesson's number formats, written once for the Python side (the chapters' text and the tour).

The page's scripts write numbers with their twin, ``posenc/teaching/explorer/static/formats.js``, which has the
same functions under the same names; a test runs both on one set of values and holds them equal.

- :func:`minus`: a number's leading hyphen-minus as the typographic minus sign ``−`` (U+2212), which
  a reader does not mistake for a hyphen or a dash;
- :func:`signed`: a fixed number of decimals with an explicit sign, ``+0.84`` / ``−0.42``, and none on
  a value that rounds to zero (``0.00``);
- :func:`sci`: exponent form with a two-digit exponent, ``2.38e-07`` / ``−1.50e+03``;
- :func:`sci_or_rounding`: :func:`sci`, or the rounding level a value lies under (Python only: the
  page receives the chapters' text already written).

Both sides round a tie (``0.125`` to two decimals) away from zero, as the browser's ``toFixed`` does.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal, localcontext
from numbers import Real

#: the minus sign the lesson prints in front of a negative number
MINUS = "\u2212"
#: the largest size :func:`signed` writes in fixed decimals (the page's ``toFixed`` turns to exponent form there)
FIXED_LIMIT = 1e21


def _check(value, digits: int) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"value must be a real number, got {value!r} ({type(value).__name__})")
    if isinstance(digits, bool) or not isinstance(digits, int) or not 0 <= digits <= 20:
        raise ValueError(f"digits must be an integer from 0 to 20, got {digits!r}")
    if not math.isfinite(value):
        raise ValueError(f"value must be finite, got {value!r}")
    return float(value)


def _rounded(size: float, spec: str) -> str:
    """``size`` (zero or more) written by ``spec``, a tie rounded away from zero, as the page's
    ``toFixed`` and ``toExponential`` do (Python's own formatting rounds a tie to even)."""
    with localcontext() as context:
        context.rounding = ROUND_HALF_UP
        return format(Decimal(size), spec)


def minus(text: str) -> str:
    """``text`` (a number as written, ``"-0.5"``) with its leading ``-`` made the minus sign ``−``;
    an exponent's sign (``"1e-05"``) is left as it is."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {text!r} ({type(text).__name__})")
    return MINUS + text[1:] if text.startswith("-") else text


def signed(value: float, digits: int = 2) -> str:
    """``value`` to ``digits`` decimals with its sign: ``+0.84``, ``−0.42``, and ``0.00`` (no sign) when it
    rounds to zero.

    Raises:
        TypeError: ``value`` is not a real number.
        ValueError: ``value`` is not finite or is :data:`FIXED_LIMIT` or more in size, or ``digits`` is not
            an integer from 0 to 20.
    """
    value = _check(value, digits)
    if abs(value) >= FIXED_LIMIT:
        raise ValueError(f"value must be less than {FIXED_LIMIT:g} in size for fixed decimals, got {value!r}; use sci")
    text = _rounded(abs(value), f".{digits}f")
    if float(text) == 0:
        return text
    return ("+" if value > 0 else MINUS) + text


def sci(value: float, digits: int = 2) -> str:
    """``value`` in exponent form with ``digits`` decimals and an exponent of two digits or more:
    ``2.38e-07``, ``−1.50e+03``, ``0.00e+00``.

    Raises:
        TypeError: ``value`` is not a real number.
        ValueError: ``value`` is not finite, or ``digits`` is not an integer from 0 to 20.
    """
    value = _check(value, digits)
    if value == 0:
        mantissa, power = f"{0:.{digits}f}", 0
    else:
        mantissa, exponent = _rounded(abs(value), f".{digits}e").split("e")
        power = int(exponent)
    text = f"{mantissa}e{'-' if power < 0 else '+'}{abs(power):02d}"
    return MINUS + text if value < 0 else text


def sci_or_rounding(value: float, rounding: float, digits: int = 2) -> str:
    """``value`` as :func:`sci` prints it, or ``rounding (below 1e-05)`` when its size is under
    ``rounding``: a difference at float32 rounding level has digits that are noise (two processes that
    sum in another order print other ones), so the lesson names the level instead of the noise.

    Raises:
        TypeError: ``value`` or ``rounding`` is not a real number.
        ValueError: ``value`` is not finite, or ``rounding`` is not a positive finite number.
    """
    value = _check(value, digits)
    if isinstance(rounding, bool) or not isinstance(rounding, (int, float)):
        raise TypeError(f"rounding must be a real number, got {type(rounding).__name__}")
    if not math.isfinite(rounding) or rounding <= 0:
        raise ValueError(f"rounding must be a positive finite number, got {rounding!r}")
    return f"rounding (below {rounding:.0e})" if abs(value) < rounding else sci(value, digits)


__all__ = ["FIXED_LIMIT", "MINUS", "minus", "sci", "sci_or_rounding", "signed"]
