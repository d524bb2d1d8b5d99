"""A sectored, set-associative cache with LRU replacement (state only; timing lives in the hierarchy).

Requests work a line at a time with a mask of the sectors wanted (bit i = sector i of the line), so a warp's
coalesced access costs one lookup per line it touches.
"""

from __future__ import annotations

from typing import Any


class SectoredCache:
    def __init__(self, size_bytes: int, line_bytes: int, sector_bytes: int, associativity: int):
        self.sectors_per_line = line_bytes // sector_bytes
        lines = max(1, size_bytes // line_bytes)
        self.ways = min(associativity, lines)
        self.sets = max(1, lines // self.ways)
        self.capacity_bytes = self.sets * self.ways * line_bytes
        # per set: line -> its state, least recently used first (a dict keeps insertion order). The state is one int,
        # the valid sectors' mask with the dirty sectors' mask above it (valid | dirty << sectors_per_line): with 4
        # sectors a line it stays below 256, an int Python never allocates, so a line costs its dict entry alone
        self._sets: list[dict[int, int]] = [{} for _ in range(self.sets)]
        self.dirty_shift = self.sectors_per_line
        self.evicted_line = -1  # the line the last fill evicted with dirty sectors (see fill)

    def lines(self) -> list[dict[int, int]]:
        """Every set: line -> valid | dirty << dirty_shift, the sector masks (for end-of-kernel accounting; do not
        modify)."""
        return self._sets

    def probe(self, line: int, mask: int) -> int:
        """The wanted sectors that are present (a mask); a hit makes the line most recently used."""
        lines = self._sets[line % self.sets]
        key: Any = line  # compiled: boxed once for the dict operations below, not once each
        state = lines.get(key)
        if state is None:
            return 0
        present = state & mask  # (the mask's bits are below the dirty ones)
        if present:  # most recently used: to the end
            del lines[key]
            lines[key] = state
        return present

    def fill(self, line: int, mask: int, dirty: bool = False) -> int:
        """Make the sectors present (allocating the line, evicting the least recently used one). Returns the
        dirty-sector mask of the line it evicted (then `evicted_line` names it), or 0."""
        lines = self._sets[line % self.sets]
        key: Any = line  # compiled: boxed once (see probe)
        found = lines.get(key)
        evicted = 0
        state: int = 0
        if found is None:
            if len(lines) >= self.ways:
                for old_line in lines:  # the least recently used: the first (compiled: iterated natively)
                    evicted = lines[old_line] >> self.dirty_shift
                    del lines[old_line]
                    if evicted:
                        self.evicted_line = old_line
                    break
        else:
            state = found
            del lines[key]  # most recently used: to the end (the store below puts it there)
        state = state | mask
        if dirty:
            state = state | mask << self.dirty_shift
        lines[key] = state
        return evicted
