"""Coursework 3: warp divergence and shared-memory bank conflicts, before and after the fix.

Both examples are the seed notes' (004):

* section 2.1.3, a divergent branch: `if (idx % 2 == 0) data[idx] *= 2.0f; else data[idx] += 1.0f;`. Even and
  odd threads share every warp, so each warp runs both sides with half its lanes.
  Before: examples/workloads/divergent_branch.yaml. After: examples/workloads/branch_free.yaml (both results
  computed by every lane, one select, one store: no branch, no masked lanes).
* section 2.3.5, a strided shared-memory read: `float val = sdata[tid * 2];`, a 2-way bank conflict (lanes i and
  i + 16 in the same bank). Before: examples/workloads/bank_conflict.yaml; with shift=1, the seed's remedy
  `sdata[256 + 1]`, which moves the whole array and so changes nothing. After: examples/workloads/bank_padded.yaml
  (one pad word after every 32: `sdata[i + i / 32]`).

For each it prints the key numbers (cycles, warp-instructions, active threads per warp-instruction -- Nsight's
smsp__thread_inst_executed_per_inst_executed.ratio, 32 when no lane is masked --, shared-memory wavefronts and
bank conflicts) and the per-instruction view (gpusim.report.per_instruction, as `gpusim run --per-inst`), where
the branch's half-warp lines and the conflicting LDS/STS lines stand out; then draws them before and after.

    python examples/divergence_and_banks.py [--out DIR] [--quick]

--quick (the CI setting) runs smaller grids; the committed pictures come from the full setting.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

import gpusim  # noqa: E402
from gpusim.report.per_instruction import PerInstructionView  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ROOT / "examples" / "workloads"
ARCH = "h100"
SMS = 1
THREADS = "smsp__thread_inst_executed_per_inst_executed.ratio"
WAVEFRONTS = "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"
CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"
CYCLES = FuncFormatter(lambda x, _: f"{x:,.0f}")
BEFORE, AFTER, NO_FIX = "tab:red", "tab:green", "tab:orange"


def variants(quick: bool) -> list[dict]:
    """The runs: a study, a label, a colour, a workload and its parameters."""
    n, blocks = (2048, 2) if quick else (8192, 8)
    return [
        {"study": "divergence", "label": "before\nif / else", "colour": BEFORE,
         "workload": WORKLOADS / "divergent_branch.yaml", "params": {"n": n}},
        {"study": "divergence", "label": "after\nbranch-free select", "colour": AFTER,
         "workload": WORKLOADS / "branch_free.yaml", "params": {"n": n}},
        {"study": "banks", "label": "before\nsdata[tid*2]", "colour": BEFORE,
         "workload": WORKLOADS / "bank_conflict.yaml", "params": {"blocks": blocks}},
        {"study": "banks", "label": "seed's remedy\nsdata[1+tid*2]", "colour": NO_FIX,
         "workload": WORKLOADS / "bank_conflict.yaml", "params": {"blocks": blocks, "shift": 1}},
        {"study": "banks", "label": "after (padded)\nsdata[i+i/32]", "colour": AFTER,
         "workload": WORKLOADS / "bank_padded.yaml", "params": {"blocks": blocks}},
    ]


def run(variant: dict):
    """The run with its per-instruction rows attached (result.per_instruction), and the view that prints them."""
    view = PerInstructionView()
    result = gpusim.run(variant["workload"], ARCH, sms=SMS, params=variant["params"], observer=view.observer)
    return view.attach(result), view


def report(variant: dict, result, view) -> None:
    m = result.metrics
    settings = " ".join(f"--set {k}={v}" for k, v in variant["params"].items())
    print(f"\n== {variant['label'].replace(chr(10), ' ')}: gpusim run "
          f"{variant['workload'].relative_to(ROOT)} --arch {ARCH} --sms {SMS} {settings} --per-inst")
    print(f"   cycles {m['gpu_sim_cycle']:,}  warp-instructions {m['smsp__inst_executed.sum']:,}  "
          f"threads per warp-instruction {m[THREADS]:.2f} of 32  shared wavefronts {m[WAVEFRONTS]:,}  "
          f"bank conflicts {m[CONFLICTS]:,}", flush=True)
    view.report(result, sys.stdout)


def _bars(ax, runs: list[tuple[dict, object]], values: list[float], ylabel: str, title: str, fmt: str) -> None:
    bars = ax.bar(range(len(runs)), values, color=[v["colour"] for v, _ in runs], edgecolor="black", linewidth=0.5)
    for bar, value in zip(bars, values):
        ax.annotate(fmt.format(value), (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    textcoords="offset points", xytext=(0, 2), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(runs)), [v["label"] for v, _ in runs], fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.set_ylim(0, max(max(values), 1) * 1.18)
    ax.yaxis.set_major_formatter(CYCLES)
    ax.grid(axis="y", alpha=0.3)


def plot(runs: list[tuple[dict, object]], path: Path) -> None:
    """Top: the divergence study (cycles, warp-instructions, threads per warp-instruction); bottom: the bank
    study (cycles, shared-memory wavefronts, bank conflicts)."""
    divergence = [(v, r) for v, r in runs if v["study"] == "divergence"]
    banks = [(v, r) for v, r in runs if v["study"] == "banks"]
    n = divergence[0][0]["params"]["n"]
    blocks = banks[0][0]["params"]["blocks"]
    fig = plt.figure(figsize=(15, 10), layout="constrained")
    top, bottom = fig.subfigures(2, 1, hspace=0.06)

    def metric(group, name):
        return [r.metrics[name] for _, r in group]

    axes = top.subplots(1, 3)
    _bars(axes[0], divergence, metric(divergence, "gpu_sim_cycle"), "simulated time (cycles)",
          "time (lower is faster)", "{:,.0f}")
    _bars(axes[1], divergence, metric(divergence, "smsp__inst_executed.sum"), "warp-instructions issued",
          "issue slots used\n(BSSY, BRA, both sides, BSYNC; or one straight path)", "{:,.0f}")
    _bars(axes[2], divergence, metric(divergence, THREADS), "active threads per warp-instruction (of 32)",
          "SIMT efficiency\n(smsp__thread_inst_executed_per_inst_executed.ratio)", "{:.2f}")
    axes[2].axhline(32, color="black", linestyle=":", linewidth=1)
    axes[2].set_ylim(0, 36)
    top.suptitle(f"Divergence: the seed's even/odd branch (section 2.1.3), {n:,} threads\n"
                 f"divergent_branch.yaml -> branch_free.yaml", fontsize=11, fontweight="bold")
    axes = bottom.subplots(1, 3)
    _bars(axes[0], banks, metric(banks, "gpu_sim_cycle"), "simulated time (cycles)", "time (lower is faster)",
          "{:,.0f}")
    _bars(axes[1], banks, metric(banks, WAVEFRONTS), "shared-memory wavefronts",
          "shared-memory wavefronts\n(1 per warp-wide LDS or STS without conflicts)", "{:,.0f}")
    _bars(axes[2], banks, metric(banks, CONFLICTS), "bank conflicts (extra wavefronts)",
          "bank conflicts\n(l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum)", "{:,.0f}")
    bottom.suptitle(f"Bank conflicts: the seed's sdata[tid * 2] (section 2.3.5), {blocks} blocks of 256 threads, "
                    f"64 reads each\nbank_conflict.yaml (shift=0, then 1) -> bank_padded.yaml", fontsize=11,
                    fontweight="bold")
    fig.suptitle(f"Before and after the fix, on {gpusim.load_arch(ARCH).full_name}, {SMS} SM simulated",
                 fontsize=12)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_per_instruction(runs: list[tuple[dict, object]], path: Path) -> None:
    """The per-instruction view as bars: for each static instruction of the divergent branch, its active threads
    per execution; for each of the conflicting kernel and the padded one, its shared-memory wavefronts per
    execution (1 = conflict-free), labelled by source line and opcode."""
    picks = [runs[0], runs[1], runs[2], runs[4]]
    fig, axes = plt.subplots(1, 4, figsize=(17, 5.5), sharey=False)
    for ax, (variant, result) in zip(axes, picks):
        rows = [r for r in result.per_instruction if r["executions"]]
        labels = [f"line {r['line']}: {r['opcode']}" if r["line"] is not None else f"(implicit) {r['opcode']}"
                  for r in rows]
        if variant["study"] == "divergence":
            values = [r["thread_instructions"] / r["executions"] for r in rows]
            ax.set_xlabel("active threads per execution (of 32)")
            ax.set_xlim(0, 36)
            ax.axvline(32, color="black", linestyle=":", linewidth=1)
            fmt = "{:.1f}"
        else:
            values = [(r.get("memory") or {}).get(WAVEFRONTS, 0) / r["executions"] for r in rows]
            ax.set_xlabel("shared-memory wavefronts per execution")
            ax.set_xlim(0, 3.6)
            fmt = "{:.2f}"
        bars = ax.barh(range(len(rows)), values, color=variant["colour"], edgecolor="black", linewidth=0.5)
        for bar, value, r in zip(bars, values, rows):
            shared = variant["study"] == "divergence" or WAVEFRONTS in (r.get("memory") or {})
            ax.annotate(fmt.format(value) if shared else "no shared-memory access",
                        (bar.get_width(), bar.get_y() + bar.get_height() / 2), textcoords="offset points",
                        xytext=(3, 0), va="center", fontsize=8, color="black" if shared else "grey")
        ax.set_yticks(range(len(rows)), labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_title(f"{variant['workload'].name}\n{variant['label'].replace(chr(10), ': ')}", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle("The per-instruction view (gpusim run --per-inst): which lines diverge, which conflict\n"
                 f"{gpusim.load_arch(ARCH).full_name}, {SMS} SM simulated; instructions in program order", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "plots"), help="directory for the PNGs (default: plots/)")
    parser.add_argument("--quick", action="store_true", help="smaller grids (the CI setting)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    runs = []
    for variant in variants(args.quick):
        result, view = run(variant)
        report(variant, result, view)
        runs.append((variant, result))
    print()
    before, after = runs[0][1].metrics, runs[1][1].metrics
    print(f"divergence: {before['gpu_sim_cycle']:,} -> {after['gpu_sim_cycle']:,} cycles "
          f"({before['gpu_sim_cycle'] / after['gpu_sim_cycle']:.2f}x faster); warp-instructions "
          f"{before['smsp__inst_executed.sum']:,} -> {after['smsp__inst_executed.sum']:,}; threads per "
          f"warp-instruction {before[THREADS]:.2f} -> {after[THREADS]:.2f}")
    before, shifted, after = (r.metrics for _, r in runs[2:5])
    print(f"banks: {before['gpu_sim_cycle']:,} -> {after['gpu_sim_cycle']:,} cycles "
          f"({before['gpu_sim_cycle'] / after['gpu_sim_cycle']:.2f}x faster); shared wavefronts "
          f"{before[WAVEFRONTS]:,} -> {after[WAVEFRONTS]:,}; bank conflicts {before[CONFLICTS]:,} -> "
          f"{after[CONFLICTS]:,} (the seed's shifted array: {shifted[CONFLICTS]:,}, {shifted['gpu_sim_cycle']:,} "
          f"cycles)")
    paths = [out / "course_divergence_banks.png", out / "course_per_instruction.png"]
    plot(runs, paths[0])
    plot_per_instruction(runs, paths[1])
    for path in paths:
        print(f"wrote {path}")
    print(f"done in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
