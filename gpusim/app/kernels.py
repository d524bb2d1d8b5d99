"""Kernel results for applications: each kernel simulated cycle by cycle once per distinct input, and kept.

`kernel_result(workload, params, spec, options, cache)` returns a `KernelResult` (the kernel's duration, cycles,
DRAM bytes, FLOP, busiest unit, blocks and its whole metrics record). The input is the workload file's bytes, the
parameters, the architecture spec's every value, the run options (the SM count included) and the gpusim version:
their sha256 is the key of a JSON file in a `KernelCache` directory (default `$GPUSIM_CACHE`, else
`~/.cache/gpusim/kernels`). The same input gives the same result (the engine is deterministic), so a kernel found
there is not simulated again: eighty identical layers of a model simulate once.

`launch_demand` says, without simulating, how many blocks a kernel has and how many of them one SM holds at once.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from pathlib import Path

import attrs

from ..analytic.occupancy import occupancy
from ..arch import load_arch
from ..api import load_kernel, reject_trace_params, run
from ..errors import GpusimError, shorten, shown
from ..options import RunOptions
from ..stats.invariants import busiest_unit
from ..trace import is_trace
from ..version import __version__
from ..workload.overrides import apply_launch_overrides
from .format import find_workload

CACHE_ENV = "GPUSIM_CACHE"
CACHE_FORMAT = 1  # bumped when a cached file's layout changes (old files are then simulated again)


@attrs.frozen
class KernelResult:
    """One kernel's simulated run on `sms` SMs, as an application uses it."""
    name: str  # the kernel's name (from the workload or the trace)
    workload: str  # the workload file
    params: dict  # the parameters in effect (the workload's defaults with those given)
    arch: str
    sms: int  # SMs simulated
    seconds: float  # the kernel's duration (gpu__time_duration.sum)
    cycles: int  # gpu_sim_cycle
    dram_bytes: int  # dram__bytes.sum
    flop: float  # FP32 and tensor FLOP (gpusim__fp32_flop.sum + gpusim__tensor_flop.sum; 0 where absent)
    bound: str  # the busiest unit (gpusim.stats.invariants.busiest_unit), "latency" when none is 60% busy
    bound_pct: float  # that unit's percent of its peak
    blocks: int  # blocks in the grid
    warnings: list = attrs.field(factory=list)  # the run's warnings and any physical limit it breaks
    metrics: dict = attrs.field(factory=dict, repr=False)  # the run's whole metrics record (Nsight names)

    def to_dict(self) -> dict:
        return attrs.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> KernelResult:
        return cls(**{f.name: data[f.name] for f in attrs.fields(cls)})


@attrs.frozen
class LaunchDemand:
    """What a kernel asks of a GPU before it runs: its blocks, the blocks one SM holds, the SMs it can use."""
    name: str
    blocks: int
    blocks_per_sm: int

    def sms_wanted(self, sms: int) -> int:
        """SMs the grid fills in its first wave, at most `sms`: ceil(blocks / blocks per SM)."""
        return max(1, min(sms, math.ceil(self.blocks / self.blocks_per_sm)))


def default_cache_dir() -> Path:
    """$GPUSIM_CACHE, else ~/.cache/gpusim/kernels."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "gpusim" / "kernels"


class KernelCache:
    """A directory of kernel results, one JSON file per key (`<sha256>.json`); `path` None: default_cache_dir().
    `hits` and `stored` count what this object found and wrote. A file that cannot be read is simulated again; a
    directory that cannot be written is noted once in `problems`, and the run goes on without it."""

    def __init__(self, path: Path | str | None = None):
        self.path = Path(path) if path is not None else default_cache_dir()
        self.hits = 0
        self.stored = 0
        self.problems: list[str] = []

    def file(self, key: str) -> Path:
        return self.path / f"{key}.json"

    def get(self, key: str) -> KernelResult | None:
        try:
            data = json.loads(self.file(key).read_text(encoding="utf-8"))
            if data.get("format") != CACHE_FORMAT or data.get("key") != key:
                return None
            result = KernelResult.from_dict(data["result"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        self.hits += 1
        return result

    def put(self, key: str, result: KernelResult) -> None:
        try:
            text = json.dumps({"format": CACHE_FORMAT, "key": key, "gpusim": __version__,
                               "result": result.to_dict()}, allow_nan=False)
        except ValueError:  # a non-finite metric: JSON cannot hold it, so this result is not kept
            return
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=self.path, prefix=".", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(temporary, self.file(key))  # whole or not at all, whoever else writes the same key
            self.stored += 1
        except (OSError, ValueError) as exc:
            if not self.problems:
                self.problems.append(f"kernel cache {shown(self.path, 60)}: cannot write "
                                     f"({getattr(exc, 'strerror', None) or exc}); results not kept")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _spec_digest(spec) -> str:
    return _digest(json.dumps(attrs.asdict(spec), sort_keys=True, default=str).encode())


def kernel_key(workload: str | Path, params: dict, spec, options: RunOptions) -> str:
    """The sha256 naming a kernel's result: of the workload file's bytes, the parameters, every value of the arch
    spec, the run options and the gpusim version."""
    try:
        content = Path(workload).read_bytes()
    except OSError as exc:
        raise GpusimError(f"{shown(workload, 80)}: cannot read ({exc.strerror or exc})") from None
    identity = {"workload": _digest(content), "params": params, "arch": _spec_digest(spec),
                "options": options.record(), "gpusim": __version__}
    return _digest(json.dumps(identity, sort_keys=True, default=str).encode())


def launch_demand(workload: str | Path, params: dict, spec, options: RunOptions) -> LaunchDemand:
    """The kernel's blocks and the blocks one SM holds (CUDA's occupancy, after the options' launch overrides)."""
    if is_trace(workload):
        reject_trace_params(workload, params)
    kernel = apply_launch_overrides(load_kernel(Path(workload), params, options.seed), spec, options.launch)
    launch = kernel.launch
    try:
        occ = occupancy(spec, launch.threads_per_block, launch.registers_per_thread, launch.smem_per_block,
                        launch.carveout)
    except ValueError as exc:
        raise GpusimError(f"{kernel.source}: launch: {exc}") from None
    if occ.blocks_per_sm == 0:
        raise GpusimError(f"{kernel.source}: the launch cannot be resident on {spec.name}: {occ.reason}")
    return LaunchDemand(kernel.name, launch.nblocks, occ.blocks_per_sm)


def simulate(workload: str | Path, params: dict, spec, options: RunOptions) -> KernelResult:
    """Run the kernel cycle by cycle (gpusim.run) and keep what an application needs."""
    result = run(Path(workload), spec, options, params=params or None)
    m = result.metrics
    bound, pct = busiest_unit(m)
    flop = float(m.get("gpusim__fp32_flop.sum", 0) + m.get("gpusim__tensor_flop.sum", 0))
    return KernelResult(name=result.kernel, workload=str(workload), params=dict(result.params), arch=spec.name,
                        sms=int(m["launch__sm_count"]), seconds=float(m["gpu__time_duration.sum"]),
                        cycles=int(m["gpu_sim_cycle"]), dram_bytes=int(m.get("dram__bytes.sum", 0)), flop=flop,
                        bound=bound, bound_pct=round(float(pct), 2), blocks=int(result.launch.get("blocks", 0)),
                        warnings=list(result.warnings) + [f"physical limit: {v}" for v in result.violations],
                        metrics=m)


def kernel_result(workload: str | Path, params: dict, spec, options: RunOptions,
                  cache: KernelCache | None) -> KernelResult:
    """The kernel's result on `spec` (an ArchSpec or an arch name) under `options` (its `sms` is the SM count
    simulated; None: all): from `cache` when it holds this input, else simulated (and stored there; `cache` None:
    simulated, not kept). `workload`: a path, or one relative to the top of the gpusim checkout
    (`workloads/vecadd.yaml`)."""
    if not isinstance(params, dict):
        raise GpusimError(f"params {shorten(params, 40)}: expected a mapping of parameter names to numbers")
    if not isinstance(options, RunOptions):
        raise GpusimError(f"options {shorten(options, 40)}: expected a gpusim.RunOptions")
    spec = load_arch(spec)
    found = find_workload(workload, Path.cwd())
    if found is None:
        raise GpusimError(f"workload {shorten(str(workload), 60)} not found")
    workload = found
    key = kernel_key(workload, params, spec, options) if cache is not None else None
    if key is not None:
        found = cache.get(key)
        if found is not None:
            return found
    result = simulate(workload, params, spec, options)
    if key is not None:
        cache.put(key, result)
    return result


__all__ = ["CACHE_ENV", "KernelCache", "KernelResult", "LaunchDemand", "default_cache_dir", "kernel_key",
           "kernel_result", "launch_demand", "simulate"]
