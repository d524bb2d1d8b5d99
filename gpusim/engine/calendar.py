"""The GPU clock's calendar: which SM steps next, as a binary heap of native ints (librt's vec).

Each SM waiting to be stepped has one entry: the cycle it is due and the order it was scheduled in, packed into
one key (cycle << ORDER_BITS | order). The earliest cycle comes first, and SMs due at the same cycle come in the
order they were scheduled, so an SM that asks to be stepped again at the cycle it is being stepped at joins the
end of that cycle's batch. Only the order among the entries held matters, so when the order counter runs out of
bits the held entries are renumbered 0, 1, ... in their order and counting goes on from there. Nothing is boxed.

Most steps are due at the cycle being stepped or the next one (a busy SM steps every cycle), so those two cycles
keep their SMs in two first-in-first-out lists beside the heap, in the order scheduled: a step then costs an
append and a read, not a heap's log-n moves. An SM put in the heap for a cycle was scheduled before any put in
a list for it (the lists take a cycle only once the stepping is at it or the one before), so at each cycle the
heap's entries come first, then the list's.
"""

from __future__ import annotations

from typing import Final

from librt.vecs import vec
from mypy_extensions import i64

from ..memory.keyed_heap import KeyedHeap, put

ORDER_BITS: Final = 24  # the order's share of a key: cycles up to 2**39 (hours of simulated time at any clock)
ORDER_LIMIT: Final = 1 << ORDER_BITS
LAST_CYCLE: Final = (1 << (63 - ORDER_BITS)) - 1


class Calendar:
    def __init__(self) -> None:
        self.heap = KeyedHeap()  # cycle << ORDER_BITS | order -> SM index, for cycles past the next
        self.scheduled: i64 = 0  # the next order
        self.size: i64 = 0  # entries held in all
        self.current: i64 = -2  # the cycle being stepped (the latest taken off): `due_now` holds SMs due at it
        self.due_now: vec[i64] = vec[i64]()  # SM indices due at `current`, from `now_head` on, in the order scheduled
        self.now_head: i64 = 0
        self.now_count: i64 = 0
        self.due_next: vec[i64] = vec[i64]()  # SM indices due at `current` + 1, in the order scheduled
        self.next_count: i64 = 0

    def __len__(self) -> int:
        return self.size

    def earliest(self) -> i64:
        """The cycle of the first entry (the calendar is not empty)."""
        current = self.current
        heap = self.heap
        heap_cycle: i64 = LAST_CYCLE + 1  # (no entry in the heap: later than any)
        if heap.size:
            heap_cycle = heap.keys[0] >> ORDER_BITS
        if heap_cycle <= current or self.now_head < self.now_count:
            return heap_cycle if heap_cycle < current else current
        if heap_cycle == current + 1 or self.next_count:
            return current + 1
        return heap_cycle

    def push(self, cycle: i64, index: i64) -> None:
        """Schedule SM `index` at `cycle` (at most LAST_CYCLE), after every SM scheduled before at that cycle."""
        current = self.current
        if cycle == current:
            self.due_now = put(self.due_now, self.now_count, index)
            self.now_count += 1
        elif cycle == current + 1 and cycle <= LAST_CYCLE:
            self.due_next = put(self.due_next, self.next_count, index)
            self.next_count += 1
        else:
            if self.scheduled == ORDER_LIMIT:
                self.renumber()
            if not 0 <= cycle <= LAST_CYCLE:
                raise OverflowError(f"cycle {cycle} is beyond the calendar's range (0 to {LAST_CYCLE})")
            self.heap.push(cycle << ORDER_BITS | self.scheduled, index)
            self.scheduled += 1
        self.size += 1

    def pop(self) -> i64:
        """Take the first entry off; its SM's index."""
        self.size -= 1
        current = self.current
        heap = self.heap
        heap_cycle: i64 = LAST_CYCLE + 1  # (no entry in the heap: later than any)
        if heap.size:
            heap_cycle = heap.keys[0] >> ORDER_BITS
        if heap_cycle > current:
            head = self.now_head
            if head < self.now_count:  # the SMs due now that were put in the list
                self.now_head = head + 1
                return self.due_now[head]
            if heap_cycle == current + 1 or self.next_count:  # on to the next cycle: its list is now's
                self.current = current + 1
                self.due_now, self.due_next = self.due_next, self.due_now
                self.now_count, self.next_count = self.next_count, 0
                self.now_head = 0
                if heap_cycle != current + 1:
                    self.now_head = 1
                    return self.due_now[0]
            else:  # nothing due at the two cycles the lists hold: on to the heap's cycle
                self.current = heap_cycle
                self.now_head = self.now_count = 0
        return heap.pop()

    def renumber(self) -> None:
        """Give the heap's entries the orders 0, 1, ... in the order they come off (the heap's shape holds)."""
        self.scheduled = self.heap.renumber(ORDER_LIMIT - 1, 0)


__all__ = ["Calendar", "LAST_CYCLE", "ORDER_BITS"]
