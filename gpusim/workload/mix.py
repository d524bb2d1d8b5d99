"""The instruction mix of a kernel, counted from its program without simulating.

Counting walks the same control flow as the stream (same masks, same loop and if rules), but multiplies
instead of repeating wherever it can: a loop whose trip count is uniform and whose body's control flow does
not depend on the loop index is counted once and scaled; warps whose control flow cannot differ are counted
once and scaled. Tests check that these counts equal what the lazy streams actually produce.
"""

from __future__ import annotations

from collections import Counter

import attrs
import numpy as np

from .expr import ExprError
from .kernel import Kernel
from .program import BRA_INFO, BSSY_INFO, BSYNC_INFO, EXIT_INFO, Exit, If, Instr, Loop, control_names
from .stream import loop_masks, to_mask, uniform_int
from .yamlio import WorkloadError


@attrs.define
class Mix:
    warp_insts: Counter = attrs.Factory(Counter)  # pipeline class -> warp-instructions
    thread_insts: Counter = attrs.Factory(Counter)  # pipeline class -> active-lane instructions
    opcodes: Counter = attrs.Factory(Counter)  # opcode -> warp-instructions
    bytes: Counter = attrs.Factory(Counter)  # (space, 'load' | 'store' | 'atomic') -> bytes
    mma_flops: int = 0

    def add(self, other: "Mix", times: int = 1) -> None:
        for mine, theirs in ((self.warp_insts, other.warp_insts), (self.thread_insts, other.thread_insts),
                             (self.opcodes, other.opcodes), (self.bytes, other.bytes)):
            for key, value in theirs.items():
                mine[key] += value * times
        self.mma_flops += other.mma_flops * times

    def count(self, info, mask: int) -> None:
        lanes = mask.bit_count()
        self.warp_insts[info.pipeline] += 1
        self.thread_insts[info.pipeline] += lanes
        self.opcodes[info.opcode] += 1
        if info.is_memory:
            kind = "atomic" if info.is_atomic else "store" if info.is_store else "load"
            self.bytes[(info.space, kind)] += lanes * info.width
        self.mma_flops += info.mma_flops

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


class _Counter:
    def __init__(self, kernel: Kernel, block: int, warp_in_block: int):
        self.kernel = kernel
        self.env = kernel.base_env(block, warp_in_block)
        self.live = kernel.initial_mask(warp_in_block)
        self.scalable: dict[int, bool] = {}

    def run(self) -> Mix:
        mix = Mix()
        self.body(self.kernel.program, self.live, mix)
        if self.live:
            mix.count(EXIT_INFO, self.live)
        return mix

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
            if kind is Instr:
                self.instr(node, m, mix)
            elif kind is Loop:
                count = uniform_int(node.count, env, "loop count", m)
                saved = env.get(node.var)
                if not isinstance(count, np.ndarray) and self.loop_scales(node):
                    if count > 0:
                        env[node.var] = 0
                        once = Mix()
                        self.body(node.body, m, once)
                        mix.add(once, count)
                else:
                    for i, loop_mask in loop_masks(count, m):
                        env[node.var] = i
                        self.body(node.body, loop_mask, mix)
                        if not loop_mask & self.live:
                            break
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

    def instr(self, node: Instr, mask: int, mix: Mix) -> None:
        repeat = uniform_int(node.repeat, self.env, "repeat", mask) if node.repeat.constant is None \
            else node.repeat.constant
        if node.pred is None:
            for _ in range(repeat):
                mix.count(node.info, mask)
            return
        for k in range(repeat):
            self.env["rep"] = k
            mix.count(node.info, mask & to_mask(node.pred(self.env)))
        self.env["rep"] = 0


def count_warp(kernel: Kernel, block: int, warp_in_block: int) -> Mix:
    try:
        return _Counter(kernel, block, warp_in_block).run()
    except ExprError as exc:
        raise WorkloadError(str(exc)) from None


def kernel_mix(kernel: Kernel) -> Mix:
    """The whole kernel's instruction mix, using the cheapest exact way its control flow allows."""
    launch = kernel.launch
    variance = kernel.warp_variance()
    total = Mix()
    if variance == "every_warp":
        for block in range(launch.nblocks):
            for w in range(launch.warps_per_block):
                total.add(count_warp(kernel, block, w))
        return total
    if variance == "warp_in_block":
        for w in range(launch.warps_per_block):
            total.add(count_warp(kernel, 0, w), launch.nblocks)
        return total
    full_warps = launch.threads_per_block // 32
    if full_warps:
        total.add(count_warp(kernel, 0, 0), full_warps * launch.nblocks)
    if launch.warps_per_block > full_warps:
        total.add(count_warp(kernel, 0, launch.warps_per_block - 1), launch.nblocks)
    return total
