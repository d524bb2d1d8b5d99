"""Where a run's warps spent their cycles: the totals per issued instruction by Nsight stall reason
(`plot_warp_states`, from the metrics) and one SM's warp slots cycle by cycle (`plot_timeline`, from the
run's Timeline), in the colours of STATE_COLOURS.
"""

from __future__ import annotations

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

from ..stats.counters import REASONS
from .run_plot_common import (STATE_COLOURS, arch_spec, axes_or_new, label_time_axis, observed_note, one_kernel,
                              plot_subject, require_timeline)


def warp_state_cycles(metrics: dict) -> dict[str, float]:
    """Reason -> warp-cycles per issued instruction (nonzero ones, largest first)."""
    values = {r: metrics.get(f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio", 0.0) for r in REASONS}
    return dict(sorted(((r, v) for r, v in values.items() if v > 0), key=lambda kv: -kv[1]))


def plot_warp_states(result, ax=None, spec=None):
    """Warp states per issued instruction: a stacked bar of all of them (their sum is the average cycles between
    a warp's issues) and a bar per state, largest first, as Nsight Compute's Warp State Statistics chart."""
    result = one_kernel(result)
    spec = arch_spec(result, spec)
    values = warp_state_cycles(result.metrics)
    ax = axes_or_new(ax, (10, 1.6 + 0.38 * (len(values) + 1)))
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
    ax.set_title(f"Warp states per issued instruction\n{plot_subject(result, spec)}", fontsize=10)
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
    tl = require_timeline(result, "plot_timeline")
    image, order = slot_raster(tl)
    ax = axes_or_new(ax, (12, 7))
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
    label_time_axis(ax, tl)
    handles = [Patch(facecolor=STATE_COLOURS[REASONS[c]], label=REASONS[c]) for c in present]
    handles.append(Patch(facecolor="white", edgecolor="grey", label="no warp in the slot"))
    if len(tl.issues):
        handles.append(ax.scatter([], [], marker="|", color="#0b3d0b", label="issue (selected)"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, title="state",
              title_fontsize=8, frameon=False)
    span = f"cycles {start:,} to {end:,} of {tl.cycles:,}" if (start, end) != (0, tl.cycles) else \
        f"all {tl.cycles:,} cycles"
    ax.set_title(f"Warp slots of SM {tl.window_sm}: state each cycle and issues ({span}){observed_note(result)}\n"
                 f"{plot_subject(result, tl.spec)}", fontsize=10)
    return ax
