"""What lax SM synchronisation (`--sync-window CYCLES`) buys and costs: each workload simulated in full at every
window, its wall time and its results against the exact run's (window 1).

Runs one simulation at a time (each takes one core); results go to validation/results/sync-window.json.

    python validation/sync_window.py                              # h100, windows 1 16 32 64
    python validation/sync_window.py --arch a100 --windows 1 64 --rows gemm stream
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import gpusim  # noqa: E402

OUT = ROOT / "validation" / "results" / "sync-window.json"
W = ROOT / "workloads"
ROWS = [  # (label, workload, parameters): full runs of 5-70 s on the development machine
    ("gemm", W / "gemm_tile128.yaml", {"M": 2048, "N": 2048, "K": 1024}),
    ("flash_attention_simple", W / "flash_attention_simple.yaml", {"seq": 1024}),
    ("attention_naive", W / "attention_naive.yaml", {"seq": 1024}),
    ("kv_decode", W / "kv_decode.yaml", {}),
    ("reduction", W / "reduction.yaml", {}),
    ("stream", W / "microbench" / "stream.yaml", {}),
    ("vecadd", W / "vecadd.yaml", {}),
]
COMPARED = {  # metric: how a difference is read ("rel": relative, "points": percentage points)
    "gpu_sim_cycle": "rel",
    "lts__t_sector_hit_rate.pct": "points",
    "dram__bytes.sum.per_second": "rel",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "points",
}


def measure(arch: str, windows: list[int], labels: list[str]) -> list[dict]:
    out = []
    for label, path, params in ROWS:
        if label not in labels:
            continue
        exact = None
        for window in windows:
            started = time.perf_counter()
            result = gpusim.run(path, arch, params=params, sample="off", sync_window=window)
            wall = time.perf_counter() - started
            m = result.metrics
            row = {"label": label, "arch": arch, "params": params, "sync_window": window, "wall_s": round(wall, 2),
                   "warp_insts": m["smsp__inst_executed.sum"], **{k: m.get(k) for k in COMPARED}}
            if window == 1:
                exact = row
            elif exact is not None:
                row["vs_exact"] = {k: _difference(row[k], exact[k], how) for k, how in COMPARED.items()}
                row["speedup"] = round(exact["wall_s"] / wall, 2)
            out.append(row)
            print(json.dumps(row), flush=True)
    return out


def _difference(value, reference, how: str):
    if value is None or reference is None:
        return None
    if how == "points":
        return round(value - reference, 2)
    return round((value - reference) / reference * 100, 2) if reference else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.error = lambda message: sys.exit(f"sync_window.py: {message}")  # one line, not the usage too
    parser.add_argument("--arch", default="h100")
    parser.add_argument("--windows", type=int, nargs="+", default=[1, 16, 32, 64], metavar="CYCLES",
                        help="windows to run (1 first: the others are compared with it)")
    parser.add_argument("--rows", nargs="+", default=[r[0] for r in ROWS], metavar="LABEL",
                        help=f"rows to run (default all: {', '.join(r[0] for r in ROWS)})")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    unknown = sorted(set(args.rows) - {r[0] for r in ROWS})
    if unknown:
        parser.error(f"--rows: unknown {', '.join(unknown)} (expected some of {', '.join(r[0] for r in ROWS)})")
    if not args.windows or any(w < 1 for w in args.windows):
        parser.error("--windows: expected whole numbers of cycles of at least 1")
    try:
        rows = measure(args.arch, sorted(set(args.windows)), args.rows)
    except gpusim.GpusimError as exc:
        parser.error(str(exc))
    previous = json.loads(args.out.read_text()) if args.out.exists() else {"rows": []}
    kept = [r for r in previous["rows"] if (r["label"], r["arch"], r["sync_window"]) not in
            {(r["label"], r["arch"], r["sync_window"]) for r in rows}]
    record = {"measured": str(date.today()), "machine": f"{platform.machine()}, {_cores()} cores",
              "how": "gpusim.run(..., sample='off', sync_window=W), one at a time, wall time of the call",
              "rows": kept + rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


if __name__ == "__main__":
    sys.exit(main())
