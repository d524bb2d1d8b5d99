"""The write-back L2's steady state in a sampled streaming kernel (pure math; the warm L2 itself is
memory.hierarchy's `warm_l2`).

A kernel that streams more than the L2 holds runs in two regimes. At first the L2 absorbs its writes: every line
it allocates goes into a free way, and what it writes stays dirty. Once it has allocated the L2's capacity, every
allocation evicts the oldest line, and a dirty one goes back to DRAM: from then on each byte written costs DRAM
bandwidth. Reduced runs, short by design, end in the first regime where the full run spends most of its time in
the second: vecadd at 64 M floats (768 MiB) on an H100 projected from runs of 2-8 waves (26 MiB each) had no
write-back at all and came out at 148% of DRAM's peak.

So where the runs' L2 allocations a wave (or a trip) say the full run fills the L2 and writes back, the
projection points are run again from an L2 in the second regime's steady state: every set full of lines no
kernel touches, the share of them dirty that the runs' allocations leave dirty (bytes bound for DRAM over bytes
allocated, between the two runs). Every allocation in those runs then evicts, and writes back, as the full run's
later waves do. The kernel's count at full size X of the factor (waves, or trips) is then

    cold(x_fill) + (X - x_fill) * warm slope,

the runs from an empty L2 up to the point x_fill where the full run has allocated the L2's capacity, and the
warm runs' cost a unit after it. Bytes are conserved: the warm runs' own dirty lines plus the ones they start
with are constant between them, so their slope is the kernel's own traffic. Single-factor plans only (waves
alone, or loop trips alone); a plan sampling trips over waves has the shadow L2 of reuse.py for its DRAM traffic.
"""

from __future__ import annotations

MIN_DIRTY_FRACTION = 0.01  # of the bytes allocated: below it the write-back costs nothing worth two more runs
FILL_UNCERTAINTY = 0.1  # of x_fill: the fill is not a step (sets fill unevenly); vecadd 8M on h100 measured within it


def factor(plan, point) -> int:
    """The point's coordinate along the plan's one sampled factor (waves or trips)."""
    return point.trips if plan.trips is not None else point.waves


def full_size(plan) -> int:
    """The factor's value in the full run."""
    return plan.trips if plan.trips is not None else plan.full_waves


def allocated_bytes(metrics: dict) -> float:
    """Bytes the run brought into its L2 or made dirty there: read from DRAM, written back, or still dirty."""
    return metrics.get("dram__bytes_read.sum", 0) + bound_for_dram(metrics)


def bound_for_dram(metrics: dict) -> float:
    """Bytes the run wrote towards DRAM: written back, or dirty in the L2 at its end."""
    return metrics.get("dram__bytes_write.sum", 0) + metrics.get("gpusim__l2_dirty_bytes_at_end", 0)


def warm_plan(plan, runs: list[tuple]) -> dict | None:
    """Whether a sampled run's projection points must run again from a warm L2 (see the module docstring), from
    the runs made from an empty one (`runs`: (point, metrics)); None: not needed (the plan samples two factors,
    the kernel writes next to nothing, the full run never fills its L2, or the runs already do). Otherwise
    {"dirty_fraction", "fill_at" (x_fill), "allocated_bytes_per_unit", "l2_capacity_bytes", "unit"}."""
    if plan.method not in ("waves", "loop trips"):
        return None
    projection = sorted(((factor(plan, p), m) for p, m in runs if p.role == "projection"), key=lambda r: r[0])
    if len(projection) < 2:
        return None
    (xa, a), (xb, b) = projection[-2:]
    capacity = b.get("gpusim__l2_capacity_bytes", 0)
    if not capacity or xb <= xa or "dram__bytes_read.sum" not in b:
        return None
    slope = (allocated_bytes(b) - allocated_bytes(a)) / (xb - xa)
    if slope <= 0:
        return None
    dirty_fraction = (bound_for_dram(b) - bound_for_dram(a)) / (slope * (xb - xa))
    if dirty_fraction < MIN_DIRTY_FRACTION:
        return None
    fill_at = xb + (capacity - allocated_bytes(b)) / slope
    if fill_at >= full_size(plan) or fill_at <= xa:
        return None
    return {"dirty_fraction": round(min(1.0, dirty_fraction), 6), "fill_at": fill_at,
            "allocated_bytes_per_unit": round(slope), "l2_capacity_bytes": capacity,
            "unit": "trip" if plan.trips is not None else "wave"}


__all__ = ["FILL_UNCERTAINTY", "MIN_DIRTY_FRACTION", "allocated_bytes", "bound_for_dram", "factor", "full_size",
           "warm_plan"]
