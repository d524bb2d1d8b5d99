"""The library entry point the CLI and notebooks call: `gpusim.run(workload, arch, ...)`.

A workload is a YAML kernel, an Accel-Sim trace of one kernel (`.traceg`, `.traceg.xz`) or a trace directory's
command list (`kernelslist.g`: its kernels run one after another, each on a fresh GPU; memcpy lines are noted).
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import simpy

from .arch import ArchSpec, load_arch
from .engine.gpu import build_gpu
from .engine.scheduler import DEFAULT_POLICY, policy_names
from .errors import GpusimError, shorten, shown
from .stats.invariants import speed_of_light, violations
from .stats.metrics import combine_metrics, kernel_metrics
from .trace import TraceKernel, is_command_list, is_trace, load_trace, read_command_list
from .workload import Kernel, WorkloadError, kernel_mix, load_workload
from .workload.expr import ExprError
from .workload.kernel import check_override
from .workload.overrides import LaunchOverrides, apply_launch_overrides, check_launch_overrides
from .isa.opcodes import refusal, unsupported_warning
from .sampling.plan import (MIN_FULL_WAVES_ALONE, SAMPLE_MODES, Plan, Point, extend_trips, hot_loops, make_plan,
                            midpoint_check, with_trips)
from .sampling.plan import check_sample_trips  # (run's and sweep's check of --sample-trips)
from .sampling import parallel
from .sampling.project import mib
from .sampling.reuse import reuse_estimate, shadow_capacity
from .sampling.runner import (INSTRUCTION_CHECK, pilot_point, point_key, point_kernel, project, ramp_only,
                              trips_spread)
from .sampling.warm import warm_plan
from .trace.mix import trace_mix
from .workload.program import program_infos

SIMT_MODES = ("stack", "its")
MEMORY_MODELS = ("hierarchy", "fixed")
SEED_MAX = 2**32 - 1
# A run refuses a kernel of more warp-instructions than this unless told otherwise (--max-instructions): at the
# engine's rate that is hours. The count is the instruction mix's (`gpusim workload show`), taken before simulating.
MAX_INSTRUCTIONS = 2_000_000_000
MAX_SYNC_WINDOW = 4096  # cycles, several DRAM round trips: a longer window only adds error (README)
# Warp-instructions per second the engine simulates on a large kernel (every SM busy), for the time a run would
# take (what `auto` weighs a full run by, and what the notes say), by engine. Interpreted: measured 2026-12-01 on
# the 2-core development machine, about 37,000 for gemm_tile128 with 3 blocks on each of 132 SMs, 48,000 with
# the typed engine of 2026-12-02 (kept at 40,000: the slower machines' figure). Compiled (mypyc): the default
# 4096^3 gemm_tile128 in full on h100, 60,981,248 warp-instructions in 233 s, 262,000 a second (2026-12-04, the
# whole process, the other core busy part of the time); its reduced runs 220,000-290,000; earlier hosts ran the
# same commands up to twice as long, so 150,000.
ENGINE_RATES = {"compiled": 150_000, "interpreted": 40_000}
FALLBACK_SECONDS = 300  # `--sample auto` runs an unsettled kernel in full only when that takes about this at most
PREFLIGHT_STEPS = 200_000  # counting steps the check spends at most (~0.1 s); beyond them it estimates


def engine_rate() -> int:
    """ENGINE_RATES's figure for the engine this process runs (gpusim.native.mode)."""
    from . import native

    return ENGINE_RATES["compiled" if native.mode.startswith("compiled") else "interpreted"]


def _plot_method(name: str):
    """A RunResult method drawing gpusim.report.run_plots.<name> of the run (imported when first drawn)."""
    def method(self, ax=None):
        from .report import run_plots
        return getattr(run_plots, name)(self, ax)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"gpusim.report.run_plots.{name} of this run on `ax` (a new figure when None); the Axes."
    return method


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
    sampling: dict | None = None  # what was simulated in detail and what projected (see gpusim.sampling)
    partial: bool = False  # stopped early (interrupt): the metrics are the counters at the cycle reached
    interrupted: dict | None = None  # for a partial run: {"cycle": N, "blocks_retired": k, "blocks": M}
    sync_window: int = 1  # cycles the SMs were stepped out of time order (1: exact; see gpusim.engine.gpu)
    per_instruction: list | None = None  # --per-inst: one object per static instruction (gpusim.stats.per_instruction)
    timeline: Any = attrs.field(default=None, eq=False, repr=False)  # what a recorder saw (plots; not in the record)
    # the physical limits the reported metrics break (gpusim.stats.invariants; one line each, empty: all hold)
    violations: list = attrs.field(factory=list)

    def to_dict(self) -> dict:
        """The JSON record (wall time left out, so identical runs give identical records)."""
        d = attrs.asdict(self)
        d.pop("wall_seconds")
        d.pop("timeline")
        if d["per_instruction"] is None:
            d.pop("per_instruction")
        if not d["kernels"]:
            d.pop("kernels")
        if d["sampling"] is None:
            d.pop("sampling")
        if d["interrupted"] is None:  # ("partial" is always there: false for a run that finished)
            d.pop("interrupted")
        return d

    # plots of the run on a matplotlib Axes (a new figure when ax is None), returned (gpusim.report.run_plots);
    # all but the warp states and the roofline need `timeline` (gpusim.stats.timeline.TimelineRecorder)
    plot_warp_states = _plot_method("plot_warp_states")
    plot_timeline = _plot_method("plot_timeline")
    plot_occupancy = _plot_method("plot_occupancy")
    plot_blocks = _plot_method("plot_blocks")
    plot_memory = _plot_method("plot_memory")
    plot_roofline = _plot_method("plot_roofline")


def _launch_record(kernel) -> dict:
    launch = kernel.launch
    return {"grid": list(launch.grid), "block": list(launch.block), "blocks": launch.nblocks,
            "threads_per_block": launch.threads_per_block, "registers_per_thread": launch.registers_per_thread,
            "shared_memory_bytes": launch.shared_memory_bytes,
            "dynamic_shared_memory_bytes": launch.dynamic_shared_memory_bytes,
            "carveout": launch.carveout}  # percent preferred for shared memory; None: chosen automatically


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


def _whole(value) -> bool:
    return type(value) is int or isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_sync_window(sync_window) -> None:
    """A synchronisation window is a whole number of cycles from 1 (exact) to MAX_SYNC_WINDOW."""
    if not _whole(sync_window) or not 1 <= sync_window <= MAX_SYNC_WINDOW:
        raise GpusimError(f"--sync-window {shown(sync_window, 40)}: expected a whole number of cycles from 1 (exact) "
                          f"to {MAX_SYNC_WINDOW}")


def check_options(*, scheduler, simt, sms, seed, memory, params, max_instructions) -> None:
    """The run options, checked as the command line checks them, with the same one-line messages."""
    if not isinstance(scheduler, str) or scheduler not in policy_names():
        raise GpusimError(f"unknown scheduler {shorten(scheduler, 40)}: expected one of "
                          f"{', '.join(policy_names())}")
    if not isinstance(simt, str) or simt not in SIMT_MODES:
        raise GpusimError(f"--simt {shown(simt, 40)}: expected one of {', '.join(SIMT_MODES)}")
    if sms is not None and not (_whole(sms) and sms >= 1):
        raise GpusimError(f"--sms {shown(sms, 40)}: expected an integer >= 1")
    if not (_whole(seed) and 0 <= seed <= SEED_MAX):
        raise GpusimError(f"--seed {shown(seed, 40)}: expected an integer from 0 to {SEED_MAX}")
    if isinstance(memory, str) or memory is None:
        if memory not in MEMORY_MODELS:
            raise GpusimError(f"--memory {shown(memory, 40)}: expected {' or '.join(MEMORY_MODELS)}")
    elif not (callable(getattr(memory, "access", None)) and callable(getattr(memory, "metrics", None))):
        raise GpusimError(f"--memory {shown(memory, 40)}: expected {' or '.join(MEMORY_MODELS)}, or a memory "
                          f"model (an object with access() and metrics())")
    if params is not None:
        if not isinstance(params, dict):
            raise GpusimError(f"params {shorten(params, 40)}: expected a mapping of parameter names to numbers")
        for name, value in params.items():
            check_override(name, value)
    if max_instructions is not None and not (_whole(max_instructions) and max_instructions >= 1):
        raise GpusimError(f"--max-instructions {shown(max_instructions, 40)}: expected an integer >= 1")


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


def run(workload: str | Path | Kernel, arch: str | ArchSpec, *, scheduler: str = DEFAULT_POLICY,
        simt: str = "stack",
        sms: int | None = None, params: dict | None = None, seed: int = 0, memory="hierarchy",
        observer=None, max_instructions: int | None = MAX_INSTRUCTIONS, on_count=None,
        sample: str = "auto", progress=None, interrupt=None, threads=None, regs: int | None = None,
        smem: int | None = None, dynamic_smem: int | None = None, carveout: int | None = None,
        grid=None, sync_window: int = 1, sample_trips: int | None = None) -> RunResult:
    """Simulate a workload on one architecture and return its metrics. `memory` is "hierarchy" (L1, L2, DRAM
    with latency and bandwidth), "fixed" (every access takes the L1-hit or shared latency) or a model object.
    A YAML kernel of more than `max_instructions` warp-instructions (None: no limit) is refused before it runs;
    `on_count(mix)`, if given, hears its instruction mix (counted, or estimated: `mix.estimated`) before.
    `sample`: "auto" (a kernel of more than AUTO_THRESHOLD warp-instructions is simulated in part and projected,
    see gpusim.sampling), "on" (sampled whatever its size, where it can be) or "off" (simulated in full).
    `sample_trips` N (None: chosen by the budget): the sampled runs' hot loop at N / 4, N / 2 and N trips (longer
    runs settle better, and cost more); sampled whatever the kernel's size, an error where its loop is not sampled.
    `progress`, if given, hears how far the simulation is about 4 times a second and once at its end: a callable
    `progress(blocks_retired, cycle, warp_insts)`, or an object with that as `update` and optionally
    `start(kernel_name, blocks, warp_insts, estimated=...)` (warp_insts: the counted total, or None) and `stop()`
    (gpusim.report.progress.Progress draws a bar). `interrupt()`, if given, is asked every few milliseconds: when
    it returns True the simulation stops there and the result holds the metrics so far (`partial`,
    `interrupted`).
    Launch overrides (None: as the workload says; see gpusim.workload.overrides for the rules): `threads` and
    `grid` an int or 1 to 3 ints (x, y, z), `regs` registers per thread, `smem` and `dynamic_smem` static and
    dynamic shared memory per block in bytes, `carveout` the percent of the unified L1/shared memory preferred
    for shared memory (it sets the resident blocks and the L1 capacity). The record's "launch" shows them.
    `sync_window`: 1 (exact) steps the SMs in time order; W > 1 lets each SM run up to W cycles ahead of the
    others, which is faster on many SMs and slightly off (README: lax synchronisation; the record's
    "sync_window" says what the run used: 1 for a launch with clusters)."""
    check_options(scheduler=scheduler, simt=simt, sms=sms, seed=seed, memory=memory, params=params,
                  max_instructions=max_instructions)
    overrides = check_launch_overrides(threads=threads, grid=grid, regs=regs, smem=smem, dynamic_smem=dynamic_smem,
                                       carveout=carveout)
    check_sync_window(sync_window)
    check_sample_trips(sample_trips, sample)
    seed, sms = int(seed), None if sms is None else int(sms)  # (numpy integers are accepted as plain ones)
    if not isinstance(workload, (str, Path, Kernel, TraceKernel)):
        raise GpusimError(f"workload {shown(workload, 40)}: expected a path (a workload .yaml, a trace or a "
                          f"kernelslist.g) or a loaded kernel")
    if not isinstance(arch, (str, Path, ArchSpec)):
        raise GpusimError(f"--arch {shown(arch, 40)}: expected an architecture name, a path to a .yaml file "
                          f"or an ArchSpec")
    spec = load_arch(arch)
    if sample not in SAMPLE_MODES:
        raise GpusimError(f"--sample {shown(sample, 40)}: expected {', '.join(SAMPLE_MODES)}")
    if progress is not None and not (callable(progress) or callable(getattr(progress, "update", None))):
        raise GpusimError(f"progress {shorten(progress, 40)}: expected a callable or an object with update()")
    if interrupt is not None and not callable(interrupt):
        raise GpusimError(f"interrupt {shorten(interrupt, 40)}: expected a callable")
    options = dict(scheduler=scheduler, simt=simt, sms=sms, seed=seed, memory=memory, observer=observer,
                   max_instructions=max_instructions, on_count=on_count, sample=sample, progress=progress,
                   interrupt=interrupt, sync_window=int(sync_window),
                   sample_trips=None if sample_trips is None else int(sample_trips))
    if isinstance(workload, (str, Path)) and is_command_list(workload):
        reject_trace_params(workload, params)
        return _run_command_list(Path(workload), spec, overrides, **options)
    kernel = apply_launch_overrides(load_kernel(workload, params, seed), spec, overrides)
    return _with_overrides(overrides, _run_kernel, kernel, spec, **options)


def _with_overrides(overrides: LaunchOverrides, fn, *args, **kwargs):
    """fn(*args, **kwargs); a workload error while it runs (an address outside the buffers, say) names the launch
    overrides in effect, if any."""
    try:
        return fn(*args, **kwargs)
    except (WorkloadError, ExprError) as exc:
        if not overrides:
            raise
        raise type(exc)(f"with {overrides.text()}: {exc}") from None


def _run_kernel(kernel, spec, *, scheduler, simt, sms, seed, memory, observer, max_instructions,
                on_count, sample="off", block_limit=None, progress=None, interrupt=None, stagger=0,
                shadow_l2=0, warm_l2=None, sync_window=1, sample_trips=None) -> RunResult:
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
    if not traced:  # instructions the part does not have (cp.async, TMA, wgmma): refused before it runs
        refused = refusal(program_infos(kernel.program), spec.name, spec.compute_capability)
        if refused:
            raise GpusimError(f"{kernel.source}: {refused}")
    env = simpy.Environment()
    gpu = build_gpu(spec, env, kernel, scheduler=scheduler, sms=sms, memory=memory, observer=observer,
                    stream_factory=stream_factory, block_limit=block_limit, stagger=stagger, sync_window=sync_window)
    if shadow_l2 and hasattr(gpu.memory, "use_shadow_l2"):  # a sampled run's (see sampling.reuse)
        gpu.memory.use_shadow_l2(shadow_l2)
    if warm_l2 is not None and hasattr(gpu.memory, "warm_l2"):  # a sampled run's (see sampling.warm)
        gpu.memory.warm_l2(float(warm_l2))
    mix = None
    if not traced and block_limit is None:
        mix = check_size(kernel, max_instructions if sample == "off" else None)
        if on_count is not None:
            on_count(mix)
    if block_limit is None and sample != "off":
        if traced and trace_waves(kernel, gpu) >= MIN_FULL_WAVES_ALONE:  # counting costs a third of simulating
            mix = trace_mix(kernel)[0]
        plan = sampling_plan(kernel, gpu, mix, sample, sample_trips)
        simulated = sum(p.warp_insts for p in plan.points)
        if plan.sampled and max_instructions is not None and simulated > max_instructions:
            raise GpusimError(f"{kernel.source}: {shorten(kernel.name, 40)}: sampled ({plan.method}), its reduced "
                              f"runs still take {simulated:,} warp-instructions; the limit is {max_instructions:,} "
                              f"(--max-instructions N / max_instructions=N raises it)")
        if plan.sampled:
            result = _run_sampled(kernel, spec, plan, mix, started, list(warnings), scheduler=scheduler, simt=simt,
                                  sms=sms, seed=seed, memory=memory, observer=observer, progress=progress,
                                  interrupt=interrupt, sync_window=sync_window,
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
                        f"{_longer_trips(result.sampling) if not broken else ''}")
                result.sampling["unsettled"] = why
                return attrs.evolve(result, warnings=result.warnings + [note])
            full = _run_kernel(kernel, spec, scheduler=scheduler, simt=simt, sms=sms, seed=seed, memory=memory,
                               observer=observer, max_instructions=max_instructions, on_count=None, sample="off",
                               progress=progress, interrupt=interrupt, sync_window=sync_window)
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
                     seed=seed, params=dict(kernel.params), launch=_launch_record(kernel), metrics=metrics,
                     wall_seconds=time.perf_counter() - started, warnings=warnings, unknown_opcodes=unknown,
                     sampling=_reduced_run_record(gpu.dispatcher) if block_limit is not None else
                     {"method": "full", "detail": plan.reason if sample != "off" else "--sample off"},
                     partial=interrupted is not None, interrupted=interrupted, sync_window=gpu.sync_window)


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


def trace_waves(kernel, gpu) -> int:
    """Full waves before the tail wave of `kernel`'s launch on `gpu`."""
    wave = gpu.occupancy.blocks_per_sm * len(gpu.sms)
    return (kernel.launch.nblocks - 1) // wave


def _longer_trips(record: dict) -> str:
    """The unsettled note's hint: the option that samples the loop at twice the trips, where the loop has them."""
    steady, trips = record.get("steady_state") or {}, record.get("loop_trips")
    runs = steady.get("trips")
    if not runs or not trips or 2 * runs[-1] > trips // 2:
        return ""
    longer = 2 * runs[-1]
    return (f"; --sample-trips {longer} samples the loop at {longer // 2} and {longer} trips instead (about twice "
            f"the simulation)")


def sampling_plan(kernel, gpu, mix, sample: str, sample_trips: int | None = None) -> Plan:
    """The runs that stand for `kernel` on `gpu` (see gpusim.sampling.plan); the hot loop's cost per trip
    count from the instruction mix of the kernel with that many trips; `sample_trips`: --sample-trips."""
    wave = gpu.occupancy.blocks_per_sm * len(gpu.sms)
    if isinstance(kernel, TraceKernel):  # (mix: counted by the caller where waves can be sampled, else None)
        total, cost = None if mix is None else mix.total_warp_insts, None
    else:
        total = mix.total_warp_insts
        loops, _ = hot_loops(kernel)

        @functools.lru_cache(maxsize=None)
        def cost(trips: int) -> int:
            return kernel_mix(with_trips(kernel, loops, trips), steps=PREFLIGHT_STEPS).total_warp_insts

    global_insts = 0 if mix is None else mix.warp_insts.get("ldst_global", 0)
    return make_plan(kernel, wave, total, sample, cost, sample_trips, global_insts)


def sampling_unsettled(record: dict) -> str:
    """Why a sampled record should not stand ('' when it may): no steady state, blocks not alike, or an L2 that
    keeps between waves in the reduced runs what it cannot hold at full size."""
    steady = record.get("steady_state")
    if steady is not None and not steady["settled"]:
        unit = "loop trip" if "cycles_per_trip" in steady else "wave"
        early, late = steady.get("cycles_per_trip") or steady["cycles_per_wave"]
        return f"no steady state (cycles per {unit} {early:,.0f} then {late:,.0f})"
    off = record.get("projected_vs_exact_warp_instructions", 0.0)
    if off > INSTRUCTION_CHECK:
        return f"the blocks are not alike (projected warp-instructions {off:.1%} off the exact count)"
    reuse = record.get("l2_reuse_between_waves")
    if reuse and not reuse.get("corrected") and "shadow_not_used" not in reuse:  # (not used: nothing lost between)
        return (f"the L2 keeps between waves in the reduced runs what it cannot at full size "
                f"({mib(reuse['bytes_between_reuses_full'])} MiB pass between a wave's use of a line and the "
                f"next wave's, in a {mib(reuse['l2_capacity_bytes'])} MiB L2)")
    return ""


def _run_sampled(kernel, spec, plan: Plan, mix, started: float, warnings: list, *, progress=None, interrupt=None,
                 refine: bool = False, **options) -> RunResult:
    """The plan's reduced runs, each a full simulation of a reduced kernel (side by side on the cores this
    process may use, see gpusim.sampling.parallel), and the record projected from them. `refine` (`auto`): a
    projection with no steady state, or one that breaks a physical limit, runs the loop at more trips while it
    has them."""
    points = plan.points
    pilot = pilot_point(plan) if plan.staggered else None
    update = getattr(progress, "update", progress)
    start = getattr(progress, "start", None)
    if callable(start):
        runs = [p for p in (pilot, *points) if p is not None]
        start(f"{kernel.name} (sampled: {len(runs)} reduced runs)", sum(p.blocks for p in runs),
              sum(p.warp_insts for p in runs))
    base = [0, 0]  # (blocks, warp-instructions) of the runs done before the ones in progress: the pilot's

    def report_in_turn(blocks: int, cycle: int, insts: int) -> None:
        if callable(update):
            update(base[0] + blocks, cycle, base[1] + insts)

    # an observer (plots, timeline, per-instruction view) sees one reduced run, the largest projection point's
    # (the whole grid's tail and its hot loop at the most trips), simulated in this process
    observer = options.pop("observer", None)
    observed = max((i for i, p in enumerate(points) if p.role == "projection"),
                   key=lambda i: (points[i].warp_insts, i))

    stagger = 0  # cycles the runs' first blocks start spread over (a staggered plan: the pilot's cycles)
    dropped: list = []  # (point, result) of runs a longer plan (extend_trips) made unnecessary

    l2 = None  # where the pilot finds the waves sharing data the full run's L2 cannot keep: a shadow L2 (reuse.py)
    warm_from: list = [None]  # the dirty fraction the runs made now start their L2 with (None: empty; see warm.py)

    def reduced(point: Point, report=None, stop=None, watch=None, spread: int = 0) -> RunResult:
        return _run_kernel(point_kernel(kernel, plan, point), spec, max_instructions=None, on_count=None,
                           sample="off", block_limit=point.blocks, progress=report, interrupt=stop,
                           observer=watch, stagger=spread, shadow_l2=l2["shadow"] if l2 else 0,
                           warm_l2=warm_from[0], **options)

    def one(index: int, report=None, stop=None) -> RunResult:
        return reduced(points[index], report, stop, observer if index == observed else None, stagger)

    def worker(index: int) -> RunResult:
        done = [0, 0]

        def report(blocks: int, cycle: int, insts: int) -> None:
            parallel.report_done(insts - done[0], blocks - done[1], cycle)
            done[:] = insts, blocks

        return one(index, report)

    def waiting(insts: int, blocks: int, cycle: int) -> bool:  # cycle: the furthest any run side by side has reached
        if callable(update):
            update(base[0] + blocks, cycle, base[1] + insts)
        return interrupt is not None and bool(interrupt())

    try:
        pilot_run = short_run = None
        first = -1  # a point run in this process before the others: a trips plan's check run (it sizes the shadow)
        if pilot is not None:  # in this process, before the others: they need its cycles
            pilot_run = reduced(pilot, report_in_turn, interrupt)
            if pilot_run.partial:
                raise parallel.RunsInterrupted
            stagger = int(pilot_run.metrics["gpu_sim_cycle"])
            l2 = _shadow_for_runs(plan, pilot, pilot_run.metrics, points, "the pilot run")
            base[:] = pilot.blocks, pilot_run.metrics["smsp__inst_executed.sum"]
        elif plan.trips_over_waves:  # no pilot, but waves that may share data
            first = next((i for i, p in enumerate(points) if p.role == "check"), -1)
        if first >= 0:
            first_run = one(first, report_in_turn, interrupt)
            if first_run.partial:
                raise parallel.RunsInterrupted
            l2 = _shadow_for_runs(plan, points[first], first_run.metrics, points, "the check run")
            base[:] = points[first].blocks, first_run.metrics["smsp__inst_executed.sum"]

        def run_all(rest: list[int]) -> list[RunResult]:  # points[i] for i in rest, side by side where there are cores
            order = sorted(range(len(rest)), key=lambda k: -points[rest[k]].warp_insts)  # the longest first
            jobs = 1 if observer is not None else parallel.default_jobs(len(rest))
            done = parallel.map_runs(lambda k: worker(rest[k]), len(rest), jobs, order, waiting)
            if done is None:  # one core: one after another, here
                done = []
                for index in rest:
                    result = one(index, report_in_turn, interrupt)
                    if result.partial:
                        raise parallel.RunsInterrupted
                    done.append(result)
                    base[0] += points[index].blocks
                    base[1] += result.metrics["smsp__inst_executed.sum"]
            return done

        rest = [i for i in range(len(points)) if i != first]
        by_index = dict(zip(rest, run_all(rest)))
        if first >= 0:
            by_index[first] = first_run
        results = [by_index[i] for i in range(len(points))]
        if observer is not None:
            observed_run = {"blocks": points[observed].blocks, "trips": points[observed].trips,
                            "cycles": results[observed].metrics.get("gpu_sim_cycle")}
        observed = -1  # (a longer plan's runs below are not observed)
        exact = mix is not None and not mix.estimated

        def projection(warm=None) -> tuple[dict, dict, list]:  # the record projected from the runs made
            metrics, record, more = project(plan, [(p, r.metrics) for p, r in zip(points, results)],
                                            mix.total_warp_insts if exact else None,
                                            mix.total_thread_insts if exact else None, l2, warm)
            metrics.update(speed_of_light(metrics, spec))  # percentages of peak from the projected counts
            return metrics, record, more

        # the loop at twice the trips, reusing the runs made, where a staggered plan's shorter runs never held the
        # blocks placed at their launch at once (their start spread longer than those trips: all ramp), or where
        # `auto` finds no steady state or a projection that breaks a physical limit (refine), while the loop has
        # the trips
        midpoint_tried = False
        while not plan.trips_asked:
            why = ramp_only(points, results) if plan.staggered else None
            if why and short_run is None and pilot is not None and pilot.trips:
                # all ramp: first the start spread of the pilot's trips alone, without its fixed start and end (the
                # same run at 0 trips: an even count, as the plan's, so a ring of stages indexed from the loop's
                # full count keeps its parity); the runs again at that spread where it is shorter
                short_run = reduced(attrs.evolve(pilot, trips=0), None, interrupt)
                if short_run.partial:
                    raise parallel.RunsInterrupted
                spread = trips_spread(stagger, short_run.metrics["gpu_sim_cycle"], pilot.trips)
                if spread < stagger:
                    dropped += list(zip(points, results))
                    stagger = spread
                    plan = attrs.evolve(plan, reason=f"{plan.reason} (spread over the pilot's trips alone, "
                                                     f"{spread:,} cycles: {why})")
                    if callable(start):
                        start(f"{kernel.name} (sampled: {len(points)} runs at a shorter start spread)",
                              sum(p.blocks for p in points), sum(p.warp_insts for p in points))
                    base[:] = 0, 0
                    results = run_all(list(range(len(points))))
                    continue
            longer = None
            # (a streaming kernel's cold runs break DRAM's limit until the warm L2's runs below take their place)
            if why is None and refine and (l2 is not None or warm_plan(plan, [(p, r.metrics) for p, r in
                                                                             zip(points, results)]) is None):
                metrics, record, _ = projection()
                broken = violations(metrics, spec)
                unsettled = sampling_unsettled(record)
                why = unsettled or ("the projection breaks a physical limit (" + "; ".join(broken) + ")"
                                    if broken else None)
                if unsettled.startswith("no steady state") and not broken and not midpoint_tried and not dropped:
                    # first whether the cost settled over the trips the projection uses: one run of the tail (not
                    # after runs found all ramp: a kernel that slow to settle gets the longer runs)
                    longer, midpoint_tried = midpoint_check(plan), True
            if longer is None:
                longer = extend_trips(plan, why) if why else None
            if longer is None:
                break
            made = {point_key(q): r for q, r in zip(points, results)}
            kept = {point_key(q) for q in longer.points}
            dropped += [(q, r) for q, r in zip(points, results) if point_key(q) not in kept]
            plan, points = longer, longer.points
            rest = [i for i, q in enumerate(points) if point_key(q) not in made]
            if callable(start):
                start(f"{kernel.name} (sampled: the loop at {max(q.trips for q in points)} trips, "
                      f"{len(rest)} more reduced runs)", sum(points[i].blocks for i in rest),
                      sum(points[i].warp_insts for i in rest))
            base[:] = 0, 0
            made.update((point_key(points[i]), r) for i, r in zip(rest, run_all(rest)))
            results = [made[point_key(q)] for q in points]
        # a streaming kernel whose full run fills the L2 with dirty lines and writes them back, where the runs end
        # before theirs do: its later waves (or trips) run again from an L2 in that steady state (sampling.warm)
        warm = None
        fill = warm_plan(plan, [(p, r.metrics) for p, r in zip(points, results)]) if l2 is None else None
        if fill is not None:
            warm_points = [p for p in points if p.role == "projection"]
            if callable(start):
                start(f"{kernel.name} (sampled: {len(warm_points)} runs from an L2 in its steady dirty state)",
                      sum(p.blocks for p in warm_points), sum(p.warp_insts for p in warm_points))
            base[:] = 0, 0
            warm_from[0] = fill["dirty_fraction"]
            warm_results = run_all([points.index(p) for p in warm_points])
            warm_from[0] = None
            warm = {**fill, "runs": [(p, r.metrics) for p, r in zip(warm_points, warm_results)]}
    except parallel.RunsInterrupted:
        return RunResult(kernel=kernel.name, arch=spec.name, scheduler=options["scheduler"], simt=options["simt"],
                         seed=options["seed"], params=dict(kernel.params), launch=_launch_record(kernel), metrics={},
                         wall_seconds=time.perf_counter() - started, warnings=warnings, partial=True,
                         interrupted={"cycle": 0, "blocks_retired": 0, "blocks": kernel.launch.nblocks},
                         sampling={"method": plan.method, "detail": plan.reason + "; interrupted before the "
                                   "reduced runs finished: nothing to project"},
                         sync_window=options["sync_window"])
    finally:
        stop = getattr(progress, "stop", None)
        if callable(stop):
            stop()
    metrics, record, more = projection(warm)
    if observer is not None:
        record["observed_run"] = observed_run  # what the observer (plots, timeline, per-instruction) saw
    if pilot_run is not None:
        record["pilot_run"] = {"blocks": pilot.blocks, "trips": pilot.trips,
                               "cycles": pilot_run.metrics.get("gpu_sim_cycle"),
                               "warp_instructions": pilot_run.metrics.get("smsp__inst_executed.sum")}
        record["stagger_cycles"] = stagger
        record["simulated_warp_instructions"] += pilot_run.metrics.get("smsp__inst_executed.sum", 0)
        if short_run is not None:
            record["pilot_run"]["no_trip_cycles"] = short_run.metrics.get("gpu_sim_cycle")
            record["pilot_run"]["no_trip_warp_instructions"] = short_run.metrics.get("smsp__inst_executed.sum")
            record["simulated_warp_instructions"] += short_run.metrics.get("smsp__inst_executed.sum", 0)
    if dropped:  # runs of a shorter plan that the longer one does not use: simulated, so counted, and named
        record["dropped_runs"] = [{"blocks": p.blocks, "trips": p.trips, "full_waves_before_tail": p.waves,
                                   "cycles": r.metrics.get("gpu_sim_cycle"),
                                   "warp_instructions": r.metrics.get("smsp__inst_executed.sum")} for p, r in dropped]
        record["simulated_warp_instructions"] += sum(r.metrics.get("smsp__inst_executed.sum", 0) for _, r in dropped)
    last = results[-1]
    for w in last.warnings + more:
        if w not in warnings:
            warnings.append(w)
    return attrs.evolve(last, params=dict(kernel.params), launch=_launch_record(kernel), metrics=metrics,
                        warnings=warnings, wall_seconds=time.perf_counter() - started, sampling=record,
                        violations=violations(metrics, spec))


def _shadow_for_runs(plan: Plan, first: Point, metrics: dict, points, source: str) -> dict | None:
    """The shadow L2 the plan's runs keep where the numbers of the run made `first` (the pilot, or a trips plan's
    check run: `source`) say the waves' shared data outlives a wave in the runs' L2 but not in the full run's
    (None: no shadow); see sampling.reuse."""
    capacity = metrics.get("gpusim__l2_capacity_bytes", 0)
    if not plan.trips_over_waves or not capacity:
        return None
    read, writes = reuse_estimate(metrics, first.trips or plan.trips, first.blocks, plan.wave_blocks)
    size = shadow_capacity(read, writes, capacity, plan.trips, [p.trips for p in points if p.trips is not None])
    if not size:
        return None
    return {"capacity": capacity, "read_per_trip": read, "wave_writes": writes, "shadow": size, "source": source}


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


def _run_command_list(path: Path, spec, overrides: LaunchOverrides = LaunchOverrides(), **options) -> RunResult:
    """Every kernel the list names, in order, each on a fresh GPU (cold caches); totals in `metrics`."""
    started = time.perf_counter()
    commands = read_command_list(path)
    results, warnings, unknown = [], [], {}
    notes = _skipped_copies(path, commands)
    for command in commands:
        if command.kernel is None:
            continue
        kernel = apply_launch_overrides(load_trace(command.kernel), spec, overrides)
        result = _run_kernel(kernel, spec, **options)  # (a trace's size is its file's)
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
        for key in ("arch", "scheduler", "simt", "seed", "warnings", "notes"):
            record.pop(key)
        records.append(record)
    return RunResult(kernel=str(path), arch=spec.name, scheduler=options["scheduler"], simt=options["simt"],
                     seed=options["seed"], params={}, launch={"kernels": len(results)},
                     metrics=combine_metrics([r.metrics for r in results]),
                     wall_seconds=time.perf_counter() - started, warnings=warnings, notes=notes,
                     unknown_opcodes=dict(sorted(unknown.items(), key=lambda kv: (-kv[1], kv[0]))), kernels=records,
                     partial=results[-1].partial if results else False,
                     violations=[f"kernel {i + 1}: {v}" for i, r in enumerate(results) for v in r.violations],
                     sync_window=max((r.sync_window for r in results), default=options["sync_window"]),
                     interrupted=None if not results or results[-1].interrupted is None else
                     {"kernel": len(results), "kernels": kernels, **results[-1].interrupted})
