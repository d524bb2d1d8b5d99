"""The CUDA Occupancy Calculator's three graphs: occupancy against block size, registers per thread and
shared memory per block, each with the current launch marked."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..analytic.occupancy import OccupancyResult, occupancy  # noqa: E402
from ..arch import ArchSpec  # noqa: E402


def occupancy_curves(spec: ArchSpec, r: OccupancyResult) -> dict[str, tuple[list[int], list[float], int, str]]:
    """For each swept quantity: (x values, occupancy % at each, the current x, axis label)."""
    sm, smem = spec.sm, spec.shared_memory

    def pct(threads, regs, shared):
        return 100 * occupancy(spec, threads, regs, shared, r.carveout, r.barriers_per_block).occupancy

    block_sizes = list(range(sm.warp_size, sm.max_threads_per_block + 1, sm.warp_size))
    regs = list(range(1, sm.max_registers_per_thread + 1))
    step = smem.allocation_granularity_bytes
    shared = list(range(0, smem.per_block_optin_bytes + 1, step))
    return {
        "block_size": (block_sizes, [pct(t, r.regs_per_thread, r.smem_per_block) for t in block_sizes],
                       r.threads_per_block, "threads per block"),
        "registers": (regs, [pct(r.threads_per_block, g, r.smem_per_block) for g in regs],
                      r.regs_per_thread, "registers per thread"),
        "shared_memory": (shared, [pct(r.threads_per_block, r.regs_per_thread, s) for s in shared],
                          r.smem_per_block, "shared memory per block (bytes)"),
    }


def plot_occupancy(spec: ArchSpec, r: OccupancyResult, out_dir: str | Path = "plots") -> list[Path]:
    """Write three PNGs under `out_dir`; return their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"occupancy_{spec.name}_{r.threads_per_block}t_{r.regs_per_thread}r_{r.smem_per_block}b"
    paths = []
    for key, (xs, ys, current, label) in occupancy_curves(spec, r).items():
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.step(xs, ys, where="post", color="tab:blue")
        ax.plot([current], [100 * r.occupancy], "o", color="tab:red", label="this launch")
        ax.set_xlabel(label)
        ax.set_ylabel("occupancy (% of max warps)")
        ax.set_ylim(0, 105)
        ax.set_title(f"{spec.full_name}: occupancy vs {label}")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right")
        fig.tight_layout()
        path = out / f"{stem}_{key}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths
