"""A warp's lane mask as a selector of its lanes (bit i = lane i)."""

from __future__ import annotations

import numpy as np

_LANE_BITS = np.arange(32, dtype=np.uint64)


def active_lanes(mask: int, lanes: int = 32) -> np.ndarray:
    """Boolean lane selector for a lane bitmask."""
    return ((np.uint64(mask) >> _LANE_BITS[:lanes]) & np.uint64(1)).astype(bool)
