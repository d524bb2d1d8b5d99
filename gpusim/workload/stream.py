"""Per-warp instruction streams, produced lazily: a kernel's warp-instructions never sit in memory whole.

SIMT semantics of the stream (the reconvergence-stack order): an `if` issues, as Volta and later compile it, a
convergence-barrier set-up (BSSY) and one divergent branch (BRA) under the current mask, then runs the `then`
side under mask & cond and the `else` side under mask & ~cond, and reconverges at a BSYNC for the lanes still
alive; independent thread scheduling (`its`) issues the same instructions, interleaving the two sides. A loop
whose count differs per lane keeps finished lanes masked off. A predicated instruction issues under the current
mask with only its predicate-true lanes active. An `exit` removes lanes for the rest of the program; the program
ends with an implicit EXIT for the lanes still alive.

`warp_stream` walks one warp (warp_walker); `BlockStreams` hands out the streams of a kernel's warps, one walk
per block for all its warps where their control flow cannot differ (block_walker), the same instructions either
way. The lane masks are control_masks', the address checks address_checks'.
"""

from __future__ import annotations

from typing import Iterator

from ..isa.inst import QueueStream, WarpInst
from .block_walker import ADDRESS_CACHE_LIMIT, OFFSETS_POOL_LIMIT, BlockWalker
from .control_masks import loop_masks, mask_to_bool, to_mask, uniform_int
from .expr import ExprError
from .kernel import WARP_SIZE, Kernel
from .warp_walker import REGISTER_CACHE_LIMIT, REPEAT_CHUNK, Diverge, WarpWalker, resolve_registers
from .yamlio import WorkloadError

__all__ = ["ADDRESS_CACHE_LIMIT", "OFFSETS_POOL_LIMIT", "REGISTER_CACHE_LIMIT", "REPEAT_CHUNK", "BlockStreams",
           "Diverge", "WarpInst", "loop_masks", "mask_to_bool", "resolve_registers", "to_mask", "uniform_int",
           "warp_stream"]


class BlockStreams:
    """Per-warp streams of one kernel that share one walker per block where the kernel allows it (see
    BlockWalker); otherwise each warp walks the program alone. The results are the same either way."""

    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.walkers: dict[int, BlockWalker] = {}
        self.offsets_pool: dict[bytes, bytes] = {}  # lane-offset patterns, one object each (see block_addresses)
        self.batches: dict = {}  # per-block addresses evaluated for several blocks at once (see batched_addresses)
        launch = kernel.launch
        self.shared = (kernel.warp_variance() == "none" and launch.threads_per_block % WARP_SIZE == 0
                       and launch.warps_per_block > 1 and not _templates_read_identity(kernel))

    def __call__(self, block: int, warp_in_block: int) -> Iterator[WarpInst]:
        if not self.shared:
            return warp_stream(self.kernel, block, warp_in_block)
        walker = self.walkers.get(block)
        if walker is None:
            walker = self.walkers[block] = BlockWalker(self.kernel, block, self.offsets_pool, self.batches)
        stream = QueueStream(walker.queues[warp_in_block], walker.refill)
        if warp_in_block == self.kernel.launch.warps_per_block - 1:
            del self.walkers[block]  # every warp holds its stream; the block no longer needs an entry here
        return stream


def _templates_read_identity(kernel: Kernel) -> bool:
    from .kernel import PER_BLOCK, WARP_IN_BLOCK
    from .program import walk_instrs

    found = []
    walk_instrs(kernel.program, lambda node: found.extend(
        e for e in node.templates.values() if e.names & (WARP_IN_BLOCK | PER_BLOCK) or e.uses_rand))
    return bool(found)


def warp_stream(kernel: Kernel, block: int, warp_in_block: int, its: bool = False) -> Iterator[WarpInst]:
    """The warp-instructions one warp issues, generated as they are consumed. With `its`, a divergent `if`
    yields a Diverge (two streams the engine may interleave) followed by a BSYNC at the reconvergence point."""
    if not 0 <= block < kernel.launch.nblocks or not 0 <= warp_in_block < kernel.launch.warps_per_block:
        raise ValueError(f"no warp {warp_in_block} in block {block} of {kernel.name}")
    try:
        yield from WarpWalker(kernel, block, warp_in_block, its).run()
    except ExprError as exc:
        raise WorkloadError(str(exc)) from None
