"""A sampled run's shadow L2: the L2's tags alone at another size, with no timing.

It has the L2's slices, lines, sectors and ways, and every L2 access updates it as it updates the L2; it counts
the DRAM reads, write-backs and dirty bytes an L2 of that size would make (gpusim.sampling.reuse: a sampled run's
DRAM traffic between waves), and its hits and merges: a line it misses where the L2 hits is its own in flight
from DRAM for the DRAM's latency, and the requests that meet it meanwhile merge with it, as they would at full size
(a wave's blocks read the B tiles the previous wave left in a run's L2 together: at full size one of them misses
and the others meet its line in flight). Of the L2's own size it counts exactly the L2's.
"""

from __future__ import annotations

from typing import Any, Final

from .cache import SectoredCache
from .l2_contents import dirty_bytes_in
from .l2_tags import update_tags
from .line_table import MISSING, LineTable

SHIFT: Final = 16  # a pending entry: (cycle back) << SHIFT | the sectors in flight (at most 16 a line)
SECTORS: Final = (1 << SHIFT) - 1
PRUNE_AGAIN: Final = 1024  # entries beyond twice what a pass kept at which a slice's lines in flight are pruned again


class ShadowL2:
    def __init__(self, l2: Any, slices: int, sets: int, size_bytes: int, sector: int, sector_count: list[int],
                 miss_cycles: int):
        """`l2`: the arch's L2 (memory.l2); `slices`, `sets`: the L2's, and its sets a slice; `sector`: the bytes a
        sector counts for; `sector_count`: sectors set in a mask, by mask; `miss_cycles`: how much longer a DRAM
        read takes than an L2 hit (a line it alone misses is in flight that long after the L2's answer).

        Its sets are the L2's divided by the largest whole number that leaves it no more ways than the L2's (a
        line's set is its number modulo the sets, in the slice its hash picks: lines that share an L2 set share a
        shadow set, so a stream of lines loads the shadow's sets as it loads the L2's), and its ways as many as make
        `size_bytes` (w or w + 1 a slice, the slices with one more spread so their average is the size's): the
        geometry nearest the L2's of that size. gemm_tile128 4096^3 on h100, a shadow of 16 ways and 121 sets
        against the L2's 320: the runs kept a fifth of the B tiles between waves where the full run keeps a third,
        DRAM bytes +5.6% against the full run."""
        target = size_bytes / (slices * l2.line_bytes)  # lines a slice
        divisor = 1
        for d in range(1, sets + 1):  # the largest divisor of the L2's sets that keeps the ways within the L2's
            if sets % d == 0 and target * d <= sets * l2.associativity:
                divisor = d
        sets //= divisor
        lines = target / sets  # ways a slice, on average
        ways = max(1, int(lines))
        wider = min(slices, max(0, round((lines - ways) * slices)))  # slices with one more way
        step = slices / wider if wider else 0.0
        more = {int(k * step) for k in range(wider)}
        self.slices: list[SectoredCache] = []
        for i in range(slices):
            own = ways + 1 if i in more else ways
            self.slices.append(SectoredCache(sets * own * l2.line_bytes, l2.line_bytes, l2.sector_bytes, own))
        self.sector = sector
        self.sector_count = sector_count
        self.miss_cycles = miss_cycles
        # its own lines in flight, by slice: line -> (cycle back) << SHIFT | sectors (a table of native ints)
        self.pending: list[LineTable] = [LineTable() for _ in range(slices)]
        self.pending_limit: list[int] = [PRUNE_AGAIN] * slices
        self.recent_window = 0  # hits this close to their sectors' fill are counted (MemoryHierarchy.count_recent_fills)
        self.recent_hits = 0
        self.dram_read = 0
        self.dram_write = 0
        self.hits = 0
        self.merged = 0

    def access(self, index: int, line: int, mask: int, inflight: int, write: bool, atomic: int, now: int,
               answer: int, l2_missing: int, floor: int) -> None:
        """Its share of an L2 access to slice `index` made at cycle `now`, as the L2 updates its own tags (sectors
        the L2 has in flight from DRAM, `inflight`, are read once, by the access that missed). `answer`: the cycle
        the L2 answers it at; `l2_missing`: the sectors the L2 missed (in flight until `answer`; the others the
        shadow misses are its own, in flight until `miss_cycles` after it); `floor`: no later request comes
        before it (an entry is forgotten once back by then, and past its recent window)."""
        cache = self.slices[index]
        pending = self.pending[index]
        at = pending.slot(line)
        entry = pending.entry_at(at)
        window = self.recent_window
        if entry != MISSING and (entry >> SHIFT) + window <= now:
            entry = MISSING  # neither in flight nor a recent fill
        if entry != MISSING and entry >> SHIFT > now:
            inflight |= entry & mask
        inflight &= mask
        present = cache.probe(line, mask & ~inflight)
        count = self.sector_count
        self.hits += count[present]
        self.merged += count[inflight]
        if present and window and entry != MISSING:
            self.recent_hits += count[present & entry]
        missing = mask & ~inflight & ~present
        if missing and not (write and not atomic):
            self.dram_read += count[missing] * self.sector
            # back when the L2's own read is (the sectors it missed too), or `miss_cycles` after the L2's hit
            back = answer + self.miss_cycles if missing & ~l2_missing else answer
            sectors = missing
            if entry != MISSING and entry >> SHIFT > now:  # still in flight: one fill, its sectors and the new
                back = max(back, entry >> SHIFT)
                sectors |= entry & SECTORS
            pending.put_at(at, line, back << SHIFT | sectors)
            if len(pending) > self.pending_limit[index]:
                # (what is back by the floor, less the recent window, is stale for every later request)
                self.pending_limit[index] = pending.keep_after(floor - window, SHIFT, PRUNE_AGAIN)
        evicted = update_tags(cache, line, mask, missing, write, atomic)
        if evicted:
            self.dram_write += count[evicted] * self.sector

    def metrics(self) -> dict:
        """Its counts: what gpusim.sampling.reuse takes for the DRAM traffic."""
        return {"gpusim__shadow_l2_capacity_bytes": sum(cache.capacity_bytes for cache in self.slices),
                "gpusim__shadow_dram_bytes_read": self.dram_read,
                "gpusim__shadow_dram_bytes_write": self.dram_write,
                "gpusim__shadow_l2_hit_sectors": self.hits,
                "gpusim__shadow_l2_pending_merged_sectors": self.merged,
                **({"gpusim__shadow_l2_recent_fill_hit_sectors": self.recent_hits} if self.recent_window else {}),
                "gpusim__shadow_l2_dirty_bytes_at_end": dirty_bytes_in(self.slices, self.sector_count, self.sector)}
