"""Coursework 2: warp-scheduler policies. When does the order in which warps issue matter?

Each SM sub-partition picks one ready warp per cycle. gpusim has four policies (--scheduler,
gpusim.engine.scheduler.policy_names()): lrr (loose round robin: the next ready warp after the last one), gto
(greedy then oldest: keep issuing the same warp until it stalls, then the oldest ready one), oldest_first, and
two_level (round robin over a small active set; a warp waiting on global memory makes room, Narasiman et al.,
MICRO 2011). This study runs each on three kernels, one simulated H100 SM:

* latency-bound: workloads/microbench/latency_hiding.yaml, 32 warps each loading then running 64 dependent FFMAs.
  Under lrr every warp reaches its next load at about the same time, so they all wait together; gto staggers
  them, so some compute while others wait.
* dependent chain: workloads/microbench/fma_chain.yaml with 8 warps (2 per scheduler), each a chain of dependent
  FFMAs. Nothing a policy can reorder: every warp waits on its own previous result.
* cache-sensitive: examples/workloads/cache_reuse.yaml, each warp re-reading its own working set; 32 of them
  overflow the L1 when all 64 interleave (lrr) and fit when the oldest run ahead (gto), as in Rogers et al.,
  "Cache-Conscious Wavefront Scheduling", MICRO 2012. A control whose working sets fit the L1 together
  (lines=24) separates the cache effect from the rest.

It prints cycles, IPC and L1 hit rates per policy and draws the cycles, the warp states, the cache kernel's hit
rates, and one SM's warp slots under lrr and gto (gpusim.stats.timeline.TimelineRecorder, run_plots.plot_timeline).

    python examples/scheduler_policies.py [--out DIR] [--quick]

--quick (the CI setting) runs shorter kernels; the committed pictures come from the full setting.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

import gpusim  # noqa: E402
from gpusim.engine.scheduler import policy_names  # noqa: E402
from gpusim.report import run_plots  # noqa: E402
from gpusim.stats.timeline import TimelineRecorder  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ARCH = "h100"
SMS = 1
HIT = "l1tex__t_sector_hit_rate.pct"
IPC = "sm__inst_executed.avg.per_cycle_active"
CYCLES = FuncFormatter(lambda x, _: f"{x:,.0f}")
POLICY_COLOURS = {"lrr": "tab:blue", "gto": "tab:orange", "oldest_first": "tab:green", "two_level": "tab:purple"}
TIMELINE_NOTES = {"lrr": "every warp issues in turn (the diagonal ticks), so all 64 working sets are in use",
                  "gto": "the oldest few warps of each scheduler issue, the others wait their turn"}
LATENCY = ROOT / "workloads" / "microbench" / "latency_hiding.yaml"
CHAIN = ROOT / "workloads" / "microbench" / "fma_chain.yaml"
CACHE = ROOT / "examples" / "workloads" / "cache_reuse.yaml"


def kernels(quick: bool) -> list[dict]:
    """The three kernels (and the cache kernel's control), each a title, a workload and run() keywords."""
    iters, n, passes = (8, 256, 3) if quick else (32, 1024, 8)
    return [
        {"key": "latency", "title": "latency-bound: latency_hiding\n(32 warps: a load, then 64 dependent FFMAs)",
         "workload": LATENCY, "run": {"params": {"blocks": 1, "warps": 32, "math": 64, "iters": iters}}},
        {"key": "chain", "title": "dependent chain: fma_chain\n(8 warps, each a chain of dependent FFMAs)",
         "workload": CHAIN, "run": {"params": {"n": n}, "threads": 256}},
        {"key": "cache",
         "title": "cache-sensitive: cache_reuse\n(64 warps x 4.5 KiB working sets = 288 KiB > 256 KiB L1)",
         "workload": CACHE, "run": {"params": {"passes": passes, "blocks": 2}}},
        {"key": "cache_fits", "title": "control: cache_reuse, lines=24\n(64 x 3 KiB = 192 KiB: fits the L1)",
         "workload": CACHE, "run": {"params": {"passes": passes, "blocks": 2, "lines": 24}}},
    ]


def measure(kernel_list: list[dict]) -> dict:
    """(kernel key, policy) -> the run's result."""
    results = {}
    for k in kernel_list:
        for policy in policies():
            result = gpusim.run(k["workload"], ARCH, sms=SMS, scheduler=policy, **k["run"])
            results[(k["key"], policy)] = result
            m = result.metrics
            print(f"  {k['key']:<10} {policy:<12} cycles {m['gpu_sim_cycle']:>8,}  IPC {m[IPC]:5.2f}  "
                  f"L1 hit {hit_text(m):>6}  warp-insts {m['smsp__inst_executed.sum']:>8,}  "
                  f"({result.wall_seconds:.1f} s)", flush=True)
    return results


def hit_text(metrics: dict) -> str:
    """The L1 hit rate of global loads, or '-' for a kernel without any."""
    if not metrics.get("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"):
        return "-"
    return f"{metrics[HIT]:.1f}%"


def policies() -> list[str]:
    """The policies, lrr (the default, the baseline) first."""
    return sorted(policy_names(), key=lambda p: (p != "lrr", p != "gto", p))


def subject() -> str:
    return f"{gpusim.load_arch(ARCH).full_name}, {SMS} SM simulated"


def _bar_labels(ax, bars, texts) -> None:
    for bar, text in zip(bars, texts):
        ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()), textcoords="offset points",
                    xytext=(0, 2), ha="center", va="bottom", fontsize=7)


def plot_policies(kernel_list: list[dict], results: dict, path: Path) -> None:
    """Per kernel: cycles per policy (top, with the ratio to lrr) and the warp states per issued instruction
    (bottom, stacked by Nsight stall reason)."""
    shown = [k for k in kernel_list if k["key"] != "cache_fits"]
    names = policies()
    fig, axes = plt.subplots(2, len(shown), figsize=(5.2 * len(shown), 9.5))
    reasons_used: list[str] = []
    for column, k in enumerate(shown):
        top, bottom = axes[0][column], axes[1][column]
        cycles = [results[(k["key"], p)].metrics["gpu_sim_cycle"] for p in names]
        base = results[(k["key"], "lrr")].metrics["gpu_sim_cycle"]
        bars = top.bar(names, cycles, color=[POLICY_COLOURS[p] for p in names])
        _bar_labels(top, bars, [f"{c:,}\n{c / base:.2f}x lrr" for c in cycles])
        top.set_ylim(0, max(cycles) * 1.2)
        top.set_title(k["title"], fontsize=9)
        top.set_ylabel("simulated time (cycles)")
        top.yaxis.set_major_formatter(CYCLES)
        top.grid(axis="y", alpha=0.3)
        for i, p in enumerate(names):
            states = run_plots.warp_state_cycles(results[(k["key"], p)].metrics)
            bottom_edge = 0.0
            for reason, value in states.items():
                bottom.bar(i, value, bottom=bottom_edge, color=run_plots.STATE_COLOURS[reason], edgecolor="white",
                           linewidth=0.4)
                bottom_edge += value
                if reason not in reasons_used:
                    reasons_used.append(reason)
        bottom.set_xticks(range(len(names)), names)
        bottom.set_ylabel("warp-cycles per issued instruction")
        bottom.set_xlabel("scheduler policy")
        bottom.grid(axis="y", alpha=0.3)
        bottom.set_title("where the warps' cycles went (Nsight warp states)", fontsize=9)
    handles = [plt.Rectangle((0, 0), 1, 1, color=run_plots.STATE_COLOURS[r]) for r in reasons_used]
    fig.legend(handles, reasons_used, loc="lower center", ncol=min(len(reasons_used), 7), fontsize=8,
               title="warp state (stall reason)", title_fontsize=8, frameon=False)
    fig.suptitle(f"Warp-scheduler policies on three kernels: time and warp states\n{subject()}", fontsize=11)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_cache(kernel_list: list[dict], results: dict, path: Path) -> None:
    """The cache kernel against its control: L1 hit rate (left) and cycles (right) per policy."""
    names = policies()
    cases = [("cache", "36 lines per warp: 288 KiB in all (> 256 KiB L1)"),
             ("cache_fits", "24 lines per warp: 192 KiB in all (fits the L1)")]
    fig, (hits, cycles) = plt.subplots(1, 2, figsize=(12, 5))
    width = 0.38
    for offset, (key, label) in zip((-width / 2, width / 2), cases):
        xs = [i + offset for i in range(len(names))]
        hit_values = [results[(key, p)].metrics[HIT] for p in names]
        cycle_values = [results[(key, p)].metrics["gpu_sim_cycle"] for p in names]
        hatch = "" if key == "cache" else "//"
        bars = hits.bar(xs, hit_values, width, color=[POLICY_COLOURS[p] for p in names], hatch=hatch,
                        edgecolor="black", linewidth=0.5, label=label)
        _bar_labels(hits, bars, [f"{v:.1f}%" for v in hit_values])
        bars = cycles.bar(xs, cycle_values, width, color=[POLICY_COLOURS[p] for p in names], hatch=hatch,
                          edgecolor="black", linewidth=0.5, label=label)
        _bar_labels(cycles, bars, [f"{v:,}" for v in cycle_values])
    for ax in (hits, cycles):
        ax.set_xticks(range(len(names)), names)
        ax.set_xlabel("scheduler policy")
        ax.grid(axis="y", alpha=0.3)
        legend = ax.legend(fontsize=8, loc="upper right")
        for handle in legend.legend_handles:
            handle.set_facecolor("white")
    hits.set_ylabel("L1 sector hit rate, global loads (%)")
    hits.set_ylim(0, 110)
    passes = next(k for k in kernel_list if k["key"] == "cache")["run"]["params"]["passes"]
    hits.set_title(f"L1 hit rate ({passes - 1} of {passes} passes can hit: {100 * (passes - 1) / passes:.1f}% "
                   f"at most)", fontsize=9)
    cycles.set_ylabel("simulated time (cycles)")
    cycles.yaxis.set_major_formatter(CYCLES)
    cycles.set_ylim(0, max(results[(k, p)].metrics["gpu_sim_cycle"] for k, _ in cases for p in names) * 1.15)
    cycles.set_title("Time (lower is faster)", fontsize=9)
    fig.suptitle(f"A cache-sensitive kernel: cache_reuse (2 blocks of 32 warps) with each policy\n{subject()}",
                 fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_timelines(cache: dict, start: int, path: Path) -> None:
    """One SM's warp slots over the same window of the cache kernel under lrr and gto, one above the other."""
    fig, axes = plt.subplots(2, 1, figsize=(13, 12))
    for ax, policy in zip(axes, ("lrr", "gto")):
        recorder = TimelineRecorder(sm=0, window_start=start, window_cycles=1024)
        result = recorder.attach(gpusim.run(cache["workload"], ARCH, sms=SMS, scheduler=policy, observer=recorder,
                                            **cache["run"]))
        run_plots.plot_timeline(result, ax)
        m = result.metrics
        ax.set_title(f"{policy}: {m['gpu_sim_cycle']:,} cycles, L1 hit rate {m[HIT]:.1f}%: {TIMELINE_NOTES[policy]}\n"
                     + ax.get_title(), fontsize=10)
    fig.suptitle("cache_reuse under lrr and gto: which of the SM's 64 warps issue", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "plots"), help="directory for the PNGs (default: plots/)")
    parser.add_argument("--quick", action="store_true", help="shorter kernels (the CI setting)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    kernel_list = kernels(args.quick)
    print(f"{len(kernel_list)} kernels x {len(policies())} policies on {subject()}")
    results = measure(kernel_list)
    speedup = {}
    for key in ("latency", "chain", "cache", "cache_fits"):
        lrr, gto = results[(key, "lrr")].metrics, results[(key, "gto")].metrics
        speedup[key] = lrr["gpu_sim_cycle"] / gto["gpu_sim_cycle"]
        print(f"  {key}: gto {gto['gpu_sim_cycle']:,} cycles against lrr {lrr['gpu_sim_cycle']:,} "
              f"({speedup[key]:.2f}x), L1 hit {hit_text(gto)} against {hit_text(lrr)}")
    print(f"  the cache's part of gto's gain: {speedup['cache'] / speedup['cache_fits']:.2f}x "
          f"({speedup['cache']:.2f}x where the working sets overflow the L1 / {speedup['cache_fits']:.2f}x where "
          f"they fit)")
    paths = [out / "course_scheduler_policies.png", out / "course_scheduler_cache.png",
             out / "course_scheduler_timeline_lrr_gto.png"]
    plot_policies(kernel_list, results, paths[0])
    plot_cache(kernel_list, results, paths[1])
    cache = next(k for k in kernel_list if k["key"] == "cache")
    gto_cycles = results[("cache", "gto")].metrics["gpu_sim_cycle"]
    plot_timelines(cache, gto_cycles // 4, paths[2])  # a window a quarter into gto's run: past the first pass
    for path in paths:
        print(f"wrote {path}")
    print(f"done in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
