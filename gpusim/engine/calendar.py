"""The GPU clock's calendar: which SM steps next, as a binary heap of native ints (librt's vec).

Each SM waiting to be stepped has one entry: the cycle it is due and the order it was scheduled in, packed into
one key (cycle << ORDER_BITS | order). The earliest cycle comes first, and SMs due at the same cycle come in the
order they were scheduled, so an SM that asks to be stepped again at the cycle it is being stepped at joins the
end of that cycle's batch. Only the order among the entries held matters, so when the order counter runs out of
bits the held entries are renumbered 0, 1, ... in their order and counting goes on from there. Nothing is boxed:
a step costs one push and one pop of a heap no larger than the SM count.
"""

from __future__ import annotations

from typing import Final

from librt import vecs
from librt.vecs import vec
from mypy_extensions import i64

ORDER_BITS: Final = 24  # the order's share of a key: cycles up to 2**39 (hours of simulated time at any clock)
ORDER_LIMIT: Final = 1 << ORDER_BITS
LAST_CYCLE: Final = (1 << (63 - ORDER_BITS)) - 1


class Calendar:
    def __init__(self) -> None:
        self.keys: vec[i64] = vec[i64]()  # cycle << ORDER_BITS | order, as a binary heap
        self.sms: vec[i64] = vec[i64]()  # each entry's SM index
        self.scheduled: i64 = 0  # the next order
        self.size: i64 = 0

    def __len__(self) -> int:
        return self.size

    def earliest(self) -> i64:
        """The cycle of the first entry (the calendar is not empty)."""
        return self.keys[0] >> ORDER_BITS

    def push(self, cycle: i64, index: i64) -> None:
        """Schedule SM `index` at `cycle` (at most LAST_CYCLE), after every SM scheduled before at that cycle."""
        if self.scheduled == ORDER_LIMIT:
            self.renumber()
        if not 0 <= cycle <= LAST_CYCLE:
            raise OverflowError(f"cycle {cycle} is beyond the calendar's range (0 to {LAST_CYCLE})")
        key = cycle << ORDER_BITS | self.scheduled
        self.scheduled += 1
        keys = self.keys
        sms = self.sms
        at = self.size
        if at == len(keys):
            keys = self.keys = vecs.append(keys, key)
            sms = self.sms = vecs.append(sms, index)
        while at > 0:
            up = (at - 1) >> 1
            above = keys[up]
            if above < key:
                break
            keys[at] = above
            sms[at] = sms[up]
            at = up
        keys[at] = key
        sms[at] = index
        self.size += 1

    def pop(self) -> i64:
        """Take the first entry off; its SM's index."""
        keys = self.keys
        sms = self.sms
        first = sms[0]
        self.size -= 1
        size = self.size
        if size == 0:
            return first
        key = keys[size]
        index = sms[size]
        at: i64 = 0
        child: i64 = 1
        while child < size:
            below = keys[child]
            right = child + 1
            if right < size and keys[right] < below:
                child = right
                below = keys[right]
            if key < below:
                break
            keys[at] = below
            sms[at] = sms[child]
            at = child
            child = 2 * at + 1
        keys[at] = key
        sms[at] = index
        return first

    def renumber(self) -> None:
        """Give the held entries the orders 0, 1, ... in the order they come off (the heap's shape holds)."""
        size = self.size
        keys = self.keys
        ranked = sorted(range(size), key=lambda at: keys[at])
        mask: i64 = ORDER_LIMIT - 1
        for rank in range(size):
            at = ranked[rank]
            keys[at] = keys[at] & ~mask | rank
        self.scheduled = size


__all__ = ["Calendar", "LAST_CYCLE", "ORDER_BITS"]
