"""Thread block clusters while a kernel runs: each block's cluster, rank and SM; distributed shared memory; cluster
barriers; and waking a warp that lives on another SM.

* Membership. The dispatcher places a cluster's blocks together on distinct SMs of one GPC (gpusim.engine.
  dispatcher); a block's rank is its place in its cluster (cluster x fastest, then y, z), so for a cluster of
  (cx, cy, cz) it is block.x % cx + cx * (block.y % cy + cy * (block.z % cz)). A launch without clusters has
  clusters of one block (as CUDA's): a cluster barrier then spans its block.
* Distributed shared memory. An LDS / STS / ATOMS with a `peer` reaches the shared memory of the block of that
  rank (its own rank: its own shared memory, as usual). The access crosses the GPC's SM-to-SM network: the memory
  model's `dsmem` (gpusim.memory.hierarchy) queues its 32-byte sectors on the two SMs' network ports
  (memory.sm_to_sm.sm_bytes_per_clock each way), the peer's shared-memory banks, then the network's latency
  (memory.sm_to_sm.latency). CUDA requires the peer to be running (a cluster barrier after the launch) and not to
  have exited (a cluster barrier before exit): an access to a block that has not started or has exited is a
  one-line error, and so is a `peer` on a launch without clusters.
* Cluster barriers. UCGABAR_ARV (barrier.cluster.arrive) arrives at the cluster barrier's next phase without
  waiting; UCGABAR_WAIT (barrier.cluster.wait) waits until the phase of the warp's latest arrival has the
  arrivals of every warp of every block of the cluster. A warp that exits counts as arrived at every phase after
  its own arrivals (a cluster's blocks are required to synchronise before one exits when another may still use
  its shared memory, so a block that finishes early never holds the others). The phase opens one SM-to-SM
  latency after its last arrival (the arrivals cross the network; a cluster of one block: the next cycle). The
  wait is Nsight's `barrier` stall (waiting for the warps of other blocks at a barrier: it has no reason of its
  own for the cluster barrier).
* Waking another SM. The GPU's clock steps an SM at the cycle its previous step said it next has work
  (SM.clock_due). An event on one SM that wakes a warp of another (a cluster barrier opening, a peer block's
  mbarrier phase completing, a cluster's block placed on an SM when a block of another retires) can be due
  before that: the step is *owed*. Every SM's step first serves the owed steps that are due (it steps those SMs
  at that cycle) and tells the clock the earliest one still owed, so no SM's work waits past its cycle. Stepping
  an SM with nothing due changes nothing, so an owed step that turns out not to be needed is harmless.
"""

from __future__ import annotations

import heapq
from typing import Any

from ..errors import GpusimError
from ..stats.counters import BARRIER

INF = 1 << 60  # as gpusim.engine.subpartition.INF
PARKED = -1  # as gpusim.engine.asynchrony.PARKED: the warp waits for an event that will wake it


class ClusterBarrier:
    """The barrier.cluster of one cluster: the warps it waits for, arrivals per phase, warps that exited (by the
    arrivals they had made), each completed phase's cycle and the warps parked on phases not yet complete."""

    __slots__ = ("total", "arrivals", "arrived", "exited", "top", "completed", "waiters", "parked")

    def __init__(self, total: int):
        self.total = total  # warps of all the cluster's blocks
        self.arrivals: dict[int, int] = {}  # live warp's global id -> its arrivals so far
        self.arrived: dict[int, int] = {}  # phase -> arrivals of live warps
        self.exited: dict[int, int] = {}  # arrivals made -> warps that exited after making that many
        self.top = -1  # the latest phase any warp arrived at
        self.completed: list[int] = []  # completed[p]: the cycle phase p had its last arrival
        self.waiters: dict[int, list[Any]] = {}
        self.parked: dict[int, int] = {}  # block index -> its warps parked here

    def settle(self, now: int, release: int) -> None:
        """Complete the phases whose arrivals are in (exited warps count as arrived), waking their waiters
        `release` cycles later."""
        phase = len(self.completed)
        while phase <= self.top:
            gone = sum(count for made, count in self.exited.items() if made <= phase)
            if self.arrived.get(phase, 0) + gone < self.total:
                return
            self.completed.append(now)
            self.arrived.pop(phase, None)
            for warp in self.waiters.pop(phase, ()):
                self.parked[warp.block.index] -= 1
                wake(warp, now + release, BARRIER)
            phase += 1

    def describe(self) -> str:
        phase = len(self.completed)
        gone = sum(count for made, count in self.exited.items() if made <= phase)
        return f"the cluster barrier's phase {phase} has {self.arrived.get(phase, 0) + gone} of {self.total} arrivals"


class Cluster:
    """One cluster's blocks by rank: their indices, the SM each was placed on, the Block once it started, whether
    it retired; and its barrier."""

    __slots__ = ("blocks", "sms", "started", "retired", "barrier")

    def __init__(self, blocks: list[int], warps_per_block: int):
        self.blocks = blocks
        self.sms: list[Any] = [None] * len(blocks)
        self.started: list[Any] = [None] * len(blocks)
        self.retired = [False] * len(blocks)
        self.barrier = ClusterBarrier(len(blocks) * warps_per_block)

    @property
    def size(self) -> int:
        return len(self.blocks)


class ClusterState:
    """The run's clusters, by block; and the steps of SMs owed by events on other SMs (see the module docstring).
    One object, shared by every SM (SM.cluster_state)."""

    def __init__(self, gpu: Any):
        self.gpu = gpu
        self.source = gpu.kernel.source
        self.warps_per_block = gpu.kernel.launch.warps_per_block
        network = gpu.spec.memory.sm_to_sm
        self.latency = network.latency if network is not None else 0
        self.owed: list[tuple[int, int, Any]] = []  # (cycle, order, SM): a heap
        self.pushed = 0
        self.member: dict[int, tuple[Cluster, int]] = {}  # block -> (its cluster, its rank)
        placed = getattr(gpu.dispatcher, "clusters", None)
        self.launched = bool(placed)  # the launch has clusters (else each block is a cluster of one)
        for blocks in placed or ():
            cluster = Cluster(list(blocks), self.warps_per_block)
            for rank, block in enumerate(blocks):
                self.member[block] = (cluster, rank)

    # --- SMs woken from elsewhere ---------------------------------------------------------------------------
    def owe(self, at: int, sm: Any) -> None:
        """`sm` has work at `at`: step it then, unless the clock steps it by then anyway."""
        if at < sm.clock_due:
            self.pushed += 1
            heapq.heappush(self.owed, (at, self.pushed, sm))

    def serve(self, now: int) -> None:
        """Step the SMs owed a step by `now` (those the clock does not step at `now` anyway)."""
        owed = self.owed
        while owed and owed[0][0] <= now:
            _, _, sm = heapq.heappop(owed)
            if sm.clock_due <= now:
                continue
            nxt = sm.advance(now)
            if nxt < sm.clock_due:
                self.owe(nxt, sm)

    # --- blocks -----------------------------------------------------------------------------------------------
    def placed(self, block: int, sm: Any, start: int) -> None:
        entry = self.member.get(block)
        if entry is not None:
            entry[0].sms[entry[1]] = sm
        self.owe(start, sm)

    def block_started(self, block: Any) -> None:
        entry = self.member.get(block.index)
        if entry is not None:
            entry[0].started[entry[1]] = block

    def block_retired(self, index: int) -> None:
        entry = self.member.get(index)
        if entry is None:
            return
        cluster, rank = entry
        cluster.retired[rank] = True
        if all(cluster.retired):
            for block in cluster.blocks:
                del self.member[block]

    def warp_exited(self, warp: Any, now: int) -> None:
        entry = self.member.get(warp.block.index)
        if entry is None:
            return
        cluster = entry[0]
        barrier = cluster.barrier
        made = barrier.arrivals.pop(warp.gid, 0)
        barrier.exited[made] = barrier.exited.get(made, 0) + 1
        barrier.settle(now, self.release(cluster))

    def cluster_of(self, warp: Any) -> tuple[Cluster, int]:
        """The warp's cluster and its block's rank (a launch without clusters: its block alone)."""
        entry = self.member.get(warp.block.index)
        if entry is None:
            block = warp.block
            cluster = Cluster([block.index], self.warps_per_block)
            cluster.started[0] = block
            cluster.barrier.exited[0] = self.warps_per_block - block.live  # its warps gone before this
            entry = self.member[block.index] = (cluster, 0)
        return entry

    def release(self, cluster: Cluster) -> int:
        """Cycles from a cluster barrier phase's last arrival to its waiters' release."""
        return self.latency if cluster.size > 1 else 1

    def peer(self, warp: Any, rank: int, what: str) -> tuple[Any, Any, bool]:
        """(the Block of `rank` in the warp's cluster, its SM, whether that is the warp's own block), for an
        access or arrival that reaches it; one-line errors for a launch without clusters, a rank outside the
        cluster and a block not yet started or already exited."""
        if not self.launched:
            raise GpusimError(f"{self.source}: {what} reaches another block of a thread block cluster, but the launch "
                              f"has no cluster (add launch.cluster, compute capability 9.0 and later)")
        cluster, own = self.member[warp.block.index]
        if rank >= cluster.size:
            raise GpusimError(f"{self.source}: {what} names the block of rank {rank}; the cluster has "
                              f"{cluster.size} blocks (ranks 0 to {cluster.size - 1})")
        block, index = cluster.started[rank], cluster.blocks[rank]
        if cluster.retired[rank]:
            raise GpusimError(f"{self.source}: {what} from block {warp.block.index} reaches block {index} of its "
                              f"cluster after it exited (end with a cluster barrier: UCGABAR_ARV, UCGABAR_WAIT)")
        if block is None:
            raise GpusimError(f"{self.source}: {what} from block {warp.block.index} reaches block {index} of its "
                              f"cluster before it started (begin with a cluster barrier: UCGABAR_ARV, UCGABAR_WAIT)")
        return block, cluster.sms[rank], rank == own

    # --- a cluster that can never go on ---------------------------------------------------------------------
    def check_stuck(self, warp: Any) -> bool:
        """Whether the warp's block is in a cluster here (then this is the check: every live warp of every block
        of the cluster waits on the cluster barrier, an mbarrier or at BAR.SYNC, and one of them on one of the
        first two, so none can supply what they wait for: a one-line error)."""
        entry = self.member.get(warp.block.index)
        if entry is None:
            return False
        cluster = entry[0]
        barrier = cluster.barrier
        waiting, stuck = 0, None
        for rank, block in enumerate(cluster.started):
            if cluster.retired[rank]:
                continue
            if block is None or not block.warps:
                return True
            parked = barrier.parked.get(block.index, 0)
            mbarriers = block.warps[0].block_barriers
            if mbarriers is not None and mbarriers.parked:
                parked += mbarriers.parked
                stuck = stuck or next((b for b in mbarriers.by_name.values() if any(b.waiters.values())), None)
            waiting += parked
            if parked + len(block.arrived) < block.live:
                return True
        if not waiting:
            return True
        what = barrier.describe() if any(barrier.waiters.values()) or stuck is None else stuck.describe()
        blocks = ", ".join(map(str, cluster.blocks))
        raise GpusimError(f"{self.source}: the cluster of blocks {blocks} can never finish: {what}, and every live "
                          f"warp of its blocks waits (on the cluster barrier, an mbarrier or at BAR.SYNC)")


def attach(gpu: Any) -> ClusterState:
    """The run's ClusterState, made once and given to every SM."""
    for sm in gpu.sms:
        if sm.cluster_state is not None:
            return sm.cluster_state
    state = ClusterState(gpu)
    for sm in gpu.sms:
        sm.cluster_state = state
    return state


def attach_for_launch(gpu: Any) -> None:
    """At the first block placed: a launch with clusters gets its ClusterState before any block starts."""
    if getattr(getattr(gpu, "dispatcher", None), "clusters", None):
        attach(gpu)
    for sm in gpu.sms:
        sm.clusters_checked = True


def wake(warp: Any, at: int, reason: int) -> None:
    """Wake a parked warp at `at` (or when its next instruction's operands are ready, if later), on whichever SM it
    lives: an SM the clock would step later is owed a step."""
    operands, _board = warp.operands_ready(at)
    until = operands if operands > at else at
    warp.sp.sleep(warp, until, reason)
    woken(warp, until)


def woken(warp: Any, at: int) -> None:
    """A warp of another SM was put to sleep until `at` by an event here: make sure its SM is stepped then."""
    sm = warp.sp.sm
    state = sm.cluster_state
    if state is not None:
        state.owe(at, sm)


# --- instructions ---------------------------------------------------------------------------------------------

def arrive(sp: Any, warp: Any, now: int) -> int:
    """UCGABAR_ARV: the warp arrives at the cluster barrier's next phase (for it) and goes on."""
    state = attach(sp.sm.gpu)
    cluster, _rank = state.cluster_of(warp)
    barrier = cluster.barrier
    made = barrier.arrivals.get(warp.gid, 0)
    barrier.arrivals[warp.gid] = made + 1
    barrier.arrived[made] = barrier.arrived.get(made, 0) + 1
    if made > barrier.top:
        barrier.top = made
    barrier.settle(now, state.release(cluster))
    return 0


def wait(sp: Any, warp: Any, now: int) -> int:
    """UCGABAR_WAIT: wait until the phase of the warp's latest arrival is complete: the cycle it may go on, or
    PARKED (the last arrival wakes it)."""
    state = attach(sp.sm.gpu)
    cluster, _rank = state.cluster_of(warp)
    barrier = cluster.barrier
    made = barrier.arrivals.get(warp.gid, 0)
    if not made:
        raise GpusimError(f"{state.source}: UCGABAR_WAIT in block {warp.block.index} (warp {warp.index}) before its "
                          f"UCGABAR_ARV: a warp waits at the cluster barrier for the phase it arrived at")
    sp.hold_reason = BARRIER
    phase = made - 1
    if phase < len(barrier.completed):
        return barrier.completed[phase] + state.release(cluster)
    barrier.waiters.setdefault(phase, []).append(warp)
    barrier.parked[warp.block.index] = barrier.parked.get(warp.block.index, 0) + 1
    state.check_stuck(warp)
    return PARKED


def cancel_park(warp: Any) -> bool:
    """A warp parked at the cluster barrier whose program ended right after its wait: it waits no more. Whether
    it was parked here."""
    state = warp.sp.sm.cluster_state
    entry = state.member.get(warp.block.index) if state is not None else None
    if entry is None:
        return False
    barrier = entry[0].barrier
    for waiters in barrier.waiters.values():
        if warp in waiters:
            waiters.remove(warp)
            barrier.parked[warp.block.index] -= 1
            return True
    return False


def remote_access(sp: Any, warp: Any, inst: Any, now: int) -> Any:
    """An LDS / STS / ATOMS with a `peer`: on the shared memory of that block of the cluster, over the SM-to-SM
    network; (cycle the data is ready or the write done, cycles the issuing pipe stays busy at least)."""
    state = sp.sm.cluster_state
    what = f"{inst.info.opcode} with peer {inst.operands.peer}"
    if state is None:
        raise GpusimError(f"{sp.sm.gpu.kernel.source}: {what} reaches another block of a thread block cluster, but "
                          f"the launch has no cluster (add launch.cluster, compute capability 9.0 and later)")
    _block, target, own = state.peer(warp, inst.operands.peer, what)
    memory = sp.memory
    if own:
        return memory.access(sp.sm_index, inst, now)
    dsmem = getattr(memory, "dsmem", None)
    if dsmem is None:  # a memory model without the network: its latency
        return now + state.latency, 0
    return dsmem(sp.sm_index, target.index, inst, now)
