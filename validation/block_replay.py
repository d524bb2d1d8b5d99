"""Would a block-level replay project a long kernel's cycles from a short run? Fits a block's cost from a block
schedule (`block_schedule.py --out`) and replays the whole launch with it: the engine's dispatcher (one block per
SM per round at the launch, then the next block to the SM whose block retired), every block on an SM advancing
at the cost a trip of the blocks then resident there.

The fit, from the schedule: the cost a trip with k blocks on the SM (trips 3 on, where the residency held, as
block_schedule prints it), and a block's work beyond its trips (its prologue, its first trips' extra cost and its
epilogue, in trips at those costs: the median over blocks of the trips its lifetime pays for, less its trips).
`--draws D` replays D times more with each block's work drawn from the fitted trips' spread (a trip's cost sd,
independent trips) and reports their mean and range.

    python validation/block_replay.py /tmp/blocks-628x8.json --blocks 1024 --trips 128 --sms 132 --per-sm 3
    python validation/block_replay.py /tmp/full.json --blocks 1024 --trips 128 --sms 132 --per-sm 3 --full 883142

Measured (README "Full-size kernels", block-level replay): it does not beat the bilinear projection.
"""

from __future__ import annotations

import argparse
import bisect
import json
import random
import statistics
import sys
from collections import defaultdict
from pathlib import Path

FIRST_STEADY_TRIP = 3  # trips before this one (1-based: trips 1 and 2) carry a block's start transient


class ScheduleError(Exception):
    pass


def load_schedule(path: str) -> dict:
    """{block: {"sm", "start", "end", "trips": [[cycle, blocks on its SM], ...]}} and the run's trips, from
    block_schedule.py's JSON."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ScheduleError(f"{path}: cannot read it ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise ScheduleError(f"{path}: line {exc.lineno}: not JSON ({exc.msg})") from None
    blocks = data.get("block") if isinstance(data, dict) else None
    if not isinstance(blocks, dict) or not blocks:
        raise ScheduleError(f"{path}: expected block_schedule.py's output (a 'block' object of blocks)")
    out = {}
    for key, record in blocks.items():
        try:
            out[int(key)] = {"sm": int(record["sm"]), "start": int(record["start"]), "end": int(record["end"]),
                             "trips": [(int(t), int(k)) for t, k in record["trips"]]}
        except (KeyError, TypeError, ValueError):
            raise ScheduleError(f"{path}: block {key}: expected sm, start, end and trips [[cycle, blocks], ...]") \
                from None
    trips = {len(r["trips"]) for r in out.values()}
    if len(trips) != 1 or 0 in trips:
        raise ScheduleError(f"{path}: blocks ran {sorted(trips)[:4]} trips: expected the same number, at least 1")
    return {"blocks": out, "trips": trips.pop(), "cycles": data.get("cycles")}


def trip_costs(blocks: dict) -> dict[int, tuple[float, float, int]]:
    """Blocks resident -> (mean cycles a trip, sd, trips counted), trips FIRST_STEADY_TRIP on where it held."""
    costs = defaultdict(list)
    for record in blocks.values():
        ticks = record["trips"]
        for (t0, k0), (t1, k1) in zip(ticks[FIRST_STEADY_TRIP - 1:], ticks[FIRST_STEADY_TRIP:]):
            if k0 == k1:
                costs[k0].append(t1 - t0)
    return {k: (statistics.mean(v), statistics.pstdev(v), len(v)) for k, v in sorted(costs.items())}


def fill_costs(costs: dict[int, float], per_sm: int) -> dict[int, float]:
    """A cost for every residency 1..per_sm: one the schedule lacks is the nearest residency's it has (the larger
    on a tie), as if a block's trip cost no less with fewer blocks beside it (an upper bound there)."""
    if not costs:
        raise ScheduleError("no trip of the schedule held its SM's residency: nothing to fit")
    return {k: costs[k] if k in costs else costs[min(costs, key=lambda have: (abs(have - k), -have))]
            for k in range(1, per_sm + 1)}


def residency_history(blocks: dict) -> dict[int, tuple[list[int], list[int]]]:
    """SM -> (cycles its residency changed, the residency from each on)."""
    events = defaultdict(list)
    for record in blocks.values():
        events[record["sm"]] += [(record["start"], 1), (record["end"], -1)]
    out = {}
    for sm, changes in events.items():
        changes.sort()
        times, levels, level = [], [], 0
        for t, step in changes:
            level += step
            if times and times[-1] == t:
                levels[-1] = level
            else:
                times.append(t)
                levels.append(level)
        out[sm] = (times, levels)
    return out


def extra_work(blocks: dict, trips: int, cost: dict[int, float]) -> float:
    """The median over blocks of the trips (at cost[k] with k blocks on the SM) a block's lifetime pays for, less
    its trips: its work beyond the loop, in trips."""
    history = residency_history(blocks)
    extras = []
    for record in blocks.values():
        times, levels = history[record["sm"]]
        units, t = 0.0, record["start"]
        at = bisect.bisect_right(times, t) - 1
        while t < record["end"]:
            following = times[at + 1] if at + 1 < len(times) else record["end"]
            until = min(following, record["end"])
            units += (until - t) / cost[max(1, levels[at])]
            t, at = until, at + 1
        extras.append(units - trips)
    return statistics.median(extras)


def replay(nblocks: int, sms: int, per_sm: int, work: float, cost: dict[int, float], sd_trip: float = 0.0,
           trips: int = 0, seed: int | None = None) -> float:
    """The cycle the last block ends: blocks placed as the engine's dispatcher places them, each SM's blocks
    advancing at 1 / cost[k] trips a cycle with k resident. With `seed`, each block's work is drawn with the sd
    of `trips` independent trips of sd `sd_trip` (in trips: sd_trip / cost at full residency)."""
    rng = random.Random(seed) if seed is not None else None
    spread = (sd_trip / cost[per_sm]) * trips ** 0.5 if rng is not None else 0.0

    def new_work() -> float:
        return max(0.0, work + rng.gauss(0.0, spread)) if rng is not None else work

    resident: list[list[float]] = [[] for _ in range(sms)]
    placed = 0
    for _ in range(per_sm):  # one block per SM per round, as Dispatcher.start
        for sm in range(sms):
            if placed < nblocks:
                resident[sm].append(new_work())
                placed += 1
    now = 0.0
    while True:
        step, due = None, []
        for sm, works in enumerate(resident):
            if works:
                until = min(works) * cost[len(works)]
                if step is None or until < step - 1e-9:
                    step, due = until, [sm]
                elif abs(until - step) <= 1e-9:
                    due.append(sm)
        if step is None:
            return now
        now += step
        for sm, works in enumerate(resident):
            if works:
                done = step / cost[len(works)]
                works[:] = [w - done for w in works]
        for sm in due:  # retire, and place the next block on that SM (Dispatcher.block_retired)
            left = [w for w in resident[sm] if w > 1e-9]
            retired = len(resident[sm]) - len(left)
            resident[sm] = left
            for _ in range(retired):
                if placed < nblocks:
                    resident[sm].append(new_work())
                    placed += 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("schedule", help="block_schedule.py --out JSON (a full or a reduced run)")
    parser.add_argument("--blocks", type=int, required=True, help="the launch's blocks")
    parser.add_argument("--trips", type=int, required=True, help="the hot loop's trips at full size")
    parser.add_argument("--sms", type=int, required=True)
    parser.add_argument("--per-sm", type=int, required=True, help="blocks resident per SM (occupancy)")
    parser.add_argument("--draws", type=int, default=0, help="replays with drawn block work, besides the mean's")
    parser.add_argument("--full", type=int, default=None, help="the full run's cycles, to compare with")
    parser.add_argument("--out", default=None, help="append the result as a JSON line to this file")
    args = parser.parse_args()
    try:
        for name in ("blocks", "trips", "sms", "per_sm"):
            if getattr(args, name) < 1:
                raise ScheduleError(f"--{name.replace('_', '-')} {getattr(args, name)}: expected a whole number >= 1")
        if args.draws < 0:
            raise ScheduleError(f"--draws {args.draws}: expected a whole number >= 0")
        schedule = load_schedule(args.schedule)
        fitted = trip_costs(schedule["blocks"])
        cost = fill_costs({k: c for k, (c, _sd, _n) in fitted.items()}, args.per_sm)
        extra = extra_work(schedule["blocks"], schedule["trips"], cost)
    except ScheduleError as exc:
        sys.exit(f"block_replay.py: {exc}")
    work = args.trips + extra
    cycles = replay(args.blocks, args.sms, args.per_sm, work, cost)
    sd = fitted.get(args.per_sm, (0.0, 0.0, 0))[1]
    draws = [replay(args.blocks, args.sms, args.per_sm, work, cost, sd, args.trips, seed) for seed in range(args.draws)]
    for k, c in cost.items():
        mean, spread, count = fitted.get(k, (c, 0.0, 0))
        print(f"  {k} block(s) on the SM: {c:,.0f} cycles a trip " +
              (f"(sd {spread:,.0f}, {count:,} trips)" if count else "(not in the schedule: the nearest's)"))
    print(f"  a block's work beyond its trips: {extra:.2f} trips")
    line = f"replayed: {cycles:,.0f} cycles"
    if draws:
        line += f"; {len(draws)} draws {statistics.mean(draws):,.0f} ({min(draws):,.0f} to {max(draws):,.0f})"
    if args.full:
        line += f"; full run {args.full:,}: {(cycles - args.full) / args.full:+.1%}"
    print(line)
    if args.out:
        with open(args.out, "a") as out:
            out.write(json.dumps({"schedule": args.schedule, "schedule_trips": schedule["trips"],
                                  "schedule_blocks": len(schedule["blocks"]), "schedule_cycles": schedule["cycles"],
                                  "cost_per_trip": {k: round(c, 1) for k, c in cost.items()},
                                  "extra_trips": round(extra, 3), "replayed": round(cycles),
                                  "draws": [round(d) for d in draws], "full": args.full}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
