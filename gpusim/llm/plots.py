"""Figures of an estimate's record (LlmEstimate.to_dict()): one layer's kernels on the roofline and the time of a
prefill and of a decode step stacked by kernel (matplotlib, Agg backend: files, never a display)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..report import plot_directory, save_figure  # noqa: E402

PHASE_MARKERS = {"prefill": "o", "decode": "s"}
DPI = 120


def _flops_text(value: float) -> str:
    return f"{value / 1e12:,.0f} TFLOP/s" if value >= 1e12 else f"{value / 1e9:,.1f} GFLOP/s"


def plot_roofline(record: dict, path: Path) -> Path:
    """Each kernel of the record (prefill circles, decode squares, a colour per kernel) at its FLOP per DRAM byte
    and achieved FLOP/s, under the part's dense FP16 tensor peak and its DRAM bandwidth. A kernel's FLOP is its useful math (2 M N K for
    a projection), not what the padding of its tiles adds."""
    peak, bandwidth = record["peak_tensor_flops"], record["peak_dram_bytes_per_s"]
    points = [k for k in record["kernels"] if k["flop"] > 0 and k["dram_bytes"] > 0 and k["seconds"] > 0]
    fig, ax = plt.subplots(figsize=(10, 6))
    intensities = [k["flop"] / k["dram_bytes"] for k in points] + [peak / bandwidth]
    lo, hi = min(intensities) / 4, max(intensities) * 4
    ridge = peak / bandwidth
    ax.plot([lo, ridge], [bandwidth * lo, peak], color="tab:red", linewidth=1.2,
            label=f"DRAM: {bandwidth / 1e9:,.0f} GB/s")
    ax.plot([ridge, hi], [peak, peak], color="black", linewidth=1.2, label=f"tensor (dense FP16): {_flops_text(peak)}")
    cmap = plt.get_cmap("tab10")
    roles = list(dict.fromkeys(k["name"] for k in points))
    for k in points:
        colour = cmap(roles.index(k["name"]) % 10)
        ax.plot(k["flop"] / k["dram_bytes"], k["flop"] / k["seconds"], PHASE_MARKERS[k["phase"]], color=colour,
                ms=9, mec="black", mew=0.5, linestyle="none", alpha=0.85)
    for phase, marker in PHASE_MARKERS.items():
        ax.plot([], [], marker, color="white", mec="black", linestyle="none", label=f"{phase} kernel")
    for role in roles:
        ax.plot([], [], "o", color=cmap(roles.index(role) % 10), linestyle="none", label=role)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (useful FLOP per DRAM byte)")
    ax.set_ylabel("performance (FLOP/s)")
    ax.grid(which="both", alpha=0.25)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    ax.set_title(f"{record['model']['name']} on {record['arch']}: one layer's kernels on the roofline\n"
                 f"batch {record['batch']}, prompt {record['prompt']}, tp {record['tp']}", fontsize=10)
    return save_figure(fig, path, dpi=DPI, bbox_inches="tight")


def phase_parts(record: dict, phase: str) -> dict:
    """Seconds of a prefill or a decode step by kernel: per-layer kernels x the layers, the head's once, the
    all-reduces apart."""
    layers = record["model"]["layers"]
    parts: dict = {}
    for k in record["kernels"]:
        if k["phase"] == phase:
            parts[k["name"]] = parts.get(k["name"], 0.0) + k["seconds_total"] * (layers if k["per"] == "layer" else 1)
    allreduce = record["prefill_allreduce_s"] if phase == "prefill" else record["allreduce_s"]
    if allreduce:
        parts["all-reduce"] = allreduce
    return parts


def plot_breakdown(record: dict, path: Path) -> Path:
    """Two stacked bars: the time to first token and the time per output token, each split by kernel."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 6))
    cmap = plt.get_cmap("tab20")
    names: list[str] = []
    for ax, phase, title in zip(axes, ("prefill", "decode"), ("time to first token", "time per output token")):
        bottom = 0.0
        for name, seconds in phase_parts(record, phase).items():
            if name not in names:
                names.append(name)
            ax.bar([0], [seconds * 1e3], bottom=[bottom], color=cmap(names.index(name) % 20), width=0.5,
                   label=name, edgecolor="white", linewidth=0.5)
            bottom += seconds * 1e3
        ax.set_xticks([0], [f"{title}\n{bottom:,.3f} ms"])
        ax.set_xlim(-0.6, 0.6)
        ax.set_ylabel("ms")
        ax.set_title(phase, fontsize=10)
    handles, labels = [], []
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels()):
            if label not in labels:
                handles.append(h)
                labels.append(label)
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(0.92, 0.5), fontsize=8, frameon=False)
    fig.suptitle(f"{record['model']['name']} on {record['arch']} (tp {record['tp']}): batch {record['batch']}, "
                 f"prompt {record['prompt']}, generate {record['generate']}", fontsize=10)
    return save_figure(fig, path, dpi=DPI, bbox_inches="tight")


def write_plots(record: dict, folder: str | Path) -> list[Path]:
    """Both figures under `folder`: llm_<model>_<arch>_roofline.png and llm_<model>_<arch>_breakdown.png."""
    folder = plot_directory(folder)
    stem = f"llm_{Path(record['model']['name']).name}_{record['arch']}"
    return [plot_roofline(record, folder / f"{stem}_roofline.png"),
            plot_breakdown(record, folder / f"{stem}_breakdown.png")]


__all__ = ["phase_parts", "plot_breakdown", "plot_roofline", "write_plots"]
