"""The CUDA Occupancy Calculator's three graphs: occupancy against block size, registers per thread and shared
memory per block (KiB), each with the current launch marked, the other two parameters (fixed) in its title and
the background shaded by the resource that limits the resident blocks at each point; and the three side by side
in one figure."""

from __future__ import annotations

from pathlib import Path

import attrs
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from ..analytic.occupancy import LIMITERS, OccupancyResult, occupancy  # noqa: E402
from ..arch import ArchSpec  # noqa: E402
from . import plot_directory, save_figure  # noqa: E402

KIB = 1024
LIMITER_COLOURS = {"warps": "#c6dbef", "registers": "#fdd0a2", "shared_memory": "#c7e9c0", "blocks": "#dadaeb",
                   "barriers": "#fcbba1"}
LIMITER_LABELS = {"warps": "warp slots", "registers": "registers", "shared_memory": "shared memory",
                  "blocks": "block slots", "barriers": "barriers"}


@attrs.frozen
class Curve:
    """Occupancy as one launch parameter varies and the others stay as given."""
    key: str  # block_size, registers, shared_memory
    xs: list  # the parameter's values (shared memory in KiB)
    occupancy: list  # % of the SM's warp slots at each
    limiters: list  # the resources that limit the resident blocks at each (a tuple, in LIMITERS order)
    current: float  # the launch's value (KiB for shared memory)
    xlabel: str
    fixed: str  # the parameters held fixed, as the title states them


def _fixed(spec: ArchSpec, r: OccupancyResult, varied: str) -> str:
    parts = {"block_size": f"{r.threads_per_block} threads/block", "registers": f"{r.regs_per_thread} regs/thread",
             "shared_memory": f"{r.smem_per_block / KIB:g} KiB shared/block"}
    parts.pop(varied)
    carveout = "default carveout" if r.carveout is None else f"carveout {r.carveout}%"
    return ", ".join(list(parts.values()) + [carveout])


def occupancy_curves(spec: ArchSpec, r: OccupancyResult) -> dict[str, Curve]:
    """For each swept quantity (block_size, registers, shared_memory): its Curve."""
    sm, smem = spec.sm, spec.shared_memory

    def at(threads, regs, shared):
        o = occupancy(spec, threads, regs, shared, r.carveout, r.barriers_per_block)
        return 100 * o.occupancy, tuple(n for n in LIMITERS if n in o.limiters)

    sweeps = {
        "block_size": (list(range(sm.warp_size, sm.max_threads_per_block + 1, sm.warp_size)),
                       lambda t: at(t, r.regs_per_thread, r.smem_per_block), r.threads_per_block, "threads per block"),
        "registers": (list(range(1, sm.max_registers_per_thread + 1)),
                      lambda g: at(r.threads_per_block, g, r.smem_per_block), r.regs_per_thread,
                      "registers per thread"),
        "shared_memory": (list(range(0, smem.per_block_optin_bytes + 1, smem.allocation_granularity_bytes)),
                          lambda s: at(r.threads_per_block, r.regs_per_thread, s), r.smem_per_block,
                          "shared memory per block (KiB)"),
    }
    curves = {}
    for key, (xs, fn, current, label) in sweeps.items():
        points = [fn(x) for x in xs]
        scale = (lambda v: v / KIB) if key == "shared_memory" else (lambda v: v)
        curves[key] = Curve(key, [scale(x) for x in xs], [p[0] for p in points], [p[1] for p in points],
                            scale(current), label, _fixed(spec, r, key))
    return curves


def _shade(ax, curve: Curve) -> list[Patch]:
    """Shade each run of x values by the resources limiting it (hatched where several limit alike); return a
    legend patch for each kind shaded, in order."""
    xs, limiters = curve.xs, curve.limiters
    step = (xs[1] - xs[0]) if len(xs) > 1 else 1
    seen: dict[tuple, Patch] = {}
    start = 0
    for i in range(1, len(xs) + 1):
        if i == len(xs) or limiters[i] != limiters[start]:
            names = limiters[start]
            style = dict(facecolor=LIMITER_COLOURS[names[0]], hatch="//" if len(names) > 1 else None,
                         edgecolor="white", linewidth=0)
            right = xs[i] if i < len(xs) else xs[-1] + step
            ax.axvspan(xs[start], right, alpha=0.8, zorder=0, **style)
            if names not in seen:
                seen[names] = Patch(**style, label="limited by " + " and ".join(LIMITER_LABELS[n] for n in names))
            start = i
    return list(seen.values())


def draw_curve(ax, spec: ArchSpec, r: OccupancyResult, curve: Curve, title_size: int = 10):
    """One graph on `ax`: the curve, the launch marked, the limiting resource shaded, the fixed parameters in
    the title."""
    step = (curve.xs[1] - curve.xs[0]) if len(curve.xs) > 1 else 1
    seen = _shade(ax, curve)
    ax.step(curve.xs + [curve.xs[-1] + step], curve.occupancy + [curve.occupancy[-1]], where="post",
            color="tab:blue", linewidth=1.5, zorder=2)
    ax.plot([curve.current], [100 * r.occupancy], "o", color="tab:red", ms=7, zorder=3,
            label=f"this launch: {100 * r.occupancy:.1f}%")
    ax.set_xlim(curve.xs[0], curve.xs[-1] + step)
    ax.set_xlabel(curve.xlabel)
    ax.set_ylabel("occupancy (% of the SM's warp slots)")
    ax.set_ylim(0, 105)
    ax.set_title(f"{spec.full_name}: occupancy vs {curve.xlabel.split(' (')[0]}\n({curve.fixed})",
                 fontsize=title_size)
    ax.grid(alpha=0.3, zorder=1)
    handles = [ax.get_legend_handles_labels()[0][0]]
    handles += seen
    ax.legend(handles=handles, loc="upper right", fontsize=8, framealpha=0.9)
    return ax


def plot_occupancy(spec: ArchSpec, r: OccupancyResult, out_dir: str | Path = "plots") -> list[Path]:
    """Write the three graphs and the three side by side (_all) as PNGs under `out_dir`; return their paths."""
    out = plot_directory(out_dir, "--plot-dir")
    stem = f"occupancy_{spec.name}_{r.threads_per_block}t_{r.regs_per_thread}r_{r.smem_per_block}b"
    curves = occupancy_curves(spec, r)
    paths = []
    for key, curve in curves.items():
        fig, ax = plt.subplots(figsize=(8, 4.5))
        draw_curve(ax, spec, r, curve)
        paths.append(_save(fig, out / f"{stem}_{key}.png"))
    fig, axes = plt.subplots(1, 3, figsize=(19, 5.2))
    for ax, curve in zip(axes, curves.values()):
        draw_curve(ax, spec, r, curve, title_size=9)
    fig.suptitle(f"CUDA occupancy calculator: {r.threads_per_block} threads/block, {r.regs_per_thread} regs/thread, "
                 f"{r.smem_per_block / KIB:g} KiB shared/block on {spec.full_name}: {r.blocks_per_sm} blocks, "
                 f"{r.warps_per_sm} warps per SM ({100 * r.occupancy:.1f}%)", fontsize=11)
    paths.append(_save(fig, out / f"{stem}_all.png"))
    return paths


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    return save_figure(fig, path, "--plot-dir", dpi=100)
