"""Which reduced simulations stand for a kernel (a sampling plan), and the kernels they run (pure).

The method is steady-state projection, the principle of PKA's Principal Kernel Projection (Avalos Baddouh et
al., MICRO 2021: once a kernel's throughput is stable the rest of it is projected, not simulated), measured
by difference between reduced runs that keep what sets a kernel's time:

* **Loop trips.** The hot loop of a YAML program (its top-level loops whose trip count is the same for every
  warp and the largest of the program's) runs for n_a and n_b trips instead of N; everything else (grid,
  waves, prologue, epilogue, addresses) is as written. The difference between the two runs is what n_b - n_a
  trips of the steady state cost, with every resident block competing as at full size; a third, shorter run
  (n_c) checks that the cost per trip has settled (`auto` runs the kernel in full when it has not).
* **Waves.** A grid of B blocks on a GPU holding W at once runs as ceil(B / W) waves, the last one holding
  r = B - W * (waves - 1) blocks. The runs keep the grid's first r + w W blocks for a few w: the tail is always
  simulated as it runs, not averaged away, and the difference between two w is what a full wave costs. Alone,
  waves run at w_c < w_a < w_b (w_b the largest the budget allows, below the launch's full waves; the cost per
  wave from w_c to w_a checks the one from w_a to w_b: short blocks overlap across waves, so the first waves
  cost more than later ones); with loop trips, at w = 0 and 1 (the trips' runs are long). Blocks must be
  alike: the projected instruction count is checked against the exact one (the mix's), and `auto` runs the
  kernel in full when they differ by more than 1%.

With both, four runs (two wave counts x two trip counts) give every count bilinearly. Instruction counts
that the mix gives exactly stay exact; everything time-based is projected (see project.py).
"""

from __future__ import annotations

import attrs

from ..errors import GpusimError
from ..options import MIN_SAMPLE_TRIPS, check_sample_trips
from ..workload.expr import compile_expr
from ..workload.program import If, Loop

AUTO_THRESHOLD = 5_000_000  # warp-instructions: `auto` samples kernels above this (about a minute at full detail)
GLOBAL_ACCESS_COST = 2  # a global load or store costs about twice an instruction to simulate (its sectors through
# L1, L2 and DRAM): the stream copy's 4.2 M warp-instructions, all but 8 K of them global, take 99 s on h100 where
# 5 M of a GEMM's take about a minute
BUDGET = 1_500_000  # warp-instructions the reduced runs may simulate together (trips: see STEADY_FROM)
MIN_TRIPS = 8  # a loop of fewer trips is not sampled (too little to gain, and no steady state to find)
STAGGER_TRIPS = 2  # the pilot of a staggered plan: its cycles (the tail alone at this many trips) are the spread
STEADY_FROM = 4  # trips: the first ones are a transient (cold L2, blocks in lockstep merging on the same lines), so
# the projection's shorter run takes at least this many where the loop has 4 * STEADY_FROM trips, whatever the budget
MAX_REACH = 8  # trips: the projection reaches at most this many times the trips its longest run made, past the
# budget up to REACH_BUDGET: a 128-trip loop is run to 16 at least (gemm_tile128 and gemm_multistage 4096^3 on a100
# settled over 4, 6 and 8 trips and still missed the full runs by +9.5% and +12.2%)
REACH_BUDGET = 10 * BUDGET
MIN_FULL_WAVES = 2  # waves are sampled with loop trips when at least this many full waves precede the tail
MIN_FULL_WAVES_ALONE = 3  # and alone (a check point below the two) when at least this many do
MAX_SHARE = 0.5  # waves alone are sampled only when the reduced runs simulate at most half the blocks
SETTLED = 0.05  # the error estimate (see runner.project) up to which the steady state counts as reached


@attrs.frozen
class Point:
    """One reduced run: the grid's first `blocks` blocks, the sampled loops at `trips` trips (None: as written)."""
    blocks: int
    trips: int | None
    waves: int  # full waves before the tail wave (the wave factor's coordinate)
    role: str  # "projection" or "check"
    warp_insts: int = 0  # expected: the grid's share of the mix at this many trips (for progress and ordering)


@attrs.frozen
class Plan:
    method: str  # "loop trips and waves", "loop trips", "waves" or "full"
    reason: str  # why this method (for "full": why not sampled)
    blocks: int  # the launch's
    wave_blocks: int  # resident at once on the whole GPU
    tail_blocks: int
    full_waves: int  # before the tail
    loop_lines: tuple[int, ...] = ()
    trips: int | None = None  # the sampled loops' trips as written
    points: tuple[Point, ...] = ()
    # waves sampled with trips: the runs' first blocks start spread out (see STAGGER_TRIPS), as the blocks of a
    # long kernel's later waves do, and a pilot run (the tail at STAGGER_TRIPS trips) says over how many cycles
    staggered: bool = False
    trips_asked: bool = False  # the loop's trips are --sample-trips's, not the budget's (never extended)

    @property
    def sampled(self) -> bool:
        return bool(self.points)

    @property
    def trips_over_waves(self) -> bool:
        """Loop trips sampled on a grid with a full wave before its tail: waves that may share data in the L2,
        which a reduced run keeps longer than the full run (see reuse.py)."""
        return self.trips is not None and self.full_waves >= 1


def hot_loops(kernel) -> tuple[list[Loop], int | None]:
    """The loop family that sets the kernel's length, and the shortest trip count in it (None: no family).

    The family is the program's top-level loops (inside top-level ifs too) of a constant count: the longest,
    and those of at least MIN_TRIPS and half its trips whose count is written in the same parameters (K / BK -
    STAGES beside K / BK: an epilogue's 256 / 32 is not). A warp-specialised kernel runs one loop per role, tied
    by mbarriers, cluster barriers or bar.sync, whose counts differ by a few trips (a producer's K / BK - STAGES
    against its consumers' K / BK - 1): shortened together, by the same number of trips, every barrier still
    sees its arrivals; shortened alone, one role waits for arrivals that never come. A plain kernel's family is
    its hot loop (and any loop of nearly its count, which scales with it). A loop shorter than MIN_TRIPS (a
    pipeline's prologue of STAGES copies) keeps its count."""
    found: list[Loop] = []

    def visit(nodes) -> None:
        for node in nodes:
            if type(node) is Loop and node.count.constant is not None:
                found.append(node)
            elif type(node) is If:
                visit(node.then)
                visit(node.orelse)

    visit(getattr(kernel, "program", ()))
    whole = [n for n in found if float(n.count.constant).is_integer()]
    if not whole:
        return [], None
    top = max(int(n.count.constant) for n in whole)
    tied = frozenset().union(*(n.count.names for n in whole if int(n.count.constant) == top))
    family = [n for n in whole if int(n.count.constant) == top or
              int(n.count.constant) >= max(MIN_TRIPS, top / 2) and n.count.names & tied]
    return family, min(int(n.count.constant) for n in family)


def with_trips(kernel, loops: list[Loop], trips: int):
    """The kernel with its loop family `loops` (hot_loops's) shortened together: the shortest at `trips` trips,
    each other one `trips` plus its own count's excess over the shortest (the rest of the program as written)."""
    base = min((int(n.count.constant) for n in loops), default=0)
    chosen = {id(n): trips + int(n.count.constant) - base for n in loops}

    def rewrite(nodes):
        out = []
        for node in nodes:
            if type(node) is Loop and id(node) in chosen:
                count = compile_expr(chosen[id(node)], node.count.where, lambda name: False)
                node = attrs.evolve(node, count=count)
            elif type(node) is If:
                node = attrs.evolve(node, then=rewrite(node.then), orelse=rewrite(node.orelse))
            out.append(node)
        return tuple(out)

    return attrs.evolve(kernel, program=rewrite(kernel.program), address_cache={}, register_cache={})


def ring_trips(n: int, trips: int, up: bool = True) -> int:
    """n trips of a loop written for `trips`, moved by one (up, or down) where the two differ in parity: a kernel
    that picks a ring stage from the loop's full count, as flash_attention3's last P V does (it waits on
    v_full{(seq / BN - 1) % STAGES}), finds it filled only when the trips dropped are a whole number of turns of
    the ring (FA3 at 2K keys, 14 trips, run at 1 trip: its consumers waited on a stage its producer never filled)."""
    if (trips - n) % 2 == 0:
        return n
    return n + 1 if up or n == 0 else n - 1


def make_plan(kernel, wave_blocks: int, total_insts: int | None, mode: str, cost=None,
              trips_wanted: int | None = None, global_insts: int = 0) -> Plan:
    """The runs that stand for `kernel` under `--sample mode`. `wave_blocks`: blocks resident at once on the
    GPU; `total_insts`: its warp-instructions (None: not counted, a trace too short in waves to sample);
    `cost(trips)`: warp-instructions of the whole grid at `trips` trips of the hot loop (from the mix).
    `trips_wanted` (`--sample-trips N`): the hot loop's runs at N / 4, N / 2 and N trips, whatever the budget and
    the kernel's size (sampled as `on` would); a kernel whose plan would not sample its loop is an error.
    `global_insts`: how many of its warp-instructions are global loads and stores (weighed by
    GLOBAL_ACCESS_COST against AUTO_THRESHOLD)."""
    blocks = kernel.launch.nblocks
    tail = blocks % wave_blocks or wave_blocks
    full_waves = (blocks - tail) // wave_blocks
    base = dict(blocks=blocks, wave_blocks=wave_blocks, tail_blocks=tail, full_waves=full_waves)
    if trips_wanted is not None:
        check_sample_trips(trips_wanted, mode)
        mode = "on"
    if mode == "off":
        return Plan("full", "--sample off", **base)
    weighed = None if total_insts is None else total_insts + (GLOBAL_ACCESS_COST - 1) * global_insts
    if mode == "auto" and weighed is not None and weighed <= AUTO_THRESHOLD:
        counted = (f"{total_insts:,} warp-instructions" if not global_insts else
                   f"{total_insts:,} warp-instructions ({weighed:,} with each of its {global_insts:,} global "
                   f"accesses counted {GLOBAL_ACCESS_COST} times)")
        return Plan("full", f"{counted}, at most {AUTO_THRESHOLD:,}: simulated in full (--sample on samples it)",
                    **base)
    sample_waves = full_waves >= MIN_FULL_WAVES
    loops, trips = hot_loops(kernel)
    sample_trips = trips is not None and trips >= MIN_TRIPS and cost is not None
    uneven = sample_trips and not _even_trips(cost, trips)
    sample_trips = sample_trips and not uneven
    if trips_wanted is not None and not sample_trips:
        name = getattr(kernel, "name", "the kernel")
        why = ("its longest constant loop does not issue the same work every trip" if uneven else
               "a trace's loops are not known: its waves are sampled, not its loops" if cost is None else
               "it has no loop of a constant trip count to sample" if trips is None else
               f"its longest constant loop takes {trips} trips (< {MIN_TRIPS})")
        raise GpusimError(f"--sample-trips {trips_wanted}: {name}: {why}")
    if not (full_waves >= MIN_FULL_WAVES_ALONE or sample_trips):
        why = [f"{blocks:,} blocks make {full_waves} full wave(s) of {wave_blocks:,} before the tail"]
        if uneven:
            why.append(f"its longest constant loop ({trips} trips) does not issue the same work every trip")
        else:
            why.append("no loop of a constant count of at least {MIN_TRIPS} trips" if trips is None or cost is None
                       else f"its longest constant loop takes {trips} trips (< {MIN_TRIPS})")
        return Plan("full", "no steady state to sample: " + "; ".join(why).replace("{MIN_TRIPS}", str(MIN_TRIPS)),
                    **base)
    def at(w: int) -> tuple[int, int]:  # (blocks, full waves before the tail)
        return tail + w * wave_blocks, w

    if not sample_trips:  # waves alone: w_c < w_a < w_b full waves, the largest w_b the budget allows
        if full_waves < MIN_FULL_WAVES_ALONE:
            return Plan("full", f"no steady state to sample: {blocks:,} blocks make {full_waves} full wave(s) of "
                                f"{wave_blocks:,} before the tail, and a loop of a constant count of at least "
                                f"{MIN_TRIPS} trips is not there to sample instead", **base)
        def share(w_b: int) -> int:  # blocks the runs at w_b / 4, w_b / 2 and w_b simulate together
            return sum(at(w)[0] for w in (w_b // 4, w_b // 2, w_b))

        w_b = 2
        while 2 * w_b < full_waves and share(2 * w_b) <= blocks * MAX_SHARE and \
                share(2 * w_b) / blocks * (total_insts or 0) <= BUDGET:
            w_b *= 2
        chosen = ((w_b // 2, "projection"), (w_b, "projection"), (w_b // 4, "check"))
        simulated = sum(at(w)[0] for w, _ in chosen)
        if simulated > blocks * MAX_SHARE:
            return Plan("full", f"no gain from sampling: {blocks:,} blocks make {full_waves} full waves of "
                                f"{wave_blocks:,} and a tail of {tail:,}; the reduced runs would simulate "
                                f"{simulated:,} blocks", **base)
        points = tuple(Point(at(w)[0], None, w, role, round((total_insts or 0) * at(w)[0] / blocks))
                       for w, role in chosen)
        return Plan("waves", f"{full_waves} full waves of {wave_blocks:,} blocks and a tail of {tail:,}: the tail "
                             f"after {w_b // 4}, {w_b // 2} and {w_b} full waves", **base, points=points)
    # trips: the largest n_b (n_a = n_b / 2, check n_c = n_b / 4) the budget allows, at most N / 2; waves (when
    # sampled too): the tail alone and after one full wave
    wave_points = [at(0), at(1)] if sample_waves else [(blocks, full_waves)]
    if trips_wanted is not None:
        if not MIN_SAMPLE_TRIPS <= trips_wanted <= trips // 2:
            raise GpusimError(f"--sample-trips {trips_wanted}: expected a whole number from {MIN_SAMPLE_TRIPS} to "
                              f"{trips // 2} (half the hot loop's {trips} trips)")
        n_b = trips_wanted
    else:
        n_b = 4
        while 2 * n_b <= trips // 2:
            more = _points_cost(cost, blocks, wave_points, 2 * n_b)
            if not (n_b < 2 * STEADY_FROM or more <= BUDGET or (n_b * MAX_REACH < trips and more <= REACH_BUDGET)):
                break
            n_b *= 2
    n_b, n_a = ring_trips(n_b, trips), ring_trips(n_b // 2, trips)
    n_c = ring_trips(n_b // 4, trips, up=False)
    if n_c >= n_a:  # (an odd count whose n_b / 4 is even)
        n_c = ring_trips(n_a - 1, trips, up=False)
    points = []
    for b, w in wave_points:
        points += [Point(b, n, w, "projection", round(cost(n) * b / blocks)) for n in (n_a, n_b)]
    b, w = wave_points[0]
    points.append(Point(b, n_c, w, "check", round(cost(n_c) * b / blocks)))
    method = "loop trips and waves" if sample_waves else "loop trips"
    lines = tuple(n.line for n in loops)
    counts = [int(n.count.constant) for n in loops]
    family = "" if len(set(counts)) == 1 else \
        f"; {' / '.join(map(str, counts))} trips as written, shortened together by the same count"
    reason = f"the loop{'s' if len(lines) > 1 else ''} at line{'s' if len(lines) > 1 else ''} " \
             f"{', '.join(map(str, lines))} ({trips} trips{family}) at {n_c}, {n_a} and {n_b} trips" + \
             (" (--sample-trips)" if trips_wanted is not None else "")
    if sample_waves:
        reason += f"; {full_waves} full waves of {wave_blocks:,} blocks and a tail of {tail:,}: the tail alone " \
                  f"and after one full wave"
    if sample_waves:
        reason += "; the first blocks of each run start spread over the time the tail takes for " \
                  f"{ring_trips(STAGGER_TRIPS, trips)} trips (a pilot run), as later waves do"
    return Plan(method, reason, **base, loop_lines=lines, trips=trips, points=tuple(points), staggered=sample_waves,
                trips_asked=trips_wanted is not None)


def extend_trips(plan: Plan, why: str) -> Plan | None:
    """`plan` with its loop's runs at twice the trips: n and 2n for each wave count where they were n/2 and n, the
    check at n/2 (the runs at n and the check at n/2 are runs the plan has made); None where 2n would pass half the
    loop's trips. A new run's warp-instructions are extrapolated from the two it follows (the loop's trips issue
    alike, see _even_trips). `why`: what the shorter runs lacked, for the plan's reason."""
    projection = [p for p in plan.points if p.role == "projection"]
    if plan.trips is None or not projection:
        return None
    n_b = max(p.trips or 0 for p in projection)
    n_a = max(p.trips or 0 for p in projection if p.trips != n_b)
    n_2 = ring_trips(2 * n_b, plan.trips)
    if n_2 > plan.trips // 2 or n_a < 1:
        return None
    points: list[Point] = []
    for p in projection:
        if p.trips != n_b:
            continue
        low = next(q for q in projection if q.blocks == p.blocks and q.trips == n_a)
        longer = p.warp_insts + (p.warp_insts - low.warp_insts) * (n_2 - n_b) // max(1, n_b - n_a)
        points += [p, Point(p.blocks, n_2, p.waves, "projection", longer)]
    check = next(p for p in plan.points if p.role == "check")
    points.append(attrs.evolve(next(q for q in projection if q.blocks == check.blocks and q.trips == n_a),
                               role="check"))
    before = f"{check.trips}, {n_a} and {n_b}" if (check.trips or 0) < n_a else \
        f"{n_a} and {n_b}, checked at {check.trips}"
    longer = f" at {n_a}, {n_b} and {n_2} trips (from {before}: {why})"
    reason = plan.reason.replace(f" at {check.trips}, {n_a} and {n_b} trips", longer, 1).replace(
        f" at {n_a} and {n_b} trips, checked at {check.trips}", longer, 1)  # (after a midpoint_check)
    return attrs.evolve(plan, reason=reason, points=tuple(points))


def midpoint_check(plan: Plan) -> Plan | None:
    """`plan` with its check run moved from n/4 trips to 3n/4, between the projection's n/2 and n (None: the check
    is there already, or n/2 and n are too close). The check at n/4 asks whether the cost a trip settled from n/4
    on, where the first trips are a transient (STEADY_FROM); where it has not, whether it settled over the trips
    the projection uses is the question that decides, at the cost of one run (against doubling every run's trips,
    extend_trips). The run is the one after the most full waves: its cost a trip is the one the projection
    multiplies by the waves (gemm_multistage 4096^3 on h100: the tail alone cost 1,081 cycles a trip at 4, 6 and 8
    trips, while the tail after a wave still fell from 1,221 a trip; checked on the tail alone, +6.8% against the
    full run)."""
    projection = [p for p in plan.points if p.role == "projection"]
    check = next((p for p in plan.points if p.role == "check"), None)
    if plan.trips is None or check is None or check.trips is None or not projection:
        return None
    waves = max(p.waves for p in projection)
    pair = sorted({p.trips for p in projection if p.waves == waves and p.trips is not None})
    if len(pair) != 2 or check.trips >= pair[0] or pair[1] - pair[0] < 2:
        return None
    n_a, n_b = pair
    if plan.trips >= MAX_REACH * n_b:  # projected that far, a cost settled over n/2 to n says too little: the
        return None  # trips doubled (flash_attention b1 h16 s4K on a100: settled over 4, 6 and 8 of 64 trips and
    # -5.7% against the full run; at 4, 8 and 16 trips -1.9%)
    middle = ring_trips((n_a + n_b) // 2, plan.trips)
    if not n_a < middle < n_b:
        return None
    low, high = (next(p for p in projection if p.waves == waves and p.trips == n) for n in (n_a, n_b))
    insts = low.warp_insts + (high.warp_insts - low.warp_insts) * (middle - n_a) // (n_b - n_a)
    reason = plan.reason.replace(f" at {check.trips}, {n_a} and {n_b} trips",
                                 f" at {n_a} and {n_b} trips, checked at {middle}", 1)
    if waves != check.waves:
        reason = reason.replace(" after one full wave", f" after one full wave (checked there at {middle} trips)", 1)
    moved = attrs.evolve(low, role="check", trips=middle, warp_insts=insts)
    return attrs.evolve(plan, reason=reason, points=(*projection, moved))


def reach_warning(plan: Plan) -> str | None:
    """Where --sample-trips has the projection reach past MAX_REACH times its longest run, what the stated error does
    not cover: it takes the cost of a trip as settled over the runs, and a cost still moving past them moves the
    answer by more (gemm_multistage 4096^3 on a100 at --sample-trips 8: its 128 trips projected from runs of at most
    8, stated ~13.3%, +25.3% against the full run; the default plan ran it to 16 trips, +0.9%). None elsewhere."""
    longest = max((p.trips or 0 for p in plan.points if p.role == "projection"), default=0)
    if not plan.trips_asked or plan.trips is None or longest <= 0 or plan.trips <= MAX_REACH * longest:
        return None
    return (f"sampling: --sample-trips projects the loop's {plan.trips} trips from runs of at most {longest}, "
            f"{plan.trips / longest:.0f} times as far (the default plan reaches at most {MAX_REACH} times): the "
            f"stated error assumes the cost of a trip has settled by {longest} trips and does not cover one still "
            f"changing (--sample-trips {-(-plan.trips // MAX_REACH)} or more, or the default plan, reach no further)")


def _even_trips(cost, trips: int) -> bool:
    """Whether every trip of the hot loop issues the same warp-instructions (within 1%): the first trips, the
    middle ones and the last (a loop whose work shrinks or grows by trip has no steady state to project)."""
    first = cost(2) - cost(1)
    rest = (cost(trips) - cost(2)) / (trips - 2)
    middle = (cost(trips // 2 + 1) - cost(trips // 2))
    return first > 0 and abs(rest - first) <= 0.01 * first and abs(middle - first) <= 0.01 * first


def _points_cost(cost, blocks: int, wave_points, n_b: int) -> float:
    """Warp-instructions of the runs: n_b / 2 and n_b trips at every wave point, n_b / 4 at the first."""
    total = sum(b / blocks * (cost(n_b) + cost(n_b // 2)) for b, _ in wave_points)
    return total + wave_points[0][0] / blocks * cost(n_b // 4)


__all__ = ["AUTO_THRESHOLD", "GLOBAL_ACCESS_COST", "BUDGET", "Plan", "Point", "extend_trips", "hot_loops", "make_plan",
           "midpoint_check", "reach_warning", "ring_trips", "with_trips"]
