"""A streaming multiprocessor: sub-partitions, resident blocks, warp slots, barriers. `step(now)` does one
cycle's work and says when the SM next has any (the GPU's clock process sleeps it until then); with thread block
clusters, it first steps the SMs that events elsewhere woke before their next step (gpusim.engine.clusters)."""

from __future__ import annotations

import heapq
from typing import Any

from librt import vecs
from librt.vecs import vec
from mypy_extensions import i64

from ..stats import SMCounters
from ..stats.counters import BARRIER
from . import clusters
from .scheduler import make_policy
from .subpartition import INF, SubPartition
from .warp import Warp


class Block:
    """A resident thread block: its warps still alive and the ones waiting at a barrier."""

    __slots__ = ("index", "warps", "live", "arrived")

    def __init__(self, index: int):
        self.index = index
        self.warps: list[Warp] = []
        self.live = 0
        self.arrived: list[Warp] = []


class SM:
    def __init__(self, gpu: Any, index: int, name: str, spec: Any, timing: Any, memory: Any, scheduler: str,
                 observer: Any = None):
        self.gpu = gpu
        self.index = index
        self.name = name
        self.spec = spec
        self.observer = observer
        sub = spec.sm.sub_partitions
        self.counters = SMCounters(sub)
        # the cycle each sub-partition next has work, by its index (written by the sub-partitions): one native
        # array the SM's step reads, so a sub-partition with nothing to do is not visited
        due = vec[i64]()
        for _ in range(sub):
            due = vecs.append(due, INF)
        self.sp_due: vec[i64] = due
        self.sps = [SubPartition(self, i, make_policy(scheduler, spec.sm.max_warps), timing, self.counters, memory)
                    for i in range(sub)]
        self.free_slots = list(range(spec.sm.max_warps))
        self.arrivals: list[tuple[int, int]] = []  # (cycle the block's warps start, block index)
        self.resident_blocks = 0  # placed here and not yet retired (including those still launching)
        self.running_blocks = 0  # whose warps have started and not all exited
        self.max_running_blocks = 0
        self.cluster_state: Any = None  # the run's gpusim.engine.clusters.ClusterState, shared by every SM
        self.tensor_memory: Any = None  # its tensor memory and tcgen05 MMA queue (gpusim.engine.tensor_memory), once used
        self.clusters_checked = False  # whether the launch was looked at for clusters
        self.clock_due: int = INF  # the cycle the GPU's clock next steps this SM (what its last step returned)

    # --- blocks --------------------------------------------------------------------------------------------
    def reserve_block(self, block_index: int, start: int) -> None:
        """The dispatcher placed a block here; its warps become resident at `start`."""
        self.resident_blocks += 1
        heapq.heappush(self.arrivals, (start, block_index))
        if not self.clusters_checked:
            clusters.attach_for_launch(self.gpu)
        state = self.cluster_state
        if state is not None:  # a cluster's blocks are placed on other SMs than the one whose block retired
            state.placed(block_index, self, start)

    def start_block(self, block_index: int, now: int) -> None:
        kernel = self.gpu.kernel
        block = Block(block_index)
        sub = len(self.sps)
        warps_per_block = kernel.launch.warps_per_block
        block.live = warps_per_block
        self.running_blocks += 1
        if self.observer is not None:
            self.observer.block_started(self, block_index, now)
        if self.running_blocks > self.max_running_blocks:
            self.max_running_blocks = self.running_blocks
        for i in range(warps_per_block):
            slot = heapq.heappop(self.free_slots)
            sp = self.sps[slot % sub]
            warp = Warp(block_index * warps_per_block + i, block, i, sp, slot, self.gpu.next_age(),
                        self.gpu.stream(block_index, i))
            block.warps.append(warp)
        if self.cluster_state is not None:
            self.cluster_state.block_started(block)
        for warp in block.warps:
            warp.sp.add_warp(warp, now)

    def retire_warp(self, warp: Warp, now: int) -> None:
        if warp.finished:
            return
        warp.finished = True
        self.counters.warps_changed(now, -1, warp.sp.index)
        if self.observer is not None:
            self.observer.warp_exited(self, warp.sp, warp, now)
        heapq.heappush(self.free_slots, warp.slot)
        forget = getattr(warp.sp.policy, "forget", None)
        if forget is not None:
            forget(warp)
        block = warp.block
        block.live -= 1
        if block.arrived:
            self.release_barrier_if_complete(block, now - 1)
        state = self.cluster_state
        if state is not None:  # an exited warp counts as arrived at its cluster's barrier
            state.warp_exited(warp, now)
        if block.live == 0:
            # a block and its warps refer to each other: break the cycle, so that reference counting frees them
            # now (GPU.run collects cycles rarely; a long run would otherwise keep every retired block)
            block.warps = []
            block.arrived = []
            self.resident_blocks -= 1
            self.running_blocks -= 1
            self.counters.blocks_done += 1
            if state is not None:
                state.block_retired(block.index)
            if self.observer is not None:
                self.observer.block_retired(self, block.index, now)
            self.gpu.block_retired(self, now)

    # --- barriers ------------------------------------------------------------------------------------------
    def barrier_arrive(self, warp: Warp, now: int) -> None:
        warp.block.arrived.append(warp)
        self.release_barrier_if_complete(warp.block, now)

    def release_barrier_if_complete(self, block: Block, now: int) -> None:
        """Exited warps do not count: the barrier opens when every live warp has arrived."""
        if len(block.arrived) < block.live:
            return
        release = now + 1
        for warp in block.arrived:
            operands, _board = warp.operands_ready(release)
            warp.sp.sleep(warp, max(release, operands), BARRIER)
        block.arrived = []

    # --- time ----------------------------------------------------------------------------------------------
    def step(self, now: int) -> int:
        """The GPU clock's call: this cycle's work here (and the steps owed to other SMs by `now`); the cycle to
        be stepped next."""
        state = self.cluster_state
        if state is not None and state.owed and state.owed[0][0] <= now:
            state.serve(now)
        nxt = self.advance(now)
        if state is not None and state.owed:
            owed = state.owed[0][0]
            if owed < nxt:
                nxt = owed
        self.clock_due = nxt
        return nxt

    def advance(self, now: int) -> int:
        """Do this cycle's work: start the blocks due, run the sub-partitions due; the cycle of the next work."""
        arrivals = self.arrivals
        while arrivals and arrivals[0][0] <= now:
            start, block_index = heapq.heappop(arrivals)
            self.start_block(block_index, start)
        sps, due = self.sps, self.sp_due
        count: i64 = len(due)
        for index in range(count):
            if due[index] <= now:
                sps[index].cycle(now)
        earliest: i64 = INF
        for index in range(count):  # after all have run: a barrier release may have woken one already visited
            if due[index] < earliest:
                earliest = due[index]
        nxt: int = earliest
        if arrivals and arrivals[0][0] < nxt:
            nxt = arrivals[0][0]
        return nxt
