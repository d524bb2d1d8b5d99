"""Blackwell's tcgen05 in YAML workloads: tensor memory (TMEM) and the MMA that accumulates into it, per SM.

What is modelled (numbers from the arch file's pipelines.tensor.tensor_memory, each with its source there):

* Allocation. `UTCATOMSWS.FIND_AND_SET` (tcgen05.alloc) takes `columns` of the SM's tensor memory (a power of two,
  at least allocation_columns, at most all of them), aligned to its size, for the issuing warp's block;
  `UTCATOMSWS.AND` (tcgen05.dealloc) gives the block's latest allocation of that size back. An allocation that does
  not fit waits, as ptxas's retry loop around UTCATOMSWS does (NANOSLEEP back-off; Nsight would show `sleeping`,
  which gpusim has no reason for: the wait is counted as `misc`), until another block frees columns; the waiting
  warps are served in order. A block that asks for more than the SM has, or for more than it could ever get while
  holding what it holds, is a one-line error, as is a block that exits holding columns (CUDA requires the
  dealloc). Occupancy is not limited by tensor memory (CUDA's occupancy calculator does not count it): blocks are
  resident and wait at their allocation, as on the hardware. tcgen05.relinquish_alloc_permit has no SASS of its
  own (ptxas folds it into the surrounding synchronisation) and is not modelled.
* MMA. `UTCHMMA` / `UTCQMMA` / `UTCIMMA` / `UTCOMMA` with an MxNxK modifier (`UTCHMMA.128X256X16.F32`) is one
  instruction of one warp for the whole CTA (the issuing warp only spends its issue slot). It runs on the SM's
  tensor core, the four sub-partitions' tensor pipes together, in issue order with every other tcgen05 MMA and
  copy of the SM: its shape padded to the core's step (mma_tile_m x mma_tile_n) at the part's dense rate for its
  input precision (gpusim.isa.tensor.umma_cycles); warp-level MMA (HMMA) of any sub-partition waits for it, and it
  for them. Its accumulator is in tensor memory: the block must hold columns. It completes mma_latency cycles after
  its last step. With `.2CTA` (cta_group::2) it runs on the tensor cores of both SMs of the CTA pair (ranks 2r and
  2r + 1 of the cluster) at once, each doing half the rows. The queue has no depth limit: a B200 takes hundreds of
  MMAs from one warp before a commit (utchmma.md, in the arch file's sources).
* `UTCCP` (tcgen05.cp) copies `bytes` of shared memory to tensor memory through the same queue at
  copy_bytes_per_clock.
* `UTCBAR` (tcgen05.commit) arrives once on the mbarrier `barrier` (with `multicast`: on that mbarrier of each
  block of the CTA pair it names) when every tcgen05 MMA and copy the warp issued before it has completed: the
  existing mbarrier machinery (gpusim.engine.asynchrony) carries the arrival, so SYNCS.PHASECHK waits for it.
* `LDTM` / `STTM` (tcgen05.ld / .st) move a warp's 32 lanes through the chunk of tensor memory its warp may reach
  (warp w: lanes 32 x (w % 4) to + 31): each chunk serves one transfer at a time at chunk_bytes_per_clock
  (tmem_columns(opcode) x 128 bytes), and the data is there access_latency cycles after the transfer. An LDTM's
  registers are ready then (tcgen05.wait::ld is that register scoreboard: the stall is `short_scoreboard`, the
  reason Nsight gives a variable-latency dependency outside L1TEX); `FENCE.VIEW.ASYNC.T` (tcgen05.wait::st) waits
  for the warp's STTMs, also as `short_scoreboard`. A warp whose chunk is busy cannot hand over its next transfer:
  it waits for the chunk as `math_pipe_throttle` (the chunk is an execution resource; the LDTM does not queue in
  the MIO: a B200 runs LDTM beside LDS and SHFL without slowing them, ldtm.md).

Not modelled: the tensor memory's contents and addresses (columns are counted, not located per MMA), the A operand
read from tensor memory (it times as from shared memory), sparsity metadata, block scaling, collectors.
"""

from __future__ import annotations

from typing import Any

from ..isa.tensor import umma_cycles
from ..errors import GpusimError
from ..isa.opcodes import tmem_columns
from ..stats import counters as reasons
from . import clusters

SHORT = "short_scoreboard"  # the scoreboard tcgen05.ld results wait on (timing.BOARDS)
PARKED = -1  # as gpusim.engine.asynchrony.PARKED: the warp waits for tensor-memory columns
_TENSOR_PIPE = 5  # gpusim.engine.timing.PIPES.index("tensor"): the sub-partitions' warp-level MMA pipes


class TensorCore:
    """One SM's tensor memory (which allocation units are taken, by which block) and tcgen05 queue."""

    __slots__ = ("spec", "units", "unit_columns", "used", "held", "waiters", "free_at", "chunk_free", "cycles")

    def __init__(self, spec: Any, chunks: int):
        self.spec = spec  # pipelines.tensor.tensor_memory
        self.unit_columns = spec.allocation_columns
        self.units = spec.columns // spec.allocation_columns
        self.used = 0  # bitmap of allocation units taken
        self.held: dict[int, list[tuple[int, int]]] = {}  # block index -> its allocations (first unit, units)
        self.waiters: list[tuple[Any, int]] = []  # warps waiting for columns, oldest first: (warp, units)
        self.free_at = 0  # the cycle the tensor core finishes what it has been given
        self.chunk_free = [0] * chunks  # per lane chunk: the cycle it finishes its LDTM / STTM transfers
        self.cycles: dict[str, int] = {}  # opcode -> tensor-core cycles of one MMA

    def take(self, block: int, units: int) -> bool:
        """Allocate `units` aligned units for `block` if they are free."""
        mask = (1 << units) - 1
        for first in range(0, self.units, units):
            if not self.used & mask << first:
                self.used |= mask << first
                self.held.setdefault(block, []).append((first, units))
                return True
        return False

    def holding(self, block: int) -> int:
        return sum(units for _first, units in self.held.get(block, ())) * self.unit_columns


def _core(sm: Any) -> TensorCore:
    core = sm.tensor_memory
    if core is None:
        memory = sm.spec.pipelines.tensor.tensor_memory
        if memory is None:
            raise GpusimError(f"{sm.spec.name} has no tensor memory (pipelines.tensor.tensor_memory): tcgen05 "
                              f"instructions need it")
        core = sm.tensor_memory = TensorCore(memory, max(1, memory.lanes // 32))
    return core


# --- allocation ---------------------------------------------------------------------------------------------------

def allocate(sp: Any, warp: Any, inst: Any) -> int:
    """UTCATOMSWS.FIND_AND_SET: 0, or PARKED until another block frees enough columns."""
    core = _core(sp.sm)
    columns, block = inst.operands.columns, warp.block.index
    total = core.units * core.unit_columns
    if columns < core.unit_columns or columns > total or columns & (columns - 1):
        raise GpusimError(f"{inst.info.opcode} asks for {columns} tensor-memory columns: expected a power of two "
                          f"from {core.unit_columns} to {total} (the SM's)")
    units = columns // core.unit_columns
    if core.take(block, units):
        return 0
    held = core.holding(block)
    if held + columns > total:
        raise GpusimError(f"block {block} asks for {columns} tensor-memory columns while it holds {held} of the "
                          f"SM's {total}: it can never get them (free them first)")
    core.waiters.append((warp, units))
    sp.hold_reason = reasons.MISC
    return PARKED


def free(sp: Any, warp: Any, inst: Any, now: int) -> int:
    """UTCATOMSWS.AND: the block's latest allocation of `columns` goes back; waiting warps that now fit go on."""
    core = _core(sp.sm)
    columns, block = inst.operands.columns, warp.block.index
    mine = core.held.get(block, [])
    units = columns // core.unit_columns
    index = next((i for i in range(len(mine) - 1, -1, -1) if mine[i][1] == units and
                  units * core.unit_columns == columns), -1)
    if index < 0:
        raise GpusimError(f"{inst.info.opcode} frees {columns} tensor-memory columns that block {block} does not "
                          f"hold (it holds {core.holding(block)} in allocations of "
                          f"{sorted({u * core.unit_columns for _f, u in mine}) or 'none'})")
    first, units = mine.pop(index)
    if not mine:
        del core.held[block]
    core.used &= ~((1 << units) - 1 << first)
    waiting, core.waiters = core.waiters, []
    for waiter, wanted in waiting:
        if core.take(waiter.block.index, wanted):
            clusters.wake(waiter, now + 1, reasons.MISC)
        else:
            core.waiters.append((waiter, wanted))
    return 0


def cancel_wait(warp: Any) -> bool:
    """A warp waiting for columns whose program ended right after the allocation: it waits no more."""
    core = warp.sp.sm.tensor_memory
    if core is None:
        return False
    for i, (waiter, _units) in enumerate(core.waiters):
        if waiter is warp:
            del core.waiters[i]
            return True
    return False


def check_released(block: Any, sm: Any) -> None:
    """A block that has exited must have freed its tensor memory (CUDA: dealloc before exit)."""
    core = sm.tensor_memory
    if core is not None and block.index in core.held:
        raise GpusimError(f"block {block.index} exited holding {core.holding(block.index)} tensor-memory columns: "
                          f"free them (UTCATOMSWS.AND with 'columns') before its warps exit")


# --- MMA, copies, commits -------------------------------------------------------------------------------------------

def mma(sp: Any, warp: Any, inst: Any, now: int) -> int:
    """A tcgen05 MMA (or, with `copy_bytes`, a UTCCP) into the SM's tensor-core queue (both SMs' with .2CTA): the
    cycle it completes."""
    sm, opcode = sp.sm, inst.info.opcode
    core = _core(sm)
    if warp.block.index not in core.held:
        raise GpusimError(f"{opcode} accumulates in tensor memory, but block {warp.block.index} holds none: allocate "
                          f"it first (UTCATOMSWS.FIND_AND_SET with 'columns')")
    cycles = core.cycles.get(opcode)
    if cycles is None:
        cycles = core.cycles[opcode] = max(1, round(umma_cycles(sm.spec, opcode)))
    sms = [sm]
    if "2CTA" in opcode.split(".")[1:]:
        sms.append(_pair(sp, warp, opcode))
    return _run(sms, now, cycles) + core.spec.mma_latency


def copy(sp: Any, warp: Any, inst: Any, now: int) -> int:
    """UTCCP: `bytes` of shared memory into tensor memory, in order with the MMAs: the cycle it completes."""
    core = _core(sp.sm)
    cycles = max(1, -(-inst.operands.bytes // core.spec.copy_bytes_per_clock))
    return _run([sp.sm], now, cycles) + core.spec.access_latency


def _run(sms: list, now: int, cycles: int) -> int:
    """Queue `cycles` of work on the tensor cores of `sms` (together): the cycle it ends. Warp-level MMA of their
    sub-partitions waits for it, and it for them."""
    start = now
    for sm in sms:
        core = _core(sm)
        if core.free_at > start:
            start = core.free_at
        for sp in sm.sps:
            if sp.pipe_free[_TENSOR_PIPE] > start:
                start = sp.pipe_free[_TENSOR_PIPE]
    end = start + cycles
    for sm in sms:
        sm.tensor_memory.free_at = end
        for sp in sm.sps:
            sp.pipe_free[_TENSOR_PIPE] = end
    return end


def _pair(sp: Any, warp: Any, opcode: str) -> Any:
    """The SM of the other block of the warp's CTA pair (cluster ranks 2r, 2r + 1)."""
    state = clusters.attach(sp.sm.gpu)
    _cluster, rank = state.cluster_of(warp)
    _block, sm, _own = state.peer(warp, rank ^ 1, f"{opcode} (cta_group::2)")
    _core(sm)
    return sm


# --- loads and stores -----------------------------------------------------------------------------------------------

def transfer(sp: Any, warp: Any, inst: Any, now: int) -> tuple[int, int]:
    """An LDTM / STTM through the warp's lane chunk: (the cycle its data is there, the cycle the chunk took it)."""
    core = _core(sp.sm)
    chunk = warp.index % len(core.chunk_free)
    cycles = core.cycles.get(inst.info.opcode)
    if cycles is None:
        cycles = core.cycles[inst.info.opcode] = max(1, -(-tmem_columns(inst.info.opcode) * 128 //
                                                          core.spec.chunk_bytes_per_clock))
    start = core.chunk_free[chunk]
    if start < now:
        start = now
    core.chunk_free[chunk] = start + cycles
    return start + cycles + core.spec.access_latency, start
