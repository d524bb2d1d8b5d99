"""A resident warp's runtime state: its stream, the next instruction, its scoreboard and its stall state."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..isa.inst import WarpInst
from ..stats.counters import LONG_SCOREBOARD, NO_INSTRUCTION, REASONS, SHORT_SCOREBOARD
from ..stats.counters import WAIT as WAIT_REASON
from .timing import BOARD_BITS, BOARD_MASK, LONG, SHORT, WAIT, OpTiming

if TYPE_CHECKING:
    from .sm import Block
    from .subpartition import SubPartition


def accumulating_operands_ready(regs: dict[str, int], inst: WarpInst, earliest: int) -> tuple[int, int]:
    """As operands_ready, for a warpgroup MMA: its accumulators (the registers it writes, read or not) are left out,
    since the tensor core orders the writes to them itself (wgmma.mma_async chains on its accumulators without a
    wait; reading them outside the MMA waits for them as usual)."""
    ready, code = earliest, 0
    dst = inst.dst
    for name in inst.src:
        if name in dst:
            continue
        entry = regs.get(name)
        if entry is not None and entry >> BOARD_BITS > ready:
            ready, code = entry >> BOARD_BITS, entry & BOARD_MASK
    return ready, board_reason(code)


def operands_ready(regs: dict[str, int], inst: WarpInst, earliest: int) -> tuple[int, int]:
    """(cycle `inst`'s sources and destinations are all ready, no earlier than `earliest`; the stall reason of
    the scoreboard of the register that decides it, as its code in REASONS). Destinations count too: a write must
    wait for a pending write. `regs`: the warp's scoreboard, register -> ready cycle << BOARD_BITS | the
    scoreboard's index in BOARDS."""
    ready, code = earliest, 0
    for name in inst.src:
        entry = regs.get(name)
        if entry is not None and entry >> BOARD_BITS > ready:
            ready, code = entry >> BOARD_BITS, entry & BOARD_MASK
    for name in inst.dst:
        entry = regs.get(name)
        if entry is not None and entry >> BOARD_BITS > ready:
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
        self.regs: dict[str, int] = {}  # register -> cycle its value is ready << BOARD_BITS | scoreboard (BOARDS)
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
        entry = self.regs.get(name)
        if entry is None:
            return None
        return entry >> BOARD_BITS, board_name(entry & BOARD_MASK)

    def __repr__(self) -> str:
        return f"Warp(gid={self.gid}, slot={self.slot}, reason={REASONS[self.reason]})"
