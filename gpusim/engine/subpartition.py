"""One SM sub-partition (SMSP): its warps, its scheduler, its pipes; issues at most one warp-instruction a cycle.

Warps are either *ready* (operands available; their pipe may still be busy) or *asleep* in a heap keyed by the
cycle they can next issue (a register becoming ready, a branch resolving, a drain finishing). Nothing is
visited in cycles where it cannot change: the SM asks each sub-partition for its next cycle of interest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, cast

from librt.vecs import vec
from mypy_extensions import i64

from ..stats.counters import (BARRIER, BRANCH_RESOLVING, DISPATCH_STALL, DRAIN, LONG_SCOREBOARD, MISC, NOT_SELECTED,
                              REASONS, SMCounters)
from . import asynchrony, clusters
from .scheduler import LooseRoundRobin, Policy
from .timing import BOARD_BITS, NONE, PIPES, OpTiming, TimingTable
from ..memory.hierarchy import MemoryHierarchy
from ..memory.keyed_heap import KeyedHeap
from ..isa.inst import WarpInst, next_inst
from .warp import Warp, accumulating_operands_ready, operands_ready

if TYPE_CHECKING:
    from .sm import SM

INF: Final = 1 << 60  # "never": an int that the compiled engine still holds unboxed (62-bit), so cycle times stay ints
# Register-bank conflicts: the warp waits while the operand collector reads its sources. Nsight Compute has no
# reason of its own for it; a register-bank conflict is one of the things its `dispatch_stall` covers (an NVIDIA
# forum thread, "Why there is a dispatch stall when issue almost every IADD3 instruction ... on 3080": IADD3s with
# two sources in one of the two banks show dispatch stalls), and Nsight VSE filed bank conflicts under "Other".
FULL_MASK: Final = 0xFFFFFFFF  # every lane of a warp active: workload.kernel.FULL_MASK, as a C static here
# A sleeping warp's heap entry is a key, one native int: its wake-up cycle << WAKE_SHIFT | its order among the
# sub-partition's sleeps (the tie-breaker: equal wake-ups keep insertion order) << 1 | 1 if it retires on waking;
# beside it, the warp's slot. Entries compare on one int, and a sleep allocates nothing (nor touches another warp:
# the heap moves slots, not references). When the orders run out of bits, the sleepers held are renumbered 0, 1, ...
# in their order (as the clock's calendar does), so the order among equal wake-ups holds at any length of run.
WAKE_SHIFT: Final = 24
ORDER_LIMIT: Final = 1 << (WAKE_SHIFT - 1)  # orders 0 .. ORDER_LIMIT - 1
LAST_WAKE: Final = (1 << (63 - WAKE_SHIFT)) - 1  # the latest cycle a key holds (the calendar's own range)


class SubPartition:
    def __init__(self, sm: SM, index: int, policy: Policy, timing: TimingTable, counters: SMCounters, memory: Any):
        self.sm = sm
        self.sm_index = sm.index
        self.index = index
        self.policy = policy
        self.timing = timing
        self.counters = counters
        self.memory = memory
        # the built-in hierarchy itself (not a subclass or another model, reached through duck typing): called natively
        self.hierarchy: MemoryHierarchy | None = memory if type(memory) is MemoryHierarchy else None
        self.ready: list[Warp] = []  # oldest first (in slot order for a policy with ready_by_slot)
        # the sleeping warps: keys (wake-up cycle, order slept, retire: see WAKE_SHIFT), each with its warp's slot
        self.sleepers = KeyedHeap()
        self.slot_warps: list[Warp | None] = [None] * sm.spec.sm.max_warps  # this sub-partition's warps by slot
        self.pushed: i64 = 0  # the next sleep's order: the tie-breaker, so equal wake-ups keep insertion order
        # native ints, written without making an object per value (librt's vec)
        self.pipe_free: vec[i64] = vec[i64]([0] * len(PIPES))  # first cycle each pipe accepts an instruction (by pipe_index)
        self.pipe_drain: vec[i64] = vec[i64]([0] * len(PIPES))  # memory pipes: when the instructions queued in them are served
        self.queue_depth: int = timing.spec.pipelines.memory_queue_depth
        self.due: vec[i64] = sm.sp_due  # the SM's array of its sub-partitions' next cycle of work: this one's at `index`
        self.timing_by_number: list[OpTiming | None] = timing.by_number
        self.observer: Any = sm.observer
        self.by_slot: bool = bool(policy.ready_by_slot)  # the order the ready list is kept in (the policy's)
        # the built-in lrr itself (not a subclass, which may order otherwise): cycle() rotates the ready list in place
        self.lrr: LooseRoundRobin | None = cast(LooseRoundRobin, policy) if type(policy) is LooseRoundRobin else None
        self.register_banks: Any = timing.register_banks  # the run's register-bank placement and conflict counts
        self.known_conflicts: list[int] = timing.register_banks.known_lists  # by source list (RegisterBanks)
        self.register_bank_conflicts = 0  # extra operand-collector cycles of the instructions issued here
        self.hold_reason: int = MISC  # why an asynchronous wait holds its warp, a code in REASONS (asynchrony.issue sets it)
        self.warpgroups_checked = False  # the launch was checked to suit warpgroup MMA

    # --- warps arriving, sleeping, waking ----------------------------------------------------------------
    def add_warp(self, warp: Warp, now: int) -> None:
        self.counters.warps_changed(now, +1, self.index)
        warp.since = now
        if self.observer is not None:
            self.observer.warp_started(self.sm, self, warp, now)
        if self.fetch(warp):
            inst = warp.inst
            assert inst is not None, "fetch gave the warp an instruction"
            conflicts = self.operand_collector_cycles(inst) if inst.bank_conflicts else 0
            if conflicts:  # its first instruction's sources take the operand collector more than a cycle
                self.sleep(warp, now + conflicts, DISPATCH_STALL)
                return
            warp.reason = NOT_SELECTED
            self.make_ready(warp)
            if now < self.due[self.index]:
                self.due[self.index] = now
        else:
            self.sm.retire_warp(warp, now)

    def operand_collector_cycles(self, inst: WarpInst) -> int:
        """The extra cycles the operand collector takes to read `inst`'s sources (register-bank conflicts,
        worked out once per instruction object), counted on this sub-partition."""
        conflicts = inst.bank_conflicts
        if conflicts < 0:
            known = self.known_conflicts  # by the number of a source list seen before (RegisterBanks.known_lists)
            number = inst.src_list
            conflicts = known[number] if number < len(known) else -1
            if conflicts < 0:
                conflicts = self.register_banks.conflicts(inst)
            else:
                inst.bank_conflicts = conflicts
        self.register_bank_conflicts += conflicts
        return conflicts

    def make_ready(self, warp: Warp) -> None:
        """Into the ready list, kept oldest first (or in slot order, for a policy that asks for it): after the warps
        whose key is not larger, as bisect.insort_right would put it (a short list, scanned from its end)."""
        ready = self.ready
        at = len(ready)
        if self.by_slot:
            key = warp.slot
            while at and ready[at - 1].slot > key:
                at -= 1
        else:
            key = warp.age
            while at and ready[at - 1].age > key:
                at -= 1
        ready.insert(at, warp)

    def sleep(self, warp: Warp, until: int, reason: int, retire: bool = False) -> None:
        warp.reason = reason
        self.push_sleeper(warp, until, 1 if retire else 0)
        if until < self.due[self.index]:
            self.due[self.index] = until

    def fetch(self, warp: Warp) -> bool:
        """Peek the warp's next instruction; False when its stream has ended."""
        inst = next_inst(warp.stream)
        if inst is None:
            warp.inst = None
            return False
        warp.inst = inst
        warp.timing = self.timing(inst.info)
        return True

    def push_sleeper(self, warp: Warp, until: int, retire: i64) -> None:
        """Into the heap of sleeping warps until `until` (`retire`: 1 if it retires on waking), after those that
        wake then too: its key (see WAKE_SHIFT) moved up past the later keys."""
        if not 0 <= until <= LAST_WAKE:
            raise OverflowError(f"cycle {until} is beyond a sleeping warp's range (0 to {LAST_WAKE})")
        if self.pushed == ORDER_LIMIT:
            self.renumber_sleepers()
        wake: i64 = until
        key: i64 = wake << WAKE_SHIFT | self.pushed << 1 | retire
        self.pushed += 1
        slot: i64 = warp.slot
        self.slot_warps[slot] = warp
        self.sleepers.push(key, slot)

    def pop_sleeper(self) -> Warp:
        """Take the earliest key off the heap of sleeping warps; its warp (no longer held by slot: a retired warp
        and its block are freed at once)."""
        slot = self.sleepers.pop()
        warp = cast(Warp, self.slot_warps[slot])
        self.slot_warps[slot] = None
        return warp

    def renumber_sleepers(self) -> None:
        """Give the sleepers held the orders 0, 1, ... in the order they wake (the heap's shape holds)."""
        self.pushed = self.sleepers.renumber(ORDER_LIMIT - 1, 1)

    def sleeping(self) -> list[Warp]:
        """The warps asleep, the earliest to wake first."""
        sleepers = self.sleepers
        return [cast(Warp, self.slot_warps[sleepers.values[at]]) for at in sleepers.ranked()]

    # --- one cycle ---------------------------------------------------------------------------------------
    def cycle(self, now: int) -> None:
        """Wake warps whose wait is over, issue at most one ready warp whose pipe is free, note when to
        come back. Nsight Compute's rules label every ready warp that is not issued: its pipe busy, the pipe's
        throttle (math_pipe_throttle, mio_throttle, lg_throttle); its pipe free, not_selected (another warp of
        this scheduler issued this cycle). A warp is eligible only in the second case."""
        ready, tallies = self.ready, self.counters.tallies
        pipe_free = self.pipe_free
        observer = self.observer
        sleepers = self.sleepers
        while sleepers.size and sleepers.keys[0] >> WAKE_SHIFT <= now:
            key: int = sleepers.keys[0]  # (an int, as `now` is: a mix of the two would be boxed, compiled)
            warp = self.pop_sleeper()
            t = key >> WAKE_SHIFT
            tallies[warp.reason].cycles += t - warp.since
            if observer is not None and t > warp.since:
                observer.state(self, warp, REASONS[warp.reason], warp.since, t)
            warp.since = t
            if key & 1:  # it retires on waking
                self.sm.retire_warp(warp, t)
                asynchrony.check_stuck(warp)
                continue
            warp.reason = NOT_SELECTED if pipe_free[warp.timing.pipe_index] <= t else warp.timing.throttle_code
            self.make_ready(warp)
        chosen: Warp | None = None
        if ready:
            # the policy's order: lrr's is the ready list (kept in slot order) rotated to start after the slot that
            # issued last, read in place; another policy's is the sequence its order() returns
            candidates: list[Warp] = ready
            count = len(ready)
            first = 0
            lrr = self.lrr
            if count > 1:
                if lrr is not None:
                    last = lrr.last
                    while first < count and ready[first].slot <= last:
                        first += 1
                    if first == count:
                        first = 0
                else:
                    order: Any = self.policy.order(ready, now)
                    candidates = order if type(order) is list else list(order)  # compiled: indexed natively
                    count = len(candidates)
            for k in range(count):
                at = first + k
                if at >= count:
                    at -= count
                warp = candidates[at]
                if pipe_free[warp.timing.pipe_index] > now:
                    throttle = warp.timing.throttle_code
                    if warp.reason != throttle:
                        tallies[warp.reason].cycles += now - warp.since
                        if observer is not None and now > warp.since:
                            observer.state(self, warp, REASONS[warp.reason], warp.since, now)
                        warp.since, warp.reason = now, throttle
                elif chosen is None:
                    chosen = warp
                elif warp.reason != NOT_SELECTED:
                    tallies[warp.reason].cycles += now - warp.since
                    if observer is not None and now > warp.since:
                        observer.state(self, warp, REASONS[warp.reason], warp.since, now)
                    warp.since, warp.reason = now, NOT_SELECTED
            if chosen is not None:
                pipe = chosen.timing.pipe_index
                self.issue(chosen, now)
                soon = now + 1
                if pipe and pipe_free[pipe] > soon:  # from the next cycle on the pipe is busy: its waiters throttle
                    for warp in ready:
                        if warp.reason == NOT_SELECTED and warp.timing.pipe_index == pipe:
                            tallies[NOT_SELECTED].cycles += soon - warp.since
                            if observer is not None and soon > warp.since:
                                observer.state(self, warp, REASONS[NOT_SELECTED], warp.since, soon)
                            warp.since, warp.reason = soon, warp.timing.throttle_code
        # the next cycle this sub-partition can do anything
        nxt: int = INF
        if sleepers.size:
            nxt = sleepers.keys[0] >> WAKE_SHIFT
        if ready:
            soon = now + 1
            for warp in ready:
                t = pipe_free[warp.timing.pipe_index]
                if t <= soon:
                    nxt = soon
                    break
                if t < nxt:
                    nxt = t
        self.due[self.index] = nxt

    # --- issue -------------------------------------------------------------------------------------------
    def issue(self, warp: Warp, now: int) -> None:
        """Issue the warp's instruction at `now`: count it, carry it out on its pipe (or the memory model), then
        fetch the warp's next instruction and put the warp where it belongs."""
        inst, timing = warp.inst, warp.timing
        assert inst is not None, "only a warp with a fetched instruction is ready"
        self.count_issue(warp, inst, timing, now)
        if timing.is_memory:
            hold = self.execute_memory(warp, inst, timing, now)
        else:
            hold = self.execute(warp, inst, timing, now)
        self.place(warp, timing, hold, now)

    def count_issue(self, warp: Warp, inst: WarpInst, timing: OpTiming, now: int) -> None:
        """The issue's counts: the warp's interval in its state until now (the issue cycle itself is counted as
        selected), the instruction, its lanes, FLOP and pipeline; the policy and the observer hear of it."""
        counters = self.counters
        counters.tallies[warp.reason].cycles += now - warp.since
        observer = self.observer
        if observer is not None and now > warp.since:
            observer.state(self, warp, REASONS[warp.reason], warp.since, now)
        counters.inst += 1
        mask = inst.mask
        lanes = 32 if mask == FULL_MASK else mask.bit_count()
        counters.thread_inst += lanes
        if timing.fp32_flops:
            counters.fp32_flops += timing.fp32_flops * lanes
        if timing.tensor_flops:
            counters.tensor_flops += timing.tensor_flops
            counters.tensor_pipe_flops += timing.tensor_pipe_flops
            counters.tensor_pipe_cycles += timing.tensor_pipe_cycles
        pipeline_insts = counters.pipeline_insts  # (an item += would add boxed ints generically, compiled)
        pipeline_insts[timing.pipeline_index] = pipeline_insts[timing.pipeline_index] + 1
        lrr = self.lrr
        if lrr is not None:  # LooseRoundRobin.issued, natively
            lrr.last = warp.slot
        else:
            self.policy.issued(warp, now)
        if observer is not None:
            observer.issued(self.sm, self, warp, inst, now)

    def execute_memory(self, warp: Warp, inst: WarpInst, timing: OpTiming, now: int) -> int:
        """A memory instruction: the pipe serves its queue in order; the instruction starts when the one before it
        is done, and the pipe accepts another while fewer than queue_depth wait (full: mio_throttle /
        lg_throttle). Its destinations are ready when the memory model says. Returns its asynchronous hold (see
        asynchrony.issue; 0: none)."""
        pipe = timing.pipe_index
        drain: int = self.pipe_drain[pipe]  # (an int, as `now` is: a mix of the two would be boxed, compiled)
        start = drain if drain > now else now
        ready_at: int
        busy: int
        operands = inst.operands
        if operands is not None and operands.peer >= 0:  # distributed shared memory: another block's
            ready_at, busy = clusters.remote_access(self, warp, inst, start)
        else:
            hierarchy = self.hierarchy
            if hierarchy is not None:
                ready_at, busy = hierarchy.access(self.sm_index, inst, start)
            else:
                ready_at, busy = self.memory.access(self.sm_index, inst, start)  # a MemoryResult or a plain pair
        if self.observer is not None:
            self.observer.accessed(self.sm, self, warp, inst, start, ready_at)
        done = start + (busy if busy > timing.interval else timing.interval)  # the data stage, MSHRs, port
        self.pipe_drain[pipe] = done
        accept = done - (self.queue_depth - 1) * timing.interval
        self.pipe_free[pipe] = accept if accept > now else now + 1
        if timing.drains:
            if ready_at > warp.store_done:
                warp.store_done = ready_at
        if inst.dst:
            warp.regs.write(inst.dst_slots, ready_at << BOARD_BITS | timing.board_code)  # (warp.scoreboard_entry)
        if timing.async_kind and operands is not None:
            return asynchrony.issue(self, warp, inst, timing, now, ready_at)
        return 0

    def execute(self, warp: Warp, inst: WarpInst, timing: OpTiming, now: int) -> int:
        """A compute, control or synchronisation instruction: its pipe is busy for its interval and its
        destinations are ready its latency later. Returns its asynchronous hold (see asynchrony.issue)."""
        pipe = timing.pipe_index
        if pipe:  # index 0: no pipe, only the issue slot
            self.pipe_free[pipe] = now + timing.interval
        if inst.dst and timing.board != NONE:
            warp.regs.write(inst.dst_slots, (now + timing.latency) << BOARD_BITS | timing.board_code)
        if timing.async_kind and inst.operands is not None:
            return asynchrony.issue(self, warp, inst, timing, now, now + timing.latency)
        return 0

    def place(self, warp: Warp, timing: OpTiming, hold: int, now: int) -> None:
        """After the issue of an instruction with `timing` at `now`: fetch the warp's next instruction and put the
        warp where it belongs: gone (its stream ended), at a barrier, parked on an mbarrier (`hold` < 0), asleep
        until its operands are ready (and a branch resolved, an asynchronous wait over: `hold`), or ready."""
        nxt = now + 1
        warp.since = nxt
        following = next_inst(warp.stream)
        if following is None:
            self.exit(warp, hold, nxt)
            return
        warp.inst = following
        number = following.info.number
        known = self.timing_by_number
        following_timing = known[number] if number < len(known) else None
        warp.timing = following_timing if following_timing is not None else self.timing(following.info)
        if timing.is_barrier:
            self.ready.remove(warp)
            warp.reason = BARRIER
            self.sm.barrier_arrive(warp, now)
            asynchrony.check_stuck(warp)
            return
        if hold < 0:  # parked on an mbarrier phase that is not complete: its completion wakes the warp
            self.ready.remove(warp)
            warp.reason = self.hold_reason
            return
        regs = warp.regs
        if warp.timing.chains:
            ready_at, board = accumulating_operands_ready(regs, following, nxt)
        else:
            ready_at, board = operands_ready(regs, following, nxt)
        if timing.is_branch:
            resolved = now + timing.latency
            if resolved >= ready_at:
                ready_at, board = resolved, BRANCH_RESOLVING
        if hold > ready_at:
            ready_at, board = hold, self.hold_reason
        if following.bank_conflicts:  # -1 until counted, once per instruction object
            conflicts = self.operand_collector_cycles(following)
            if conflicts:
                if ready_at <= nxt:
                    board = DISPATCH_STALL
                ready_at += conflicts
        if ready_at > nxt:
            self.ready.remove(warp)
            warp.reason = board
            self.push_sleeper(warp, ready_at, 0)
            if ready_at < self.due[self.index]:
                self.due[self.index] = ready_at
            if board == LONG_SCOREBOARD:
                self.policy.stalled_long(warp)
        else:  # ready next cycle: eligible, or throttled while its pipe is busy
            warp.reason = NOT_SELECTED if self.pipe_free[warp.timing.pipe_index] <= nxt else warp.timing.throttle_code

    def exit(self, warp: Warp, hold: int, nxt: int) -> None:
        """The warp's stream has ended: it exits once its stores are done and its loads have arrived."""
        warp.inst = None
        self.ready.remove(warp)
        if hold < 0:
            asynchrony.cancel_park(warp)
        done = warp.store_done
        latest = warp.regs.latest()
        if latest > done:
            done = latest
        if done > nxt:
            self.sleep(warp, done, DRAIN, retire=True)
        else:
            self.sm.retire_warp(warp, nxt)
            asynchrony.check_stuck(warp)
