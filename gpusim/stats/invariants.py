"""Physical limits a run's metrics must respect, checked after the fact (pure: metrics and spec in, violations out).

Each rule compares what the run did with what the modelled hardware can do in the cycles it took: no rate
above its peak, no data before it can arrive, no bytes created or lost between levels. `violations` returns one
line per broken rule (empty: all hold). Tests run it on every shipped workload on every arch.
"""

from __future__ import annotations

from .declared import percentages_out_of_range

SLACK = 1.0001  # float rounding in the rates


def _share(count: int, sms: int, total_sms: int) -> int:
    """Slices or channels a run on `sms` of `total_sms` SMs keeps (hierarchy.py: at least one)."""
    return max(1, round(count * min(1.0, sms / total_sms)))


def throughputs(metrics: dict, spec) -> list[tuple[str, str, float, float, str]]:
    """What each modelled unit achieved against its peak in the run's cycles: (label, the Nsight Compute name of
    its percent of peak, achieved, peak, unit); the memory units only with the memory hierarchy's counters."""
    m = metrics
    cycles = m["gpu_sim_cycle"]
    sms = m["launch__sm_count"]
    sub = spec.sm.sub_partitions
    fp32_peak = sms * sub * spec.pipelines.fp32.lanes * 2 * spec.clocks.core_mhz * 1e6
    tensor_peak = sms * sub * spec.pipelines.tensor.dense_fp16_flops_per_clock * spec.clocks.tensor_mhz * 1e6
    # issue: one warp-instruction per sub-partition per clock; FP32 and tensor work at their pipes' peaks (the
    # tensor work as FP16 FLOP of the same pipe time, so FP8 at twice FP16's rate is held to its own peak)
    tensor = m.get("gpusim__tensor_pipe_fp16_equivalent_flop.per_second", m.get("gpusim__tensor_flop.per_second", 0.0))
    rows = [
        ("instructions issued", "sm__inst_executed.avg.pct_of_peak_sustained_elapsed",
         m["smsp__inst_executed.sum"] / cycles, sms * sub, "warp-inst/clk"),
        ("FP32 throughput", "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed",
         m.get("gpusim__fp32_flop.per_second", 0.0), fp32_peak, "FLOP/s"),
        ("tensor throughput", "gpusim__tensor_flop.avg.pct_of_peak_sustained_elapsed",
         tensor, tensor_peak, "FP16-equivalent FLOP/s"),
    ]
    if "gpusim__tensor_pipe_cycles.sum" in m:  # the cycles the tensor pipe was held (each MMA at its own rate)
        rows.append(("tensor pipe cycles", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
                     m["gpusim__tensor_pipe_cycles.sum"] / cycles, sms * sub, "cycles/clk"))
    # the narrow pipes: a warp-instruction takes 32 / lanes of their clocks (MUFU on the XU, integer on the ALU)
    for label, name, pipe, lanes in (
            ("SFU (XU) lane-operations", "sm__pipe_xu_cycles_active.avg.pct_of_peak_sustained_elapsed",
             "sm__inst_executed_pipe_xu.sum", spec.pipelines.sfu.lanes),
            ("INT32 (ALU) lane-operations", "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_elapsed",
             "sm__inst_executed_pipe_alu.sum", spec.pipelines.int32.lanes)):
        rows.append((label, name, m.get(pipe, 0) * 32 / cycles, sms * sub * lanes, "lane-op/clk"))
    if "l1tex__data_pipe_lsu_wavefronts.sum" not in m:
        return rows  # a fixed-latency memory model: no hierarchy
    mem = spec.memory
    slices = _share(mem.l2.slices, sms, spec.sms)
    channels = _share(mem.dram.channels, sms, spec.sms)
    dram_peak = channels * mem.dram.bandwidth_gbs * 1e9 / mem.dram.channels
    rows += [  # the L1TEX data stage: one wavefront per SM per clock; each SM's port to L2; L2 slices; DRAM
        ("L1TEX data-stage wavefronts", "l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed",
         m["l1tex__data_pipe_lsu_wavefronts.sum"] / cycles, sms, "wavefronts/clk"),
        ("SM to L2 bytes", "gpusim__l1_to_l2_bytes.avg.pct_of_peak_sustained_elapsed",
         m["gpusim__l1_to_l2_bytes"] / cycles, sms * mem.l2.sm_bytes_per_clock, "B/clk"),
        ("L2 bytes", "lts__t_sectors.avg.pct_of_peak_sustained_elapsed",
         m["lts__t_sectors.sum"] * mem.l2.sector_bytes / cycles,
         slices * mem.l2.bandwidth_bytes_per_clock / mem.l2.slices, "B/clk"),
        ("DRAM bandwidth", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
         m["dram__bytes.sum.per_second"], dram_peak * mem.dram.read_efficiency, "B/s"),
    ]
    if mem.sm_to_sm is not None and "l1tex__t_bytes_pipe_lsu_mem_dshared.sum" in m:
        rows.append(  # distributed shared memory: every byte leaves one SM's SM-to-SM port
            ("SM-to-SM bytes", "gpusim__sm_to_sm_bytes.avg.pct_of_peak_sustained_elapsed",
             m["l1tex__t_bytes_pipe_lsu_mem_dshared.sum"] / cycles, sms * mem.sm_to_sm.sm_bytes_per_clock, "B/clk"))
    return rows


COMPUTE_UNITS = ("sm__inst_executed.avg.pct_of_peak_sustained_elapsed",
                 "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed",
                 "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
                 "sm__pipe_xu_cycles_active.avg.pct_of_peak_sustained_elapsed",
                 "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_elapsed",
                 "l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed")
MEMORY_UNITS = ("l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed",
                "gpusim__l1_to_l2_bytes.avg.pct_of_peak_sustained_elapsed",
                "lts__t_sectors.avg.pct_of_peak_sustained_elapsed",
                "dram__throughput.avg.pct_of_peak_sustained_elapsed",
                "gpusim__sm_to_sm_bytes.avg.pct_of_peak_sustained_elapsed")


# the units a workload's `bound:` may name, and the percent of peak that measures each
UNIT_METRICS = {
    "tensor": "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
    "fma": "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed",
    "xu": "sm__pipe_xu_cycles_active.avg.pct_of_peak_sustained_elapsed",
    "alu": "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_elapsed",
    "issue": "sm__inst_executed.avg.pct_of_peak_sustained_elapsed",
    "l1tex": "l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed",
    "sm-to-l2": "gpusim__l1_to_l2_bytes.avg.pct_of_peak_sustained_elapsed",
    "l2": "lts__t_sectors.avg.pct_of_peak_sustained_elapsed",
    "dram": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
}
BOUND_FLOOR = 60.0  # percent: a unit this busy (or more) bounds the kernel; below it on every unit, latency does


def busiest_unit(metrics: dict) -> tuple[str, float]:
    """(the busiest unit's name in UNIT_METRICS, its percent of peak), or ("latency", that percent) when no unit
    reaches BOUND_FLOOR."""
    name, pct = max(((n, metrics.get(k, 0.0)) for n, k in UNIT_METRICS.items()), key=lambda item: item[1])
    return (name if pct >= BOUND_FLOOR else "latency"), pct


def speed_of_light(metrics: dict, spec) -> dict:
    """Nsight Compute's Speed Of Light section: each unit's percent of its peak in the run's cycles (the DRAM
    peak is the arch's achievable one: datasheet x read efficiency), compute and memory throughput (the busiest
    unit of each kind, as `sm__throughput` and `gpu__compute_memory_throughput` are), and the arithmetic
    intensity (FLOP per DRAM byte)."""
    if not metrics.get("gpu_sim_cycle"):
        return {}
    out = {name: 100.0 * achieved / peak if peak else 0.0 for _, name, achieved, peak, _ in throughputs(metrics, spec)}
    out["sm__throughput.avg.pct_of_peak_sustained_elapsed"] = max(out.get(k, 0.0) for k in COMPUTE_UNITS)
    out["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"] = max(
        out.get(k, 0.0) for k in MEMORY_UNITS)
    flops = metrics.get("gpusim__fp32_flop.sum", 0) + metrics.get("gpusim__tensor_flop.sum", 0)
    dram = metrics.get("dram__bytes.sum", 0)
    out["gpusim__arithmetic_intensity_flop_per_dram_byte"] = flops / dram if dram else 0.0
    return out


def violations(metrics: dict, spec) -> list[str]:
    """The physical limits `metrics` (a run's record) break on `spec`; empty when none."""
    m = metrics
    out: list[str] = []
    if not m.get("gpu_sim_cycle"):
        return out
    out += percentages_out_of_range(m, SLACK)  # hit rates, occupancies, issue activity (gpusim.stats.declared)
    for name, _, achieved, peak, unit in throughputs(m, spec):
        if achieved > peak * SLACK:
            out.append(f"{name}: {achieved:.4g} {unit} exceeds the peak {peak:.4g} {unit} ({achieved / peak:.3f}x)")
    if "l1tex__data_pipe_lsu_wavefronts.sum" not in m:
        return out  # a fixed-latency memory model: no hierarchy to check
    mem = spec.memory
    # causality: no load completes before its level's load-to-use latency
    for level, latency in (("l1_hit", mem.l1.hit_latency), ("l2_hit", mem.l2.hit_latency),
                           ("l2_in_flight", mem.l2.hit_latency), ("dram", mem.dram.latency)):
        got = m[f"gpusim__load_latency_{level}"]
        if got and got < latency:
            out.append(f"loads served by {level} took {got:.1f} cycles on average, below its latency {latency}")
    # bytes conserved between levels: the SMs send whole sectors, so a simulated record matches exactly; a projected
    # one rounds each count on its own (half a sector and half a byte at most), so less than a sector apart is equal
    sector = mem.l2.sector_bytes
    if abs(m["lts__t_sectors.sum"] * sector - m["gpusim__l1_to_l2_bytes"]) >= sector:
        out.append(f"L2 saw {m['lts__t_sectors.sum'] * sector} bytes, the SMs sent {m['gpusim__l1_to_l2_bytes']}")
    written = (m["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"] + m.get("gpusim__atomic_sectors", 0)) * sector
    if m["dram__bytes_write.sum"] + m["gpusim__l2_dirty_bytes_at_end"] > written:
        out.append(f"DRAM writes + dirty L2 bytes ({m['dram__bytes_write.sum']} + {m['gpusim__l2_dirty_bytes_at_end']}) "
                   f"exceed the bytes stores and atomics wrote ({written})")
    if m["dram__bytes_read.sum"] > m["lts__t_sectors.sum"] * sector:
        out.append(f"DRAM read {m['dram__bytes_read.sum']} bytes, more than L2 was asked for")
    loads = m["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"]
    hits = m["l1tex__t_sector_hit_rate.pct"] * loads / 100
    if hits + m["gpusim__l1_mshr_merged_sectors"] > loads + 0.5:
        out.append("L1 hits and merged sectors exceed the sectors requested")
    return out
