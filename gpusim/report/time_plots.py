"""A run's SMs over time, from its Timeline: active and eligible warps per SM (`plot_occupancy`), which SM
ran which block when (`plot_blocks`), and the L1 and L2 hit rates and DRAM bandwidth (`plot_memory`).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from ..errors import GpusimError  # noqa: E402
from ..stats.invariants import throughputs  # noqa: E402
from .run_plot_common import (axes_or_new, label_time_axis, lower_panel, observed_note, one_kernel,  # noqa: E402
                              plot_subject, require_timeline)

BLOCK_LABELS = 200  # blocks named in their bars at most
MEMORY_INTERVALS = 120  # time steps the memory plot shows at most (the recorder's samples, merged)


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


def plot_occupancy(result, ax=None):
    """Active (resident) warps per SM over time, their mean and spread across SMs, under the theoretical limit
    and the hardware's warp slots; below, eligible warps per SM (not_selected or issuing) and the warps issued
    per cycle (at most one per scheduler). Returns the upper Axes (the lower one shares its time axis)."""
    result = one_kernel(result)
    tl = require_timeline(result, "plot_occupancy")
    ax = axes_or_new(ax, (11, 6.5))
    handles = _spread(ax, tl, tl.active, "tab:blue", "active warps")
    handles.append(ax.axhline(tl.theoretical_warps, color="tab:red", linestyle="--", linewidth=1.2,
                              label=f"theoretical occupancy: {tl.theoretical_warps} warps"))
    handles.append(ax.axhline(tl.spec.sm.max_warps, color="black", linestyle=":", linewidth=1.2,
                              label=f"warp slots per SM: {tl.spec.sm.max_warps}"))
    ax.set_ylim(0, tl.spec.sm.max_warps * 1.1)
    ax.set_ylabel("active warps per SM")
    ax.grid(alpha=0.3)
    ax.legend(handles=handles, loc="lower left", fontsize=8, framealpha=0.9)
    lower = lower_panel(ax)
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
    label_time_axis(lower, tl)
    ax.set_xlim(0, tl.cycles)
    ax.set_title(f"Occupancy over time ({tl.bucket_cycles:,}-cycle buckets){observed_note(result)}\n"
                 f"{plot_subject(result, tl.spec)}", fontsize=10)
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
    tl = require_timeline(result, "plot_blocks")
    blocks = tl.blocks
    ax = axes_or_new(ax, (11, max(4.5, min(9, 1.5 + 0.5 * tl.sms))))
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
    label_time_axis(ax, tl)
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
                 f"{kept}{observed_note(result)}\n{plot_subject(result, tl.spec)}", fontsize=10)
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
    tl = require_timeline(result, "plot_memory")
    rates = tl.memory_rates(MEMORY_INTERVALS)
    if rates is None:
        raise GpusimError("plot_memory: the run had no memory hierarchy (--memory fixed): nothing to plot")
    ax = axes_or_new(ax, (11, 6.5))
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
    lower = lower_panel(ax, "80%")
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
    label_time_axis(lower, tl)
    ax.set_xlim(0, edges[-1])
    ax.set_title(f"Memory over time ({len(rates['start']):,} steps of about {edges[-1] / len(rates['start']):,.0f} "
                 f"cycles){observed_note(result)}\n{plot_subject(result, tl.spec)}", fontsize=10)
    return ax
