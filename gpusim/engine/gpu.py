"""Build the GPU -> GPC -> TPC -> SM hierarchy from an architecture and run one kernel on it."""

from __future__ import annotations

import gc
import itertools
import time
from typing import Any, Final

from ..analytic.clusters import check_cluster
from ..analytic.layout import sm_layout
from ..analytic.occupancy import occupancy, snap_carveout
from ..errors import GpusimError
from ..memory import FixedLatencyMemory
from ..memory.hierarchy import MemoryHierarchy
from ..stats.counters import REASONS
from ..stats.observer import complete as complete_observer
from .calendar import Calendar
from .dispatcher import Dispatcher, cluster_members, interleave_by_gpc
from .scheduler import DEFAULT_POLICY
from .sm import SM
from .subpartition import INF
from .timing import TimingTable

POLL_STEPS: Final = 512  # SM steps between looks at the wall clock, when a progress callback or an interrupt is given
PROGRESS_SECONDS = 0.25  # a progress callback hears from the run at most this often (and once at the end)


class GPU:
    """The simulated device for one kernel launch."""

    def __init__(self, spec, kernel, *, scheduler: str = DEFAULT_POLICY, sms: int | None = None,
                 memory=None, observer=None, stream_factory=None, block_limit: int | None = None, stagger: int = 0,
                 sync_window: int = 1):
        """`stream_factory(block, warp_in_block)`: the iterator of warp-instructions that warp issues, from the
        front end that made `kernel` (None: the kernel's own, `kernel.streams()`); the engine imports no front end.
        `block_limit`: launch only the grid's first blocks (a sampled run); the kernel is otherwise as written.
        `stagger`: the first blocks start spread over this many cycles (see Dispatcher). `sync_window`: 1 steps
        the SMs in time order (exact); W > 1 lets each SM run to the end of the current W-cycle window before the
        next SM is stepped (see clock), where the launch has no clusters (whose SMs wait on each other);
        `self.sync_window` says what the run uses."""
        self.spec, self.kernel = spec, kernel
        launch = kernel.launch
        try:
            self.occupancy = occupancy(spec, launch.threads_per_block, launch.registers_per_thread,
                                       launch.smem_per_block, launch.carveout)
        except ValueError as exc:
            raise GpusimError(f"{kernel.source}: launch: {exc}") from None
        if self.occupancy.blocks_per_sm == 0:
            raise GpusimError(f"{kernel.source}: the launch cannot be resident on {spec.name}: {self.occupancy.reason}")
        timing = TimingTable(spec)
        observer = complete_observer(observer)
        self.observer = observer
        self.layout = sm_layout(spec, sms)
        self.memory = self._memory(memory, sum(len(tpc) for gpc in self.layout for tpc in gpc))
        self.sms: list[SM] = []
        for g, gpc in enumerate(self.layout):
            for t, tpc in enumerate(gpc):
                for s, index in enumerate(tpc):
                    self.sms.append(SM(self, index, f"gpu.gpc[{g}].tpc[{t}].sm[{s}]", spec, timing, self.memory,
                                       scheduler, observer))
        self.sms.sort(key=lambda sm: sm.index)
        by_gpc = [[self.sms[i] for tpc in gpc for i in tpc] for gpc in self.layout]
        nblocks = launch.nblocks if block_limit is None else max(1, min(launch.nblocks, block_limit))
        clusters = self._clusters(kernel, by_gpc, nblocks)
        if clusters is not None:  # whole clusters: the first of them that hold the blocks asked for
            nblocks = sum(len(c) for c in clusters)
        self.dispatcher = Dispatcher(nblocks, self.occupancy.blocks_per_sm, interleave_by_gpc(by_gpc),
                                     spec.frontend.block_launch_cycles, stagger, clusters, by_gpc,
                                     spec.frontend.block_retire_cycles)
        self.sync_window = 1
        if sync_window > 1 and clusters is None:
            self.sync_window = sync_window
        self._ages = itertools.count()
        self._stream = stream_factory
        self.end_cycle = 0

    def _clusters(self, kernel, by_gpc: list, nblocks: int) -> list | None:
        """The launch's clusters (None without): the part must launch them (cc 9.0+, at most its non-portable
        size) and one GPC of the simulated SMs must hold one."""
        launch = kernel.launch
        cluster = getattr(launch, "cluster", (1, 1, 1))
        size = cluster[0] * cluster[1] * cluster[2]
        if size == 1:
            return None
        try:
            check_cluster(self.spec, cluster, non_portable=True)
        except ValueError as exc:
            raise GpusimError(f"{kernel.source}: launch {exc}") from None
        largest = max(len(g) for g in by_gpc)
        if size > largest:
            raise GpusimError(f"{kernel.source}: launch cluster {','.join(map(str, cluster))}: {size} blocks need "
                              f"{size} SMs of one GPC; the largest GPC simulated has {largest}")
        members = cluster_members(launch.grid, cluster)
        return members[:-(-nblocks // size)]

    def l1_bytes(self) -> int:
        """L1 capacity: the unified L1 + shared memory minus the carveout. Without a preference, the one the
        launch needs (the smallest step holding its resident blocks' shared memory); with one (the launch's
        `carveout`, percent), the step it snaps up to, or the smallest that holds one block if that is larger."""
        occ, smem = self.occupancy, self.spec.shared_memory
        if self.kernel.launch.carveout is not None:
            return smem.unified_l1_bytes - occ.shared_memory_per_sm
        carveout = snap_carveout(self.spec, occ.blocks_per_sm * occ.allocated_smem_per_block)
        return smem.unified_l1_bytes - carveout

    def _memory(self, memory, sms: int):
        if memory is None or memory == "hierarchy":
            return MemoryHierarchy(self.spec, sms, self.l1_bytes())
        if memory == "fixed":
            return FixedLatencyMemory(self.spec)
        if isinstance(memory, str):
            raise GpusimError(f"--memory {memory}: expected hierarchy or fixed")
        return memory

    def next_age(self) -> int:
        return next(self._ages)

    def stream(self, block: int, warp: int):
        return self._stream(block, warp)

    def block_retired(self, sm, now: int) -> None:
        if now > self.end_cycle:
            self.end_cycle = now
        self.dispatcher.block_retired(sm, now)

    def clock(self, poll: Any = None) -> None:
        """The SM-level event loop: each SM says when it next has work (a warp can issue, a result arrives, a
        block starts); SMs due at the same cycle run in the order they were scheduled, and simulated time advances
        straight to the next such cycle. (A process per SM on a generic event heap, simpy's, costs several times
        the calendar's work per SM step: measured in validation/results/event-loop.json.) `poll(cycle)`, if given,
        is called every POLL_STEPS SM steps, once every SM is done with the cycle (a safe point; lax-synchronised,
        the last cycle of a window); when it returns True the loop ends there.

        With a synchronisation window W > 1 (lax synchronisation, as in Graphite, Miller et al., HPCA 2010, and
        the bound phase of ZSim, Sanchez and Kozyrakis, ISCA 2013), an SM stepped at cycle t goes on stepping
        itself up to the end of t's W-cycle window before the next SM is stepped. Its state stays in the host's
        caches (a 132-SM GPU's does not fit them), at the cost of SMs meeting in the L2 and DRAM up to W cycles
        out of order: a request that reaches a unit after a later one waits behind it. Within an SM nothing
        changes (its next block still starts on time: a retired block's successor goes to the same SM)."""
        # The calendar holds each SM waiting to be stepped once, by (cycle, order scheduled): a step costs a push
        # and a pop of a native heap no larger than the SM count, whatever the SM count.
        sms = self.sms
        now = 0
        calendar = Calendar()
        for index in range(len(sms)):
            if sms[index].arrivals:
                calendar.push(now, index)
        countdown = POLL_STEPS
        window = self.sync_window
        hierarchy: MemoryHierarchy | None = self.memory if type(self.memory) is MemoryHierarchy else None
        if hierarchy is not None:
            hierarchy.horizon = float(now)
        while calendar.size:
            t: int = calendar.earliest()  # (an int, as the SMs' steps are: a mix of the two would be boxed, compiled)
            if t > now:
                # a safe point: every SM is done with `now`; lax-synchronised, only where t enters a new window,
                # when every SM has been stepped to the end of the one `now` is in
                if countdown <= 0 and poll is not None and (window == 1 or t - t % window != now - now % window):
                    countdown = POLL_STEPS
                    if poll(now if window == 1 else now - now % window + window - 1):
                        return
                now = t
                if hierarchy is not None:  # no SM steps before t from now on
                    hierarchy.horizon = float(t)
            index = calendar.pop()
            sm = sms[index]
            nxt = sm.step(t)
            countdown -= 1
            if window > 1:  # lax synchronisation: on to the end of this window before the next SM is stepped
                end = t - t % window + window
                while t < nxt < end:
                    nxt = sm.step(nxt)
                    countdown -= 1
            if nxt != INF:  # (due again this cycle: at the end of this cycle's batch)
                calendar.push(nxt if nxt > t else t, index)

    def progress(self) -> tuple[int, int]:
        """(blocks retired, warp-instructions issued) so far."""
        blocks, insts = 0, 0
        for sm in self.sms:
            blocks += sm.counters.blocks_done
            insts += sm.counters.inst
        return blocks, insts

    def run(self, progress: Any = None, interrupt: Any = None) -> int:
        """Simulate until the last block retires; return the kernel's cycle count. `progress(blocks_retired,
        cycle, warp_insts)`, if given, hears how far the run is about 4 times a second and once at the end;
        `interrupt()`, if given, is asked every POLL_STEPS SM steps (a few milliseconds): when it returns True the
        run stops at that cycle, `self.interrupted` is set and the cycle reached is returned."""
        self.interrupted = False
        self.dispatcher.start(0)
        poll = None
        stopped: list[int] = []
        if progress is not None or interrupt is not None:
            next_report = time.perf_counter() + PROGRESS_SECONDS

            def poll(now: int) -> bool:
                nonlocal next_report
                if interrupt is not None and interrupt():
                    stopped.append(now)
                    return True
                if progress is not None:
                    wall = time.perf_counter()
                    if wall >= next_report:
                        next_report = wall + PROGRESS_SECONDS
                        blocks, insts = self.progress()
                        progress(blocks, now, insts)
                return False

        # The engine makes millions of short-lived, acyclic objects and no garbage cycles while it runs (what the
        # collector finds after a run is the GPU's own structure, the same whatever the run's length), so the
        # cycle collector is off while it runs: each of its passes would only walk every SM's state, and on a
        # busy GPU that state is larger than the host's caches (validation/results/host-counts.json).
        collecting = gc.isenabled()
        gc.disable()
        try:
            self.clock(poll)
        finally:
            if collecting:
                gc.enable()
        cycles = self.end_cycle
        if stopped:
            cycles = stopped[0]
            self.interrupted = True
            self.settle(cycles)
        if progress is not None:
            blocks, insts = self.progress()
            progress(blocks, cycles, insts)
        return cycles

    def settle(self, now: int) -> None:
        """Bring the time-weighted counters up to `now` (a run stopped early): resident-warp intervals, and the
        stall state of each waiting warp (warps at a barrier keep theirs uncounted)."""
        for sm in self.sms:
            counters = sm.counters
            for sp in sm.sps:
                counters.warps_changed(now, 0, sp.index)
                tallies = counters.tallies
                waiting = list(sp.ready)
                waiting.extend(sp.sleeping())
                for warp in waiting:
                    if warp.since < now:
                        tallies[warp.reason].cycles += now - warp.since
                        if self.observer is not None:
                            self.observer.state(sp, warp, REASONS[warp.reason], warp.since, now)
                        warp.since = now


def build_gpu(spec, kernel, **options) -> GPU:
    return GPU(spec, kernel, **options)
