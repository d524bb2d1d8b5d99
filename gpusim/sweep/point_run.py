"""One point of a sweep, simulated: its arch spec, workload parameters and run options made from the point's values,
the run (gpusim.api.run) and its row (the metrics asked for, the theoretical occupancy and what limits it, the
error or '', the wall time). Runs in a worker (a forked process, a Dask worker) or in the sweep's process.
"""

from __future__ import annotations

import math
import re
import time

from ..analytic.occupancy import occupancy
from ..api import load_kernel, run
from ..arch import load_arch
from ..errors import GpusimError, one_line
from ..options import RunOptions, variables
from ..sampling import parallel
from .points import ERROR, LIMITER, OCCUPANCY, WALL, evolve_arch, kind, plain_value


def run_point(task: dict) -> dict:
    """One point, simulated: the row (its varied values, the metrics, the theoretical occupancy and its limiter,
    the error or '', the wall time). Runs in a worker (a forked process, a Dask worker) or in this process."""
    started = time.perf_counter()
    if task.get("nested_jobs"):  # a pool's worker: the cores are shared out already
        parallel.limit_jobs(task["nested_jobs"])
    row: dict = dict(task["values"])
    row.update({m: None for m in task["metrics"]})
    row[OCCUPANCY], row[LIMITER], row[ERROR] = None, "", ""
    spec = params = options = None
    try:
        spec, params, options = prepare_point(task)
        result = run(task["workload"], spec, options, params=params or None)
        metrics = result.metrics
        for m in task["metrics"]:
            row[m] = plain_value(metrics.get(m))
        row[OCCUPANCY] = plain_value(metrics.get(OCCUPANCY))
        launch = result.launch
        row[LIMITER] = _limiter(spec, launch["threads_per_block"], launch["registers_per_thread"],
                                launch["shared_memory_bytes"] + launch["dynamic_shared_memory_bytes"],
                                launch.get("carveout", options.carveout))
        if result.partial:  # (only an interrupted run is partial; a sweep's are not interrupted)
            row[ERROR] = "the run stopped early: partial metrics"
        elif result.violations:  # (gpusim.stats.invariants) not an answer: the row says so
            row[ERROR] = one_line("physical limit broken: " + "; ".join(result.violations))
    except GpusimError as exc:
        row[ERROR] = one_line(str(exc))
        if "cannot be resident" in row[ERROR] and spec is not None and options is not None:
            row[OCCUPANCY], row[LIMITER] = _unresident(task["workload"], spec, params, options)  # 0%, and why
    except Exception as exc:  # a bug, not the input: still one row, and the sweep goes on
        row[ERROR] = one_line(f"internal error: {type(exc).__name__}: {exc}")
    row[WALL] = round(time.perf_counter() - started, 3)
    return {c: row.get(c) for c in task["columns"]}


_DIMS = re.compile(r"\d+(x\d+){1,2}")


def prepare_point(task: dict) -> tuple:
    """(the point's arch spec, workload parameters, RunOptions): the sweep's, with the point's values."""
    options: RunOptions = task["options"]
    params = dict(task["params"])
    arch = task["arch"]
    fields, changes = {}, {}
    for name, value in task["values"].items():
        what = kind(name)
        if what == "option":
            if name in ("launch.threads", "launch.grid") and isinstance(value, str) and _DIMS.fullmatch(value):
                value = tuple(int(v) for v in value.split("x"))  # 16x16: two dimensions
            changes[variables()[name]] = value
        elif what == "arch":
            arch = value
        elif what == "arch_field":
            fields[name[len("arch."):]] = value
        else:
            params[name] = value
    if isinstance(arch, str) and arch in task.get("archs", {}):
        arch = task["archs"][arch]  # loaded once by the parent: the workers need no arch files
    spec = evolve_arch(load_arch(arch), fields)
    return spec, params, options.replace(**changes) if changes else options


def _limiter(spec, threads: int, regs: int, smem: int, carveout) -> str:
    try:
        return "+".join(occupancy(spec, threads, regs, smem, carveout).limiters)
    except (TypeError, ValueError):
        return ""


def _unresident(workload: str, spec, params: dict, options: RunOptions) -> tuple[float | None, str]:
    """(0.0, the limiting resource) for a launch that cannot be resident, from the workload's launch and the
    point's overrides; (None, '') where that cannot be worked out."""
    try:
        launch = load_kernel(workload, params or None, options.seed).launch
        threads = options.threads
        threads = launch.threads_per_block if threads is None else math.prod(threads) \
            if isinstance(threads, tuple) else threads
        regs = options.regs or launch.registers_per_thread
        smem = (launch.shared_memory_bytes if options.smem is None else options.smem) + \
            (launch.dynamic_shared_memory_bytes if options.dynamic_smem is None else options.dynamic_smem)
        carveout = options.carveout if options.carveout is not None else getattr(launch, "carveout", None)
        limiter = _limiter(spec, threads, regs, smem, carveout)
    except Exception:  # (the error row stands without it)
        return None, ""
    return (0.0, limiter) if limiter else (None, "")


__all__ = ["prepare_point", "run_point"]
