"""Pictures of one run (`gpusim run ... --plot DIR`, or `result.plot_*()` in a notebook), one function per plot,
each drawing on a matplotlib Axes it is given (or on a new figure) and returning it:

* `plot_warp_states`: where warps spent their cycles per issued instruction (Nsight Compute's Warp State chart,
  from the run's smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio metrics);
* `plot_timeline`: one SM's warp slots over a window of cycles, grouped by scheduler, coloured by state, with
  each issue marked (which warp each scheduler issued, cycle by cycle);
* `plot_occupancy`: active and eligible warps per SM over time (mean and spread across SMs) against the limits;
* `plot_blocks`: which SM ran which block when, coloured by wave (the waves and the tail);
* `plot_memory`: L1 and L2 hit rates and DRAM bandwidth over time;
* `plot_roofline`: the run's FLOP/s against its arithmetic intensity under the arch's compute and bandwidth roofs.

The time plots read `result.timeline` (a gpusim.stats.timeline.Timeline: run with a TimelineRecorder as the
observer and attach it); the warp-state chart and the roofline need only the metrics. Matplotlib draws with the
Agg backend (files, never a display).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import attrs
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402
from mpl_toolkits.axes_grid1 import make_axes_locatable  # noqa: E402

from ..errors import GpusimError  # noqa: E402
from . import plot_directory  # noqa: E402
from ..stats.counters import REASONS  # noqa: E402
from ..stats.invariants import throughputs  # noqa: E402
from ..stats.timeline import TimelineRecorder  # noqa: E402

STATE_COLOURS = {  # one colour per Nsight stall reason, the same in every plot
    "selected": "#2ca02c", "not_selected": "#98df8a", "long_scoreboard": "#d62728", "short_scoreboard": "#ff9896",
    "wait": "#ffbb78", "math_pipe_throttle": "#1f77b4", "mio_throttle": "#aec7e8", "lg_throttle": "#17becf",
    "barrier": "#9467bd", "branch_resolving": "#c5b0d5", "no_instruction": "#8c564b", "drain": "#7f7f7f",
    "dispatch_stall": "#e377c2", "misc": "#bcbd22",
}
CYCLES = FuncFormatter(lambda x, _: f"{x:,.0f}")
DPI = 110
BLOCK_LABELS = 200  # blocks named in their bars at most
MEMORY_INTERVALS = 120  # time steps the memory plot shows at most (the recorder's samples, merged)


# --- titles and shared pieces ------------------------------------------------------------------------------
def one_kernel(result):
    """The run a plot shows: `result` itself, or for a command list its first kernel (the one a TimelineRecorder
    records), named as such."""
    if not result.kernels:
        return result
    first = result.kernels[0]
    name = f"{first['kernel']} (kernel 1 of {len(result.kernels)} in {Path(str(result.kernel)).name})"
    return attrs.evolve(result, kernel=name, metrics=first["metrics"], sampling=first.get("sampling"), kernels=[])


def _spec(result, spec=None):
    if spec is not None:
        return spec
    if result.timeline is not None:
        return result.timeline.spec
    from ..arch import load_arch

    try:
        return load_arch(result.arch)
    except GpusimError:
        raise GpusimError(f"arch {result.arch!r}: not a known name; pass spec= (the ArchSpec the run used)") from None


def _subject(result, spec) -> str:
    """'<kernel> on <product> (<SMs>, <scheduler>)' and, for a sampled run, what the time plots saw."""
    sms = result.metrics.get("launch__sm_count", spec.sms)
    part = f"{sms} SM{'s' if sms != 1 else ''}" if sms == spec.sms else f"{sms} of {spec.sms} SMs"
    return f"{result.kernel} on {spec.full_name} ({part}, {result.scheduler})"


def _observed(result) -> str:
    """For a sampled run: which reduced run the time plots show."""
    observed = (result.sampling or {}).get("observed_run")
    if not observed:
        return ""
    trips = f", {observed['trips']:,} loop trips" if observed.get("trips") else ""
    return f"; sampled kernel: its reduced run of {observed['blocks']:,} blocks{trips}"


def _timeline(result, what: str):
    if result.timeline is None:
        raise GpusimError(f"{what}: result.timeline is None: run with observer=gpusim.stats.timeline."
                          f"TimelineRecorder() and pass the result to its attach()")
    return result.timeline


def _axes(ax, size=(10, 5)):
    if ax is None:
        _, ax = plt.subplots(figsize=size)
    return ax


def _time_axis(ax, tl, label="cycle (SM clock)") -> None:
    ax.set_xlabel(f"{label}, {tl.spec.clocks.core_mhz:,.0f} MHz")
    ax.xaxis.set_major_formatter(CYCLES)


# --- warp states -------------------------------------------------------------------------------------------
def warp_state_cycles(metrics: dict) -> dict[str, float]:
    """Reason -> warp-cycles per issued instruction (nonzero ones, largest first)."""
    values = {r: metrics.get(f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio", 0.0) for r in REASONS}
    return dict(sorted(((r, v) for r, v in values.items() if v > 0), key=lambda kv: -kv[1]))


def plot_warp_states(result, ax=None, spec=None):
    """Warp states per issued instruction: a stacked bar of all of them (their sum is the average cycles between
    a warp's issues) and a bar per state, largest first, as Nsight Compute's Warp State Statistics chart."""
    result = one_kernel(result)
    spec = _spec(result, spec)
    values = warp_state_cycles(result.metrics)
    ax = _axes(ax, (10, 1.6 + 0.38 * (len(values) + 1)))
    rows = ["all states (stacked)"] + list(values)
    left = 0.0
    for reason, v in values.items():
        ax.barh(0, v, left=left, color=STATE_COLOURS[reason], edgecolor="white", linewidth=0.5)
        left += v
    total = sum(values.values())
    for i, (reason, v) in enumerate(values.items(), start=1):
        ax.barh(i, v, color=STATE_COLOURS[reason], label=f"{reason}: {v:.2f} ({100 * v / total:.1f}%)")
        ax.text(v, i, f" {v:.2f}", va="center", fontsize=8)
    ax.text(left, 0, f" {left:.2f}", va="center", fontsize=8, fontweight="bold")
    ax.set_yticks(range(len(rows)), rows, fontsize=9)
    ax.invert_yaxis()
    ax.set_xlim(0, left * 1.12 if left else 1)
    ax.set_xlabel("warp-cycles per issued warp-instruction (cycles/inst)")
    ax.set_ylabel("warp state (Nsight stall reason)")
    ax.set_title(f"Warp states per issued instruction\n{_subject(result, spec)}", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(title="cycles/inst (share)", fontsize=8, title_fontsize=8, loc="lower right")
    return ax


# --- one SM's warp slots -------------------------------------------------------------------------------------
def slot_raster(tl) -> tuple[np.ndarray, list[int]]:
    """The window as an image: [row, cycle] = reason code (REASONS) or -1 (no warp in the slot), rows the SM's
    warp slots grouped by scheduler (slot % sub-partitions), in that order; and the slot of each row."""
    sub, slots = tl.spec.sm.sub_partitions, tl.spec.sm.max_warps
    order = [s for sp in range(sub) for s in range(sp, slots, sub)]
    row_of = {s: r for r, s in enumerate(order)}
    start, end = tl.window
    image = np.full((slots, end - start), -1, dtype=np.int16)
    for slot, code, a, b in tl.slot_states:
        image[row_of[int(slot)], a - start:b - start] = code
    selected = REASONS.index("selected")
    for cycle, _, slot in tl.issues:
        image[row_of[int(slot)], cycle - start] = selected
    return image, order


def plot_timeline(result, ax=None):
    """One SM's warp slots over the recorded window (AerialVision's warp raster): a row per slot, grouped by
    the scheduler that owns it, coloured by the slot's state each cycle (white: no warp); a dark tick marks each
    issue, so each band shows which warp its scheduler issued cycle by cycle."""
    result = one_kernel(result)
    tl = _timeline(result, "plot_timeline")
    image, order = slot_raster(tl)
    ax = _axes(ax, (12, 7))
    present = sorted({int(c) for c in np.unique(image) if c >= 0})
    colours = ["white"] + [STATE_COLOURS[r] for r in REASONS]
    start, end = tl.window
    ax.imshow(image + 1, cmap=ListedColormap(colours), vmin=0, vmax=len(REASONS), aspect="auto",
              interpolation="nearest", extent=(start, end, len(order), 0))
    row_of = {s: r for r, s in enumerate(order)}
    if len(tl.issues):
        ax.scatter(tl.issues[:, 0] + 0.5, [row_of[int(s)] + 0.5 for s in tl.issues[:, 2]], marker="|", s=14,
                   linewidths=0.8, color="#0b3d0b", label="issue (selected)")
    sub, per = tl.spec.sm.sub_partitions, len(order) // tl.spec.sm.sub_partitions
    for sp in range(1, sub):
        ax.axhline(sp * per, color="black", linewidth=0.8)
    ax.set_yticks([sp * per + per / 2 for sp in range(sub)],
                  [f"scheduler {sp}\n(slots {sp}, {sp + sub}, ...)" for sp in range(sub)], fontsize=8)
    ax.set_ylabel(f"warp slot ({per} per scheduler)")
    _time_axis(ax, tl)
    handles = [Patch(facecolor=STATE_COLOURS[REASONS[c]], label=REASONS[c]) for c in present]
    handles.append(Patch(facecolor="white", edgecolor="grey", label="no warp in the slot"))
    if len(tl.issues):
        handles.append(ax.scatter([], [], marker="|", color="#0b3d0b", label="issue (selected)"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, title="state",
              title_fontsize=8, frameon=False)
    span = f"cycles {start:,} to {end:,} of {tl.cycles:,}" if (start, end) != (0, tl.cycles) else \
        f"all {tl.cycles:,} cycles"
    ax.set_title(f"Warp slots of SM {tl.window_sm}: state each cycle and issues ({span}){_observed(result)}\n"
                 f"{_subject(result, tl.spec)}", fontsize=10)
    return ax


# --- occupancy over time -----------------------------------------------------------------------------------
def _spread(ax, tl, series: np.ndarray, colour: str, label: str, **line) -> list:
    """The mean over SMs of a [sm, bucket] series as steps, and (several SMs) the band from min to max."""
    starts = np.append(tl.bucket_starts, tl.cycles)
    mean = np.append(series.mean(axis=0), series.mean(axis=0)[-1])
    line, = ax.step(starts, mean, where="post", color=colour, label=f"{label}: mean over SMs",
                    **({"linewidth": 1.4} | line))
    handles = [line]
    if tl.sms > 1:
        low, high = np.append(series.min(axis=0), series.min(axis=0)[-1]), np.append(series.max(axis=0),
                                                                                      series.max(axis=0)[-1])
        handles.append(ax.fill_between(starts, low, high, step="post", color=colour, alpha=0.2, linewidth=0,
                                       label=f"{label}: min to max across SMs"))
    return handles


def _lower_panel(ax, share: str = "45%"):
    """A panel under `ax` sharing its time axis (carved out of the space `ax` had), `ax`'s tick labels hidden."""
    lower = make_axes_locatable(ax).append_axes("bottom", size=share, pad=0.12, sharex=ax)
    ax.tick_params(labelbottom=False)
    return lower


def plot_occupancy(result, ax=None):
    """Active (resident) warps per SM over time, their mean and spread across SMs, under the theoretical limit
    and the hardware's warp slots; below, eligible warps per SM (not_selected or issuing) and the warps issued
    per cycle (at most one per scheduler). Returns the upper Axes (the lower one shares its time axis)."""
    result = one_kernel(result)
    tl = _timeline(result, "plot_occupancy")
    ax = _axes(ax, (11, 6.5))
    handles = _spread(ax, tl, tl.active, "tab:blue", "active warps")
    handles.append(ax.axhline(tl.theoretical_warps, color="tab:red", linestyle="--", linewidth=1.2,
                              label=f"theoretical occupancy: {tl.theoretical_warps} warps"))
    handles.append(ax.axhline(tl.spec.sm.max_warps, color="black", linestyle=":", linewidth=1.2,
                              label=f"warp slots per SM: {tl.spec.sm.max_warps}"))
    ax.set_ylim(0, tl.spec.sm.max_warps * 1.1)
    ax.set_ylabel("active warps per SM")
    ax.grid(alpha=0.3)
    ax.legend(handles=handles, loc="lower left", fontsize=8, framealpha=0.9)
    lower = _lower_panel(ax)
    issued = tl.issued / tl.bucket_widths
    lower_handles = _spread(lower, tl, tl.eligible, "tab:green", "eligible warps", linewidth=2.2)
    lower_handles += _spread(lower, tl, issued, "tab:purple", "warps issued per cycle", linewidth=1, linestyle="--")
    sub = tl.spec.sm.sub_partitions
    lower_handles.append(lower.axhline(sub, color="black", linestyle=":", linewidth=1.2,
                                       label=f"issue limit: {sub} per cycle (one per scheduler)"))
    lower.set_ylim(0, max(float(tl.eligible.max()), sub) * 1.15)
    lower.set_ylabel("warps per SM per cycle")
    lower.grid(alpha=0.3)
    lower.legend(handles=lower_handles, loc="upper left", bbox_to_anchor=(0, -0.25), ncol=3, fontsize=8,
                 frameon=False)
    _time_axis(lower, tl)
    ax.set_xlim(0, tl.cycles)
    ax.set_title(f"Occupancy over time ({tl.bucket_cycles:,}-cycle buckets){_observed(result)}\n"
                 f"{_subject(result, tl.spec)}", fontsize=10)
    return ax


# --- block placement ----------------------------------------------------------------------------------------
def block_lanes(blocks: np.ndarray) -> np.ndarray:
    """For each block row [block, sm, start, end]: a lane on its SM no other block holds at the same time (the
    lowest free one), so resident blocks sit side by side."""
    lanes = np.zeros(len(blocks), dtype=np.int64)
    busy: dict[int, list[int]] = {}  # sm -> the cycle each of its lanes frees
    for row in np.lexsort((blocks[:, 0], blocks[:, 2])):
        sm, start, end = (int(v) for v in blocks[row, 1:4])
        ends = busy.setdefault(sm, [])
        lane = next((i for i, free in enumerate(ends) if free <= start), len(ends))
        if lane == len(ends):
            ends.append(end)
        else:
            ends[lane] = end
        lanes[row] = lane
    return lanes


def plot_blocks(result, ax=None):
    """Which SM ran which block when: a bar per block from the cycle its warps started to the cycle it retired,
    its SM's resident blocks side by side, coloured by wave (a wave is blocks per SM x SMs blocks), so the
    waves and the tail show."""
    result = one_kernel(result)
    tl = _timeline(result, "plot_blocks")
    blocks = tl.blocks
    ax = _axes(ax, (11, max(4.5, min(9, 1.5 + 0.5 * tl.sms))))
    waves = max(1, -(-tl.nblocks // tl.wave_blocks))
    cmap = plt.get_cmap("tab10" if waves <= 10 else "viridis")
    colour = (lambda w: cmap(w % 10)) if waves <= 10 else (lambda w: cmap(w / max(1, waves - 1)))
    lanes = block_lanes(blocks) if len(blocks) else np.zeros(0, dtype=np.int64)
    depth = max(1, int(lanes.max()) + 1 if len(lanes) else 1)
    wave_of = blocks[:, 0] // tl.wave_blocks if len(blocks) else np.zeros(0, dtype=np.int64)
    label = len(blocks) <= BLOCK_LABELS and depth * tl.sms <= 16  # room to name each block in its bar
    for (block, sm, start, end), lane, wave in zip(blocks, lanes, wave_of):
        y = sm + 0.05 + 0.9 * lane / depth
        ax.broken_barh([(start, max(end - start, 1))], (y, 0.9 / depth), facecolors=colour(int(wave)),
                       edgecolors="white", linewidth=0.3)
        if label and end - start > tl.cycles / 40:
            ax.text((start + end) / 2, y + 0.45 / depth, f"block {block}", ha="center", va="center", fontsize=7,
                    color="white")
    step = max(1, tl.sms // 16)
    ax.set_yticks([s + 0.5 for s in range(0, tl.sms, step)], [f"SM {s}" for s in range(0, tl.sms, step)],
                  fontsize=8)
    ax.set_ylim(tl.sms, 0)
    ax.set_ylabel(f"SM (its resident blocks side by side)")
    _time_axis(ax, tl)
    ax.set_xlim(0, tl.cycles)
    ax.grid(axis="x", alpha=0.3)
    if waves <= 10:
        tail = tl.nblocks - (waves - 1) * tl.wave_blocks
        handles = [Patch(color=colour(w), label=f"wave {w + 1}" + (f" (tail: {tail} blocks)" if w == waves - 1 and
                                                                     tail < tl.wave_blocks else ""))
                   for w in range(waves)]
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False,
                  title=f"{tl.wave_blocks} blocks a wave", title_fontsize=8)
    else:
        bar = ax.figure.colorbar(plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(1, waves)), ax=ax)
        bar.set_label(f"wave ({tl.wave_blocks} blocks each)")
    kept = f"; the first {len(blocks):,} of {tl.nblocks:,} blocks" if tl.blocks_dropped else ""
    ax.set_title(f"Block placement: {tl.nblocks:,} blocks in {tl.nblocks / tl.wave_blocks:.2f} waves"
                 f"{kept}{_observed(result)}\n{_subject(result, tl.spec)}", fontsize=10)
    return ax


# --- memory over time ---------------------------------------------------------------------------------------
def _dram_peak_gbs(result, spec) -> float | None:
    for label, _, _, peak, unit in throughputs(result.metrics, spec):
        if label == "DRAM bandwidth":
            return peak / 1e9
    return None


def plot_memory(result, ax=None):
    """L1 and L2 sector hit rates (of the sectors requested in each interval) and, below, DRAM bandwidth (GB/s,
    the bytes the channels moved) over time, in at most MEMORY_INTERVALS steps between the memory counters'
    samples. Returns the upper Axes (the lower one shares its time axis)."""
    result = one_kernel(result)
    tl = _timeline(result, "plot_memory")
    rates = tl.memory_rates(MEMORY_INTERVALS)
    if rates is None:
        raise GpusimError("plot_memory: the run had no memory hierarchy (--memory fixed): nothing to plot")
    ax = _axes(ax, (11, 6.5))
    edges = np.append(rates["start"], rates["end"][-1])

    def steps(values):
        return np.append(values, values[-1])

    ax.step(edges, steps(rates["l1_hit_rate"]), where="post", color="tab:orange", linewidth=2.4, alpha=0.7,
            label="L1 sector hit rate (global loads)")
    ax.step(edges, steps(rates["l2_hit_rate"]), where="post", color="tab:purple", linewidth=1.2, linestyle="--",
            label="L2 sector hit rate")
    ax.set_ylim(-3, 105)
    ax.set_ylabel("hit rate (% of sectors)")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
    lower = _lower_panel(ax, "80%")
    lower.step(edges, steps(rates["dram_gbs"]), where="post", color="tab:red", linewidth=1.2,
               label="DRAM bandwidth (bytes moved by the channels)")
    peak = _dram_peak_gbs(result, tl.spec)
    top = float(np.nanmax(rates["dram_gbs"])) if len(rates["dram_gbs"]) else 0.0
    if peak:
        lower.axhline(peak, color="black", linestyle="--", linewidth=1,
                      label=f"DRAM achievable peak ({tl.sms} SMs' share): {peak:,.0f} GB/s")
        top = max(top, peak)
    lower.set_ylim(0, top * 1.3 or 1)
    lower.set_ylabel("DRAM bandwidth (GB/s)")
    lower.grid(alpha=0.3)
    lower.legend(loc="upper left", fontsize=8, framealpha=0.9, ncol=2)
    _time_axis(lower, tl)
    ax.set_xlim(0, edges[-1])
    ax.set_title(f"Memory over time ({len(rates['start']):,} steps of about {edges[-1] / len(rates['start']):,.0f} "
                 f"cycles){_observed(result)}\n{_subject(result, tl.spec)}", fontsize=10)
    return ax


# --- roofline -----------------------------------------------------------------------------------------------
def roofline_points(result, spec) -> dict:
    """The run against its roofs, for the SMs it simulated: "compute" {roof: FLOP/s}, "bandwidth" {level: B/s}
    and "points" {level: (FLOP per byte at that level, achieved FLOP/s)} (levels with traffic only)."""
    m = result.metrics
    peaks = {label: peak for label, _, _, peak, _ in throughputs(m, spec)}
    clock = spec.clocks.core_mhz * 1e6
    compute = {"FP32 (FMA)": peaks["FP32 throughput"], "tensor (dense FP16)": peaks["tensor throughput"]}
    flops = m.get("gpusim__fp32_flop.per_second", 0.0) + m.get("gpusim__tensor_flop.per_second", 0.0)
    flop_total = m.get("gpusim__fp32_flop.sum", 0) + m.get("gpusim__tensor_flop.sum", 0)
    bandwidth, points = {}, {}
    if "DRAM bandwidth" in peaks:
        line = spec.shared_memory.banks * spec.shared_memory.bank_width_bytes
        levels = (("DRAM", peaks["DRAM bandwidth"], m.get("dram__bytes.sum", 0)),
                  ("L2", peaks["L2 bytes"] * clock, m.get("lts__t_sectors.sum", 0) * spec.memory.l2.sector_bytes),
                  ("L1/shared (L1TEX data stage)", peaks["L1TEX data-stage wavefronts"] * line * clock,
                   m.get("l1tex__data_pipe_lsu_wavefronts.sum", 0) * line))
        for level, peak, nbytes in levels:
            bandwidth[level] = peak
            if nbytes and flops:
                points[level] = (flop_total / nbytes, flops)
    return {"compute": compute, "bandwidth": bandwidth, "points": points, "flops": flops}


def _flops(value: float) -> str:
    return f"{value / 1e12:,.2f} TFLOP/s" if value >= 1e12 else f"{value / 1e9:,.1f} GFLOP/s"


ROOF_COLOURS = {"DRAM": "tab:red", "L2": "tab:purple", "L1/shared (L1TEX data stage)": "tab:orange"}


def _draw_roofs(ax, roof: dict, lo: float, hi: float) -> float:
    """The compute roofs (from the first ridge on: below it no level reaches them), the bandwidth roofs up to the
    highest compute roof, and every ridge point (the DRAM ones labelled); returns the highest roof."""
    top = max(roof["compute"].values())
    fastest = max(roof["bandwidth"].values())
    for (name, peak), style in zip(roof["compute"].items(), ("-", "-.")):
        ax.plot([peak / fastest, hi], [peak, peak], color="black", linestyle=style, linewidth=1.2,
                label=f"{name} peak: {_flops(peak)}")
    for level, bw in roof["bandwidth"].items():
        colour = ROOF_COLOURS[level]
        ax.plot([lo, top / bw], [bw * lo, top], color=colour, linewidth=1.2, label=f"{level}: {bw / 1e9:,.0f} GB/s")
        for name, peak in roof["compute"].items():
            ax.plot(peak / bw, peak, "o", mfc="white", mec=colour, ms=6)
            if level == "DRAM":
                ax.annotate(f"ridge {peak / bw:,.1f} FLOP/B", (peak / bw, peak), textcoords="offset points",
                            xytext=(6, -12), fontsize=8, color=colour)
    return top


def plot_roofline(result, ax=None, spec=None):
    """A log-log roofline: the compute roofs (FP32, tensor) and bandwidth roofs (DRAM, L2, L1/shared) of the SMs
    the run simulated, ridge points marked, and the run at its arithmetic intensity for each level (FLOP per
    byte moved there; the DRAM one is gpusim__arithmetic_intensity_flop_per_dram_byte)."""
    result = one_kernel(result)
    spec = _spec(result, spec)
    roof = roofline_points(result, spec)
    if not roof["bandwidth"]:
        raise GpusimError("plot_roofline: the run had no memory hierarchy (--memory fixed): no bytes to place it by")
    ax = _axes(ax, (10, 6))
    intensities = [p[0] for p in roof["points"].values()]
    ridges = [c / b for c in roof["compute"].values() for b in roof["bandwidth"].values()]
    lo = 10 ** np.floor(np.log10(min(intensities + ridges + [1.0]) / 4))
    hi = 10 ** np.ceil(np.log10(max(intensities + ridges + [1.0]) * 4))
    top = _draw_roofs(ax, roof, lo, hi)
    for level, (ai, flops) in roof["points"].items():
        dram = level == "DRAM"
        ax.plot(ai, flops, "*" if dram else "D", ms=16 if dram else 9, mfc=ROOF_COLOURS[level] if dram else "none",
                mec="black" if dram else ROOF_COLOURS[level], mew=1 if dram else 2, zorder=5 if dram else 4,
                linestyle="none", label=f"this run at {level}: {ai:,.2f} FLOP/B, {_flops(flops)}")
    if not roof["points"]:
        ax.text(0.5, 0.5, "no FLOP or no memory traffic in this run: no point to place", transform=ax.transAxes,
                ha="center", fontsize=10)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    bottom = min([p[1] for p in roof["points"].values()] + [top / 1e3])
    ax.set_ylim(bottom / 5, top * 3)
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved at the level)")
    ax.set_ylabel("performance (FLOP/s)")
    ax.grid(which="both", alpha=0.25)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    ax.set_title(f"Roofline (log-log; roofs of the SMs simulated)\n{_subject(result, spec)}", fontsize=10)
    return ax


# --- files and the command line --------------------------------------------------------------------------------
PLOTS = (("warp_states", plot_warp_states), ("timeline", plot_timeline), ("occupancy", plot_occupancy),
         ("blocks", plot_blocks), ("memory", plot_memory), ("roofline", plot_roofline))


def _stem(result) -> str:
    name = Path(str(result.kernel)).name if result.kernels else str(result.kernel)
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"run_{name}_{result.arch}")[:120]


def write_plots(result, out_dir) -> tuple[list[Path], list[str]]:
    """Every plot of `result` as a PNG under `out_dir`: (the paths written, a line for each plot left out and
    why)."""
    out = plot_directory(out_dir, "--plot")
    paths, skipped = [], []
    if not result.metrics:
        return paths, ["--plot: the run stopped before any metrics: nothing to plot"]
    for name, plot in PLOTS:
        suffix = f"{name}_sm{result.timeline.window_sm}" if name == "timeline" and result.timeline else name
        try:
            ax = plot(result)
        except GpusimError as exc:
            skipped.append(f"--plot: {name} left out: {exc}")
            continue
        path = out / f"{_stem(result)}_{suffix}.png"
        try:
            ax.figure.savefig(path, dpi=DPI, bbox_inches="tight")
        except OSError as exc:
            raise GpusimError(f"--plot {out_dir}: cannot write {path.name} ({exc.strerror})") from None
        finally:
            plt.close(ax.figure)
        paths.append(path)
    return paths, skipped


class RunPlots:
    """The `--plot DIR` view of `gpusim run`: a TimelineRecorder hears the run, attach() puts its Timeline on
    the result, report() writes the PNGs and prints their paths."""

    def __init__(self, out_dir: str, sm: int = 0):
        self.out_dir = out_dir
        self.observer = TimelineRecorder(sm=sm)

    def attach(self, result):
        return self.observer.attach(result)

    def report(self, result, stream) -> None:
        paths, skipped = write_plots(result, self.out_dir)
        for line in skipped:
            print(line, file=stream)
        for path in paths:
            print(path, file=stream)


def views(args: Any) -> list:
    """The plot view `gpusim run` was asked for: [RunPlots] with --plot DIR, else [] (--plot-sm alone is an
    error)."""
    sm = getattr(args, "plot_sm", None)
    if getattr(args, "plot", None) is None:
        if sm is not None:
            raise GpusimError("--plot-sm N: applies with --plot DIR only")
        return []
    return [RunPlots(args.plot, 0 if sm is None else sm)]
