"""The instruction mix of a kernel, counted from its program without simulating.

Counting walks the same control flow as the stream (same masks, same loop and if rules), but multiplies
instead of repeating wherever it can: an unpredicated repeat is counted once and scaled; a loop whose trip
count is uniform and whose body's control flow does not depend on the loop index is counted once and scaled;
warps whose control flow cannot differ are counted once and scaled. Tests check that these counts equal what
the lazy streams actually produce.

What cannot be multiplied (a loop whose body reads its index, a predicated repeat, warps whose control flow
differs) is walked, under a budget of counting steps, so counting takes bounded time whatever the sizes: the
warps are visited in an order that spreads them over the grid, and when the budget runs out the counts are
extrapolated from the warps (and the part of a warp's loop trips) counted so far; `Mix.estimated` says so.
"""

from __future__ import annotations

from collections import Counter, deque
from typing import Callable, Iterator

import attrs
import numpy as np

from .control_masks import loop_masks, mask_to_bool, to_mask, uniform_int
from .expr import ExprError
from .kernel import WARP_SIZE, Kernel
from .program import BRA_INFO, BSSY_INFO, BSYNC_INFO, EXIT_INFO, Exit, If, Instr, Loop, control_names
from .yamlio import WorkloadError

# Counting steps: a statement visited or a loop trip is one, evaluating an expression (a condition, predicate or
# count) EVAL_STEPS, a warp's set-up (its names' arrays) WARP_STEPS; COUNT_STEPS take about 2 s on an idle core.
COUNT_STEPS = 4_000_000
WARP_STEPS = 64
EVAL_STEPS = 4


@attrs.define
class Mix:
    warp_insts: Counter = attrs.Factory(Counter)  # pipeline class -> warp-instructions
    thread_insts: Counter = attrs.Factory(Counter)  # pipeline class -> active-lane instructions
    opcodes: Counter = attrs.Factory(Counter)  # opcode -> warp-instructions
    bytes: Counter = attrs.Factory(Counter)  # (space, 'load' | 'store' | 'atomic') -> bytes
    mma_flops: int = 0
    trips: int = 0  # loop trips taken, all warps together (a loop that issues next to nothing still takes time)
    estimated: str = ""  # "": counted exactly; otherwise how the counts were extrapolated
    stated_warp_insts: int | None = None  # an estimated mix's total its source states exactly (a trace's insts = N)

    def add(self, other: "Mix", times: int | float = 1) -> None:
        """Add `other` `times` over (a float `times`, for an estimate, rounds each count)."""
        exact = type(times) is int
        for mine, theirs in ((self.warp_insts, other.warp_insts), (self.thread_insts, other.thread_insts),
                             (self.opcodes, other.opcodes), (self.bytes, other.bytes)):
            for key, value in theirs.items():
                mine[key] += value * times if exact else round(value * times)
        self.mma_flops += other.mma_flops * times if exact else round(other.mma_flops * times)
        self.trips += other.trips * times if exact else round(other.trips * times)

    def count(self, info, mask: int, times: int = 1) -> None:
        lanes = mask.bit_count()
        self.warp_insts[info.pipeline] += times
        self.thread_insts[info.pipeline] += lanes * times
        self.opcodes[info.opcode] += times
        if info.is_memory:
            kind = "atomic" if info.is_atomic else "store" if info.is_store else "load"
            self.bytes[(info.space, kind)] += lanes * info.width * times
        self.mma_flops += info.mma_flops * times

    @property
    def total_warp_insts(self) -> int:
        return sum(self.warp_insts.values())

    @property
    def total_thread_insts(self) -> int:
        return sum(self.thread_insts.values())


def _has_exit(body) -> bool:
    for node in body:
        if isinstance(node, Exit):
            return True
        if isinstance(node, Loop) and _has_exit(node.body):
            return True
        if isinstance(node, If) and (_has_exit(node.then) or _has_exit(node.orelse)):
            return True
    return False


class _OutOfSteps(Exception):
    """The counting budget ran out (caught by kernel_mix, which extrapolates)."""


class _Budget:
    __slots__ = ("steps", "left")

    def __init__(self, steps: int):
        self.steps = self.left = steps

    def spend(self, steps: int = 1) -> None:
        self.left -= steps
        if self.left < 0:
            raise _OutOfSteps


class _Counter:
    def __init__(self, kernel: Kernel, block: int, warp_in_block: int, budget: _Budget):
        self.kernel = kernel
        self.budget = budget
        budget.left -= WARP_STEPS  # (charged, but the budget runs out at the warp's first statement)
        self.env = kernel.base_env(block, warp_in_block)
        self.live = kernel.initial_mask(warp_in_block)
        self.scalable: dict[int, bool] = {}
        self.mix = Mix()
        self.trips: list[list[int]] = []  # [done, of] for each loop or repeat being walked, outermost first

    def run(self) -> Mix:
        self.body(self.kernel.program, self.live, self.mix)
        if self.live:
            self.mix.count(EXIT_INFO, self.live)
        return self.mix

    def progress(self) -> float:
        """How far through its walked loops the count got (0 to 1), each loop's trips taken as alike."""
        done = 0.0
        for trip, of in reversed(self.trips):
            done = (trip + done) / of
        return done

    def loop_scales(self, node: Loop) -> bool:
        key = id(node)
        if key not in self.scalable:
            names, uses_rand = control_names(node.body)
            self.scalable[key] = node.var not in names and not uses_rand and not _has_exit(node.body)
        return self.scalable[key]

    def body(self, nodes, mask: int, mix: Mix) -> None:
        env = self.env
        for node in nodes:
            m = mask & self.live
            if not m:
                return
            kind = type(node)
            self.budget.spend(1 if kind is Instr and node.repeat.constant is not None else EVAL_STEPS)
            if kind is Instr:
                self.instr(node, m, mix)
            elif kind is Loop:
                saved = env.get(node.var)
                self.loop(node, uniform_int(node.count, env, "loop count", m), m, mix)
                if saved is not None:
                    env[node.var] = saved
            elif kind is If:
                cond = to_mask(node.cond(env))
                mix.count(BSSY_INFO, m)
                mix.count(BRA_INFO, m)
                if m & cond and node.then:
                    self.body(node.then, m & cond, mix)
                if m & ~cond and node.orelse:
                    self.body(node.orelse, m & ~cond & self.live, mix)
                if m & self.live:
                    mix.count(BSYNC_INFO, m & self.live)
            else:
                exiting = m if node.cond is None else m & to_mask(node.cond(env))
                if exiting:
                    mix.count(EXIT_INFO, exiting)
                    self.live &= ~exiting

    def loop(self, node: Loop, count, m: int, mix: Mix) -> None:
        if not isinstance(count, np.ndarray) and self.loop_scales(node):
            if count > 0:  # one trip stands for all of them
                self.env[node.var] = 0
                once = Mix()
                self.trips.append([0, 1])
                try:
                    self.body(node.body, m, once)
                except _OutOfSteps:  # what the trip counted so far stands for that part of every trip
                    mix.add(once, count)
                    raise
                self.trips.pop()
                mix.add(once, count)
                mix.trips += count
            return
        trips = count if not isinstance(count, np.ndarray) else \
            int(np.broadcast_to(count, (WARP_SIZE,))[mask_to_bool(m)].max(initial=0))
        level = [0, max(1, trips)]
        self.trips.append(level)
        trip_steps = EVAL_STEPS if isinstance(count, np.ndarray) else 1  # (a per-lane count's mask each trip)
        for i, loop_mask in loop_masks(count, m):
            level[0] = i
            self.env[node.var] = i
            self.budget.spend(trip_steps)
            mix.trips += 1
            self.body(node.body, loop_mask, mix)
            if not loop_mask & self.live:
                break
        self.trips.pop()

    def instr(self, node: Instr, mask: int, mix: Mix) -> None:
        repeat = uniform_int(node.repeat, self.env, "repeat", mask) if node.repeat.constant is None \
            else node.repeat.constant
        if isinstance(repeat, np.ndarray):
            raise WorkloadError(f"{node.repeat.where}: repeat must be the same for every lane")
        if node.pred is None:
            mix.count(node.info, mask, repeat)
            return
        level = [0, max(1, repeat)]
        self.trips.append(level)
        for k in range(repeat):
            level[0] = k
            self.budget.spend(EVAL_STEPS)
            self.env["rep"] = k
            mix.count(node.info, mask & to_mask(node.pred(self.env)))
        self.env["rep"] = 0
        self.trips.pop()


def count_warp(kernel: Kernel, block: int, warp_in_block: int) -> Mix:
    """One warp's mix, exactly (no budget)."""
    try:
        with np.errstate(all="ignore"):
            return _Counter(kernel, block, warp_in_block, _Budget(1 << 62)).run()
    except ExprError as exc:
        raise WorkloadError(str(exc)) from None


def _warps(kernel: Kernel) -> tuple[int, Callable[[int], tuple[int, int, int]]]:
    """(n, locate): the n warps whose counts add up to the kernel's; locate(i) = (block, warp in block, how many
    warps of the kernel warp i stands for)."""
    launch = kernel.launch
    wpb, blocks = launch.warps_per_block, launch.nblocks
    variance = kernel.warp_variance()
    if variance == "every_warp":
        return blocks * wpb, lambda i: (i // wpb, i % wpb, 1)
    if variance == "warp_in_block":
        return wpb, lambda i: (0, i, blocks)
    full = launch.threads_per_block // 32
    alike = [(0, 0, full * blocks)] if full else []
    if wpb > full:
        alike.append((0, wpb - 1, blocks))  # the block's partial last warp
    return len(alike), alike.__getitem__


def spread(n: int) -> Iterator[int]:
    """0 .. n-1, each once, in an order whose every prefix is spread over the range (ends first, then the
    midpoints of the gaps, level by level)."""
    if n <= 0:
        return
    yield 0
    if n == 1:
        return
    yield n - 1
    gaps = deque([(0, n - 1)])
    while gaps:
        lo, hi = gaps.popleft()
        if hi - lo < 2:
            continue
        mid = (lo + hi) // 2
        yield mid
        gaps.append((lo, mid))
        gaps.append((mid, hi))


def kernel_mix(kernel: Kernel, steps: int | None = None) -> Mix:
    """The whole kernel's instruction mix, using the cheapest exact way its control flow allows, within
    `steps` counting steps (default COUNT_STEPS); beyond them, an estimate (see the module docstring)."""
    try:
        with np.errstate(all="ignore"):  # a float expression's overflow is an inf the checks refuse
            return _kernel_mix(kernel, _Budget(COUNT_STEPS if steps is None else steps))
    except ExprError as exc:
        raise WorkloadError(str(exc)) from None


def _kernel_mix(kernel: Kernel, budget: _Budget) -> Mix:
    n, locate = _warps(kernel)
    total = Mix()
    counted = weight = 0
    partial = None
    for i in spread(n):
        block, warp, times = locate(i)
        counter = _Counter(kernel, block, warp, budget)
        try:
            total.add(counter.run(), times)
        except _OutOfSteps:
            partial = (counter.mix, counter.progress(), times)
            break
        counted += 1
        weight += times
    else:
        return total
    mix, done, times = partial  # the warp counting stopped in: scaled up by how far through its loops it got
    total.add(mix, times / done if done > 0 else times)  # (no trip finished: what it counted, a lower bound)
    weight += times
    estimate = Mix()
    estimate.add(total, (sum(locate(i)[2] for i in range(n)) if n <= 2 else n * locate(0)[2]) / weight)
    estimate.estimated = (f"estimated from {counted:,} of {n:,} warps counted in full and part of "
                          f"{'another' if counted else 'one'} (counting stops after {budget.steps:,} steps)")
    return estimate
