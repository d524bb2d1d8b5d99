"""Run a sampling plan's reduced simulations and project the kernel's record from them."""

from __future__ import annotations

import math

import attrs

from .plan import SETTLED, STAGGER_TRIPS, Plan, Point, hot_loops, ring_trips, with_trips
from .project import (DIRTY_AT_END, DIRTY_LARGEST, L2_HITS, L2_MERGED, MAXIMUM, STEADY_STATE_VALUE, additive,
                      as_record, extrapolate, merge_decay, mib, project_line, ratios, with_decaying_merges)
from .reuse import (bytes_between_reuses, lost_share, reuse_between_waves, run_shadow_capacity,
                    with_shadow_traffic)
from .warm import FILL_UNCERTAINTY, factor, full_size
from ..stats.declared import undeclared
from ..stats.invariants import speed_of_light

# Counts the mix gives exactly, and the additive quantities (see project.additive) that equal them
EXACT_WARP_INSTS = ("smsp__inst_executed.sum", "gpu__inst_executed_per_cycle")
EXACT_THREAD_INSTS = ("smsp__thread_inst_executed.sum", "gpu_sim_insn", "gpu_ipc",
                      "smsp__thread_inst_executed_per_inst_executed.ratio")
INSTRUCTION_CHECK = 0.01  # projected vs exact instruction count: beyond 1% the blocks are not alike
# A reduced run's cycles move by about this much (one standard deviation) when its first blocks start a cycle
# earlier or later: gemm_tile128 4096^3 and 4096x4096x1024 on h100 and a100, five stagger draws each, 0.1-1.5% by
# run, 0.8% on average (validation/results/sampling-spread.json). The error estimate carries it through the
# projection's weights, at NOISE_BOUND standard deviations (|error| within it nine times in ten, for a normal spread).
RUN_NOISE = 0.01
NOISE_BOUND = 1.645


def pilot_point(plan: Plan) -> Point:
    """A staggered plan's pilot: the tail alone at STAGGER_TRIPS trips, its first blocks at once; the cycles of its
    trips alone (trips_spread, less the same run at 0 trips) are the spread the plan's runs start their first blocks
    over (run_spread: the tail alone over its share). In a long kernel, the blocks of the waves after the first
    start as earlier ones retire, out of step with each other (in gemm_tile128 4096 x 4096 x 1024 on H100, simulated
    in full, the first wave's 396 blocks retired over 7,000 cycles, about three trips); short runs that started
    every block at once would keep them in step, all loading at once, and cost a full wave some 30% too much."""
    first = plan.points[0]
    trips = ring_trips(STAGGER_TRIPS, plan.trips) if plan.trips is not None else STAGGER_TRIPS
    return Point(plan.tail_blocks, trips, 0, "pilot", round(first.warp_insts * trips / max(1, first.trips or 1)))


def no_trip_point(pilot: Point, plan: Plan) -> Point:
    """The pilot with its hot loop at 0 trips (1 where the loop's count is odd: see ring_trips): its fixed start and
    end alone."""
    return attrs.evolve(pilot, trips=ring_trips(0, plan.trips) if plan.trips is not None else 0)


def trips_spread(pilot_cycles: int, no_trip_cycles: int, trips: int) -> int:
    """The cycles a staggered plan's runs start their first blocks over: the pilot's `trips` trips without its
    fixed start and end (prologue, first loads from DRAM, epilogue), from its cycles and those of the same run with
    its hot loop at 0 trips; the pilot's whole cycles where the difference says nothing (a loop whose trips cost
    nothing, or more than the pilot took). A kernel whose blocks start with a long fixed part (gemm_tile128 4096^3 on h100:
    6,594 cycles for 2 trips of the tail alone, about 800 a trip) would otherwise spread its starts over more
    than a short run's blocks last, and no run would hold its blocks at once."""
    per_trip = (pilot_cycles - no_trip_cycles) / max(1, trips)
    if per_trip <= 0 or per_trip * trips >= pilot_cycles:
        return pilot_cycles
    return int(per_trip * trips)


def run_spread(stagger: int, point: Point, plan: Plan) -> int:
    """The cycles `point`'s run starts its first blocks over, in a plan whose runs stagger their first wave over
    `stagger`: the whole of it where a full wave comes first; for the tail alone, the share the tail's blocks take
    of it. In the full run the tail's blocks start on the first slots a staggered wave frees, not spread over the
    whole wave's stagger: FA3 at batch 4, 32 heads, 4K keys on h100 (a tail of 4 blocks after 31 waves of 132)
    delayed its tail-alone run's last block by 0.85 of an 8,824-cycle stagger, so every projected wave lost those
    cycles (-11.3% against the full run)."""
    if point.waves or plan.wave_blocks <= 0:
        return stagger
    return stagger * min(point.blocks, plan.wave_blocks) // plan.wave_blocks


def point_key(point: Point) -> tuple:
    """What makes a reduced run: its blocks, trips and full waves before the tail (not its role)."""
    return point.blocks, point.trips, point.waves


def ramp_only(points, results) -> str | None:
    """Why the plan's shorter loop runs are all ramp, or None where they are not: a projection run at the fewest
    trips whose blocks placed at the launch never ran at once (its first block retired before the last of them
    started: their start spread is longer than those trips; `results`: the runs' RunResults, in `points` order)."""
    fewest = min((p.trips for p in points if p.role == "projection" and p.trips is not None), default=None)
    for point, result in zip(points, results):
        reduced = result.sampling or {}
        if point.role == "projection" and point.trips == fewest and reduced.get("launch_at_once") is False:
            return (f"the run of {point.blocks:,} blocks at {fewest} trips had its first block retire at cycle "
                    f"{reduced['first_retirement']:,}, before the last block placed at its launch started "
                    f"({reduced['launch_last_start']:,}): it never held them at once")
    return None


def point_kernel(kernel, plan: Plan, point: Point):
    """The kernel one reduced run simulates: as written, or with its hot loops at the point's trips."""
    if point.trips is None:
        return kernel
    loops, _ = hot_loops(kernel)
    return with_trips(kernel, loops, point.trips)


def project(plan: Plan, results: list[tuple[Point, dict]], exact_warp_insts: int | None,
            exact_thread_insts: int | None, l2: dict | None = None,
            warm: dict | None = None, ways: int = 16, spec=None) -> tuple[dict, dict, list[str]]:
    """(the kernel's metrics, the record's "sampling" object, warnings) from the points' metrics. `l2`: where the
    runs kept a shadow L2 (see reuse.py), the L2's capacity ("capacity"), the estimate it was sized from
    ("read_per_trip", "wave_writes", made from "source": the pilot or the check run) and the shadow's size
    ("shadow"): the projected DRAM traffic is then the shadow's. `warm`: where the projection points ran again
    from a warm L2 (see warm.py), warm_plan's answer with their (point, metrics) as "runs": the counts are then the
    cold runs' up to the L2's fill and the warm runs' cost a unit after it. `ways`: the L2's. `spec`: the
    architecture: the speed of light recomputed from the projected counts (whose DRAM share the cycles' error takes
    in)."""
    warnings: list[str] = []
    own = {p: additive(m) for p, m in results}  # the runs' own DRAM traffic: what the reuse check reads
    projection = [p for p, _ in results if p.role == "projection"]
    by_wave: dict[int, list[Point]] = {}
    for p in projection:
        by_wave.setdefault(p.waves, []).append(p)
    for points in by_wave.values():
        points.sort(key=lambda p: p.trips or 0)
    reuse = _reuse_bytes(plan, own, by_wave)
    caveat = reuse_between_waves(*reuse) if reuse is not None else None
    # a borderline distance between reuses (reuse.py): the runs' own traffic, moved towards their shadows' below
    bound = l2 if l2 and l2.get("borderline") and not warm else None
    if l2 and l2.get("borderline"):
        l2 = None
    dropped_shadow = None
    if l2 and reuse is not None and caveat is None and bytes_between_reuses(*reuse[:2], plan.trips) <= reuse[2]:
        # the runs' own numbers (a difference of two runs, where the first run's estimate took in what the program
        # reads outside the loop) say the full run keeps between waves what its L2 holds: no shadow's traffic
        dropped_shadow, l2 = l2, None
    if l2:
        results = [(p, with_shadow_traffic(m)) for p, m in results]
    sums = {p: additive(m) for p, m in results} if l2 else own
    checks = [p for p, _ in results if p.role == "check"]
    decay = 0.0  # how fast L2 merges a trip fall with the trips (see project.merge_decay): from the check's wave
    if plan.trips is not None and checks:
        decay = merge_decay([(p.trips, sums[p]) for p in [*by_wave.get(checks[0].waves, []), checks[0]]])
    warm_sums = {p: additive(m) for p, m in warm["runs"]} if warm else {}

    def lines_of(sums: dict, warm_sums: dict) -> tuple[list, list]:  # (single-factor plans with a warm L2: warm.py)
        cold = sorted(((factor(plan, p), sums[p]) for p in projection), key=lambda r: r[0])
        hot = sorted(((factor(plan, p), m) for p, m in warm_sums.items()), key=lambda r: r[0])
        return cold, hot

    def projection_of(sums: dict, warm_sums: dict, merge_decay: float | None = None) -> dict:  # the full size's
        # additive quantities from the runs' (the L2 merges a trip falling at `merge_decay`: decay's by default)
        if warm_sums:
            return two_regimes(*lines_of(sums, warm_sums), warm["fill_at"], full_size(plan))
        fall = decay if merge_decay is None else merge_decay
        per_wave = []
        for waves, points in sorted(by_wave.items()):
            if plan.trips is not None:
                line = [(p.trips, sums[p]) for p in points]
                per_wave.append((waves, with_decaying_merges(project_line(line, plan.trips), line, plan.trips, fall)))
            else:
                per_wave.append((waves, sums[points[-1]]))
        return project_line(per_wave, plan.full_waves) if len(per_wave) > 1 else per_wave[0][1]

    projected = projection_of(sums, warm_sums)
    # what the full run leaves dirty at the end where the runs keep their own L2's traffic: their account (every
    # wave's writes outlive the waves after it) and one by chance (each survives the waves after it as a reuse
    # does, dirty_left_by_waves): the full run's lies between the two, taken halfway (gemm_tile128 4096^3 on b200:
    # 67.1 MB and 54.7, the full run 55.5; gemm_multistage 4096^3 on l40s: 67.1 MB and 34.0, the full run 46.0)
    # (the full run's distance between a wave's use of a line and the next wave's: the runs' own estimate, or where
    # they give none the one a borderline's shadow was sized from)
    estimate = reuse[:2] if reuse is not None else (bound["read_per_trip"], bound["wave_writes"]) if bound else None
    distance = bytes_between_reuses(*estimate, plan.trips) if estimate is not None else 0.0
    dirty: list[float] = []
    if not l2 and reuse is not None and len(by_wave) > 1 and not warm:
        dirty = sorted((ratios(projected).get(DIRTY_AT_END, 0.0), dirty_left_by_waves(
            own, by_wave, reuse[1], distance, reuse[2], ways, plan.full_waves)))
        projected = {**projected, **dict.fromkeys((DIRTY_AT_END, DIRTY_LARGEST), sum(dirty) / 2)}
    borderline = None  # (the record's account of a borderline distance between reuses, see reuse.py)
    dram_far = hits_far = 0.0  # (the DRAM error and the L2 hit rate's error in points it leaves)
    if bound:
        through_shadow = {p: additive(with_shadow_traffic(m)) for p, m in results}
        lost = projection_of(through_shadow, warm_sums)
        share = lost_share(distance, bound["capacity"], bound["ways"])
        kept = projected
        if len(by_wave) > 1:  # the shadow's account of what stays dirty at the end, beside the two above
            lost = with_own_writes(lost, kept, own, through_shadow, by_wave, bound["capacity"])
            dirty.append(ratios(lost).get(DIRTY_AT_END, 0.0))
        projected, dram_far, hits_far = with_lost_reuse(kept, lost, share, dirty)
        borderline = {"bytes_between_reuses_full": round(distance), "l2_capacity_bytes": bound["capacity"],
                      "l2_ways": bound["ways"], "corrected": True, "shadow_l2_bytes": bound["shadow"],
                      "lost_share": round(share, 4),
                      "dram_read_bytes_keeping_reuse": round(kept.get("dram__bytes_read.sum", 0.0)),
                      "dram_read_bytes_through_shadow": round(lost.get("dram__bytes_read.sum", 0.0)),
                      "estimate": {"from": bound["source"], "dram_read_bytes_per_trip": round(bound["read_per_trip"]),
                                   "wave_write_bytes": round(bound["wave_writes"])}}
    elif dirty:
        total = ratios(projected).get(DRAM_BYTES, 0.0)
        dram_far = (dirty[1] - dirty[0]) / 2 / total if total > 0 else 0.0
    shadow_reads = 0.0  # the share of the projected DRAM bytes that a shadow L2 gives (its reads): the DRAM error
    if l2 and len(by_wave) > 1:
        projected = with_own_writes(projected, projection_of(own, warm_sums), own, sums, by_wave, l2["capacity"])
    within_wave = within_wave_loss(own, sums, by_wave) if l2 and len(by_wave) > 1 else 0.0
    dirty_unknown = 0.0  # the share of the DRAM bytes that what stays dirty at the end may move (see below)
    if l2:
        total = ratios(projected).get(DRAM_BYTES, 0.0)
        shadow_reads = ratios(projected).get("dram__bytes_read.sum", 0.0) / total if total > 0 else 0.0
        if len(by_wave) < 2 and total > 0:
            # loop trips alone: no run of the tail alone says what the last wave leaves dirty in the full-size L2
            # (gemm_tile128_sync 512x512x1024 on 4 SMs of an H100 given a 2 MiB L2: none of its C in 80 slices,
            # 543 KiB of 768 in 4), so the writes are uncertain by up to a wave's
            dirty_unknown = min(l2["capacity"], l2["wave_writes"]) / total
    noise_term = run_noise(projection_of, sums, warm_sums)
    fill_term = 0.0  # the error a misplaced fill point makes (warm only)
    if warm:
        fill_term = fill_error(*lines_of(sums, warm_sums), warm["fill_at"], projected, "gpu_sim_cycle")

    record: dict = {"method": plan.method, "detail": plan.reason}
    steady, error = None, 0.0
    cycles = projected.get("gpu_sim_cycle", 0)
    if checks:  # the cost per trip (or per wave) from the check point to the middle one, and on to the last
        check = checks[0]
        if plan.trips is not None:
            a, b = sorted(by_wave[check.waves], key=lambda p: p.trips)
            x = {p: p.trips for p in (a, b, check)}
            target, unit = plan.trips, "trip"
        else:
            a, b = sorted(projection, key=lambda p: p.waves)
            x = {p: p.waves for p in (a, b, check)}
            target, unit = plan.full_waves, "wave"
        # the three runs in order: the check before the pair (n/4, n/2, n), or between them (n/2, 3n/4, n: the
        # midpoint check, whether the cost settled over the trips the projection uses; see plan.midpoint_check)
        p0, p1, p2 = sorted((a, b, check), key=lambda p: x[p])
        y0, y1, y2 = (sums[p].get("gpu_sim_cycle", 0) for p in (p0, p1, p2))
        late = (y2 - y1) / (x[p2] - x[p1])
        early = (y1 - y0) / (x[p1] - x[p0])
        change = abs(late - early) / late if late > 0 else float("inf")
        # the error estimate: half the difference between projecting this point's line from its later and from
        # its earlier pair of runs (the cost per unit still changing, times how far it is projected)
        if warm:  # the cold runs stand for the kernel up to the L2's fill only
            target = warm["fill_at"]
        from_late = extrapolate(x[p1], y1, x[p2], y2, target)
        from_early = extrapolate(x[p0], y0, x[p1], y1, target)
        scale = projected.get("gpu_sim_cycle", 0) if warm else from_late
        trend = abs(from_late - from_early) / 2 / scale if scale > 0 else float("inf")
        error = trend + fill_term + noise_term
        dram_trend = line_trend(sums, (p0, p1, p2), x, target, DRAM_BYTES)
        l2_trend = line_trend(sums, (p0, p1, p2), x, target, L2_HITS)  # (relative to the hits)
        # settled: the cost per unit has stopped changing (the trend, with the fill's share), whatever the noise
        steady = {f"cycles_per_{unit}": [round(early, 1), round(late, 1)], f"{unit}s": [x[p0], x[p1], x[p2]],
                  "change": round(change, 4), "settled": trend + fill_term <= SETTLED,
                  "error_from_trend_pct": round(100 * trend, 2), "error_from_run_noise_pct": round(100 * noise_term, 2)}
    if not checks:
        error = fill_term + noise_term
        dram_trend = l2_trend = 0.0
    # (the runs' noise as the cycles have it: a run whose schedule moves by chance moves what its L2 holds when,
    # and so what it reads from DRAM; not measured for the bytes by themselves)
    # (a shadow that loses what one wave's blocks share loses it in the tail and again in every wave the projection
    # adds: twice the loss measured on the tail alone)
    dram_error = dram_trend + noise_term + (SHADOW_UNCERTAINTY + 2 * within_wave) * shadow_reads + dirty_unknown
    if warm:
        dram_error += fill_error(*lines_of(sums, warm_sums), warm["fill_at"], projected, DRAM_BYTES)
    dram_error += dram_far
    # the merges a falling trend turned into hits are as uncertain as the hits close to a fill
    merged = projected.get(L2_MERGED, 0.0)
    unfallen = projection_of(sums, warm_sums, 0.0).get(L2_MERGED, merged) if decay > 0 else merged
    l2_hit_error = l2_hit_error_points(projected, max(0.0, unfallen - merged), l2_trend)
    within_wave_hits = hits_within_a_wave(sums, by_wave, plan.trips) if len(by_wave) > 1 else None
    if l2_hit_error is not None:
        l2_hit_error = min(100.0, max(l2_hit_error + hits_far, within_wave_hits or 0.0))
    if exact_warp_insts is not None:
        simulated = projected.get("smsp__inst_executed.sum", 0)
        off = abs(simulated - exact_warp_insts) / exact_warp_insts if exact_warp_insts else 0.0
        record["projected_vs_exact_warp_instructions"] = round(off, 5)
        if off > INSTRUCTION_CHECK:
            warnings.append(f"sampling: the projection gives {simulated:,.0f} warp-instructions against the exact "
                            f"{exact_warp_insts:,} ({off:.1%} off): the blocks or trips are not alike, so the "
                            f"projected cycles are uncertain (--sample off simulates in full)")
            error = max(error, off)
        for key in EXACT_WARP_INSTS:
            projected[key] = exact_warp_insts
    if exact_thread_insts is not None:
        for key in EXACT_THREAD_INSTS:
            projected[key] = exact_thread_insts
    like = results[-1][1] if not checks else next(m for p, m in results if p is projection[-1])
    metrics = as_record(projected, like)
    if spec is not None:  # percentages of peak from the projected counts
        metrics.update(speed_of_light(metrics, spec))
    # the cycles are as uncertain as the DRAM bytes where the DRAM sets them: the bytes' own error (less the runs'
    # noise, already counted) in the share of the time the DRAM is busy: exact where the DRAM bounds the kernel, a
    # bound where it does not (gemm_tile128_sync 1024x512x1024 on 4 SMs with a 2 MiB L2: the bytes ~13% uncertain
    # at 63% busy, the projection 8.9% off the full run's cycles against 6.6% from the trend and the noise alone)
    dram_busy = min(1.0, max(0.0, metrics.get(DRAM_BUSY, 0.0) / 100)) if spec is not None else 0.0
    dram_term = max(0.0, dram_error - noise_term) * dram_busy
    error += dram_term
    if "launch__waves_per_multiprocessor" in metrics:  # the whole grid's, not a reduced run's
        metrics["launch__waves_per_multiprocessor"] = plan.blocks / plan.wave_blocks
    left_out = undeclared(like)
    if left_out:  # a metric nobody declared (gpusim.stats.declared) cannot be projected: how would it combine?
        record["not_projected"] = left_out
        warnings.append(f"sampling: {len(left_out)} metric(s) not declared in gpusim.stats.declared are left out of "
                        f"the projected record: {', '.join(left_out[:5])}")
    record.update({
        "simulated_runs": [{"blocks": p.blocks, "trips": p.trips, "full_waves_before_tail": p.waves,
                            "role": p.role, "cycles": m.get("gpu_sim_cycle"),
                            "warp_instructions": m.get("smsp__inst_executed.sum")} for p, m in results],
        "simulated_warp_instructions": sum(m.get("smsp__inst_executed.sum", 0) for _, m in results),
        "blocks": plan.blocks, "blocks_per_wave": plan.wave_blocks, "tail_blocks": plan.tail_blocks,
        "full_waves_before_tail": plan.full_waves,
        "loop_lines": list(plan.loop_lines), "loop_trips": plan.trips,
        "steady_state": steady,
        **({"l2_merge_decay": round(decay, 3)} if plan.trips is not None else {}),  # merges a trip ~ trip ** -p
        "error_estimate_pct": round(100 * error, 2),
        "error_from_dram_bytes_pct": round(100 * dram_term, 2),
        "dram_error_estimate_pct": round(100 * dram_error, 2),
        **({"l2_hit_error_points": round(l2_hit_error, 2)} if l2_hit_error is not None else {}),
        **({"l2_hits_within_a_wave_pct": round(within_wave_hits, 2)} if within_wave_hits is not None else {}),
        "exact": sorted({"smsp__inst_executed.sum", "smsp__thread_inst_executed.sum", "gpu_sim_insn",
                         "smsp__thread_inst_executed_per_inst_executed.ratio"} & set(metrics))
        if exact_warp_insts is not None else [],
        "projected": "every other metric: counts extrapolated, rates recomputed from the projected counts",
    })
    if cycles:
        record["projected_cycles"] = metrics.get("gpu_sim_cycle")
    if dirty:  # the accounts of what the full run leaves dirty in its L2 at the end (above), in bytes
        record["l2_dirty_bytes_at_end"] = {"kept_by_every_wave": round(max(dirty[:2])),
                                           "surviving_later_waves_by_chance": round(min(dirty[:2])),
                                           **({"through_shadow": round(dirty[2])} if len(dirty) > 2 else {}),
                                           "projected": round(metrics.get(DIRTY_AT_END, 0))}
    if warm:
        record["l2_steady_state"] = {
            "dirty_fraction": warm["dirty_fraction"], f"fill_at_{warm['unit']}s": round(warm["fill_at"], 2),
            f"allocated_bytes_per_{warm['unit']}": warm["allocated_bytes_per_unit"],
            "l2_capacity_bytes": warm["l2_capacity_bytes"],
            "warm_runs": [{"blocks": p.blocks, "trips": p.trips, "full_waves_before_tail": p.waves,
                           "cycles": m.get("gpu_sim_cycle"), "warp_instructions": m.get("smsp__inst_executed.sum"),
                           "dram_bytes_write": m.get("dram__bytes_write.sum")} for p, m in warm["runs"]],
            "error_from_fill_pct": round(100 * fill_term, 2)}
        record["simulated_warp_instructions"] += sum(m.get("smsp__inst_executed.sum", 0) for _, m in warm["runs"])
    if dropped_shadow is not None:
        read, writes, capacity, trips, reduced_trips = reuse
        record["l2_reuse_between_waves"] = {
            "bytes_between_reuses_full": round(bytes_between_reuses(read, writes, trips)),
            "bytes_between_reuses_reduced": round(bytes_between_reuses(read, writes, reduced_trips)),
            "l2_capacity_bytes": round(capacity), "corrected": False,
            "shadow_not_used": f"{dropped_shadow['source']} estimated {mib(dropped_shadow['read_per_trip'])} MiB "
                               f"read a trip, the runs {mib(read)} MiB: the full run keeps the reuse in its L2, so "
                               f"the runs' own DRAM traffic stands"}
    if l2:  # the DRAM traffic is a shadow L2's, which forgets between waves as the full run's L2 does
        metrics["gpusim__l2_capacity_bytes"] = l2["capacity"]
        entry: dict = {"l2_capacity_bytes": l2["capacity"]}
        if reuse is not None:  # (as the runs' own numbers have it, whether or not they agree with the pilot's)
            read, writes, _capacity, trips, reduced_trips = reuse
            entry = {"bytes_between_reuses_full": round(bytes_between_reuses(read, writes, trips)),
                     "bytes_between_reuses_reduced": round(bytes_between_reuses(read, writes, reduced_trips)),
                     **entry}
        record["l2_reuse_between_waves"] = {
            **entry, "corrected": True, "shadow_l2_bytes": l2["shadow"],
            **({"shadow_l2_bytes_by_trips": {str(p.trips): run_shadow_capacity(
                l2["read_per_trip"], l2["wave_writes"], l2["capacity"], plan.trips, p.trips)
                for p in by_wave[min(by_wave)]},
                "shadow_within_wave_loss": round(within_wave, 4)} if len(by_wave) > 1 else {}),
            "estimate": {"from": l2["source"],
                         "dram_read_bytes_per_trip": round(l2["read_per_trip"]),
                         "wave_write_bytes": round(l2["wave_writes"])}}
        if reuse is not None and caveat is None:
            warnings.append(
                f"sampling: {l2['source']} put the bytes between a wave's use of a line and the next wave's beyond "
                f"the {mib(l2['capacity'])} MiB L2 at full size, the runs' own numbers at "
                f"{mib(entry['bytes_between_reuses_full'])} MiB: the DRAM traffic, taken from a "
                f"{mib(l2['shadow'])} MiB shadow of the L2, may be high")
    elif borderline:
        record["l2_reuse_between_waves"] = borderline
    elif caveat is not None:
        record["l2_reuse_between_waves"] = {**caveat, "corrected": False}
        full, reduced, size = (mib(caveat[k]) for k in ("bytes_between_reuses_full", "bytes_between_reuses_reduced",
                                                        "l2_capacity_bytes"))
        warnings.append(
            f"sampling: between one wave's use of a line and the next wave's, the full run streams about {full} "
            f"MiB through the {size} MiB L2 and the reduced runs {reduced} MiB: data the waves share stays in "
            f"the L2 in the runs but not at full size, so the projected DRAM traffic and L2 hit rate may be far off "
            f"(--sample off simulates in full)")
    return metrics, record, warnings


DRAM_BYTES = "dram__bytes.sum"  # (additive: bytes bound for DRAM, see project.additive)
DRAM_BUSY = "dram__throughput.avg.pct_of_peak_sustained_elapsed"  # (a rate the record recomputes from the counts)
L2_RECENT_FILL_HITS = "gpusim__l2_recent_fill_hit_sectors"  # (memory.hierarchy.count_recent_fills)


def l2_hit_error_points(projected: dict, fallen_merges: float = 0.0, trend: float = 0.0) -> float | None:
    """The L2 hit rate's stated error, in points: the projected share of L2 sectors that hit within the longest
    DRAM read a run saw (plus its start spread) of their line's fill, and of the merges a trend falling with the
    trips (`fallen_merges`, project.merge_decay) made hits, and the hits' own trend (`trend`: line_trend's, a share
    of them) as points of the projected hit rate. A request that close to a miss met the line in flight
    wherever the blocks sharing it ran in step, and is then a merge, not a hit: how closely they do is the whole
    grid's timing, which the reduced runs, started spread and cut short, do not reproduce. gemm_tile128 4096^3 on
    h100: the tail alone at 16 trips and 232 blocks hits 42% of its sectors and merges 34%; one full wave of 264
    blocks started at once hits 0.5% and merges 76%; the full run hits 21%. None where the runs did not count."""
    sectors = projected.get("lts__t_sectors.sum", 0)
    if L2_RECENT_FILL_HITS not in projected or not sectors:
        return None
    share = max(0.0, projected[L2_RECENT_FILL_HITS]) + max(0.0, fallen_merges)
    hit_rate = max(0.0, projected.get(L2_HITS, 0.0)) / sectors  # (L2_HITS: 100 x the hit sectors)
    return min(100.0, 100.0 * share / sectors + trend * hit_rate)


WITHIN_WAVE_LOSS = 0.05  # a shadow reading this much more than its run's L2 where no wave came before: too small


def within_wave_loss(own: dict, shadow: dict, by_wave: dict) -> float:
    """How much more the shadow L2s read than their runs' own L2 in the runs of the tail alone (no wave before it,
    so nothing to lose between waves: an excess is what the blocks of one wave share lost in a shadow with too
    few sets in a slice; gemm_tile128_sync 1024x512x1024 on 4 SMs of an H100 given a 2 MiB L2 in 80 slices: +80%
    at 8 trips, in a 1 MiB shadow, none at 16 in 1.3 MiB): the largest relative excess, 0 where there is none."""
    worst = 0.0
    for point in by_wave[min(by_wave)]:
        mine = own[point].get("dram__bytes_read.sum", 0)
        if mine > 0:
            worst = max(worst, shadow[point].get("dram__bytes_read.sum", 0) / mine - 1.0)
    return worst


def fill_error(cold: list[tuple[float, dict]], warm: list[tuple[float, dict]], fill_at: float, projected: dict,
               key: str) -> float:
    """The relative error in `key` a fill point misplaced by FILL_UNCERTAINTY of it makes (warm.py): the difference
    between the warm and the cold runs' slopes over that distance, against the projected count."""
    cold_slope, warm_slope = ((b.get(key, 0) - a.get(key, 0)) / (xb - xa) for (xa, a), (xb, b) in
                              (cold[-2:], warm[-2:]))
    total = projected.get(key, 0)
    return abs(warm_slope - cold_slope) * FILL_UNCERTAINTY * fill_at / total if total > 0 else 0.0


def hits_within_a_wave(sums: dict, by_wave: dict, trips: int | None) -> float | None:
    """The L2 hit rate (percent of its sectors) of the tail alone, projected to the full trips: a run with no wave
    before it hits only on lines its own blocks brought, and blocks that share lines start together at full size
    (launched in order, they retire in order), so each such hit can be a merge there. gemm_tile128 4096^3 on h200:
    the tail alone hits 23%, 31% and 42% of its sectors at 4, 8 and 16 trips (its blocks drift apart as they run)
    and the runs project 72%; the full run hits 29% and merges 63%. A bound on the L2 hit rate's error (None where
    the runs did not count hits)."""
    tail = by_wave[min(by_wave)]
    if L2_HITS not in sums[tail[-1]]:
        return None
    if trips is not None and len(tail) > 1:
        line = project_line([(p.trips, sums[p]) for p in tail], trips)
    else:
        line = sums[tail[-1]]
    sectors = line.get("lts__t_sectors.sum", 0)
    return min(100.0, max(0.0, line.get(L2_HITS, 0.0)) / sectors) if sectors > 0 else None


def line_trend(sums: dict, runs: tuple, x: dict, target: float, key: str) -> float:
    """Half the difference between projecting `key` to `target` from the later and from the earlier pair of the
    three `runs` (in order of their coordinate `x`), against the later pair's projection: the cost a unit still
    changing, times how far it is projected."""
    p0, p1, p2 = runs
    y0, y1, y2 = (sums[p].get(key, 0) for p in runs)
    from_late = extrapolate(x[p1], y1, x[p2], y2, target)
    from_early = extrapolate(x[p0], y0, x[p1], y1, target)
    return abs(from_late - from_early) / 2 / from_late if from_late > 0 else 0.0


# What the DRAM reads a shadow L2 gives are worth: a reuse across waves that the full run's L2 keeps or loses
# depends on how many lines pass through its set between the two uses, against the set's ways, and the shadow stands
# for that distance from an estimate (reuse.py) with fewer ways or sets than the L2 (shadow_l2.py): the spread of
# that count over the sets is not the L2's. Against the full runs of the real-size GEMMs of
# validation/results/sampling-accuracy.json (gemm_tile128 and gemm_multistage at 4096^3 on h100 and a100,
# gemm_hopper_ws at 8192^3 on h100, gemm_blackwell_umma at 8192^3 on b200), their DRAM bytes are -3.6% to +4.8% off,
# and were -0.9% to +8.7% with a shadow of the L2's ways and fewer sets; the stated DRAM error takes 12% of the bytes
# the shadow gives, and twice what the shadow loses within a wave (within_wave_loss).
SHADOW_UNCERTAINTY = 0.12


def with_own_writes(sums: dict, own_sums: dict, own: dict, shadow: dict, by_wave: dict, capacity: int) -> dict:
    """A plan sampling waves with a shadow L2: the projected additive sums with the DRAM writes those of the runs'
    own L2 (what a kernel sends towards DRAM does not depend on the L2's size, but a small shadow evicts a line
    between two writes to its sectors and writes it back twice: gemm_tile128 4096^3 on h100 sends its 67.1 MB of
    C, its shadows' projection 67.6 MB), less what stays dirty at the end: what the last wave leaves dirty in the full-size
    L2: the L2's own dirty bytes at the end of the run of the tail alone at the most trips (it writes last, and
    nothing passes through the L2 after it), and of the wave before it what the shadow keeps dirty at the end of the
    run of both beyond the run of the tail alone (the wave's writes outlive the tail's reads in a shadow of the same
    size exactly when they do in the full-size L2 at full size; a shadow, a fraction of the L2, cannot hold the
    tail's own writes). `own_sums`: the projection of the runs' own L2; `own`, `shadow`: the runs' sums by point,
    from their own L2 and from their shadow; `by_wave`: the projection points by full waves before the tail, each
    in trip order."""
    waves = sorted(by_wave)
    tail, top = by_wave[waves[0]][-1], by_wave[waves[1]][-1]
    survivors = max(0.0, shadow[top].get(DIRTY_LARGEST, 0.0) - shadow[tail].get(DIRTY_LARGEST, 0.0)) \
        if top.trips == tail.trips else 0.0
    last_wave = min(own[tail].get(DIRTY_LARGEST, 0.0) + survivors, capacity)
    out = dict(sums)
    read = out.get("dram__bytes_read.sum", 0.0)
    bound = own_sums.get("dram__bytes_write.sum", out.get("dram__bytes_write.sum", 0.0))
    out["dram__bytes_write.sum"] = bound
    for key in ("dram__bytes.sum", "dram__bytes.sum.per_second"):  # (additive: bytes; see project.additive)
        if key in out:
            out[key] = read + bound
    out[DIRTY_LARGEST] = out[DIRTY_AT_END] = last_wave
    out["gpusim__l2_capacity_bytes"] = capacity  # (the full-size L2's, not the shadow's: ratios caps the dirty bytes)
    return out


# What a borderline projection moves between its two ends (project: the runs' own traffic, keeping every reuse
# between waves, and their shadows', losing them as a smaller L2 does), beside the DRAM bytes bound for DRAM
BETWEEN_ENDS = ("dram__bytes_read.sum", "dram__bytes_write.sum", DIRTY_AT_END, DIRTY_LARGEST, L2_HITS, L2_MERGED,
                "gpusim__l2_recent_fill_hit_sectors")


def with_lost_reuse(kept: dict, lost: dict, share: float, dirty: list[float]) -> tuple[dict, float, float]:
    """(the projection `kept`, from runs keeping every reuse between waves, with its DRAM traffic, what stays dirty
    at the end, L2 hits and merges moved `share` of the way to `lost`'s, from their shadow L2s; the DRAM error and
    the L2 hit rate's error in points that leaves): the distance to the farther end, wherever between them the
    full run falls (reuse.py: the share a set loses climbs too steeply there for an estimate of the distance to
    place it). `dirty`: the accounts of what stays dirty at the end (bytes), where the two ends send the same bytes
    towards DRAM (with_own_writes): the DRAM error then takes the reads' distance and the dirty bytes' distance to
    the farthest account; with none, the whole DRAM traffic's distance."""
    out = dict(kept)
    for key in BETWEEN_ENDS:
        if key in kept and key in lost:
            out[key] = kept[key] + share * (lost[key] - kept[key])
    read, write = out.get("dram__bytes_read.sum", 0.0), out.get("dram__bytes_write.sum", 0.0)
    for key in ("dram__bytes.sum", "dram__bytes.sum.per_second"):  # (additive: bytes; see project.additive)
        if key in out:
            out[key] = read + write
    farther = max(share, 1.0 - share)
    total = ratios(out).get(DRAM_BYTES, 0.0)  # (written: bound for DRAM less what stays dirty at the end)
    if dirty:
        left = ratios(out).get(DIRTY_AT_END, 0.0)
        spread = abs(lost.get("dram__bytes_read.sum", 0.0) - kept.get("dram__bytes_read.sum", 0.0)) * farther + \
            max(abs(left - account) for account in dirty)
    else:
        spread = abs(ratios(lost).get(DRAM_BYTES, 0.0) - ratios(kept).get(DRAM_BYTES, 0.0)) * farther
    dram = spread / total if total > 0 else 0.0
    sectors = kept.get("lts__t_sectors.sum", 0)  # (L2_HITS: 100 x the hit sectors, so points over the sectors)
    hits = farther * abs(lost.get(L2_HITS, 0.0) - kept.get(L2_HITS, 0.0)) / sectors if sectors else 0.0
    return out, dram, hits


def dirty_left_by_waves(own: dict, by_wave: dict, wave_writes: float, distance: float, capacity: int, ways: int,
                        waves: int) -> float:
    """What the full run leaves dirty in its L2 at the end, where a wave's writes outlive the traffic of the waves
    after it by chance (a borderline distance between reuses, see reuse.py): the tail's own dirty bytes (the run of
    the tail alone at the most trips: it writes last) and, of the j-th of the `waves` full waves before it, its
    writes times the share of lines that survive j distances (1 - lost_share). gemm_multistage 4096^3 on l40s (58
    MB between reuses in 96 MiB): the full run leaves 46 MB dirty of its 67 MB of C, this account 34 MB; the runs,
    whose waves pass far fewer bytes, keep all of it, and a projection from their account alone writes back
    nothing."""
    dirty = own[by_wave[min(by_wave)][-1]].get(DIRTY_LARGEST, 0.0)
    for j in range(1, waves + 1):
        survives = 1.0 - lost_share(j * distance, capacity, ways)
        if survives < 1e-4:
            break
        dirty += wave_writes * survives
    return min(dirty, float(capacity))


def run_noise(projection_of, sums: dict, warm_sums: dict) -> float:
    """The projected cycles' relative error from the runs' own noise, at NOISE_BOUND standard deviations: a reduced
    run's cycles move by about RUN_NOISE when its start moves by a cycle (chaotic schedules), and the projection
    multiplies each run by its weight (the default GEMM: 62, -60, -31 and 30 times its four runs), found here by
    nudging one run at a time. `projection_of(sums, warm_sums)`: the projection (additive sums by point)."""
    def cycles(runs: dict) -> dict:
        return {p: {"gpu_sim_cycle": float(m.get("gpu_sim_cycle", 0))} for p, m in runs.items()}

    cold, warm = cycles(sums), cycles(warm_sums)
    base = projection_of(cold, warm)["gpu_sim_cycle"]
    if base <= 0:
        return 0.0
    spread = 0.0
    for in_warm, runs in ((False, cold), (True, warm)):
        for p, m in runs.items():
            nudged = {**runs, p: {"gpu_sim_cycle": m["gpu_sim_cycle"] * (1 + RUN_NOISE)}}
            moved = projection_of(cold, nudged) if in_warm else projection_of(nudged, warm)
            spread += (moved["gpu_sim_cycle"] - base) ** 2
    return NOISE_BOUND * math.sqrt(spread) / base


def two_regimes(cold: list[tuple[float, dict]], warm: list[tuple[float, dict]], fill_at: float, x: float) -> dict:
    """Additive quantities at `x` along one factor: the line of the `cold` points (x, sums: runs from an empty
    L2) up to `fill_at`, then the slope of the `warm` points' line (runs from a warm L2) for the rest (see
    warm.py). Steady-state values and maxima are the last warm run's; a count is never below 0."""
    at_fill = project_line(cold, fill_at)
    (x0, a), (x1, b) = warm[-2:]
    out = {}
    for key, value in at_fill.items():
        if key in STEADY_STATE_VALUE or key in MAXIMUM:
            out[key] = max(value, b.get(key, value)) if key in MAXIMUM else b.get(key, value)
            continue
        slope = (b.get(key, 0) - a.get(key, 0)) / (x1 - x0) if x1 != x0 else 0.0
        out[key] = max(0.0, value + slope * (x - fill_at))
    if DIRTY_LARGEST in b:  # what the full run leaves dirty at its end: a warm L2's share, as the warm runs do
        out[DIRTY_LARGEST] = b[DIRTY_LARGEST]
    return out


def _reuse_bytes(plan: Plan, sums: dict, by_wave: dict[int, list[Point]]) -> tuple | None:
    """reuse_between_waves's arguments for a plan sampling loop trips on a grid of more than a wave (None: another
    plan): with waves sampled too, from its tail runs (the tail alone: DRAM reads a trip) and the difference a full
    wave makes to the bytes written (its C tiles), at the most trips; with trips alone (every run the whole grid),
    a wave's share of the grid's reads a trip and of its bytes bound for DRAM. `by_wave`: the projection points by full waves before the tail, each list in trip
    order (as project sorts them)."""
    if not plan.trips_over_waves or not by_wave:
        return None
    read, written = "dram__bytes_read.sum", "dram__bytes_write.sum"  # (written: bound for DRAM, see additive)
    if len(by_wave) == 1:  # loop trips alone over the whole grid: its reads a trip and its writes, a wave's share
        a, b = next(iter(by_wave.values()))[-2:]
        if read not in sums[b] or b.trips == a.trips:
            return None
        share = plan.wave_blocks / max(1, plan.blocks)
        per_trip = (sums[b][read] - sums[a][read]) / (b.trips - a.trips) * share
        return per_trip, sums[b].get(written, 0) * share, sums[b].get("gpusim__l2_capacity_bytes", 0), plan.trips, \
            b.trips
    tail, wave = (by_wave[w] for w in sorted(by_wave)[:2])
    (a, b), top = tail[-2:], wave[-1]
    if read not in sums[b] or top.trips != b.trips or b.trips == a.trips:
        return None
    per_trip = (sums[b][read] - sums[a][read]) / (b.trips - a.trips)
    wave_writes = (sums[top].get(written, 0) - sums[b].get(written, 0)) / max(1, top.waves - b.waves)
    return per_trip, wave_writes, sums[b].get("gpusim__l2_capacity_bytes", 0), plan.trips, b.trips
