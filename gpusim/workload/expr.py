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

This module parses and compiles the text (`compile_expr`) and holds the compiled `Expr`; the value limits and
ExprError are in expr_limits, the operators and calls in expr_operations, the compiled tree and its bound in
expr_tree, and the closures built from the tree in expr_closures.
"""

from __future__ import annotations

import ast
import re
from typing import Callable

import numpy as np

from .expr_closures import (ARRAY_BITS_LIMIT, ARRAY_BITS_SIZE, MEMO_KEY, MEMO_LIMIT, SEED_KEY, UNFIT, BeyondLimit,
                            bits_of, build)
from .expr_limits import (FLOAT_LIMIT, INT_MAX, INT_MIN, MAX_EXPONENT, MAX_SHIFT, SAFE, SHOWN, VALUE_ERRORS, Env,
                          ExprError, check_value, error_message, escaped_line, shown)
from .expr_operations import BINOPS, CALLS, CMPOPS, NEAR, RAND, SYMBOLS, hash_rand
from .expr_tree import (BIN, BOOL, CALL, CALL_RAND, CMP, CONST, IF, MEMO, NAME, UNARY, Node, Unbounded, tree_names,
                        value_bound)

__all__ = ["ARRAY_BITS_LIMIT", "ARRAY_BITS_SIZE", "BIN", "BOOL", "CALL", "CALL_RAND", "CMP", "CONST", "FITS_LIMIT",
           "FLOAT_LIMIT", "IF", "INT_MAX", "INT_MIN", "LANE_VARYING", "MAX_DEPTH", "MAX_EXPONENT", "MAX_LENGTH",
           "MAX_SHIFT", "MEMO", "MEMO_KEY", "MEMO_LIMIT", "NAME", "NEAR", "RAND", "SAFE", "SEED_KEY", "SHOWN",
           "UNARY", "UNFIT", "Env", "Expr", "ExprError", "compile_expr", "hash_rand", "shown"]

MAX_LENGTH = 4096  # characters in one expression
MAX_DEPTH = 100  # nesting of sub-expressions (a + b + c + ... nests one level per operator)
FITS_LIMIT = 256  # sets of names' bit lengths an expression remembers

# Names whose value differs from lane to lane: subexpressions using them cost numpy operations.
LANE_VARYING = frozenset({"lane", "tid", "tid.x", "tid.y", "tid.z", "gtid"})

class Expr:
    """A compiled expression: call it with an environment (name -> scalar or 32-lane array). `text` is the
    expression as messages show it (one line, shortened), `source` the text itself."""

    __slots__ = ("text", "source", "where", "names", "uses_rand", "constant", "limits", "_fn", "_tree",
                 "_checked", "_fits")

    def __init__(self, source: str, where: str, names: frozenset[str], uses_rand: bool, constant,
                 tree: Node | None = None):
        self.text, self.source, self.where, self.names, self.uses_rand = shown(source), source, where, names, \
            uses_rand
        self.constant, self._tree, self._checked = constant, tree, None
        # Each name below 2**limits[name] in magnitude keeps every value within SAFE; the limits start at
        # nothing and follow the names' values (see widen).
        self.limits = dict.fromkeys(tree_names(tree), -1) if tree is not None else {}
        self._fits: dict[tuple[int, ...], bool] = {}  # names' bit lengths -> whether they keep values in SAFE
        self._fn = build(tree, False, self.limits) if tree is not None else (lambda env: constant)

    def __call__(self, env: Env):
        if self.constant is not None:
            return self.constant
        try:
            try:
                return self._fn(env)
            except BeyondLimit:
                if self.widen(env):
                    return self._fn(env)
        except BeyondLimit:
            pass
        except VALUE_ERRORS as exc:
            raise ExprError(error_message(self.where, self.text, str(exc))) from None
        return self.checked(env)

    def widen(self, env: Env) -> bool:
        """New limits that admit the names' values in `env` (and the old limits where they still fit, with room
        to grow), the closures rebuilt for them; False (limits unchanged) when values of these sizes might pass
        SAFE: then the evaluation is checked."""
        now = tuple([bits_of(env[name]) for name in self.limits])
        if not self.fits(now):
            return False
        wider = tuple(map(max, self.limits.values(), now))
        base = wider if self.fits(wider) else now
        for room in (16, 4, 1, 0):
            limits = tuple(min(b + room, 62) for b in base)
            if self.fits(limits):
                break
        self.limits = dict(zip(self.limits, limits))
        self._fn = build(self._tree, False, self.limits)
        return True

    def fits(self, bits: tuple[int, ...]) -> bool:
        """Whether names below 2**bits in magnitude keep every value within SAFE (remembered)."""
        fits = self._fits.get(bits)
        if fits is None:
            if len(self._fits) >= FITS_LIMIT:
                self._fits.clear()
            try:
                fits = max(bits, default=0) < 63 and bool(value_bound(self._tree, {n: float(1 << b) for n, b in
                                                                              zip(self.limits, bits)}))
            except Unbounded:
                fits = False
            self._fits[bits] = fits
        return fits

    def checked(self, env: Env):
        """The value, verifying every operation's result (for large names, or names that are not integers)."""
        if self._tree is None:
            return self.constant
        fn = self._checked
        if fn is None:
            fn = self._checked = build(self._tree, True)
        try:
            with np.errstate(all="ignore"):
                return check_value(fn(env), "the result")
        except VALUE_ERRORS as exc:
            raise ExprError(error_message(self.where, self.text, str(exc))) from None

    def __repr__(self):
        return f"Expr({self.source!r})"


_NOT_ALLOWED = "is not allowed in workload expressions (allowed: numbers, names, arithmetic, comparisons, " \
               "and/or/not, 'x if c else y', min/max/abs/rand)"


class _Compiler:
    """Python AST -> Node tree, checking every node against the whitelist and folding constants."""

    def __init__(self, text: str, where: str, known: Callable[[str], bool], constants: Env | None,
                 iteration_names: frozenset[str]):
        self.text, self.where, self.known = text, where, known
        self.constants = constants or {}
        self.iteration_names = iteration_names
        self.names: set[str] = set()
        self.uses_rand = False

    def fail(self, what: str):
        raise ExprError(error_message(self.where, shown(self.text), what))

    def tree(self, node) -> Node:
        method = getattr(self, f"_{type(node).__name__}", None)
        if method is None or not isinstance(node, ast.expr):
            self.fail(f"{type(node).__name__.lower()} {_NOT_ALLOWED}")
        return method(node)

    def make(self, kind: int, op, kids: list[Node]) -> Node:
        """A node over `kids`: folded when every kid is constant. A lane-varying kid that reads fewer
        iteration names than this node is computed once per warp and value of those names (memoised)."""
        iters = frozenset().union(*(k.iters for k in kids))
        node = Node(kind, op, kids, None, iters, kind == CALL_RAND or any(k.varying for k in kids))
        if kind != CALL_RAND and all(k.kind == CONST for k in kids):
            return self.fold(node)
        node.kids = [Node(MEMO, object(), (k,), tuple(sorted(k.iters)), k.iters, True)
                     if k.varying and k.iters != iters and k.kind not in (CONST, MEMO) else k for k in kids]
        return node

    def fold(self, node: Node) -> Node:
        try:
            with np.errstate(all="ignore"):
                value = build(node, True)({})
        except VALUE_ERRORS as exc:
            self.fail(str(exc))
        if isinstance(value, (np.generic, np.ndarray)):
            value = value.item()
        return Node(CONST, value=value)

    def _Constant(self, node):
        value = node.value
        if type(value) in (bool, int, float):
            try:
                return Node(CONST, value=check_value(value, "literal"))
            except ValueError as exc:
                self.fail(str(exc))
        self.fail(f"literal {escaped_line(repr(value))[:40]} {_NOT_ALLOWED}")

    def _name(self, name: str) -> Node:
        if not self.known(name):
            self.fail(f"unknown name '{shown(name)}'")
        self.names.add(name)
        if name in self.constants:
            value = self.constants[name]
            if isinstance(value, np.generic):
                value = value.item()
            if type(value) not in (bool, int, float):
                self.fail(f"'{name}' = {escaped_line(repr(value))[:40]} is not a number")
            try:
                return Node(CONST, value=check_value(value, f"'{name}' ="))
            except ValueError as exc:
                self.fail(str(exc))
        return Node(NAME, value=name, iters=frozenset({name}) & self.iteration_names,
                     varying=name in LANE_VARYING)

    def _Name(self, node):
        return self._name(node.id)

    def _Attribute(self, node):
        if isinstance(node.value, ast.Name):
            return self._name(f"{node.value.id}.{node.attr}")
        self.fail(f"attribute access '.{node.attr}' {_NOT_ALLOWED}")

    def _BinOp(self, node):
        if type(node.op) not in BINOPS:
            self.fail(f"operator {type(node.op).__name__} {_NOT_ALLOWED}")
        return self.make(BIN, type(node.op), [self.tree(node.left), self.tree(node.right)])

    def _UnaryOp(self, node):
        return self.make(UNARY, type(node.op), [self.tree(node.operand)])

    def _BoolOp(self, node):
        combine = np.logical_and if isinstance(node.op, ast.And) else np.logical_or
        return self.make(BOOL, combine, [self.tree(v) for v in node.values])

    def _Compare(self, node):
        ops = [CMPOPS.get(type(o)) for o in node.ops]
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
        if name != RAND and name not in CALLS:
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
        raise ExprError(error_message(where, shown(text), what))

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
    warp and reused (see `expr_closures.memoized`)."""
    if isinstance(text, bool) or isinstance(text, (int, float)):
        try:
            value = check_value(text, "value")
        except ValueError as exc:
            raise ExprError(f"{escaped_line(where)}: {exc}") from None
        return Expr(str(value), where, frozenset(), False, value)
    if not isinstance(text, str):
        got = repr(text) if text is None or isinstance(text, (int, float, complex)) else f"a {type(text).__name__}"
        raise ExprError(f"{escaped_line(where)}: expected an expression (a string or number), got {shown(got)}")
    tree = _parse(text, where)
    comp = _Compiler(text, where, known, constants, iteration_names)
    root = comp.tree(tree.body)
    if root.kind == CONST:
        return Expr(text, where, frozenset(comp.names), comp.uses_rand, root.value)
    return Expr(text, where, frozenset(comp.names), comp.uses_rand, None, root)
