"""A resident warp's runtime state: its stream, the next instruction, its scoreboard and its stall state."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from librt import vecs
from librt.vecs import vec
from mypy_extensions import i64

from ..isa.inst import REGISTER_SLOTS, WarpInst
from ..stats.counters import LONG_SCOREBOARD, NO_INSTRUCTION, REASONS, SHORT_SCOREBOARD
from ..stats.counters import WAIT as WAIT_REASON
from .timing import BOARD_BITS, BOARD_MASK, LONG, SHORT, WAIT, OpTiming

if TYPE_CHECKING:
    from .sm import Block
    from .subpartition import SubPartition


class Scoreboard:
    """A warp's registers' pending writes, by register slot (gpusim.isa.inst.register_slot): the cycle the value is
    ready << BOARD_BITS | the scoreboard it waits on (its index in BOARDS); 0 where nothing was written. An array of
    native ints (librt's vec), read and written without an object per value; it grows when a register named after
    the warp started is written."""

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: vec[i64] = vec[i64]([0] * len(REGISTER_SLOTS))

    def write(self, slots: vec[i64], entry: int) -> None:
        """Registers `slots` are pending until `entry` says."""
        entries = self.entries
        value: i64 = entry
        for slot in slots:
            if slot >= len(entries):
                entries = self.grow(slot)
            entries[slot] = value

    def grow(self, slot: i64) -> vec[i64]:
        size: i64 = len(REGISTER_SLOTS)
        if size <= slot:
            size = slot + 1
        entries = self.entries
        entries = vecs.extend(entries, [0] * (size - len(entries)))
        self.entries = entries
        return entries

    def latest(self) -> int:
        """The cycle the last pending write is done (0: none)."""
        latest: i64 = 0
        for entry in self.entries:
            if entry >> BOARD_BITS > latest:
                latest = entry >> BOARD_BITS
        return latest

    def entry(self, name: str) -> int:
        """Register `name`'s entry (0: nothing was written to it)."""
        slot = REGISTER_SLOTS.get(name)
        entries = self.entries
        if slot is None or slot >= len(entries):
            return 0
        return entries[slot]


def accumulating_operands_ready(board: Scoreboard, inst: WarpInst, earliest: int) -> tuple[int, int]:
    """As operands_ready, for a warpgroup MMA: its accumulators (the registers it writes, read or not) are left out,
    since the tensor core orders the writes to them itself (wgmma.mma_async chains on its accumulators without a
    wait; reading them outside the MMA waits for them as usual)."""
    ready: i64 = earliest
    code: i64 = 0
    entries = board.entries
    size = len(entries)
    dst = inst.dst_slots
    for slot in inst.src_slots:
        if slot in dst or slot >= size:
            continue
        entry = entries[slot]
        if entry >> BOARD_BITS > ready:
            ready, code = entry >> BOARD_BITS, entry & BOARD_MASK
    return ready, board_reason(code)


def operands_ready(board: Scoreboard, inst: WarpInst, earliest: int) -> tuple[int, int]:
    """(cycle `inst`'s sources and destinations are all ready, no earlier than `earliest`; the stall reason of
    the scoreboard of the register that decides it, as its code in REASONS). Destinations count too: a write must
    wait for a pending write. `board`: the warp's scoreboard."""
    ready: i64 = earliest
    code: i64 = 0
    entries = board.entries
    size = len(entries)
    for slot in inst.src_slots:
        if slot < size:
            entry = entries[slot]
            if entry >> BOARD_BITS > ready:
                ready, code = entry >> BOARD_BITS, entry & BOARD_MASK
    for slot in inst.dst_slots:
        if slot < size:
            entry = entries[slot]
            if entry >> BOARD_BITS > ready:
                ready, code = entry >> BOARD_BITS, entry & BOARD_MASK
    return ready, board_reason(code)


def board_reason(code: int) -> int:
    """The stall reason (its code in REASONS) of the scoreboard BOARDS[code]."""
    return WAIT_REASON if code == 0 else SHORT_SCOREBOARD if code == 1 else LONG_SCOREBOARD


def board_name(code: int) -> str:
    """The scoreboard BOARDS[code] names (compiled: a chain of comparisons on interned constants, where indexing
    the Final tuple would build it anew at each use)."""
    return WAIT if code == 0 else SHORT if code == 1 else LONG


def scoreboard_entry(ready: int, board_code: int) -> int:
    """A scoreboard value: the cycle a register is ready and the scoreboard it waits on (see operands_ready)."""
    return ready << BOARD_BITS | board_code


NO_TIMING = OpTiming(None, 1, 1, "none", "misc", False, False, False, "misc", False)  # before the first fetch


class Warp:
    """One warp on one sub-partition. `reason`/`since` say what it has been doing since when; the interval
    is added to the SM's counters when the state changes (never cycle by cycle)."""

    __slots__ = ("gid", "block", "index", "sp", "slot", "age", "stream", "inst", "timing", "regs", "reason",
                 "since", "store_done", "finished", "async_state", "block_barriers")

    def __init__(self, gid: int, block: Block, index: int, sp: SubPartition, slot: int, age: int, stream: Any):
        self.gid = gid  # global warp id: block * warps_per_block + index
        self.block = block
        self.index = index  # warp index within its block
        self.sp = sp
        self.slot = slot  # warp slot in the SM (the sub-partition is slot % sub_partitions)
        self.age = age  # launch order across the GPU
        self.stream = stream
        bind = getattr(stream, "bind", None)
        self.regs = Scoreboard()  # its registers' pending writes
        if bind is not None:  # independent thread scheduling picks paths by register readiness
            bind(self.regs)
        self.inst: WarpInst | None = None  # the next instruction, fetched but not issued
        self.timing: OpTiming = NO_TIMING
        self.reason: int = NO_INSTRUCTION  # its state: a code in REASONS
        self.since = 0
        self.store_done = 0  # cycle its last store completes (an exiting warp drains until then)
        self.finished = False
        self.async_state: Any = None  # its copies, wgmma groups and mbarrier waits (gpusim.engine.asynchrony)
        self.block_barriers: Any = None  # on a block's first warp: the block's mbarriers (gpusim.engine.asynchrony)

    def operands_ready(self, now: int) -> tuple[int, int]:
        """(cycle the next instruction can issue, no earlier than `now`: its sources and destinations ready and
        its register-bank conflicts read; the stall reason of the scoreboard that decides it, a code in REASONS).
        For a warp leaving a barrier or an mbarrier wait; the conflict cycles are counted on its sub-partition."""
        inst = self.inst
        assert inst is not None, "a warp without a next instruction has no operands to wait for"
        if self.timing.chains:
            ready, board = accumulating_operands_ready(self.regs, inst, now)
        else:
            ready, board = operands_ready(self.regs, inst, now)
        if inst.bank_conflicts:
            ready += self.sp.operand_collector_cycles(inst)
        return ready, board

    def register_ready(self, name: str) -> tuple[int, str] | None:
        """(cycle register `name`'s pending value is ready, the scoreboard a reader waits on), None if nothing was
        written to it: the scoreboard as an observer reads it."""
        entry = self.regs.entry(name)
        if not entry:
            return None
        return entry >> BOARD_BITS, board_name(entry & BOARD_MASK)

    def __repr__(self) -> str:
        return f"Warp(gid={self.gid}, slot={self.slot}, reason={REASONS[self.reason]})"
