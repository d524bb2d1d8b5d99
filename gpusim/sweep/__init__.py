"""`gpusim sweep`: the same simulation (gpusim.api.run) at every point of a Cartesian product of variations.

    gpusim.sweep("workloads/gemm_tile128.yaml", arch="h100", vary={"launch.regs": "32:255:32", "STAGES": [1, 2, 4]})

A variation names what it varies without ambiguity:

* a run option's name (gpusim.options.variables(): `scheduler`, `simt`, `sample`, `sample_trips`, `sync_window`, and
  the launch overrides as `launch.threads`, `launch.regs`, `launch.smem`, `launch.dynamic_smem`, `launch.carveout`,
  `launch.grid`); `arch`: an architecture name or file;
* `arch.<field path>` (`arch.sm.registers`, `arch.memory.l2.size_bytes`): a hardware what-if, the arch rebuilt with
  attrs.evolve along the path and checked by the spec's own validators;
* any other name: a workload parameter (as `--set NAME=VALUE`).

Points are independent simulations, each seeded alike, so the rows are the same whatever runs them: one process,
a pool of forked processes (the default) or a Dask cluster (`executor="dask"`). A point that fails is a row with
its error; the sweep goes on. Rows are written to the output as they finish, in point order; Ctrl-C keeps every
finished row, and `resume` skips the points already there.

The package: `points` (variations and what-ifs), `point_run` (one point simulated), `executors` (this process, the
process pool, Dask), `output` (the file, --resume, the rows returned), `plots` (pictures and the table).
(`gpusim.sweep` is this package's `sweep` function; where the package was imported first, the module object stands
in that place, and calling it calls `sweep`.)
"""

from __future__ import annotations

import difflib
import math
import re
import sys
import types
from pathlib import Path

from ..api import load_kernel, reject_trace_params
from ..arch import ArchSpec, load_arch
from ..errors import GpusimError, shorten, shown
from ..interrupt import Interrupt
from ..options import MEMORY_MODELS, RunOptions, make_options
from ..report.progress import PointsProgress, Silent
from ..sampling.parallel import default_jobs
from ..stats.declared import METRICS as DECLARED
from ..trace import is_command_list, is_trace
from ..workload.kernel import check_override
from .executors import JOBS_PER_CORE, check_jobs, dask_rows, max_jobs, pool_rows, serial_rows
from .output import FORMATS, Output, SweepRows, columns_of, resumed_rows
from .plots import axis_label, metric_unit, plot_sweep, print_rows
from .point_run import run_point
from .points import (DEFAULT_METRICS, ERROR, LIMITER, MAX_POINTS, OCCUPANCY, WALL, SweepInterrupted,
                     check_names, evolve_arch, kind, parse_values, parse_vary, points, values_of)


def sweep(workload, arch, vary: dict | None = None, options: RunOptions | None = None, *, jobs: int | None = None,
          metrics=None, executor: str = "pool", dask_scheduler: str | None = None, out=None, resume: bool = False,
          plot=None, progress: bool = False, params: dict | None = None, on_plot=None, **overrides) -> SweepRows:
    """Simulate `workload` on `arch` at every point of the Cartesian product of `vary` ({name: values}: values a
    list, one value, or a SPEC string 'a,b,c' / 'start:stop:step'; names as this package's docstring lists them)
    and return the rows (SweepRows: a list of dicts, one per point in point order, the first variation slowest;
    `.to_pandas()` for a DataFrame). Columns: the varied values, `metrics` (default DEFAULT_METRICS), the
    theoretical occupancy (OCCUPANCY) and its limiter, `error` ('' or why the point failed) and `wall_s`.

    `jobs` (default: the cores this process may use; at most JOBS_PER_CORE x the machine's cores, and never more
    workers than points to run) processes run the points (`executor="pool"`), or a Dask cluster does
    (`executor="dask"`, `dask_scheduler` 'tcp://HOST:PORT' or 'local'). `out` (.csv, .json, .parquet) gets the rows
    as they finish; `resume=True` keeps the finished rows already in `out` (matched by value: 32 and 32.0 alike)
    and runs the rest, the points of rows cut short or without finite metrics or an error included.
    `plot`: a directory for one PNG per metric against each varied axis. `progress`: a bar (or lines) on stderr.
    `options` (a gpusim.RunOptions; None: the defaults) with `overrides` (its fields by name, as gpusim.run takes
    them) and `params` (workload parameters) apply at every point; a varied name wins over them.
    Ctrl-C stops the workers and raises SweepInterrupted (a KeyboardInterrupt) once the finished rows are written.
    """
    options = make_options(options, overrides, "sweep")
    if not isinstance(workload, (str, Path)):
        raise GpusimError(f"workload {shown(workload, 40)}: expected a path (a workload .yaml, a trace or a "
                          f"kernelslist.g): each point loads it with its own parameters")
    if not Path(workload).exists():
        raise GpusimError(f"{workload}: no such file")
    if executor not in ("pool", "dask"):
        raise GpusimError(f"--executor {shown(executor, 40)}: expected pool or dask")
    if dask_scheduler is not None and executor != "dask":
        raise GpusimError("--dask-scheduler: only with --executor dask")
    if executor == "dask":
        dask_scheduler = dask_scheduler or "local"
        if dask_scheduler != "local" and not re.fullmatch(r"(tcp|tls|ws|wss|inproc|ucx)://\S+", dask_scheduler):
            raise GpusimError(f"--dask-scheduler {shown(dask_scheduler, 60)}: expected tcp://HOST:PORT or local")
        try:  # (before the output file is started)
            import dask.distributed  # noqa: F401
        except ImportError:
            raise GpusimError('--executor dask needs dask.distributed: pip install "gpusim[cluster]"') from None
    if options.memory not in MEMORY_MODELS:
        raise GpusimError(f"--memory {shown(options.memory, 40)}: a sweep takes {' or '.join(MEMORY_MODELS)}")
    if jobs is not None:
        check_jobs(jobs)
    metrics = list(DEFAULT_METRICS if metrics is None else
                   [m.strip() for m in metrics.split(",")] if isinstance(metrics, str) else metrics)
    if not all(isinstance(m, str) and m for m in metrics) or len(set(metrics)) != len(metrics):
        raise GpusimError(f"--metrics {shorten(metrics, 80)}: expected distinct metric names (a,b,c)")
    unknown = [m for m in metrics if m not in DECLARED]
    if unknown:  # (every metric a record can hold is declared, with its unit: gpusim.stats.declared)
        close = difflib.get_close_matches(unknown[0], list(DECLARED), n=1)
        raise GpusimError(f"--metrics {shown(unknown[0], 80)}: not a metric gpusim records"
                          + (f" (did you mean {close[0]}?)" if close else " (gpusim run --json - lists them)"))
    vary = {name: values_of(name, values) for name, values in (vary or {}).items()}
    product = math.prod(len(v) for v in vary.values())
    if product > MAX_POINTS:
        raise GpusimError(f"--vary: {product:,} points; a sweep takes at most {MAX_POINTS:,}")
    params = dict(params or {})
    if not isinstance(params, dict):
        raise GpusimError(f"params {shorten(params, 40)}: expected a mapping of parameter names to numbers")
    for name, value in params.items():
        check_override(name, value)
    base = load_arch(arch)  # a bad --arch is the whole sweep's error, before anything runs
    traced = is_trace(workload) or is_command_list(workload)
    if traced:
        reject_trace_params(workload, params)
    kernel = None if traced else load_kernel(str(workload), params, options.seed)
    check_names(vary, workload, None if kernel is None else kernel.params)
    archs = {}  # the varied arch values the parent could load (the others fail in their rows)
    if "arch" in vary:
        for value in vary["arch"]:
            try:
                archs[value.name if isinstance(value, ArchSpec) else str(value)] = load_arch(value)
            except GpusimError:
                pass
        vary["arch"] = [v.name if isinstance(v, ArchSpec) else v for v in vary["arch"]]  # a row holds the name
    columns = columns_of(list(vary), metrics)
    tasks = [{"index": i, "values": point, "workload": str(Path(workload).resolve()), "arch": base,
              "archs": archs, "options": options, "params": params, "metrics": metrics, "columns": columns}
             for i, point in enumerate(points(vary))]

    output = Output(out, columns) if out is not None else None
    done: dict[int, dict] = {}
    if output is not None and resume:
        done = resumed_rows(output, tasks, list(vary), metrics + [OCCUPANCY])
    todo = [t for t in tasks if t["index"] not in done]
    if output is not None:
        output.start([done[i] for i in sorted(done)])
    jobs = min(default_jobs(len(todo)) if jobs is None else jobs, max(1, len(todo)))  # no idle workers
    if not todo:
        results = iter(())
    elif executor == "dask":
        results = dask_rows(todo, jobs, dask_scheduler)
    elif jobs <= 1 or len(todo) <= 1:
        results = serial_rows(todo)
    else:
        results = pool_rows(todo, jobs)
    bar = PointsProgress(len(tasks), len(done)) if progress else Silent()
    finished: dict[int, dict] = {}
    order, next_todo = [t["index"] for t in todo], 0
    with Interrupt() as ctrl_c:
        try:
            try:
                for i, row in results:
                    if i is not None:
                        finished[i] = row
                        ready = []
                        while next_todo < len(order) and order[next_todo] in finished:
                            ready.append(finished[order[next_todo]])
                            next_todo += 1
                        if ready and output is not None:
                            ctrl_c.write(lambda: output.add(ready))
                    bar.advance(row if i is not None else None)
            finally:
                bar.stop()
                close = getattr(results, "close", None)
                if close is not None:
                    close()
        except KeyboardInterrupt:
            # every finished row is kept: those waiting for an earlier point go in after the others
            late = [finished[i] for i in order[next_todo:] if i in finished]
            if output is not None:
                output.add(late, final=True)
            kept = {**done, **finished}
            raise SweepInterrupted([kept[i] for i in sorted(kept)], len(tasks),
                                   None if out is None else str(out)) from None
        rows = [done[i] if i in done else finished[i] for i in range(len(tasks))]
        if output is not None:
            ctrl_c.write(lambda: output.finish(rows if resume else None))
    if plot is not None:
        label = kernel.name if kernel is not None else Path(workload).name
        paths = plot_sweep(rows, vary, metrics, label, base.name, plot)
        if on_plot is not None:
            on_plot(paths)
    return SweepRows(rows, columns)


class _CallableModule(types.ModuleType):
    """This package, callable as its `sweep` (the package exports `gpusim.sweep`; importing the subpackage puts
    the module in that place)."""

    def __call__(self, *args, **kwargs):
        return sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["DEFAULT_METRICS", "ERROR", "FORMATS", "JOBS_PER_CORE", "LIMITER", "OCCUPANCY", "WALL", "Output",
           "SweepInterrupted", "SweepRows", "axis_label", "check_jobs", "columns_of", "evolve_arch", "kind",
           "max_jobs", "metric_unit", "parse_values", "parse_vary", "plot_sweep", "points", "print_rows", "run_point",
           "sweep"]
