"""A sectored, set-associative cache with LRU replacement (state only; timing lives in the hierarchy)."""

from __future__ import annotations

from collections import OrderedDict


class SectoredCache:
    """Lines of `line_bytes` made of `sector_bytes` sectors; a line is allocated on first fill and each sector is
    valid once filled. Addresses are sector numbers (byte address // sector_bytes)."""

    def __init__(self, size_bytes: int, line_bytes: int, sector_bytes: int, associativity: int):
        self.sectors_per_line = line_bytes // sector_bytes
        lines = max(1, size_bytes // line_bytes)
        self.ways = min(associativity, lines)
        self.sets = max(1, lines // self.ways)
        self.capacity_bytes = self.sets * self.ways * line_bytes
        self._sets: list[OrderedDict] = [OrderedDict() for _ in range(self.sets)]  # line -> [valid, dirty] masks

    def _locate(self, sector: int):
        line, index = divmod(sector, self.sectors_per_line)
        return self._sets[line % self.sets], line, 1 << index

    def probe(self, sector: int) -> bool:
        """Whether the sector is present; a hit makes its line most recently used."""
        lines, line, bit = self._locate(sector)
        state = lines.get(line)
        if state is not None and state[0] & bit:
            lines.move_to_end(line)
            return True
        return False

    def fill(self, sector: int, dirty: bool = False) -> list[int]:
        """Make the sector present (allocating its line, evicting the LRU one); return the evicted line's
        dirty sector numbers (for write-back)."""
        lines, line, bit = self._locate(sector)
        state = lines.get(line)
        evicted: list[int] = []
        if state is None:
            if len(lines) >= self.ways:
                old_line, (valid, dirty_mask) = lines.popitem(last=False)
                if dirty_mask:
                    base = old_line * self.sectors_per_line
                    evicted = [base + i for i in range(self.sectors_per_line) if dirty_mask >> i & 1]
            state = lines[line] = [0, 0]
        else:
            lines.move_to_end(line)
        state[0] |= bit
        if dirty:
            state[1] |= bit
        return evicted

    def update_if_present(self, sector: int) -> bool:
        """A write-through store: refresh the sector if present (no allocation)."""
        lines, line, bit = self._locate(sector)
        state = lines.get(line)
        return state is not None and bool(state[0] & bit)
