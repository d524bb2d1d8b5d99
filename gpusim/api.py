"""The library entry point the CLI and notebooks call: `gpusim.run(workload, arch, ...)`.

A workload is a YAML kernel, an Accel-Sim trace of one kernel (`.traceg`, `.traceg.xz`) or a trace directory's
command list (`kernelslist.g`: its kernels run one after another, each on a fresh GPU; memcpy lines are noted).
"""

from __future__ import annotations

import time
from pathlib import Path

import attrs
import numpy as np

from .arch import ArchSpec, clocked, load_arch
from .engine.gpu import build_gpu
from .errors import GpusimError, shorten, shown
from .isa.opcodes import refusal, unsupported_warning
from .options import (MAX_INSTRUCTIONS, RunOptions, make_options)
from .result import RunResult, launch_record
from .sampling.plan import MIN_FULL_WAVES_ALONE
from .sampling.sampled_run import (PREFLIGHT_STEPS, longer_trips, run_sampled, sampling_plan, sampling_unsettled,
                                   trace_waves)
from .stats.invariants import violations
from .stats.metrics import combine_metrics, kernel_metrics
from .trace import TraceKernel, is_command_list, is_trace, load_trace, read_command_list
from .trace.mix import stated_mix
from .workload import Kernel, WorkloadError, kernel_mix, load_workload
from .workload.expr import ExprError
from .workload.kernel import check_override
from .workload.overrides import LaunchOverrides, apply_launch_overrides
from .workload.program import program_infos

# Warp-instructions per second the engine simulates on a large kernel (every SM busy), for the time a run would
# take (what `auto` weighs a full run by, and what the notes say), by engine. Interpreted: measured 2026-12-01 on
# the 2-core development machine, about 37,000 for gemm_tile128 with 3 blocks on each of 132 SMs, 48,000 with
# the typed engine of 2026-12-02 (kept at 40,000: the slower machines' figure). Compiled (mypyc): the default
# 4096^3 gemm_tile128 in full on h100, 60,981,248 warp-instructions in 233 s, 262,000 a second (2026-12-04, the
# whole process, the other core busy part of the time); its reduced runs 220,000-290,000; earlier hosts ran the
# same commands up to twice as long, so 150,000.
ENGINE_RATES = {"compiled": 150_000, "interpreted": 40_000}
FALLBACK_SECONDS = 300  # `--sample auto` runs an unsettled kernel in full only when that takes about this at most


def engine_rate() -> int:
    """ENGINE_RATES's figure for the engine this process runs (gpusim.native.mode)."""
    from . import native

    return ENGINE_RATES["compiled" if native.mode.startswith("compiled") else "interpreted"]


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


def _duration(seconds: float) -> str:
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:,.0f} {unit}" if seconds >= 100 * size else f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def size_text(mix) -> str:
    """'[about ]N warp-instructions, about T to simulate at ~R warp-instructions/s' (R: engine_rate())."""
    total, rate = mix.total_warp_insts, engine_rate()
    return (f"{'about ' if mix.estimated else ''}{total:,} warp-instructions, about "
            f"{_duration(total / rate)} to simulate at ~{rate:,} warp-instructions/s")


def check_size(kernel: Kernel, max_instructions: int | None = MAX_INSTRUCTIONS):
    """The kernel's instruction mix, counted (or, past a budget of counting steps, estimated) without
    simulating; more than `max_instructions` warp-instructions, or loop trips (a loop may issue next to
    nothing), is refused in one line, before a run that could not finish."""
    mix = kernel_mix(kernel, steps=PREFLIGHT_STEPS)
    if max_instructions is None or max(mix.total_warp_insts, mix.trips) <= max_instructions:
        return mix
    what = size_text(mix) if mix.total_warp_insts > max_instructions else \
        f"its loops take {'about ' if mix.estimated else ''}{mix.trips:,} trips (issuing {mix.total_warp_insts:,} " \
        f"warp-instructions)"
    raise GpusimError(f"{kernel.source}: {shorten(kernel.name, 40)}: {what}; the limit is {max_instructions:,} "
                      f"(--max-instructions N / max_instructions=N raises it; --sample auto or on simulates a part and "
                      f"projects the rest where the kernel has a steady state)")


def run(workload: str | Path | Kernel, arch: str | ArchSpec, options: RunOptions | None = None, *,
        params: dict | None = None, observer=None, on_count=None, progress=None, interrupt=None,
        **overrides) -> RunResult:
    """Simulate a workload on one architecture and return its metrics.

    `options`: a gpusim.RunOptions (None: the defaults), with `overrides` (any of its fields by name:
    `sms=4, sample="off"`) applied; every option, its unit and range is listed there (and in the documentation's
    reference). `params`: the workload's parameters ({name: value}, as `--set`).
    Hooks: `observer` (gpusim.stats.observer.Observer) watches the simulation (plots, timelines, the
    per-instruction view); `on_count(mix)`, if given, hears a YAML kernel's instruction mix (counted, or
    estimated: `mix.estimated`) before it runs; a kernel of more than `max_instructions` warp-instructions is
    refused before it runs. `progress`, if given, hears how far the simulation is about 4 times a second and once
    at its end: a callable `progress(blocks_retired, cycle, warp_insts)`, or an object with that as `update` and
    optionally `start(kernel_name, blocks, warp_insts, estimated=...)` (warp_insts: the counted total, or None)
    and `stop()` (gpusim.report.progress.Progress draws a bar). `interrupt()`, if given, is asked every few
    milliseconds: when it returns True the simulation stops there and the result holds the metrics so far
    (`partial`, `interrupted`). Sampling (`sample`, `sample_trips`): see gpusim.sampling; the record's `sampling`
    says what was simulated and what projected."""
    options = make_options(options, overrides)
    if params is not None:
        if not isinstance(params, dict):
            raise GpusimError(f"params {shorten(params, 40)}: expected a mapping of parameter names to numbers")
        for name, value in params.items():
            check_override(name, value)
    if not isinstance(workload, (str, Path, Kernel, TraceKernel)):
        raise GpusimError(f"workload {shown(workload, 40)}: expected a path (a workload .yaml, a trace or a "
                          f"kernelslist.g) or a loaded kernel")
    if not isinstance(arch, (str, Path, ArchSpec)):
        raise GpusimError(f"--arch {shown(arch, 40)}: expected an architecture name, a path to a .yaml file "
                          f"or an ArchSpec")
    spec = clocked(load_arch(arch), options.clock)
    if progress is not None and not (callable(progress) or callable(getattr(progress, "update", None))):
        raise GpusimError(f"progress {shorten(progress, 40)}: expected a callable or an object with update()")
    if interrupt is not None and not callable(interrupt):
        raise GpusimError(f"interrupt {shorten(interrupt, 40)}: expected a callable")
    hooks = Hooks(observer=observer, on_count=on_count, progress=progress, interrupt=interrupt)
    if isinstance(workload, (str, Path)) and is_command_list(workload):
        reject_trace_params(workload, params)
        return _run_command_list(Path(workload), spec, options, hooks)
    overrides_in_effect = options.launch
    kernel = apply_launch_overrides(load_kernel(workload, params, options.seed), spec, overrides_in_effect)
    return _with_overrides(overrides_in_effect, simulate_kernel, kernel, spec, options, hooks)


@attrs.frozen
class Hooks:
    """What a run calls back while it runs (see run): none of them changes its result."""
    observer: object = None
    on_count: object = None
    progress: object = None
    interrupt: object = None


def _with_overrides(overrides: LaunchOverrides, fn, *args, **kwargs):
    """fn(*args, **kwargs); a workload error while it runs (an address outside the buffers, say) names the launch
    overrides in effect, if any."""
    try:
        return fn(*args, **kwargs)
    except (WorkloadError, ExprError) as exc:
        if not overrides:
            raise
        raise type(exc)(f"with {overrides.text()}: {exc}") from None


def simulate_kernel(kernel, spec, options: RunOptions, hooks: Hooks | None = None, *, block_limit=None, stagger=0,
                    shadow_l2=0, warm_l2=None) -> RunResult:
    """One loaded kernel (a Kernel or a TraceKernel, launch overrides applied) on `spec` under `options`, with
    `hooks` (see run): in full, or sampled. A sampled run's reduced runs are this function again, with
    `block_limit` blocks, their first blocks' start spread over `stagger` cycles, a shadow L2 of `shadow_l2` bytes
    and an L2 warmed to `warm_l2` dirty (see gpusim.sampling)."""
    hooks = Hooks() if hooks is None else hooks
    scheduler, simt, sms, memory = options.scheduler, options.simt, options.sms, options.memory
    sample, sample_trips, max_instructions = options.sample, options.sample_trips, options.max_instructions
    observer, progress, interrupt = hooks.observer, hooks.progress, hooks.interrupt
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
        stream_factory = kernel.streams()  # the YAML kernel's own (gpusim.workload.stream.BlockStreams)
    if not traced:  # instructions the part does not have (cp.async, TMA, wgmma): refused before it runs
        refused = refusal(program_infos(kernel.program), spec.name, spec.compute_capability)
        if refused:
            raise GpusimError(f"{kernel.source}: {refused}")
    gpu = build_gpu(spec, kernel, scheduler=scheduler, sms=sms, memory=memory, observer=observer,
                    stream_factory=stream_factory, block_limit=block_limit, stagger=stagger,
                    sync_window=options.sync_window)
    if shadow_l2 and hasattr(gpu.memory, "use_shadow_l2"):  # a sampled run's (see sampling.reuse)
        gpu.memory.use_shadow_l2(shadow_l2)
    if warm_l2 is not None and hasattr(gpu.memory, "warm_l2"):  # a sampled run's (see sampling.warm)
        gpu.memory.warm_l2(float(warm_l2))
    if block_limit is not None and hasattr(gpu.memory, "count_recent_fills"):  # a reduced run's: the L2 hits
        gpu.memory.count_recent_fills(stagger)  # that could be merges at full size (sampling.runner's L2 error)
    mix = None
    if not traced and block_limit is None:
        mix = check_size(kernel, max_instructions if sample == "off" else None)
        if hooks.on_count is not None:
            hooks.on_count(mix)
    if block_limit is None and sample != "off":
        if traced and trace_waves(kernel, gpu) >= MIN_FULL_WAVES_ALONE:  # (the counts the trace states: no
            mix = stated_mix(kernel)  # decoding pass, which would cost a third of simulating it)
        plan = sampling_plan(kernel, gpu, mix, sample, sample_trips)
        simulated = sum(p.warp_insts for p in plan.points)
        if plan.sampled and max_instructions is not None and simulated > max_instructions:
            raise GpusimError(f"{kernel.source}: {shorten(kernel.name, 40)}: sampled ({plan.method}), its reduced "
                              f"runs still take {simulated:,} warp-instructions; the limit is {max_instructions:,} "
                              f"(--max-instructions N / max_instructions=N raises it)")
        if plan.sampled:
            reduced_options = options.replace(max_instructions=None, sample="off", sample_trips=None)

            def simulate(reduced_kernel, *, observer=None, progress=None, interrupt=None, **run) -> RunResult:
                hooks = Hooks(observer=observer, progress=progress, interrupt=interrupt)
                return simulate_kernel(reduced_kernel, spec, reduced_options, hooks, **run)

            result = run_sampled(kernel, spec, plan, mix, started, list(warnings), options, simulate,
                                 progress=progress, interrupt=interrupt, observer=observer,
                                 refine=sample == "auto" and sample_trips is None)
            if result.partial:
                return result
            unsettled = sampling_unsettled(result.sampling)
            broken = "; ".join(result.violations)
            why = f"the projection breaks a physical limit ({broken})" if broken else unsettled
            if sample == "on" and sample_trips is None and not broken or not why:
                return result
            if sample == "on" and sample_trips is None:  # asked for: reported with the limits it breaks
                return attrs.evolve(result, warnings=result.warnings + [f"--sample on: {why}"])
            total = mix.total_warp_insts if mix is not None else 0
            if sample_trips is not None or total > FALLBACK_SECONDS * engine_rate():  # keep it (asked for, or a
                # full run would take too long to make instead), saying so
                how = f"--sample-trips {sample_trips}" if sample_trips is not None else "--sample auto"
                note = (f"{how}: {why}, so the projection may be off by more than its estimate "
                        f"({result.sampling.get('error_estimate_pct', 0):.1f}%); a full run (--sample off) would "
                        f"simulate {total:,} warp-instructions, about {_duration(total / engine_rate())}"
                        f"{longer_trips(result.sampling) if not broken else ''}")
                result.sampling["unsettled"] = why
                return attrs.evolve(result, warnings=result.warnings + [note])
            full = simulate_kernel(kernel, spec, options.replace(sample="off", sample_trips=None),
                               attrs.evolve(hooks, on_count=None))
            note = f"--sample auto: {why}; simulated in full"
            return attrs.evolve(full, warnings=full.warnings + [note],
                                sampling={"method": "full", "detail": note, "rejected_sample": result.sampling},
                                wall_seconds=time.perf_counter() - started)
        if not traced and max_instructions is not None:
            check_size(kernel, max_instructions)  # a kernel that cannot be sampled keeps the size limit
    update = _progress_start(progress, kernel, gpu, mix)
    try:
        with np.errstate(all="ignore"):  # expressions' float overflow: an inf or NaN the streams refuse, not a warning
            cycles = gpu.run(progress=update, interrupt=interrupt)
    finally:
        if update is not progress:
            getattr(progress, "stop", lambda: None)()
    interrupted = None
    if gpu.interrupted:
        interrupted = {"cycle": cycles, "blocks_retired": gpu.progress()[0], "blocks": gpu.dispatcher.nblocks}
    unknown = {}
    if traced and block_limit is None:
        if interrupted is None:  # (a stopped run leaves the rest of the file unread)
            stream_factory.finish()
        warnings.extend(stream_factory.warnings())  # legal but odd lines, one per kind, with the first line
        unknown = dict(sorted(stream_factory.unknown.items(), key=lambda kv: (-kv[1], kv[0])))
    infos = stream_factory.known_infos() if traced else program_infos(kernel.program)
    warning = unsupported_warning(infos, spec.name, spec.compute_capability)
    if warning:
        warnings.append(warning)
    metrics = kernel_metrics(gpu, cycles)
    return RunResult(violations=violations(metrics, spec) if block_limit is None else [],
                     kernel=kernel.name, arch=spec.name, scheduler=scheduler,
                     simt="trace" if traced else simt,  # a trace replays the order its warps executed
                     seed=options.seed, params=dict(kernel.params), launch=launch_record(kernel), metrics=metrics,
                     wall_seconds=time.perf_counter() - started, warnings=warnings, unknown_opcodes=unknown,
                     sampling=_reduced_run_record(gpu.dispatcher) if block_limit is not None else
                     {"method": "full", "detail": plan.reason if sample != "off" else "--sample off"},
                     partial=interrupted is not None, interrupted=interrupted, sync_window=gpu.sync_window,
                     options=options.record())


def _reduced_run_record(dispatcher) -> dict:
    """A reduced run's (a sampled run's part) word on its start: whether the blocks placed at the launch all ran at
    once (see Dispatcher.launch_at_once), with the cycles that decide it."""
    return {"method": "reduced run", "launch_at_once": dispatcher.launch_at_once(),
            "launch_last_start": dispatcher.launch_last_start, "first_retirement": dispatcher.first_retirement}


def _progress_start(progress, kernel, gpu, mix):
    """What GPU.run calls with the progress: `progress` itself, or an object's update() once its start() heard
    the kernel's name, its blocks and its counted warp-instructions (None where not counted: traces)."""
    update = getattr(progress, "update", None)
    if progress is None or not callable(update):
        return progress
    start = getattr(progress, "start", None)
    if callable(start):
        start(kernel.name, gpu.dispatcher.nblocks, None if mix is None else mix.total_warp_insts,
              estimated=mix is not None and bool(mix.estimated))
    return update


def _skipped_copies(path: Path, commands) -> list[str]:
    """The note on a command list's memcpy (and memset) lines, which are not simulated: none without them, else
    one line however many there are (the kinds, the count and where the first is)."""
    copies = [c for c in commands if c.kernel is None]
    if not copies:
        return []
    kinds: list[str] = []
    for command in copies:
        kind = shorten(command.text.split(",")[0].strip(), 30).strip("'\"")
        if kind not in kinds:
            kinds.append(kind)
    named = "/".join(kinds[:4]) + ("/..." if len(kinds) > 4 else "")
    if len(copies) == 1:
        return [f"{path}:{copies[0].line}: {named} skipped (host-device copies are not simulated)"]
    return [f"{path}: {len(copies):,} {named} lines skipped (host-device copies are not simulated); the first at "
            f"line {copies[0].line}"]


def _run_command_list(path: Path, spec, options: RunOptions, hooks: Hooks) -> RunResult:
    """Every kernel the list names, in order, each on a fresh GPU (cold caches); totals in `metrics`."""
    started = time.perf_counter()
    commands = read_command_list(path)
    results, warnings, unknown = [], [], {}
    notes = _skipped_copies(path, commands)
    for command in commands:
        if command.kernel is None:
            continue
        kernel = apply_launch_overrides(load_trace(command.kernel), spec, options.launch)
        result = simulate_kernel(kernel, spec, options, hooks)  # (a trace's size is its file's)
        results.append(result)
        for warning in result.warnings:  # once each (kernels of one binary share their opcode warnings)
            if warning not in warnings:
                warnings.append(warning)
        for op, n in result.unknown_opcodes.items():
            unknown[op] = unknown.get(op, 0) + n
        if result.partial:  # interrupted: the kernels after it do not run
            break
    kernels = sum(c.kernel is not None for c in commands)
    if len(results) == 1 and kernels == 1:
        only = results[0]
        return attrs.evolve(only, warnings=warnings, notes=notes, wall_seconds=time.perf_counter() - started)
    records = []
    for r in results:
        record = r.to_dict()
        for key in ("arch", "scheduler", "simt", "seed", "warnings", "notes", "options"):
            record.pop(key)
        records.append(record)
    return RunResult(kernel=str(path), arch=spec.name, scheduler=options.scheduler, simt=options.simt,
                     seed=options.seed, params={}, launch={"kernels": len(results)},
                     metrics=combine_metrics([r.metrics for r in results]),
                     wall_seconds=time.perf_counter() - started, warnings=warnings, notes=notes,
                     unknown_opcodes=dict(sorted(unknown.items(), key=lambda kv: (-kv[1], kv[0]))), kernels=records,
                     partial=results[-1].partial if results else False,
                     violations=[f"kernel {i + 1}: {v}" for i, r in enumerate(results) for v in r.violations],
                     sync_window=max((r.sync_window for r in results), default=options.sync_window),
                     options=options.record(),
                     interrupted=None if not results or results[-1].interrupted is None else
                     {"kernel": len(results), "kernels": kernels, **results[-1].interrupted})
