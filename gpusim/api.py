"""The library entry point the CLI and notebooks call: `gpusim.run(workload, arch, ...)`."""

from __future__ import annotations

import time
from pathlib import Path

import attrs
import simpy

from .arch import ArchSpec, load_arch
from .engine.gpu import build_gpu
from .errors import GpusimError
from .stats.metrics import kernel_metrics
from .workload import Kernel, load_workload

SIMT_MODES = ("stack", "its")


@attrs.frozen
class RunResult:
    kernel: str
    arch: str
    scheduler: str
    simt: str
    seed: int
    params: dict
    launch: dict
    metrics: dict
    wall_seconds: float = attrs.field(eq=False)

    def to_dict(self) -> dict:
        """The JSON record (wall time left out, so identical runs give identical records)."""
        d = attrs.asdict(self)
        d.pop("wall_seconds")
        return d


def _launch_record(kernel: Kernel) -> dict:
    launch = kernel.launch
    return {"grid": list(launch.grid), "block": list(launch.block), "blocks": launch.nblocks,
            "threads_per_block": launch.threads_per_block, "registers_per_thread": launch.registers_per_thread,
            "shared_memory_bytes": launch.shared_memory_bytes,
            "dynamic_shared_memory_bytes": launch.dynamic_shared_memory_bytes}


def run(workload: str | Path | Kernel, arch: str | ArchSpec, *, scheduler: str = "gto", simt: str = "stack",
        sms: int | None = None, params: dict | None = None, seed: int = 0, memory="hierarchy",
        observer=None) -> RunResult:
    """Simulate one kernel on one architecture and return its metrics. `memory` is "hierarchy" (L1, L2, DRAM
    with latency and bandwidth), "fixed" (every access takes the L1-hit or shared latency) or a model object."""
    if simt not in SIMT_MODES:
        raise GpusimError(f"--simt {simt}: expected one of {', '.join(SIMT_MODES)}")
    spec = load_arch(arch)
    kernel = workload if isinstance(workload, Kernel) else load_workload(workload, params or {}, seed=seed)
    started = time.perf_counter()
    env = simpy.Environment()
    stream_factory = None
    if simt == "its":
        from .engine.its import its_stream_factory

        stream_factory = its_stream_factory(kernel)
    gpu = build_gpu(spec, env, kernel, scheduler=scheduler, sms=sms, memory=memory, observer=observer,
                    stream_factory=stream_factory)
    cycles = gpu.run()
    metrics = kernel_metrics(gpu, cycles)
    return RunResult(kernel=kernel.name, arch=spec.name, scheduler=scheduler, simt=simt, seed=seed,
                     params=dict(kernel.params), launch=_launch_record(kernel), metrics=metrics,
                     wall_seconds=time.perf_counter() - started)
