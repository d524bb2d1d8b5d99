"""An SM's L1 miss status holding registers (MSHRs): one entry per line with sectors in flight to the L1.

An entry holds the sectors in flight, the cycle their data arrives and the level that serves them (levels.py);
a later miss on the line merges into its entry. A load that wants a sector in flight merges with the entry and
completes no earlier than the data. An entry is freed once its data has arrived; a miss that finds the table
full holds the load/store pipe (lg_throttle) until enough entries are free.
"""

from __future__ import annotations

from librt import vecs
from librt.vecs import vec
from mypy_extensions import i64

from .levels import LEVEL_BITS, LEVEL_MASK
from .line_table import KEEP_AGAIN, MISSING, LineTable


class MshrTable:
    def __init__(self, limit: int, sectors_per_line: int):
        self.limit = limit
        # line -> one int: data ready << ready_shift | level << level_shift | mask of the sectors in flight (a
        # table of native ints: line_table.py). An entry whose data is back is stale: every reader compares its
        # cycle with the time, so stale entries are dropped in bulk (forget_returned), not one by one as they expire
        self.entries = LineTable()
        self.forget_at: int = KEEP_AGAIN  # entries at which the stale ones are dropped (see forget_returned)
        self.level_shift: int = sectors_per_line
        self.ready_shift: int = sectors_per_line + LEVEL_BITS
        self.sectors: int = (1 << sectors_per_line) - 1
        # the cycle each miss's data is ready, in completion order (one per miss: a miss merged into an entry
        # holds its own place until its data is back); those before `head` have expired (dropped from the array
        # once they are half of it, as InstQueue does: no copy of what is left at every expiry). Native ints
        # (librt's vec): kept in order without an object per value
        self.order_ready: vec[i64] = vec[i64]()
        self.head: i64 = 0
        self.stalls = 0  # reservations that found the table full

    def reserve(self, needed: int, now: int) -> int:
        """Cycles the pipe must wait for `needed` entries (0 when enough are free). Entries are kept in
        completion order, so expired ones are dropped from the front."""
        order_ready = self.order_ready
        head = self.head
        count = len(order_ready)
        if head < count and order_ready[head] <= now:
            head += 1
            while head < count and order_ready[head] <= now:
                head += 1
            if head >= 64 and 2 * head >= count:
                order_ready = self.order_ready = order_ready[head:]
                count -= head
                head = 0
            self.head = head
        live = count - head
        if live + needed <= self.limit:
            return 0
        self.stalls += 1
        wait = int(order_ready[head + min(live - 1, live + needed - self.limit - 1)]) - now
        return wait if wait > 0 else 0

    def add(self, line: int, mask: int, ready: int, level: int, now: int, floor: int) -> None:
        """A miss at `now` on the `mask` sectors of `line`: their data arrives at `ready` from `level`. `floor`:
        no later request comes before it (the entries back by then are stale for good)."""
        entries = self.entries
        ready_shift, level_shift = self.ready_shift, self.level_shift
        slot = entries.slot(line)
        inflight = entries.entry_at(slot)
        if inflight != MISSING and inflight >> ready_shift > now:  # other sectors of the line are in flight
            back = max(ready, inflight >> ready_shift)
            deepest = max(level, inflight >> level_shift & LEVEL_MASK)
            entries.put_at(slot, line, back << ready_shift | deepest << level_shift | inflight & self.sectors | mask)
        else:
            entries.put_at(slot, line, ready << ready_shift | level << level_shift | mask)
            if len(entries) > self.forget_at:
                self.forget_returned(floor)
        # into completion order: after the misses whose data is back no later (their order among equal cycles is
        # immaterial: they expire together, and a full table's wait reads the cycles alone); a binary search,
        # natively (later misses are mostly back later: the end is tried first)
        at: i64 = ready
        order_ready = self.order_ready
        high = len(order_ready)
        if high == self.head or order_ready[high - 1] <= at:
            self.order_ready = vecs.append(order_ready, at)
            return
        low = self.head
        while low < high:
            middle = (low + high) >> 1
            if order_ready[middle] <= at:
                low = middle + 1
            else:
                high = middle
        order_ready = self.order_ready = vecs.append(order_ready, at)  # one longer; the later ones move up one
        k = len(order_ready) - 1
        while k > low:
            order_ready[k] = order_ready[k - 1]
            k -= 1
        order_ready[low] = at

    def forget_returned(self, floor: int) -> None:
        """Drop the entries whose data is back by `floor`, before which no request comes any more (stale: no
        reader takes them as in flight); drop again once the table has twice what is left, and some."""
        self.forget_at = self.entries.keep_after(floor, self.ready_shift)
