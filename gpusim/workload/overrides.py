"""Launch overrides: `gpusim run --threads/--regs/--smem/--dynamic-smem/--carveout/--grid`, and `threads=`,
`regs=`, `smem=`, `dynamic_smem=`, `carveout=`, `grid=` in gpusim.run. They replace fields of the loaded kernel's
launch; the program is left as written. An override that contradicts the workload is a one-line error naming the
flag and what was expected; nothing is clamped. The rules:

* `--threads X[,Y[,Z]]`: each dimension within CUDA's block limits (1024, 1024, 64), the product from 1 to the
  arch's threads per block (1024). Where it changes the workload's block:
  - a whole number of warps (a multiple of 32) when the workload's own block is one;
  - not for a program whose expressions read `warp` (work laid out per warp, as a tiled GEMM's warp tiles):
    such a program keeps its warps per block;
  - not where the workload computes its block from parameters that also set something else (its grid, a
    buffer's size, the program): the launch would no longer match the rest; `--set` that parameter instead.
* `--grid X[,Y[,Z]]`: each dimension within CUDA's grid limits (2^31 - 1, 65535, 65535); where it changes the
  grid, not where the workload computes its grid from parameters that also set something else (as above).
* `--regs N`: 1 to the arch's per-thread maximum (255).
* `--smem SIZE` (static) and `--dynamic-smem SIZE`: at least 0; static at least the workload's shared buffers
  (each rounded to 128 bytes, as they are laid out); static + dynamic at most the arch's per-block opt-in maximum.
* `--carveout PCT`: 0 to 100, the preferred share of the unified L1/shared memory for shared memory (snapped up
  to a supported step; one block needing more gets the smallest step that holds it, as the driver does). It
  sets both the resident blocks and the L1 capacity the memory hierarchy gets.
* A trace records its grid, block and shared memory: only `--regs` and `--carveout` apply to one.
* The launch with its overrides must be resident (at least one block per SM).

Addresses stay checked while the kernel runs, as always (every access inside its buffer); with an override in
effect such an error names the overrides.
"""

from __future__ import annotations

import attrs
import numpy as np

from ..errors import GpusimError, shown
from .kernel import MAX_BLOCK, MAX_GRID, SHARED_ALIGN, WARP_SIZE, Kernel, address_ranges
from .program import program_names

FLAGS = {"threads": "--threads", "grid": "--grid", "regs": "--regs", "smem": "--smem",
         "dynamic_smem": "--dynamic-smem", "carveout": "--carveout"}
TRACE_OVERRIDES = ("regs", "carveout")  # what applies to a trace (its grid, block and shared memory are recorded)


def _whole(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def dims_text(value) -> str:
    """Dimensions as typed on the command line: 256, 16,16 or 8,8,4 (anything else as a message shows it)."""
    if isinstance(value, tuple) and value and all(_whole(v) for v in value):
        while len(value) > 1 and value[-1] == 1:
            value = value[:-1]
        return ",".join(str(int(v)) for v in value)
    return shown(value, 40)


@attrs.frozen
class LaunchOverrides:
    threads: tuple[int, int, int] | None = None
    grid: tuple[int, int, int] | None = None
    regs: int | None = None
    smem: int | None = None
    dynamic_smem: int | None = None
    carveout: int | None = None

    def given(self) -> dict:
        return {k: v for k, v in attrs.asdict(self).items() if v is not None}

    def __bool__(self) -> bool:
        return bool(self.given())

    def text(self) -> str:
        """The overrides as flags: '--threads 128 --regs 64'."""
        return " ".join(f"{FLAGS[k]} {dims_text(v) if k in ('threads', 'grid') else v}"
                        for k, v in self.given().items())


def _dims(name: str, value, limits: tuple[int, int, int], what: str) -> tuple[int, int, int]:
    flag = FLAGS[name]
    items = value if isinstance(value, (tuple, list)) else (value,)
    if not 1 <= len(items) <= 3 or not all(_whole(v) for v in items):
        typed = dims_text(tuple(value)) if isinstance(value, (tuple, list)) else shown(value, 40)
        raise GpusimError(f"{flag} {typed}: expected X[,Y[,Z]], 1 to 3 positive integers ({what} dimensions)")
    dims = tuple(int(v) for v in items) + (1,) * (3 - len(items))
    for axis, (dim, limit) in enumerate(zip(dims, limits)):
        if not 1 <= dim <= limit:
            raise GpusimError(f"{flag} {dims_text(dims)}: expected {what}.{'xyz'[axis]} from 1 to {limit:,} "
                              f"(CUDA's limit), got {dim:,}")
    return dims


def _integer(name: str, value, low: int, high: int | None, what: str) -> int:
    flag = FLAGS[name]
    if not _whole(value) or value < low or high is not None and value > high:
        bound = f"from {low} to {high}" if high is not None else f">= {low}"
        raise GpusimError(f"{flag} {shown(value, 40)}: expected {what}, an integer {bound}")
    return int(value)


def check_launch_overrides(*, threads=None, grid=None, regs=None, smem=None, dynamic_smem=None,
                           carveout=None) -> LaunchOverrides:
    """The overrides' types and the limits that hold whatever the arch and workload (one-line GpusimError)."""
    return LaunchOverrides(
        threads=None if threads is None else _dims("threads", threads, MAX_BLOCK, "block"),
        grid=None if grid is None else _dims("grid", grid, MAX_GRID, "grid"),
        regs=None if regs is None else _integer("regs", regs, 1, None, "registers per thread"),
        smem=None if smem is None else _integer("smem", smem, 0, None, "static shared memory per block in bytes"),
        dynamic_smem=None if dynamic_smem is None else _integer("dynamic_smem", dynamic_smem, 0, None,
                                                                "dynamic shared memory per block in bytes"),
        carveout=None if carveout is None else _integer("carveout", carveout, 0, 100, "a percentage"))


def shared_buffers_bytes(kernel: Kernel) -> int:
    """Static shared memory the workload's shared buffers take, each rounded up to SHARED_ALIGN as laid out."""
    return sum(-(-b.bytes // SHARED_ALIGN) * SHARED_ALIGN for b in kernel.buffers.values() if b.space == "shared")


def _tied(kernel: Kernel, field: str) -> tuple[str, str] | None:
    """(parameter, another place it sets) when the launch field `field` reads a parameter used elsewhere too."""
    uses = kernel.param_uses
    program = program_names(kernel.program)
    for param in sorted(uses.get(f"launch.{field}", ())):
        others = [place for place, names in uses.items() if place != f"launch.{field}" and param in names]
        if param in program:
            others.append("the program")
        if others:
            return param, others[0]
    return None


def _check_tie(kernel: Kernel, name: str, field: str, value) -> None:
    tie = _tied(kernel, field)
    if tie is not None:
        param, place = tie
        raise GpusimError(f"{FLAGS[name]} {dims_text(value)}: {kernel.source} computes its {field} from parameter "
                          f"'{param}', which also sets {place}: change it with --set {param}=... instead")


def apply_launch_overrides(kernel, spec, overrides: LaunchOverrides):
    """`kernel` (a YAML Kernel or a TraceKernel) with its launch overridden, checked against `spec` and the
    workload (see the module docstring); the kernel itself when there is nothing to override."""
    if not overrides:
        return kernel
    given = overrides.given()
    traced = not isinstance(kernel, Kernel)
    if traced:
        for name in given:
            if name not in TRACE_OVERRIDES:
                raise GpusimError(f"{LaunchOverrides(**{name: given[name]}).text()}: {kernel.source} is a trace, "
                                  f"which records its grid, block and shared memory; only --regs and --carveout "
                                  f"apply to a trace")
    sm, shared = spec.sm, spec.shared_memory
    launch = kernel.launch
    changes: dict = {}
    if overrides.threads is not None:
        block = overrides.threads
        threads = block[0] * block[1] * block[2]
        if threads > sm.max_threads_per_block:
            raise GpusimError(f"--threads {dims_text(block)}: expected at most {sm.max_threads_per_block} threads "
                              f"per block on {spec.name}, got {threads:,}")
        if block != launch.block:
            old = launch.threads_per_block
            if old % WARP_SIZE == 0 and threads % WARP_SIZE:
                raise GpusimError(f"--threads {dims_text(block)}: expected a multiple of {WARP_SIZE} threads (whole "
                                  f"warps, as the workload's {old}-thread block is), got {threads}")
            old_warps, warps = launch.warps_per_block, -(-threads // WARP_SIZE)
            if warps != old_warps and "warp" in program_names(kernel.program):
                raise GpusimError(f"--threads {dims_text(block)}: {kernel.source}'s program lays out its work by "
                                  f"warp index (it reads 'warp'), for {old_warps} warps per block: expected {old} "
                                  f"threads ({old_warps} warps) in some shape, got {threads}")
            _check_tie(kernel, "threads", "block", block)
            changes["block"] = block
    if overrides.grid is not None and overrides.grid != launch.grid:
        _check_tie(kernel, "grid", "grid", overrides.grid)
        changes["grid"] = overrides.grid
    if overrides.regs is not None:
        if overrides.regs > sm.max_registers_per_thread:
            raise GpusimError(f"--regs {overrides.regs}: expected at most {sm.max_registers_per_thread} registers "
                              f"per thread on {spec.name}")
        changes["registers_per_thread"] = overrides.regs
    if overrides.smem is not None:
        needed = shared_buffers_bytes(kernel)
        if overrides.smem < needed:
            names = ", ".join(n for n, b in kernel.buffers.items() if b.space == "shared")
            raise GpusimError(f"--smem {overrides.smem}: expected at least {needed} bytes, what the shared buffers "
                              f"the program addresses take ({names}, each rounded up to {SHARED_ALIGN} bytes)")
        changes["shared_memory_bytes"] = overrides.smem
    if overrides.dynamic_smem is not None:
        changes["dynamic_shared_memory_bytes"] = overrides.dynamic_smem
    static = changes.get("shared_memory_bytes", launch.shared_memory_bytes)
    dynamic = changes.get("dynamic_shared_memory_bytes", launch.dynamic_shared_memory_bytes)
    if ("smem" in given or "dynamic_smem" in given) and static + dynamic > shared.per_block_optin_bytes:
        flag = LaunchOverrides(smem=overrides.smem, dynamic_smem=overrides.dynamic_smem).text()
        raise GpusimError(f"{flag}: static {static} + dynamic {dynamic} = {static + dynamic} bytes of shared memory "
                          f"per block; expected at most {shared.per_block_optin_bytes} on {spec.name} (its "
                          f"per-block opt-in maximum)")
    if overrides.carveout is not None:
        changes["carveout"] = overrides.carveout
    new = attrs.evolve(launch, **changes)
    from ..analytic.occupancy import occupancy

    occ = occupancy(spec, new.threads_per_block, new.registers_per_thread, new.smem_per_block, new.carveout)
    if occ.blocks_per_sm == 0:
        raise GpusimError(f"{overrides.text()}: the launch cannot be resident on {spec.name}: {occ.reason}")
    if traced:
        return attrs.evolve(kernel, launch=new)
    dropped = tuple(f": launch.{field}[" for field in ("block", "grid") if field in changes)
    return attrs.evolve(kernel, launch=new, address_ranges=address_ranges(kernel.buffers, new), address_cache={},
                        register_cache={},
                        warnings=tuple(w for w in kernel.warnings if not any(d in w for d in dropped)))
