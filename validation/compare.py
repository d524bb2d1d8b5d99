"""Compare real-hardware microbenchmark results (validation/results/*.json) with gpusim's model of that part.

    python validation/compare.py validation/results/h200-2026-11-29.json --arch h200

Today the model side is the architecture file and the occupancy calculator; rows for the simulated
microbenchmark workloads join when the engine lands.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import gpusim


def comparison_rows(results: dict, arch: str) -> list[tuple[str, float, float]]:
    """(quantity, measured mean over runs, gpusim) for everything the model states directly."""
    spec = gpusim.load_arch(arch)
    runs = results["runs"]

    def mean(get):
        return sum(get(r) for r in runs) / len(runs)

    sub = spec.sm.sub_partitions
    mem = spec.memory
    rows = [
        ("SMs", mean(lambda r: r["sms"]), spec.sms),
        ("L2 bytes", mean(lambda r: r["l2_bytes"]), mem.l2.size_bytes),
        ("shared memory per SM (bytes)", mean(lambda r: r["shared_memory_per_sm"]), spec.shared_memory.per_sm_bytes),
        ("dependent FFMA latency (cycles)", mean(lambda r: r["ffma_dependent_latency_cycles"]),
         spec.pipelines.fp32.latency),
        ("FFMA warp-inst per clock per SM", mean(lambda r: r["ffma_warp_inst_per_clock_per_sm"]),
         sub / spec.pipelines.fp32.issue_interval(spec.sm.warp_size)),
        ("dependent HMMA.16816.F32 latency (cycles)", mean(lambda r: r["hmma_16816_f32_dependent_latency_cycles"]),
         spec.pipelines.tensor.latency),
        ("HMMA (mma.sync) FP16 FLOP per clock per SM", mean(lambda r: r["hmma_16816_flop_per_clock_per_sm"]),
         sub * spec.pipelines.tensor.warp_mma_rate),
        ("L1 hit load-to-use (cycles)", mean(lambda r: r["pointer_chase"]["l1"]["cycles_per_hop"]), mem.l1.hit_latency),
        ("L2 hit load-to-use (cycles)", mean(lambda r: r["pointer_chase"]["l2"]["cycles_per_hop"]), mem.l2.hit_latency),
        ("DRAM load-to-use (cycles)", mean(lambda r: r["pointer_chase"]["dram"]["cycles_per_hop"]), mem.dram.latency),
        ("DRAM read bandwidth (GB/s)", mean(lambda r: r["stream_read_gbs"]), mem.dram.bandwidth_gbs),
        ("DRAM copy bandwidth (GB/s)", mean(lambda r: r["stream_copy_gbs"]), mem.dram.bandwidth_gbs),
    ]
    for row in runs[0]["occupancy"]:
        if row["spin_cycles"] < 100000:
            continue  # too short to fill the first wave (see the results file's notes)
        model = gpusim.occupancy(spec, row["threads"], row["regs"], row["static_smem"] + row["dynamic_smem"])
        label = (f"blocks/SM: {row['threads']} thr, {row['regs']} regs, "
                 f"{(row['static_smem'] + row['dynamic_smem']) // 1024} KB smem")
        rows.append((label, mean(lambda r, i=runs[0]["occupancy"].index(row): r["occupancy"][i]["measured_blocks_per_sm"]),
                     model.blocks_per_sm))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--arch", required=True)
    args = parser.parse_args(argv)
    results = json.loads(args.results.read_text())
    print(f"{'quantity':48} {'measured':>12} {'gpusim':>12} {'gpusim/measured':>16}")
    for name, measured, model in comparison_rows(results, args.arch):
        ratio = f"{model / measured:.3f}" if measured else "-"
        print(f"{name:48} {measured:12.2f} {model:12.2f} {ratio:>16}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
