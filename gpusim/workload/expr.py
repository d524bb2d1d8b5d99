"""A small, whitelisted expression language for workload files, evaluated for 32 lanes at once (numpy).

Python's `ast` module parses the text; only the nodes below are accepted and compiled into closures.
Nothing is ever passed to `eval`. Allowed: integer/float/bool literals; names and dotted names that the
workload defines (`lane`, `tid.x`, `block.y`, loop indices, parameters, buffers); `+ - * / // % ** << >> & | ^ ~`;
comparisons (chainable); `and or not`; `a if c else b`; and the calls `min`, `max`, `abs`, `rand(seed, n[, key])`.
`/` between integers is integer (floor) division, as in C for the non-negative values addresses use.
"""

from __future__ import annotations

import ast
import operator
from typing import Any, Callable

import numpy as np

from ..errors import GpusimError

MAX_EXPONENT = 64
MAX_SHIFT = 63


class ExprError(GpusimError):
    """An expression that cannot be compiled or evaluated."""


Env = dict[str, Any]


def _is_int(v) -> bool:
    kind = type(v)
    if kind is int or kind is bool:
        return True
    if kind is np.ndarray:
        return v.dtype.kind in "iub"
    return isinstance(v, (np.integer, np.bool_))


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


def _pow(a, b):
    if np.any(np.abs(np.asarray(b)) > MAX_EXPONENT):
        raise ValueError(f"exponent larger than {MAX_EXPONENT}")
    if _is_int(a) and _is_int(b) and np.any(np.asarray(b) < 0):
        raise ValueError("negative integer exponent")
    return a ** b


def _shift(op):
    def shifted(a, b):
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


_BINOPS: dict[type, Callable] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: _div,
    ast.FloorDiv: _floordiv, ast.Mod: _mod, ast.Pow: _pow, ast.LShift: _shift(operator.lshift),
    ast.RShift: _shift(operator.rshift), ast.BitAnd: _bitwise(operator.and_), ast.BitOr: _bitwise(operator.or_),
    ast.BitXor: _bitwise(operator.xor),
}
_CMPOPS: dict[type, Callable] = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne,
}

_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))


def hash_rand(seed, n, key, gtid) -> np.ndarray:
    """Deterministic per-thread pseudo-random integers in [0, n): splitmix64 of (seed, global thread, key)."""
    if np.any(np.asarray(n) <= 0):
        raise ValueError("rand(seed, n): n must be positive")
    with np.errstate(over="ignore"):
        x = (np.asarray(seed).astype(np.uint64) * _MIX[0]) ^ (np.asarray(gtid).astype(np.uint64) * _MIX[1]) \
            ^ (np.asarray(key).astype(np.uint64) * _MIX[2])
        x = x + _MIX[0]
        x = (x ^ (x >> np.uint64(30))) * _MIX[1]
        x = (x ^ (x >> np.uint64(27))) * _MIX[2]
        x = x ^ (x >> np.uint64(31))
    return (x % np.asarray(n).astype(np.uint64)).astype(np.int64)


def _minmax(np_op):
    def fn(*args):
        if len(args) < 2:
            raise TypeError("min/max need at least two arguments")
        out = args[0]
        for a in args[1:]:
            out = np_op(out, a)
        return out
    return fn


_CALLS = {"min": _minmax(np.minimum), "max": _minmax(np.maximum), "abs": lambda *a: np.abs(*a)}
RAND = "rand"


class Expr:
    """A compiled expression: call it with an environment (name -> scalar or 32-lane array)."""

    __slots__ = ("text", "where", "names", "uses_rand", "_fn", "constant")

    def __init__(self, text: str, where: str, names: frozenset[str], uses_rand: bool, fn, constant):
        self.text, self.where, self.names, self.uses_rand = text, where, names, uses_rand
        self._fn, self.constant = fn, constant

    def __call__(self, env: Env):
        if self.constant is not None:
            return self.constant
        try:
            return self._fn(env)
        except (ZeroDivisionError, ValueError, TypeError, OverflowError, FloatingPointError) as exc:
            raise ExprError(f"{self.where}: expression '{self.text}': {exc}") from None

    def __repr__(self):
        return f"Expr({self.text!r})"


_NOT_ALLOWED = "is not allowed in workload expressions (allowed: numbers, names, arithmetic, comparisons, " \
               "and/or/not, 'x if c else y', min/max/abs/rand)"


class _Const:
    """A compile-time constant subexpression (folded before any lane is evaluated)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _fn(node):
    if type(node) is _Const:
        value = node.value
        return lambda env: value
    return node


# Names whose value differs from lane to lane: subexpressions using them cost numpy operations.
LANE_VARYING = frozenset({"lane", "tid", "tid.x", "tid.y", "tid.z", "gtid"})
SEED_KEY = "__seed__"  # env entry holding the run's --seed, mixed into rand()
MEMO_KEY = "__memo__"  # env entry holding a warp's cache of loop-invariant lane-varying subexpressions
MEMO_LIMIT = 4096


def _ast_names(node) -> tuple[frozenset[str], bool]:
    """Dotted names a Python AST subtree reads, and whether it calls rand()."""
    names, uses_rand = set(), False
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name):
            names.add(f"{sub.value.id}.{sub.attr}")
        elif isinstance(sub, ast.Name) and not any(
                isinstance(p, ast.Attribute) and p.value is sub for p in ast.walk(node)):
            names.add(sub.id)
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == RAND:
            uses_rand = True
    names.discard(RAND)
    return frozenset(names), uses_rand


def _memoized(fn, key_names: tuple[str, ...]):
    """Wrap a lane-varying subexpression so a warp computes it once per distinct value of `key_names`
    (the iteration names it reads: loop indices, `rep`); a vectorised `rep` keys by its length."""
    token = object()

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


class _Compiler:
    def __init__(self, text: str, where: str, known: Callable[[str], bool], constants: Env | None,
                 iteration_names: frozenset[str]):
        self.text, self.where, self.known = text, where, known
        self.constants = constants or {}
        self.iteration_names = iteration_names
        self.names: set[str] = set()
        self.uses_rand = False
        self.iter_stack: list[frozenset[str]] = []

    def fail(self, what: str):
        raise ExprError(f"{self.where}: expression '{self.text}': {what}")

    def compile(self, node):
        method = getattr(self, f"_{type(node).__name__}", None)
        if method is None:
            self.fail(f"{type(node).__name__.lower()} {_NOT_ALLOWED}")
        if not isinstance(node, ast.expr):
            return method(node)
        names, rand = _ast_names(node)
        mine = names & self.iteration_names
        parent = self.iter_stack[-1] if self.iter_stack else None
        self.iter_stack.append(mine)
        try:
            result = method(node)
        finally:
            self.iter_stack.pop()
        # Hoist a lane-varying subexpression out of the loops it does not depend on: memoise it per warp.
        if parent is not None and mine != parent and type(result) is not _Const and (names & LANE_VARYING or rand):
            result = _memoized(result, tuple(sorted(mine)))
        return result

    def _Expression(self, node):
        return self.compile(node.body)

    def fold(self, fn, *parts):
        """A _Const if every part is constant, else a closure over the parts."""
        if all(type(p) is _Const for p in parts):
            try:
                value = fn(*(p.value for p in parts))
            except (ZeroDivisionError, ValueError, TypeError, OverflowError) as exc:
                self.fail(str(exc))
            return _Const(value.item() if isinstance(value, np.generic) else value)
        return None

    def _Constant(self, node):
        if isinstance(node.value, bool) or isinstance(node.value, (int, float)):
            return _Const(node.value)
        self.fail(f"literal {node.value!r} {_NOT_ALLOWED}")

    def _name(self, name: str):
        if not self.known(name):
            self.fail(f"unknown name '{name}'")
        self.names.add(name)
        if name in self.constants:
            return _Const(self.constants[name])
        return lambda env: env[name]

    def _Name(self, node):
        return self._name(node.id)

    def _Attribute(self, node):
        if isinstance(node.value, ast.Name):
            return self._name(f"{node.value.id}.{node.attr}")
        self.fail(f"attribute access '.{node.attr}' {_NOT_ALLOWED}")

    def _BinOp(self, node):
        op = _BINOPS.get(type(node.op))
        if op is None:
            self.fail(f"operator {type(node.op).__name__} {_NOT_ALLOWED}")
        left, right = self.compile(node.left), self.compile(node.right)
        folded = self.fold(op, left, right)
        if folded is not None:
            return folded
        if type(right) is _Const:
            value, left = right.value, _fn(left)
            return lambda env: op(left(env), value)
        if type(left) is _Const:
            value, right = left.value, _fn(right)
            return lambda env: op(value, right(env))
        return lambda env: op(left(env), right(env))

    def _UnaryOp(self, node):
        operand = self.compile(node.operand)
        if type(operand) is _Const:
            unary = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: np.logical_not,
                     ast.Invert: lambda a: _bitwise(lambda x, _y: ~x)(a, 0)}.get(type(node.op))
            if unary is not None:
                return self.fold(unary, operand)
        operand = _fn(operand)
        if isinstance(node.op, ast.USub):
            return lambda env: -operand(env)
        if isinstance(node.op, ast.UAdd):
            return operand
        if isinstance(node.op, ast.Not):
            return lambda env: np.logical_not(operand(env))
        if isinstance(node.op, ast.Invert):
            return lambda env: _bitwise(lambda a, _b: ~a)(operand(env), 0)
        self.fail(f"operator {type(node.op).__name__} {_NOT_ALLOWED}")

    def _BoolOp(self, node):
        compiled = [self.compile(v) for v in node.values]
        parts = [_fn(c) for c in compiled]
        combine = np.logical_and if isinstance(node.op, ast.And) else np.logical_or

        def fn(env):
            out = parts[0](env)
            for p in parts[1:]:
                out = combine(out, p(env))
            return out
        return self.fold(lambda *_: fn({}), *compiled) or fn

    def _Compare(self, node):
        ops = [_CMPOPS.get(type(o)) for o in node.ops]
        if None in ops:
            self.fail(f"comparison {_NOT_ALLOWED}")
        compiled = [self.compile(node.left)] + [self.compile(c) for c in node.comparators]
        terms = [_fn(c) for c in compiled]

        def fn(env):
            values = [t(env) for t in terms]
            out = ops[0](values[0], values[1])
            for i in range(1, len(ops)):
                out = np.logical_and(out, ops[i](values[i], values[i + 1]))
            return out
        return self.fold(lambda *_: fn({}), *compiled) or fn

    def _IfExp(self, node):
        cond, yes, no = self.compile(node.test), self.compile(node.body), self.compile(node.orelse)
        if type(cond) is _Const:
            return yes if np.all(cond.value) else no
        cond, yes, no = _fn(cond), _fn(yes), _fn(no)

        def fn(env):
            c = cond(env)
            if isinstance(c, np.ndarray):
                return np.where(c, yes(env), no(env))
            return yes(env) if c else no(env)
        return fn

    def _Call(self, node):
        if not isinstance(node.func, ast.Name) or node.keywords:
            self.fail(f"this call {_NOT_ALLOWED}")
        name = node.func.id
        if name != RAND and name not in _CALLS:
            self.fail(f"call to '{name}' {_NOT_ALLOWED}")
        compiled = [self.compile(a) for a in node.args]
        args = [_fn(c) for c in compiled]
        if name == RAND:
            if len(args) not in (2, 3):
                self.fail("rand takes (seed, n) or (seed, n, key)")
            self.uses_rand = True
            self.names.add("gtid")
            key = args[2] if len(args) == 3 else (lambda env: 0)
            return lambda env: hash_rand(args[0](env) + 7919 * env.get(SEED_KEY, 0), args[1](env), key(env),
                                         env["gtid"])
        fn = _CALLS[name]
        return self.fold(fn, *compiled) or (lambda env: fn(*(a(env) for a in args)))


def compile_expr(text, where: str, known: Callable[[str], bool], constants: Env | None = None,
                 iteration_names: frozenset[str] = frozenset({"rep"})) -> Expr:
    """Compile `text` (str or number); `known(name)` says which names exist; `constants` folds names whose
    value is fixed at load time (parameters), so a constant expression is computed once; subexpressions
    that vary by lane but not with some of `iteration_names` (loop indices, `rep`) are computed once per
    warp and reused (see `_memoized`)."""
    if isinstance(text, bool) or isinstance(text, (int, float)):
        value = text
        return Expr(str(text), where, frozenset(), False, lambda env: value, value)
    if not isinstance(text, str):
        raise ExprError(f"{where}: expected an expression (a string or number), got {text!r}")
    if len(text) > 2000:
        raise ExprError(f"{where}: expression longer than 2000 characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"{where}: expression '{text}': syntax error ({exc.msg})") from None
    comp = _Compiler(text, where, known, constants, iteration_names)
    node = comp.compile(tree)
    constant = node.value if type(node) is _Const else None
    return Expr(text, where, frozenset(comp.names), comp.uses_rand, _fn(node), constant)
