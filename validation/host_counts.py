"""What the engine costs the host per simulated warp-instruction, counted rather than timed: host instructions,
cache misses and mispredicted branches, by valgrind's cachegrind, for 16, 66 and 132 busy SMs of an H100, and for
132 SMs holding one block each rather than two.

Each configuration runs gemm_tile128 with a grid of exactly one wave (two blocks an SM: 16 SMs 512 x 1024, 66
1408 x 1536, 132 1536 x 2816; one block an SM: 132 SMs 1536 x 1408), at K = 128 and at K = 256, under cachegrind
with its cache and branch simulation. The difference between the two runs (the same launch, every block 4 more
trips of its hot loop) is the cost of those trips alone, without Python's start, loading the workload and the
blocks' prologue and epilogue: its host instructions (I refs), first-level data misses (D1), last-level misses
(LL, instruction and data) and mispredicted branches (conditional and indirect) over its warp-instructions. A busy
GPU that costs more per warp-instruction than a small one does so here in counts, free of the machine's load. The
caches and the branch predictor are cachegrind's models (LAST_LEVEL; the record prints it), not hardware
counters.

    python validation/host_counts.py            # needs valgrind; about 20 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "validation" / "results" / "host-counts.json"
WORKLOAD = "workloads/gemm_tile128.yaml"
# (SMs, blocks an SM, M, N): one wave of 128 x 128 blocks
CONFIGS = ((16, 2, 512, 1024), (66, 2, 1408, 1536), (132, 2, 1536, 2816), (132, 1, 1536, 1408))
DEPTHS = (128, 256)  # K: 4 and 8 trips of the hot loop
# The last level cachegrind models: 8 MiB, 16 ways, 64-byte lines (a desktop part's shared L3; this machine's own,
# which cachegrind would take, is a 480 MiB virtual one that nothing here outgrows, and with 32 MiB the misses a
# warp-instruction were within the difference's noise, -0.2 to 0.6)
LAST_LEVEL = "8388608,16,64"
SNIPPET = ("import sys; from gpusim.api import run; "
           "r = run(sys.argv[1], 'h100', params=dict(M=int(sys.argv[2]), N=int(sys.argv[3]), K=int(sys.argv[4])), "
           "sms=int(sys.argv[5]), sample='off'); "
           "print('warp_instructions', r.metrics['smsp__inst_executed.sum'], r.metrics['gpu_sim_cycle'])")


def count(sms: int, m: int, n: int, k: int) -> dict:
    """One run under cachegrind: its warp-instructions, cycles, host instructions, L1 data and last-level misses."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=yes", "--branch-sim=yes", f"--LL={LAST_LEVEL}",
               f"--cachegrind-out-file={tmp}/out", sys.executable, "-c", SNIPPET, WORKLOAD, str(m), str(n), str(k),
               str(sms)]
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
        out = Path(tmp, "out")
        models = [line.removeprefix("desc:").strip() for line in out.read_text().splitlines()
                  if line.startswith("desc:")] if out.exists() else []
        model = [m for m in models if "LL cache" in m]
        first = [m for m in models if "D1 cache" in m]
    if p.returncode != 0:
        raise SystemExit(f"host_counts: {' '.join(cmd[:3])} ... failed ({p.returncode}): {p.stderr.strip()[-300:]}")

    def summary(label: str) -> int:
        pattern = r"\s+".join(re.escape(word) for word in label.split())
        found = re.search(rf"==\d+== {pattern}:\s+([\d,]+)", p.stderr)
        if not found:
            raise SystemExit(f"host_counts: no '{label}' line in cachegrind's summary")
        return int(found.group(1).replace(",", ""))

    warp, cycles = re.search(r"warp_instructions (\d+) (\d+)", p.stdout).groups()
    return {"sms": sms, "M": m, "N": n, "K": k, "warp_instructions": int(warp), "cycles": int(cycles),
            "host_instructions": summary("I refs"), "d1_misses": summary("D1 misses"),
            "ll_misses": summary("LL misses"), "mispredicts": summary("Mispredicts"),
            "ll_model": model[0] if model else "", "d1_model": first[0] if first else ""}


def _cpu() -> str:
    """The host processor's model name (Linux), which sets the first-level caches cachegrind models."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (each one process under valgrind)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    runs = [(sms, m, n, k) for sms, _blocks, m, n in CONFIGS for k in DEPTHS]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        counted = list(pool.map(lambda run: count(*run), runs))
    rows = []
    for sms, blocks, m, n in CONFIGS:
        short, long = (c for c in counted if (c["sms"], c["M"], c["N"]) == (sms, m, n))
        warp = long["warp_instructions"] - short["warp_instructions"]
        rows.append({"sms": sms, "blocks_per_sm": blocks, "runs": [short, long], "warp_instructions": warp,
                     "host_instructions_per_warp_instruction": (long["host_instructions"]
                                                                - short["host_instructions"]) / warp,
                     "d1_misses_per_warp_instruction": (long["d1_misses"] - short["d1_misses"]) / warp,
                     "ll_misses_per_warp_instruction": (long["ll_misses"] - short["ll_misses"]) / warp,
                     "mispredicts_per_warp_instruction": (long["mispredicts"] - short["mispredicts"]) / warp})
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout
    record = {"command": "python validation/host_counts.py", "commit": commit.strip(), "date": date.today().isoformat(),
              "machine": f"{platform.machine()}, {platform.processor() or platform.platform()}", "cpu": _cpu(),
              "valgrind": subprocess.run(["valgrind", "--version"], capture_output=True, text=True).stdout.strip(),
              "workload": WORKLOAD, "arch": "h100", "rows": rows}
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    for r in rows:
        print(f"{r['sms']:>4} SMs x {r['blocks_per_sm']} blocks: {r['host_instructions_per_warp_instruction']:,.0f} "
              f"host instructions, {r['d1_misses_per_warp_instruction']:.1f} L1 data misses, "
              f"{r['ll_misses_per_warp_instruction']:.2f} last-level misses and "
              f"{r['mispredicts_per_warp_instruction']:.1f} mispredicted branches per warp-instruction "
              f"({r['warp_instructions']:,} warp-instructions of 4 trips)")
    print(f"record: {args.out}")


if __name__ == "__main__":
    main()
