"""The workload expression evaluator: whitelisted, vectorised over lanes, never eval()."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpusim.workload.expr import ExprError, compile_expr, hash_rand

pytestmark = pytest.mark.fast  # every test here is quick (the -m fast tier)

NAMES = {"lane", "M", "K", "tid", "block.x", "gtid", "i", "rep"}
LANE = np.arange(32)


def ev(text, **env):
    base = {"lane": LANE, "M": 4096, "K": 64, "tid": LANE + 32, "block.x": 3, "gtid": LANE + 96, "i": 2, "rep": 0}
    base.update(env)
    return compile_expr(text, "w.yaml:7", NAMES.__contains__)(base)


def test_arithmetic_is_vectorised_over_lanes():
    assert np.array_equal(ev("lane * 4 + block.x"), LANE * 4 + 3)


def test_integer_division_is_floor_like_c_for_addresses():
    """`/` between integers is integer division (tid/4 in an address means the row)."""
    assert np.array_equal(ev("lane / 4"), LANE // 4)
    assert ev("M / 128") == 32 and ev("7 / 2") == 3
    assert ev("7.0 / 2") == 3.5


def test_bit_operations_and_modulo():
    assert np.array_equal(ev("(lane ^ 5) & 7"), (LANE ^ 5) & 7)
    assert np.array_equal(ev("lane << 2 >> 1"), (LANE << 2) >> 1)
    assert np.array_equal(ev("lane % 4"), LANE % 4)
    assert np.array_equal(ev("~lane"), ~LANE)


def test_comparisons_boolean_logic_and_conditional():
    assert np.array_equal(ev("lane < 16 and lane % 2 == 0"), (LANE < 16) & (LANE % 2 == 0))
    assert np.array_equal(ev("not lane < 16"), LANE >= 16)
    assert np.array_equal(ev("0 < lane <= 3"), (LANE > 0) & (LANE <= 3))
    assert np.array_equal(ev("lane * 2 if lane < 8 else -1"), np.where(LANE < 8, LANE * 2, -1))


def test_whitelisted_calls():
    assert np.array_equal(ev("min(lane, 5, 9)"), np.minimum(LANE, 5))
    assert np.array_equal(ev("max(lane - 20, 0)"), np.maximum(LANE - 20, 0))
    assert np.array_equal(ev("abs(lane - 16)"), np.abs(LANE - 16))


def test_rand_is_deterministic_in_range_and_varies_by_thread_and_key():
    a, b = ev("rand(7, 1000)"), ev("rand(7, 1000)")
    assert np.array_equal(a, b) and a.min() >= 0 and a.max() < 1000
    assert len(set(a.tolist())) > 20  # 32 threads, 1000 values: almost all distinct
    assert not np.array_equal(ev("rand(7, 1000, 1)"), a) and not np.array_equal(ev("rand(8, 1000)"), a)
    assert np.array_equal(hash_rand(7, 1000, 0, LANE + 96), a)


def test_parameters_fold_to_constants():
    e = compile_expr("M / 128 * K", "w.yaml:1", NAMES.__contains__, {"M": 4096, "K": 64})
    assert e.constant == 2048


@pytest.mark.parametrize("text, message", [
    ("().__class__.__bases__[0]", "not allowed"),
    ("lane.__class__", "unknown name 'lane.__class__'"),
    ("(lane + 1).real", "attribute access"),
    ("__import__('os')", "call to '__import__'"),
    ("open('/etc/passwd')", "call to 'open'"),
    ("eval('1')", "call to 'eval'"),
    ("[x for x in lane]", "not allowed"),
    ("lambda: 1", "not allowed"),
    ("lane[0]", "not allowed"),
    ("'text'", "not allowed"),
    ("min(lane, key=1)", "not allowed"),
    ("undefined_name + 1", "unknown name 'undefined_name'"),
    ("lane +", "syntax error"),
])
def test_refused_at_compile_time_with_file_and_line(text, message):
    with pytest.raises(ExprError) as info:
        compile_expr(text, "w.yaml:7", NAMES.__contains__)
    assert str(info.value).startswith("w.yaml:7") and message in str(info.value)


@pytest.mark.parametrize("text, message", [
    ("2 ** 100000", "exponent larger than 64"),
    ("lane ** 65", "exponent larger than 64"),
    ("1 << 64", "shift count"),
    ("lane / (lane - lane)", "division by zero"),
    ("M % 0", "modulo by zero"),
    ("rand(1, 0)", "n must be positive"),
    ("1.5 << 2", "shifts need integers"),
])
def test_runtime_errors_are_one_line_with_location(text, message):
    with pytest.raises(ExprError) as info:
        ev(text)
    assert "\n" not in str(info.value) and "w.yaml:7" in str(info.value) and message in str(info.value)


@given(st.integers(-1000, 1000), st.integers(1, 50), st.integers(0, 31))
def test_matches_python_for_non_negative_integer_arithmetic(a, b, lane):
    NAMES_local = lambda n: n in NAMES or n in ("a", "b")  # noqa: E731
    got = compile_expr("(lane + a) * b % 97 + (lane + a) // b", "w", NAMES_local)(
        {"lane": LANE, "a": a, "b": b})
    assert got[lane] == (lane + a) * b % 97 + (lane + a) // b
