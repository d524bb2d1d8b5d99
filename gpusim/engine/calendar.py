"""The GPU clock's calendar: which SM steps next, as a binary heap of native ints (librt's vec).

Each SM waiting to be stepped has one entry: the cycle it is due and the order it was scheduled in. The earliest
cycle comes first, and SMs due at the same cycle come in the order they were scheduled, so an SM that asks to be
stepped again at the cycle it is being stepped at joins the end of that cycle's batch. Nothing is boxed: a step
costs one push and one pop of a heap no larger than the SM count.
"""

from __future__ import annotations

from librt import vecs
from librt.vecs import vec
from mypy_extensions import i64


class Calendar:
    def __init__(self) -> None:
        self.cycles: vec[i64] = vec[i64]()
        self.orders: vec[i64] = vec[i64]()  # scheduling order (a counter) and SM index, order << 20 | index
        self.scheduled: i64 = 0
        self.size: i64 = 0

    def __len__(self) -> int:
        return self.size

    def earliest(self) -> i64:
        """The cycle of the first entry (the calendar is not empty)."""
        return self.cycles[0]

    def push(self, cycle: i64, index: i64) -> None:
        """Schedule SM `index` (below 2**20) at `cycle`, after every SM scheduled before at that cycle."""
        order = self.scheduled << 20 | index
        self.scheduled += 1
        cycles = self.cycles
        orders = self.orders
        at = self.size
        if at == len(cycles):
            cycles = self.cycles = vecs.append(cycles, cycle)
            orders = self.orders = vecs.append(orders, order)
        while at > 0:
            up = (at - 1) >> 1
            above = cycles[up]
            if above < cycle or above == cycle and orders[up] < order:
                break
            cycles[at] = above
            orders[at] = orders[up]
            at = up
        cycles[at] = cycle
        orders[at] = order
        self.size += 1

    def pop(self) -> i64:
        """Take the first entry off; its SM's index."""
        cycles = self.cycles
        orders = self.orders
        first = orders[0] & 0xFFFFF
        self.size -= 1
        size = self.size
        if size == 0:
            return first
        cycle = cycles[size]
        order = orders[size]
        at: i64 = 0
        while True:
            child = 2 * at + 1
            if child >= size:
                break
            right = child + 1
            if right < size and (cycles[right] < cycles[child] or
                                 cycles[right] == cycles[child] and orders[right] < orders[child]):
                child = right
            below = cycles[child]
            if cycle < below or cycle == below and order < orders[child]:
                break
            cycles[at] = below
            orders[at] = orders[child]
            at = child
        cycles[at] = cycle
        orders[at] = order
        return first


__all__ = ["Calendar"]
