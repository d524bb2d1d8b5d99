"""A table from cache lines to one non-negative int each, in two flat arrays of native ints (librt's vec): open
addressing with linear probing, the way the MSHRs and the L2 slices keep their lines in flight (the entry packs a
cycle, a level and a sector mask) and a highly associative cache finds a line's way. `keep_after` drops, in one
pass, the entries whose cycle (the entry shifted down) is no later than a floor, and the table then grows or shrinks
to suit what is left; `remove` drops one line (a cache's evicted one), moving back the entries that probed past it.
"""

from __future__ import annotations

from typing import Final

from librt.vecs import vec
from mypy_extensions import i64

MISSING: Final = -1  # what `get` returns for a line not in the table (entries are never negative)
FREE: Final = -1  # a slot without a line (line numbers are never negative)
SMALLEST: Final = 64  # slots at least
KEEP_AGAIN: Final = 64  # entries beyond twice what a pass kept at which keep_after's caller passes again


def _slots_for(entries: int) -> int:
    """A power of two of at least SMALLEST slots, at most half of them in use."""
    slots = SMALLEST
    while slots < 2 * entries + 2:
        slots *= 2
    return slots


class LineTable:
    def __init__(self, entries: int = 0):
        slots = _slots_for(entries)
        self.lines: vec[i64] = vec[i64]([FREE] * slots)
        self.values: vec[i64] = vec[i64]([0] * slots)
        self.mask: i64 = slots - 1
        self.count: i64 = 0

    def __len__(self) -> int:
        return self.count

    def home(self, line: i64) -> i64:
        """The slot `line` is looked for from. Fibonacci hashing of the low 31 bits (the product stays below 2**63:
        no native overflow), the rest folded in: consecutive lines land far apart, so runs of neighbouring lines do
        not pile up into long probes."""
        return ((line & 0x7FFFFFFF) * 0x9E3779B1 >> 24 ^ line >> 31) & self.mask

    def slot(self, line: i64) -> i64:
        """Where `line` is, or the free slot where it would go."""
        lines = self.lines
        mask = self.mask
        at = ((line & 0x7FFFFFFF) * 0x9E3779B1 >> 24 ^ line >> 31) & mask  # home(line), written out: no call
        while True:
            held = lines[at]
            if held == line or held == FREE:
                return at
            at = (at + 1) & mask

    def remove(self, line: i64) -> None:
        """Drop `line`'s entry, if it has one: each entry after it in the run that probed past its slot moves back
        into the hole (backward-shift deletion), so every entry stays reachable from its home without tombstones."""
        lines, values, mask = self.lines, self.values, self.mask
        hole = self.slot(line)
        if lines[hole] == FREE:
            return
        at = hole
        while True:
            at = (at + 1) & mask
            held = lines[at]
            if held == FREE:
                break
            if (at - self.home(held)) & mask >= (at - hole) & mask:  # its home is not between the hole and it
                lines[hole] = held
                values[hole] = values[at]
                hole = at
        lines[hole] = FREE
        self.count -= 1

    def get(self, line: int) -> int:
        """`line`'s entry, MISSING if it has none."""
        return self.entry_at(self.slot(line))

    def entry_at(self, at: i64) -> i64:
        """The entry at slot `at` (slot's answer), MISSING if that slot is free."""
        if self.lines[at] == FREE:
            return MISSING
        return self.values[at]

    def put(self, line: int, value: int) -> None:
        """Set `line`'s entry to `value` (>= 0)."""
        self.put_at(self.slot(line), line, value)

    def put_at(self, at: i64, line: i64, value: i64) -> None:
        """Set `line`'s entry to `value` (>= 0), `at` being slot(line) with the table unchanged since: a read and a
        write of one line find its slot once."""
        if self.lines[at] == FREE:
            if 2 * (self.count + 1) > len(self.lines):
                self.rebuild(_slots_for(self.count + 1), -1, 0)
                at = self.slot(line)
            self.lines[at] = line
            self.count += 1
        self.values[at] = value

    def keep_after(self, floor: int, shift: int, again: int = KEEP_AGAIN) -> int:
        """Drop the entries whose value >> shift is no later than `floor`; the size at which to drop again: twice
        what is left, and `again` (the table stays small, in the host's caches, and the passes stay rare). The
        table is sized to reach that size without growing on the way."""
        self.rebuild(0, floor, shift, again)
        return 2 * self.count + again

    def rebuild(self, slots: i64, floor: i64, shift: i64, again: i64 = 0) -> None:
        """Re-place the entries into `slots` slots, keeping those whose value >> shift is later than `floor` (slots
        0: as many as twice what is kept, and `again` entries besides, need)."""
        old_lines, old_values = self.lines, self.values
        kept: i64 = 0
        for at in range(len(old_lines)):
            if old_lines[at] != FREE and old_values[at] >> shift > floor:
                kept += 1
        if slots == 0:
            slots = _slots_for(2 * kept + again)
        self.lines = vec[i64]([FREE] * slots)
        self.values = vec[i64]([0] * slots)
        self.mask = slots - 1
        self.count = 0
        lines, values = self.lines, self.values
        for at in range(len(old_lines)):
            line = old_lines[at]
            if line != FREE and old_values[at] >> shift > floor:
                to = self.slot(line)
                lines[to] = line
                values[to] = old_values[at]
                self.count += 1
