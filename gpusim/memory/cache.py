"""A sectored, set-associative cache with LRU replacement (state only; timing lives in the hierarchy).

Requests work a line at a time with a mask of the sectors wanted (bit i = sector i of the line), so a warp's
coalesced access costs one lookup per line it touches.

The state is three flat arrays of native 64-bit ints, `ways` entries a set side by side (librt's vec, which the
compiled engine reads and writes without making an object per value): each way's line (EMPTY: none), its sector
state (valid | dirty << sectors_per_line) and the cycle of the cache's own clock at its last use. A look-up scans
its set's ways, which lie in one or two host cache lines for an L2 set; the least recently used line is the one
with the smallest stamp. An L2 of 400,000 lines takes 9.6 MB this way, where a table of objects per line took
several times that, spread over the host's memory.

A cache of INDEXED_WAYS ways or more (an L1 of 64) is not scanned and keeps no stamps: a line table finds a line's
way, each set keeps its ways in use order as a list linked both ways (its least recently used line, the one the
scan would find with the smallest stamp, at the head), and a set fills its ways in order (a way is never emptied).
It answers exactly as the scan does.
"""

from __future__ import annotations

from typing import Final

from librt.vecs import vec
from mypy_extensions import i64

from .line_table import LineTable

EMPTY: Final = -1  # a way that holds no line (line numbers are never negative)
NONE: Final = -1  # no way (the ends of a set's use order)
INDEXED_WAYS: Final = 32  # ways from which a look-up goes through the line table rather than a scan of the set


class SectoredCache:
    def __init__(self, size_bytes: int, line_bytes: int, sector_bytes: int, associativity: int):
        self.sectors_per_line = line_bytes // sector_bytes
        lines = max(1, size_bytes // line_bytes)
        self.ways: int = min(associativity, lines)
        self.sets: int = max(1, lines // self.ways)
        self.capacity_bytes = self.sets * self.ways * line_bytes
        count = self.sets * self.ways
        self.line_of: vec[i64] = vec[i64]([EMPTY] * count)  # per way: its line
        self.state_of: vec[i64] = vec[i64]([0] * count)  # per way: valid sectors | dirty sectors << dirty_shift
        self.indexed: bool = self.ways >= INDEXED_WAYS
        # per way, scanned: the clock at its last use (LRU: the smallest)
        self.used_at: vec[i64] = vec[i64]([0] * (0 if self.indexed else count))
        self.clock: i64 = 0
        self.dirty_shift = self.sectors_per_line
        self.evicted_line = -1  # the line the last fill evicted with dirty sectors (see fill)
        # indexed: line -> way (growing with the lines held: an L1 that only cp.async.cg bypasses keeps it small);
        # per set, how many ways it has filled and its least and most recently used way; per way, the ways used just
        # before and just after it (NONE at the ends; made at the first fill)
        self.index = LineTable()
        sets = self.sets if self.indexed else 0
        self.filled: vec[i64] = vec[i64]([0] * sets)
        self.oldest: vec[i64] = vec[i64]([NONE] * sets)
        self.newest: vec[i64] = vec[i64]([NONE] * sets)
        self.older: vec[i64] = vec[i64]()
        self.newer: vec[i64] = vec[i64]()

    def lines(self) -> list[tuple[int, int]]:
        """Every line held, with its state: (line, valid | dirty << dirty_shift), set by set (for end-of-kernel
        accounting)."""
        found: list[tuple[int, int]] = []
        line_of, state_of = self.line_of, self.state_of
        for way in range(len(line_of)):
            line = line_of[way]
            if line != EMPTY:
                found.append((int(line), int(state_of[way])))
        return found

    def dirty_sectors(self, sector_count: list[int]) -> int:
        """Dirty sectors held, over every line (`sector_count`: sectors set in a mask, by mask)."""
        total = 0
        line_of, state_of, shift = self.line_of, self.state_of, self.dirty_shift
        for way in range(len(line_of)):
            if line_of[way] != EMPTY:
                total += sector_count[state_of[way] >> shift]
        return total

    def held_in_set(self, line: int) -> int:
        """How many lines the set `line` maps to holds."""
        line_of = self.line_of
        first: i64 = line % self.sets * self.ways
        held = 0
        for way in range(first, first + self.ways):
            if line_of[way] != EMPTY:
                held += 1
        return held

    def probe(self, line: int, mask: int) -> int:
        """The wanted sectors that are present (a mask); a hit makes the line most recently used."""
        target: i64 = line
        if self.indexed:
            found = self.index.get(line)
            if found < 0:
                return 0
            present = int(self.state_of[found]) & mask
            if present:
                self.use(found, target % self.sets)
            return present
        line_of = self.line_of
        first: i64 = line % self.sets * self.ways
        for way in range(first, first + self.ways):
            if line_of[way] == target:
                present = int(self.state_of[way]) & mask  # (the mask's bits are below the dirty ones)
                if present:  # most recently used
                    self.clock += 1
                    self.used_at[way] = self.clock
                return present
        return 0

    def use(self, way: i64, s: i64) -> None:
        """Way `way` of set `s` (indexed) becomes the set's most recently used."""
        newest = self.newest[s]
        if way == newest:
            return
        older, newer = self.older, self.newer
        before, after = older[way], newer[way]  # (after is a way: this one is not the newest)
        if before == NONE:
            self.oldest[s] = after
        else:
            newer[before] = after
        older[after] = before
        older[way] = newest
        newer[way] = NONE
        newer[newest] = way
        self.newest[s] = way

    def fill_indexed(self, line: i64, mask: i64, dirty: bool) -> int:
        """fill, through the line table and the sets' use order."""
        if not len(self.older):
            self.older = vec[i64]([NONE] * len(self.line_of))
            self.newer = vec[i64]([NONE] * len(self.line_of))
        s = line % self.sets
        index = self.index
        at = index.slot(line)
        way = index.entry_at(at)
        evicted = 0
        state: i64 = 0
        if way >= 0:
            state = self.state_of[way]
            self.use(way, s)
        elif self.filled[s] < self.ways:  # the set's next empty way, as its newest
            way = s * self.ways + self.filled[s]
            self.filled[s] += 1
            index.put_at(at, line, way)
            newest = self.newest[s]
            self.older[way] = newest
            self.newer[way] = NONE
            if newest == NONE:
                self.oldest[s] = way
            else:
                self.newer[newest] = way
            self.newest[s] = way
        else:  # the set is full: the least recently used line leaves
            way = self.oldest[s]
            gone = self.line_of[way]
            evicted = int(self.state_of[way]) >> self.dirty_shift
            if evicted:
                self.evicted_line = int(gone)
            index.remove(gone)
            index.put(line, way)
            self.use(way, s)
        state = state | mask
        if dirty:
            state = state | mask << self.dirty_shift
        self.line_of[way] = line
        self.state_of[way] = state
        return evicted

    def fill(self, line: int, mask: int, dirty: bool = False) -> int:
        """Make the sectors present (allocating the line, evicting the least recently used one). Returns the
        dirty-sector mask of the line it evicted (then `evicted_line` names it), or 0."""
        if self.indexed:
            return self.fill_indexed(line, mask, dirty)
        line_of, state_of, used_at = self.line_of, self.state_of, self.used_at
        target: i64 = line
        first: i64 = line % self.sets * self.ways
        end: i64 = first + self.ways
        slot: i64 = -1
        free: i64 = -1
        oldest: i64 = -1
        oldest_use: i64 = 0
        for way in range(first, end):
            held = line_of[way]
            if held == target:
                slot = way
                break
            if held == EMPTY:
                free = way if free < 0 else free
            elif free < 0:  # (the least recently used matters only in a full set)
                use = used_at[way]
                if oldest < 0 or use < oldest_use:
                    oldest, oldest_use = way, use
        evicted = 0
        state: i64 = 0
        if slot >= 0:
            state = state_of[slot]
        elif free >= 0:
            slot = free
        else:  # the set is full: the least recently used line leaves
            slot = oldest
            evicted = int(state_of[slot]) >> self.dirty_shift
            if evicted:
                self.evicted_line = int(line_of[slot])
        state = state | mask
        if dirty:
            state = state | mask << self.dirty_shift
        line_of[slot] = target
        state_of[slot] = state
        self.clock += 1
        used_at[slot] = self.clock
        return evicted
