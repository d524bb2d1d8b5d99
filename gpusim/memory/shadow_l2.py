"""A sampled run's shadow L2: the L2's tags alone at another size, with no timing.

It has the L2's slices, lines, sectors and ways, and every L2 access updates it as it updates the L2; it counts
the DRAM reads, write-backs and dirty bytes an L2 of that size would make (gpusim.sampling.reuse: a sampled run's
DRAM traffic between waves). Of the L2's own size it counts exactly the L2's.
"""

from __future__ import annotations

from typing import Any

from .cache import SectoredCache
from .l2_contents import dirty_bytes_in
from .l2_tags import update_tags


class ShadowL2:
    def __init__(self, l2: Any, slices: int, size_bytes: int, sector: int, sector_count: list[int]):
        """`l2`: the arch's L2 (memory.l2); `slices`: the L2's; `sector`: the bytes a sector counts for;
        `sector_count`: sectors set in a mask, by mask."""
        self.slices = [SectoredCache(size_bytes // slices, l2.line_bytes, l2.sector_bytes, l2.associativity)
                       for _ in range(slices)]
        self.sector = sector
        self.sector_count = sector_count
        self.dram_read = 0
        self.dram_write = 0

    def access(self, index: int, line: int, mask: int, inflight: int, write: bool, atomic: int) -> None:
        """Its share of an L2 access to slice `index`, as the L2 updates its own tags (sectors the L2 has in flight
        from DRAM, `inflight`, are read once, by the access that missed)."""
        cache = self.slices[index]
        missing = mask & ~inflight & ~cache.probe(line, mask & ~inflight)
        if missing and not (write and not atomic):
            self.dram_read += self.sector_count[missing] * self.sector
        evicted = update_tags(cache, line, mask, missing, write, atomic)
        if evicted:
            self.dram_write += self.sector_count[evicted] * self.sector

    def metrics(self) -> dict:
        """Its counts: what gpusim.sampling.reuse takes for the DRAM traffic."""
        return {"gpusim__shadow_l2_capacity_bytes": sum(cache.capacity_bytes for cache in self.slices),
                "gpusim__shadow_dram_bytes_read": self.dram_read,
                "gpusim__shadow_dram_bytes_write": self.dram_write,
                "gpusim__shadow_l2_dirty_bytes_at_end": dirty_bytes_in(self.slices, self.sector_count, self.sector)}
