"""Theoretical occupancy, computed by the rules CUDA's occupancy calculator (cuda_occupancy.h) applies.

Every number comes from the ArchSpec; the rules are:

* warps: a block takes ceil(threads / warp_size) warp slots out of `sm.max_warps`;
* blocks: at most `sm.max_blocks` resident blocks;
* registers: each warp gets regs x warp_size rounded up to `register_allocation_unit`; the register file is
  split evenly over the sub-partitions and a warp's registers live in one of them, so an SM holds
  floor(registers_per_sub_partition / regs_per_warp) warps per sub-partition. A block must also pass the
  hardware's per-block check, which assumes its warps are rounded up to a multiple of the sub-partition
  count, and the per-thread maximum;
* shared memory: a block allocates (static + dynamic + the driver's reserved bytes) rounded up to the
  allocation granularity, at most the opt-in maximum (+ reserved). The SM's carveout is the preference
  (percent of the maximum, snapped *up* to a supported step; default: the maximum), unless one block needs
  more than that, in which case the driver picks the smallest step that holds one block;
* barriers (where the calculator applies them, cc >= 9.0): block slots x barriers_per_block_slot
  barrier sets, shared by blocks that each use `barriers_per_block`.

The kernel is assumed to have opted in to the large per-block shared-memory limit
(cudaFuncAttributeMaxDynamicSharedMemorySize) whenever it asks for more than the default 48 KB.
"""

from __future__ import annotations

import operator

import attrs

from ..arch import ArchSpec, load_arch

LIMITERS = ("warps", "registers", "shared_memory", "blocks", "barriers")


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def _ceil_div(value: int, unit: int) -> int:
    return -(-value // unit)


@attrs.frozen
class OccupancyResult:
    arch: str
    threads_per_block: int
    regs_per_thread: int
    smem_per_block: int
    carveout: int | None
    barriers_per_block: int
    warps_per_block: int
    blocks_per_sm: int
    warps_per_sm: int
    threads_per_sm: int
    max_warps_per_sm: int
    occupancy: float
    limiters: tuple[str, ...]
    block_limit_warps: int
    block_limit_registers: int
    block_limit_shared_memory: int | None  # None: the block uses no shared memory, no limit
    block_limit_blocks: int
    block_limit_barriers: int | None  # None: the barrier limit does not apply
    allocated_registers_per_block: int
    allocated_registers_per_warp: int
    allocated_smem_per_block: int
    shared_memory_per_sm: int  # the carveout the driver would configure for this launch
    reason: str  # why blocks_per_sm is 0; empty when it is not

    def to_dict(self) -> dict:
        d = attrs.asdict(self)
        d["limiters"] = list(self.limiters)
        return d


def _require_int(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name}: expected an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name}: expected an integer >= {minimum}, got {value}")
    return value


def snap_carveout(spec: ArchSpec, size_bytes: int) -> int:
    """The smallest supported carveout step that holds `size_bytes` (bytes)."""
    for step_kb in spec.shared_memory.carveout_steps_kb:
        if step_kb * 1024 >= size_bytes:
            return step_kb * 1024
    raise ValueError(f"shared memory: {size_bytes} bytes exceed the largest carveout "
                     f"({spec.shared_memory.per_sm_bytes} bytes) of {spec.name}")


def preferred_carveout(spec: ArchSpec, carveout: int | None) -> int:
    """Shared memory per SM the driver configures for a carveout preference in percent (None: maximum)."""
    smem = spec.shared_memory
    if carveout is None:
        return snap_carveout(spec, smem.per_sm_bytes)
    return snap_carveout(spec, carveout * smem.per_sm_bytes // 100)


def register_limit(spec: ArchSpec, warps_per_block: int, regs_per_thread: int) -> tuple[int, int, int, str]:
    """(blocks, registers per warp, registers per block, reason when 0) from the register file."""
    sm = spec.sm
    per_warp = _round_up(regs_per_thread * sm.warp_size, sm.register_allocation_unit)
    per_block = per_warp * warps_per_block
    hardware_check = per_warp * _round_up(warps_per_block, sm.sub_partitions)
    if regs_per_thread > sm.max_registers_per_thread:
        return 0, per_warp, per_block, (f"{regs_per_thread} registers per thread exceed the maximum of "
                                        f"{sm.max_registers_per_thread}")
    if max(hardware_check, per_block) > sm.registers_per_block:
        return 0, per_warp, per_block, (
            f"the block needs {max(hardware_check, per_block)} registers (warps rounded up to "
            f"{sm.sub_partitions} sub-partitions), more than the {sm.registers_per_block} a block may hold")
    warps_per_sub_partition = (sm.registers // sm.sub_partitions) // per_warp
    return warps_per_sub_partition * sm.sub_partitions // warps_per_block, per_warp, per_block, ""


def shared_memory_limit(spec: ArchSpec, smem_per_block: int, carveout: int | None) -> tuple[int | None, int, int, str]:
    """(blocks or None for no limit, allocated bytes per block, carveout per SM, reason when 0)."""
    smem = spec.shared_memory
    allocated = _round_up(smem_per_block + smem.reserved_per_block_bytes, smem.allocation_granularity_bytes)
    preference = preferred_carveout(spec, carveout)
    per_block_max = smem.per_block_optin_bytes + smem.reserved_per_block_bytes
    if allocated > per_block_max:
        return 0, allocated, preference, (
            f"the block needs {allocated} bytes of shared memory (with {smem.reserved_per_block_bytes} reserved, "
            f"rounded to {smem.allocation_granularity_bytes}), more than the opt-in maximum of "
            f"{smem.per_block_optin_bytes} + {smem.reserved_per_block_bytes}")
    per_sm = preference if preference >= allocated else snap_carveout(spec, allocated)
    if allocated == 0:
        return None, allocated, per_sm, ""
    return per_sm // allocated, allocated, per_sm, ""


def barrier_limit(spec: ArchSpec, barriers_per_block: int) -> int | None:
    smem = spec.shared_memory
    if not smem.barrier_limit_enforced or barriers_per_block == 0:
        return None
    return spec.sm.max_blocks * smem.barriers_per_block_slot // barriers_per_block


def occupancy(arch: str | ArchSpec, threads_per_block: int, regs_per_thread: int, smem_per_block: int = 0,
              carveout: int | None = None, barriers_per_block: int = 1) -> OccupancyResult:
    """Resident blocks, warps and the limiting resources of one launch on one SM of `arch`.

    `smem_per_block` is static + dynamic shared memory in bytes; `carveout` the shared-memory preference in
    percent (None: the device default, the maximum). Raises ValueError for input that is not a launch.
    """
    spec = load_arch(arch)
    sm = spec.sm
    _require_int("threads_per_block", threads_per_block, 1)
    if threads_per_block > sm.max_threads_per_block:
        raise ValueError(f"threads_per_block: expected at most {sm.max_threads_per_block} on {spec.name}, "
                         f"got {threads_per_block}")
    _require_int("regs_per_thread", regs_per_thread, 1)
    _require_int("smem_per_block", smem_per_block, 0)
    _require_int("barriers_per_block", barriers_per_block, 0)
    if carveout is not None and (_require_int("carveout", carveout, 0) > 100):
        raise ValueError(f"carveout: expected a percentage 0-100, got {carveout}")

    warps_per_block = _ceil_div(threads_per_block, sm.warp_size)
    limits: dict[str, int | None] = {"warps": sm.max_warps // warps_per_block}
    limits["registers"], regs_warp, regs_block, reg_reason = register_limit(spec, warps_per_block, regs_per_thread)
    limits["shared_memory"], smem_alloc, smem_sm, smem_reason = shared_memory_limit(spec, smem_per_block, carveout)
    limits["blocks"] = sm.max_blocks
    limits["barriers"] = barrier_limit(spec, barriers_per_block)

    blocks = min(v for v in limits.values() if v is not None)
    limiters = tuple(name for name in LIMITERS if limits[name] == blocks)
    reason = ""
    if blocks == 0:
        reason = "; ".join(r for r in (reg_reason, smem_reason) if r) or f"limited by {', '.join(limiters)}"
    warps = blocks * warps_per_block
    return OccupancyResult(
        arch=spec.name, threads_per_block=threads_per_block, regs_per_thread=regs_per_thread,
        smem_per_block=smem_per_block, carveout=carveout, barriers_per_block=barriers_per_block,
        warps_per_block=warps_per_block, blocks_per_sm=blocks, warps_per_sm=warps,
        threads_per_sm=blocks * threads_per_block, max_warps_per_sm=sm.max_warps,
        occupancy=warps / sm.max_warps, limiters=limiters,
        block_limit_warps=limits["warps"], block_limit_registers=limits["registers"],
        block_limit_shared_memory=limits["shared_memory"], block_limit_blocks=limits["blocks"],
        block_limit_barriers=limits["barriers"], allocated_registers_per_block=regs_block,
        allocated_registers_per_warp=regs_warp, allocated_smem_per_block=smem_alloc,
        shared_memory_per_sm=smem_sm, reason=reason)


@attrs.frozen
class BlockSizeSuggestion:
    """What cudaOccMaxPotentialOccupancyBlockSize answers, and the occupancy at the suggested size."""
    arch: str
    block_size: int  # 0: no block size can be resident
    min_grid_size: int  # blocks that fill the GPU at that size: blocks per SM x SMs
    sms: int
    block_size_limit: int  # the largest size tried
    result: OccupancyResult | None  # at block_size; None when it is 0
    reason: str  # why block_size is 0; empty when it is not

    def to_dict(self) -> dict:
        r = self.result
        return {"arch": self.arch, "block_size": self.block_size, "min_grid_size": self.min_grid_size,
                "sms": self.sms, "block_size_limit": self.block_size_limit,
                "occupancy": r.occupancy if r else 0.0, "blocks_per_sm": r.blocks_per_sm if r else 0,
                "warps_per_sm": r.warps_per_sm if r else 0, "limiters": list(r.limiters) if r else [],
                "smem_per_block": r.smem_per_block if r else None, "reason": self.reason}


def _smem_for(smem_per_block, block_size: int) -> int:
    if not callable(smem_per_block):
        return smem_per_block
    value = smem_per_block(block_size)
    try:
        count = None if isinstance(value, bool) else operator.index(value)  # (numpy integers too)
    except TypeError:
        count = None
    if count is None or count < 0:
        raise ValueError(f"smem_per_block({block_size}): expected a byte count (an integer >= 0), got {value!r}")
    return count


def suggest_block_size(arch: str | ArchSpec, regs_per_thread: int, smem_per_block=0, block_size_limit: int = 0,
                       carveout: int | None = None, barriers_per_block: int = 1) -> BlockSizeSuggestion:
    """The block size that maximises occupancy and the smallest grid that fills the GPU with it, computed as
    CUDA's cudaOccMaxPotentialOccupancyBlockSize (cuda_occupancy.h) does: every size from the limit (0: the
    arch's threads per block) down in steps of the warp size (the limit itself first when it is not a multiple
    of it), keeping the first that reaches the most resident threads (so a tie goes to the larger block) and
    stopping at a full SM. `smem_per_block` is bytes per block, or a function of the block size
    (the ...VariableSMem variant). Raises ValueError for input that is not a launch."""
    spec = load_arch(arch)
    sm = spec.sm
    _require_int("regs_per_thread", regs_per_thread, 1)
    _require_int("block_size_limit", block_size_limit, 0)
    if not callable(smem_per_block):
        _require_int("smem_per_block", smem_per_block, 0)
    limit = sm.max_threads_per_block if block_size_limit == 0 else min(sm.max_threads_per_block, block_size_limit)
    best_size = best_blocks = best_threads = 0
    best = None
    for aligned in range(_round_up(limit, sm.warp_size), 0, -sm.warp_size):
        size = min(limit, aligned)
        r = occupancy(spec, size, regs_per_thread, _smem_for(smem_per_block, size), carveout, barriers_per_block)
        if size * r.blocks_per_sm > best_threads:
            best_size, best_blocks, best_threads, best = size, r.blocks_per_sm, size * r.blocks_per_sm, r
        if best_threads == sm.max_threads:
            break
    reason = "" if best is not None else f"no block size up to {limit} can be resident: {r.reason}"
    return BlockSizeSuggestion(arch=spec.name, block_size=best_size, min_grid_size=best_blocks * spec.sms,
                               sms=spec.sms, block_size_limit=limit, result=best, reason=reason)


def max_potential_block_size(arch: str | ArchSpec, regs_per_thread: int, smem_per_block=0,
                             block_size_limit: int = 0, carveout: int | None = None,
                             barriers_per_block: int = 1) -> tuple[int, int]:
    """(min_grid_size, block_size), as cudaOccupancyMaxPotentialBlockSize returns them: the block size that
    maximises occupancy on `arch` and the smallest grid that fills every SM with it; (0, 0) when no block size
    can be resident. `smem_per_block`: shared memory per block in bytes, or a function of the block size that
    returns it (as cudaOccupancyMaxPotentialBlockSizeVariableSMem takes); `block_size_limit`: the largest block
    the kernel can use (0: no limit). See suggest_block_size for the occupancy at that size."""
    s = suggest_block_size(arch, regs_per_thread, smem_per_block, block_size_limit, carveout, barriers_per_block)
    return s.min_grid_size, s.block_size
