"""A compiled expression tree turned into closures over an environment (name -> scalar or lane array).

Unchecked closures run plain numpy operations: each name read checks its value against the bit-length limit the
expression chose for it (an array once, by identity) and raises BeyondLimit past it. Checked closures verify
every operation's result instead. Lane-varying parts that some iteration names do not affect are memoised per
warp (MEMO_KEY in the environment holds the cache); SEED_KEY holds the run's --seed, which rand() mixes in.
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from .expr_limits import check_value, magnitude
from .expr_operations import (BINOPS, CALLS, CHECKED_BINOPS, CHECKED_CALLS, CHECKED_UNARY_OPS, UNARY_OPS, hash_rand,
                              seeded)
from .expr_tree import BIN, BOOL, CALL_RAND, CMP, CONST, IF, MEMO, NAME, UNARY, Node


class BeyondLimit(Exception):
    """A name's value is beyond the expression's limit for it (or not a signed integer)."""


SEED_KEY = "__seed__"  # env entry holding the run's --seed, mixed into rand()
MEMO_KEY = "__memo__"  # env entry holding a warp's cache of loop-invariant lane-varying subexpressions
MEMO_LIMIT = 4096


def memoized(fn, key_names: tuple[str, ...], token):
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
    bits = magnitude(v).bit_length() if v.dtype.kind in "ib" else UNFIT  # (unsigned arithmetic wraps below 0)
    if v.size <= ARRAY_BITS_SIZE:
        if len(_ARRAY_BITS) >= ARRAY_BITS_LIMIT:
            _ARRAY_BITS.clear()
        _ARRAY_BITS[id(v)] = (v, bits)
    return bits


def bits_of(v) -> int:
    """|v| < 2**bits_of(v) for a signed integer (or bool) value; UNFIT for anything else."""
    kind = type(v)
    if kind is int:
        return v.bit_length()
    if kind is np.ndarray:
        return _array_bits(v)
    if kind is bool or isinstance(v, (np.signedinteger, np.bool_)):
        return int(v).bit_length()
    return UNFIT


def _fast_leaf(name: str, bits: int):
    """A name's value, if it is a signed integer below 2**bits in magnitude; else BeyondLimit."""
    bound = 1 << bits if bits >= 0 else 0
    last: Any = None  # the array this name held last time, within the limit (a warp reads the same one again)

    def leaf(env: Any) -> Any:
        nonlocal last
        v: Any = env[name]
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
        elif bits_of(v) <= bits:
            return v
        raise BeyondLimit
    return leaf


def _checked_leaf(name: str):
    what = f"'{name}'"

    def leaf(env):
        v = check_value(env[name], what)
        if isinstance(v, (np.ndarray, np.generic)) and v.dtype.kind == "u":
            return v.astype(np.int64)  # within int64 (checked): signed, so that a - b may go below 0
        return v
    return leaf


def build(node: Node, checked: bool, limits: Any = None) -> Any:
    """Closures computing `node` for an env: plain numpy operations, or (checked) each result verified."""
    kind = node.kind
    if kind == CONST:
        value = node.value
        return lambda env: value
    if kind == NAME:
        return _checked_leaf(node.value) if checked else _fast_leaf(node.value, limits[node.value])
    if kind == MEMO:
        return memoized(build(node.kids[0], checked, limits), node.value, node.op)
    if kind == BIN:
        return _build_bin(node, checked, limits)
    parts = [build(k, checked, limits) for k in node.kids]
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
        return lambda env: hash_rand(seeded(seed(env), env.get(SEED_KEY, 0)), n(env), key(env), env["gtid"])
    fn = (CHECKED_CALLS if checked else CALLS)[node.op]
    if len(parts) == 1:
        only = parts[0]
        return lambda env: fn(only(env))
    return lambda env: fn(*[a(env) for a in parts])


def _build_bin(node: Node, checked: bool, limits):
    op = (CHECKED_BINOPS if checked else BINOPS)[node.op]
    left, right = node.kids
    if right.kind == CONST:
        value, left = right.value, build(left, checked, limits)
        return lambda env: op(left(env), value)
    if left.kind == CONST:
        value, right = left.value, build(right, checked, limits)
        return lambda env: op(value, right(env))
    left, right = build(left, checked, limits), build(right, checked, limits)
    return lambda env: op(left(env), right(env))


def _build_unary(op: Any, operand: Any, checked: bool) -> Any:
    if op is ast.UAdd:
        return operand
    if op is ast.USub and not checked:
        return lambda env: -operand(env)
    table: Any = CHECKED_UNARY_OPS if checked else UNARY_OPS
    fn = table[op]
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
