"""A sweep's pictures and table: one PNG per metric against each varied axis, and the rows printed on a terminal.
"""

from __future__ import annotations

import itertools
import math
import re
import sys
from pathlib import Path

from ..errors import shorten
from .points import ERROR, LIMITER, OCCUPANCY, WALL, value_key


MAX_LINES = 8  # a plot draws a line per combination of the other axes up to this many, else their mean


PLOT_NAMES = {"gpu_sim_cycle": "cycles", "sm__inst_executed.avg.per_cycle_active": "IPC per SM",
              "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved occupancy",
              "l1tex__t_sector_hit_rate.pct": "L1 hit rate", "lts__t_sector_hit_rate.pct": "L2 hit rate",
              "dram__bytes.sum.per_second": "DRAM bandwidth", OCCUPANCY: "theoretical occupancy"}
SHORT_NAMES = {"gpu_sim_cycle": "cycles", "sm__inst_executed.avg.per_cycle_active": "IPC/SM",
               "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved occ %",
               "l1tex__t_sector_hit_rate.pct": "L1 hit %", "lts__t_sector_hit_rate.pct": "L2 hit %",
               "dram__bytes.sum.per_second": "DRAM GB/s", OCCUPANCY: "theor. occ %", LIMITER: "limiter",
               ERROR: "error", WALL: "wall s"}


def metric_unit(metric: str) -> tuple[str, float]:
    """(unit, scale) a metric is shown in: '%', 'GB/s' (bytes/s x 1e-9), 'cycles', ..."""
    low = metric.lower()
    if low.endswith((".pct", "_pct")) or "pct_of_peak" in low or low.endswith("_rate.pct"):
        return "%", 1.0
    if "per_second" in low:
        if "byte" in low:
            return "GB/s", 1e-9
        if "flop" in low:
            return "TFLOP/s", 1e-12
        return "per second", 1.0
    if "inst_executed" in low and "per_cycle" in low:
        return "warp-inst per cycle", 1.0
    if "per_cycle" in low or low in ("gpu_ipc",):
        return "per cycle", 1.0
    if "cycle" in low:
        return "cycles", 1.0
    if "duration" in low:
        return "s", 1.0
    if "bytes" in low:
        return "bytes", 1.0
    if low.endswith(".ratio"):
        return "ratio", 1.0
    return "", 1.0


def axis_label(name: str) -> str:
    """A varied axis as a plot labels it, with its unit."""
    fixed = {"launch.threads": "threads per block", "launch.regs": "registers per thread",
             "launch.smem": "shared memory per block (bytes)", "launch.dynamic_smem": "dynamic shared memory (bytes)",
             "launch.carveout": "shared-memory carveout (%)", "launch.grid": "grid (blocks)",
             "scheduler": "warp scheduler", "simt": "divergence model", "sample": "sampling", "arch": "architecture"}
    if name in fixed:
        return f"{fixed[name]} [{name}]"
    if name.startswith("arch."):
        import attrs

        from ..arch import ArchSpec

        cls, unit = ArchSpec, ""
        for part in name.split(".")[1:]:
            field = attrs.fields_dict(cls).get(part) if attrs.has(cls) else None
            if field is None:
                break
            unit, cls = field.metadata.get("unit", ""), field.type
            cls = cls if isinstance(cls, type) else object
        return f"{name}" + (f" ({unit})" if unit else "")
    return f"{name} (workload parameter)"


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "x"


def plot_sweep(rows: list[dict], vary: dict[str, list], metrics: list[str], kernel: str, arch: str,
               directory) -> list[Path]:
    """One PNG per metric (and the theoretical occupancy) against each varied axis, under `directory`. The other
    axes: one line per combination of their values where there are at most MAX_LINES, else their mean with the
    min-max range shaded. Failed points are gaps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..report import plot_directory, save_figure

    directory = plot_directory(directory, "--plot")
    archs = sorted({str(r["arch"]) for r in rows}) if "arch" in vary else [arch]
    on = ", ".join(archs) if len(archs) <= 4 else f"{len(archs)} archs"
    paths = []
    for metric in [m for m in metrics if m != OCCUPANCY] + [OCCUPANCY]:
        unit, scale = metric_unit(metric)
        for axis, xs in vary.items():
            others = [n for n in vary if n != axis]
            numeric = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs)
            positions = xs if numeric else list(range(len(xs)))
            fig, ax = plt.subplots(figsize=(7.5, 4.6))

            def value(row):
                v = row.get(metric)
                return float(v) * scale if isinstance(v, (int, float)) and not row.get(ERROR) else math.nan

            combos = list(itertools.product(*(vary[n] for n in others)))
            if len(combos) <= MAX_LINES:
                for combo in combos:
                    match = dict(zip(others, combo))
                    ys = []
                    for x in xs:
                        found = [r for r in rows if value_key(r.get(axis)) == value_key(x)
                                 and all(value_key(r.get(n)) == value_key(v) for n, v in match.items())]
                        ys.append(value(found[0]) if found else math.nan)
                    label = ", ".join(f"{n}={v}" for n, v in match.items()) or SHORT_NAMES.get(metric, metric)
                    ax.plot(positions, ys, marker="o", label=label)
                legend = None
            else:
                means, lows, highs = [], [], []
                for x in xs:
                    ys = [value(r) for r in rows if value_key(r.get(axis)) == value_key(x)]
                    ys = [y for y in ys if not math.isnan(y)]
                    means.append(sum(ys) / len(ys) if ys else math.nan)
                    lows.append(min(ys) if ys else math.nan)
                    highs.append(max(ys) if ys else math.nan)
                ax.plot(positions, means, marker="o", label=f"mean over {', '.join(others)}")
                ax.fill_between(positions, lows, highs, alpha=0.2, label="min to max")
                legend = f"{len(combos)} combinations of the other axes"
            if not numeric or len(xs) <= 12:  # the varied values themselves as ticks
                ax.set_xticks(positions)
                ax.set_xticklabels([str(x) for x in xs])
            ax.set_xlabel(axis_label(axis))
            name = PLOT_NAMES.get(metric, metric)
            ax.set_ylabel(name if not unit or unit == name else f"{name} ({unit})")
            ax.set_title(f"{kernel} on {on}: {metric}", fontsize=10)
            ax.grid(True, alpha=0.3)
            ax.legend(title=legend, fontsize=8, title_fontsize=8)
            fig.tight_layout()
            paths.append(save_figure(fig, directory / f"{_safe(metric)}__vs__{_safe(axis)}.png", "--plot", dpi=110))
    return paths


def _cell(column: str, value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        unit, scale = metric_unit(column)
        value *= scale
        if column == WALL:
            return f"{value:.2f}"
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}" if value else "0"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}" if abs(value) >= 1000 else str(value)
    return str(value)


def print_rows(rows: list[dict], columns: list[str], file=None, head: int = 30, tail: int = 10) -> None:
    """The rows as a table (the first `head` and last `tail` of a long sweep), short column names."""
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for column in columns:
        table.add_column(SHORT_NAMES.get(column, column), justify="left" if column in (LIMITER, ERROR) else "right",
                         overflow="fold")
    shown_rows = rows if len(rows) <= head + tail else rows[:head] + [None] + rows[-tail:]
    for row in shown_rows:
        if row is None:
            table.add_row(*(["..."] * len(columns)))
        else:
            table.add_row(*(_cell(c, row.get(c)) if c != ERROR else shorten(row.get(c) or "", 60).strip("'\"")
                            for c in columns))
    Console(file=file or sys.stdout, width=200).print(table)


