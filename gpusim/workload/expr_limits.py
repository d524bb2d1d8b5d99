"""The values a workload expression may hold, and the one-line ExprError for one that breaks the rules.

Every value, intermediate ones included, is a real number that fits a 64-bit integer (integers) or is finite and
below 2**63 in magnitude (floats); `check_value` passes such a value through and refuses anything else (a larger
number, a complex power, a NaN) with an error that names it. The small predicates here (`is_integer`,
`is_numpy`, `magnitude`) answer the same questions for Python numbers, numpy scalars and lane arrays alike.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import GpusimError

MAX_EXPONENT = 64
MAX_SHIFT = 63
SHOWN = 80  # characters of an expression that an error message shows
INT_MIN, INT_MAX = -(1 << 63), (1 << 63) - 1
FLOAT_LIMIT = float(1 << 63)  # floats are finite and smaller than this in magnitude
SAFE = float(1 << 62)  # a static bound up to this needs no run-time check (a factor 2 left for rounding)


class ExprError(GpusimError):
    """An expression that cannot be compiled or evaluated."""


Env = dict[str, Any]
VALUE_ERRORS = (ArithmeticError, ValueError, TypeError)  # what an operation raises for bad values


def shown(text: str) -> str:
    """An expression as messages show it: one line of printable ASCII, at most SHOWN characters once escaped
    (then '...')."""
    if len(text) <= SHOWN and text.isascii() and text.isprintable():
        return text
    out, size = [], 0
    for c in text:
        c = c if " " <= c <= "~" else c.encode("unicode_escape").decode("ascii")
        if size + len(c) > SHOWN:
            return "".join(out) + "..."
        out.append(c)
        size += len(c)
    return "".join(out)


def escaped_line(s: str) -> str:
    """`s` itself when printable, else with its unprintable characters escaped (one line)."""
    return s if s.isprintable() else s.encode("unicode_escape").decode("ascii")


def error_message(where: str, text: str, what: str) -> str:
    """An ExprError's message: where the expression is, the expression as shown, what is wrong."""
    return f"{escaped_line(where)}: expression '{text}': {escaped_line(what)}"


def describe_value(v) -> str:
    """A value for a message, short even for a huge integer."""
    if type(v) is int and v.bit_length() > 64:
        return f"{'-' if v < 0 else ''}2**{v.bit_length() - 1} or more"
    return repr(v)


def check_value(v, what: str):
    """`v` itself when it is a real, finite number (or array of them) within the limits; else ValueError."""
    kind = type(v)
    if kind is int:
        if INT_MIN <= v <= INT_MAX:
            return v
    elif kind is bool:
        return v
    elif kind is float:
        if -FLOAT_LIMIT < v < FLOAT_LIMIT:
            return v
    elif kind is np.ndarray or isinstance(v, np.generic):
        code = v.dtype.kind
        if code == "b" or v.size == 0:
            return v
        if code in "iu":
            lo, hi = int(v.min()), int(v.max())
            if lo >= INT_MIN and hi <= INT_MAX:
                return v
            v = hi if hi > INT_MAX else lo
        elif code == "f":
            if np.abs(v).max() < FLOAT_LIMIT:
                return v
            flat = np.ravel(v)
            v = float(flat[~(np.abs(flat) < FLOAT_LIMIT)][0])
        elif code == "c":
            raise ValueError(f"{what} is complex (a negative number to a fractional power?)")
        else:
            raise TypeError(f"{what} is not a number (numpy {v.dtype})")
    elif kind is complex:
        raise ValueError(f"{what} {v!r} is complex (a negative number to a fractional power?)")
    else:
        raise TypeError(f"{what} {escaped_line(repr(v))[:40]} is not a number")
    if type(v) is int:
        raise ValueError(f"{what} {describe_value(v)} does not fit in a 64-bit integer")
    if math.isfinite(v):
        raise ValueError(f"{what} {v:g} is beyond 2**63 in magnitude")
    raise ValueError(f"{what} is {v} (not a finite number)")


def is_integer(v) -> bool:
    """Whether `v` (a Python or numpy number, or an array) holds integers or booleans."""
    kind = type(v)
    if kind is int or kind is bool:
        return True
    if kind is np.ndarray:
        return v.dtype.kind in "iub"
    return isinstance(v, (np.integer, np.bool_))


def is_numpy(v) -> bool:
    """A numpy array or scalar: its integer arithmetic wraps silently at 64 bits."""
    return type(v) is np.ndarray or isinstance(v, np.generic)


def magnitude(v):
    """The largest magnitude in `v`, a Python number."""
    if type(v) is np.ndarray:
        if not v.size:
            return 0
        if v.dtype.kind in "iub":
            return max(-int(v.min()), int(v.max()))
        return float(np.abs(v).max())
    if isinstance(v, np.generic):
        v = v.item()
    return abs(v)
