"""A sampled run from start to end: the plan's reduced runs (a pilot first where the plan staggers its runs, the
others side by side on the cores this process may use), the loop at more trips where they do not settle, the
warm-L2 runs of a streaming kernel, and the record projected from them (gpusim.sampling.runner.project).

gpusim.api makes the plan (`sampling_plan`) and hands `run_sampled` a function that simulates one reduced kernel in
full; what `auto` then does with an unsettled or impossible projection (refine, run in full, or say so) is
gpusim.api's.
"""

from __future__ import annotations

import functools
import time
from typing import Callable

import attrs

from ..options import RunOptions
from ..result import RunResult, launch_record
from ..stats.invariants import violations
from ..trace import TraceKernel
from ..workload import kernel_mix
from . import parallel
from .plan import Plan, Point, extend_trips, hot_loops, make_plan, midpoint_check, reach_warning, with_trips
from .project import mib
from .reuse import (BORDERLINE_FROM, bytes_between_reuses, reuse_between_waves, reuse_estimate, run_shadow_capacity,
                    shadow_capacity)
from .runner import (INSTRUCTION_CHECK, WITHIN_WAVE_LOSS, no_trip_point, pilot_point, point_key, point_kernel,
                     project, ramp_only, run_spread, trips_spread)
from .warm import warm_plan

PREFLIGHT_STEPS = 200_000  # counting steps an instruction count spends at most (~0.1 s); beyond them it estimates


def trace_waves(kernel, gpu) -> int:
    """Full waves before the tail wave of `kernel`'s launch on `gpu`."""
    wave = gpu.occupancy.blocks_per_sm * len(gpu.sms)
    return (kernel.launch.nblocks - 1) // wave


def longer_trips(record: dict) -> str:
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
    if reuse and reuse.get("shadow_within_wave_loss", 0.0) > WITHIN_WAVE_LOSS:
        return (f"the shadow L2 loses what the blocks of one wave share (its runs of the tail alone read "
                f"{reuse['shadow_within_wave_loss']:.0%} more from DRAM than their own L2: too few sets a slice)")
    if reuse and not reuse.get("corrected") and "shadow_not_used" not in reuse:  # (not used: nothing lost between)
        return (f"the L2 keeps between waves in the reduced runs what it cannot at full size "
                f"({mib(reuse['bytes_between_reuses_full'])} MiB pass between a wave's use of a line and the "
                f"next wave's, in a {mib(reuse['l2_capacity_bytes'])} MiB L2)")
    return ""


def run_sampled(kernel, spec, plan: Plan, mix, started: float, warnings: list, options: RunOptions,
                simulate: Callable[..., RunResult], *, progress=None, interrupt=None, observer=None,
                refine: bool = False) -> RunResult:
    """The plan's reduced runs, each a full simulation of a reduced kernel (side by side on the cores this
    process may use, see gpusim.sampling.parallel), and the record projected from them. `simulate(kernel, *,
    block_limit, progress, interrupt, observer, stagger, shadow_l2, warm_l2)` runs one reduced kernel in full
    under `options` (gpusim.api's). `refine` (`auto`): a projection with no steady state, or one that breaks a
    physical limit, runs the loop at more trips while it has them."""
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
    observed = max((i for i, p in enumerate(points) if p.role == "projection"),
                   key=lambda i: (points[i].warp_insts, i))

    stagger = 0  # cycles the runs' first blocks start spread over (a staggered plan: the pilot's cycles)
    dropped: list = []  # (point, result) of runs a longer plan (extend_trips) made unnecessary

    l2 = None  # where the pilot finds the waves sharing data the full run's L2 cannot keep: a shadow L2 (reuse.py)
    ways = spec.memory.l2.associativity

    def corrected() -> bool:  # whether the DRAM traffic is the shadow's (not a borderline's bound: see reuse.py)
        return l2 is not None and not l2.get("borderline")

    warm_from: list = [None]  # the dirty fraction the runs made now start their L2 with (None: empty; see warm.py)

    def reduced(point: Point, report=None, stop=None, watch=None, spread: int = 0) -> RunResult:
        return simulate(point_kernel(kernel, plan, point), block_limit=point.blocks, progress=report,
                        interrupt=stop, observer=watch, stagger=spread,
                        shadow_l2=run_shadow(l2, point, plan) if l2 else 0, warm_l2=warm_from[0])

    def one(index: int, report=None, stop=None) -> RunResult:
        return reduced(points[index], report, stop, observer if index == observed else None,
                       run_spread(stagger, points[index], plan))

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

    def pilot_runs(pilot: Point, short: Point | None) -> tuple[RunResult, RunResult | None]:
        """The pilot's run and, where it has one, its run at no trips: side by side where there are cores (they
        are independent), else one after another in this process."""
        if short is not None:
            pair = [pilot, short]

            def task(k: int) -> RunResult:
                done = [0, 0]

                def report(blocks: int, cycle: int, insts: int) -> None:
                    parallel.report_done(insts - done[0], blocks - done[1], cycle)
                    done[:] = insts, blocks

                return reduced(pair[k], report if k == 0 else None)

            both = parallel.map_runs(task, 2, parallel.default_jobs(2), [0, 1], waiting)
            if both is not None:
                return both[0], both[1]
        first_run = reduced(pilot, report_in_turn, interrupt)
        if first_run.partial:
            raise parallel.RunsInterrupted
        if short is None:
            return first_run, None
        second_run = reduced(short, None, interrupt)
        if second_run.partial:
            raise parallel.RunsInterrupted
        return first_run, second_run

    try:
        pilot_run = short_run = None
        first = -1  # a point run in this process before the others: a trips plan's check run (it sizes the shadow)
        if pilot is not None:  # before the others: they need its cycles
            # the spread is the pilot's trips alone, without its fixed start and end (prologue, first loads,
            # epilogue): the same run at 0 trips (1 for an odd count: see ring_trips) has them alone.
            # gemm_hopper_ws 8192^3 on h100: 11,081
            # cycles for 2 trips of the tail, 8,976 of them its fixed part; spread over all of it, the tail's
            # clusters waited on pairs of SMs a wave freed far apart, +15% against the full run (-2.4% over the
            # trips' 2,105)
            short = no_trip_point(pilot, plan) if pilot.trips else None
            pilot_run, short_run = pilot_runs(pilot, short)
            stagger = int(pilot_run.metrics["gpu_sim_cycle"])
            if short is not None and short_run is not None:
                stagger = trips_spread(stagger, short_run.metrics["gpu_sim_cycle"], pilot.trips - (short.trips or 0))
            # the pilot's reads a trip include what the program reads before its loop (a pipeline's prologue: 5
            # tiles read in gemm_tile128's 2 trips, against 2 in its loop); the run at 0 trips reads that alone
            prologue = short_run.metrics if short_run is not None and outgrows_l2(plan, pilot, pilot_run.metrics) \
                else None
            l2 = shadow_for_runs(plan, pilot, pilot_run.metrics, points, "the pilot run", prologue, ways)
            base[:] = pilot.blocks, pilot_run.metrics["smsp__inst_executed.sum"]
        elif plan.trips_over_waves:  # no pilot, but waves that may share data
            first = next((i for i, p in enumerate(points) if p.role == "check"), -1)
        if first >= 0:
            first_run = one(first, report_in_turn, interrupt)
            if first_run.partial:
                raise parallel.RunsInterrupted
            l2 = shadow_for_runs(plan, points[first], first_run.metrics, points, "the check run", None, ways)
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
        exact_warp_insts = mix.total_warp_insts if exact else None if mix is None else mix.stated_warp_insts

        def projection(warm=None) -> tuple[dict, dict, list]:  # the record projected from the runs made
            metrics, record, more = project(plan, [(p, r.metrics) for p, r in zip(points, results)],
                                            exact_warp_insts, mix.total_thread_insts if exact else None, l2, warm,
                                            ways, spec)
            return metrics, record, more

        # the loop at twice the trips, reusing the runs made, where a staggered plan's shorter runs never held the
        # blocks placed at their launch at once (their start spread longer than those trips: all ramp), or where
        # `auto` finds no steady state or a projection that breaks a physical limit (refine), while the loop has
        # the trips
        midpoint_tried = False
        while not plan.trips_asked:
            why = ramp_only(points, results) if plan.staggered else None
            longer = None
            # (a streaming kernel's cold runs break DRAM's limit until the warm L2's runs below take their place)
            if why is None and refine and (corrected() or warm_plan(plan, [(p, r.metrics) for p, r in
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
        fill = warm_plan(plan, [(p, r.metrics) for p, r in zip(points, results)]) if not corrected() else None
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
        return RunResult(kernel=kernel.name, arch=spec.name, scheduler=options.scheduler, simt=options.simt,
                         seed=options.seed, params=dict(kernel.params), launch=launch_record(kernel), metrics={},
                         wall_seconds=time.perf_counter() - started, warnings=warnings, partial=True,
                         interrupted={"cycle": 0, "blocks_retired": 0, "blocks": kernel.launch.nblocks},
                         sampling={"method": plan.method, "detail": plan.reason + "; interrupted before the "
                                   "reduced runs finished: nothing to project"},
                         sync_window=options.sync_window, options=options.record())
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
    reach = reach_warning(plan)
    for w in last.warnings + more + ([reach] if reach else []):
        if w not in warnings:
            warnings.append(w)
    return attrs.evolve(last, params=dict(kernel.params), launch=launch_record(kernel), metrics=metrics,
                        warnings=warnings, wall_seconds=time.perf_counter() - started, sampling=record,
                        violations=violations(metrics, spec))


def run_shadow(l2: dict, point: Point, plan: Plan) -> int:
    """The shadow L2's size for one reduced run (see reuse.py): where the plan samples waves too, the one for the
    run's own trips (each run then forgets between waves as the full run does, and its DRAM reads stay linear in
    the trips); in a plan of loop trips alone (every run the whole grid), the one of the fewest trips."""
    if point.trips is None or len({p.waves for p in plan.points}) < 2:
        return l2["shadow"]
    return run_shadow_capacity(l2["read_per_trip"], l2["wave_writes"], l2["capacity"], plan.trips, point.trips)


def outgrows_l2(plan: Plan, first: Point, metrics: dict) -> bool:
    """Whether, by the numbers of the run made `first` (its reads a trip erring high), the full run's distance
    between a wave's use of a line and the next wave's exceeds the share of the L2 from which it loses reuses
    (see sampling.reuse)."""
    capacity = metrics.get("gpusim__l2_capacity_bytes", 0)
    if not plan.trips_over_waves or not capacity:
        return False
    read, writes = reuse_estimate(metrics, first.trips or plan.trips, first.blocks, plan.wave_blocks)
    return bytes_between_reuses(read, writes, plan.trips) > capacity * BORDERLINE_FROM


def shadow_for_runs(plan: Plan, first: Point, metrics: dict, points, source: str,
                    no_trips: dict | None = None, ways: int = 16) -> dict | None:
    """The shadow L2 the plan's runs keep where the numbers of the run made `first` (the pilot, or a trips plan's
    check run: `source`) say the waves' shared data outlives a wave in the runs' L2 but not in the full run's, or
    some of it in the full run's (a borderline distance: "borderline", the L2's `ways` with it); None: no shadow;
    see sampling.reuse. `no_trips`: the same run's metrics at 0 trips, whose reads are not a trip's."""
    capacity = metrics.get("gpusim__l2_capacity_bytes", 0)
    if not plan.trips_over_waves or not capacity:
        return None
    read, writes = reuse_estimate(metrics, first.trips or plan.trips, first.blocks, plan.wave_blocks, no_trips)
    size = shadow_capacity(read, writes, capacity, plan.trips, [p.trips for p in points if p.trips is not None])
    if not size:
        return None
    fewest = min(p.trips for p in points if p.trips is not None)
    borderline = reuse_between_waves(read, writes, capacity, plan.trips, fewest) is None
    return {"capacity": capacity, "read_per_trip": read, "wave_writes": writes, "shadow": size, "source": source,
            **({"borderline": True, "ways": ways} if borderline else {})}


__all__ = ["PREFLIGHT_STEPS", "longer_trips", "run_sampled", "sampling_plan", "sampling_unsettled", "shadow_for_runs",
           "trace_waves"]
