"""The readable report of one simulated kernel."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..stats.counters import REASONS
from ..stats.declared import METRICS
from .text import plain


def print_command_list(result) -> None:
    """A command list's kernels, one row each, and their totals."""
    console = Console(width=140)
    table = Table(title=f"{plain(result.kernel)} on {result.arch}: {len(result.kernels)} kernels, run one after "
                        f"another")
    for col in ("kernel", "grid x block", "cycles", "warp-inst", "thread-inst", "IPC/SM", "occupancy", "DRAM bytes",
                "L2 hit"):
        table.add_column(col, justify="left" if col in ("kernel", "grid x block") else "right")
    for k in result.kernels:
        km, launch = k["metrics"], k["launch"]
        table.add_row(plain(k["kernel"], 40), f"{launch['grid']} x {launch['block']}", f"{km['gpu_sim_cycle']:,}",
                      f"{km['smsp__inst_executed.sum']:,}", f"{km['smsp__thread_inst_executed.sum']:,}",
                      f"{km['sm__inst_executed.avg.per_cycle_active']:.3f}",
                      f"{km['sm__warps_active.avg.pct_of_peak_sustained_active']:.1f}%",
                      f"{km.get('dram__bytes.sum', 0):,}", f"{km.get('lts__t_sector_hit_rate.pct', 0.0):.1f}%")
    m = result.metrics
    table.add_row("total", "", f"{m['gpu_sim_cycle']:,}", f"{m['smsp__inst_executed.sum']:,}",
                  f"{m['smsp__thread_inst_executed.sum']:,}", "", "", f"{m.get('dram__bytes.sum', 0):,}", "")
    console.print(table)
    console.print(f"simulated in {result.wall_seconds:.2f} s: "
                  f"{m['smsp__inst_executed.sum'] / max(result.wall_seconds, 1e-9):,.0f} warp-instructions/s")


SPEED_OF_LIGHT = (  # Nsight Compute's first section: the busiest compute and memory unit, then each unit
    ("compute throughput (busiest SM unit)", "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("memory throughput (busiest memory unit)", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
    ("issue slots", "sm__inst_executed.avg.pct_of_peak_sustained_elapsed"),
    ("FP32 (FMA) pipe", "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed"),
    ("tensor pipe", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"),
    ("tensor FLOP (of the dense peak)", "gpusim__tensor_flop.avg.pct_of_peak_sustained_elapsed"),
    ("special-function (XU) pipe", "sm__pipe_xu_cycles_active.avg.pct_of_peak_sustained_elapsed"),
    ("INT32 (ALU) pipe", "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_elapsed"),
    ("L1TEX data stage (L1 and shared)", "l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed"),
    ("SM-to-L2 ports", "gpusim__l1_to_l2_bytes.avg.pct_of_peak_sustained_elapsed"),
    ("L2 slices", "lts__t_sectors.avg.pct_of_peak_sustained_elapsed"),
    ("DRAM (of the achievable peak)", "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
)


def print_run(result) -> None:
    if result.kernels:
        print_command_list(result)
        return
    m = result.metrics
    console = Console(width=120)
    launch = result.launch
    simt = "replaying the trace's order" if result.simt == "trace" else f"SIMT {result.simt}"
    console.print(f"[bold]{plain(result.kernel)}[/bold] on {result.arch} ({m['launch__sm_count']} SMs), scheduler "
                  f"{result.scheduler}, {simt}: grid {launch['grid']} x block {launch['block']}, "
                  f"{launch['registers_per_thread']} regs, {launch['shared_memory_bytes'] + launch['dynamic_shared_memory_bytes']} B shared"
                  + (f", carveout {launch['carveout']}%" if launch.get("carveout") is not None else ""))
    summary = Table(show_header=False, title="summary")
    summary.add_column("metric")
    summary.add_column("value", justify="right")
    rows = [
        ("cycles (gpu_sim_cycle)", f"{m['gpu_sim_cycle']:,}"),
        (_time_label(result, m), f"{m['gpu__time_duration.sum'] * 1e6:,.2f} us"),
        ("warp-instructions", f"{m['smsp__inst_executed.sum']:,}"),
        ("thread-instructions", f"{m['smsp__thread_inst_executed.sum']:,}"),
        ("IPC per SM (warp-inst / active cycle)", f"{m['sm__inst_executed.avg.per_cycle_active']:.3f}"),
        ("issue slots busy per sub-partition", f"{m['smsp__issue_active.avg.pct_of_peak_sustained_active']:.1f}%"),
        ("active lanes per warp-instruction", f"{m['smsp__thread_inst_executed_per_inst_executed.ratio']:.2f}"),
        ("achieved occupancy", f"{m['sm__warps_active.avg.pct_of_peak_sustained_active']:.1f}%"),
        ("theoretical occupancy", f"{m['sm__maximum_warps_per_active_cycle_pct']:.1f}%"),
        ("eligible warps per cycle per sub-partition", f"{m['smsp__warps_eligible.avg.per_cycle_active']:.2f}"),
        ("blocks per SM (resident) / waves", f"{m['gpusim__blocks_per_sm']} / {m['launch__waves_per_multiprocessor']:.2f}"),
    ]
    for key, label, fmt in (("l1tex__t_sector_hit_rate.pct", "L1 sector hit rate (global loads)", "{:.1f}%"),
                            ("lts__t_sector_hit_rate.pct", "L2 sector hit rate", "{:.1f}%"),
                            ("dram__bytes.sum.per_second", "DRAM bandwidth (GB/s)", "{:,.0f}"),
                            ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", "shared-memory bank conflicts", "{:,}")):
        if key in m:
            value = m[key] / 1e9 if key.endswith("per_second") else m[key]
            rows.append((label, fmt.format(value)))
    sol = [(label, key) for label, key in SPEED_OF_LIGHT if key in m]
    if sol:
        rows.append(("speed of light (% of peak):", ""))
        rows += [(f"  {label}", f"{m[key]:.1f}%") for label, key in sol]
        if m.get("gpusim__arithmetic_intensity_flop_per_dram_byte"):
            rows.append(("  arithmetic intensity (FLOP / DRAM byte)",
                         f"{m['gpusim__arithmetic_intensity_flop_per_dram_byte']:,.1f}"))
    sampling = result.sampling or {}
    if sampling.get("method", "full") != "full":
        rows.append(("sampled (the rest projected)", f"{sampling['method']}, {sampling['simulated_warp_instructions']:,} "
                                                     f"warp-inst simulated, error ~{sampling['error_estimate_pct']:.1f}%"))
        if "dram_error_estimate_pct" in sampling:
            rows.append(("  DRAM bytes' stated error", f"~{sampling['dram_error_estimate_pct']:.1f}%"))
        if "l2_hit_error_points" in sampling:
            rows.append(("  L2 hit rate's stated error", f"~{sampling['l2_hit_error_points']:.1f} points"))
    elif sampling:
        rows.append(("sampled", "no, simulated in full (why: the record's sampling.detail)"))
    if result.sync_window > 1:
        rows.append(("SM synchronisation", f"lax: SMs up to {result.sync_window} cycles apart (--sync-window)"))
    for row in rows:
        summary.add_row(*row)
    console.print(summary)
    stalls = Table(title="where warps spent their cycles (per issued instruction)")
    stalls.add_column("state")
    stalls.add_column("cycles/inst", justify="right")
    stalls.add_column("share", justify="right")
    total = m["smsp__average_warp_latency_per_inst_issued.ratio"] or 1
    for reason in sorted(REASONS, key=lambda r: -m[f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio"]):
        value = m[f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio"]
        if value:
            stalls.add_row(reason, f"{value:.2f}", f"{100 * value / total:.1f}%")
    console.print(stalls)
    wall = max(result.wall_seconds, 1e-9)
    sampling = result.sampling or {}
    if sampling.get("simulated_warp_instructions"):  # sampled: the rate of what was simulated, and the gain
        simulated = sampling["simulated_warp_instructions"]
        console.print(f"simulated in {result.wall_seconds:.2f} s: {simulated:,} of {m['smsp__inst_executed.sum']:,} "
                      f"warp-instructions in {len(sampling['simulated_runs'])} reduced runs "
                      f"({simulated / wall:,.0f} warp-instructions/s), the rest projected")
        return
    console.print(f"simulated in {result.wall_seconds:.2f} s: {m['smsp__inst_executed.sum'] / wall:,.0f} "
                  f"warp-instructions/s, {m['gpu_sim_cycle'] / wall:,.0f} cycles/s")


SIDE_BY_SIDE = (  # (label, metric, format, lower is better)
    ("cycles", "gpu_sim_cycle", "{:,.0f}", True),
    ("time (us)", "gpu__time_duration.sum", "{:,.2f}", True),
    ("IPC per SM", "sm__inst_executed.avg.per_cycle_active", "{:.3f}", False),
    ("achieved occupancy (%)", "sm__warps_active.avg.pct_of_peak_sustained_active", "{:.1f}", False),
    ("theoretical occupancy (%)", "sm__maximum_warps_per_active_cycle_pct", "{:.1f}", False),
    ("L1 hit rate (%)", "l1tex__t_sector_hit_rate.pct", "{:.1f}", False),
    ("L2 hit rate (%)", "lts__t_sector_hit_rate.pct", "{:.1f}", False),
    ("DRAM GB/s", "dram__bytes.sum.per_second", "{:,.0f}", False),
    ("tensor TFLOP/s", "gpusim__tensor_flop.per_second", "{:,.1f}", False),
    ("FP32 TFLOP/s", "gpusim__fp32_flop.per_second", "{:,.1f}", False),
    ("warp-instructions", "smsp__inst_executed.sum", "{:,.0f}", True),
)


DISPLAY_SCALE = {"FLOP/s": 1e-12, "B/s": 1e-9, "s": 1e6}  # the side-by-side labels' units: TFLOP/s, GB/s, us


def print_side_by_side(results) -> None:
    """One table for several runs of a workload (archs, schedulers): a column per run, each value with its
    ratio to the first run's."""
    if not results:
        return
    console = Console(width=160)
    first = results[0]
    table = Table(title=f"{plain(first.kernel)}: side by side (ratio to {first.arch}/{first.scheduler})")
    table.add_column("metric")
    for r in results:
        sampled = (r.sampling or {}).get("method", "full") != "full"
        table.add_column(f"{r.arch} / {r.scheduler}{' (sampled)' if sampled else ''}", justify="right")
    for label, key, fmt, _ in SIDE_BY_SIDE:
        if not any(r.metrics.get(key) for r in results):  # absent or zero in every run: left out
            continue
        base = first.metrics.get(key)
        scale = DISPLAY_SCALE.get(METRICS[key].unit, 1)  # (the unit each is declared in: gpusim.stats.declared)
        cells = []
        for r in results:
            value = r.metrics.get(key)
            if value is None:
                cells.append("-")
                continue
            ratio = f" ({value / base:.2f}x)" if base and r is not first else ""
            cells.append(fmt.format(value * scale) + ratio)
        table.add_row(label, *cells)
    console.print(table)


def _time_label(result, m: dict) -> str:
    """'time at the core clock', or at the clock --clock set ('time at 1,793 MHz (sustained)')."""
    clock = result.options.get("clock", "boost")
    hz = m.get("sm__cycles_elapsed.avg.per_second")
    if clock == "boost" or not hz:
        return "time at the core clock"
    return f"time at {hz / 1e6:,.0f} MHz" + (" (sustained)" if clock == "sustained" else " (--clock)")
