"""An L2 line's place and its tags under an access: which slice and DRAM channel serve a line, how an access
changes the tags of a sectored, write-back L2 (the L2's own, and its shadow's in a sampled run)."""

from __future__ import annotations

from .cache import SectoredCache


def line_hash(line: int) -> int:
    """Spread consecutive lines over slices and channels (an XOR-fold of the line number)."""
    return line ^ (line >> 7) ^ (line >> 13)


def update_tags(cache: SectoredCache, line: int, mask: int, missing: int, write: bool, atomic: int) -> int:
    """An L2 access's change to the tags (the L2's or its shadow's): a plain write makes its sectors present and
    dirty with no read; a read or an atomic fills the `missing` sectors, dirty where it writes. The dirty-sector
    mask of the line it evicted (0: none)."""
    if write and not atomic:  # write-back L2; a full-sector write needs no read from DRAM
        return cache.fill(line, mask, dirty=True)
    if missing:
        evicted = cache.fill(line, missing, dirty=write)
        if write:
            cache.fill(line, mask, dirty=True)
        return evicted
    return cache.fill(line, mask, dirty=True) if write else 0

