"""Coalescing: which 32-byte sectors and 128-byte lines a warp's global access touches (pure functions).

Seed 004, section 2.4.2: 32 consecutive 4-byte loads touch 4 sectors of 1 line; a stride of 1024 words touches
32 sectors in 32 lines; a random gather touches up to 32 sectors.
"""

from __future__ import annotations

import numpy as np

from ..isa.lanes import active_lanes


def sector_list(addrs: np.ndarray, width: int, mask: int, sector_bytes: int = 32) -> list[int]:
    """Sorted distinct sector numbers (address // sector_bytes) the active lanes' `width`-byte accesses touch."""
    a = addrs if mask == 0xFFFFFFFF else addrs[active_lanes(mask, len(addrs))]
    if a.size == 0:
        return []
    first = (a // sector_bytes).tolist()
    if width == 1 or width <= sector_bytes and not ((a % sector_bytes) > sector_bytes - width).any():
        return sorted(set(first))  # no access straddles a sector boundary
    last = ((a + width - 1) // sector_bytes).tolist()
    return sorted({s for f, l in zip(first, last) for s in range(f, l + 1)})


def sectors_touched(addrs: np.ndarray, width: int, mask: int, sector_bytes: int = 32) -> np.ndarray:
    """sector_list as an array."""
    return np.array(sector_list(addrs, width, mask, sector_bytes), dtype=np.int64)


def coalesce(addrs: np.ndarray, width: int, mask: int, sector_bytes: int = 32,
             line_bytes: int = 128) -> tuple[int, int]:
    """(sectors, lines) one warp-level access touches."""
    sectors = sectors_touched(addrs, width, mask, sector_bytes)
    if sectors.size == 0:
        return 0, 0
    per_line = line_bytes // sector_bytes
    return int(sectors.size), int(np.unique(sectors // per_line).size)
