"""An SM's L1 miss status holding registers (MSHRs): one entry per line with sectors in flight to the L1.

An entry holds the sectors in flight, the cycle their data arrives and the level that serves them (levels.py);
a later miss on the line merges into its entry. A load that wants a sector in flight merges with the entry and
completes no earlier than the data. An entry is freed once its data has arrived; a miss that finds the table
full holds the load/store pipe (lg_throttle) until enough entries are free.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from .levels import LEVEL_BITS, LEVEL_MASK


class MshrTable:
    def __init__(self, limit: int, sectors_per_line: int):
        self.limit = limit
        # line -> one int: data ready << ready_shift | level << level_shift | mask of the sectors in flight
        # (a tuple an entry was an allocation the garbage collector tracks, at every L1 miss)
        self.entries: dict[int, int] = {}
        self.level_shift: int = sectors_per_line
        self.ready_shift: int = sectors_per_line + LEVEL_BITS
        self.sectors: int = (1 << sectors_per_line) - 1
        # the entries in completion order, as two lists side by side: the cycle each one's data is ready, its line
        self.order_ready: list[int] = []
        self.order_line: list[int] = []
        self.stalls = 0  # reservations that found the table full

    def reserve(self, needed: int, now: int) -> int:
        """Cycles the pipe must wait for `needed` entries (0 when enough are free). Entries are kept in
        completion order, so expired ones are dropped from the front."""
        entries, limit = self.entries, self.limit
        order_ready, order_line = self.order_ready, self.order_line
        expired = 0
        while expired < len(order_ready) and order_ready[expired] <= now:
            t, line = order_ready[expired], order_line[expired]
            entry = entries.get(line)
            if entry is not None and entry >> self.ready_shift == t:  # (not since extended by a later miss)
                del entries[line]
            expired += 1
        if expired:
            del order_ready[:expired]
            del order_line[:expired]
        live = len(order_ready)
        if live + needed <= limit:
            return 0
        self.stalls += 1
        return max(0, order_ready[min(live - 1, live + needed - limit - 1)] - now)

    def add(self, line: int, mask: int, ready: int, level: int, now: int) -> None:
        """A miss at `now` on the `mask` sectors of `line`: their data arrives at `ready` from `level`."""
        entries = self.entries
        ready_shift, level_shift = self.ready_shift, self.level_shift
        key: Any = line  # compiled: boxed once for the dict, not once each operation
        inflight = entries.get(key)
        if inflight is not None and inflight >> ready_shift > now:  # other sectors of the line are in flight
            back = max(ready, inflight >> ready_shift)
            deepest = max(level, inflight >> level_shift & LEVEL_MASK)
            entries[key] = back << ready_shift | deepest << level_shift | inflight & self.sectors | mask
        else:
            entries[key] = ready << ready_shift | level << level_shift | mask
        # into completion order: after the entries whose data is back no later (their order among equal cycles is
        # immaterial: they expire together, and a full table's wait reads the cycles alone)
        at = bisect_right(self.order_ready, ready)
        self.order_ready.insert(at, ready)
        self.order_line.insert(at, line)
