"""The L1TEX coalescer: a warp-level global or local access as the cache lines it touches and the 32-byte sectors
wanted in each (and for an atomic, how many of its lanes update one address in each line); and where per-thread
local memory lies (interleaved by lane, as the hardware maps it)."""

from __future__ import annotations

from typing import Any, Final

import numpy as np

from ..analytic.coalesce import sector_list
from ..isa.inst import WarpInst

LOCAL_BASE: Final = 1 << 44  # where per-thread local memory is mapped
LOCAL_REGION: Final = 1 << 24  # bytes of local memory address space per warp
MEMO_LIMIT: Final = 65536  # access patterns remembered before the memo starts over


def local_addresses(inst: WarpInst) -> Any:
    """A local access's lanes' global addresses: each lane's 4-byte words interleaved with the other lanes'."""
    assert inst.warp is not None, "an instruction with addresses names its warp"
    lane = np.arange(len(inst.addrs), dtype=np.int64)
    a = inst.addrs
    return LOCAL_BASE + inst.warp * LOCAL_REGION + (a // 4) * 128 + lane * 4 + a % 4


def hottest_address_per_line(addrs: Any, line_bytes: int) -> dict[int, int]:
    """Line -> the largest number of the lanes (their addresses, `addrs`) that update one address in it."""
    if not addrs.size:
        return {}
    unique, lanes = np.unique(addrs, return_counts=True)
    hottest: dict[int, int] = {}
    for address, n in zip(unique.tolist(), lanes.tolist()):
        line = address // line_bytes
        if n > hottest.get(line, 0):
            hottest[line] = n
    return hottest


class Coalescer:
    def __init__(self, line_bytes: int, sector: int):
        self.line_bytes = line_bytes
        self.sector = sector
        self.sectors_per_line = line_bytes // sector
        self.line_bits: int = line_bytes.bit_length()  # a memo key's low bits: the first lane's offset in its line
        # by lane pattern (a shared bytes object, its hash kept), then by width, mask and offset in the line packed
        # into one int: no tuple made or hashed per access
        self.memo: dict[bytes, dict[int, tuple[tuple[tuple[int, int], ...], int]]] = {}
        self.memo_size = 0

    def lines(self, base: int, offsets: bytes, width: int, mask: int) -> tuple[int, tuple[tuple[int, int], ...], int]:
        """(lane 0's line, ((line relative to it, mask of the sectors wanted in it), ...), number of sectors) for
        one warp-level access: lane 0 at `base`, the lanes' offsets from it as int64 bytes. The pattern relative to
        the first lane's line is computed once per (width, mask, offset in the line, lane offsets) and shared, so
        an access allocates nothing for it."""
        line_bytes = self.line_bytes
        base_line = base // line_bytes
        offset = base % line_bytes  # (a product this large would take the slow path of a compiled int multiply)
        by_pattern = self.memo.get(offsets)
        if by_pattern is None:
            by_pattern = self.memo[offsets] = {}
        key = (mask << 16 | width) << self.line_bits | offset
        pattern = by_pattern.get(key)
        if pattern is None:
            if self.memo_size > MEMO_LIMIT:
                self.memo.clear()
                by_pattern = self.memo[offsets] = {}
                self.memo_size = 0
            self.memo_size += 1
            sectors = sector_list(np.frombuffer(offsets, dtype=np.int64) + offset, width, mask, self.sector)
            per_line = self.sectors_per_line
            by_line: dict[int, int] = {}
            for sec in sectors:
                line = sec // per_line
                by_line[line] = by_line.get(line, 0) | (1 << (sec - line * per_line))
            pattern = by_pattern[key] = (tuple(by_line.items()), len(sectors))
        relative, count = pattern
        return base_line, relative, count
