"""Lane masks as a warp's control flow sets them: a predicate value as a lane bitmask, a bitmask as a lane
selector, a count expression's value checked (uniform, or one per lane) and a loop's trips with the lanes each
one runs (a per-lane count keeps finished lanes masked off).
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from ..errors import shorten
from .expr import Expr
from .kernel import FULL_MASK, WARP_SIZE
from .yamlio import WorkloadError

_BITS = np.arange(WARP_SIZE, dtype=np.uint64)


def mask_to_bool(mask: int) -> np.ndarray:
    return ((np.uint64(mask) >> _BITS) & np.uint64(1)).astype(bool)


def to_mask(value) -> int:
    """A predicate value (scalar or 32-lane array) as a lane bitmask."""
    if isinstance(value, np.ndarray):
        if value.shape != (WARP_SIZE,):
            value = np.broadcast_to(value, (WARP_SIZE,))
        if value.dtype != np.bool_:
            value = value.astype(bool)
        return int.from_bytes(np.packbits(value, bitorder="little").tobytes(), "little")  # lane i: bit i
    return FULL_MASK if value else 0


def uniform_int(expr: Expr, env: dict, what: str, mask: int) -> int | np.ndarray:
    """A count: a whole number >= 0, or (for a per-lane loop count) an int array, >= 0 in the lanes of `mask`."""
    value = expr(env)
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "f":
            whole = np.isfinite(value) & (np.mod(value, 1, where=np.isfinite(value), out=np.zeros_like(value)) == 0)
            if not whole.all():
                _bad_count(expr, what, f"must be whole numbers, got {shorten(value[~whole].flat[0].item())}")
            value = value.astype(np.int64)
        elif value.dtype.kind not in "iu":
            got = "true/false" if value.dtype.kind == "b" else value.dtype
            _bad_count(expr, what, f"must be whole numbers, got {got}")
        counts = np.broadcast_to(value, (WARP_SIZE,))
        negative = mask_to_bool(mask) & (counts < 0)
        if negative.any():
            lane = int(np.flatnonzero(negative)[0])
            _bad_count(expr, what, f"must be >= 0, got {int(counts[lane])} in lane {lane}")
        return value
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        _bad_count(expr, what, f"must be a whole number, got {shorten(value)}")
    if value < 0:
        _bad_count(expr, what, f"must be >= 0, got {shorten(int(value))}")
    return int(value)


def _bad_count(expr: Expr, what: str, problem: str):
    raise WorkloadError(f"{expr.where}: {shorten(expr.text)}: {what} {problem}")


def loop_masks(count, mask: int) -> Iterator[tuple[int, int]]:
    """(iteration, mask) for a loop: uniform counts keep the mask, per-lane counts shrink it."""
    if not isinstance(count, np.ndarray):
        for i in range(count):
            yield i, mask
        return
    counts = np.broadcast_to(count, (WARP_SIZE,))
    active = mask_to_bool(mask)
    trips = int(counts[active].max()) if active.any() else 0
    for i in range(trips):
        m = mask & to_mask(counts > i)
        if m:
            yield i, m
