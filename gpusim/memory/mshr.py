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
        # the cycle each miss's data is ready (one per miss: a miss merged into an entry holds its own place until
        # its data is back): a binary min-heap of native ints (librt's vec) in its first `ready_count` places, the
        # earliest at the front, expiring first. A miss costs a push and a pop of O(log n), where keeping them sorted
        # moved every later one up (a busy SM's 512-entry table: about a thousand host instructions a miss)
        self.ready_heap: vec[i64] = vec[i64]()
        self.ready_count: i64 = 0
        self.places: vec[i64] = vec[i64]()  # room for nth_smallest's candidates
        self.stalls = 0  # reservations that found the table full

    def reserve(self, needed: int, now: int) -> int:
        """Cycles the pipe must wait for `needed` entries (0 when enough are free): the entries whose data is back
        by `now` expire (from the heap's front), and a full table waits for the earliest ones still out."""
        heap = self.ready_heap
        live = self.ready_count
        if live and heap[0] <= now:
            while live and heap[0] <= now:
                live -= 1
                sift_down(heap, live, heap[live])
            self.ready_count = live
        if live + needed <= self.limit:
            return 0
        self.stalls += 1
        if live == 0:  # more than the whole table at once: nothing to wait for (it goes when it can)
            return 0
        n: i64 = min(live - 1, live + needed - self.limit - 1)
        places = self.places
        while len(places) < n + 2:
            places = self.places = vecs.append(places, 0)
        wait = int(nth_smallest(heap, live, n, places)) - now
        return wait if wait > 0 else 0

    def ready_cycles(self) -> list[int]:
        """The cycles the misses in flight are back, earliest first."""
        return sorted(self.ready_heap[i] for i in range(self.ready_count))

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
        heap = self.ready_heap
        count = self.ready_count
        if count == len(heap):
            heap = self.ready_heap = vecs.append(heap, ready)
        sift_up(heap, count, ready)
        self.ready_count = count + 1

    def forget_returned(self, floor: int) -> None:
        """Drop the entries whose data is back by `floor`, before which no request comes any more (stale: no
        reader takes them as in flight); drop again once the table has twice what is left, and some."""
        self.forget_at = self.entries.keep_after(floor, self.ready_shift)


def sift_up(heap: vec[i64], at: i64, value: i64) -> None:
    """Put `value` in the binary min-heap `heap` at place `at` (its end), moved up past the larger parents."""
    while at > 0:
        parent = (at - 1) >> 1
        above = heap[parent]
        if above <= value:
            break
        heap[at] = above
        at = parent
    heap[at] = value


def sift_down(heap: vec[i64], count: i64, value: i64) -> None:
    """Put `value` at the front of the binary min-heap in `heap`'s first `count` places (its smallest just
    taken), moved down past the smaller children."""
    if count == 0:
        return
    at: i64 = 0
    while True:
        child = 2 * at + 1
        if child >= count:
            break
        smaller = heap[child]
        if child + 1 < count and heap[child + 1] < smaller:
            child += 1
            smaller = heap[child]
        if value <= smaller:
            break
        heap[at] = smaller
        at = child
    heap[at] = value


def nth_smallest(heap: vec[i64], count: i64, n: i64, places: vec[i64]) -> i64:
    """The value that would be `n`-th (from 0) in the binary min-heap of `heap`'s first `count` places sorted,
    the heap left as it is. The candidates are the root and then the children of every value taken, the smallest
    taken each time: n takes, each a scan of at most n + 1 candidates (n is the entries a full table lacks, a
    few). `places`: scratch room for the candidates' places, at least n + 2 long."""
    if n == 0:
        return heap[0]
    places[0] = 0
    held: i64 = 1
    while True:
        best: i64 = 0
        for k in range(1, held):
            if heap[places[k]] < heap[places[best]]:
                best = k
        at = places[best]
        if n == 0:
            return heap[at]
        n -= 1
        held -= 1
        places[best] = places[held]
        child = 2 * at + 1
        if child < count:
            places[held] = child
            held += 1
            if child + 1 < count:
                places[held] = child + 1
                held += 1
