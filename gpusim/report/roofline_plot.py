"""A run on the roofline: its FLOP/s against its arithmetic intensity at DRAM, L2 and L1/shared, under the
compute and bandwidth roofs of the SMs it simulated (`roofline_points` computes them, `plot_roofline` draws).
"""

from __future__ import annotations

import numpy as np

from ..errors import GpusimError
from ..stats.invariants import throughputs
from .run_plot_common import arch_spec, axes_or_new, one_kernel, plot_subject


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
    spec = arch_spec(result, spec)
    roof = roofline_points(result, spec)
    if not roof["bandwidth"]:
        raise GpusimError("plot_roofline: the run had no memory hierarchy (--memory fixed): no bytes to place it by")
    ax = axes_or_new(ax, (10, 6))
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
    ax.set_title(f"Roofline (log-log; roofs of the SMs simulated)\n{plot_subject(result, spec)}", fontsize=10)
    return ax
