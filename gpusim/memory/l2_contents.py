"""The L2's contents taken whole, over all its slices: the bytes of dirty sectors not yet written to DRAM, and the
warm fill a sampled run starts from (gpusim.sampling.warm)."""

from __future__ import annotations

from typing import Final

from .cache import SectoredCache
from .l2_tags import line_hash

WARM_BASE_LINE: Final = 1 << 41  # warm lines: at 256 TiB, far above every buffer (workload.kernel.GLOBAL_BASE)


def dirty_bytes_in(caches: list[SectoredCache], sector_count: list[int], sector: int) -> int:
    """Bytes of dirty sectors in `caches` (an L2's slices); `sector_count`: sectors set in a mask, by mask."""
    return sum(cache.dirty_sectors(sector_count) for cache in caches) * sector


def warm_fill(caches: list[SectoredCache], dirty_fraction: float) -> None:
    """Fill every set of every slice with lines no kernel touches (from WARM_BASE_LINE up, each in the slice the
    line hash puts it), that share of them dirty (spread evenly), whole lines, as a warp's full-line store."""
    slices = len(caches)
    full = 0
    for cache in caches:
        full += cache.sets * cache.ways
    placed = 0
    line = WARM_BASE_LINE
    last = WARM_BASE_LINE + 64 * full  # (a bound: the hash spreads lines over every slice and set long before)
    dirty_sectors = (1 << caches[0].sectors_per_line) - 1
    while placed < full and line < last:
        cache = caches[line_hash(line) % slices]
        if cache.held_in_set(line) < cache.ways:
            dirty = int((placed + 1) * dirty_fraction) > int(placed * dirty_fraction)
            cache.fill(line, dirty_sectors, dirty)
            placed += 1
        line += 1
