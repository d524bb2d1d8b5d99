"""`gpusim bench`: simulation speed on a fixed set of kernels, reported as GPGPU-Sim reports it."""

from __future__ import annotations

from pathlib import Path

from . import native
from .api import run
from .arch import load_arch

WORKLOADS = Path(__file__).resolve().parents[1] / "workloads"
# (workload, parameters, SMs): reduced sizes so the set runs in seconds
CASES = (
    ("microbench/fma_peak.yaml", {"blocks": 32}, 16),
    ("gemm_tile128.yaml", {"M": 1024, "N": 1024, "K": 1024}, 16),
)


def _workload_dir() -> Path:
    packaged = Path(__file__).resolve().parent / "_data" / "workloads"
    return packaged if packaged.is_dir() else WORKLOADS


def bench(arch: str = "h100", repeat: int = 1, memory: str = "hierarchy") -> list[dict]:
    """Run each case `repeat` times (best wall time kept); return one record per case."""
    spec = load_arch(arch)
    rows = []
    for name, params, sms in CASES:
        best = None
        for _ in range(repeat):
            result = run(_workload_dir() / name, spec, params=params, sms=sms, memory=memory)
            if best is None or result.wall_seconds < best.wall_seconds:
                best = result
        m, wall = best.metrics, best.wall_seconds
        cycles_per_second = m["gpu_sim_cycle"] / wall
        rows.append({
            "workload": name, "arch": spec.name, "sms": sms, "params": params, "memory": memory, "engine": native.mode,
            "warp_instructions": m["smsp__inst_executed.sum"], "cycles": m["gpu_sim_cycle"],
            "wall_seconds": round(wall, 3),
            "warp_instructions_per_second": round(m["smsp__inst_executed.sum"] / wall),
            "thread_instructions_per_second": round(m["smsp__thread_inst_executed.sum"] / wall),
            "cycles_per_second": round(cycles_per_second),
            "silicon_slowdown": round(spec.clocks.core_mhz * 1e6 / cycles_per_second),
        })
    return rows
