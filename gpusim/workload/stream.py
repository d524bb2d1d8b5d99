"""Per-warp instruction streams, produced lazily: a kernel's warp-instructions never sit in memory whole.

SIMT semantics of the stream (the reconvergence-stack order): an `if` issues, as Volta and later compile it, a
convergence-barrier set-up (BSSY) and one divergent branch (BRA) under the current mask, then runs the `then`
side under mask & cond and the `else` side under mask & ~cond, and reconverges at a BSYNC for the lanes still
alive; independent thread scheduling (`its`) issues the same instructions, interleaving the two sides. A loop
whose count differs per lane keeps finished lanes masked off. A predicated instruction issues under the current
mask with only its predicate-true lanes active. An `exit` removes lanes for the rest of the program; the program
ends with an implicit EXIT for the lanes still alive.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Iterator

import numpy as np

from ..errors import shorten
from .expr import Expr, ExprError
from ..isa.inst import InstQueue, QueueStream, WarpInst, deal
from .kernel import FULL_MASK, PER_BLOCK, WARP_IN_BLOCK, WARP_SIZE, Kernel
from ..isa.opcodes import BULK, OpInfo
from .program import (BRA_INFO, BSSY_INFO, BSYNC_INFO, EXIT_INFO, Exit, If, Instr, Loop, Reconverge, operand_values,
                      register_placeholders)
from .yamlio import WorkloadError

REGISTER_CACHE_LIMIT = 4096  # resolved register-name lists kept per kernel
ADDRESS_CACHE_LIMIT = 1024  # block-invariant address chunks kept per kernel
OFFSETS_POOL_LIMIT = 4096  # distinct lane-offset patterns kept per kernel's streams
_SAME_IN_EVERY_BLOCK = WARP_IN_BLOCK | {"lane", "rep"}  # a block walker's arrays for these never change
REPEAT_CHUNK = 256  # repeats whose addresses are evaluated together (bounds memory for huge repeats)
_BITS = np.arange(WARP_SIZE, dtype=np.uint64)
_ONE_WARP = (1, WARP_SIZE)  # the address shape of one warp's one instruction


def mask_to_bool(mask: int) -> np.ndarray:
    return ((np.uint64(mask) >> _BITS) & np.uint64(1)).astype(bool)


def to_mask(value) -> int:
    """A predicate value (scalar or 32-lane array) as a lane bitmask."""
    if isinstance(value, np.ndarray):
        if value.shape != (WARP_SIZE,):
            value = np.broadcast_to(value, (WARP_SIZE,))
        if value.dtype != np.bool_:
            value = value.astype(bool)
        return int.from_bytes(np.packbits(value, bitorder="little").tobytes(), "little")  # lane i: bit i
    return FULL_MASK if value else 0


def uniform_int(expr: Expr, env: dict, what: str, mask: int) -> int | np.ndarray:
    """A count: a whole number >= 0, or (for a per-lane loop count) an int array, >= 0 in the lanes of `mask`."""
    value = expr(env)
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "f":
            whole = np.isfinite(value) & (np.mod(value, 1, where=np.isfinite(value), out=np.zeros_like(value)) == 0)
            if not whole.all():
                _bad_count(expr, what, f"must be whole numbers, got {shorten(value[~whole].flat[0].item())}")
            value = value.astype(np.int64)
        elif value.dtype.kind not in "iu":
            got = "true/false" if value.dtype.kind == "b" else value.dtype
            _bad_count(expr, what, f"must be whole numbers, got {got}")
        counts = np.broadcast_to(value, (WARP_SIZE,))
        negative = mask_to_bool(mask) & (counts < 0)
        if negative.any():
            lane = int(np.flatnonzero(negative)[0])
            _bad_count(expr, what, f"must be >= 0, got {int(counts[lane])} in lane {lane}")
        return value
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        _bad_count(expr, what, f"must be a whole number, got {shorten(value)}")
    if value < 0:
        _bad_count(expr, what, f"must be >= 0, got {shorten(int(value))}")
    return int(value)


def _bad_count(expr: Expr, what: str, problem: str):
    raise WorkloadError(f"{expr.where}: {shorten(expr.text)}: {what} {problem}")


def loop_masks(count, mask: int) -> Iterator[tuple[int, int]]:
    """(iteration, mask) for a loop: uniform counts keep the mask, per-lane counts shrink it."""
    if not isinstance(count, np.ndarray):
        for i in range(count):
            yield i, mask
        return
    counts = np.broadcast_to(count, (WARP_SIZE,))
    active = mask_to_bool(mask)
    trips = int(counts[active].max()) if active.any() else 0
    for i in range(trips):
        m = mask & to_mask(counts > i)
        if m:
            yield i, m


def _placeholder_value(expr: Expr, env: dict) -> int:
    value = expr(env)
    if isinstance(value, np.ndarray) or isinstance(value, float) and not value.is_integer():
        raise WorkloadError(f"{expr.where}: '{expr.text}' must be a whole number, the same for every lane")
    return int(value)


def resolve_registers(names: tuple[str, ...], templates: dict, env: dict) -> tuple[str, ...]:
    """Register names with their {expression} placeholders replaced by the (uniform, whole) values."""
    out = []
    for name in names:
        for text in register_placeholders(name):
            name = name.replace("{" + text + "}", str(_placeholder_value(templates[text], env)))
        out.append(name)
    return tuple(out)


class _LazyRegisters:
    """Register names resolved on demand (for templated instructions with very large repeats)."""

    def __init__(self, node: Instr, env: dict):
        self.node, self.env = node, env

    def __getitem__(self, k: int):
        saved, self.env["rep"] = self.env["rep"], k
        try:
            return (resolve_registers(self.node.dst, self.node.templates, self.env),
                    resolve_registers(self.node.src, self.node.templates, self.env))
        finally:
            self.env["rep"] = saved


class Diverge:
    """In independent-thread-scheduling mode: the two sides of a divergent branch, as two streams the engine
    may interleave. The warp's own stream resumes (with a BSYNC) once both have ended."""

    __slots__ = ("then_stream", "else_stream")

    def __init__(self, then_stream, else_stream):
        self.then_stream, self.else_stream = then_stream, else_stream


class _Live:
    """The warp's live-lane mask, shared by the walkers of divergent paths (an exit on one path is final)."""

    __slots__ = ("mask",)

    def __init__(self, mask: int):
        self.mask = mask


class _WarpWalker:
    def __init__(self, kernel: Kernel, block: int, warp_in_block: int, its: bool = False):
        self.kernel = kernel
        self.block = block
        self.warp = block * kernel.launch.warps_per_block + warp_in_block
        self.env = kernel.base_env(block, warp_in_block)
        self.state = _Live(kernel.initial_mask(warp_in_block))
        self.check_all = False
        self.its = its

    @property
    def live(self) -> int:
        return self.state.mask

    def side(self, nodes, mask: int) -> Iterator[WarpInst]:
        """A walker for one side of a divergent branch: its own copy of the loop indices, the same lanes."""
        clone = object.__new__(_WarpWalker)
        clone.kernel, clone.block, clone.warp, clone.state = self.kernel, self.block, self.warp, self.state
        clone.env, clone.check_all, clone.its = dict(self.env), False, True
        return clone.walk([[nodes, 0, mask, None]])

    def run(self) -> Iterator[WarpInst]:
        yield from self.walk([[self.kernel.program, 0, self.state.mask, None]])
        if self.state.mask:
            yield self.simple(EXIT_INFO, self.kernel.exit_pc, self.state.mask)

    def simple(self, info: OpInfo, pc: int, mask: int):
        """A branch, reconvergence or exit instruction (no registers, no addresses)."""
        return WarpInst(info, self.warp, self.block, pc, mask, (), (), None)

    def walk(self, stack) -> Iterator[WarpInst]:
        """Instructions from one generator frame: nested bodies live on an explicit stack of
        [nodes, next index, mask, loop state] frames instead of nested generators (cheaper per instruction)."""
        env, state = self.env, self.state
        while stack:
            frame = stack[-1]
            nodes, index, mask, loop = frame
            m = mask & state.mask
            if index >= len(nodes) or not m:
                stack.pop()
                if loop is not None:  # end of a loop trip: start the next one, or leave the loop
                    node, trips, saved = loop
                    trip = next(trips, None) if m else None
                    if trip is not None:
                        env[node.var] = trip[0]
                        stack.append([node.body, 0, trip[1], loop])
                    elif saved is not None:
                        env[node.var] = saved
                continue
            node = nodes[index]
            frame[1] = index + 1
            kind = type(node)
            if kind is Instr:
                repeat = node.repeat.constant
                if repeat is None:
                    repeat = uniform_int(node.repeat, env, "repeat", m)
                    if isinstance(repeat, np.ndarray):
                        raise WorkloadError(f"{node.repeat.where}: repeat must be the same for every lane")
                for first in range(0, repeat, REPEAT_CHUNK):
                    yield from self.instr_chunk(node, m, first, min(REPEAT_CHUNK, repeat - first), repeat)
            elif kind is Loop:
                trips = loop_masks(uniform_int(node.count, env, "loop count", m), m)
                trip = next(trips, None)
                if trip is not None:
                    saved = env.get(node.var)
                    env[node.var] = trip[0]
                    stack.append([node.body, 0, trip[1], (node, trips, saved)])
            elif kind is If:
                cond = to_mask(node.cond(env))
                yield self.simple(BSSY_INFO, node.setup_pc, m)
                yield self.simple(BRA_INFO, node.pc, m)
                stack.append([(node.reconverge,), 0, m, None])  # runs after both sides
                if self.its and m & cond and m & ~cond and node.then and node.orelse:
                    yield Diverge(self.side(node.then, m & cond), self.side(node.orelse, m & ~cond))
                    continue
                if m & ~cond and node.orelse:  # pushed first, runs second
                    stack.append([node.orelse, 0, m & ~cond, None])
                if m & cond and node.then:
                    stack.append([node.then, 0, m & cond, None])
            elif kind is Reconverge:
                yield self.simple(BSYNC_INFO, node.pc, m)
            else:
                exiting = m if node.cond is None else m & to_mask(node.cond(env))
                if exiting:
                    yield self.simple(EXIT_INFO, node.pc, exiting)
                    state.mask &= ~exiting

    def instr_chunk(self, node: Instr, mask: int, first: int, count: int, repeat: int) -> list[WarpInst]:
        """Repeats first .. first+count-1 of an instruction; addresses for all of them in one evaluation."""
        env = self.env
        info, pred, warp, block, pc = node.info, node.pred, self.warp, self.block, node.pc
        addrs = None
        if node.addr is not None:
            # `rep` as a column broadcasts the address expression to (count, 32).
            env["rep"] = np.arange(first, first + count, dtype=np.int64)[:, None] if count > 1 else first
            addrs = self.addresses(node, count)
            env["rep"] = 0
        regs = self.registers(node, repeat) if node.templated else None
        dst, src = node.dst, node.src
        spec = node.operands
        operands = spec.fixed if spec is not None else None
        bulk = spec is not None and spec.kind == BULK
        out = []
        for j in range(count):
            k = first + j
            if pred is None:
                m = mask
            else:
                env["rep"] = k
                m = mask & to_mask(pred(env))
            if regs is not None:
                dst, src = regs[k]
            if spec is not None and spec.fixed is None:
                env["rep"] = k
                operands = self.operands(node)
            lane_addrs = None
            if addrs is not None:
                lane_addrs = addrs[j]
                if bulk:
                    self.check_tile(node, lane_addrs, m, operands)
                elif m != FULL_MASK or self.check_all:
                    self.check(node, lane_addrs, m)
            out.append(WarpInst(info, warp, block, pc + 16 * k, m, dst, src, lane_addrs, None, operands))
        env["rep"] = 0
        return out

    def operands(self, node: Instr):
        """An asynchronous instruction's operands in this warp's environment (with `rep` set): whole numbers the
        same for every lane, and the mbarrier's name with its placeholders resolved."""
        spec, env = node.operands, self.env

        def uniform(e: Expr):
            value = e(env)
            if isinstance(value, np.ndarray):
                if value.size and (value == value.flat[0]).all():
                    return value.flat[0].item()
                raise WorkloadError(f"{e.where}: {shorten(e.text)}: must be the same for every lane")
            return value.item() if isinstance(value, np.generic) else value

        exprs = spec.by_key()
        barrier = resolve_registers((spec.barrier,), node.templates, env)[0] if "{" in spec.barrier else spec.barrier
        return operand_values(exprs, barrier, uniform, spec.where)

    def check_tile(self, node: Instr, addrs: np.ndarray, mask: int, operands) -> None:
        """A bulk (TMA) copy: each active lane copies one tile of `rows` rows of bytes / rows bytes, `pitch` apart,
        from its address: 16-byte aligned (the TMA's rule for addresses, row sizes and strides) and inside one
        global buffer."""
        active = addrs if mask == FULL_MASK else addrs[mask_to_bool(mask)]
        row = operands.bytes // operands.rows
        if row % 16 or (operands.rows > 1 and operands.pitch % 16):
            _bad_address(node, f"a bulk copy's rows ({row} bytes) and pitch ({operands.pitch}) must be multiples "
                               f"of 16 bytes")
        extent = (operands.rows - 1) * operands.pitch + row
        ranges = self.kernel.address_ranges.get("global")
        for address in sorted(set(active.tolist())):
            if address < 0:
                _bad_address(node, f"negative address {address}")
            if address % 16:
                _bad_address(node, f"address {address} is not aligned to 16 bytes (a bulk copy's rule)")
            if ranges is not None and not _inside(ranges, address, address + extent):
                _bad_address(node, _outside(ranges, address, extent, "global").replace(
                    f"({extent}-byte access)", f"(a {extent:,}-byte tile)"))

    def registers(self, node: Instr, repeat: int) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
        """Resolved register names for each repeat, cached by the values of the other names they read."""
        env = self.env
        # Key by the values the placeholders take (8 keys for "f{i % 8}", not one per i); placeholders that read
        # `rep` are resolved per repeat below, so they key by the other names they read.
        key = (id(node), repeat) + tuple(
            _placeholder_value(expr, env) if "rep" not in expr.names
            else tuple(env[n] for n in sorted(expr.names - {"rep"})) for expr in node.templates.values())
        # a huge templated repeat would cache one entry per repeat: resolve those on demand instead
        if repeat > 4 * REPEAT_CHUNK:
            return _LazyRegisters(node, env)
        cache = self.kernel.register_cache
        if len(cache) > REGISTER_CACHE_LIMIT:
            cache.clear()
        hit = cache.get(key)
        if hit is None:
            hit = []
            for k in range(repeat):
                env["rep"] = k
                hit.append((resolve_registers(node.dst, node.templates, env),
                            resolve_registers(node.src, node.templates, env)))
            env["rep"] = 0
            cache[key] = hit
        return hit

    address_shape = ()  # leading axes before (repeat, lane): a block walker adds the warp axis

    def addresses(self, node: Instr, repeat: int) -> np.ndarray:
        """Addresses as a (..., repeat, 32) int64 array; full-warp accesses are checked here in one pass."""
        value = node.addr(self.env)
        shape = self.address_shape + (repeat, WARP_SIZE)
        if type(value) is np.ndarray and value.shape == shape:
            addrs = value
        elif type(value) is np.ndarray and value.shape == _ONE_WARP[1:] and shape == _ONE_WARP:
            addrs = value.reshape(shape)  # (a view, read-only as broadcast_to's is, at a fraction of its cost)
            addrs.flags.writeable = False
        else:
            addrs = np.broadcast_to(np.asarray(value), shape)
        if addrs.dtype != np.int64:
            addrs = _whole_addresses(node, addrs)
        # negative (sign bit), misaligned or outside the buffers, for every lane of every repeat, in one pass;
        # when something is, each instruction checks its active lanes (inactive lanes' addresses are unused)
        ranges = self.kernel.address_ranges.get(node.info.space)
        self.check_all = bool((addrs & node.bad_address_bits).any()) or ranges is not None and not _inside(
            ranges, int(addrs.min()), int(addrs.max()) + node.info.width)
        return addrs

    def check(self, node: Instr, addrs: np.ndarray, mask: int) -> None:
        active = addrs if mask == FULL_MASK else addrs[mask_to_bool(mask)]
        if not active.size:
            return
        if active.min() < 0:
            _bad_address(node, f"negative address {int(active.min())}")
        width = node.info.width
        misaligned = active % width
        if misaligned.any():
            bad = int(active[np.nonzero(misaligned)[0][0]])
            _bad_address(node, f"address {bad} is not aligned to the {width}-byte access width")
        ranges = self.kernel.address_ranges.get(node.info.space)
        if ranges is not None and not _inside(ranges, int(active.min()), int(active.max()) + width):
            bases, ends, names = ranges
            if not len(bases):  # no buffer of this space at all: every address is outside
                _bad_address(node, _outside(ranges, int(active[0]), width, node.info.space))
            index = np.searchsorted(np.asarray(bases, dtype=np.int64), active, side="right") - 1
            outside = (index < 0) | (active + width > np.asarray(ends, dtype=np.int64)[np.maximum(index, 0)])
            if outside.any():
                _bad_address(node, _outside(ranges, int(active[outside][0]), width, node.info.space))


def _bad_address(node: Instr, problem: str):
    raise WorkloadError(f"{node.addr.where}: {shorten(node.addr.text)}: {problem}")


def _whole_addresses(node: Instr, addrs: np.ndarray) -> np.ndarray:
    """Addresses as int64: whole, finite numbers below 2^62 (a float or unsigned result is checked first)."""
    kind = addrs.dtype.kind
    if kind == "f":
        finite = np.isfinite(addrs)
        values = np.where(finite, addrs, 0.5)  # (a non-finite one fails as a fraction would)
        ok = (np.mod(values, 1) == 0) & (np.abs(values) < 2.0**62)
        if ok.all():
            return addrs.astype(np.int64)
        got = shorten(addrs[~ok].flat[0].item())
    elif kind in "iu":
        if kind == "i" or not addrs.size or int(addrs.max()) < 2**62:
            return addrs.astype(np.int64)
        got = shorten(int(addrs.max()))
    else:
        got = "true/false" if kind == "b" else "a number too large for 64 bits"
    _bad_address(node, f"addresses must be whole byte addresses below 2^62, got {got}")


def _inside(ranges, lo: int, end: int) -> bool:
    """Whether bytes lo .. end-1 lie in one of the (sorted bases, ends, names) ranges."""
    bases, ends, _ = ranges
    i = bisect_right(bases, lo) - 1
    return i >= 0 and end <= ends[i]


def _outside(ranges, address: int, width: int, space: str) -> str:
    """Why an access lies outside the declared memory, naming the nearest buffer."""
    bases, ends, names = ranges
    if space == "shared":
        return f"shared address {address} ({width}-byte access) is outside the block's {ends[0]:,} bytes of " \
               f"shared memory"
    if not bases:
        return f"global address {address:#x} ({width}-byte access): the workload declares no global buffer"
    i = max(0, bisect_right(bases, address) - 1)
    return f"global address {address:#x} ({width}-byte access) is outside every global buffer: it is " \
           f"{address - bases[i]:,} bytes from the start of '{names[i]}', which holds {ends[i] - bases[i]:,}"


class _BlockWalker(_WarpWalker):
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
                m = mask & to_mask(node.pred(env))
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
        if not expr.uses_rand and not expr.names & PER_BLOCK:
            values = tuple(env.get(name) for name in sorted(expr.names - _SAME_IN_EVERY_BLOCK))
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


class BlockStreams:
    """Per-warp streams of one kernel that share one walker per block where the kernel allows it (see
    _BlockWalker); otherwise each warp walks the program alone. The results are the same either way."""

    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.walkers: dict[int, _BlockWalker] = {}
        self.offsets_pool: dict[bytes, bytes] = {}  # lane-offset patterns, one object each (see block_addresses)
        launch = kernel.launch
        self.shared = (kernel.warp_variance() == "none" and launch.threads_per_block % WARP_SIZE == 0
                       and launch.warps_per_block > 1 and not _templates_read_identity(kernel))

    def __call__(self, block: int, warp_in_block: int) -> Iterator[WarpInst]:
        if not self.shared:
            return warp_stream(self.kernel, block, warp_in_block)
        walker = self.walkers.get(block)
        if walker is None:
            walker = self.walkers[block] = _BlockWalker(self.kernel, block, self.offsets_pool)
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
        yield from _WarpWalker(kernel, block, warp_in_block, its).run()
    except ExprError as exc:
        raise WorkloadError(str(exc)) from None
