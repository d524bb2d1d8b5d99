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
        # the entries in completion order, as two lists side by side: the cycle each one's data is ready, its line;
        # those before `head` have expired (dropped from the lists once they are half of them, as InstQueue does:
        # no copy of what is left at every expiry)
        self.order_ready: list[int] = []
        self.order_line: list[int] = []
        self.head: int = 0
        self.stalls = 0  # reservations that found the table full

    def reserve(self, needed: int, now: int) -> int:
        """Cycles the pipe must wait for `needed` entries (0 when enough are free). Entries are kept in
        completion order, so expired ones are dropped from the front."""
        entries = self.entries
        order_ready, order_line = self.order_ready, self.order_line
        head = self.head
        count = len(order_ready)
        if head < count and order_ready[head] <= now:
            ready_shift = self.ready_shift
            while head < count and order_ready[head] <= now:
                t, line = order_ready[head], order_line[head]
                key: Any = line  # compiled: boxed once for the dict operations below
                entry = entries.get(key)
                if entry is not None and entry >> ready_shift == t:  # (not since extended by a later miss)
                    del entries[key]
                head += 1
            if head >= 64 and 2 * head >= count:
                del order_ready[:head]
                del order_line[:head]
                count -= head
                head = 0
            self.head = head
        live = count - head
        if live + needed <= self.limit:
            return 0
        self.stalls += 1
        wait = order_ready[head + min(live - 1, live + needed - self.limit - 1)] - now
        return wait if wait > 0 else 0

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
        # immaterial: they expire together, and a full table's wait reads the cycles alone). Misses made later are
        # mostly back later: scanned from the end, natively, a few steps at most; bisection beyond that
        order_ready = self.order_ready
        at = len(order_ready)
        steps = 0
        while at > self.head and order_ready[at - 1] > ready:
            at -= 1
            steps += 1
            if steps == 8:
                at = bisect_right(order_ready, ready, self.head, at)
                break
        if at == len(order_ready):
            order_ready.append(ready)
            self.order_line.append(line)
        else:
            order_ready.insert(at, ready)
            self.order_line.insert(at, line)
