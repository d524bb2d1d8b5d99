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

The plots are drawn by warp_state_plots (warp states, the slot timeline), time_plots (occupancy, blocks,
memory) and roofline_plot, with the pieces they share in run_plot_common; this module names them all, writes
them as PNG files (`write_plots`) and is the `--plot DIR` view of `gpusim run` (`RunPlots`, `views`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..errors import GpusimError  # noqa: E402
from . import plot_directory  # noqa: E402
from ..stats.timeline import TimelineRecorder  # noqa: E402
from .roofline_plot import ROOF_COLOURS, plot_roofline, roofline_points  # noqa: E402
from .run_plot_common import CYCLES, STATE_COLOURS, one_kernel  # noqa: E402
from .time_plots import (BLOCK_LABELS, MEMORY_INTERVALS, block_lanes, plot_blocks, plot_memory,  # noqa: E402
                         plot_occupancy)
from .warp_state_plots import plot_timeline, plot_warp_states, slot_raster, warp_state_cycles  # noqa: E402

__all__ = ["BLOCK_LABELS", "CYCLES", "DPI", "MEMORY_INTERVALS", "PLOTS", "ROOF_COLOURS", "STATE_COLOURS", "RunPlots",
           "block_lanes", "one_kernel", "plot_blocks", "plot_memory", "plot_occupancy", "plot_roofline",
           "plot_timeline", "plot_warp_states", "roofline_points", "slot_raster", "views", "warp_state_cycles",
           "write_plots"]

DPI = 110


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
