"""Asynchronous instructions of YAML workloads, carried out when they issue (SubPartition.issue calls `issue`).

* cp.async (Ampere and later): `LDGSTS` reads global memory like a load (the memory model's access, through
  L1 / L2 / DRAM; `.BYPASS` skips the L1) and writes shared memory, with no register result: the warp goes on.
  `LDGDEPBAR` commits the warp's copies since the last commit as a group; `DEPBAR` (DEPBAR.LE SB0, N) waits until
  every group but the N most recent has landed. The wait is Nsight's `long_scoreboard`: DEPBAR waits on the
  scoreboard (SB0) the L1TEX copies count down, and long_scoreboard is a scoreboard dependency on an L1TEX
  (global) operation.
* TMA and bulk copies (Hopper and later): `UTMALDG` / `UBLKCP` copy a tile (rows of bytes, a pitch apart) from
  global memory to shared memory without registers, reading L2 through the SM's port (the memory model's
  `bulk_copy`), one tile per active lane; the copy completes its bytes on an mbarrier.
* mbarriers, per block and by name: `SYNCS.EXCH` initialises one with its arrivals per phase; `SYNCS.ARRIVE`
  arrives (one arrival per active lane; with `bytes`, each expects that many transaction bytes); a phase
  completes when its arrivals are in and its expected bytes have landed. `SYNCS.PHASECHK` (mbarrier.try_wait,
  its retry loop as one instruction) waits for a phase: a warp's n-th wait on a barrier waits for phase n (as a
  pipeline's consumer waits on each stage once per round). Nsight has no reason of its own for it: the wait is
  counted as `long_scoreboard` (the try-wait's predicate comes back through a scoreboard, like a load's).
* warpgroup MMA (Hopper): `HGMMA` (wgmma.mma_async) takes the tensor pipe for its interval and the warp goes on;
  its accumulators are ready a pipe latency after the interval, and a following HGMMA on the same accumulators
  does not wait for them (gpusim.engine.warp.accumulating_operands_ready). An HGMMA with `.GSB0` commits the
  warp's MMAs since the last commit as a group (wgmma.commit_group); `WARPGROUP.DEPBAR` (wgmma.wait_group N)
  waits until every group but the N most recent is done, counted as `wait` (the stall the engine gives any wait
  on a tensor-pipe result); `WARPGROUP.ARRIVE` (wgmma.fence) only takes its issue slot. Each warp of the
  warpgroup runs its quarter of the MMA on its own sub-partition's tensor pipe; their start is not aligned.

Completion times are known when a copy or an MMA issues (the memory model and the pipe say when), so a wait
knows at once how long its warp stalls, except an mbarrier wait on a phase that still lacks arrivals or bytes:
that warp is parked with the mbarrier and woken when the event that completes the phase issues. A block whose
live warps all wait (on mbarriers or at BAR.SYNC) with a phase incomplete can never go on: a one-line error.

Across a thread block cluster (gpusim.engine.clusters): a bulk copy with `multicast` (a bit per rank) reads L2
once and lands its bytes in the shared memory, and on the mbarrier of that name, of each block it names; a
SYNCS.ARRIVE with `peer` arrives on that block's mbarrier, one SM-to-SM latency later. A block whose warps all
wait may then be waiting for another block of its cluster: the check that refuses a block that can never go on
looks at the whole cluster. UCGABAR_ARV / UCGABAR_WAIT (the cluster barrier) are carried out there.

* tcgen05 (Blackwell): tensor-memory allocation, MMA into tensor memory, its commit to an mbarrier (`UTCBAR`, one
  arrival when the warp's earlier tcgen05 MMAs and copies have completed), copies and loads / stores: their model
  is gpusim.engine.tensor_memory; this module hands them over and keeps each warp's latest tcgen05 completion.

A YAML workload that uses one of these on an architecture without it is refused (opcodes.refusal) at its first
issue; traces (no operands on their instructions) keep their recorded instruction stream and only the warning.
"""

from __future__ import annotations

from typing import Any

from ..isa.inst import WarpInst
from ..isa.tensor import mma_precision
from ..errors import GpusimError
from ..isa.opcodes import (BULK, CLUSTER_ARRIVE, CLUSTER_WAIT, COMMIT, COPY, MBARRIER_ARRIVE, MBARRIER_INIT,
                                MBARRIER_WAIT, MMA, TMEM_ALLOC, TMEM_COPY, TMEM_FREE, TMEM_LOAD, TMEM_STORE,
                                TMEM_STORE_WAIT, UMMA, UMMA_COMMIT, WAIT_COPIES, WAIT_MMA, WARPS_PER_WARPGROUP)
from ..stats.counters import LONG_SCOREBOARD, MATH_PIPE_THROTTLE, SHORT_SCOREBOARD, WAIT
from . import clusters, tensor_memory
from .timing import BOARDS, OpTiming
from .warp import Warp, scoreboard_entry

PARKED = -1  # `issue`'s answer for a warp that waits on an mbarrier phase not yet complete


class AsyncState:
    """One warp's asynchronous work: completion cycles of its uncommitted copies and of each committed group
    (cp.async and wgmma apart), how many times it has waited on each mbarrier, and when its tcgen05 MMAs and
    copies and its tensor-memory stores complete."""

    __slots__ = ("copy_open", "copy_groups", "mma_open", "mma_groups", "waits", "parked_on", "tcgen05_done",
                 "tmem_stored")

    def __init__(self) -> None:
        self.copy_open = -1  # latest completion among copies not yet committed (-1: none)
        self.copy_groups: list[int] = []  # each committed group's completion, oldest first
        self.mma_open = -1
        self.mma_groups: list[int] = []
        self.waits: dict[str, int] = {}  # mbarrier name -> waits so far (the next wait's phase)
        self.parked_on: MBarrier | None = None
        self.tcgen05_done = -1  # the latest completion among its tcgen05 MMAs and copies (-1: none)
        self.tmem_stored = 0  # the cycle its STTMs so far have written tensor memory


class MBarrier:
    """One mbarrier of a block: arrivals expected per phase; the open phase's arrivals, outstanding transaction
    bytes and latest event; each completed phase's cycle; warps parked on phases not yet complete."""

    __slots__ = ("name", "expected", "arrived", "tx", "latest", "completed", "waiters")

    def __init__(self, name: str, expected: int):
        self.name = name
        self.expected = expected
        self.arrived = 0
        self.tx = 0  # bytes expected and not yet landed (negative: landed before they were expected)
        self.latest = 0
        self.completed: list[int] = []  # completed[p]: the cycle phase p completed
        self.waiters: dict[int, list[Any]] = {}

    @property
    def phase(self) -> int:
        return len(self.completed)

    def event(self, at: int, block: BlockBarriers, now: int) -> None:
        """An arrival or a copy's bytes counted at cycle `at`: complete the phase if it is due, waking its
        waiters (no earlier than the next cycle)."""
        if at > self.latest:
            self.latest = at
        if self.arrived < self.expected or self.tx > 0:
            return
        self.completed.append(self.latest)
        done, phase = self.latest, len(self.completed) - 1
        self.arrived, self.tx, self.latest = 0, 0, 0
        for warp in self.waiters.pop(phase, ()):
            block.parked -= 1
            warp.async_state.parked_on = None
            clusters.wake(warp, max(done, now + 1), LONG_SCOREBOARD)  # (a peer block's warps live on another SM)

    def describe(self) -> str:
        return (f"mbarrier '{self.name}': phase {self.phase} has {self.arrived} of {self.expected} arrivals and "
                f"{max(self.tx, 0):,} transaction bytes outstanding")


class BlockBarriers:
    """A block's mbarriers by name, and how many of its warps are parked on one."""

    __slots__ = ("by_name", "parked")

    def __init__(self) -> None:
        self.by_name: dict[str, MBarrier] = {}
        self.parked = 0


def _state(warp: Warp) -> AsyncState:
    state: AsyncState | None = warp.async_state
    if state is None:
        state = warp.async_state = AsyncState()
    return state


def _barriers(warp: Any) -> BlockBarriers:
    return _block_barriers(warp.block)


def _block_barriers(block: Any) -> BlockBarriers:
    first = block.warps[0]
    barriers = first.block_barriers
    if barriers is None:
        barriers = first.block_barriers = BlockBarriers()
    return barriers


def _barrier(warp: Any, name: str, what: str, block: Any = None) -> tuple[MBarrier, BlockBarriers]:
    """The mbarrier `name` of the warp's block (or of `block`, another of its cluster's)."""
    block = warp.block if block is None else block
    barriers = _block_barriers(block)
    barrier = barriers.by_name.get(name)
    if barrier is None:
        after = "BAR.SYNC" if block is warp.block else "a cluster barrier"
        raise GpusimError(f"{what} on mbarrier '{name}' of block {block.index} before a SYNCS.EXCH "
                          f"initialised it (initialise it first, then {after})")
    return barrier, barriers


def _wait_groups(groups: list[int], pending: int) -> int:
    """The cycle by which every group but the `pending` most recent has landed (0: none to wait for); those
    groups are dropped."""
    older = len(groups) - pending
    if older <= 0:
        return 0
    until = max(groups[:older])
    del groups[:older]
    return until


def issue(sp: Any, warp: Warp, inst: WarpInst, timing: OpTiming, now: int, done: int) -> int:
    """Carry out an asynchronous instruction that `warp` issues at `now` (`done`: when its own work completes: a
    copy's data in shared memory, an MMA's results). Returns 0, the cycle before which the warp's next
    instruction may not issue (its reason in sp.hold_reason), or PARKED."""
    if timing.refused:
        raise GpusimError(timing.refused)
    kind = timing.async_kind
    operands: Any = inst.operands
    if kind == COPY:
        state = _state(warp)
        if done > state.copy_open:
            state.copy_open = done
        if done > warp.store_done:  # an exiting warp waits for its copies to land
            warp.store_done = done
        return 0
    if kind == COMMIT:
        state = _state(warp)
        state.copy_groups.append(state.copy_open if state.copy_open >= 0 else now)
        state.copy_open = -1
        return 0
    if kind == WAIT_COPIES:
        sp.hold_reason = LONG_SCOREBOARD
        return _wait_groups(_state(warp).copy_groups, operands.pending)
    if kind == MMA:
        if not sp.warpgroups_checked:
            _check_warpgroups(sp)
        operands_from = getattr(sp.memory, "shared_operands", None)
        if operands_from is not None:  # its operands in shared memory pass through the SM's data stage
            read = operands_from(sp.sm_index, warpgroup_operand_bytes(inst), now) + timing.latency - timing.interval
            if read > done:
                done = read
        state = _state(warp)
        if done > state.mma_open:
            state.mma_open = done
        if timing.commits:
            state.mma_groups.append(state.mma_open)
            state.mma_open = -1
        return 0
    if kind == WAIT_MMA:
        sp.hold_reason = WAIT
        return _wait_groups(_state(warp).mma_groups, operands.pending)
    if kind == BULK:
        _bulk_copy(sp, warp, inst, now)
        return 0
    if kind == MBARRIER_INIT:
        _barriers(warp).by_name[operands.barrier] = MBarrier(operands.barrier, operands.arrivals)
        return 0
    if kind == MBARRIER_ARRIVE:
        block, at = warp.block, now
        if operands.peer >= 0:  # mbarrier.arrive.shared::cluster: the mbarrier of a block of the cluster
            cluster_state = clusters.attach(sp.sm.gpu)
            block, _sm, own = cluster_state.peer(warp, operands.peer, f"{inst.info.opcode} with peer {operands.peer}")
            at = now if own else now + cluster_state.latency
        barrier, barriers = _barrier(warp, operands.barrier, "SYNCS.ARRIVE", block)
        lanes = inst.mask.bit_count()
        barrier.arrived += lanes
        barrier.tx += operands.bytes * lanes
        barrier.event(at, barriers, now)
        return 0
    if kind == MBARRIER_WAIT:
        return _wait_phase(sp, warp, operands.barrier)
    if kind == CLUSTER_ARRIVE:
        return clusters.arrive(sp, warp, now)
    if kind == CLUSTER_WAIT:
        return clusters.wait(sp, warp, now)
    if kind:
        return _tcgen05(sp, warp, inst, kind, now)
    return 0


def _tcgen05(sp: Any, warp: Any, inst: Any, kind: str, now: int) -> int:
    """Blackwell's tcgen05 instructions (gpusim.engine.tensor_memory), as `issue`."""
    if kind == UMMA or kind == TMEM_COPY:
        done = tensor_memory.mma(sp, warp, inst, now) if kind == UMMA else tensor_memory.copy(sp, warp, inst, now)
        state = _state(warp)
        if done > state.tcgen05_done:
            state.tcgen05_done = done
        if sp.observer is not None:
            sp.observer.accessed(sp.sm, sp, warp, inst, now, done)
        return 0
    if kind == UMMA_COMMIT:  # one arrival (the warp's, not per lane), when its tcgen05 work so far is done
        done = _state(warp).tcgen05_done
        at = done if done > now else now
        for block, _sm in _destinations(sp, warp, inst):
            barrier, barriers = _barrier(warp, inst.operands.barrier, inst.info.opcode, block)
            barrier.arrived += 1
            barrier.event(at, barriers, now)
        return 0
    if kind == TMEM_LOAD or kind == TMEM_STORE:
        ready, start = tensor_memory.transfer(sp, warp, inst, now)
        if kind == TMEM_LOAD:
            entry = scoreboard_entry(ready, BOARDS.index(tensor_memory.SHORT))  # tcgen05.wait::ld: their scoreboard
            warp.regs.write(inst.dst_slots, entry)
        else:
            state = _state(warp)
            if ready > state.tmem_stored:
                state.tmem_stored = ready
            if ready > warp.store_done:
                warp.store_done = ready
        if sp.observer is not None:
            sp.observer.accessed(sp.sm, sp, warp, inst, start, ready)
        if start > now:  # the chunk takes it only then
            sp.hold_reason = MATH_PIPE_THROTTLE
            return start
        return 0
    if kind == TMEM_STORE_WAIT:
        sp.hold_reason = SHORT_SCOREBOARD
        stored = _state(warp).tmem_stored
        return stored if stored > now else 0
    if kind == TMEM_ALLOC:
        return tensor_memory.allocate(sp, warp, inst)
    if kind == TMEM_FREE:
        return tensor_memory.free(sp, warp, inst, now)
    return 0  # the wgmma fence: its issue slot only


def _wait_phase(sp: Any, warp: Any, name: str) -> int:
    barrier, barriers = _barrier(warp, name, "SYNCS.PHASECHK")
    state = _state(warp)
    phase = state.waits.get(name, 0)
    state.waits[name] = phase + 1
    sp.hold_reason = LONG_SCOREBOARD
    if phase < len(barrier.completed):
        return barrier.completed[phase]
    barrier.waiters.setdefault(phase, []).append(warp)
    state.parked_on = barrier
    barriers.parked += 1
    check_stuck(warp)
    return PARKED


def warpgroup_operand_bytes(inst: Any) -> int:
    """The shared-memory bytes one warp's quarter of a warpgroup MMA reads: B (N x K) always, A (M x K) unless it
    comes from registers (the instruction names source registers: wgmma's RS form), at the input precision."""
    key = (inst.info.opcode, bool(inst.src))
    found = _OPERAND_BYTES.get(key)
    if found is None:
        found = _OPERAND_BYTES[key] = _operand_bytes(*key)
    return found


_OPERAND_BYTES: dict[tuple[str, bool], int] = {}  # by (opcode, A from registers): worked out once each


def _operand_bytes(opcode: str, a_in_registers: bool) -> int:
    shape = next((m for m in opcode.split(".")[1:] if "X" in m and m.replace("X", "").isdigit()), None)
    if shape is None:
        return 0
    m, n, k = (int(x) for x in shape.split("X"))
    width = {"fp8": 1, "int8": 1, "tf32": 4}.get(mma_precision(opcode) or "fp16", 2)
    elements = n * k + (0 if a_in_registers else m * k)
    return elements * width // WARPS_PER_WARPGROUP


def _bulk_copy(sp: Any, warp: Any, inst: Any, now: int) -> None:
    """One tile per active lane from its address; each lands its bytes on the instruction's mbarrier (with
    `multicast`: in each block it names, on that block's mbarrier of the name, from one read of L2)."""
    operands: Any = inst.operands
    targets = _destinations(sp, warp, inst)
    landing = [_barrier(warp, operands.barrier, inst.info.opcode, block) for block, _sm in targets]
    to = [sm.index for _block, sm in targets]
    copy = getattr(sp.memory, "bulk_copy", None)
    rows, pitch = operands.rows, operands.pitch
    row_bytes = operands.bytes // rows
    mask, addrs = inst.mask, inst.addrs
    latest = now
    for lane in range(len(addrs)):
        if not mask >> lane & 1:
            continue
        if copy is None:  # a memory model without bulk copies: its global latency, as for any access
            done = now + sp.timing.spec.memory.l1.hit_latency
        elif operands.multicast:
            done = copy(sp.sm_index, int(addrs[lane]), rows, row_bytes, pitch, now, to)
        else:
            done = copy(sp.sm_index, int(addrs[lane]), rows, row_bytes, pitch, now)
        for barrier, barriers in landing:
            barrier.tx -= operands.bytes
            barrier.event(done, barriers, now)
        if done > latest:
            latest = done
    if latest > warp.store_done:  # an exiting warp waits for its copies to land
        warp.store_done = latest
    if sp.observer is not None:
        sp.observer.accessed(sp.sm, sp, warp, inst, now, latest)


def _destinations(sp: Any, warp: Any, inst: Any) -> list[tuple[Any, Any]]:
    """(Block, SM) of each block a bulk copy lands in: its own, or those its `multicast` mask names."""
    multicast = inst.operands.multicast
    if not multicast:
        return [(warp.block, sp.sm)]
    state = clusters.attach(sp.sm.gpu)
    what = f"{inst.info.opcode} with multicast {multicast:#x}"
    out = []
    for rank in range(multicast.bit_length()):
        if multicast >> rank & 1:
            block, sm, _own = state.peer(warp, rank, what)
            out.append((block, sm))
    return out


def _check_warpgroups(sp: Any) -> None:
    """wgmma runs on warpgroups: the block's warps must come in fours (checked at a run's first HGMMA)."""
    warps = sp.sm.gpu.kernel.launch.warps_per_block
    if warps % WARPS_PER_WARPGROUP:
        raise GpusimError(f"warpgroup MMA (HGMMA) runs on warpgroups of {WARPS_PER_WARPGROUP} warps; the launch has "
                          f"{warps} warps per block: expected a multiple of {WARPS_PER_WARPGROUP * 32} threads")
    for other in sp.sm.sps:
        other.warpgroups_checked = True


def cancel_park(warp: Any) -> None:
    """A parked warp whose program ended right after its wait: it waits no more (it drains like any warp)."""
    state = warp.async_state
    barrier = state.parked_on if state is not None else None
    if barrier is None:
        if not tensor_memory.cancel_wait(warp):
            clusters.cancel_park(warp)
        return
    for waiters in barrier.waiters.values():
        if warp in waiters:
            waiters.remove(warp)
    state.parked_on = None
    _barriers(warp).parked -= 1


def check_stuck(warp: Any) -> None:
    """Refuse a block that can never go on: every live warp waits on an mbarrier or at a BAR.SYNC, and some
    mbarrier phase it waits for lacks arrivals or bytes that only those warps could supply."""
    block = warp.block
    if not block.live:
        tensor_memory.check_released(block, warp.sp.sm)
    state = warp.sp.sm.cluster_state
    if state is not None and state.check_stuck(warp):
        return  # a block of a cluster: the cluster's blocks were looked at together
    warps = block.warps
    if not warps or warps[0].block_barriers is None:
        return
    barriers = warps[0].block_barriers
    if barriers.parked and barriers.parked + len(block.arrived) >= block.live:
        stuck = next(b for b in barriers.by_name.values() if any(b.waiters.values()))
        raise GpusimError(f"block {block.index} can never finish: {stuck.describe()}, and every live warp of the "
                          f"block waits (on an mbarrier or at BAR.SYNC)")
