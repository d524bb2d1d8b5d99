"""Sampled against full simulation (issue 13): each row runs a workload twice, `--sample on` and `--sample off`,
and compares cycles and the main rates. Sizes are those where a full run is feasible on a laptop core.

    python validation/sampling_accuracy.py [--arch h100,a100] [--jobs 2] [--out validation/results/F.json]

prints a Markdown table (the README's) and writes every number to the JSON file. The trace row replicates the
shared vectorAdd NVBit trace (../shared/traces/accelsim-vectoradd) 16 times into a temporary directory, so it has
waves enough to sample; nothing of it is kept.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpusim.api import run  # noqa: E402

TRACE = ROOT.parent / "shared" / "traces" / "accelsim-vectoradd" / "kernel-1.traceg"
REPLICAS = 16

ROWS = [  # (label, workload, params[, the archs it runs on when not every one asked for[, --sample-trips]])
    ("gemm_tile128 2048x2048x1024", "workloads/gemm_tile128.yaml", {"M": 2048, "N": 2048, "K": 1024}),
    ("gemm_tile128 4096x4096x1024", "workloads/gemm_tile128.yaml", {"K": 1024}),  # 2.59 waves on h100
    # the mission's command at its default size: its full run takes 20-25 minutes of one core
    ("gemm_tile128 4096^3 (default)", "workloads/gemm_tile128.yaml", {}, ("h100",)),
    # gemm_multistage at its default size (4096^3, cp.async, 2 blocks an SM: 3.88 waves): its full run 3-4 minutes
    ("gemm_multistage 4096^3 (default)", "workloads/gemm_multistage.yaml", {}, ("h100",)),
    # the same with longer runs, as its unsettled note suggests (fourteenth session)
    ("gemm_multistage 4096^3 --sample-trips 16", "workloads/gemm_multistage.yaml", {}, ("h100",), 16),
    ("gemm_multistage 4096^3 --sample-trips 32", "workloads/gemm_multistage.yaml", {}, ("h100",), 32),
    ("flash_attention seq 1024", "workloads/flash_attention.yaml", {"seq": 1024}),
    ("attention_naive seq 1024", "workloads/attention_naive.yaml", {"seq": 1024}),
    ("kv_decode", "workloads/kv_decode.yaml", {}),
    ("reduction", "workloads/reduction.yaml", {}),
    ("stream", "workloads/microbench/stream.yaml", {}),
    ("vecadd", "workloads/vecadd.yaml", {}),
    ("divergence 4096 blocks", "workloads/microbench/divergence.yaml", {"n": 4096 * 256}),
    (f"vectorAdd trace x{REPLICAS}", "TRACE", {}),
]
RATES = {  # column -> (metric, kind): relative error in %, or a difference in points
    "IPC": ("sm__inst_executed.avg.per_cycle_active", "rel"),
    "L1 hit": ("l1tex__t_sector_hit_rate.pct", "points"),
    "L2 hit": ("lts__t_sector_hit_rate.pct", "points"),
    "DRAM GB/s": ("dram__bytes.sum.per_second", "rel"),
    "occupancy": ("sm__warps_active.avg.pct_of_peak_sustained_active", "points"),
}


def replicated_trace(directory: Path) -> Path:
    """The vectorAdd trace with its blocks repeated REPLICAS times (block ids renumbered, addresses kept)."""
    text = TRACE.read_text()
    head, _, body = text.partition("#BEGIN_TB")
    blocks = ("#BEGIN_TB" + body).split("#BEGIN_TB")[1:]
    grid = int(re.search(r"-grid dim = \((\d+),1,1\)", head).group(1))
    out = [head.replace(f"-grid dim = ({grid},1,1)", f"-grid dim = ({grid * REPLICAS},1,1)")]
    for copy in range(REPLICAS):
        for block in blocks:
            index = int(re.search(r"thread block = (\d+),0,0", block).group(1))
            out.append("#BEGIN_TB" + block.replace(f"thread block = {index},0,0",
                                                   f"thread block = {index + copy * grid},0,0", 1))
    path = directory / "kernel-1.traceg"
    path.write_text("".join(out))
    return path


def one(task: tuple[str, str, dict, str, str, int | None]) -> dict:
    label, workload, params, arch, mode, trips = task
    started = time.perf_counter()
    result = run(workload, arch, params=params or None, sample=mode, max_instructions=None,
                 sample_trips=trips if mode != "off" else None)
    return {"label": label, "arch": arch, "mode": mode, "wall_s": round(time.perf_counter() - started, 2),
            "metrics": result.metrics, "sampling": result.sampling, "warnings": result.warnings}


def compare(full: dict, sampled: dict) -> dict:
    f, s = full["metrics"], sampled["metrics"]
    row = {"cycles_full": f["gpu_sim_cycle"], "cycles_sampled": s["gpu_sim_cycle"],
           "cycles_err_pct": 100 * (s["gpu_sim_cycle"] - f["gpu_sim_cycle"]) / f["gpu_sim_cycle"]}
    for name, (key, kind) in RATES.items():
        a, b = f.get(key, 0.0), s.get(key, 0.0)
        row[name] = 100 * (b - a) / a if kind == "rel" and a else (b - a if kind == "points" else 0.0)
    sampling = sampled["sampling"]
    row.update(method=sampling["method"], error_estimate_pct=sampling.get("error_estimate_pct"),
               simulated=sampling.get("simulated_warp_instructions"), total=f["smsp__inst_executed.sum"],
               wall_full=full["wall_s"], wall_sampled=sampled["wall_s"], detail=sampling["detail"])
    return row


def markdown(rows: list[dict]) -> str:
    lines = ["| workload | arch | method | simulated | cycles full | sampled | error | est. | IPC | L1 hit | L2 hit "
             "| DRAM BW | occupancy | wall full / sampled |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        share = f"{100 * r['simulated'] / r['total']:.0f}%" if r["simulated"] else "all"
        est = "" if r["error_estimate_pct"] is None else f"{r['error_estimate_pct']:.1f}%"
        lines.append(
            f"| {r['label']} | {r['arch']} | {r['method']} | {share} | {r['cycles_full']:,} | {r['cycles_sampled']:,} "
            f"| {r['cycles_err_pct']:+.1f}% | {est} | {r['IPC']:+.1f}% | {r['L1 hit']:+.1f} pt | {r['L2 hit']:+.1f} pt "
            f"| {r['DRAM GB/s']:+.1f}% | {r['occupancy']:+.1f} pt | {r['wall_full']:.0f} / {r['wall_sampled']:.0f} s |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="h100,a100")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--rows", default="", help="the rows to run, by the start of their labels (comma-separated: "
                        "'gemm_tile128 4096^3' is the default-size GEMM alone); all by default")
    parser.add_argument("--out", default=None)
    parser.add_argument("--merge", action="store_true",
                        help="replace the rows run (by label and arch) in --out's existing rows, keep the others")
    args = parser.parse_args()
    keep = [w for w in args.rows.split(",") if w]
    unknown = [k for k in keep if not any(row[0].startswith(k) for row in ROWS)]
    if unknown:  # one line, before anything runs
        sys.exit(f"sampling_accuracy.py: --rows {unknown[0]!r} starts no row's label; expected the start of one of: "
                 + ", ".join(repr(row[0]) for row in ROWS))
    with tempfile.TemporaryDirectory() as tmp:
        trace = str(replicated_trace(Path(tmp))) if TRACE.exists() else None
        tasks = []
        for label, workload, params, *more in ROWS:
            only, trips = (more + [None, None])[:2]
            if keep and not any(label.startswith(k) for k in keep):
                continue
            if workload == "TRACE":
                if trace is None:
                    continue
                workload = trace
            else:
                workload = str(ROOT / workload)
            for arch in args.arch.split(","):
                if only and arch not in only:
                    continue
                tasks += [(label, workload, params, arch, "off", None), (label, workload, params, arch, "on", trips)]
        with ProcessPoolExecutor(args.jobs) as pool:
            results = list(pool.map(one, tasks))
    rows = [compare(results[i], results[i + 1]) | {"label": results[i]["label"], "arch": results[i]["arch"]}
            for i in range(0, len(results), 2)]
    table = markdown(rows)
    print(table)
    if args.out and args.merge and Path(args.out).exists():
        ran = {(r["label"], r["arch"]) for r in rows}
        old = [r for r in json.loads(Path(args.out).read_text())["rows"] if (r["label"], r["arch"]) not in ran]
        order = {row[0]: i for i, row in enumerate(ROWS)}
        rows = sorted(old + rows, key=lambda r: (order.get(r["label"], len(ROWS)), r["arch"] != "h100", r["arch"]))
        print(markdown(rows))
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": rows, "machine": os.uname().nodename, "cpus": os.cpu_count(),
                                              "date": time.strftime("%Y-%m-%d")}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
