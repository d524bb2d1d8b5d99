"""An SM's L1 miss status holding registers (MSHRs): one entry per line with sectors in flight to the L1.

An entry holds the sectors in flight, the cycle their data arrives and the level that serves them (levels.py);
a later miss on the line merges into its entry. A load that wants a sector in flight merges with the entry and
completes no earlier than the data. An entry is freed once its data has arrived; a miss that finds the table
full holds the load/store pipe (lg_throttle) until enough entries are free.
"""

from __future__ import annotations

from .keyed_heap import KeyedHeap
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
        # the cycle each miss's data is ready (one per miss: a miss merged into an entry holds its own place until
        # its data is back), earliest first: a miss costs a push and a pop of O(log n), where keeping them sorted
        # moved every later one up (a busy SM's 512-entry table: about a thousand host instructions a miss)
        self.due_back = KeyedHeap()  # (the values unused)
        self.stalls = 0  # reservations that found the table full

    def reserve(self, needed: int, now: int) -> int:
        """Cycles the pipe must wait for `needed` entries (0 when enough are free): the entries whose data is back
        by `now` expire (from the heap's front), and a full table waits for the earliest ones still out."""
        due_back = self.due_back
        while due_back.size and due_back.keys[0] <= now:
            due_back.pop()
        live = due_back.size
        if live + needed <= self.limit:
            return 0
        self.stalls += 1
        if live == 0:  # more than the whole table at once: nothing to wait for (it goes when it can)
            return 0
        wait = int(due_back.nth_key(min(live - 1, live + needed - self.limit - 1))) - now
        return wait if wait > 0 else 0

    def ready_cycles(self) -> list[int]:
        """The cycles the misses in flight are back, earliest first."""
        due_back = self.due_back
        return [due_back.keys[at] for at in due_back.ranked()]

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
        self.due_back.push(ready, 0)

    def forget_returned(self, floor: int) -> None:
        """Drop the entries whose data is back by `floor`, before which no request comes any more (stale: no
        reader takes them as in flight); drop again once the table has twice what is left, and some."""
        self.forget_at = self.entries.keep_after(floor, self.ready_shift)
