"""An L2 slice: its share of the L2's capacity and bandwidth, sectored, set-associative, LRU and write-back.

Requests queue for the slice's bandwidth in the order they reach it (an atomic holds it while the updates to its
line's hottest address serialize). A read that misses goes to its DRAM channel (dram_channel.py); its sectors are
pending until the data is back, and a request for a pending sector merges and waits for it. A plain write needs no
read from DRAM: its sectors become present and dirty; dirty sectors evicted are written back to their line's
channel. What is still dirty when the kernel ends is reported (gpusim__l2_dirty_bytes_at_end), not written.
"""

from __future__ import annotations

from .cache import SectoredCache
from .dram_channel import DramChannel
from .l2_tags import line_hash, update_tags
from .levels import DRAM, L2, L2_IN_FLIGHT
from .line_table import KEEP_AGAIN, MISSING, LineTable


class L2Slice:
    def __init__(self, size_bytes: int, line_bytes: int, sector_bytes: int, associativity: int,
                 bytes_per_clock: float, hit_latency: int, dram_latency: int, atomic_cycles: int,
                 sector_count: list[int], pending_shift: int, channels: list[DramChannel]):
        """`sector_count`: sectors set in a mask, by mask; `pending_shift`: where a pending entry's cycle starts
        (above the widest sector mask); `channels`: the DRAM channels, which a line's hash picks from."""
        self.cache = SectoredCache(size_bytes, line_bytes, sector_bytes, associativity)
        self.sector: int = sector_bytes
        self.rate: float = bytes_per_clock
        self.hit_latency: int = hit_latency
        self.dram_latency: int = dram_latency
        self.atomic_cycles: int = atomic_cycles
        self.sector_count: list[int] = sector_count
        self.channels: list[DramChannel] = channels
        self.free: float = 0.0  # when its bandwidth is next free
        # line -> the sectors in flight from DRAM, one int: cycle they are back << pending_shift | mask (a table of
        # native ints: line_table.py)
        self.pending = LineTable()
        self.pending_shift: int = pending_shift
        self.pending_sectors: int = (1 << pending_shift) - 1
        self.pending_limit: int = KEEP_AGAIN  # prune the entries back by the horizon when there are more
        # the last access's sectors: those merged with a read in flight, and those it read from DRAM
        self.inflight = 0
        self.missing = 0
        # counters
        self.sectors = 0
        self.hits = 0
        self.merged = 0
        self.recent_hits = 0

    def access(self, line: int, h: int, mask: int, now: int, write: bool, atomic: int,
               recent_window: int) -> tuple[int, int]:
        """Serve the masked sectors of `line` (its hash `h`) reaching the slice at `now`: (cycle the data is back,
        the level that served it). `atomic`: the updates to the line's hottest address (they serialize here), 0
        for none; `recent_window`: count hits this close to their sectors' fill (0: none)."""
        count = self.sector_count
        sectors = count[mask]
        free = self.free
        service: float = sectors * self.sector / self.rate
        serialized = float(atomic * self.atomic_cycles)
        if serialized > service:
            service = serialized
        done = (free if free > now else float(now)) + service
        self.free = done
        self.sectors += sectors
        entry = self.pending.get(line)
        shift = self.pending_shift
        inflight = entry & self.pending_sectors & mask if entry != MISSING and entry >> shift > now else 0
        cache = self.cache
        present = cache.probe(line, mask & ~inflight)
        self.hits += count[present]
        if present and recent_window and entry != MISSING and (entry >> shift) + recent_window > now:
            self.recent_hits += count[present & entry & self.pending_sectors]
        queueing = done - now
        level, latency = L2, self.hit_latency
        missing = mask & ~present & ~inflight
        back = 0  # merged with sectors in flight from DRAM: not before they arrive
        if inflight:
            self.merged += count[inflight]
            level, back = L2_IN_FLIGHT, entry >> shift if entry != MISSING else 0
        if write and not atomic:  # write-back L2; a full-sector write needs no read from DRAM
            level, back = L2, 0
        elif missing:
            level, latency = DRAM, self.dram_latency
            channels = self.channels
            finish = channels[h % len(channels)].read(count[missing] * self.sector, done)
            queueing = finish - now
        evicted = update_tags(cache, line, mask, missing, write, atomic)
        if evicted:
            channels = self.channels
            channels[line_hash(cache.evicted_line) % len(channels)].write_back(count[evicted] * self.sector, now)
        wait = int(queueing)  # queueing >= 0: rounded up to whole cycles
        if wait < queueing:
            wait += 1
        t = now + latency + wait
        if back > t:
            t = back
        self.inflight, self.missing = inflight, missing
        return t, level

    def pend(self, line: int, mask: int, back: int, now: int, forget_by: int) -> None:
        """Note sectors in flight from DRAM until `back`; when the entries are many, drop those back by
        `forget_by` (no later request can come before it: forgotten earlier, a request made before that, by an
        SM not yet stepped, would find the line's tags and take it as a hit)."""
        pending = self.pending
        at = pending.slot(line)
        entry = pending.entry_at(at)
        shift = self.pending_shift
        if entry != MISSING and entry >> shift > now:
            pending.put_at(at, line, max(back, entry >> shift) << shift | entry & self.pending_sectors | mask)
        else:
            pending.put_at(at, line, back << shift | mask)
        if len(pending) > self.pending_limit:
            self.pending_limit = pending.keep_after(forget_by, shift)
