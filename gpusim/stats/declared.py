"""Every metric a record holds, declared once: its name (Nsight Compute's where it has one), unit, meaning, and
what kind of quantity it is, which says how it combines over SMs and over time (pure data).

The kinds:

* ``count``: events, cycles, bytes or FLOP that add up over SMs and over time (a sampled run extrapolates it,
  kernels run one after another sum it);
* ``ratio``: X / Y with Y the additive metric named by ``over`` (X = ratio x Y adds up, so a projection works
  on X and divides again; a hit rate in percent is 100 x hits / sectors);
* ``ratio_sp_active``: a ratio over the sub-partitions' active cycles, which the record holds only through the
  issue-active percentage;
* ``derived``: recomputed from the counts after they are projected or summed, never projected itself (a unit's
  percent of its peak in the run's cycles, the speed of light; the arithmetic intensity);
* ``steady``: an average whose weights the record does not hold (a load latency, a capacity): a sampled run
  keeps its largest run's value;
* ``maximum``: bounded by a maximum, not a sum (the largest run's value);
* ``launch``: the launch's configuration, the same in every run of a kernel.

The sampling projection (gpusim.sampling.project), kernels run one after another (gpusim.stats.metrics), the
side-by-side table, a sweep's columns and the physical-limit checks (every percentage within 0-100) read this
table; a test runs the shipped workloads and fails on any metric of a record that is not declared here.
"""

from __future__ import annotations

import attrs

from .counters import REASONS

KINDS = ("count", "ratio", "ratio_sp_active", "derived", "steady", "maximum", "launch")
PIPES = ("fma", "alu", "fp64", "xu", "tensor", "lsu", "cbu")  # Nsight Compute's pipe names (metrics.PIPE_NAMES)


@attrs.frozen
class Metric:
    name: str
    unit: str
    kind: str = attrs.field(validator=attrs.validators.in_(KINDS))
    description: str
    over: str | None = None  # a ratio's denominator (an additive metric of the record)


def _declare(*rows: tuple) -> dict[str, Metric]:
    out: dict[str, Metric] = {}
    for row in rows:
        name, unit, kind, description, *over = row
        out[name] = Metric(name, unit, kind, description, over[0] if over else None)
    return out


CYCLES, TIME, INSTS = "gpu_sim_cycle", "gpu__time_duration.sum", "smsp__inst_executed.sum"
ACTIVE = "sm__cycles_active.avg"

METRICS: dict[str, Metric] = _declare(
    (CYCLES, "cycles", "count", "core clock cycles from launch to the last block's end"),
    ("gpc__cycles_elapsed.max", "cycles", "count", "the same elapsed cycles, as Nsight Compute names them"),
    (TIME, "s", "count", "elapsed time at the SM clock simulated"),
    ("sm__cycles_elapsed.avg.per_second", "Hz", "launch", "the SM clock simulated: the arch file's core clock, or "
     "the one --clock sets"),
    (INSTS, "warp-instructions", "count", "warp-instructions issued"),
    ("smsp__thread_inst_executed.sum", "thread-instructions", "count", "thread-instructions executed (active lanes)"),
    ("gpu_sim_insn", "thread-instructions", "count", "GPGPU-Sim's name for the thread-instructions"),
    ("sm__inst_executed.avg.per_cycle_active", "warp-inst/cycle", "ratio", "IPC per SM over its active cycles",
     ACTIVE),
    (ACTIVE, "cycles", "count", "cycles an SM had a block resident, averaged over the SMs"),
    ("gpu_ipc", "thread-inst/cycle", "ratio", "thread-instructions per cycle (GPGPU-Sim's IPC)", CYCLES),
    ("gpu__inst_executed_per_cycle", "warp-inst/cycle", "ratio", "warp-instructions per cycle, whole GPU", CYCLES),
    ("sm__warps_active.avg.pct_of_peak_sustained_active", "%", "ratio",
     "achieved occupancy: resident warps over the SM's maximum, over active cycles", ACTIVE),
    ("sm__maximum_warps_per_active_cycle_pct", "%", "maximum", "theoretical occupancy (CUDA's calculator)"),
    ("smsp__thread_inst_executed_per_inst_executed.ratio", "threads", "ratio",
     "active lanes per warp-instruction (SIMT efficiency x 32)", INSTS),
    ("smsp__issue_active.avg.pct_of_peak_sustained_active", "%", "ratio_sp_active",
     "cycles a sub-partition issued, over its active cycles"),
    ("smsp__warps_eligible.avg.per_cycle_active", "warps", "ratio_sp_active",
     "warps ready to issue per active sub-partition cycle"),
    ("smsp__warps_active.avg.per_cycle_active", "warps", "ratio_sp_active",
     "warps resident per active sub-partition cycle"),
    ("smsp__average_warp_latency_per_inst_issued.ratio", "cycles", "ratio",
     "warp-cycles per issued instruction (the stall reasons' sum)", INSTS),
    ("gpusim__fp32_flop.sum", "FLOP", "count", "FP32 floating-point operations (an FMA is two)"),
    ("gpusim__fp32_flop.per_second", "FLOP/s", "ratio", "FP32 FLOP over the elapsed time", TIME),
    ("gpusim__tensor_flop.sum", "FLOP", "count", "tensor-core operations at their own precision"),
    ("gpusim__tensor_flop.per_second", "FLOP/s", "ratio", "tensor FLOP over the elapsed time", TIME),
    ("gpusim__tensor_pipe_cycles.sum", "cycles", "count",
     "sub-partition cycles the tensor pipe was held (each MMA's interval at its opcode's rate)"),
    ("gpusim__tensor_pipe_fp16_equivalent_flop.sum", "FLOP", "count",
     "the tensor work as FP16 FLOP of the same pipe time (what the tensor peak is taken of)"),
    ("gpusim__tensor_pipe_fp16_equivalent_flop.per_second", "FLOP/s", "ratio",
     "FP16-equivalent tensor FLOP over the elapsed time", TIME),
    ("launch__grid_size", "blocks", "launch", "blocks in the grid"),
    ("launch__cluster_size", "blocks", "launch", "blocks in a thread-block cluster (1: none)"),
    ("gpusim__cluster_wait_cycles", "cycles", "count", "cycles clusters waited for a GPC with room for all blocks"),
    ("launch__block_size", "threads", "launch", "threads per block"),
    ("launch__registers_per_thread", "registers", "launch", "registers per thread"),
    ("launch__shared_mem_per_block", "bytes", "launch", "shared memory per block"),
    ("launch__sm_count", "SMs", "launch", "SMs the kernel ran on"),
    ("launch__occupancy_limit_registers", "blocks", "launch", "resident blocks the register file allows"),
    ("launch__occupancy_limit_shared_mem", "blocks", "launch", "resident blocks shared memory allows"),
    ("launch__occupancy_limit_warps", "blocks", "launch", "resident blocks the warp slots allow"),
    ("launch__occupancy_limit_blocks", "blocks", "launch", "resident blocks the SM's block slots allow"),
    ("launch__occupancy_limit_barriers", "blocks", "launch", "resident blocks the named barriers allow"),
    ("launch__waves_per_multiprocessor", "waves", "launch", "blocks over the GPU's resident blocks"),
    ("gpusim__blocks_per_sm", "blocks", "launch", "resident blocks per SM (the occupancy's)"),
    ("gpusim__blocks_run_per_sm_max", "blocks", "count", "the most blocks any SM ran over the kernel"),
    ("gpusim__max_resident_blocks_per_sm", "blocks", "maximum", "the most blocks resident on one SM at once"),
    ("gpusim__register_bank_conflicts", "cycles", "count", "operand-collector cycles lost to register bank conflicts"),
    ("kernels", "kernels", "launch", "kernels of a command list run one after another"),
    # memory hierarchy
    ("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "requests", "count", "global load requests"),
    ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "sectors", "count", "global load sectors"),
    ("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "sectors", "count", "global store sectors"),
    ("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", "requests", "count", "global store requests"),
    ("l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum", "requests", "count", "global atomic requests"),
    ("l1tex__t_sector_hit_rate.pct", "%", "ratio", "L1 hit rate of global load sectors",
     "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"),
    ("gpusim__sectors_per_request_global_ld", "sectors", "ratio", "sectors per global load request (coalescing)",
     "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"),
    ("gpusim__l1_mshr_merged_sectors", "sectors", "count", "load sectors merged into an L1 miss in flight"),
    ("gpusim__l2_pending_merged_sectors", "sectors", "count", "L2 sectors that met a line in flight from DRAM"),
    ("gpusim__atomic_lane_updates", "updates", "count", "atomic lane updates"),
    ("gpusim__atomic_sectors", "sectors", "count", "sectors atomics touched at L2"),
    ("l1tex__data_pipe_lsu_wavefronts.sum", "wavefronts", "count", "L1TEX data-stage wavefronts"),
    ("l1tex__data_pipe_lsu_wavefronts.avg.per_cycle_elapsed", "wavefronts/cycle", "ratio",
     "data-stage wavefronts per SM per cycle", CYCLES),
    ("gpusim__l1_to_l2_bytes", "bytes", "count", "bytes the SMs sent to L2"),
    ("lts__t_sectors.sum", "sectors", "count", "L2 sectors accessed"),
    ("lts__t_sector_hit_rate.pct", "%", "ratio", "L2 sector hit rate", "lts__t_sectors.sum"),
    ("dram__bytes_read.sum", "bytes", "count", "bytes read from DRAM"),
    ("dram__bytes_write.sum", "bytes", "count", "bytes written to DRAM (L2 write-backs)"),
    ("dram__bytes.sum", "bytes", "count", "bytes read and written"),
    ("dram__bytes.sum.per_second", "B/s", "ratio", "DRAM bandwidth over the elapsed time", TIME),
    ("gpusim__l2_dirty_bytes_at_end", "bytes", "count", "bytes still dirty in the L2 at the end (not written back)"),
    ("gpusim__l2_capacity_bytes", "bytes", "steady", "the L2's capacity (the run's share of it)"),
    ("l1tex__data_pipe_lsu_wavefronts_mem_shared.sum", "wavefronts", "count", "shared-memory wavefronts"),
    ("gpusim__l1tex_data_wavefronts_async", "wavefronts", "count",
     "L1TEX data-stage passes of bulk (TMA) copies' shared-memory writes and warpgroup MMAs' shared-memory operands"),
    ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", "wavefronts", "count", "shared-memory bank conflicts"),
    ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "wavefronts", "count", "bank conflicts of loads"),
    ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "wavefronts", "count", "bank conflicts of stores"),
    ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_atom.sum", "wavefronts", "count",
     "bank conflicts of atomics"),
    ("gpgpu_n_shmem_bkconflict", "wavefronts", "count", "GPGPU-Sim's name for the bank conflicts"),
    ("gpusim__l1_capacity_bytes", "bytes", "steady", "L1 data capacity per SM (after the shared-memory carveout)"),
    ("gpusim__mshr_full_events", "events", "count", "loads that waited for a free L1 MSHR"),
    ("gpusim__memory_insts_without_addresses", "warp-instructions", "count",
     "memory instructions with no address (a trace's or a program's)"),
    ("l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum", "requests", "count", "cp.async (LDGSTS) requests"),
    ("l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum", "sectors", "count", "cp.async (LDGSTS) sectors"),
    ("gpusim__bulk_copies", "copies", "count", "TMA bulk copies"),
    ("gpusim__bulk_copy_bytes", "bytes", "count", "bytes TMA copied"),
    ("gpusim__bulk_copy_multicast_bytes", "bytes", "count", "TMA bytes delivered to more blocks than read"),
    ("l1tex__t_requests_pipe_lsu_mem_dshared_op_ld.sum", "requests", "count", "distributed shared memory loads"),
    ("l1tex__t_requests_pipe_lsu_mem_dshared_op_st.sum", "requests", "count", "distributed shared memory stores"),
    ("l1tex__t_requests_pipe_lsu_mem_dshared_op_atom.sum", "requests", "count", "distributed shared memory atomics"),
    ("l1tex__t_sectors_pipe_lsu_mem_dshared_op_ld.sum", "sectors", "count", "distributed shared memory load sectors"),
    ("l1tex__t_sectors_pipe_lsu_mem_dshared_op_st.sum", "sectors", "count", "distributed shared memory store sectors"),
    ("l1tex__t_sectors_pipe_lsu_mem_dshared_op_atom.sum", "sectors", "count",
     "distributed shared memory atomic sectors"),
    ("l1tex__t_bytes_pipe_lsu_mem_dshared.sum", "bytes", "count", "distributed shared memory bytes"),
    ("gpusim__load_latency_l1_hit", "cycles", "steady", "average load-to-use latency of loads served by L1"),
    ("gpusim__load_latency_l2_hit", "cycles", "steady", "average load-to-use latency of loads served by L2"),
    ("gpusim__load_latency_l2_in_flight", "cycles", "steady",
     "average load-to-use latency of loads whose deepest request met at the L2 a DRAM read of its line in flight "
     "(merged: it waits for that read's data, from its own L2 latency up)"),
    ("gpusim__load_latency_dram", "cycles", "steady",
     "average load-to-use latency of loads whose deepest request read DRAM itself"),
    # speed of light (gpusim.stats.invariants.speed_of_light)
    ("sm__inst_executed.avg.pct_of_peak_sustained_elapsed", "%", "derived", "issue slots used"),
    ("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed", "%", "derived", "FP32 pipe's peak used"),
    ("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", "%", "derived",
     "tensor pipe's cycles busy (an instruction holds it for its interval at its own rate: an H100's mma.sync "
     "reaches 100% at 2/3 of the dense FLOP peak)"),
    ("gpusim__tensor_flop.avg.pct_of_peak_sustained_elapsed", "%", "derived",
     "tensor FLOP (FP16-equivalent) against the dense peak"),
    ("sm__pipe_xu_cycles_active.avg.pct_of_peak_sustained_elapsed", "%", "derived",
     "special-function (XU: MUFU) pipe's peak used"),
    ("sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_elapsed", "%", "derived", "INT32 (ALU) pipe's peak used"),
    ("l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed", "%", "derived",
     "L1TEX data stage's peak used"),
    ("gpusim__l1_to_l2_bytes.avg.pct_of_peak_sustained_elapsed", "%", "derived", "SM-to-L2 ports' peak used"),
    ("lts__t_sectors.avg.pct_of_peak_sustained_elapsed", "%", "derived", "L2 slices' bandwidth used"),
    ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "%", "derived", "DRAM's achievable bandwidth used"),
    ("gpusim__sm_to_sm_bytes.avg.pct_of_peak_sustained_elapsed", "%", "derived", "SM-to-SM network's peak used"),
    ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "%", "derived", "the busiest compute unit's share"),
    ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "%", "derived",
     "the busiest memory unit's share"),
    ("gpusim__arithmetic_intensity_flop_per_dram_byte", "FLOP/B", "derived", "FLOP per DRAM byte (recomputed)"),
    *[(f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio", "cycles", "ratio",
       f"warp-cycles in the {r} state per issued instruction", INSTS) for r in REASONS],
    *[(f"smsp__pcsamp_warps_issue_stalled_{r}", "warp-cycles", "count", f"warp-cycles in the {r} state")
      for r in REASONS],
    *[(f"sm__inst_executed_pipe_{p}.sum", "warp-instructions", "count", f"warp-instructions on the {p} pipe")
      for p in PIPES],
)

# Helper quantities a sampled run's reduced runs add (a shadow L2's DRAM traffic, the L2 hits close to a fill):
# projected, then removed
INTERNAL = {"gpusim__shadow_dram_bytes_read", "gpusim__shadow_dram_bytes_write",
            "gpusim__shadow_l2_dirty_bytes_at_end", "gpusim__shadow_l2_capacity_bytes",
            "gpusim__shadow_l2_hit_sectors", "gpusim__shadow_l2_pending_merged_sectors",
            "gpusim__shadow_l2_recent_fill_hit_sectors", "gpusim__l2_recent_fill_hit_sectors"}


def kind(name: str) -> str | None:
    """The declared kind of metric `name` (None: not declared)."""
    metric = METRICS.get(name)
    return metric.kind if metric is not None else None


def names(*kinds: str) -> tuple[str, ...]:
    """The declared metrics of these kinds."""
    return tuple(m.name for m in METRICS.values() if m.kind in kinds)


def undeclared(metrics: dict) -> list[str]:
    """The keys of a record's metrics that this table does not declare."""
    return sorted(k for k in metrics if k not in METRICS and k not in INTERNAL)


def percentages_out_of_range(metrics: dict, slack: float = 1.0001) -> list[str]:
    """Declared percentages outside 0-100 (a hit rate, an occupancy, a share of a peak): one line each."""
    out = []
    for key, value in metrics.items():
        metric = METRICS.get(key)
        if metric is None or metric.unit != "%" or metric.kind == "derived" or isinstance(value, bool) \
                or not isinstance(value, (int, float)):  # (a unit's share of its peak: its rate is checked)
            continue
        if value < 0 or value > 100 * slack:
            out.append(f"{key}: {value:.4g}% is outside 0-100% ({metric.description})")
    return out


__all__ = ["INTERNAL", "KINDS", "METRICS", "Metric", "kind", "names", "percentages_out_of_range", "undeclared"]
