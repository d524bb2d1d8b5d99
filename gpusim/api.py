"""The library entry point the CLI and notebooks call: `gpusim.run(workload, arch, ...)`.

A workload is a YAML kernel, an Accel-Sim trace of one kernel (`.traceg`, `.traceg.xz`) or a trace directory's
command list (`kernelslist.g`: its kernels run one after another, each on a fresh GPU; memcpy lines are noted).
"""

from __future__ import annotations

import time
from pathlib import Path

import attrs
import simpy

from .arch import ArchSpec, load_arch
from .engine.gpu import build_gpu
from .engine.scheduler import DEFAULT_POLICY
from .errors import GpusimError
from .stats.metrics import combine_metrics, kernel_metrics
from .trace import TraceKernel, is_command_list, is_trace, load_trace, read_command_list
from .workload import Kernel, load_workload
from .workload.opcodes import unsupported_warning
from .workload.program import program_infos

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
    warnings: list = attrs.field(factory=list)  # one line each (e.g. a trace compiled for another arch)
    notes: list = attrs.field(factory=list)  # one line each (e.g. a command list's skipped memcpy lines)
    unknown_opcodes: dict = attrs.field(factory=dict)  # opcode -> warp-instructions run with the default timing
    kernels: list = attrs.field(factory=list)  # for a command list: each kernel's own record

    def to_dict(self) -> dict:
        """The JSON record (wall time left out, so identical runs give identical records)."""
        d = attrs.asdict(self)
        d.pop("wall_seconds")
        if not d["kernels"]:
            d.pop("kernels")
        return d


def _launch_record(kernel) -> dict:
    launch = kernel.launch
    return {"grid": list(launch.grid), "block": list(launch.block), "blocks": launch.nblocks,
            "threads_per_block": launch.threads_per_block, "registers_per_thread": launch.registers_per_thread,
            "shared_memory_bytes": launch.shared_memory_bytes,
            "dynamic_shared_memory_bytes": launch.dynamic_shared_memory_bytes}


def reject_trace_params(workload, params: dict | None) -> None:
    """A trace is a recorded kernel: `--set` has nothing to set."""
    if params:
        raise GpusimError(f"{workload}: --set {next(iter(params))}: a trace has no parameters to set")


def load_kernel(workload, params: dict | None = None, seed: int = 0):
    """A YAML workload (Kernel) or a one-kernel trace (TraceKernel) from a path."""
    if isinstance(workload, (Kernel, TraceKernel)):
        return workload
    if is_trace(workload):
        reject_trace_params(workload, params)
        return load_trace(workload)
    return load_workload(workload, params or {}, seed=seed)


def run(workload: str | Path | Kernel, arch: str | ArchSpec, *, scheduler: str = DEFAULT_POLICY,
        simt: str = "stack",
        sms: int | None = None, params: dict | None = None, seed: int = 0, memory="hierarchy",
        observer=None) -> RunResult:
    """Simulate a workload on one architecture and return its metrics. `memory` is "hierarchy" (L1, L2, DRAM
    with latency and bandwidth), "fixed" (every access takes the L1-hit or shared latency) or a model object."""
    if simt not in SIMT_MODES:
        raise GpusimError(f"--simt {simt}: expected one of {', '.join(SIMT_MODES)}")
    spec = load_arch(arch)
    options = dict(scheduler=scheduler, simt=simt, sms=sms, seed=seed, memory=memory, observer=observer)
    if isinstance(workload, (str, Path)) and is_command_list(workload):
        reject_trace_params(workload, params)
        return _run_command_list(Path(workload), spec, **options)
    return _run_kernel(load_kernel(workload, params, seed), spec, **options)


def _run_kernel(kernel, spec, *, scheduler, simt, sms, seed, memory, observer) -> RunResult:
    started = time.perf_counter()
    traced = isinstance(kernel, TraceKernel)
    warnings = [] if traced else list(kernel.warnings)  # a YAML kernel's own (e.g. a launch dimension floored)
    if traced:
        if simt != "stack":
            raise GpusimError(f"--simt {simt}: a trace records the order its warps executed; --simt applies to "
                              f"YAML workloads only")
        stream_factory = kernel.streams()
        warning = kernel.version_warning(spec)
        if warning:
            warnings.append(warning)
    elif simt == "its":
        from .engine.its import its_stream_factory

        stream_factory = its_stream_factory(kernel)
    else:
        stream_factory = None
    env = simpy.Environment()
    gpu = build_gpu(spec, env, kernel, scheduler=scheduler, sms=sms, memory=memory, observer=observer,
                    stream_factory=stream_factory)
    cycles = gpu.run()
    unknown = {}
    if traced:
        stream_factory.finish()
        unknown = dict(sorted(stream_factory.unknown.items(), key=lambda kv: (-kv[1], kv[0])))
    infos = stream_factory.known_infos() if traced else program_infos(kernel.program)
    warning = unsupported_warning(infos, spec.name, spec.compute_capability)
    if warning:
        warnings.append(warning)
    metrics = kernel_metrics(gpu, cycles)
    return RunResult(kernel=kernel.name, arch=spec.name, scheduler=scheduler,
                     simt="trace" if traced else simt,  # a trace replays the order its warps executed
                     seed=seed, params=dict(kernel.params), launch=_launch_record(kernel), metrics=metrics,
                     wall_seconds=time.perf_counter() - started, warnings=warnings, unknown_opcodes=unknown)


def _run_command_list(path: Path, spec, **options) -> RunResult:
    """Every kernel the list names, in order, each on a fresh GPU (cold caches); totals in `metrics`."""
    started = time.perf_counter()
    commands = read_command_list(path)
    results, warnings, notes, unknown = [], [], [], {}
    for command in commands:
        if command.kernel is None:
            notes.append(f"{path}:{command.line}: {command.text.split(',')[0]} skipped "
                         f"(host-device copies are not simulated)")
            continue
        result = _run_kernel(load_trace(command.kernel), spec, **options)
        results.append(result)
        for warning in result.warnings:  # once each (kernels of one binary share their opcode warnings)
            if warning not in warnings:
                warnings.append(warning)
        for op, n in result.unknown_opcodes.items():
            unknown[op] = unknown.get(op, 0) + n
    if len(results) == 1:
        only = results[0]
        return attrs.evolve(only, warnings=warnings, notes=notes, wall_seconds=time.perf_counter() - started)
    records = []
    for r in results:
        record = r.to_dict()
        for key in ("arch", "scheduler", "simt", "seed", "warnings", "notes"):
            record.pop(key)
        records.append(record)
    return RunResult(kernel=str(path), arch=spec.name, scheduler=options["scheduler"], simt=options["simt"],
                     seed=options["seed"], params={}, launch={"kernels": len(results)},
                     metrics=combine_metrics([r.metrics for r in results]),
                     wall_seconds=time.perf_counter() - started, warnings=warnings, notes=notes,
                     unknown_opcodes=dict(sorted(unknown.items(), key=lambda kv: (-kv[1], kv[0]))), kernels=records)
