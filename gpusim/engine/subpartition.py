"""One SM sub-partition (SMSP): its warps, its scheduler, its pipes; issues at most one warp-instruction a cycle.

Warps are either *ready* (operands available; their pipe may still be busy) or *asleep* in a heap keyed by the
cycle they can next issue (a register becoming ready, a branch resolving, a drain finishing). Nothing is
visited in cycles where it cannot change: the SM asks each sub-partition for its next cycle of interest.
"""

from __future__ import annotations

import heapq
import itertools

from .timing import LONG, NONE

INF = float("inf")
NOT_SELECTED = "not_selected"
_seq = itertools.count()  # heap tie-breaker: insertion order, deterministic


class SubPartition:
    def __init__(self, sm, index: int, policy, timing, counters, memory):
        self.sm = sm
        self.index = index
        self.policy = policy
        self.timing = timing
        self.counters = counters
        self.memory = memory
        self.ready: list = []
        self.heap: list = []
        self.pipe_free: dict[str, int] = {}
        self.next_at = INF

    # --- warps arriving, sleeping, waking ----------------------------------------------------------------
    def add_warp(self, warp, now: int) -> None:
        self.counters.warps_changed(now, +1, self.index)
        warp.since = now
        if self.fetch(warp):
            warp.reason = NOT_SELECTED
            self.ready.append(warp)
            self.next_at = min(self.next_at, now)
        else:
            self.sm.retire_warp(warp, now)

    def sleep(self, warp, until: int, reason: str, retire: bool = False) -> None:
        warp.reason = reason
        heapq.heappush(self.heap, (until, next(_seq), warp, retire))
        if until < self.next_at:
            self.next_at = until

    def fetch(self, warp) -> bool:
        """Peek the warp's next instruction; False when its stream has ended."""
        inst = next(warp.stream, None)
        if inst is None:
            warp.inst = None
            return False
        warp.inst = inst
        warp.timing = self.timing(inst.info)
        return True

    # --- one cycle ---------------------------------------------------------------------------------------
    def cycle(self, now: int) -> None:
        heap, ready, stall = self.heap, self.ready, self.counters.stall
        while heap and heap[0][0] <= now:
            t, _, warp, retire = heapq.heappop(heap)
            stall[warp.reason] += t - warp.since
            warp.since = t
            if retire:
                self.sm.retire_warp(warp, t)
                continue
            warp.reason = NOT_SELECTED
            ready.append(warp)
        if ready:
            chosen = None
            pipe_free = self.pipe_free
            for warp in self.policy.order(ready, now):
                pipe = warp.timing.pipe
                if pipe is not None and pipe_free.get(pipe, 0) > now:
                    throttle = warp.timing.throttle
                    if warp.reason != throttle:
                        stall[warp.reason] += now - warp.since
                        warp.since, warp.reason = now, throttle
                elif chosen is None:
                    chosen = warp
                elif warp.reason != NOT_SELECTED:
                    stall[warp.reason] += now - warp.since
                    warp.since, warp.reason = now, NOT_SELECTED
            if chosen is not None:
                self.issue(chosen, now)
        self.next_at = self.next_cycle(now)

    def next_cycle(self, now: int) -> float:
        nxt = self.heap[0][0] if self.heap else INF
        pipe_free = self.pipe_free
        for warp in self.ready:
            pipe = warp.timing.pipe
            t = now + 1
            if pipe is not None:
                busy = pipe_free.get(pipe, 0)
                if busy > t:
                    t = busy
            if t < nxt:
                nxt = t
                if t == now + 1:
                    break
        return nxt

    # --- issue -------------------------------------------------------------------------------------------
    def issue(self, warp, now: int) -> None:
        inst, timing, counters = warp.inst, warp.timing, self.counters
        stall = counters.stall
        stall[warp.reason] += now - warp.since
        stall["selected"] += 1
        counters.inst += 1
        counters.thread_inst += inst.mask.bit_count()
        counters.by_pipeline[inst.pipeline] += 1
        self.policy.issued(warp, now)
        if self.sm.observer is not None:
            self.sm.observer.issued(self.sm, self, warp, inst, now)
        pipe = timing.pipe
        if pipe is not None:
            self.pipe_free[pipe] = now + timing.interval
        if timing.is_memory:
            result = self.memory.access(self.sm.index, inst, now)
            if result.extra_pipe_cycles:
                self.pipe_free[pipe] += result.extra_pipe_cycles
            if inst.is_store or inst.info.is_atomic:
                warp.store_done = max(warp.store_done, result.ready_at)
            for name in inst.dst:
                warp.regs[name] = (result.ready_at, timing.board)
        elif timing.board != NONE:
            ready_at = now + timing.latency
            for name in inst.dst:
                warp.regs[name] = (ready_at, timing.board)
        self.after_issue(warp, timing, now)

    def after_issue(self, warp, issued_timing, now: int) -> None:
        """Fetch the warp's next instruction and put it where it belongs: ready, asleep, at a barrier, gone."""
        nxt = now + 1
        warp.since = nxt
        if not self.fetch(warp):
            self.ready.remove(warp)
            if warp.store_done > nxt:
                self.sleep(warp, warp.store_done, "drain", retire=True)
            else:
                self.sm.retire_warp(warp, nxt)
            return
        if issued_timing.is_barrier:
            self.ready.remove(warp)
            warp.reason = "barrier"
            self.sm.barrier_arrive(warp, now)
            return
        operands, board = warp.operands_ready(nxt)
        if issued_timing.is_branch:
            resolved = now + issued_timing.latency
            if resolved >= operands:
                operands, board = resolved, "branch_resolving"
        if operands > nxt:
            self.ready.remove(warp)
            self.sleep(warp, operands, board)
            if board == LONG:
                self.policy.stalled_long(warp)
        else:
            warp.reason = NOT_SELECTED
