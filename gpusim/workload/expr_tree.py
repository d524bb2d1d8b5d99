"""The compiled form of a workload expression: a tree of Nodes, and the interval bound over it.

A Node is a constant, a name or an operation over sub-nodes (a MEMO node marks a lane-varying part that a warp
computes once per value of the iteration names it reads). `value_bound` bounds every value in a tree, given a
bound on each name's value: an expression whose names stay within such bounds needs no check per operation.
"""

from __future__ import annotations

import ast
import math

from .expr_limits import MAX_EXPONENT, SAFE
from .expr_operations import EXACT_OPS, float_power, grown_bound


class Unbounded(Exception):
    """The static bound of some value passes SAFE."""


CONST, NAME, BIN, UNARY, BOOL, CMP, IF, CALL, CALL_RAND, MEMO = range(10)


class Node:
    """A compiled subexpression: `kind`, its operator, its sub-nodes, a constant value or a name, the
    iteration names it reads and whether it varies by lane."""

    __slots__ = ("kind", "op", "kids", "value", "iters", "varying")

    def __init__(self, kind, op=None, kids=(), value=None, iters=frozenset(), varying=False):
        self.kind, self.op, self.kids, self.value, self.iters, self.varying = kind, op, kids, value, iters, varying


def value_bound(node: Node, m: dict[str, float]) -> tuple[float, bool]:
    """(a bound on |value|, whether the value is an integer) when each name's value is an integer within
    +-m[name]; Unbounded when some value's bound passes SAFE."""
    kind = node.kind
    if kind == CONST:
        v = node.value
        return abs(float(v)), type(v) is int or type(v) is bool
    if kind == NAME:
        return m[node.value], True
    if kind == MEMO:
        return value_bound(node.kids[0], m)
    parts = [value_bound(k, m) for k in node.kids]
    bounds = [p[0] for p in parts]
    is_int = all(p[1] for p in parts)
    if kind == BIN:
        b = binop_bound(node, bounds, parts)
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
        raise Unbounded
    return b, is_int


def binop_bound(node: Node, bounds, parts) -> float:
    op, (bl, br), right = node.op, bounds, node.kids[1]
    both_int = parts[0][1] and parts[1][1]
    if op in EXACT_OPS and op not in (ast.Div, ast.FloorDiv, ast.Pow):
        return grown_bound(op, bl, br)
    if op is ast.Div or op is ast.FloorDiv:
        if parts[1][1]:  # a whole divisor is at least 1 in magnitude (0 is an error)
            return bl + 1
        return bl / abs(right.value) + 1 if right.kind == CONST and right.value else math.inf
    if op is ast.Pow:
        if right.kind == CONST:
            e = right.value
            if e >= 0:
                return float_power(max(bl, 1.0), e)
            return 1.0 if both_int else math.inf  # a negative integer exponent of an integer is an error
        return float_power(max(bl, 1.0), min(br, MAX_EXPONENT)) if both_int else math.inf
    if op is ast.Mod:
        return br
    if op is ast.RShift:
        return bl
    return 2 * max(bl, br)  # & | ^


def tree_names(root: Node) -> tuple[str, ...]:
    """The names a tree reads (not constants), each once."""
    found, stack = {}, [root]
    while stack:
        node = stack.pop()
        if node.kind == NAME:
            found[node.value] = None
        stack.extend(node.kids)
    return tuple(found)
