"""Sampled against full simulation at the sizes people run: each row runs a workload under the default
`--sample auto` and compares it with the full simulation (`--sample off`) of the same kernel: cycles, DRAM bytes,
L2 hit rate, the stated error estimate, and the wall time of each.

    python validation/sampling_accuracy.py [--arch h100,a100] [--rows LABEL,...] [--jobs 2] [--stored-full]
                                           [--out validation/results/sampling-accuracy.json] [--merge]
    python validation/sampling_accuracy.py --other-parts --out validation/results/sampling-other-parts.json

--other-parts runs the GEMMs on parts the sampling was never tuned on (h200, l40s, b200), where the distance between
a wave's reuses falls near the L2's capacity; the bar there is the stated error, not 5%.

Full runs at these sizes take minutes to most of an hour on one core, so each is made once and stored in
validation/results/full-runs.json (its command, the commit, the machine, the date, the wall time and the
metrics compared) and reused while the engine's sources are unchanged (the stored digest of gpusim/engine and
gpusim/memory says so); --refresh makes them again. The trace row replicates the shared vectorAdd NVBit trace
(../shared/traces/accelsim-vectoradd) 64 times into a temporary directory; nothing of it is kept.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpusim.api import run  # noqa: E402

TRACE = ROOT.parent / "shared" / "traces" / "accelsim-vectoradd" / "kernel-1.traceg"
REPLICAS = 64
FULL_RUNS = ROOT / "validation" / "results" / "full-runs.json"
TOLERANCE_PCT = 5.0  # the bound on cycles and DRAM bytes under auto

GEMM8K = {"M": 8192, "N": 8192, "K": 8192}
ROWS = [  # (label, workload, params, the archs it runs on)
    ("gemm_tile128 4096^3", "workloads/gemm_tile128.yaml", {}, ("h100", "a100")),
    ("gemm_multistage 4096^3", "workloads/gemm_multistage.yaml", {}, ("h100", "a100")),
    ("gemm_hopper_ws 4096^3", "workloads/gemm_hopper_ws.yaml", {}, ("h100",)),
    ("gemm_hopper_ws 8192^3", "workloads/gemm_hopper_ws.yaml", GEMM8K, ("h100",)),
    ("gemm_blackwell_umma 4096^3", "workloads/gemm_blackwell_umma.yaml", {"M": 4096, "N": 4096, "K": 4096}, ("b200",)),
    ("gemm_blackwell_umma 8192^3", "workloads/gemm_blackwell_umma.yaml", GEMM8K, ("b200",)),
    ("flash_attention3 b1 h8 s4096", "workloads/flash_attention3.yaml", {"batch": 1, "heads": 8, "seq": 4096},
     ("h100",)),
    ("flash_attention3 b1 h4 s8192", "workloads/flash_attention3.yaml", {"batch": 1, "heads": 4, "seq": 8192},
     ("h100",)),
    ("flash_attention3 b4 h32 s4096", "workloads/flash_attention3.yaml", {"batch": 4, "heads": 32, "seq": 4096},
     ("h100",)),
    ("flash_attention_simple b1 h16 s4096", "workloads/flash_attention_simple.yaml", {"batch": 1, "heads": 16, "seq": 4096},
     ("h100", "a100")),
    ("attention_naive b1 h8 s4096", "workloads/attention_naive.yaml", {"batch": 1, "heads": 8, "seq": 4096},
     ("h100",)),
    ("vecadd n=64M", "workloads/vecadd.yaml", {"n": 67108864}, ("h100", "a100")),
    ("stream n=64M (2 x 256 MiB)", "workloads/microbench/stream.yaml", {"n": 67108864}, ("h100", "a100")),
    ("kv_decode batch 64", "workloads/kv_decode.yaml", {"batch": 64}, ("h100",)),
    ("kv_decode batch 128", "workloads/kv_decode.yaml", {"batch": 128}, ("a100",)),
    ("reduction n=16M", "workloads/reduction.yaml", {"n": 16777216}, ("h100", "a100")),
    (f"vectorAdd trace x{REPLICAS}", "TRACE", {}, ("h100", "a100")),
]
OTHER_PARTS = [  # the same kernels on other parts: reuse distances of 47-94% of their L2
    ("gemm_tile128 4096^3", "workloads/gemm_tile128.yaml", {}, ("h200", "b200")),
    ("gemm_multistage 4096^3", "workloads/gemm_multistage.yaml", {}, ("h200", "l40s")),
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


NOT_SIMULATED = ("description", "bound")  # a workload's keys that change what it says, not what it does


def _yaml_content(path: Path) -> bytes:
    """A YAML file as what it says, not how: its data (comments, a workload's description and `bound:` left out)."""
    data = yaml.safe_load(path.read_text())
    if isinstance(data, dict):
        data = {k: v for k, v in data.items() if k not in NOT_SIMULATED}
    return json.dumps(data, sort_keys=True, default=str).encode()


def engine_digest(workload: str, arch: str) -> str:
    """A digest of what one row's full run depends on: the engine, the memory model, the instruction set and the
    trace reader (their sources), the row's arch file and its workload (their content): a stored full run is
    reused while it is unchanged."""
    h = hashlib.sha256()
    for folder in ("gpusim/engine", "gpusim/memory", "gpusim/workload", "gpusim/trace"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            h.update(str(path.relative_to(ROOT)).encode())
            h.update(path.read_bytes())
    h.update(_yaml_content(ROOT / "arch" / f"{arch}.yaml"))
    source = TRACE if workload == "TRACE" else ROOT / workload
    h.update(source.read_bytes() if workload == "TRACE" else _yaml_content(source))
    return h.hexdigest()[:16]


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown CPU") if Path("/proc/cpuinfo").exists() else "unknown CPU"
    return f"{os.uname().nodename}: {cpu}, {os.cpu_count()} cores"


KEPT = ("gpu_sim_cycle", "smsp__inst_executed.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
        "dram__bytes.sum", "dram__bytes.sum.per_second", "lts__t_sector_hit_rate.pct", "l1tex__t_sector_hit_rate.pct",
        "sm__inst_executed.avg.per_cycle_active", "sm__warps_active.avg.pct_of_peak_sustained_active",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed")


def command(label: str, workload: str, params: dict, arch: str, mode: str) -> str:
    sets = " ".join(f"--set {k}={v}" for k, v in params.items())
    path = workload if workload != "TRACE" else f"<vectorAdd trace x{REPLICAS}>"
    return f"gpusim run {path} --arch {arch} {sets} --sample {mode}".replace("  ", " ")


def one(task: tuple) -> dict:
    label, workload, path, params, arch, mode = task
    started = time.perf_counter()
    result = run(path, arch, params=params or None, sample=mode, max_instructions=None)
    return {"label": label, "arch": arch, "mode": mode, "wall_s": round(time.perf_counter() - started, 2),
            "command": command(label, workload, params, arch, mode),
            "metrics": {k: result.metrics.get(k) for k in KEPT}, "sampling": result.sampling,
            "warnings": result.warnings, "violations": result.violations}


def compare(full: dict, sampled: dict) -> dict:
    f, s = full["metrics"], sampled["metrics"]
    sampling = sampled["sampling"] or {}

    def rel(key: str) -> float:
        return 100 * (s[key] - f[key]) / f[key] if f.get(key) else 0.0

    method = sampling.get("method", "full")
    estimate = sampling.get("error_estimate_pct") if method != "full" else 0.0
    dram_estimate = sampling.get("dram_error_estimate_pct") if method != "full" else 0.0
    l2_estimate = sampling.get("l2_hit_error_points", 0.0) if method != "full" else 0.0
    row = {"cycles_full": f["gpu_sim_cycle"], "cycles_sampled": s["gpu_sim_cycle"], "cycles_err_pct": rel("gpu_sim_cycle"),
           "dram_bytes_full": f["dram__bytes.sum"], "dram_bytes_sampled": s["dram__bytes.sum"],
           "dram_bytes_err_pct": rel("dram__bytes.sum"),
           "l2_hit_full": f["lts__t_sector_hit_rate.pct"], "l2_hit_sampled": s["lts__t_sector_hit_rate.pct"],
           "l2_hit_err_points": s["lts__t_sector_hit_rate.pct"] - f["lts__t_sector_hit_rate.pct"]}
    for name, (key, kind) in RATES.items():
        a, b = f.get(key) or 0.0, s.get(key) or 0.0
        row[name] = 100 * (b - a) / a if kind == "rel" and a else (b - a if kind == "points" else 0.0)
    row.update(method=method, error_estimate_pct=estimate,
               estimate_covers=estimate is not None and estimate + 0.05 >= abs(row["cycles_err_pct"]),
               dram_error_estimate_pct=dram_estimate,
               dram_estimate_covers=dram_estimate is not None and dram_estimate + 0.05 >= abs(row["dram_bytes_err_pct"]),
               l2_hit_error_points=l2_estimate,
               l2_hit_estimate_covers=l2_estimate + 0.05 >= abs(row["l2_hit_err_points"]),
               simulated=sampling.get("simulated_warp_instructions") if method != "full" else f["smsp__inst_executed.sum"],
               total=f["smsp__inst_executed.sum"], wall_full=full["wall_s"], wall_sampled=sampled["wall_s"],
               detail=sampling.get("detail", ""), violations=sampled["violations"],
               command_full=full["command"], command_sampled=sampled["command"],
               full_run={k: full[k] for k in ("commit", "date", "machine") if k in full})
    return row


def dram_est(row: dict) -> str:
    value = row.get("dram_error_estimate_pct")
    return "" if value is None else f"{value:.1f}%"


def markdown(rows: list[dict]) -> str:
    lines = ["| workload | arch | method | simulated | cycles full | auto | error | est. | DRAM bytes | est. | L2 hit "
             "| est. | wall full / auto |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        share = f"{100 * r['simulated'] / r['total']:.0f}%" if r["simulated"] and r["total"] else "all"
        est = "" if r["error_estimate_pct"] is None else f"{r['error_estimate_pct']:.1f}%"
        lines.append(
            f"| {r['label']} | {r['arch']} | {r['method']} | {share} | {r['cycles_full']:,} | {r['cycles_sampled']:,} "
            f"| {r['cycles_err_pct']:+.1f}% | {est} | {r['dram_bytes_err_pct']:+.1f}% | {dram_est(r)} "
            f"| {r['l2_hit_err_points']:+.1f} pt | {r.get('l2_hit_error_points', 0.0):.1f} pt "
            f"| {r['wall_full']:.0f} / {r['wall_sampled']:.0f} s |")
    within = sum(abs(r["cycles_err_pct"]) <= TOLERANCE_PCT and abs(r["dram_bytes_err_pct"]) <= TOLERANCE_PCT
                 for r in rows)
    covered = sum(bool(r["estimate_covers"]) for r in rows)
    dram_covered = sum(bool(r.get("dram_estimate_covers")) for r in rows)
    l2_covered = sum(bool(r.get("l2_hit_estimate_covers")) for r in rows)
    lines.append("")
    lines.append(f"{len(rows)} rows: {within} within {TOLERANCE_PCT:.0f}% on cycles and DRAM bytes; the stated "
                 f"estimate at least the actual error in {covered} ({100 * covered / max(1, len(rows)):.0f}%) on "
                 f"cycles, {dram_covered} ({100 * dram_covered / max(1, len(rows)):.0f}%) on DRAM bytes and "
                 f"{l2_covered} ({100 * l2_covered / max(1, len(rows)):.0f}%) on the L2 hit rate")
    return "\n".join(lines)


def stored_full_runs() -> dict:
    if not FULL_RUNS.exists():
        return {}
    return {(r["label"], r["arch"]): r for r in json.loads(FULL_RUNS.read_text())["runs"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="", help="only these archs (comma-separated); each row's own by default")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--rows", default="", help="the rows to run, by the start of their labels (comma-separated); "
                        "all by default")
    parser.add_argument("--other-parts", action="store_true",
                        help="the GEMMs on parts the sampling was not tuned on (h200, b200, l40s) instead of the table")
    parser.add_argument("--full-only", action="store_true", help="make and store the full runs only")
    parser.add_argument("--refresh", action="store_true", help="make the full runs again even where stored")
    parser.add_argument("--stored-full", action="store_true",
                        help="use a stored full run even where the engine's sources changed since it was made (the "
                             "row names the commit it was made at): for changes that leave records unchanged")
    parser.add_argument("--table", metavar="JSON", default=None,
                        help="print the Markdown table of a results file (the README's) and run nothing")
    parser.add_argument("--out", default=None)
    parser.add_argument("--merge", action="store_true",
                        help="replace the rows run (by label and arch) in --out's existing rows, keep the others")
    args = parser.parse_args()
    if args.table:
        try:
            print(markdown(json.loads(Path(args.table).read_text())["rows"]))
        except (OSError, ValueError, KeyError) as exc:
            sys.exit(f"sampling_accuracy.py: --table {args.table}: not a results file ({exc})")
        return 0
    table_rows = OTHER_PARTS if args.other_parts else ROWS
    keep = [w for w in args.rows.split(",") if w]
    unknown = [k for k in keep if not any(row[0].startswith(k) for row in table_rows)]
    if unknown:  # one line, before anything runs
        sys.exit(f"sampling_accuracy.py: --rows {unknown[0]!r} starts no row's label; expected the start of one of: "
                 + ", ".join(repr(row[0]) for row in table_rows))
    archs = [a for a in args.arch.split(",") if a]
    stored = stored_full_runs()
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        trace = str(replicated_trace(Path(tmp))) if TRACE.exists() else None
        selected = []
        for label, workload, params, row_archs in table_rows:
            if keep and not any(label.startswith(k) for k in keep):
                continue
            path = trace if workload == "TRACE" else str(ROOT / workload)
            if path is None:
                continue
            selected += [(label, workload, path, params, arch) for arch in row_archs if not archs or arch in archs]
        for label, workload, path, params, arch in selected:  # full runs first, each stored as soon as it is made
            digest, old = engine_digest(workload, arch), stored.get((label, arch))
            if old is not None and (old.get("engine_digest") == digest or args.stored_full) and not args.refresh:
                continue
            full = one((label, workload, path, params, arch, "off"))
            full.update(commit=commit(), date=time.strftime("%Y-%m-%d"), machine=machine(), engine_digest=digest)
            full.pop("sampling", None)
            stored = stored_full_runs()  # as stored now: another invocation may have added runs meanwhile
            stored[(label, arch)] = full
            FULL_RUNS.write_text(json.dumps({"runs": list(stored.values())}, indent=1) + "\n")
            print(f"full run stored: {label} on {arch}: {full['metrics']['gpu_sim_cycle']:,} cycles, "
                  f"{full['wall_s']:.0f} s", flush=True)
        if args.full_only:
            return 0
        tasks = [(label, workload, path, params, arch, "auto") for label, workload, path, params, arch in selected]
        with ProcessPoolExecutor(args.jobs) as pool:
            results = list(pool.map(one, tasks))
    for task, sampled in zip(tasks, results):
        rows.append(compare(stored[(task[0], task[4])], sampled) | {"label": task[0], "arch": task[4]})
    table = markdown(rows)
    print(table)
    if args.out and args.merge and Path(args.out).exists():
        ran = {(r["label"], r["arch"]) for r in rows}
        old = [r for r in json.loads(Path(args.out).read_text())["rows"] if (r["label"], r["arch"]) not in ran]
        order = {row[0]: i for i, row in enumerate(table_rows)}
        rows = sorted(old + rows, key=lambda r: (order.get(r["label"], len(table_rows)), r["arch"] != "h100",
                                                 r["arch"]))
        print(markdown(rows))
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": rows, "command": "python validation/sampling_accuracy.py "
                                              + " ".join(sys.argv[1:]), "commit": commit(), "machine": machine(),
                                              "date": time.strftime("%Y-%m-%d")}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
