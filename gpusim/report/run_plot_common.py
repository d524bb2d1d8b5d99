"""What every plot of a run shares: the run it shows (a command list's first kernel), the arch it ran on, its
title line, the Axes it draws on, the time axis, a panel under it and one colour per warp state.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402
from mpl_toolkits.axes_grid1 import make_axes_locatable  # noqa: E402

from ..errors import GpusimError  # noqa: E402

STATE_COLOURS = {  # one colour per Nsight stall reason, the same in every plot
    "selected": "#2ca02c", "not_selected": "#98df8a", "long_scoreboard": "#d62728", "short_scoreboard": "#ff9896",
    "wait": "#ffbb78", "math_pipe_throttle": "#1f77b4", "mio_throttle": "#aec7e8", "lg_throttle": "#17becf",
    "barrier": "#9467bd", "branch_resolving": "#c5b0d5", "no_instruction": "#8c564b", "drain": "#7f7f7f",
    "dispatch_stall": "#e377c2", "misc": "#bcbd22",
}
CYCLES = FuncFormatter(lambda x, _: f"{x:,.0f}")


def one_kernel(result):
    """The run a plot shows: `result` itself, or for a command list its first kernel (the one a TimelineRecorder
    records), named as such."""
    if not result.kernels:
        return result
    first = result.kernels[0]
    name = f"{first['kernel']} (kernel 1 of {len(result.kernels)} in {Path(str(result.kernel)).name})"
    return attrs.evolve(result, kernel=name, metrics=first["metrics"], sampling=first.get("sampling"), kernels=[])


def arch_spec(result, spec=None):
    """The ArchSpec a plot uses: `spec` when given, else the timeline's, else the shipped arch the run names."""
    if spec is not None:
        return spec
    if result.timeline is not None:
        return result.timeline.spec
    from ..arch import load_arch

    try:
        return load_arch(result.arch)
    except GpusimError:
        raise GpusimError(f"arch {result.arch!r}: not a known name; pass spec= (the ArchSpec the run used)") from None


def plot_subject(result, spec) -> str:
    """'<kernel> on <product> (<SMs>, <scheduler>)' and, for a sampled run, what the time plots saw."""
    sms = result.metrics.get("launch__sm_count", spec.sms)
    part = f"{sms} SM{'s' if sms != 1 else ''}" if sms == spec.sms else f"{sms} of {spec.sms} SMs"
    return f"{result.kernel} on {spec.full_name} ({part}, {result.scheduler})"


def observed_note(result) -> str:
    """For a sampled run: which reduced run the time plots show."""
    observed = (result.sampling or {}).get("observed_run")
    if not observed:
        return ""
    trips = f", {observed['trips']:,} loop trips" if observed.get("trips") else ""
    return f"; sampled kernel: its reduced run of {observed['blocks']:,} blocks{trips}"


def require_timeline(result, what: str):
    """The run's Timeline; a GpusimError naming `what` (the plot) when the run recorded none."""
    if result.timeline is None:
        raise GpusimError(f"{what}: result.timeline is None: run with observer=gpusim.stats.timeline."
                          f"TimelineRecorder() and pass the result to its attach()")
    return result.timeline


def axes_or_new(ax, size=(10, 5)):
    """`ax`, or the Axes of a new figure of `size` inches when it is None."""
    if ax is None:
        _, ax = plt.subplots(figsize=size)
    return ax


def label_time_axis(ax, tl, label="cycle (SM clock)") -> None:
    """`ax`'s x axis as cycles of the timeline's SM clock, with thousands separators."""
    ax.set_xlabel(f"{label}, {tl.spec.clocks.core_mhz:,.0f} MHz")
    ax.xaxis.set_major_formatter(CYCLES)


def lower_panel(ax, share: str = "45%"):
    """A panel under `ax` sharing its time axis (carved out of the space `ax` had), `ax`'s tick labels hidden."""
    lower = make_axes_locatable(ax).append_axes("bottom", size=share, pad=0.12, sharex=ax)
    ax.tick_params(labelbottom=False)
    return lower
