"""One warp's walk through a kernel's program, yielding its warp-instructions as they are consumed.

The walker keeps nested bodies on an explicit stack of frames, evaluates an instruction's addresses for a chunk
of its repeats at once, resolves templated register names and asynchronous operands in the warp's environment,
and checks the addresses of the lanes that are active. Under independent thread scheduling a divergent `if`
yields a Diverge: its two sides as walkers of their own, sharing the warp's live lanes.
"""

from __future__ import annotations

import sys
from typing import Any, Final, Iterator

import numpy as np

from ..errors import shorten
from ..isa.inst import WarpInst
from ..isa.opcodes import BULK
from .address_checks import bad_address, whole_addresses, why_outside, within_ranges
from .control_masks import loop_masks, mask_to_bool, to_mask, uniform_int
from .kernel import FULL_MASK, LANES, WARP_SIZE, Kernel
from .program import (BRA_INFO, BSSY_INFO, BSYNC_INFO, EXIT_INFO, If, Instr, Loop, Reconverge, operand_values,
                      register_placeholders)
from .yamlio import WorkloadError

REGISTER_CACHE_LIMIT: Final = 4096  # resolved register-name lists kept per kernel
REPEAT_CHUNK: Final = 256  # repeats whose addresses are evaluated together (bounds memory for huge repeats)
_ONE_WARP: Final = (1, WARP_SIZE)  # the address shape of one warp's one instruction


def _placeholder_value(expr: Any, env: dict) -> int:
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
        out.append(sys.intern(name))  # (see Parser.registers)
    return tuple(out)


# what _operand_names (and the block walker's _row_names) answer for operands or rows that draw random numbers
# (never cached)
DRAWN_AT_RANDOM: Final = ("<random>",)


def _operand_names(node: Instr) -> tuple[str, ...]:
    """The names an instruction's asynchronous operands and its mbarrier name's placeholders read (sorted), or
    DRAWN_AT_RANDOM."""
    spec: Any = node.operands
    exprs = [e for e in spec.by_key().values() if e is not None]
    exprs += [node.templates[text] for text in register_placeholders(spec.barrier)]
    if any(e.uses_rand for e in exprs):
        return DRAWN_AT_RANDOM
    return tuple(sorted(set().union(*[e.names for e in exprs])))


class _LazyRegisters:
    """Register names resolved on demand (for templated instructions with very large repeats)."""

    def __init__(self, node: Instr, env: dict) -> None:
        self.node, self.env = node, env

    def __getitem__(self, k: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
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

    def __init__(self, then_stream: Any, else_stream: Any) -> None:
        self.then_stream, self.else_stream = then_stream, else_stream


class _Live:
    """The warp's live-lane mask, shared by the walkers of divergent paths (an exit on one path is final)."""

    __slots__ = ("mask",)

    def __init__(self, mask: int):
        self.mask = mask


def needs_row_checks(ranges: Any, node: Instr, bad_bits: bool, low: int, high: int) -> bool:
    """Whether a chunk's addresses (lowest `low`, highest `high`; `bad_bits`: some negative or misaligned) must be
    checked row by row, on their active lanes: some is negative or misaligned, or they reach outside `ranges`."""
    return bad_bits or ranges is not None and not within_ranges(ranges, low, high + node.info.width)


class WarpWalker:
    def __init__(self, kernel: Kernel, block: int, warp_in_block: int, its: bool = False,
                 side_of: WarpWalker | None = None) -> None:
        """One warp's walker; `side_of`: the walker of a warp whose divergent branch this one walks a side of (its
        own copy of the loop indices, the same lanes)."""
        self.kernel: Kernel = kernel
        self.block: int = block
        self.check_all: bool = False
        self.its: bool = its
        # leading axes before (repeat, lane): a block walker adds the warp axis
        self.address_shape: tuple[int, ...] = ()
        if side_of is not None:
            self.warp: int = side_of.warp
            self.env: dict[str, Any] = dict(side_of.env)
            self.state: _Live = side_of.state
            return
        self.warp = block * kernel.launch.warps_per_block + warp_in_block
        self.env = kernel.base_env(block, warp_in_block)
        self.state = _Live(kernel.initial_mask(warp_in_block))

    @property
    def live(self) -> int:
        return self.state.mask

    def side(self, nodes: Any, mask: int) -> Iterator[Any]:
        """A walker for one side of a divergent branch: its own copy of the loop indices, the same lanes."""
        clone = WarpWalker(self.kernel, self.block, 0, True, self)
        return clone.walk([[nodes, 0, mask, None]])

    def run(self) -> Iterator[Any]:
        yield from self.walk([[self.kernel.program, 0, self.state.mask, None]])
        if self.state.mask:
            yield self.simple(EXIT_INFO, self.kernel.exit_pc, self.state.mask)

    def simple(self, info: Any, pc: int, mask: int) -> Any:
        """A branch, reconvergence or exit instruction (no registers, no addresses)."""
        return WarpInst(info, self.warp, self.block, pc, mask, (), (), None)

    def walk(self, stack: list) -> Iterator[Any]:
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

    def instr_chunk(self, node: Instr, mask: int, first: int, count: int, repeat: int) -> list:
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
                m = mask & self.predicate(pred)
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
                elif self.check_all:  # (else every lane passed addresses()' one check, the inactive ones too)
                    self.check(node, lane_addrs, m)
            out.append(WarpInst(info, warp, block, pc + 16 * k, m, dst, src, lane_addrs, None, operands))
        env["rep"] = 0
        return out

    def predicate(self, pred: Any) -> int:
        """A predicate's lanes as a mask in this warp's environment: worked out once per predicate and values of
        the names it reads besides `lane` (the same lanes in every warp), where those are plain numbers and
        nothing is drawn at random ("lane == 0" under a loop index, say)."""
        env = self.env
        key = None
        if not pred.uses_rand and env.get("lane") is LANES:
            values = tuple(env.get(name) for name in sorted(pred.names - {"lane"}))
            if all(type(v) is int for v in values):
                key = ("predicate", id(pred), values)
                hit = self.kernel.register_cache.get(key)
                if hit is not None:
                    return hit
        found = to_mask(pred(env))
        if key is not None:
            cache = self.kernel.register_cache
            if len(cache) > REGISTER_CACHE_LIMIT:
                cache.clear()
            cache[key] = found
        return found

    def operands(self, node: Instr) -> Any:
        """An asynchronous instruction's operands in this warp's environment (with `rep` set): whole numbers the
        same for every lane, and the mbarrier's name with its placeholders resolved. Worked out once per node and
        values of the names they read (a producer's ring stage, a consumer's phase), where those are plain
        numbers and nothing is drawn at random."""
        cache = self.kernel.register_cache
        names = cache.get(("operand names", id(node)))
        if names is None:
            names = _operand_names(node)
            cache[("operand names", id(node))] = names
        key = None
        if names != DRAWN_AT_RANDOM:
            values = tuple(self.env.get(name) for name in names)
            if all(type(v) is int for v in values):
                key = ("operands", id(node), values)
                hit = cache.get(key)
                if hit is not None:
                    return hit
        found = self._operands(node)
        if key is not None:
            if len(cache) > REGISTER_CACHE_LIMIT:
                cache.clear()
            cache[key] = found
        return found

    def _operands(self, node: Instr) -> Any:
        spec: Any = node.operands
        env = self.env

        def uniform(e: Any) -> Any:
            value = e(env)
            if isinstance(value, np.ndarray):
                if value.size and (value == value.flat[0]).all():
                    return value.flat[0].item()
                raise WorkloadError(f"{e.where}: {shorten(e.text)}: must be the same for every lane")
            return value.item() if isinstance(value, np.generic) else value

        exprs = spec.by_key()
        barrier = resolve_registers((spec.barrier,), node.templates, env)[0] if "{" in spec.barrier else spec.barrier
        return operand_values(exprs, barrier, uniform, spec.where)

    def check_tile(self, node: Instr, addrs: Any, mask: int, operands: Any) -> None:
        """A bulk (TMA) copy: each active lane copies one tile of `rows` rows of bytes / rows bytes, `pitch` apart,
        from its address: 16-byte aligned (the TMA's rule for addresses, row sizes and strides) and inside one
        global buffer."""
        active = addrs if mask == FULL_MASK else addrs[mask_to_bool(mask)]
        row = operands.bytes // operands.rows
        if row % 16 or (operands.rows > 1 and operands.pitch % 16):
            bad_address(node, f"a bulk copy's rows ({row} bytes) and pitch ({operands.pitch}) must be multiples "
                               f"of 16 bytes")
        extent = (operands.rows - 1) * operands.pitch + row
        ranges = self.kernel.address_ranges.get("global")
        for address in sorted(set(active.tolist())):
            if address < 0:
                bad_address(node, f"negative address {address}")
            if address % 16:
                bad_address(node, f"address {address} is not aligned to 16 bytes (a bulk copy's rule)")
            if ranges is not None and not within_ranges(ranges, address, address + extent):
                bad_address(node, why_outside(ranges, address, extent, "global").replace(
                    f"({extent}-byte access)", f"(a {extent:,}-byte tile)"))

    def registers(self, node: Instr, repeat: int) -> Any:
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

    def addresses(self, node: Instr, repeat: int) -> Any:
        """Addresses as a (..., repeat, 32) int64 array; full-warp accesses are checked here in one pass."""
        expr: Any = node.addr
        value = expr(self.env)
        shape = self.address_shape + (repeat, WARP_SIZE)
        if type(value) is np.ndarray and value.shape == shape:
            addrs = value
        elif type(value) is np.ndarray and value.shape == _ONE_WARP[1:] and shape == _ONE_WARP:
            addrs = value.reshape(shape)  # (a view, read-only as broadcast_to's is, at a fraction of its cost)
            addrs.flags.writeable = False
        else:
            addrs = np.broadcast_to(np.asarray(value), shape)
        if addrs.dtype != np.int64:
            addrs = whole_addresses(node, addrs)
        # negative (sign bit), misaligned or outside the buffers, for every lane of every repeat, in one pass;
        # when something is, each instruction checks its active lanes (inactive lanes' addresses are unused)
        ranges = self.kernel.address_ranges.get(node.info.space)
        self.check_all = needs_row_checks(ranges, node, bool((addrs & node.bad_address_bits).any()),
                                          int(addrs.min()), int(addrs.max()))
        return addrs

    def check(self, node: Instr, addrs: Any, mask: int) -> None:
        active = addrs if mask == FULL_MASK else addrs[mask_to_bool(mask)]
        if not active.size:
            return
        if active.min() < 0:
            bad_address(node, f"negative address {int(active.min())}")
        width = node.info.width
        misaligned = active % width
        if misaligned.any():
            bad = int(active[np.nonzero(misaligned)[0][0]])
            bad_address(node, f"address {bad} is not aligned to the {width}-byte access width")
        space: Any = node.info.space
        ranges = self.kernel.address_ranges.get(space)
        if ranges is not None and not within_ranges(ranges, int(active.min()), int(active.max()) + width):
            bases, ends, names = ranges
            if not len(bases):  # no buffer of this space at all: every address is outside
                bad_address(node, why_outside(ranges, int(active[0]), width, space))
            index = np.searchsorted(np.asarray(bases, dtype=np.int64), active, side="right") - 1
            outside = (index < 0) | (active + width > np.asarray(ends, dtype=np.int64)[np.maximum(index, 0)])
            if outside.any():
                bad_address(node, why_outside(ranges, int(active[outside][0]), width, space))

