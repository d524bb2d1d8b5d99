"""One walk of a block's program for all its warps at once, when their control flow cannot differ.

Addresses are evaluated for (warps, repeats, lanes) together; each warp's instructions are dealt into its own
queue, a chunk at a time as the warps consume them. An address that reads no per-block name is computed once
per kernel and looked up after that; one that reads per-block names is computed for BLOCK_BATCH blocks of
consecutive indices at once (blocks as one more array axis: they start together and reach the same loop trip at
about the same time), and each block takes its share. Lane-offset patterns are shared objects, so the memory
model's memos hash each pattern once.
"""

from __future__ import annotations

from typing import Any, Final, Iterator

import numpy as np

from ..isa.inst import InstQueue, WarpInst, deal, register_slots, source_list
from ..isa.opcodes import BULK
from .expr import MEMO_KEY, ExprError
from .kernel import PER_BLOCK, WARP_IN_BLOCK, WARP_SIZE, Kernel
from .program import Instr
from .warp_walker import DRAWN_AT_RANDOM, WarpWalker, needs_row_checks
from .yamlio import WorkloadError

ADDRESS_CACHE_LIMIT: Final = 1024  # block-invariant address chunks kept per kernel
OFFSETS_POOL_LIMIT: Final = 4096  # distinct lane-offset patterns kept per kernel's streams
ROW_CACHE_LIMIT: Final = 4096  # instruction-row chunks kept per kernel
BLOCK_BATCH: Final = 32  # blocks whose per-block addresses are evaluated together (consecutive indices): each
# batch's numpy work has a fixed cost (~0.9 M host instructions), so more blocks a batch cost less a block, at
# the price of more addresses held (gemm_tile128's default command: 16 blocks 6,599 host instructions a
# warp-instruction in its one-wave run and 130 MB peak, 32 6,479 and 143 MB, 64 6,420 and 157 MB)
BATCH_CACHE_LIMIT: Final = 512  # per-block address batches kept per kernel's streams (freed once its blocks took it)
_SAME_IN_EVERY_BLOCK: Final = WARP_IN_BLOCK | {"lane", "rep"}  # a block walker's arrays for these never change
_PER_BLOCK: Final = ("<per block>",)  # block_addresses' mark for an address that reads a per-block name (never cached)
_UNBATCHED: Final = ("<unbatched>",)  # batched_addresses' mark: an address evaluated block by block (random, refused)


def _plain_values(env: dict, names: tuple[str, ...]) -> tuple | None:
    """The values of `names` in `env`, None unless each is a plain number (a cache key's part)."""
    if not names:
        return ()
    values = tuple([env.get(name) for name in names])
    for value in values:
        if type(value) is not int and type(value) is not float:
            return None
    return values


def _row_names(node: Instr) -> tuple[str, ...]:
    """The names an instruction's rows depend on besides its repeat and lanes: those its predicate, register-name
    placeholders and operands read, less the ones the same in every block walker (sorted), or DRAWN_AT_RANDOM."""
    exprs: list[Any] = list(node.templates.values())
    if node.pred is not None:
        exprs.append(node.pred)
    operands: Any = node.operands
    if operands is not None:
        exprs += [e for e in operands.by_key().values() if e is not None]
    if any(e.uses_rand for e in exprs):
        return DRAWN_AT_RANDOM
    return tuple(sorted(set().union(*[e.names for e in exprs]) - _SAME_IN_EVERY_BLOCK))


class BlockWalker(WarpWalker):
    """Walks a block's program once for all its warps, when their control flow cannot differ (no condition,
    count or register name reads the warp's identity and every warp is full): addresses are evaluated for
    (warps, repeats, lanes) at once and each warp's instructions are handed out from a queue."""

    def __init__(self, kernel: Kernel, block: int, offsets_pool: dict[bytes, bytes], batches: dict) -> None:
        warps = kernel.launch.warps_per_block
        self.offsets_pool: dict[bytes, bytes] = offsets_pool  # the kernel's streams' (see BlockStreams)
        self.batches: dict = batches  # the kernel's streams' batches of per-block addresses (see batched_addresses)
        super().__init__(kernel, block, 0)
        self.env = kernel.base_env(block, np.arange(warps, dtype=np.int64)[:, None, None])
        self.address_shape = (warps,)
        self.first_warp: int = block * warps
        self.queues: list[InstQueue] = [InstQueue() for _ in range(warps)]
        self.items: Iterator[Any] = self.run()

    def simple(self, info: Any, pc: int, mask: int) -> Any:
        return (info, pc, mask)

    def instr_chunk(self, node: Instr, mask: int, first: int, count: int, repeat: int) -> list:
        addrs = lane_rows = keys = None
        if node.addr is not None:
            addrs, lane_rows, keys = self.block_addresses(node, first, count)
        spec = node.operands
        bulk = spec is not None and spec.kind == BULK
        if addrs is not None and (bulk or self.check_all):  # each row's addresses checked as it is made
            rows = self.rows(node, mask, first, count, repeat, addrs, bulk)
        else:
            rows = self.cached_rows(node, mask, first, count, repeat)
        return [(node.info, rows, lane_rows, keys)]

    def cached_rows(self, node: Instr, mask: int, first: int, count: int, repeat: int) -> list:
        """The chunk's rows, made once per kernel for the same node, lanes, repeats and values of the names its
        predicate, register names and operands read (the same in every block that reaches it with them: a loop
        trip's instructions are made once, not once per block), where those are plain numbers and nothing is
        drawn at random."""
        cache = self.kernel.row_cache
        names = cache.get(id(node))
        if names is None:
            names = cache[id(node)] = _row_names(node)
        key = None
        if names != DRAWN_AT_RANDOM:
            values = _plain_values(self.env, names)
            if values is not None:
                key = (id(node), mask, first, count, repeat, values)
                hit = cache.get(key)
                if hit is not None:
                    return hit
        rows = self.rows(node, mask, first, count, repeat, None, False)
        if key is not None:
            if len(cache) >= ROW_CACHE_LIMIT:
                cache.clear()
                cache[id(node)] = names
            cache[key] = rows
        return rows

    def rows(self, node: Instr, mask: int, first: int, count: int, repeat: int, addrs: Any, bulk: bool) -> list:
        """(pc, lanes, dst, src, operands, the registers' scoreboard slots) of repeats first .. first+count-1; with
        `addrs`, each row's active lanes' addresses checked (every warp's), in order."""
        env = self.env
        regs = self.registers(node, repeat) if node.templated else None
        spec = node.operands
        operands = spec.fixed if spec is not None else None
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
            if addrs is not None and m:  # (no lane active, as past a pipeline's last tile: nothing to check)
                for lane_addrs in addrs[:, j]:
                    if bulk:
                        self.check_tile(node, lane_addrs, m, operands)
                    else:
                        self.check(node, lane_addrs, m)
            rows.append((node.pc + 16 * k, m, dst, src, operands,
                         (register_slots(dst), register_slots(src), source_list(src))))
        env["rep"] = 0
        return rows

    def block_addresses(self, node: Instr, first: int, count: int) -> Any:
        """(addresses as (warps, count, 32), the same as rows of 32 lanes (warp w's j-th at w * count + j), the
        address keys per warp and row: (lane 0's address, every lane's offset from it as int64 bytes), one bytes
        object per pattern, shared through `offsets_pool`, so the memory model's memos hash each pattern once).
        An address that reads no per-block name (shared-memory tiles, for one) is the same in every block for the
        same loop indices: it is computed once per kernel and looked up after that."""
        env = self.env
        expr: Any = node.addr
        key: Any = None
        known = self.kernel.register_cache
        names = known.get(("address names", id(node)))
        if names is None:  # the names it reads that change within a block, in a fixed order
            names = _PER_BLOCK if expr.uses_rand or expr.names & PER_BLOCK else tuple(
                sorted(expr.names - _SAME_IN_EVERY_BLOCK))
            known[("address names", id(node))] = names
        if names != _PER_BLOCK:  # (compared by value: compiled, a module's tuple is not one object)
            values = _plain_values(env, names)
            if values is not None:
                key = (id(node), first, count, values)
                hit = self.kernel.address_cache.get(key)
                if hit is not None:
                    addrs, lane_rows, keys, self.check_all = hit
                    return addrs, lane_rows, keys
        else:
            found = self.batched_addresses(node, first, count)
            if found is not None:
                return found
        env["rep"] = np.arange(first, first + count, dtype=np.int64)[:, None] if count > 1 else first
        addrs = self.addresses(node, count)
        env["rep"] = 0
        bases = addrs[:, :, 0]
        keys = self.address_keys(bases.tolist(), addrs - bases[:, :, None])
        lane_rows = addrs.reshape(-1, WARP_SIZE)
        if key is not None:
            cache = self.kernel.address_cache
            if len(cache) >= ADDRESS_CACHE_LIMIT:
                cache.clear()
            cache[key] = (addrs, lane_rows, keys, self.check_all)
        return addrs, lane_rows, keys

    def address_keys(self, bases: list, offsets: Any) -> list:
        """Per warp and repeat, (lane 0's address, every lane's offset from it as int64 bytes), from the block's
        lane-0 addresses `bases` (warps x repeats) and `offsets` (warps, repeats, 32), one bytes object per pattern
        (shared through `offsets_pool`)."""
        rows = offsets.reshape(-1, WARP_SIZE)
        if (rows == rows[0]).all():  # one lane pattern in every warp and repeat (a tile's rows, say): made once
            return self.pattern_keys(bases, rows[0])
        pool = self.offsets_pool
        if len(pool) > OFFSETS_POOL_LIMIT:
            pool.clear()
        data = offsets.tobytes()
        size = WARP_SIZE * 8
        keys = []
        at = 0
        for warp_bases in bases:
            warp_keys = []
            for base in warp_bases:
                pattern = data[at:at + size]
                warp_keys.append((base, pool.setdefault(pattern, pattern)))
                at += size
            keys.append(warp_keys)
        return keys

    def pattern_keys(self, bases: list, row: Any) -> list:
        """address_keys where every warp and repeat has the lane offsets `row` (32 of them): one bytes object,
        shared through `offsets_pool`."""
        pool = self.offsets_pool
        if len(pool) > OFFSETS_POOL_LIMIT:
            pool.clear()
        pattern = row.tobytes()
        pattern = pool.setdefault(pattern, pattern)
        return [[(base, pattern) for base in warp_bases] for warp_bases in bases]

    def batched_addresses(self, node: Instr, first: int, count: int) -> Any:
        """block_addresses for an address that reads per-block names, from the batch of BLOCK_BATCH blocks this
        block belongs to (evaluated by whichever of them gets there first, kept until each has taken its share);
        None where the address is evaluated block by block (it draws at random, the names it reads besides the
        per-block ones are not plain numbers, or evaluating it for several blocks at once failed: then each
        block's own evaluation says what is wrong, when that block gets there)."""
        known = self.kernel.register_cache
        names = known.get(("batch names", id(node)))
        if names is None:  # the names it reads besides the per-block ones that change within a block, in a fixed order
            expr: Any = node.addr
            names = _UNBATCHED if expr.uses_rand else tuple(sorted(expr.names - _SAME_IN_EVERY_BLOCK - PER_BLOCK))
            known[("batch names", id(node))] = names
        if names == _UNBATCHED:
            return None
        values = _plain_values(self.env, names)
        if values is None:
            return None
        block = self.block
        start = block - block % BLOCK_BATCH
        key = (id(node), first, count, values, start)
        batches = self.batches
        batch = batches.get(key)
        if batch is None:
            batch = self.evaluate_batch(node, first, count, start)
            if batch is None:
                known[("batch names", id(node))] = _UNBATCHED
                return None
            if len(batches) >= BATCH_CACHE_LIMIT:
                batches.clear()
            batches[key] = batch
        addrs_all, keys_all, check_all, left = batch
        if left <= 1:
            del batches[key]
        else:
            batch[3] = left - 1
        at = block - start
        addrs = addrs_all[at]
        self.check_all = check_all[at]
        return addrs, addrs.reshape(-1, WARP_SIZE), keys_all[at]

    def evaluate_batch(self, node: Instr, first: int, count: int, start: int) -> list | None:
        """[addresses (blocks, warps, count, 32), address keys per block, check_all per block, blocks] of blocks
        start .. start + BLOCK_BATCH - 1 (those of the grid) at this point of the program, or None if they cannot
        be evaluated together. Each block's values are what its own evaluation gives: the same elementwise
        operations, on arrays with a leading block axis."""
        kernel = self.kernel
        blocks = min(BLOCK_BATCH, kernel.launch.nblocks - start)
        env = dict(self.env)
        env.update(kernel.block_names(np.arange(start, start + blocks, dtype=np.int64)[:, None, None, None],
                                      env["tid"]))
        env[MEMO_KEY] = {}
        env["rep"] = np.arange(first, first + count, dtype=np.int64)[:, None] if count > 1 else first
        shape = (blocks,) + self.address_shape + (count, WARP_SIZE)
        expr: Any = node.addr
        try:
            value = expr(env)
            addrs = value if type(value) is np.ndarray and value.shape == shape else np.broadcast_to(
                np.asarray(value), shape)
        except (ExprError, ArithmeticError, ValueError, TypeError):
            return None
        if addrs.dtype != np.int64:
            return None
        flat: Any = addrs.reshape(blocks, -1)
        ranges = kernel.address_ranges.get(node.info.space)
        bad = [needs_row_checks(ranges, node, bits, low, high) for bits, low, high in zip(
            (flat & node.bad_address_bits).any(axis=1).tolist(), flat.min(axis=1).tolist(), flat.max(axis=1).tolist())]
        bases = addrs[..., 0]
        offsets = addrs - bases[..., None]
        rows = offsets.reshape(blocks, -1, WARP_SIZE)
        if (rows == rows[0, 0]).all():  # one lane pattern in every block, warp and repeat: compared once a batch
            keys = [self.pattern_keys(block_bases, rows[0, 0]) for block_bases in bases.tolist()]
        else:
            keys = [self.address_keys(block_bases, offsets[at]) for at, block_bases in enumerate(bases.tolist())]
        return [addrs, keys, bad, blocks]

    def refill(self) -> bool:
        """Generate the next chunk for every warp of the block; False when the program has ended."""
        try:
            item: Any = next(self.items, None)
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
