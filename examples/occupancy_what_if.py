"""Coursework 1: occupancy what-if for a tensor-core GEMM. Is more occupancy always faster?

The seed notes (004, section 2.6.4, "Occupancy and performance") warn: "高Occupancy不一定意味着高性能" -- high
occupancy does not necessarily mean high performance; for compute-bound kernels such as GEMM they put the best
occupancy at 25-50% and say register use matters more than occupancy.

This study runs workloads/gemm_tile128_sync.yaml (a 128 x 128 block tile, 256 threads) at 512 x 512 x 512, 16
blocks on one simulated H100 SM (the share of one SM in a GEMM of 16 x 132 tiles), for each register count per thread
(`regs=` launch override) and each number of 16 KiB shared-memory stages (the STAGES parameter: 16, 32 or 64 KiB
per block). For every point it prints and plots the theoretical occupancy (gpusim.occupancy, CUDA's calculator)
and the simulated time. Look for: the cycles stop falling once the shared-memory data path is saturated, and a
launch with more resident blocks can be slower when the blocks no longer divide into whole waves.

In this workload the registers buy nothing: the program is the same at every count, so the study isolates what
occupancy itself is worth. The seed's other half of the argument (a kernel that spends its registers on a larger
per-thread tile does less shared-memory traffic per FLOP) would need a different program and is not modelled here.

    python examples/occupancy_what_if.py [--out DIR] [--quick]

--quick (the CI setting) runs fewer points at K = 128; the committed pictures come from the full setting.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

import gpusim  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = ROOT / "workloads" / "gemm_tile128_sync.yaml"
ARCH = "h100"
SMS = 1
THREADS = 256  # the workload's block
STAGE_BYTES = 16 * 1024  # one stage of the A and B tiles (128 x 32 halves each)
L1TEX = "l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed"
FULL = {"size": {"M": 512, "N": 512, "K": 512}, "regs": [32, 40, 48, 64, 80, 96, 128, 168, 255],
        "stages": [1, 2, 4]}
QUICK = {"size": {"M": 512, "N": 512, "K": 128}, "regs": [32, 48, 64, 255], "stages": [1, 4]}
STAGE_COLOURS = {1: "tab:green", 2: "tab:blue", 3: "tab:purple", 4: "tab:red"}
LIMITER_SHORT = {"registers": "reg", "shared_memory": "smem", "warps": "warps", "blocks": "blocks"}
CYCLES = FuncFormatter(lambda x, _: f"{x:,.0f}")


def blocks_text(blocks: int) -> str:
    return f"{blocks} block{'s' if blocks != 1 else ''}/SM"


def measure(setting: dict) -> list[dict]:
    """One row per (stages, regs): the launch's theoretical occupancy and the simulated run's numbers."""
    rows = []
    for stages in setting["stages"]:
        for regs in setting["regs"]:
            smem = stages * STAGE_BYTES
            occ = gpusim.occupancy(ARCH, threads_per_block=THREADS, regs_per_thread=regs, smem_per_block=smem)
            result = gpusim.run(WORKLOAD, ARCH, sms=SMS, params={**setting["size"], "STAGES": stages}, regs=regs)
            m = result.metrics
            blocks = result.launch["blocks"]
            rows.append({"stages": stages, "smem_kib": smem // 1024, "regs": regs,
                         "theoretical_pct": 100 * occ.occupancy, "blocks_per_sm": occ.blocks_per_sm,
                         "limiter": "+".join(occ.limiters), "waves": blocks / (occ.blocks_per_sm * SMS),
                         "cycles": m["gpu_sim_cycle"],
                         "achieved_pct": m["sm__warps_active.avg.pct_of_peak_sustained_active"],
                         "l1tex_pct": m[L1TEX], "wall_s": result.wall_seconds})
            r = rows[-1]
            print(f"  STAGES={stages} ({r['smem_kib']:>2} KiB)  regs={regs:>3}  theoretical "
                  f"{r['theoretical_pct']:5.1f}% ({blocks_text(r['blocks_per_sm'])}, {r['limiter']:<13}, "
                  f"{r['waves']:.2f} waves)  achieved {r['achieved_pct']:5.1f}%  cycles {r['cycles']:>9,}  "
                  f"L1TEX data {r['l1tex_pct']:5.1f}%  ({r['wall_s']:.1f} s)", flush=True)
    return rows


def subject(setting: dict) -> str:
    size = setting["size"]
    spec = gpusim.load_arch(ARCH)
    blocks = size["M"] // 128 * size["N"] // 128
    return (f"gemm_tile128_sync, M=N={size['M']}, K={size['K']} ({blocks} blocks of {THREADS} threads) on "
            f"{spec.full_name}, {SMS} SM simulated")


def _heatmap(ax, grid: np.ndarray, texts: list[list[str]], cmap: str, setting: dict, label: str) -> None:
    """`grid` [shared-memory size, registers] as coloured cells with `texts` in them, and a colour bar."""
    image = ax.imshow(grid, cmap=cmap, aspect="auto")
    for i, row in enumerate(texts):
        for j, text in enumerate(row):
            red, green, blue, _ = image.cmap(image.norm(grid[i, j]))
            dark = 0.299 * red + 0.587 * green + 0.114 * blue < 0.5  # white text on a dark cell
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color="white" if dark else "black")
    ax.set_xticks(range(len(setting["regs"])), [str(r) for r in setting["regs"]])
    ax.set_yticks(range(len(setting["stages"])),
                  [f"{s * STAGE_BYTES // 1024} KiB\n(STAGES={s})" for s in setting["stages"]])
    ax.set_xlabel("registers per thread (launch override regs=)")
    ax.set_ylabel("shared memory per block")
    ax.figure.colorbar(image, ax=ax, label=label, fraction=0.05, pad=0.02)


def plot_regs_smem(rows: list[dict], setting: dict, path: Path) -> None:
    """Two maps over (shared memory per block, registers per thread): the theoretical occupancy with its resident
    blocks and limiter, and the simulated cycles."""
    cell = {(r["stages"], r["regs"]): r for r in rows}
    shape = (len(setting["stages"]), len(setting["regs"]))
    occupancy_grid, cycles_grid = np.zeros(shape), np.zeros(shape)
    occupancy_texts = [["" for _ in setting["regs"]] for _ in setting["stages"]]
    cycles_texts = [["" for _ in setting["regs"]] for _ in setting["stages"]]
    best = min(r["cycles"] for r in rows)
    for i, stages in enumerate(setting["stages"]):
        for j, regs in enumerate(setting["regs"]):
            r = cell[(stages, regs)]
            occupancy_grid[i, j], cycles_grid[i, j] = r["theoretical_pct"], r["cycles"] / 1000
            limiter = "+".join(LIMITER_SHORT.get(x, x) for x in r["limiter"].split("+"))
            occupancy_texts[i][j] = f"{r['theoretical_pct']:.1f}%\n{r['blocks_per_sm']} blk\n{limiter}"
            cycles_texts[i][j] = f"{r['cycles'] / 1000:,.0f}k\n{r['cycles'] / best:.2f}x"
    fig, (left, right) = plt.subplots(2, 1, figsize=(11, 8.5))
    _heatmap(left, occupancy_grid, occupancy_texts, "viridis", setting, "theoretical occupancy (%)")
    left.set_title("Theoretical occupancy (CUDA's calculator): % of 64 warps, resident blocks per SM, limiter "
                   "(reg: registers, smem: shared memory, warps: warp slots)", fontsize=9)
    _heatmap(right, cycles_grid, cycles_texts, "magma_r", setting, "simulated time (thousands of cycles)")
    right.set_title("Simulated time: thousands of cycles, and x the fastest (lower is faster)", fontsize=9)
    fig.suptitle(f"Registers and shared memory against occupancy and time\n{subject(setting)}", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_occupancy_vs_time(rows: list[dict], setting: dict, path: Path) -> None:
    """Cycles against theoretical occupancy (all, then a zoom on the high end), and the shared-memory data
    path's busy share: one point per launch, a colour per shared-memory size."""
    fig, (whole, zoom, busy) = plt.subplots(1, 3, figsize=(16, 5.5))
    fastest: dict[float, dict] = {}
    for r in rows:
        if r["theoretical_pct"] not in fastest or r["cycles"] < fastest[r["theoretical_pct"]]["cycles"]:
            fastest[r["theoretical_pct"]] = r
    best = min(r["cycles"] for r in rows)
    for ax in (whole, zoom):
        for r in rows:
            ax.scatter(r["theoretical_pct"], r["cycles"], s=55, color=STAGE_COLOURS[r["stages"]], edgecolor="black",
                       zorder=3)
        ax.axhline(best, color="grey", linestyle=":", linewidth=1, label=f"fastest: {best:,} cycles")
        ax.set_xlabel("theoretical occupancy (%)")
        ax.set_ylabel("simulated time (cycles)")
        ax.yaxis.set_major_formatter(CYCLES)
        ax.grid(alpha=0.3)
    whole.set_xlim(0, 108)
    whole.set_ylim(0, max(r["cycles"] for r in rows) * 1.1)
    whole.set_title("Time against occupancy: steep, then flat", fontsize=10)
    high = [r for r in fastest.values() if r["theoretical_pct"] >= 35]
    for r in high:
        zoom.annotate(f"{blocks_text(r['blocks_per_sm'])}\n{r['waves']:.2f} waves", (r["theoretical_pct"], r["cycles"]),
                      textcoords="offset points", xytext=(0, -9), ha="center", va="top", fontsize=8)
    span = [r["cycles"] for r in rows if r["theoretical_pct"] >= 35]
    zoom.set_xlim(30, 108)
    zoom.set_ylim(min(span) * 0.96, max(span) * 1.02)
    zoom.set_title("Zoom on 37.5% and up: the fastest launch at each occupancy\n"
                   "(16 blocks in waves of blocks/SM x 1 SM: a partial last wave costs a whole one)", fontsize=9)
    zoom.legend(fontsize=8, loc="upper right")
    for r in rows:
        busy.scatter(r["theoretical_pct"], r["l1tex_pct"], s=55, color=STAGE_COLOURS[r["stages"]],
                     edgecolor="black", zorder=3)
    busy.set_xlabel("theoretical occupancy (%)")
    busy.set_ylabel("L1TEX data stage busy (% of peak)")
    busy.set_xlim(0, 108)
    busy.set_ylim(0, 105)
    busy.set_title("Why it flattens: the shared-memory data path\n(LDS/STS wavefronts) is nearly always busy",
                   fontsize=9)
    busy.grid(alpha=0.3)
    handles = [plt.Line2D([], [], marker="o", linestyle="", color=STAGE_COLOURS[s], markeredgecolor="black",
                          label=f"{s * STAGE_BYTES // 1024} KiB shared memory per block") for s in setting["stages"]]
    busy.legend(handles=handles, fontsize=8, loc="lower right")
    fig.suptitle(f"More occupancy is not always faster\n{subject(setting)}", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def lesson(rows: list[dict]) -> None:
    """The numbers behind the lesson, printed from the rows."""
    by_pct: dict[float, dict] = {}
    for r in rows:
        if r["theoretical_pct"] not in by_pct or r["cycles"] < by_pct[r["theoretical_pct"]]["cycles"]:
            by_pct[r["theoretical_pct"]] = r
    print("fastest run at each theoretical occupancy:")
    for pct in sorted(by_pct):
        r = by_pct[pct]
        print(f"  {pct:5.1f}%: {r['cycles']:>9,} cycles  ({blocks_text(r['blocks_per_sm'])}, {r['waves']:.2f} waves, "
              f"regs={r['regs']}, {r['smem_kib']} KiB)")
    ordered = sorted(by_pct.values(), key=lambda r: r["theoretical_pct"])
    for low, high in zip(ordered, ordered[1:]):
        if high["cycles"] > low["cycles"]:
            print(f"  more occupancy, slower: {high['theoretical_pct']:.1f}% took {high['cycles']:,} cycles, "
                  f"{low['theoretical_pct']:.1f}% {low['cycles']:,} ({high['waves']:.2f} against "
                  f"{low['waves']:.2f} waves)")
    top, half = ordered[-1], next((r for r in ordered if r["theoretical_pct"] >= 50), None)
    if half is not None and half is not top:
        change = 100 * (top["cycles"] / half["cycles"] - 1)
        print(f"  {half['theoretical_pct']:.1f}% -> {top['theoretical_pct']:.1f}% occupancy "
              f"({top['theoretical_pct'] / half['theoretical_pct']:.1f}x the warps): {abs(change):.1f}% "
              f"{'more' if change > 0 else 'fewer'} cycles ({half['cycles']:,} -> {top['cycles']:,})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "plots"), help="directory for the PNGs (default: plots/)")
    parser.add_argument("--quick", action="store_true", help="fewer, smaller runs (the CI setting)")
    args = parser.parse_args()
    setting = QUICK if args.quick else FULL
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    print(f"{subject(setting)}: {len(setting['regs']) * len(setting['stages'])} runs")
    rows = measure(setting)
    lesson(rows)
    paths = [out / "course_occupancy_regs_smem.png", out / "course_occupancy_vs_time.png"]
    plot_regs_smem(rows, setting, paths[0])
    plot_occupancy_vs_time(rows, setting, paths[1])
    for path in paths:
        print(f"wrote {path}")
    print(f"done in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
