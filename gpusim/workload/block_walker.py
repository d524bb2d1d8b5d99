"""One walk of a block's program for all its warps at once, when their control flow cannot differ.

Addresses are evaluated for (warps, repeats, lanes) together; each warp's instructions are dealt into its own
queue, a chunk at a time as the warps consume them. An address that reads no per-block name is computed once
per kernel and looked up after that, and lane-offset patterns are shared objects, so the memory model's memos
hash each pattern once.
"""

from __future__ import annotations

import numpy as np

from ..isa.inst import InstQueue, WarpInst, deal
from ..isa.opcodes import BULK, OpInfo
from .expr import ExprError
from .kernel import FULL_MASK, PER_BLOCK, WARP_IN_BLOCK, WARP_SIZE, Kernel
from .program import Instr
from .warp_walker import WarpWalker
from .yamlio import WorkloadError

ADDRESS_CACHE_LIMIT = 1024  # block-invariant address chunks kept per kernel
OFFSETS_POOL_LIMIT = 4096  # distinct lane-offset patterns kept per kernel's streams
_SAME_IN_EVERY_BLOCK = WARP_IN_BLOCK | {"lane", "rep"}  # a block walker's arrays for these never change
_PER_BLOCK = ("<per block>",)  # block_addresses' mark for an address that reads a per-block name (never cached)


class BlockWalker(WarpWalker):
    """Walks a block's program once for all its warps, when their control flow cannot differ (no condition,
    count or register name reads the warp's identity and every warp is full): addresses are evaluated for
    (warps, repeats, lanes) at once and each warp's instructions are handed out from a queue."""

    def __init__(self, kernel: Kernel, block: int, offsets_pool: dict[bytes, bytes]):
        warps = kernel.launch.warps_per_block
        self.offsets_pool = offsets_pool  # the kernel's streams' (see BlockStreams)
        super().__init__(kernel, block, 0)
        self.env = kernel.base_env(block, np.arange(warps, dtype=np.int64)[:, None, None])
        self.address_shape = (warps,)
        self.first_warp = block * warps
        self.queues = [InstQueue() for _ in range(warps)]
        self.items = self.run()

    def simple(self, info: OpInfo, pc: int, mask: int):
        return (info, pc, mask)

    def instr_chunk(self, node: Instr, mask: int, first: int, count: int, repeat: int) -> list:
        env = self.env
        addrs = lane_rows = keys = None
        if node.addr is not None:
            addrs, lane_rows, keys = self.block_addresses(node, first, count)
        regs = self.registers(node, repeat) if node.templated else None
        spec = node.operands
        operands = spec.fixed if spec is not None else None
        bulk = spec is not None and spec.kind == BULK
        rows = []
        for j in range(count):
            k = first + j
            m = mask
            if node.pred is not None:
                env["rep"] = k
                m = mask & self.predicate(node.pred)
            dst, src = regs[k] if regs is not None else (node.dst, node.src)
            if spec is not None and spec.fixed is None:
                env["rep"] = k
                operands = self.operands(node)
            if addrs is not None and (bulk or m != FULL_MASK or self.check_all):
                for lane_addrs in addrs[:, j]:
                    if bulk:
                        self.check_tile(node, lane_addrs, m, operands)
                    else:
                        self.check(node, lane_addrs, m)
            rows.append((node.pc + 16 * k, m, dst, src, operands))
        env["rep"] = 0
        return [(node.info, rows, lane_rows, keys)]

    def block_addresses(self, node: Instr, first: int, count: int):
        """(addresses as (warps, count, 32), the same as rows of 32 lanes (warp w's j-th at w * count + j), the
        address keys per warp and row: (lane 0's address, every lane's offset from it as int64 bytes), one bytes
        object per pattern, shared through `offsets_pool`, so the memory model's memos hash each pattern once).
        An address that reads no per-block name (shared-memory tiles, for one) is the same in every block for the
        same loop indices: it is computed once per kernel and looked up after that."""
        env, expr = self.env, node.addr
        key = None
        known = self.kernel.register_cache
        names = known.get(("address names", id(node)))
        if names is None:  # the names it reads that change within a block, in a fixed order
            names = _PER_BLOCK if expr.uses_rand or expr.names & PER_BLOCK else tuple(
                sorted(expr.names - _SAME_IN_EVERY_BLOCK))
            known[("address names", id(node))] = names
        if names is not _PER_BLOCK:
            values = tuple(env.get(name) for name in names)
            if all(type(v) in (int, float) for v in values):
                key = (id(node), first, count, values)
                hit = self.kernel.address_cache.get(key)
                if hit is not None:
                    addrs, lane_rows, keys, self.check_all = hit
                    return addrs, lane_rows, keys
        env["rep"] = np.arange(first, first + count, dtype=np.int64)[:, None] if count > 1 else first
        addrs = self.addresses(node, count)
        env["rep"] = 0
        bases = addrs[:, :, 0]
        data = (addrs - bases[:, :, None]).tobytes()
        size = WARP_SIZE * 8
        pool = self.offsets_pool
        if len(pool) > OFFSETS_POOL_LIMIT:
            pool.clear()
        keys = []
        at = 0
        for warp_bases in bases.tolist():
            warp_keys = []
            for base in warp_bases:
                pattern = data[at:at + size]
                warp_keys.append((base, pool.setdefault(pattern, pattern)))
                at += size
            keys.append(warp_keys)
        lane_rows = addrs.reshape(-1, WARP_SIZE)
        if key is not None:
            cache = self.kernel.address_cache
            if len(cache) >= ADDRESS_CACHE_LIMIT:
                cache.clear()
            cache[key] = (addrs, lane_rows, keys, self.check_all)
        return addrs, lane_rows, keys

    def refill(self) -> bool:
        """Generate the next chunk for every warp of the block; False when the program has ended."""
        try:
            item = next(self.items, None)
        except ExprError as exc:
            raise WorkloadError(str(exc)) from None
        if item is None:
            return False
        block = self.block
        if len(item) == 4:
            info, rows, lane_rows, keys = item
            deal(self.queues, self.first_warp, block, info, rows, lane_rows, keys)
        else:
            info, pc, mask = item
            inst = WarpInst(info, None, block, pc, mask, (), (), None)
            for queue in self.queues:
                queue.append(inst)
        return True
