"""Metrics named as Nsight Compute names them (GPGPU-Sim aliases beside them), from the SM counters."""

from __future__ import annotations

from .counters import REASONS
from .declared import METRICS
from .invariants import speed_of_light

# Nsight Compute pipe names for our pipeline classes
PIPE_NAMES = {"fp32": "fma", "int32": "alu", "fp64": "fp64", "sfu": "xu", "tensor": "tensor",
              "ldst_global": "lsu", "ldst_shared": "lsu", "ldst_local": "lsu", "ldst_const": "lsu",
              "branch": "cbu", "barrier": "cbu", "misc": "alu"}


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


def kernel_metrics(gpu, cycles: int) -> dict:
    sms = gpu.sms
    spec = gpu.spec
    counters = [sm.counters for sm in sms]
    inst = sum(c.inst for c in counters)
    thread_inst = sum(c.thread_inst for c in counters)
    active = sum(c.active_cycles for c in counters)
    warp_cycles = sum(c.warp_cycles for c in counters)
    sp_active = sum(sum(c.sp_active_cycles) for c in counters)
    stall = {r: sum(c.tallies[i].cycles for c in counters) for i, r in enumerate(REASONS)}
    stall["selected"] = inst  # each issue is one warp-cycle in the selected state
    occ = gpu.occupancy
    seconds = cycles / (spec.clocks.core_mhz * 1e6)
    fp32_flops = sum(c.fp32_flops for c in counters)
    tensor_flops = sum(c.tensor_flops for c in counters)
    tensor_pipe_flops = sum(c.tensor_pipe_flops for c in counters)
    tensor_pipe_cycles = sum(c.tensor_pipe_cycles for c in counters)
    m = {
        "gpu_sim_cycle": cycles,
        "gpc__cycles_elapsed.max": cycles,
        "gpu__time_duration.sum": cycles / (spec.clocks.core_mhz * 1e6),
        "sm__cycles_elapsed.avg.per_second": spec.clocks.core_mhz * 1e6,
        "smsp__inst_executed.sum": inst,
        "smsp__thread_inst_executed.sum": thread_inst,
        "gpu_sim_insn": thread_inst,
        "sm__inst_executed.avg.per_cycle_active": _ratio(inst, active),
        "sm__cycles_active.avg": _ratio(active, len(sms)),
        "gpu_ipc": _ratio(thread_inst, cycles),
        "gpu__inst_executed_per_cycle": _ratio(inst, cycles),
        "sm__warps_active.avg.pct_of_peak_sustained_active": 100 * _ratio(warp_cycles, active * spec.sm.max_warps),
        "sm__maximum_warps_per_active_cycle_pct": 100 * occ.occupancy,
        "smsp__thread_inst_executed_per_inst_executed.ratio": _ratio(thread_inst, inst),
        "smsp__issue_active.avg.pct_of_peak_sustained_active": 100 * _ratio(inst, sp_active),
        "smsp__warps_eligible.avg.per_cycle_active": _ratio(stall["selected"] + stall["not_selected"], sp_active),
        "smsp__warps_active.avg.per_cycle_active": _ratio(warp_cycles, sp_active),
        "smsp__average_warp_latency_per_inst_issued.ratio": _ratio(warp_cycles, inst),
        "gpusim__fp32_flop.sum": fp32_flops,
        "gpusim__fp32_flop.per_second": _ratio(fp32_flops, seconds),
        "gpusim__tensor_flop.sum": tensor_flops,
        "gpusim__tensor_flop.per_second": _ratio(tensor_flops, seconds),
        # the tensor work in FP16 FLOP of the same pipe time: what the tensor pipe's percent of peak is taken of
        "gpusim__tensor_pipe_fp16_equivalent_flop.sum": tensor_pipe_flops,
        "gpusim__tensor_pipe_fp16_equivalent_flop.per_second": _ratio(tensor_pipe_flops, seconds),
        "gpusim__tensor_pipe_cycles.sum": round(tensor_pipe_cycles, 3),
        "launch__grid_size": gpu.kernel.launch.nblocks,
        "launch__cluster_size": gpu.kernel.launch.cluster_size,
        "gpusim__cluster_wait_cycles": gpu.dispatcher.cluster_wait_cycles,
        "launch__block_size": gpu.kernel.launch.threads_per_block,
        "launch__registers_per_thread": gpu.kernel.launch.registers_per_thread,
        "launch__shared_mem_per_block": gpu.kernel.launch.smem_per_block,
        "launch__sm_count": len(sms),
        "launch__occupancy_limit_registers": occ.block_limit_registers,
        "launch__occupancy_limit_shared_mem": occ.block_limit_shared_memory,
        "launch__occupancy_limit_warps": occ.block_limit_warps,
        "launch__occupancy_limit_blocks": occ.block_limit_blocks,
        "launch__occupancy_limit_barriers": occ.block_limit_barriers,
        "launch__waves_per_multiprocessor": gpu.dispatcher.waves,
        "gpusim__blocks_per_sm": occ.blocks_per_sm,
        "gpusim__blocks_run_per_sm_max": max(gpu.dispatcher.placements),
        "gpusim__max_resident_blocks_per_sm": max(sm.max_running_blocks for sm in sms),
        # extra operand-collector cycles: sources that need more reads of one register bank than it serves a cycle
        "gpusim__register_bank_conflicts": sum(getattr(sp, "register_bank_conflicts", 0) for sm in sms
                                              for sp in sm.sps),
    }
    for reason in REASONS:
        m[f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio"] = _ratio(stall[reason], inst)
        m[f"smsp__pcsamp_warps_issue_stalled_{reason}"] = stall[reason]
    pipes: dict[str, int] = {}
    for c in counters:
        for cls, n in c.by_pipeline.items():
            if not n:
                continue
            key = f"sm__inst_executed_pipe_{PIPE_NAMES[cls]}.sum"
            pipes[key] = pipes.get(key, 0) + n
    m.update(sorted(pipes.items()))
    m.update(gpu.memory.metrics(cycles))
    m.update(speed_of_light(m, spec))
    return m


def combine_metrics(per_kernel: list[dict]) -> dict:
    """Totals for kernels run one after another, as gpusim.stats.declared says each metric combines: counts and
    cycles add up; a ratio is recomputed over the totals of what it is a ratio of (IPC, stall cycles per issue,
    DRAM bandwidth, hit rates weighted by their sectors). Launch settings, maxima, steady values and the speed of
    light stay in each kernel's own record."""
    total: dict = {}
    weighted: dict = {}
    for m in per_kernel:
        for key, value in m.items():
            declared = METRICS.get(key)
            if declared is None or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if declared.kind == "count":
                total[key] = total.get(key, 0) + value
            elif declared.kind == "ratio" and declared.over is not None:
                weighted[key] = weighted.get(key, 0.0) + value * m.get(declared.over, 0)
    for key, value in weighted.items():
        total[key] = _ratio(value, total.get(METRICS[key].over, 0))
    total["kernels"] = len(per_kernel)
    return dict(sorted(total.items()))
