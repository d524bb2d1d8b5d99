"""A loaded workload: launch configuration, buffers, parameters and the compiled program."""

from __future__ import annotations

import ast
import functools
import itertools
import math
import re
from pathlib import Path

import attrs
import numpy as np

from ..errors import shorten, shown
from .expr import MEMO_KEY, SEED_KEY, ExprError, compile_expr
from .program import PC_STEP, ProgramCompiler, control_names
from .yamlio import LineDict, WorkloadError, load_yaml_with_lines

WARP_SIZE = 32  # lanes per warp in the workload model; every modelled architecture agrees (arch sm.warp_size)
LANES = np.arange(WARP_SIZE, dtype=np.int64)
FULL_MASK = (1 << WARP_SIZE) - 1

# Names every expression may use. Per-warp identity names make a warp's control flow depend on which warp it is.
BLOCK_INVARIANT = {"lane", "rep", "nblocks", "grid.x", "grid.y", "grid.z", "ntid", "ntid.x", "ntid.y", "ntid.z"}
WARP_IN_BLOCK = {"tid", "tid.x", "tid.y", "tid.z", "warp"}
PER_BLOCK = {"block.x", "block.y", "block.z", "blockid", "gtid"}
BUILTIN_NAMES = BLOCK_INVARIANT | WARP_IN_BLOCK | PER_BLOCK

TOP_KEYS = {"kernel", "description", "bound", "params", "buffers", "launch", "program"}
# `bound:` names, per arch, the unit that limits the kernel at its default size (Nsight Compute's speed of light:
# gpusim.stats.invariants.UNIT_METRICS says which percent of peak each name is); `latency`: no unit is busy
BOUND_UNITS = ("tensor", "fma", "xu", "alu", "issue", "l1tex", "sm-to-l2", "l2", "dram", "latency")
LAUNCH_KEYS = {"grid", "block", "registers_per_thread", "shared_memory_bytes", "dynamic_shared_memory_bytes",
               "cluster"}
BUFFER_KEYS = {"space", "bytes"}
GLOBAL_BASE = 1 << 32  # first global buffer; each starts on a 2 MiB boundary
GLOBAL_ALIGN = 2 << 20
SHARED_ALIGN = 128
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")  # (\Z: "$" would let a trailing newline through)
# CUDA's launch limits (every compute capability since 2.0): gridDim.x < 2^31, gridDim.y/z and blockDim.x/y up to
# 65535 and 1024, blockDim.z up to 64; threads per block are checked against the architecture when it runs.
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_BLOCK = (1024, 1024, 64)
MAX_CLUSTER = (16, 16, 16)  # per dimension; the part's limit on the cluster's size is checked when it runs
MAX_BUFFER_BYTES = 2**40  # 1 TiB, beyond any modelled part's memory; keeps every address well inside int64


@attrs.frozen
class Buffer:
    name: str
    space: str  # global | shared
    bytes: int
    base: int  # byte address (global) or offset within the block's shared memory


@attrs.frozen
class Launch:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    registers_per_thread: int
    shared_memory_bytes: int  # static
    dynamic_shared_memory_bytes: int
    carveout: int | None = None  # shared-memory carveout preference in percent (None: chosen automatically)
    cluster: tuple[int, int, int] = (1, 1, 1)  # thread block cluster (x, y, z); (1, 1, 1): no clusters

    @property
    def cluster_size(self) -> int:
        return self.cluster[0] * self.cluster[1] * self.cluster[2]

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def warps_per_block(self) -> int:
        return -(-self.threads_per_block // WARP_SIZE)

    @property
    def nblocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def smem_per_block(self) -> int:
        return self.shared_memory_bytes + self.dynamic_shared_memory_bytes


@attrs.frozen
class Kernel:
    name: str
    description: str
    source: str
    params: dict
    launch: Launch
    buffers: dict[str, Buffer]
    program: tuple
    exit_pc: int
    control_names: frozenset[str]
    control_uses_rand: bool
    seed: int = 0  # mixed into every rand(): --seed
    bound: dict = attrs.field(factory=dict, eq=False)  # arch -> the unit that limits it at its default size
    warnings: tuple[str, ...] = ()  # one line each, found while loading (a launch dimension that floors)
    # memory space -> (sorted bases, ends, names): where an access may fall (see address_ranges())
    address_ranges: dict = attrs.field(factory=dict, eq=False, repr=False)
    # streams' worked-out register names, predicate masks, asynchronous operands and address names, by node
    register_cache: dict = attrs.field(factory=dict, eq=False, repr=False)
    address_cache: dict = attrs.field(factory=dict, eq=False, repr=False)  # block walkers' block-invariant addresses
    row_cache: dict = attrs.field(factory=dict, eq=False, repr=False)  # block walkers' instruction rows (see rows)
    # where the file reads its parameters: "launch.grid", "launch.block", ..., "buffer 'x'" -> parameter names
    param_uses: dict = attrs.field(factory=dict, eq=False, repr=False)

    @property
    def total_warps(self) -> int:
        return self.launch.nblocks * self.launch.warps_per_block

    def warp_variance(self) -> str:
        """How far warps' control flow can differ: 'none', 'warp_in_block' or 'every_warp'."""
        if self.control_uses_rand or self.control_names & PER_BLOCK:
            return "every_warp"
        if self.control_names & WARP_IN_BLOCK:
            return "warp_in_block"
        return "none"

    def streams(self, its: bool = False):
        """Its warps' instruction streams, as the engine takes them: a function (block, warp in block) -> an
        iterator of warp-instructions. Without `its`, a gpusim.workload.stream.BlockStreams (a block's warps walk
        the program together where their control flow cannot differ); with `its` (independent thread
        scheduling), each warp walks alone and a divergent `if` yields a Diverge of its two sides."""
        from .stream import BlockStreams, warp_stream  # (that module imports this one)

        if its:
            return functools.partial(warp_stream, self, its=True)
        return BlockStreams(self)

    def initial_mask(self, warp_in_block: int) -> int:
        live = self.launch.threads_per_block - warp_in_block * WARP_SIZE
        return FULL_MASK if live >= WARP_SIZE else (1 << live) - 1

    def base_env(self, block: int, warp_in_block) -> dict:
        """The names an expression sees for one warp: lane-indexed arrays and uniform scalars. `warp_in_block`
        may be an int array shaped (warps, 1, 1): then every lane-indexed name gets a leading warp axis."""
        g, b = self.launch.grid, self.launch.block
        ntid = self.launch.threads_per_block
        tid = warp_in_block * WARP_SIZE + LANES
        env = dict(self.params)
        env.update({name: buf.base for name, buf in self.buffers.items()})
        env.update({
            "lane": LANES, "rep": 0, "warp": warp_in_block, "tid": tid,
            "tid.x": tid % b[0], "tid.y": (tid // b[0]) % b[1], "tid.z": tid // (b[0] * b[1]),
            "ntid": ntid, "ntid.x": b[0], "ntid.y": b[1], "ntid.z": b[2],
            "nblocks": self.launch.nblocks, "grid.x": g[0], "grid.y": g[1], "grid.z": g[2],
            MEMO_KEY: {}, SEED_KEY: self.seed,
        })
        env.update(self.block_names(block, tid))
        return env

    def block_names(self, block, tid) -> dict:
        """The names that differ from block to block (PER_BLOCK) for `block` and the threads `tid`; `block` may be
        an int array with an axis of its own before tid's (several blocks' values at once)."""
        g = self.launch.grid
        return {"blockid": block, "block.x": block % g[0], "block.y": (block // g[0]) % g[1],
                "block.z": block // (g[0] * g[1]), "gtid": block * self.launch.threads_per_block + tid}


def address_ranges(buffers: dict[str, Buffer], launch: Launch) -> dict:
    """Where accesses may fall: global ones inside a declared global buffer, shared ones inside the block's
    shared memory (static + dynamic); local and constant memory are not checked."""
    found = sorted((b.base, b.base + b.bytes, b.name) for b in buffers.values() if b.space == "global")
    return {"global": tuple(map(list, zip(*found))) if found else ([], [], []),
            "shared": ([0], [launch.smem_per_block], ["shared memory"])}


def check_override(name, value) -> int | float:
    """A parameter override (`--set NAME=VALUE`, or `params=` from Python) as a plain int or float; a bad name or
    a value that is not a finite number is a one-line error."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise WorkloadError(f"--set {shown(name)}: expected NAME=VALUE (NAME a parameter's name)")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise WorkloadError(f"--set {name}={shown(value)}: expected a number")
    value = int(value) if isinstance(value, (int, np.integer)) else float(value)
    if not math.isfinite(value):
        raise WorkloadError(f"--set {name}={shown(value)}: expected a finite number")
    return value


def _parse_override(text: str):
    name, _, value = (s.strip() for s in text.partition("="))
    if "=" not in text or not _NAME.match(name):
        raise WorkloadError(f"--set {shown(text)}: expected NAME=VALUE (NAME a parameter's name)")
    for cast in (int, float):
        try:
            number = cast(value)
        except ValueError:
            continue
        if not math.isfinite(number):
            raise WorkloadError(f"--set {name}={shown(value)}: expected a finite number")
        return name, check_override(name, number)
    raise WorkloadError(f"--set {name}={shown(value)}: expected a number")


def parse_overrides(items: list[str] | None) -> dict:
    return dict(_parse_override(s) for s in items or [])


def _terms(node: ast.expr, sign: int = 1) -> list[tuple[int, ast.expr]]:
    """A sum's signed terms: a + b - c -> [(+1, a), (+1, b), (-1, c)]."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        return _terms(node.left, sign) + _terms(node.right, -sign if isinstance(node.op, ast.Sub) else sign)
    return [(sign, node)]


def _rounds_up(numerator: ast.expr, divisor: int, value) -> bool:
    """Whether a numerator reads as the ceiling idiom (x + d - 1) / d: some of its terms add up to d - 1."""
    terms = [(sign, value(ast.unparse(node))) for sign, node in _terms(numerator)]
    for size in range(1, len(terms)):
        for subset in itertools.combinations(terms, size):
            if all(isinstance(v, int) for _, v in subset) and sum(s * v for s, v in subset) == divisor - 1:
                return True
    return False


def floored_divisions(text: str, value) -> list[tuple[str, int, int]]:
    """The integer divisions `a / b` in a launch expression that drop a remainder, as (text, a, b); `value(text)`
    evaluates a subexpression. `//` asks for the floor and the ceiling idiom (n + d - 1) / d rounds up: neither
    is listed."""
    found = []
    for node in ast.walk(ast.parse(text.strip(), mode="eval")):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            a, b = value(ast.unparse(node.left)), value(ast.unparse(node.right))
            if (type(a) is int and type(b) is int and b > 0 and a % b
                    and not _rounds_up(node.left, b, value)):
                found.append((ast.unparse(node), a, b))
    return found


class _Loader:
    def __init__(self, path: Path):
        self.path = path
        self.source = str(path)
        self.warnings: list[str] = []
        self.param_uses: dict[str, frozenset[str]] = {}

    def note_uses(self, place: str, value, params: dict) -> None:
        """Remember which parameters `value` (an expression, a number or a list of them) reads, under `place`."""
        names: set[str] = set()
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                names |= compile_expr(item, "", params.__contains__).names & params.keys()
        self.param_uses[place] = frozenset(names)

    def fail(self, line: int, msg: str):
        raise WorkloadError(f"{self.source}:{line}: {msg}")

    def mapping(self, value, line: int, what: str, allowed: set[str] | None = None) -> LineDict:
        if not isinstance(value, LineDict):
            self.fail(line, f"{what}: expected a mapping, got {shorten(value)}")
        if allowed is not None:
            extra = sorted(set(value) - allowed)
            if extra:
                self.fail(value.line, f"unknown key {shorten(extra[0])} in {what} "
                                      f"(expected {', '.join(sorted(allowed))})")
        return value

    def const(self, text, line: int, what: str, env: dict, minimum: int | None = 1, maximum: int | None = None,
              why: str = "") -> int:
        try:
            value = compile_expr(text, f"{self.source}:{line}: {what}", env.__contains__, env).constant
        except ExprError as exc:
            raise WorkloadError(str(exc)) from None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(line, f"{what}: expected a whole number, got {shorten(value)} from {shorten(text)}")
        if minimum is not None and value < minimum:
            self.fail(line, f"{what}: expected at least {minimum}, got {shorten(value)} from {shorten(text)}")
        if maximum is not None and value > maximum:
            self.fail(line, f"{what}: expected at most {maximum}{why}, got {shorten(value)} from {shorten(text)}")
        return value

    def params(self, data: LineDict, overrides: dict) -> dict:
        raw = self.mapping(data.get("params", LineDict()), data.line, "params")
        params = {}
        for name, value in raw.items():
            if not isinstance(name, str) or not _NAME.match(name) or name in BUILTIN_NAMES:
                self.fail(raw.line, f"params: {shorten(name)} is not a usable parameter name")
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                self.fail(raw.line, f"params: '{name}' must be a number, got {shorten(value)}")
            if not math.isfinite(value):
                self.fail(raw.line, f"params: '{name}' must be a finite number, got {value}")
            params[name] = value
        for name, value in overrides.items():
            value = check_override(name, value)
            if name not in params:
                known = ", ".join(sorted(params)) or "none"
                raise WorkloadError(f"{self.source}: --set {name}: unknown parameter (this workload has: {known})")
            params[name] = value
        return params

    def buffers(self, data: LineDict, params: dict) -> dict[str, Buffer]:
        raw = self.mapping(data.get("buffers", LineDict()), data.line, "buffers")
        out, next_global, next_shared = {}, GLOBAL_BASE, 0
        for name, spec in raw.items():
            if not isinstance(name, str) or not _NAME.match(name) or name in BUILTIN_NAMES or name in params:
                self.fail(raw.line, f"buffers: {shorten(name)} is not a usable buffer name (or it shadows a parameter)")
            spec = self.mapping(spec, raw.line, f"buffer '{name}'", BUFFER_KEYS)
            space = spec.get("space", "global")
            if space not in ("global", "shared"):
                self.fail(spec.line, f"buffer '{name}': space must be global or shared, got {shorten(space)}")
            size = self.const(spec.get("bytes"), spec.line, f"buffer '{name}' bytes", params,
                              maximum=MAX_BUFFER_BYTES, why=" (1 TiB)")
            self.note_uses(f"buffer '{name}'", spec.get("bytes"), params)
            if space == "global":
                out[name] = Buffer(name, space, size, next_global)
                next_global += -(-size // GLOBAL_ALIGN) * GLOBAL_ALIGN
            else:
                out[name] = Buffer(name, space, size, next_shared)
                next_shared += -(-size // SHARED_ALIGN) * SHARED_ALIGN
        return out

    def dims(self, value, line: int, what: str, params: dict) -> tuple[int, int, int]:
        items = value if isinstance(value, list) else [value]
        if not 1 <= len(items) <= 3:
            self.fail(line, f"launch {what}: expected 1 to 3 dimensions, got {shorten(value)}")
        limits = {"grid": MAX_GRID, "cluster": MAX_CLUSTER}.get(what, MAX_BLOCK)
        dims = [self.const(v, line, f"launch {what}", params, maximum=limits[i],
                           why=f" (CUDA's limit for {what}.{'xyz'[i]})") for i, v in enumerate(items)]
        for i, (text, dim) in enumerate(zip(items, dims)):
            if isinstance(text, str):
                self.check_floor(text, dim, line, f"launch.{what}[{i}]", params)
        return tuple(dims + [1] * (3 - len(dims)))

    def check_floor(self, text: str, dim: int, line: int, field: str, params: dict) -> None:
        """A warning when an integer division in a launch dimension drops a remainder (it is floored, as in C)."""
        def value(sub: str):
            return compile_expr(sub, f"{self.source}:{line}: {field}", params.__contains__, params).constant

        floored = floored_divisions(text, value)
        if not floored:
            return
        try:  # the value the expression would have without the floor
            exact = compile_expr(text, "", params.__contains__, {k: float(v) for k, v in params.items()}).constant
        except ExprError:  # (bit operations need integers)
            exact = None
        names = compile_expr(text, "", params.__contains__).names
        with_params = ", ".join(f"{n}={params[n]}" for n in sorted(names) if n in params)
        unit = "blocks" if field.startswith("launch.grid") else "threads"
        whole = ast.unparse(ast.parse(text.strip(), mode="eval"))
        details = "; ".join(("" if expr == whole else f"{expr} = {a} / {b} covers ")
                            + f"{a // b} x {b} = {a // b * b} of {a}, {a % b} left over" for expr, a, b in floored)
        self.warnings.append(f"{self.source}:{line}: {field} = {text}" + ("" if exact is None else f" = {exact:g}")
                             + (f" with {with_params}" if with_params else "")
                             + f": floored to {dim} {unit}: {details}")

    def launch(self, data: LineDict, params: dict, buffers: dict[str, Buffer]) -> Launch:
        if "launch" not in data:
            self.fail(data.line, "missing key 'launch'")
        raw = self.mapping(data["launch"], data.line, "launch", LAUNCH_KEYS)
        for key in ("grid", "block", "registers_per_thread"):
            if key not in raw:
                self.fail(raw.line, f"launch: missing key '{key}'")
        shared_sum = sum(-(-b.bytes // SHARED_ALIGN) * SHARED_ALIGN for b in buffers.values() if b.space == "shared")
        static = self.const(raw.get("shared_memory_bytes", shared_sum), raw.line, "launch shared_memory_bytes",
                            params, minimum=0)
        if static < shared_sum:
            self.fail(raw.line, f"launch shared_memory_bytes: {static} is less than the {shared_sum} bytes the "
                                f"shared buffers need")
        launch = Launch(grid=self.dims(raw["grid"], raw.line, "grid", params),
                        block=self.dims(raw["block"], raw.line, "block", params),
                        registers_per_thread=self.const(raw["registers_per_thread"], raw.line,
                                                        "launch registers_per_thread", params),
                        shared_memory_bytes=static,
                        dynamic_shared_memory_bytes=self.const(raw.get("dynamic_shared_memory_bytes", 0), raw.line,
                                                               "launch dynamic_shared_memory_bytes", params, minimum=0),
                        cluster=self.dims(raw["cluster"], raw.line, "cluster", params) if "cluster" in raw else
                        (1, 1, 1))
        for axis, (g, c) in enumerate(zip(launch.grid, launch.cluster)):
            if g % c:
                self.fail(raw.line, f"launch cluster: grid.{'xyz'[axis]} = {g} is not a multiple of cluster."
                                    f"{'xyz'[axis]} = {c} (a grid is made of whole clusters)")
        for key in sorted(LAUNCH_KEYS & raw.keys()):  # after the checks above, whose errors name file:line
            self.note_uses(f"launch.{key}", raw[key], params)
        return launch

    def bound(self, data) -> dict:
        """`bound: {ARCH: UNIT, ...}`: the unit each arch is limited by at the default size (one of BOUND_UNITS)."""
        raw = data.get("bound")
        if raw is None:
            return {}
        line = getattr(raw, "line", data.line)
        if not isinstance(raw, dict) or not raw:
            self.fail(line, f"bound: expected a mapping of arch names to units ({', '.join(BOUND_UNITS)}), "
                            f"got {shorten(raw)}")
        for arch, unit in raw.items():
            if not isinstance(arch, str) or not _NAME.match(arch) or unit not in BOUND_UNITS:
                self.fail(line, f"bound: {shorten(arch)}: {shorten(unit)}: expected an arch name and one of "
                                f"{', '.join(BOUND_UNITS)}")
        return {str(a): str(u) for a, u in raw.items()}

    def load(self, overrides: dict, seed: int = 0) -> Kernel:
        data = load_yaml_with_lines(self.path)
        data = self.mapping(data, 1, "workload file", TOP_KEYS)
        name = data.get("kernel")
        if not isinstance(name, str) or not name:
            self.fail(data.line, "missing key 'kernel' (the kernel's name)")
        description = data.get("description", "")
        if not isinstance(description, str):
            self.fail(data.line, f"description: expected text, got {shorten(description)}")
        bound = self.bound(data)
        params = self.params(data, overrides)
        buffers = self.buffers(data, params)
        launch = self.launch(data, params, buffers)
        if "program" not in data:
            self.fail(data.line, "missing key 'program'")
        constants = {**params, **{n: b.base for n, b in buffers.items()}}
        # the launch's shape is fixed at load time too: a grid-stride loop's count (n / (nblocks * ntid)) folds
        g, b = launch.grid, launch.block
        shape = {"nblocks": launch.nblocks, "ntid": launch.threads_per_block, "ntid.x": b[0], "ntid.y": b[1],
                 "ntid.z": b[2], "grid.x": g[0], "grid.y": g[1], "grid.z": g[2]}
        compiler = ProgramCompiler(self.source, BUILTIN_NAMES | constants.keys(), constants, shape)
        program = compiler.body(data["program"], data.line, "program")
        if not program:
            self.fail(data.line, "program is empty")
        names, uses_rand = control_names(program)
        return Kernel(name=name, description=description.strip(), source=self.source,
                      params=params, launch=launch, buffers=buffers, program=program, exit_pc=compiler.pc, bound=bound,
                      control_names=names, control_uses_rand=uses_rand, seed=seed, warnings=tuple(self.warnings),
                      address_ranges=address_ranges(buffers, launch), param_uses=dict(self.param_uses))


def load_workload(path: str | Path, overrides: dict | None = None, seed: int = 0) -> Kernel:
    """Load and check a workload YAML file; `overrides` replace parameter defaults (like `--set M=2048`);
    `seed` is mixed into every rand() the program calls."""
    with np.errstate(all="ignore"):  # an expression's float overflow is an inf the checks refuse, not a warning
        return _Loader(Path(path)).load(overrides or {}, seed)


__all__ = ["BOUND_UNITS", "Buffer", "Kernel", "Launch", "PC_STEP", "load_workload", "parse_overrides"]
