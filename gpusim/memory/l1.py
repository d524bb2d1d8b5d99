"""One SM's L1: its sectored cache (the unified L1 + shared memory less the launch's carveout), its miss status
holding registers and its L1TEX data stage, with the SM's load counters.

The data stage moves `banks x bank_width` bytes (one wavefront) a clock, shared by the SM's four sub-partitions:
shared-memory wavefronts, global lines, cp.async and bulk-copy writes, warpgroup-MMA operand reads queue for it in
order. A load's lines are looked up against the MSHRs first (a sector in flight merges with its entry and is
never a hit), then against the cache; what is left goes to L2 through the SM's port (sm_port.py).
"""

from __future__ import annotations

from librt import vecs
from librt.vecs import vec
from mypy_extensions import i64

from .cache import SectoredCache
from .mshr import MshrTable


class L1:
    def __init__(self, size_bytes: int, line_bytes: int, sector_bytes: int, associativity: int, mshrs: int,
                 hit_latency: int):
        self.cache = SectoredCache(size_bytes, line_bytes, sector_bytes, associativity)
        self.mshrs = MshrTable(mshrs, line_bytes // sector_bytes)
        self.hit_latency: int = hit_latency
        self.data_free: int = 0  # the data stage's first free cycle
        # the last look-up's misses: the lines and the sectors missed in each, the first missing_count of them (side
        # by side, native ints, reused)
        self.missing: vec[i64] = vec[i64]()
        self.missing_sectors: vec[i64] = vec[i64]()
        self.missing_count: i64 = 0
        self.merged_now = 0  # sectors the last look-up merged with misses in flight
        # counters
        self.data_wavefronts = 0
        self.sector_hits = 0
        self.merged = 0

    def last_misses(self) -> list[tuple[int, int]]:
        """The last look-up's misses, in order: (line, the sectors missed in it)."""
        return [(int(self.missing[k]), int(self.missing_sectors[k])) for k in range(self.missing_count)]

    def data_stage(self, wavefronts: int, now: int) -> int:
        """Queue `wavefronts` passes through the data stage (one a clock); the first one's cycle."""
        free = self.data_free
        start = free if free > now else now
        self.data_free = start + wavefronts
        self.data_wavefronts += wavefronts
        return start

    def look_up(self, first: int, by_line: tuple[tuple[int, int], ...], now: int, ready: int, allocate: bool,
                count: list[int]) -> int:
        """A load's lines (relative to line `first`, each with its sectors' mask) against the MSHRs and the cache
        at `now`: the cycle its merged sectors' data is back (no earlier than `ready`). The sectors missed are
        left in `missing` / `missing_sectors` (the first `missing_count`; `last_misses` reads them); `allocate`
        False (cp.async.cg) neither hits in the cache nor fills it. `count`: sectors set in a mask, by mask."""
        table = self.mshrs
        mshr = table.entries
        ready_shift, sectors_mask = table.ready_shift, table.sectors
        missing, missing_sectors = self.missing, self.missing_sectors
        held: i64 = 0
        cache = self.cache
        hits = merged = 0
        for relative, mask in by_line:
            line = first + relative
            inflight = mshr.get(line)
            if inflight >= 0 and inflight >> ready_shift > now:  # (MISSING: -1)
                pending = inflight & sectors_mask & mask
                if pending:  # merged with the miss in flight: done when its data arrives, not before
                    merged += count[pending]
                    back = inflight >> ready_shift
                    if back > ready:
                        ready = back
                    mask &= ~pending
                    if not mask:
                        continue
            present = cache.probe(line, mask) if allocate else 0
            hits += count[present]
            if present != mask:
                if held < len(missing):
                    missing[held] = line
                    missing_sectors[held] = mask & ~present
                else:
                    missing = self.missing = vecs.append(missing, line)
                    missing_sectors = self.missing_sectors = vecs.append(missing_sectors, mask & ~present)
                held += 1
        self.missing_count = held
        self.sector_hits += hits
        self.merged += merged
        self.merged_now = merged
        return ready
