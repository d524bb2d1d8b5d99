"""A binary min-heap of native int keys, each with a native int value beside it (librt's vec): what the engine
keeps in time order without an object per entry (the clock's calendar of SMs, a sub-partition's sleeping warps,
an SM's misses by the cycle their data is back).

Keys are compared alone, so a caller that needs a fixed order among equal times packs a tie-breaker into the key
(its low bits: an order counter) and, when the counter runs out of bits, renumbers the entries held (`renumber`).
"""

from __future__ import annotations

from librt import vecs
from librt.vecs import vec
from mypy_extensions import i64


def put(items: vec[i64], count: i64, value: i64) -> vec[i64]:
    """`items` with `value` at place `count` (its first unused one), grown by one where it was full."""
    if count == len(items):
        return vecs.append(items, value)
    items[count] = value
    return items


class KeyedHeap:
    def __init__(self) -> None:
        self.keys: vec[i64] = vec[i64]()  # the heap, in the first `size` places: the smallest key at 0
        self.values: vec[i64] = vec[i64]()  # each key's value, at the same place
        self.size: i64 = 0
        self.places: vec[i64] = vec[i64]()  # nth_key's room for its candidates

    def __len__(self) -> int:
        return self.size

    def push(self, key: i64, value: i64) -> None:
        """Add `key` with `value`: put at the end, moved up past the larger parents."""
        at = self.size
        keys, values = self.keys, self.values
        if at == len(keys):
            keys = self.keys = vecs.append(keys, key)
            values = self.values = vecs.append(values, value)
        while at > 0:
            up = (at - 1) >> 1
            above = keys[up]
            if above <= key:
                break
            keys[at] = above
            values[at] = values[up]
            at = up
        keys[at] = key
        values[at] = value
        self.size += 1

    def pop(self) -> i64:
        """Take the smallest key off (the heap is not empty); its value. The last entry moves to the front and
        down past the smaller children."""
        keys = self.keys
        values = self.values
        first = values[0]
        self.size -= 1
        size = self.size
        if size == 0:
            return first
        key = keys[size]
        value = values[size]
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
            values[at] = values[child]
            at = child
            child = 2 * at + 1
        keys[at] = key
        values[at] = value
        return first

    def ranked(self) -> list[int]:
        """The places held, by key: the order the entries come off."""
        keys = self.keys
        return sorted(range(self.size), key=lambda at: keys[at])

    def renumber(self, mask: i64, shift: i64) -> i64:
        """Give the entries held the orders 0, 1, ... in the order they come off, in the key bits `mask << shift`
        (their tie-breaker; the heap's shape holds); the count held, the next order."""
        keys = self.keys
        ranked = self.ranked()
        keep: i64 = ~(mask << shift)
        for rank in range(len(ranked)):
            at = ranked[rank]
            keys[at] = keys[at] & keep | rank << shift
        return len(ranked)

    def nth_key(self, n: i64) -> i64:
        """The key that would be `n`-th (from 0) in the keys sorted, the heap left as it is. The candidates are the
        root and then the children of every key taken, the smallest taken each time: n takes, each a scan of at
        most n + 1 candidates (for a small n)."""
        keys = self.keys
        if n == 0:
            return keys[0]
        places = self.places
        while len(places) < n + 2:  # (each take adds at most one candidate)
            places = self.places = vecs.append(places, 0)
        count = self.size
        places[0] = 0
        held: i64 = 1
        while True:
            best: i64 = 0
            for k in range(1, held):
                if keys[places[k]] < keys[places[best]]:
                    best = k
            at = places[best]
            if n == 0:
                return keys[at]
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


__all__ = ["KeyedHeap", "put"]
