"""What the SM-level event loop costs per SM step: the engine's calendar against simpy's generic event heap, on
the same schedule of wake-ups, with no work in the steps (the loop's own cost).

The schedule: 132 SMs, each waking again 1 + a geometric number of cycles later (mean 4, as a busy SM's next
issue or result), 2,000,000 steps in all, seeded. Three loops walk it: the calendar gpusim.engine.gpu uses
(gpusim.engine.calendar: a heap of native ints by cycle and the order the SMs were scheduled, compiled with the
engine where it is; its push and pop called from this loop), one simpy process per SM (`yield
env.timeout(gap)`, simpy's natural model) and one simpy process stepping all SMs (a timeout per distinct busy
cycle). Each is timed best of three; the results go to validation/results/event-loop.json beside the engine's own
rate on the same machine (gpusim bench's gemm), for scale.

    python validation/event_loop.py        # needs simpy (pip install simpy); gpusim itself does not
"""

from __future__ import annotations

import heapq
import json
import platform
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "validation" / "results" / "event-loop.json"
SMS, STEPS, MEAN_GAP, SEED = 132, 2_000_000, 4.0, 1


def gaps() -> np.ndarray:
    """Each step's gap to the SM's next wake-up, in the order the steps are taken (any order does: only counts)."""
    rng = np.random.default_rng(SEED)
    return rng.geometric(1 / MEAN_GAP, size=STEPS).astype(np.int64)


def calendar(gap: list[int]) -> int:
    """The engine's loop: its calendar, each SM pushed back at its next wake-up once stepped."""
    from gpusim.engine.calendar import Calendar

    due = Calendar()
    for sm in range(SMS):
        due.push(0, sm)
    step = 0
    while len(due) and step < STEPS:
        t = due.earliest()
        sm = due.pop()
        due.push(t + gap[step], sm)
        step += 1
    return step


def simpy_per_sm(gap: list[int]) -> int:
    """A simpy process per SM, each yielding a timeout to its next wake-up."""
    import simpy

    env = simpy.Environment()
    taken = [0]

    def sm_process():
        while taken[0] < STEPS:
            g = gap[taken[0]]
            taken[0] += 1
            yield env.timeout(g)

    for _ in range(SMS):
        env.process(sm_process())
    env.run()
    return taken[0]


def simpy_one_process(gap: list[int]) -> int:
    """One simpy process stepping every SM from the calendar: a timeout per distinct busy cycle."""
    import simpy

    env = simpy.Environment()
    taken = [0]

    def clock():
        due: dict[int, list[int]] = {0: list(range(SMS))}
        cycles = [0]
        now = 0
        while cycles and taken[0] < STEPS:
            t = heapq.heappop(cycles)
            if t > now:
                yield env.timeout(t - now)
                now = t
            for sm in due.pop(t):
                if taken[0] >= STEPS:
                    break
                nxt = t + gap[taken[0]]
                taken[0] += 1
                if nxt in due:
                    due[nxt].append(sm)
                else:
                    due[nxt] = [sm]
                    heapq.heappush(cycles, nxt)

    env.process(clock())
    env.run()
    return taken[0]


def best(loop, gap) -> float:
    times = []
    for _ in range(3):
        started = time.perf_counter()
        assert loop(gap) == STEPS
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> int:
    gap = gaps().tolist()
    rows = []
    for name, loop in (("calendar (gpusim.engine.calendar, from Python)", calendar),
                       ("simpy, a process per SM", simpy_per_sm),
                       ("simpy, one process, a timeout per busy cycle", simpy_one_process)):
        seconds = best(loop, gap)
        rows.append({"loop": name, "seconds": round(seconds, 3), "ns_per_step": round(1e9 * seconds / STEPS, 1)})
        print(f"{name:48s} {rows[-1]['ns_per_step']:8.1f} ns per SM step", flush=True)
    record = {"measured": date.today().isoformat(), "machine": f"{platform.machine()}, {sys.version.split()[0]}",
              "command": "python validation/event_loop.py", "sms": SMS, "steps": STEPS, "mean_gap_cycles": MEAN_GAP,
              "rows": rows}
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
