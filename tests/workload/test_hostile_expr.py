"""Hostile workload expressions: whatever the text, compiling and evaluating it gives a real, finite
number within 64 bits or a one-line GpusimError naming the field, in bounded time, with no numpy warning.
Hand-written cases for each rule first, then hypothesis generators (random grammar, deep nesting, long sums,
nested powers, huge literals, many names, unicode and control characters, division by zero, complex powers),
each case within a time budget (and each test under a pytest-timeout limit of that budget per case, so a hang
fails); the cases that hung or blew up before are also run in a subprocess with a hard timeout and an
address-space limit. Every value the evaluator computes is checked against an exact Python-int
reference, and the fast path (no per-operation checks) against the checked one."""

from __future__ import annotations

import ast
import collections
import math
import operator
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis.control import currently_in_test_context, event
from hypothesis import strategies as st

from gpusim.errors import GpusimError
from gpusim.workload.expr import (INT_MAX, INT_MIN, MAX_DEPTH, MAX_LENGTH, SHOWN, Expr, ExprError,
                                  compile_expr)

from tests.conftest import ROOT

WHERE = "w.yaml:7: addr"
LANE = np.arange(32, dtype=np.int64)
PARAMS = {"P": 4096, "BIG": 2**62, "F": 0.5, "NEG": -3, "MAXI": INT_MAX}
NAMES = ["lane", "tid", "tid.x", "gtid", "block.x", "k", "i", "rep", "H", "X"] + list(PARAMS) + \
    [f"n{j}" for j in range(8)]
KNOWN = set(NAMES) | {f"n{j}" for j in range(2000)}
ITERATION = frozenset({"k", "i", "rep"})
BUDGET_S = 2.0  # per case, compile and evaluate (a test's timeout mark: this times the cases it runs)
COUNTS: collections.Counter = collections.Counter()


def env(big: bool = False) -> dict:
    """Names as a warp sees them; `big` puts some near the 64-bit edge (the evaluator's checked path)."""
    values = {"lane": LANE, "tid": LANE + 64, "tid.x": LANE + 64, "gtid": LANE + 3 * 256 + 64, "block.x": 3,
              "k": 5, "i": 2, "rep": 0, "H": LANE << 57, "X": 7, **{f"n{j}": j + 1 for j in range(2000)}}
    if big:
        values.update({"k": 2**62 + 7, "i": -(2**62), "X": 1.5, "rep": np.arange(3)[:, None] * 2**61})
    return values


ENV, BIG_ENV = env(), env(big=True)


def assert_one_line(message: str) -> None:
    assert message.startswith(WHERE), message
    assert message.isprintable() and "\n" not in message and "\r" not in message, repr(message)
    assert len(message) < 400, message


def assert_real(value) -> None:
    """A real, finite number (or array of them) that fits the limits."""
    if isinstance(value, (bool, np.bool_)):
        return
    if type(value) is int:
        assert INT_MIN <= value <= INT_MAX, value
        return
    array = np.asarray(value)
    assert array.dtype.kind in "biuf", (value, array.dtype)
    if array.dtype.kind == "f":
        assert np.all(np.abs(array) < 2.0**63), value  # (false for NaN)
    elif array.dtype.kind == "u" and array.size:
        assert array.max() <= INT_MAX, value


def outcome(text, names: dict = ENV, constants: dict | None = PARAMS):
    """('value', v) or ('error', message) for one expression, checked against every rule, within BUDGET_S (a
    hang is ended by the test's timeout mark: pytest-timeout raises a BaseException the evaluator cannot
    swallow)."""
    COUNTS["cases"] += 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a numpy RuntimeWarning is a failure, not noise
        start = time.perf_counter()
        try:
            expr = compile_expr(text, WHERE, KNOWN.__contains__, constants, ITERATION)
            value = expr(names)
        except GpusimError as exc:
            assert time.perf_counter() - start < BUDGET_S, f"over {BUDGET_S} s: {text!r}"
            assert_one_line(str(exc))
            COUNTS["errors"] += 1
            note(f"error: {_category(str(exc))}")
            return "error", str(exc)
        assert_real(value)
        # the fast path (no per-operation checks) and the checked one agree
        assert_same(value, expr.checked(names))
        COUNTS["values"] += 1
        note("value")
        assert time.perf_counter() - start < BUDGET_S, f"over {BUDGET_S} s: {text!r}"
        return "value", value


def note(what: str) -> None:
    """A hypothesis event (shown with --hypothesis-show-statistics), counted in COUNTS as well."""
    COUNTS[what] += 1
    if currently_in_test_context():
        event(what)


def assert_same(a, b) -> None:
    assert np.asarray(a).dtype == np.asarray(b).dtype and np.array_equal(a, b), (a, b)


def _category(message: str) -> str:
    for key in ("nested", "characters", "character", "syntax", "not allowed", "unknown name", "64-bit",
                "2**63", "by zero", "complex", "exponent", "shift", "need integers", "finite", "rand", "takes",
                "need at least"):
        if key in message:
            return key
    return "other"


# ---------------------------------------------------------------------------------------------- hand-written


@pytest.mark.fast
@pytest.mark.parametrize("text, message", [
    ("((2**64)**64)**64", "does not fit in a 64-bit integer"),
    ("(((2**40)**40)**40)**40", "'**' result would be about 2**1600: beyond 2**63"),  # refused before computing
    ("2**64**64**64**64**64", "beyond 2**63"),
    ("(lane + 2) ** 64", "beyond 2**63"),
    ("(k - 2) ** 40", "does not fit in a 64-bit integer"),  # 3**40: 2**63.4, computed, then refused
    ("((k ** 40) ** 40)", "beyond 2**63"),
    ("lane * 2**62 * 4", "does not fit in a 64-bit integer"),
    ("(k + 2**62) * 4 // 4", "does not fit in a 64-bit integer"),  # back in range at the end: still an error
    ("lane + 9223372036854775800", "does not fit in a 64-bit integer"),
    ("H * H", "does not fit in a 64-bit integer"),
    ("(lane < 3) + MAXI", "does not fit in a 64-bit integer"),  # a numpy bool array plus a Python int
    ("(lane % 3 + 3037000498) ** 2", "'**' result 9223372037000250000 does not fit"),  # 3037000500**2
    ("(lane * 0 + 2) ** 63", "'**' result 9223372036854775808 does not fit"),
    ("(lane * 0 - MAXI - 1) // (lane * 0 - 1)", "'//' result 9223372036854775808 does not fit"),
    ("(lane * 0 - 1) * (lane * 0 - MAXI - 1)", "'*' result 9223372036854775808 does not fit"),
    ("-(lane - MAXI - 1)", "does not fit in a 64-bit integer"),
    ("abs(lane - MAXI - 1)", "does not fit in a 64-bit integer"),
    ("lane << 63", "does not fit in a 64-bit integer"),
    ("9223372036854775808", "does not fit in a 64-bit integer"),
    ("0x" + "f" * 3000, "does not fit in a 64-bit integer"),
    ("1e300", "beyond 2**63"),
    ("1e999", "not a finite number"),
    ("1e18 * 1e18 - 1e18 * 1e18", "beyond 2**63"),
    ("lane / (lane * 1e-300 + 1e-300)", "beyond 2**63"),
    ("1 if lane * 1e10 * 1e10 > 0 else 0", "beyond 2**63"),
    ("(-1) ** 0.5", "complex"),
    ("(-8.0) ** (1/3.0)", "complex"),
    ("(lane - 3) ** F", "complex"),
    ("2.0 ** -65", "exponent larger than 64"),
    ("2 ** (k - 6)", "negative integer exponent"),
    ("lane / (k - 5)", "division by zero"),
    ("1.0 // (F - 0.5)", "division by zero"),
    ("lane % (lane - lane)", "modulo by zero"),
    ("rand(1, 0.5)", "whole number"),
    ("rand(1.5, 10)", "whole number"),
    ("+".join(["1"] * 1000), f"nested 1000 deep, at most {MAX_DEPTH}"),
    ("+".join(f"n{j}" for j in range(200)), f"at most {MAX_DEPTH}"),
    ("-" * 3000 + "1", f"nested more than {MAX_DEPTH} deep"),
    ("(" * 300 + "1" + ")" * 300, "syntax error"),
    ("1" + " " * MAX_LENGTH, f"at most {MAX_LENGTH}"),
    ("lane\n+ 1", "syntax error"),
    ("lane\x00", "character '\\x00' at position 4"),
    ("\uff4c\uff41\uff4e\uff45 + 1", "character '\\uff4c' at position 0"),  # fullwidth 'lane' (NFKC: lane)
    ("lane + 1 # \u202e", "character '\\u202e'"),
    ("abs(lane, 1)", "abs takes one argument"),
    ("min(lane)", "min/max need at least two arguments"),
    ("min(*lane)", "not allowed"),
    ("1j", "not allowed"),
    ("...", "not allowed"),
    ("(x := 1)", "not allowed"),
    ("f'{lane}'", "not allowed"),
    ("lane @ lane", "not allowed"),
])
@pytest.mark.timeout(BUDGET_S)
def test_hostile_expression_is_a_one_line_error(text, message):
    kind, got = outcome(text)
    assert kind == "error" and message in got, got


@pytest.mark.fast
@pytest.mark.parametrize("names, text, message", [
    ({"k": float("nan")}, "1 if k else 0", "'k' is nan (not a finite number)"),  # a NaN condition is not true
    ({"k": float("nan")}, "lane < k", "'k' is nan"),
    ({"k": float("inf")}, "lane + k", "'k' is inf"),
    ({"k": 2**70}, "lane + k", "'k' 2**70 or more does not fit"),
    ({"k": 1e300}, "lane + k", "'k' 1e+300 is beyond 2**63"),
    ({"k": 1 + 2j}, "lane + k", "complex"),
    ({"lane": LANE.astype(float) * np.nan}, "lane * 2", "'lane' is nan"),
    ({"lane": LANE.astype(np.uint64) + np.uint64(2**63)}, "lane * 2", "does not fit in a 64-bit integer"),
])
@pytest.mark.timeout(BUDGET_S)
def test_names_with_values_beyond_the_limits_are_errors(names, text, message):
    kind, got = outcome(text, {**ENV, **names})
    assert kind == "error" and message in got, got


@pytest.mark.fast
@pytest.mark.parametrize("params, message", [
    ({"P": 2**64}, "'P' = 2**64 or more does not fit"),
    ({"P": 1e300}, "'P' = 1e+300 is beyond 2**63"),
    ({"P": float("nan")}, "'P' = is nan"),
    ({"P": "12"}, "'P' = '12' is not a number"),
])
@pytest.mark.timeout(BUDGET_S)
def test_parameters_beyond_the_limits_are_errors_naming_the_parameter(params, message):
    kind, got = outcome("lane * 4 + P", constants={**PARAMS, **params})
    assert kind == "error" and message in got, got


@pytest.mark.fast
@pytest.mark.parametrize("value, message", [
    (2**70, "value 2**70 or more does not fit"), (float("nan"), "value is nan"), (float("-inf"), "value is -inf"),
    (1e300, "value 1e+300 is beyond 2**63"),
])
def test_numbers_given_directly_are_checked(value, message):
    with pytest.raises(ExprError) as info:
        compile_expr(value, WHERE, KNOWN.__contains__)
    assert message in str(info.value) and str(info.value).startswith(WHERE)


@pytest.mark.fast
@pytest.mark.timeout(11 * BUDGET_S)
def test_values_at_the_limits_are_fine():
    assert outcome("MAXI")[1] == INT_MAX and outcome("-MAXI - 1")[1] == INT_MIN
    assert outcome("2 ** 62 + (2 ** 62 - 1)")[1] == INT_MAX
    for text, value in [("(lane * 0 - 2) ** 63", INT_MIN), ("(lane * 0 - 1) << 63", INT_MIN),
                        ("(lane * 0 + 3037000499) ** 2", 3037000499**2), ("(lane - MAXI) - 1", None)]:
        got = outcome(text)[1]
        assert np.array_equal(got, LANE - INT_MAX - 1 if value is None else np.full(32, value)), (text, got)
    assert np.array_equal(outcome("(lane + 1) ** 12")[1], (LANE + 1) ** 12)  # 32**12 = 2**60
    assert np.array_equal(outcome("H + H // 2")[1], (LANE << 57) + (LANE << 56))  # up to 2**62 + 2**61
    assert np.array_equal(outcome("(lane - 3) ** 2.0")[1], (LANE - 3) ** 2.0)  # a whole float exponent
    assert np.array_equal(outcome("abs(lane - 16) ** 0.5")[1], np.abs(LANE - 16) ** 0.5)


@pytest.mark.fast
@pytest.mark.timeout(2 * BUDGET_S)
def test_messages_show_the_expression_shortened_and_escaped():
    text = "lane +\n" + " + ".join(f"n{j}" for j in range(60)) + " + \u00e9"
    message = outcome(text)[1]
    shown = message.split("expression '", 1)[1].split("': ", 1)[0]
    assert shown.startswith("lane +\\nn0 + n1") and shown.endswith("...")
    assert len(shown) <= SHOWN + 3  # 80 characters (the newline escaped as two), then ...
    message = outcome("\U0001f600" * 100)[1]
    assert message.startswith(WHERE + ": expression '" + "\\U0001f600" * 8 + "...': character")


@pytest.mark.fast
def test_an_error_at_run_time_reads_the_same_one_line_text():
    """Expr.text is what messages show (the stream's own messages use it too): one line, shortened."""
    expr = compile_expr("(lane\n+ 1) / (k - 5) + " + "1 + " * 40 + "1", WHERE, KNOWN.__contains__, PARAMS)
    assert "\n" not in expr.text and expr.text.endswith("...") and expr.source.startswith("(lane\n+ 1)")
    with pytest.raises(ExprError) as info:
        expr(ENV)
    assert str(info.value) == f"{WHERE}: expression '{expr.text}': division by zero"


@pytest.mark.fast
def test_normal_expressions_take_the_fast_path(monkeypatch):
    """For workload expressions, the names' sizes show that no value can come near 2**63: the checked path
    never runs for them."""
    monkeypatch.setattr(Expr, "checked", lambda self, names: pytest.fail(f"checked path for {self.text}"))
    gemm = "P + ((block.x * 128 + (tid + 256 * rep) / 4) * P + k * 32 + ((tid + 256 * rep) % 4) * 8) * 2"
    for text in [gemm, "lane * 4 + block.x", "(lane ^ 5) & 7", "min(lane, 5, 9) if lane < 8 else lane * 2",
                 "lane * 2.5 / 3", "rand(7, 1000, k)", "(tid % 8) * 16 + ((tid / 8) ^ (tid % 8)) * 128"]:
        expr = compile_expr(text, WHERE, KNOWN.__contains__, PARAMS, ITERATION)
        for gtid in (0, 2**20, 2**31):  # a block far into a large grid is no slower
            assert_real(expr({**ENV, "gtid": LANE + gtid, "block.x": gtid // 256, "k": gtid % 1000}))


@pytest.mark.fast
@pytest.mark.timeout(3 * BUDGET_S)
def test_the_checked_path_is_vectorised():
    """Values just under 2**63 over a block walker's arrays (8 warps x 256 repeats x 32 lanes): each operation's
    wrap test is a few numpy operations, not a Python int per lane."""
    names = {**ENV, "tid": np.arange(8)[:, None, None] * 32 + LANE, "rep": np.arange(256)[:, None]}
    for term in ["(tid * rep + 9223372036854710000) + 1", "(tid * rep + 9223372036854710000) * 1",
                 "((tid * rep) % 2 + 3037000498) ** 2"]:
        start = time.perf_counter()
        kind, got = outcome("min(" + ", ".join([term] * 30) + ")", names)
        assert kind == "value" and got.shape == (8, 256, 32) and time.perf_counter() - start < BUDGET_S


@pytest.mark.fast
def test_limits_follow_the_names_and_checking_stays_the_exception(monkeypatch):
    """A grid-stride address: `gtid` grows block after block; the names' limits follow it (the checked path
    never runs) until a value would pass 2**63, which is an error, and later small values are fast again."""
    checked = []
    original = Expr.checked
    monkeypatch.setattr(Expr, "checked", lambda self, names: checked.append(1) or original(self, names))
    expr = compile_expr("P + ((i * 4 + rep) * 1048576 + gtid) * 16", WHERE, KNOWN.__contains__, PARAMS, ITERATION)
    for gtid in [0, 31, 2**10, 2**18, 2**20, 2**31, 2**40]:
        for i in range(3):
            got = expr({**ENV, "gtid": LANE + gtid, "i": i, "rep": np.arange(4)[:, None]})
            want = 4096 + ((i * 4 + np.arange(4)[:, None]) * 1048576 + LANE + gtid) * 16
            assert np.array_equal(got, want)
    assert not checked and expr.limits["gtid"] >= 41
    with pytest.raises(ExprError, match="does not fit in a 64-bit integer"):
        expr({**ENV, "gtid": LANE + 2**60, "i": 0, "rep": 0})
    assert checked == [1] and expr.limits["gtid"] < 60
    assert expr({**ENV, "gtid": 5, "i": 1, "rep": 2}) == 4096 + ((4 + 2) * 1048576 + 5) * 16 and checked == [1]


@pytest.mark.fast
@pytest.mark.parametrize("form", ["min", "tree", "compare", "and"])
def test_compile_time_is_linear_in_the_length(form):
    """Wide expressions (many names, shallow) compile with work proportional to their length: counted as
    function calls (Python and C), which a loaded machine does not disturb as it does a clock."""
    def calls(n: int) -> int:
        terms = [f"n{j} * lane + k" for j in range(n)]
        if form == "tree":
            while len(terms) > 1:
                terms = [f"({a} + {b})" for a, b in zip(terms[::2], terms[1::2])] + terms[len(terms) // 2 * 2:]
            text = terms[0]
        else:
            text = {"min": "min(" + ", ".join(terms) + ")", "compare": " < ".join(terms),
                    "and": " and ".join(terms)}[form]
        count = 0

        def profile(_frame, what, _arg):
            nonlocal count
            count += what in ("call", "c_call")
        sys.setprofile(profile)
        try:
            compile_expr(text, WHERE, KNOWN.__contains__, None, ITERATION)
        finally:
            sys.setprofile(None)
        return count

    small, large = calls(12), calls(120)  # about 180 and 1,900 characters
    assert large < 13 * small, (small, large)  # linear: 10x; the quadratic compiler before: over 100x


def test_catastrophic_cases_in_a_subprocess_with_a_hard_limit():
    """The cases that ran for minutes, never finished or blew the stack before, in a child process with a
    1 GiB address-space limit and a hard timeout (a C-level hang would not see pytest-timeout's signal)."""
    script = textwrap.dedent(f"""
        import resource, sys, time
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        import numpy as np
        from gpusim.errors import GpusimError
        from gpusim.workload.expr import compile_expr
        names = {{"lane": np.arange(32), "k": 3, **{{f"n{{j}}": j for j in range(2000)}}}}
        cases = [
            "(((2**64)**64)**64)**64", "((((2**64)**64)**64)**64)**64", "2**64**64**64**64**64**64",
            "+".join(f"n{{j}}" for j in range(200)), "+".join(["1"] * 1000), "+".join(["lane"] * 1300),
            "min(" + ",".join(f"n{{j}}*lane" for j in range(400)) + ")", "-" * 4000 + "1", "~" * 4000 + "1",
            "not " * 1000 + "1", "(" * 199 + "1" + ")" * 199, "abs(" * 150 + "1" + ")" * 150,
            "1 if 1 else " * 300 + "1", "9" * 4000, "1" + "0" * 4000 + ".0",
        ]
        for text in cases:
            start = time.perf_counter()
            try:
                compile_expr(text, "w.yaml:1: addr", names.__contains__)(names)
                result = "value"
            except GpusimError as exc:
                result = "error" if "\\n" not in str(exc) else "multi-line"
            print(result, round(time.perf_counter() - start, 3), flush=True)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line.split() for line in done.stdout.splitlines()]
    assert len(rows) == 15 and all(kind in ("value", "error") and float(s) < BUDGET_S for kind, s in rows), rows


# ------------------------------------------------------------------------------------------------- generated

BINOPS = ["+", "-", "*", "/", "//", "%", "**", "<<", ">>", "&", "|", "^"]
CMPOPS = ["<", "<=", ">", ">=", "==", "!="]
LITERALS = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.sampled_from(["0", "1", "2", "3", "31", "63", "64", "65", str(INT_MAX), str(2**63), str(2**64), "0x7f",
                     "1_000"]),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["0.5", "0.0", "-0.0", "1e-300", "1e300", "1e999", "5e-324", "1/3.0", "True", "False"]),
)
LEAVES = st.one_of(st.sampled_from(NAMES), LITERALS)


def _grow(children):
    return st.one_of(
        st.tuples(children, st.sampled_from(BINOPS), children).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(st.sampled_from(["-", "+", "~", "not "]), children).map(lambda t: f"{t[0]}({t[1]})"),
        st.tuples(children, st.sampled_from(CMPOPS), children, st.sampled_from(CMPOPS), children).map(
            lambda t: f"({t[0]} {t[1]} {t[2]} {t[3]} {t[4]})"),
        st.tuples(children, st.sampled_from(["and", "or"]), children).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(children, children, children).map(lambda t: f"({t[1]} if {t[0]} else {t[2]})"),
        st.tuples(st.sampled_from(["min", "max"]), st.lists(children, min_size=2, max_size=4)).map(
            lambda t: f"{t[0]}({', '.join(t[1])})"),
        children.map(lambda c: f"abs({c})"),
        st.tuples(children, children, children).map(lambda t: f"rand({t[0]}, {t[1]}, {t[2]})"),
    )


EXPRESSIONS = st.recursive(LEAVES, _grow, max_leaves=24)


@st.composite
def mutated(draw):
    """A grammatical expression with a few characters inserted: unicode, control characters, newlines."""
    text = draw(EXPRESSIONS)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.one_of(st.text(min_size=1, max_size=3), st.sampled_from(
            ["\n", "\r\n", "\t", "\x00", "\\", "#", "\u202e", "\uff4c", "\u00a0", "\ud7ff", " if ", "(", ")"]))) \
            + text[at:]
    return text


@st.composite
def deep(draw):
    n = draw(st.one_of(st.integers(1, 120), st.integers(90, 110), st.integers(120, 2000)))
    core = draw(st.sampled_from(["lane", "1", "k", "2"]))
    shape = draw(st.sampled_from(["parens", "neg", "invert", "not", "pow", "sum", "product", "abs", "if",
                                  "min", "compare"]))
    if shape == "parens":
        return "(" * n + core + ")" * n
    if shape in ("neg", "invert", "not"):
        return {"neg": "-", "invert": "~", "not": "not "}[shape] * n + core
    if shape in ("pow", "sum", "product", "compare"):
        return {"pow": " ** ", "sum": " + ", "product": " * ", "compare": " < "}[shape].join([core] * n)
    if shape in ("abs", "min"):
        return f"{shape}(" * n + core + (")" if shape == "abs" else ", lane)") * n
    return f"{core} if lane < 3 else " * n + core


@st.composite
def nested_powers(draw):
    base = draw(st.sampled_from(["2", "3", "-2", "10", "lane", "(lane + 2)", "k", "2.0", "0.5", "-8.0", "1e10",
                                 "H", "BIG", "NEG", "F"]))
    exponents = draw(st.lists(st.one_of(st.integers(-70, 70).map(str), st.sampled_from(
        ["0.5", "1/3.0", "-0.5", "F", "k", "lane", "64", "65", "63", "62"])), min_size=1, max_size=6))
    if draw(st.booleans()):  # left-nested: ((b ** e1) ** e2) ** ...
        text = base
        for e in exponents:
            text = f"({text}) ** ({e})"
        return text
    return " ** ".join([base] + [f"({e})" for e in exponents])  # right-associative


@st.composite
def huge_literal(draw):
    n = draw(st.one_of(st.integers(1, 40), st.integers(1, 4500)))
    digits = draw(st.sampled_from(["9", "1", "7"])) * n
    form = draw(st.sampled_from(["int", "hex", "float", "exp", "neg", "sum"]))
    return {"int": digits, "hex": "0x" + digits, "float": digits + ".0", "exp": f"1e{digits[:6]}",
            "neg": f"-{digits} * lane", "sum": f"lane + {digits}"}[form]


@st.composite
def many_names(draw):
    n = draw(st.one_of(st.integers(2, 60), st.integers(2, 600)))
    names = [f"n{draw(st.integers(0, 1999))}" for _ in range(n)]
    form = draw(st.sampled_from(["min", "max", "tree", "chain", "and"]))
    if form in ("min", "max"):
        return f"{form}(" + ", ".join(names) + ")"
    if form == "tree":
        while len(names) > 1:
            names = [f"({a} + {b})" for a, b in zip(names[::2], names[1::2])] + names[len(names) // 2 * 2:]
        return names[0]
    return (" + " if form == "chain" else " and ").join(names)


DIVISION_BY_ZERO = st.tuples(
    st.sampled_from(["lane", "1", "1.0", "k", "H", "0", "0.0", "-1"]), st.sampled_from(["/", "//", "%"]),
    st.sampled_from(["0", "0.0", "-0.0", "(k - k)", "(lane - lane)", "(lane % 1)", "(F - 0.5)", "(lane < 0)",
                     "False", "(lane - 7)"]),
).map(lambda t: f"{t[0]} {t[1]} {t[2]}")
COMPLEX_POWERS = st.tuples(
    st.sampled_from(["-1", "-8.0", "(lane - 40)", "NEG", "-F", "(0 - lane)", "(-2)", "(lane - 3) * 0.5"]),
    st.sampled_from(["0.5", "(1/3.0)", "F", "-0.5", "1e-300", "(lane * 0.5)", "(k / 2.0)", "2.5"]),
).map(lambda t: f"({t[0]}) ** {t[1]}")
TOO_LONG = st.integers(MAX_LENGTH - 5, MAX_LENGTH + 500).map(lambda n: ("lane + 1 " * n)[:n])
HOSTILE = {
    "grammar": EXPRESSIONS, "mutated": mutated(), "deep": deep(), "powers": nested_powers(),
    "literals": huge_literal(), "names": many_names(), "unicode": st.text(max_size=120),
    "division": DIVISION_BY_ZERO, "complex": COMPLEX_POWERS, "long": TOO_LONG,
}
MUST_FAIL = {"division", "complex"}


def check_generated(kind: str, text: str, big: bool) -> None:
    result, detail = outcome(text, BIG_ENV if big else ENV)
    COUNTS[f"{kind}: {result}"] += 1
    if kind in MUST_FAIL:
        assert result == "error", (text, detail)


@pytest.mark.parametrize("kind", sorted(HOSTILE))
@pytest.mark.timeout(60 * BUDGET_S)
def test_generated_hostile_expressions_give_a_real_value_or_one_line_error(kind):
    """60 cases of each kind (600 in all, a few seconds)."""
    @settings(max_examples=60, deadline=None, database=None)
    @given(HOSTILE[kind], st.booleans())
    def check(text, big):
        check_generated(kind, text, big)

    check()


@pytest.mark.benchmark
@pytest.mark.parametrize("kind", sorted(HOSTILE))
@pytest.mark.timeout(2000 * BUDGET_S)
def test_generated_hostile_expressions_large(kind):
    """2,000 cases of each kind (20,000 in all, a few minutes)."""
    @settings(max_examples=2000, deadline=None, database=None)
    @given(HOSTILE[kind], st.booleans())
    def check(text, big):
        check_generated(kind, text, big)

    check()


# ------------------------------------------------------------------------------------- exact-integer oracle


EXACT = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.floordiv,
         ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow, ast.LShift: operator.lshift,
         ast.RShift: operator.rshift, ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor}


class Refused(Exception):
    """The reference evaluator's error: some value is out of range or undefined."""


def reference(node: ast.AST, lane: dict[str, int]) -> int:
    """Exact Python-int evaluation of one lane; every value, intermediate ones included, must fit 64 bits."""
    if isinstance(node, ast.Expression):
        return reference(node.body, lane)
    if isinstance(node, ast.Constant):
        value = node.value
    elif isinstance(node, ast.Name):
        value = lane[node.id]
    elif isinstance(node, ast.UnaryOp):
        a = reference(node.operand, lane)
        value = {ast.USub: lambda: -a, ast.UAdd: lambda: a, ast.Invert: lambda: ~a}[type(node.op)]()
    elif isinstance(node, ast.Call):
        args = [reference(a, lane) for a in node.args]
        value = {"min": min, "max": max, "abs": abs}[node.func.id](*args)
    else:
        a, b, op = reference(node.left, lane), reference(node.right, lane), type(node.op)
        if op in (ast.Div, ast.FloorDiv, ast.Mod) and b == 0:
            raise Refused("by zero")
        if op in (ast.LShift, ast.RShift) and not 0 <= b <= 63:
            raise Refused("shift")
        if op is ast.Pow and (not 0 <= b <= 64 or (abs(a) > 1 and b * math.log2(abs(a)) > 64)):
            raise Refused("pow")
        value = EXACT[op](a, b)
    if not INT_MIN <= value <= INT_MAX:
        raise Refused("range")
    return value


INT_NAMES = ["lane", "k", "i", "H", "P", "BIG", "NEG", "MAXI"]
INT_LEAVES = st.one_of(
    st.sampled_from(INT_NAMES),
    st.integers(0, 2**64).map(str),  # (a negative literal is a unary minus)
    st.sampled_from(["0", "1", "2", "3", "62", "63", "64", str(INT_MAX), str(2**62)]),
)


def _grow_int(children):
    return st.one_of(
        st.tuples(children, st.sampled_from(BINOPS), children).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(st.sampled_from(["-", "+", "~"]), children).map(lambda t: f"{t[0]}({t[1]})"),
        st.tuples(st.sampled_from(["min", "max"]), children, children).map(lambda t: f"{t[0]}({t[1]}, {t[2]})"),
        children.map(lambda c: f"abs({c})"),
    )


@pytest.mark.timeout(250 * BUDGET_S)
@settings(max_examples=250, deadline=None, database=None)
@given(st.recursive(INT_LEAVES, _grow_int, max_leaves=12), st.booleans(),
       st.sampled_from([0, 5, 2**31, 2**62, INT_MAX, -(2**62), INT_MIN]))
def test_integer_results_match_an_exact_reference_or_are_refused(text, vector, k):
    """Integer arithmetic never wraps silently: the result equals exact Python-int arithmetic lane by lane
    when every value fits 64 bits, and is an error when some value (even an intermediate one) does not."""
    names = {**ENV, "k": k, "i": -(k // 2), "H": LANE << 57}
    if not vector:  # scalars: Python ints on the evaluator's side too
        names.update(lane=7, H=7 << 57)
    lanes = [{n: int(np.asarray(names[n]).ravel()[j % np.asarray(names[n]).size]) if n in names else PARAMS[n]
              for n in INT_NAMES} for j in range(32 if vector else 1)]
    try:
        tree = ast.parse(text, mode="eval")
        expected = [reference(tree, lane) for lane in lanes]
    except Refused:
        expected = None
    kind, got = outcome(text, names)
    COUNTS[f"oracle: {kind}"] += 1
    if expected is None:
        assert kind == "error", (text, got)
    else:
        assert kind == "value", (text, got, expected)
        assert np.array_equal(np.broadcast_to(got, (len(lanes),)), expected), (text, got, expected)


@pytest.fixture(scope="module", autouse=True)
def report_counts():
    yield
    if COUNTS:
        print("\nhostile expressions:", dict(sorted(COUNTS.items())))
