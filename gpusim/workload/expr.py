"""A small, whitelisted expression language for workload files, evaluated for 32 lanes at once (numpy).

Python's `ast` module parses the text; only the nodes below are accepted, compiled into a small tree (constants
folded, loop-invariant lane-varying parts marked for memoisation) and then into closures. Nothing is ever passed
to `eval`. Allowed: integer/float/bool literals; names and dotted names that the workload defines (`lane`,
`tid.x`, `block.y`, loop indices, parameters, buffers); `+ - * / // % ** << >> & | ^ ~`; comparisons
(chainable); `and or not`; `a if c else b`; and the calls `min`, `max`, `abs`, `rand(seed, n[, key])`.
`/` between integers is integer (floor) division, as in C for the non-negative values addresses use.

Hostile text is refused in bounded time and memory with a one-line ExprError: at most MAX_LENGTH printable ASCII
characters, nested at most MAX_DEPTH deep. Every value, intermediate ones included, is a real number that fits a
64-bit integer (integers) or is finite and below 2**63 in magnitude (floats); a larger one, a complex power or a
NaN is an error, never wrapped, clamped or passed on. This costs no check per operation: each name read checks
its value against a bit-length limit (an array once, by identity), chosen with an interval bound over the
expression so that no value can pass 2**62 while every name is within its limit. A name beyond its limit makes
the expression look at all its names' sizes: if those fit, the limits follow them (with room to grow) and the
closures are rebuilt; if not (or a name is not an integer), every operation's result is checked (`Expr.checked`).
"""

from __future__ import annotations

import ast
import math
import operator
import re
from typing import Any, Callable

import numpy as np

from ..errors import GpusimError

MAX_EXPONENT = 64
MAX_SHIFT = 63
MAX_LENGTH = 4096  # characters in one expression
MAX_DEPTH = 100  # nesting of sub-expressions (a + b + c + ... nests one level per operator)
SHOWN = 80  # characters of an expression that an error message shows
INT_MIN, INT_MAX = -(1 << 63), (1 << 63) - 1
FLOAT_LIMIT = float(1 << 63)  # floats are finite and smaller than this in magnitude
SAFE = float(1 << 62)  # a static bound up to this needs no run-time check (a factor 2 left for rounding)
FITS_LIMIT = 256  # sets of names' bit lengths an expression remembers


class ExprError(GpusimError):
    """An expression that cannot be compiled or evaluated."""


Env = dict[str, Any]
_ERRORS = (ArithmeticError, ValueError, TypeError)  # what an operation raises for bad values


class _Unsafe(Exception):
    """A name's value is beyond the expression's limit for it (or not a signed integer)."""


class _Unbounded(Exception):
    """The static bound of some value passes SAFE."""


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


def _one_line(s: str) -> str:
    return s if s.isprintable() else s.encode("unicode_escape").decode("ascii")


def _message(where: str, text: str, what: str) -> str:
    return f"{_one_line(where)}: expression '{text}': {_one_line(what)}"


def _describe(v) -> str:
    """A value for a message, short even for a huge integer."""
    if type(v) is int and v.bit_length() > 64:
        return f"{'-' if v < 0 else ''}2**{v.bit_length() - 1} or more"
    return repr(v)


def _check(v, what: str):
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
        raise TypeError(f"{what} {_one_line(repr(v))[:40]} is not a number")
    if type(v) is int:
        raise ValueError(f"{what} {_describe(v)} does not fit in a 64-bit integer")
    if math.isfinite(v):
        raise ValueError(f"{what} {v:g} is beyond 2**63 in magnitude")
    raise ValueError(f"{what} is {v} (not a finite number)")


def _is_int(v) -> bool:
    kind = type(v)
    if kind is int or kind is bool:
        return True
    if kind is np.ndarray:
        return v.dtype.kind in "iub"
    return isinstance(v, (np.integer, np.bool_))


def _numpy(v) -> bool:
    """A numpy array or scalar: its integer arithmetic wraps silently at 64 bits."""
    return type(v) is np.ndarray or isinstance(v, np.generic)


def _mag(v):
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


def _check_divisor(b, what: str) -> None:
    if type(b) is np.ndarray:
        if not b.all():
            raise ZeroDivisionError(f"{what} by zero")
    elif b == 0:
        raise ZeroDivisionError(f"{what} by zero")


def _div(a, b):
    _check_divisor(b, "division")
    return a // b if _is_int(a) and _is_int(b) else a / b


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
    if _is_int(b):
        if _is_int(a) and np.any(exponent < 0):
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
        if not (_is_int(a) and _is_int(b)):
            raise TypeError("shifts need integers")
        if np.any(np.asarray(b) < 0) or np.any(np.asarray(b) > MAX_SHIFT):
            raise ValueError(f"shift count outside 0-{MAX_SHIFT}")
        return op(a, b)
    return shifted


def _bitwise(op):
    def bitwise(a, b):
        if not (_is_int(a) and _is_int(b)):
            raise TypeError("bit operations need integers")
        return op(a, b)
    return bitwise


_INVERT = _bitwise(lambda x, _y: ~x)


def _invert(a):
    return _INVERT(a, 0)


_BINOPS: dict[type, Callable] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: _div,
    ast.FloorDiv: _floordiv, ast.Mod: _mod, ast.Pow: _pow, ast.LShift: _shift(operator.lshift),
    ast.RShift: _shift(operator.rshift), ast.BitAnd: _bitwise(operator.and_), ast.BitOr: _bitwise(operator.or_),
    ast.BitXor: _bitwise(operator.xor),
}
_SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
            ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}
_CMPOPS: dict[type, Callable] = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne,
}
# Integer operations whose numpy result may wrap, with their exact (Python int) counterparts.
_EXACT = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.floordiv,
          ast.FloorDiv: operator.floordiv, ast.LShift: operator.lshift, ast.Pow: operator.pow}


def _grown(op: type, ba, bb) -> float:
    """A bound on |a op b| for integers with |a| <= ba, |b| <= bb (the operations of _EXACT)."""
    if op is ast.Add or op is ast.Sub:
        return float(ba) + float(bb)
    if op is ast.Mult:
        return float(ba) * float(bb)
    if op is ast.LShift:
        return float(ba) * 2.0 ** min(bb, MAX_SHIFT)
    if op is ast.Pow:
        return _fpow(max(float(ba), 1.0), min(bb, MAX_EXPONENT))
    return float(ba)  # floor division: |a // b| <= |a| for a whole b != 0


def _fpow(base: float, exponent) -> float:
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
        raise ValueError(f"{what} {_describe(exact(x, y))} does not fit in a 64-bit integer")


def _pow_bits(a, b) -> float:
    """log2 of the largest |a ** b| over the lanes (for exponents >= 0; other exponents give <= 1)."""
    base = np.maximum(np.abs(np.asarray(a, dtype=float)), 1.0)
    return float(np.max(np.asarray(b, dtype=float) * np.log2(base)))


def _checked_binop(op_type: type):
    op, exact, what = _BINOPS[op_type], _EXACT.get(op_type), f"'{_SYMBOLS[op_type]}' result"

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
        if exact is not None and (_numpy(a) or _numpy(b)) and _is_int(a) and _is_int(b) \
                and _grown(op_type, _mag(a), _mag(b)) > SAFE:
            with np.errstate(all="ignore"):
                _check_exact(op_type, exact, a, b, result, what)
        return _check(result, what)
    return checked


def _checked_unary(fn, what: str):
    def checked(a):
        if _is_int(a) and _mag(a) > INT_MAX:  # -(-2**63) wraps in numpy (np.abs converts a Python int)
            raise ValueError(f"{what} 2**63 does not fit in a 64-bit integer")
        return _check(fn(a), what)
    return checked


_CHECKED = {op: _checked_binop(op) for op in _BINOPS}

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


def _seeded(seed, run_seed: int):
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


_CALLS = {"min": _minmax(np.minimum), "max": _minmax(np.maximum), "abs": np.abs}
_CHECKED_CALLS = dict(_CALLS, abs=_checked_unary(np.abs, "'abs' result"))
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: np.logical_not, ast.Invert: _invert}
_CHECKED_UNARY = {**_UNARY, ast.USub: _checked_unary(operator.neg, "'-' result")}
RAND = "rand"

# Names whose value differs from lane to lane: subexpressions using them cost numpy operations.
LANE_VARYING = frozenset({"lane", "tid", "tid.x", "tid.y", "tid.z", "gtid"})
SEED_KEY = "__seed__"  # env entry holding the run's --seed, mixed into rand()
MEMO_KEY = "__memo__"  # env entry holding a warp's cache of loop-invariant lane-varying subexpressions
MEMO_LIMIT = 4096


def _memoized(fn, key_names: tuple[str, ...], token):
    """Wrap a lane-varying subexpression so a warp computes it once per distinct value of `key_names`
    (the iteration names it reads: loop indices, `rep`); a vectorised `rep` keys by its length."""
    def memo(env):
        cache = env.get(MEMO_KEY)
        if cache is None:
            return fn(env)
        key = (token,) + tuple(v.shape[0] if type(v) is np.ndarray else v for v in map(env.__getitem__, key_names))
        value = cache.get(key)
        if value is None:
            if len(cache) >= MEMO_LIMIT:
                cache.clear()
            value = cache[key] = fn(env)
        return value
    return memo


# The bit length of the largest magnitude of each (small) array a name held, by identity (the walkers build
# new arrays rather than modify one in place); the entry keeps the array alive, so its id is not reused.
_ARRAY_BITS: dict[int, tuple[np.ndarray, int]] = {}
ARRAY_BITS_LIMIT = 4096  # entries
ARRAY_BITS_SIZE = 4096  # elements of an array kept there (names hold a few warps' lanes, not more)
UNFIT = 1 << 20  # the "bit length" of a value that is not a signed integer: always checked


def _array_bits(v: np.ndarray) -> int:
    hit = _ARRAY_BITS.get(id(v))
    if hit is not None and hit[0] is v:
        return hit[1]
    bits = _mag(v).bit_length() if v.dtype.kind in "ib" else UNFIT  # (unsigned arithmetic wraps below 0)
    if v.size <= ARRAY_BITS_SIZE:
        if len(_ARRAY_BITS) >= ARRAY_BITS_LIMIT:
            _ARRAY_BITS.clear()
        _ARRAY_BITS[id(v)] = (v, bits)
    return bits


def _bits(v) -> int:
    """|v| < 2**_bits(v) for a signed integer (or bool) value; UNFIT for anything else."""
    kind = type(v)
    if kind is int:
        return v.bit_length()
    if kind is np.ndarray:
        return _array_bits(v)
    if kind is bool or isinstance(v, (np.signedinteger, np.bool_)):
        return int(v).bit_length()
    return UNFIT


def _fast_leaf(name: str, bits: int):
    """A name's value, if it is a signed integer below 2**bits in magnitude; else _Unsafe."""
    bound = 1 << bits if bits >= 0 else 0
    last = None  # the array this name held last time, within the limit (a warp reads the same one again)

    def leaf(env):
        nonlocal last
        v = env[name]
        kind = type(v)
        if kind is int:
            if -bound < v < bound:
                return v
        elif v is last:
            return v
        elif kind is np.ndarray:
            if _array_bits(v) <= bits:
                last = v
                return v
        elif _bits(v) <= bits:
            return v
        raise _Unsafe
    return leaf


def _checked_leaf(name: str):
    what = f"'{name}'"

    def leaf(env):
        v = _check(env[name], what)
        if isinstance(v, (np.ndarray, np.generic)) and v.dtype.kind == "u":
            return v.astype(np.int64)  # within int64 (checked): signed, so that a - b may go below 0
        return v
    return leaf


CONST, NAME, BIN, UNARY, BOOL, CMP, IF, CALL, CALL_RAND, MEMO = range(10)


class _Node:
    """A compiled subexpression: `kind`, its operator, its sub-nodes, a constant value or a name, the
    iteration names it reads and whether it varies by lane."""

    __slots__ = ("kind", "op", "kids", "value", "iters", "varying")

    def __init__(self, kind, op=None, kids=(), value=None, iters=frozenset(), varying=False):
        self.kind, self.op, self.kids, self.value, self.iters, self.varying = kind, op, kids, value, iters, varying


def _bound(node: _Node, m: dict[str, float]) -> tuple[float, bool]:
    """(a bound on |value|, whether the value is an integer) when each name's value is an integer within
    +-m[name]; _Unbounded when some value's bound passes SAFE."""
    kind = node.kind
    if kind == CONST:
        v = node.value
        return abs(float(v)), type(v) is int or type(v) is bool
    if kind == NAME:
        return m[node.value], True
    if kind == MEMO:
        return _bound(node.kids[0], m)
    parts = [_bound(k, m) for k in node.kids]
    bounds = [p[0] for p in parts]
    is_int = all(p[1] for p in parts)
    if kind == BIN:
        b = _bin_bound(node, bounds, parts)
        is_int = is_int or node.op in (ast.LShift, ast.RShift, ast.BitAnd, ast.BitOr, ast.BitXor)
    elif kind == UNARY:
        b = 1.0 if node.op is ast.Not else bounds[0] + (node.op is ast.Invert)
        is_int = is_int or node.op is ast.Not
    elif kind in (BOOL, CMP):
        b, is_int = 1.0, True
    elif kind == IF:
        b = max(bounds[1:])
        is_int = parts[1][1] and parts[2][1]
    elif kind == CALL_RAND:
        b, is_int = bounds[1], True
    else:  # min, max, abs
        b = max(bounds)
    if not b <= SAFE:
        raise _Unbounded
    return b, is_int


def _bin_bound(node: _Node, bounds, parts) -> float:
    op, (bl, br), right = node.op, bounds, node.kids[1]
    both_int = parts[0][1] and parts[1][1]
    if op in _EXACT and op not in (ast.Div, ast.FloorDiv, ast.Pow):
        return _grown(op, bl, br)
    if op is ast.Div or op is ast.FloorDiv:
        if parts[1][1]:  # a whole divisor is at least 1 in magnitude (0 is an error)
            return bl + 1
        return bl / abs(right.value) + 1 if right.kind == CONST and right.value else math.inf
    if op is ast.Pow:
        if right.kind == CONST:
            e = right.value
            if e >= 0:
                return _fpow(max(bl, 1.0), e)
            return 1.0 if both_int else math.inf  # a negative integer exponent of an integer is an error
        return _fpow(max(bl, 1.0), min(br, MAX_EXPONENT)) if both_int else math.inf
    if op is ast.Mod:
        return br
    if op is ast.RShift:
        return bl
    return 2 * max(bl, br)  # & | ^


def _names(root: _Node) -> tuple[str, ...]:
    """The names a tree reads (not constants), each once."""
    found, stack = {}, [root]
    while stack:
        node = stack.pop()
        if node.kind == NAME:
            found[node.value] = None
        stack.extend(node.kids)
    return tuple(found)


def _build(node: _Node, checked: bool, limits: dict[str, int] | None = None):
    """Closures computing `node` for an env: plain numpy operations, or (checked) each result verified."""
    kind = node.kind
    if kind == CONST:
        value = node.value
        return lambda env: value
    if kind == NAME:
        return _checked_leaf(node.value) if checked else _fast_leaf(node.value, limits[node.value])
    if kind == MEMO:
        return _memoized(_build(node.kids[0], checked, limits), node.value, node.op)
    if kind == BIN:
        return _build_bin(node, checked, limits)
    parts = [_build(k, checked, limits) for k in node.kids]
    if kind == UNARY:
        return _build_unary(node.op, parts[0], checked)
    if kind == BOOL:
        return _build_bool(node.op, parts)
    if kind == CMP:
        return _build_compare(node.op, parts)
    if kind == IF:
        return _build_if(*parts)
    if kind == CALL_RAND:
        seed, n = parts[0], parts[1]
        key = parts[2] if len(parts) == 3 else (lambda env: 0)
        return lambda env: hash_rand(_seeded(seed(env), env.get(SEED_KEY, 0)), n(env), key(env), env["gtid"])
    fn = (_CHECKED_CALLS if checked else _CALLS)[node.op]
    if len(parts) == 1:
        only = parts[0]
        return lambda env: fn(only(env))
    return lambda env: fn(*[a(env) for a in parts])


def _build_bin(node: _Node, checked: bool, limits):
    op = (_CHECKED if checked else _BINOPS)[node.op]
    left, right = node.kids
    if right.kind == CONST:
        value, left = right.value, _build(left, checked, limits)
        return lambda env: op(left(env), value)
    if left.kind == CONST:
        value, right = left.value, _build(right, checked, limits)
        return lambda env: op(value, right(env))
    left, right = _build(left, checked, limits), _build(right, checked, limits)
    return lambda env: op(left(env), right(env))


def _build_unary(op: type, operand, checked: bool):
    if op is ast.UAdd:
        return operand
    if op is ast.USub and not checked:
        return lambda env: -operand(env)
    fn = (_CHECKED_UNARY if checked else _UNARY)[op]
    return lambda env: fn(operand(env))


def _build_bool(combine, parts):
    first, rest = parts[0], parts[1:]

    def fn(env):
        out = first(env)
        for p in rest:
            out = combine(out, p(env))
        return out
    return fn


def _build_compare(ops, terms):
    def fn(env):
        values = [t(env) for t in terms]
        out = ops[0](values[0], values[1])
        for i in range(1, len(ops)):
            out = np.logical_and(out, ops[i](values[i], values[i + 1]))
        return out
    return fn


def _build_if(cond, yes, no):
    def fn(env):
        c = cond(env)
        if isinstance(c, np.ndarray):
            return np.where(c, yes(env), no(env))
        return yes(env) if c else no(env)
    return fn


class Expr:
    """A compiled expression: call it with an environment (name -> scalar or 32-lane array). `text` is the
    expression as messages show it (one line, shortened), `source` the text itself."""

    __slots__ = ("text", "source", "where", "names", "uses_rand", "constant", "limits", "_fn", "_tree",
                 "_checked", "_fits")

    def __init__(self, source: str, where: str, names: frozenset[str], uses_rand: bool, constant,
                 tree: _Node | None = None):
        self.text, self.source, self.where, self.names, self.uses_rand = shown(source), source, where, names, \
            uses_rand
        self.constant, self._tree, self._checked = constant, tree, None
        # Each name below 2**limits[name] in magnitude keeps every value within SAFE; the limits start at
        # nothing and follow the names' values (see widen).
        self.limits = dict.fromkeys(_names(tree), -1) if tree is not None else {}
        self._fits: dict[tuple[int, ...], bool] = {}  # names' bit lengths -> whether they keep values in SAFE
        self._fn = _build(tree, False, self.limits) if tree is not None else (lambda env: constant)

    def __call__(self, env: Env):
        if self.constant is not None:
            return self.constant
        try:
            try:
                return self._fn(env)
            except _Unsafe:
                if self.widen(env):
                    return self._fn(env)
        except _Unsafe:
            pass
        except _ERRORS as exc:
            raise ExprError(_message(self.where, self.text, str(exc))) from None
        return self.checked(env)

    def widen(self, env: Env) -> bool:
        """New limits that admit the names' values in `env` (and the old limits where they still fit, with room
        to grow), the closures rebuilt for them; False (limits unchanged) when values of these sizes might pass
        SAFE: then the evaluation is checked."""
        now = tuple([_bits(env[name]) for name in self.limits])
        if not self.fits(now):
            return False
        wider = tuple(map(max, self.limits.values(), now))
        base = wider if self.fits(wider) else now
        for room in (16, 4, 1, 0):
            limits = tuple(min(b + room, 62) for b in base)
            if self.fits(limits):
                break
        self.limits = dict(zip(self.limits, limits))
        self._fn = _build(self._tree, False, self.limits)
        return True

    def fits(self, bits: tuple[int, ...]) -> bool:
        """Whether names below 2**bits in magnitude keep every value within SAFE (remembered)."""
        fits = self._fits.get(bits)
        if fits is None:
            if len(self._fits) >= FITS_LIMIT:
                self._fits.clear()
            try:
                fits = max(bits, default=0) < 63 and bool(_bound(self._tree, {n: float(1 << b) for n, b in
                                                                              zip(self.limits, bits)}))
            except _Unbounded:
                fits = False
            self._fits[bits] = fits
        return fits

    def checked(self, env: Env):
        """The value, verifying every operation's result (for large names, or names that are not integers)."""
        if self._tree is None:
            return self.constant
        fn = self._checked
        if fn is None:
            fn = self._checked = _build(self._tree, True)
        try:
            with np.errstate(all="ignore"):
                return _check(fn(env), "the result")
        except _ERRORS as exc:
            raise ExprError(_message(self.where, self.text, str(exc))) from None

    def __repr__(self):
        return f"Expr({self.source!r})"


_NOT_ALLOWED = "is not allowed in workload expressions (allowed: numbers, names, arithmetic, comparisons, " \
               "and/or/not, 'x if c else y', min/max/abs/rand)"


class _Compiler:
    """Python AST -> _Node tree, checking every node against the whitelist and folding constants."""

    def __init__(self, text: str, where: str, known: Callable[[str], bool], constants: Env | None,
                 iteration_names: frozenset[str]):
        self.text, self.where, self.known = text, where, known
        self.constants = constants or {}
        self.iteration_names = iteration_names
        self.names: set[str] = set()
        self.uses_rand = False

    def fail(self, what: str):
        raise ExprError(_message(self.where, shown(self.text), what))

    def tree(self, node) -> _Node:
        method = getattr(self, f"_{type(node).__name__}", None)
        if method is None or not isinstance(node, ast.expr):
            self.fail(f"{type(node).__name__.lower()} {_NOT_ALLOWED}")
        return method(node)

    def make(self, kind: int, op, kids: list[_Node]) -> _Node:
        """A node over `kids`: folded when every kid is constant. A lane-varying kid that reads fewer
        iteration names than this node is computed once per warp and value of those names (memoised)."""
        iters = frozenset().union(*(k.iters for k in kids))
        node = _Node(kind, op, kids, None, iters, kind == CALL_RAND or any(k.varying for k in kids))
        if kind != CALL_RAND and all(k.kind == CONST for k in kids):
            return self.fold(node)
        node.kids = [_Node(MEMO, object(), (k,), tuple(sorted(k.iters)), k.iters, True)
                     if k.varying and k.iters != iters and k.kind not in (CONST, MEMO) else k for k in kids]
        return node

    def fold(self, node: _Node) -> _Node:
        try:
            with np.errstate(all="ignore"):
                value = _build(node, True)({})
        except _ERRORS as exc:
            self.fail(str(exc))
        if isinstance(value, (np.generic, np.ndarray)):
            value = value.item()
        return _Node(CONST, value=value)

    def _Constant(self, node):
        value = node.value
        if type(value) in (bool, int, float):
            try:
                return _Node(CONST, value=_check(value, "literal"))
            except ValueError as exc:
                self.fail(str(exc))
        self.fail(f"literal {_one_line(repr(value))[:40]} {_NOT_ALLOWED}")

    def _name(self, name: str) -> _Node:
        if not self.known(name):
            self.fail(f"unknown name '{shown(name)}'")
        self.names.add(name)
        if name in self.constants:
            value = self.constants[name]
            if isinstance(value, np.generic):
                value = value.item()
            if type(value) not in (bool, int, float):
                self.fail(f"'{name}' = {_one_line(repr(value))[:40]} is not a number")
            try:
                return _Node(CONST, value=_check(value, f"'{name}' ="))
            except ValueError as exc:
                self.fail(str(exc))
        return _Node(NAME, value=name, iters=frozenset({name}) & self.iteration_names,
                     varying=name in LANE_VARYING)

    def _Name(self, node):
        return self._name(node.id)

    def _Attribute(self, node):
        if isinstance(node.value, ast.Name):
            return self._name(f"{node.value.id}.{node.attr}")
        self.fail(f"attribute access '.{node.attr}' {_NOT_ALLOWED}")

    def _BinOp(self, node):
        if type(node.op) not in _BINOPS:
            self.fail(f"operator {type(node.op).__name__} {_NOT_ALLOWED}")
        return self.make(BIN, type(node.op), [self.tree(node.left), self.tree(node.right)])

    def _UnaryOp(self, node):
        return self.make(UNARY, type(node.op), [self.tree(node.operand)])

    def _BoolOp(self, node):
        combine = np.logical_and if isinstance(node.op, ast.And) else np.logical_or
        return self.make(BOOL, combine, [self.tree(v) for v in node.values])

    def _Compare(self, node):
        ops = [_CMPOPS.get(type(o)) for o in node.ops]
        if None in ops:
            self.fail(f"comparison {_NOT_ALLOWED}")
        return self.make(CMP, ops, [self.tree(node.left)] + [self.tree(c) for c in node.comparators])

    def _IfExp(self, node):
        out = self.make(IF, None, [self.tree(node.test), self.tree(node.body), self.tree(node.orelse)])
        if out.kind == IF and out.kids[0].kind == CONST:
            return out.kids[1] if np.all(out.kids[0].value) else out.kids[2]
        return out

    def _Call(self, node):
        if not isinstance(node.func, ast.Name) or node.keywords:
            self.fail(f"this call {_NOT_ALLOWED}")
        name = node.func.id
        if name != RAND and name not in _CALLS:
            self.fail(f"call to '{shown(name)}' {_NOT_ALLOWED}")
        kids = [self.tree(a) for a in node.args]
        if name == RAND:
            if len(kids) not in (2, 3):
                self.fail("rand takes (seed, n) or (seed, n, key)")
            self.uses_rand = True
            self.names.add("gtid")
            return self.make(CALL_RAND, None, kids)
        if name == "abs" and len(kids) != 1:
            self.fail("abs takes one argument")
        if name != "abs" and len(kids) < 2:
            self.fail("min/max need at least two arguments")
        return self.make(CALL, name, kids)


_BAD_CHARACTER = re.compile(r"[^\t\n\r -~]")


def _depth(tree: ast.AST) -> int:
    """How deeply sub-expressions nest (iteratively: the tree may be deep)."""
    deepest, stack = 0, [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, ast.expr):
            depth += 1
            deepest = max(deepest, depth)
        stack.extend((child, depth) for child in ast.iter_child_nodes(node))
    return deepest


def _parse(text: str, where: str) -> ast.Expression:
    """The Python AST of a string, after the checks that bound the time and memory compiling it takes."""
    def fail(what: str):
        raise ExprError(_message(where, shown(text), what))

    if len(text) > MAX_LENGTH:
        fail(f"{len(text)} characters, at most {MAX_LENGTH}")
    bad = _BAD_CHARACTER.search(text)
    if bad:
        fail(f"character {ascii(bad.group())} at position {bad.start()} is not allowed (expressions are printable "
             f"ASCII: names, numbers, operators)")
    try:
        tree, problem = ast.parse(text.strip(), mode="eval"), None
    except SyntaxError as exc:
        problem = f"syntax error ({exc.msg})"
    except (RecursionError, MemoryError):
        problem = f"nested more than {MAX_DEPTH} deep"
    if problem:
        fail(problem)
    depth = _depth(tree)
    if depth > MAX_DEPTH:
        fail(f"nested {depth} deep, at most {MAX_DEPTH} (a chain a + b + c + ... nests one level per operator: "
             f"split it into parameters)")
    return tree


def compile_expr(text, where: str, known: Callable[[str], bool], constants: Env | None = None,
                 iteration_names: frozenset[str] = frozenset({"rep"})) -> Expr:
    """Compile `text` (str or number); `known(name)` says which names exist; `constants` folds names whose
    value is fixed at load time (parameters), so a constant expression is computed once; subexpressions
    that vary by lane but not with some of `iteration_names` (loop indices, `rep`) are computed once per
    warp and reused (see `_memoized`)."""
    if isinstance(text, bool) or isinstance(text, (int, float)):
        try:
            value = _check(text, "value")
        except ValueError as exc:
            raise ExprError(f"{_one_line(where)}: {exc}") from None
        return Expr(str(value), where, frozenset(), False, value)
    if not isinstance(text, str):
        got = repr(text) if text is None or isinstance(text, (int, float, complex)) else f"a {type(text).__name__}"
        raise ExprError(f"{_one_line(where)}: expected an expression (a string or number), got {shown(got)}")
    tree = _parse(text, where)
    comp = _Compiler(text, where, known, constants, iteration_names)
    root = comp.tree(tree.body)
    if root.kind == CONST:
        return Expr(text, where, frozenset(comp.names), comp.uses_rand, root.value)
    return Expr(text, where, frozenset(comp.names), comp.uses_rand, None, root)
