"""Where and when a kernel's blocks ran: each block's SM, start and end, and the cycle its warp 0 began each trip of
the hot loop with how many blocks were then on its SM. The data behind README "Full-size kernels" (a block's cost a
trip by blocks resident, the tail's landing, the slowest group): the calibration set a block-level replay would
need. Simulated in full (or reduced to `--trips` trips and the first `--blocks` blocks, as a sampled run's
reduced runs are, with `--stagger`).

    python validation/block_schedule.py workloads/gemm_tile128.yaml --arch h100 --out /tmp/blocks.json
    python validation/block_schedule.py workloads/gemm_tile128.yaml --arch h100 --blocks 628 --trips 8 --stagger 6702
    python validation/block_schedule.py workloads/gemm_multistage.yaml --set M=128 --set N=256 --sms 1 --stagger 600

prints the cost a trip by blocks resident (trips 3 on), each block's own cost a trip in quantiles over the blocks
(where they settle at two speeds, how many are slow), the last block to end and the range of block durations,
and whether every block placed at the launch was running at one moment (a reduced run whose first retirement comes
before its last first block starts never holds its first wave at once: its trips are all start-up ramp); writes
every block's record to `--out` (JSON) when given.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpusim import GpusimError  # noqa: E402
from gpusim.api import Hooks, load_kernel, simulate_kernel  # noqa: E402
from gpusim.arch import load_arch  # noqa: E402
from gpusim.options import RunOptions  # noqa: E402
from gpusim.sampling.plan import hot_loops, with_trips  # noqa: E402
from gpusim.workload import parse_overrides  # noqa: E402
from gpusim.workload.program import walk_instrs  # noqa: E402


class BlockSchedule:
    """An engine observer: blocks' SMs, starts and ends, and warp 0's first instruction of the hot loop's body at
    each trip (the first time warp 0 issues the body's first instruction's pc, then every time again)."""

    def __init__(self, first_pc: int):
        self.first_pc = first_pc
        self.sm: dict[int, int] = {}
        self.start: dict[int, int] = {}
        self.end: dict[int, int] = {}
        self.trips: dict[int, list[tuple[int, int]]] = defaultdict(list)  # block -> [(cycle, blocks on its SM)]
        self.resident: dict[int, int] = defaultdict(int)

    def issued(self, sm, sp, warp, inst, now: int) -> None:
        if warp.index == 0 and inst.pc == self.first_pc:
            self.trips[warp.block.index].append((now, self.resident[sm.index]))

    def block_started(self, sm, block: int, now: int) -> None:
        self.resident[sm.index] += 1
        self.sm[block], self.start[block] = sm.index, now

    def block_retired(self, sm, block: int, now: int) -> None:
        self.resident[sm.index] -= 1
        self.end[block] = now


def first_body_pc(loop) -> int:
    """The pc of the loop body's first instruction (nested nodes searched in order)."""
    found: list = []
    walk_instrs(loop.body, found.append)
    if not found:
        raise GpusimError("the hot loop's body has no instruction to time its trips by")
    return found[0].pc


def first_wave_at_once(sm: dict, start: dict, end: dict) -> str:
    """Whether the blocks placed at the launch (on each SM, those that started before its first retirement) were
    all running at one moment: the last of them started before the first block anywhere retired."""
    first_end: dict[int, int] = {}
    for block, cycle in end.items():
        first_end[sm[block]] = min(cycle, first_end.get(sm[block], cycle))
    first = [b for b in start if start[b] < first_end.get(sm[b], start[b] + 1)]
    retired = min(end.values())
    last = max(start[b] for b in first)
    late = sum(1 for b in first if start[b] >= retired)
    if not late:
        return (f"the {len(first):,} blocks placed at the launch ran at once: the last started at {last:,}, the first "
                f"retirement at {retired:,}")
    return (f"the {len(first):,} blocks placed at the launch never ran at once: the first retirement at {retired:,} "
            f"came before {late:,} of them started (the last at {last:,}): the run's trips are all start-up ramp")


def trip_costs(trips: dict) -> dict[int, dict[int, list[int]]]:
    """Each block's trip costs by the blocks resident on its SM: {resident: {block: [cycles a trip]}}, trips 3 on
    (the first two are the start's ramp), only trips over which the SM's residency held."""
    by_resident: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for block, ticks in trips.items():
        for (t0, r0), (t1, r1) in zip(ticks[2:], ticks[3:]):
            if r0 == r1:
                by_resident[r0][block].append(t1 - t0)
    return by_resident


def per_block_spread(trips: dict) -> str:
    """How a block's cost a trip differs from block to block, at the residency most trips ran with (trip_costs):
    each block's median there, as quantiles over the blocks ('' with fewer than 2). A sd that is a spread
    between blocks, not within them, shows here: gemm_multistage's blocks each settle at about 1,195 or about
    1,500 cycles a trip, two to an SM, by the two blocks' relative start (README, "Full-size kernels")."""
    by_resident = trip_costs(trips)
    if not by_resident:
        return ""
    resident = max(by_resident, key=lambda r: (sum(len(c) for c in by_resident[r].values()), r))
    medians = sorted(statistics.median(costs) for costs in by_resident[resident].values())
    if len(medians) < 2:
        return ""

    def at(q: float) -> float:
        return medians[min(len(medians) - 1, int(q * len(medians)))]

    middle = (at(0.1) + at(0.9)) / 2
    slow = sum(1 for m in medians if m > middle)
    return (f"per block, with {resident} on its SM: its median cost a trip over {len(medians):,} blocks "
            f"{medians[0]:,.0f} (fastest), {at(0.1):,.0f} (10%), {at(0.5):,.0f} (50%), {at(0.9):,.0f} (90%), "
            f"{medians[-1]:,.0f} (slowest); {slow:,} above {middle:,.0f}, halfway from 10% to 90%")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload")
    parser.add_argument("--arch", default="h100")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--blocks", type=int, default=None, help="the grid's first BLOCKS blocks only")
    parser.add_argument("--trips", type=int, default=None, help="the hot loop at TRIPS trips")
    parser.add_argument("--stagger", type=int, default=0, help="the first blocks start spread over these cycles")
    parser.add_argument("--sms", type=int, default=None, help="simulate only SMS SMs (as gpusim run --sms)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    try:
        kernel = load_kernel(args.workload, parse_overrides(args.set))
        loops, trips = hot_loops(kernel)
        if not loops:
            raise GpusimError(f"{args.workload}: no loop of a constant trip count to time")
        if args.trips is not None:
            if args.trips < 1:
                raise GpusimError(f"--trips {args.trips}: expected a whole number >= 1")
            kernel = with_trips(kernel, loops, args.trips)
        if args.blocks is not None and not 1 <= args.blocks <= kernel.launch.nblocks:
            raise GpusimError(f"--blocks {args.blocks}: expected 1 to {kernel.launch.nblocks:,}")
        if args.stagger < 0:
            raise GpusimError(f"--stagger {args.stagger}: expected cycles >= 0")
        observer = BlockSchedule(first_body_pc(loops[0]))
        options = RunOptions(sms=args.sms, max_instructions=None, sample="off")
        result = simulate_kernel(kernel, load_arch(args.arch), options, Hooks(observer=observer),
                                 block_limit=args.blocks, stagger=args.stagger)
    except GpusimError as exc:
        sys.exit(f"block_schedule.py: {exc}")
    metrics = result.metrics
    print(f"{metrics['gpu_sim_cycle']:,} cycles, {len(observer.end):,} blocks; L2 hit rate "
          f"{metrics.get('lts__t_sector_hit_rate.pct', 0):.1f}%, L2 sectors merged with a line in flight "
          f"{metrics.get('gpusim__l2_pending_merged_sectors', 0):,} of {metrics.get('lts__t_sectors.sum', 0):,}, "
          f"merged in the L1s' MSHRs {metrics.get('gpusim__l1_mshr_merged_sectors', 0):,}")
    for resident, per_block in sorted(trip_costs(observer.trips).items()):
        costs = [cost for block_costs in per_block.values() for cost in block_costs]
        print(f"  {resident} block(s) on the SM: {statistics.mean(costs):,.0f} cycles a trip "
              f"(sd {statistics.pstdev(costs):,.0f}, {len(costs):,} trips)")
    spread = per_block_spread(observer.trips)
    if spread:
        print("  " + spread)
    last = max(observer.end, key=lambda b: (observer.end[b], b))
    durations = sorted(observer.end[b] - observer.start[b] for b in observer.end)
    print(f"  the last block to end: {last} on SM {observer.sm[last]}, {observer.start[last]:,} to "
          f"{observer.end[last]:,} ({observer.end[last] - observer.start[last]:,} cycles; blocks took "
          f"{durations[0]:,} to {durations[-1]:,}, median {durations[len(durations) // 2]:,})")
    print("  " + first_wave_at_once(observer.sm, observer.start, observer.end))
    if args.out:
        Path(args.out).write_text(json.dumps({
            "workload": args.workload, "arch": args.arch, "set": args.set, "blocks": args.blocks, "trips": args.trips,
            "stagger": args.stagger, "sms": args.sms, "cycles": metrics["gpu_sim_cycle"],
            "metrics": {key: metrics.get(key) for key in ("lts__t_sector_hit_rate.pct", "lts__t_sectors.sum",
                                                          "gpusim__l2_pending_merged_sectors",
                                                          "gpusim__l1_mshr_merged_sectors", "dram__bytes_read.sum")},
            "block": {b: {"sm": observer.sm[b], "start": observer.start[b], "end": observer.end.get(b),
                          "trips": observer.trips.get(b, [])} for b in sorted(observer.sm)}}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
