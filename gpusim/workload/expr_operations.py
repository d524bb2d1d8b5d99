"""The operators and calls of the workload expression language, each applied to Python numbers or lane arrays.

`BINOPS`, `UNARY_OPS`, `CMPOPS` and `CALLS` are the plain operations (numpy's, with integer `/`, and divisors,
exponents and shift counts checked). `CHECKED_BINOPS`, `CHECKED_UNARY_OPS` and `CHECKED_CALLS` also verify each
result against expr_limits' limits, finding an integer result that wrapped at 64 bits without a Python integer
per lane. `hash_rand` is `rand(seed, n[, key])`: deterministic per-thread pseudo-random integers.
"""

from __future__ import annotations

import ast
import math
import operator
from typing import Callable

import numpy as np

from .expr_limits import (FLOAT_LIMIT, INT_MAX, INT_MIN, MAX_EXPONENT, MAX_SHIFT, SAFE, check_value, describe_value,
                          is_integer, is_numpy, magnitude)


def _check_divisor(b, what: str) -> None:
    if type(b) is np.ndarray:
        if not b.all():
            raise ZeroDivisionError(f"{what} by zero")
    elif b == 0:
        raise ZeroDivisionError(f"{what} by zero")


def _div(a, b):
    _check_divisor(b, "division")
    return a // b if is_integer(a) and is_integer(b) else a / b


def _floordiv(a, b):
    _check_divisor(b, "division")
    return a // b


def _mod(a, b):
    _check_divisor(b, "modulo")
    return a % b


def _pow_args(a, b) -> None:
    exponent = np.asarray(b)
    if not np.all((exponent >= -MAX_EXPONENT) & (exponent <= MAX_EXPONENT)):
        raise ValueError(f"exponent larger than {MAX_EXPONENT} (in magnitude)")
    if is_integer(b):
        if is_integer(a) and np.any(exponent < 0):
            raise ValueError("negative integer exponent")
    elif np.any((np.asarray(a) < 0) & (exponent % 1 != 0)):
        raise ValueError("a negative number to a fractional power (the result would be complex)")


def _pow(a, b):
    _pow_args(a, b)
    return a ** b


def _shift(op):
    def shifted(a, b):
        if type(b) is int and 0 <= b <= MAX_SHIFT and (type(a) is int or type(a) is np.ndarray
                                                         and a.dtype.kind in "iu"):
            return op(a, b)  # the common case, a loop index: no numpy reductions (anything else: checked below)
        if not (is_integer(a) and is_integer(b)):
            raise TypeError("shifts need integers")
        if np.any(np.asarray(b) < 0) or np.any(np.asarray(b) > MAX_SHIFT):
            raise ValueError(f"shift count outside 0-{MAX_SHIFT}")
        return op(a, b)
    return shifted


def _bitwise(op):
    def bitwise(a, b):
        if not (is_integer(a) and is_integer(b)):
            raise TypeError("bit operations need integers")
        return op(a, b)
    return bitwise


_INVERT = _bitwise(lambda x, _y: ~x)


def _invert(a):
    return _INVERT(a, 0)


BINOPS: dict[type, Callable] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: _div,
    ast.FloorDiv: _floordiv, ast.Mod: _mod, ast.Pow: _pow, ast.LShift: _shift(operator.lshift),
    ast.RShift: _shift(operator.rshift), ast.BitAnd: _bitwise(operator.and_), ast.BitOr: _bitwise(operator.or_),
    ast.BitXor: _bitwise(operator.xor),
}
SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
            ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}
CMPOPS: dict[type, Callable] = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne,
}
# Integer operations whose numpy result may wrap, with their exact (Python int) counterparts.
EXACT_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.floordiv,
          ast.FloorDiv: operator.floordiv, ast.LShift: operator.lshift, ast.Pow: operator.pow}


def grown_bound(op: type, ba, bb) -> float:
    """A bound on |a op b| for integers with |a| <= ba, |b| <= bb (the operations of EXACT_OPS)."""
    if op is ast.Add or op is ast.Sub:
        return float(ba) + float(bb)
    if op is ast.Mult:
        return float(ba) * float(bb)
    if op is ast.LShift:
        return float(ba) * 2.0 ** min(bb, MAX_SHIFT)
    if op is ast.Pow:
        return float_power(max(float(ba), 1.0), min(bb, MAX_EXPONENT))
    return float(ba)  # floor division: |a // b| <= |a| for a whole b != 0


def float_power(base: float, exponent) -> float:
    try:
        return base ** exponent
    except OverflowError:
        return math.inf


NEAR = float((1 << 63) - (1 << 20))  # a float power below this is a true one below 2**63 (error < 2**17)


def _wrapped(op: type, a: np.ndarray, b: np.ndarray, r: np.ndarray) -> np.ndarray:
    """The lanes where r, the int64 result of a op b, wrapped (vectorised: no Python ints per lane)."""
    if op is ast.Add:
        return ((a ^ r) & (b ^ r)) < 0
    if op is ast.Sub:
        return ((a ^ b) & (a ^ r)) < 0
    if op is ast.Mult:  # an exact product divided by b gives a back; a wrapped one cannot
        return ((b != 0) & (r // np.where(b == 0, 1, b) != a)) | ((a == INT_MIN) & (b == -1))
    if op is ast.LShift:
        return (r >> b) != a
    if op is ast.Pow:  # near 2**63, only a few (base, exponent) pairs: each is computed exactly
        near = ~(np.abs(a.astype(float) ** b.astype(float)) < NEAR)
        wrapped = np.zeros(a.shape, dtype=bool)
        for x, e in (np.unique(np.stack([a[near], b[near]]), axis=1).T.tolist() if near.any() else []):
            if not INT_MIN <= x ** e <= INT_MAX:
                wrapped |= (a == x) & (b == e)
        return wrapped
    return (a == INT_MIN) & (b == -1)  # floor division


def _check_exact(op: type, exact, a, b, result, what: str) -> None:
    """An error if the numpy integer result of a op b wrapped (its true value does not fit 64 bits)."""
    r = np.asarray(result)
    if r.dtype.kind != "i":  # (unsigned: the names' values are made signed, so not expected here)
        raise ValueError(f"{what} is not a signed 64-bit integer")
    a, b, r = (x.astype(np.int64, copy=False) for x in np.broadcast_arrays(np.asarray(a), np.asarray(b), r))
    wrapped = _wrapped(op, a, b, r)
    if wrapped.any():
        at = np.argmax(wrapped)
        x, y = int(a.flat[at]), int(b.flat[at])
        raise ValueError(f"{what} {describe_value(exact(x, y))} does not fit in a 64-bit integer")


def _pow_bits(a, b) -> float:
    """log2 of the largest |a ** b| over the lanes (for exponents >= 0; other exponents give <= 1)."""
    base = np.maximum(np.abs(np.asarray(a, dtype=float)), 1.0)
    return float(np.max(np.asarray(b, dtype=float) * np.log2(base)))


def _checked_binop(op_type: type):
    op, exact, what = BINOPS[op_type], EXACT_OPS.get(op_type), f"'{SYMBOLS[op_type]}' result"

    def checked(a, b):
        if op_type is ast.Pow:
            _pow_args(a, b)
            bits = _pow_bits(a, b)
            if bits > 64:
                raise ValueError(f"{what} would be about 2**{bits:.0f}: beyond 2**63")
        try:
            result = op(a, b)
        except OverflowError:
            raise ValueError(f"{what} is beyond 2**63 in magnitude") from None
        if exact is not None and (is_numpy(a) or is_numpy(b)) and is_integer(a) and is_integer(b) \
                and grown_bound(op_type, magnitude(a), magnitude(b)) > SAFE:
            with np.errstate(all="ignore"):
                _check_exact(op_type, exact, a, b, result, what)
        return check_value(result, what)
    return checked


def _checked_unary(fn, what: str):
    def checked(a):
        if is_integer(a) and magnitude(a) > INT_MAX:  # -(-2**63) wraps in numpy (np.abs converts a Python int)
            raise ValueError(f"{what} 2**63 does not fit in a 64-bit integer")
        return check_value(fn(a), what)
    return checked


CHECKED_BINOPS = {op: _checked_binop(op) for op in BINOPS}

_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))


def _whole(v, what: str) -> np.ndarray:
    a = np.asarray(v)
    if a.dtype.kind in "iub":
        return a
    if a.dtype.kind == "f" and np.all(np.abs(a) < FLOAT_LIMIT) and np.all(a % 1 == 0):
        return a.astype(np.int64)
    raise ValueError(f"rand: {what} must be a whole number")


def hash_rand(seed, n, key, gtid) -> np.ndarray:
    """Deterministic per-thread pseudo-random integers in [0, n): splitmix64 of (seed, global thread, key)."""
    n = _whole(n, "n")
    if np.any(n <= 0):
        raise ValueError("rand(seed, n): n must be positive")
    with np.errstate(over="ignore"):
        x = (_whole(seed, "seed").astype(np.uint64) * _MIX[0]) ^ (np.asarray(gtid).astype(np.uint64) * _MIX[1]) \
            ^ (_whole(key, "key").astype(np.uint64) * _MIX[2])
        x = x + _MIX[0]
        x = (x ^ (x >> np.uint64(30))) * _MIX[1]
        x = (x ^ (x >> np.uint64(27))) * _MIX[2]
        x = x ^ (x >> np.uint64(31))
    return (x % n.astype(np.uint64)).astype(np.int64)


def seeded(seed, run_seed: int):
    """rand's seed mixed with the run's --seed (modulo 2**64, as the hash reads it)."""
    if not run_seed:
        return seed
    with np.errstate(over="ignore"):
        return _whole(seed, "seed").astype(np.uint64) + np.uint64(7919 * run_seed % (1 << 64))


def _minmax(np_op):
    def fn(*args):
        out = args[0]
        for a in args[1:]:
            out = np_op(out, a)
        return out
    return fn


CALLS = {"min": _minmax(np.minimum), "max": _minmax(np.maximum), "abs": np.abs}
CHECKED_CALLS = dict(CALLS, abs=_checked_unary(np.abs, "'abs' result"))
UNARY_OPS = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: np.logical_not, ast.Invert: _invert}
CHECKED_UNARY_OPS = {**UNARY_OPS, ast.USub: _checked_unary(operator.neg, "'-' result")}
RAND = "rand"
