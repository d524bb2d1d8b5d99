"""Projecting a kernel's metrics from reduced simulations (pure math, no engine).

Each reduced run is a *point* of a sampling factor: a number of loop trips (every trip of the sampled loops
as the steady state runs it) or a number of full waves before the tail wave. Along one factor, a count that
the kernel accumulates (cycles, instructions, sectors, bytes, stall cycles) is linear once the steady state
is reached, so two points give it at the full size by extrapolation; two factors give it bilinearly (project
along trips at each wave count, then along waves). A rate or ratio is never extrapolated: it is recomputed
from the projected counts it is made of (IPC from instructions and cycles, a hit rate from hits and
sectors), so every projected rate is one the projected counts imply.

DRAM writes are the exception to plain linearity: the L2 is write-back, so what a run has written reaches DRAM
only when it is evicted, and a short run ends with most of its writes still dirty in the L2 (a GEMM's C tiles:
15-40 MB of them in the reduced runs of gemm_tile128 at 4096x4096x1024) where the full run, writing more than the
L2 holds, has evicted most of them. What is linear is the bytes *bound for* DRAM (written back plus dirty at the
end); the projection extrapolates those, then takes off what the full run leaves dirty at its end. That is the
dirty bytes extrapolated too while they fit in the L2 (a kernel whose writes all fit keeps them all: vecadd), and
otherwise what its last blocks leave in a full L2: the largest reduced run's dirty bytes (it ends with the same
tail wave). Measured on gemm_tile128 4096x4096x1024: -2.4% (h100) and +10.6% (a100) against the full runs' DRAM
bandwidth, where extrapolating the written-back bytes alone gave -48.5% and -68.3%.

L2 requests that meet a line in flight from DRAM (merged: counted as misses, not hits) are the other exception
along loop trips. Blocks that start together request the same lines together, and drift apart as they run: the
spread of their start times grows with the independent delays they meet, as a random walk's, like the square root
of the trips run, so the requests a trip that still meet another block's miss in flight fall like 1 / sqrt(trip),
and faster at first while the start's lockstep breaks (gemm_tile128 2048x2048x1024 on h100, the whole grid
simulated at 2 to 32 trips: 72,700 merged sectors a trip over trips 2-4, 44,200 over 4-8, 31,000 over 8-16 and
19,600 over 16-32, of 131,072). The L2 tag hits (hits plus merges) and the sectors stay linear. So the merges are
projected along a power of the trips fitted to the three runs of the trips factor (falling at most as fast as the
random walk has them fall, and never rising), the hits as the linear tag hits less those merges: that kernel's L2
hit rate is then -0.9 points against its full run, where extrapolating hits linearly gave -10.6 (the runs at 4
and 8 trips merge more than the full run's later trips do).
"""

from __future__ import annotations

import math

from ..stats.declared import INTERNAL, METRICS, names

# How each metric combines is declared once (gpusim.stats.declared); the projection's tables come from there.
# A ratio metric R = X / Y where Y is an additive metric of the record (X = R * Y is then additive too)
RATIO_OVER = {m.name: m.over for m in METRICS.values() if m.kind == "ratio"}
# Ratios over the sub-partitions' active cycles, which the record holds only through the issue-active ratio:
# sp_active = 100 * instructions / smsp__issue_active.avg.pct_of_peak_sustained_active.
ISSUE_ACTIVE = "smsp__issue_active.avg.pct_of_peak_sustained_active"
RATIO_OVER_SP_ACTIVE = tuple(n for n in names("ratio_sp_active") if n != ISSUE_ACTIVE)
SP_ACTIVE = "gpusim__sp_active_cycles"  # a helper quantity of the projection, not in the record
# Averages whose weights the record does not hold: the largest point's value (its steady state) is kept.
STEADY_STATE_VALUE = (*names("steady"), "gpusim__shadow_l2_capacity_bytes",
                      "gpusim__l2_dirty_bytes_at_end.largest_run")
# Bounded above by a maximum, not a sum: the largest point's value.
MAXIMUM = names("maximum")
# Not projected: the launch's configuration (the same in every run; the record keeps a run's) and what is
# recomputed from the projected counts (the speed of light)
NOT_PROJECTED = frozenset(names("launch", "derived"))
# DRAM bytes (counts, or a rate over the duration) that an L2 still dirty at the end has not yet written: they are
# projected as the bytes bound for DRAM (these plus the dirty bytes) and given back the full run's dirty remainder
DIRTY_AT_END = "gpusim__l2_dirty_bytes_at_end"
DIRTY_LARGEST = DIRTY_AT_END + ".largest_run"  # a helper quantity of the projection (the last point's), not in the record
BOUND_FOR_DRAM = ("dram__bytes_write.sum", "dram__bytes.sum", "dram__bytes.sum.per_second")
# L2 sectors that met a line in flight (see merge_decay), and the hits that with them make the linear tag hits
L2_MERGED = "gpusim__l2_pending_merged_sectors"
L2_HITS = "lts__t_sector_hit_rate.pct"  # additive: 100 x the hit sectors (a rate over lts__t_sectors.sum)
RANDOM_WALK_DECAY = 0.5  # merges a trip fall like trip ** -0.5 once blocks drift as a random walk does


def extrapolate(x0: float, y0: float, x1: float, y1: float, x: float) -> float:
    """The line through (x0, y0) and (x1, y1) at x."""
    if x1 == x0:
        return y1
    return y1 + (y1 - y0) * (x - x1) / (x1 - x0)


def additive(metrics: dict) -> dict:
    """The record's metrics as additive quantities: every count as it is, every ratio R = X / Y as X."""
    out = {}
    for key, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or key in NOT_PROJECTED or \
                key not in METRICS and key not in INTERNAL:  # (undeclared: left out of the projection, named)
            continue
        over = RATIO_OVER.get(key)
        if over is not None:
            out[key] = value * metrics.get(over, 0)
        elif key == ISSUE_ACTIVE or key in RATIO_OVER_SP_ACTIVE:
            continue
        else:
            out[key] = value
    inst, issue = metrics.get("smsp__inst_executed.sum", 0), metrics.get(ISSUE_ACTIVE, 0)
    sp_active = 100.0 * inst / issue if issue else 0.0
    out[SP_ACTIVE] = sp_active
    for key in RATIO_OVER_SP_ACTIVE:
        if key in metrics:
            out[key] = metrics[key] * sp_active
    dirty = metrics.get(DIRTY_AT_END, 0)
    if dirty:
        out[DIRTY_LARGEST] = dirty
        for key in BOUND_FOR_DRAM:
            if key in out:
                out[key] += dirty
    return out


def ratios(sums: dict) -> dict:
    """Back from additive quantities to the record's metrics (the inverse of `additive`)."""
    out = {}
    sp_active = sums.get(SP_ACTIVE, 0.0)
    for key, value in sums.items():
        if key == SP_ACTIVE or key == DIRTY_LARGEST:
            continue
        over = RATIO_OVER.get(key)
        if over is not None:
            y = sums.get(over, 0)
            out[key] = value / y if y else 0.0
        elif key in RATIO_OVER_SP_ACTIVE:
            out[key] = value / sp_active if sp_active else 0.0
        else:
            out[key] = value
    if SP_ACTIVE in sums:
        out[ISSUE_ACTIVE] = 100.0 * sums.get("smsp__inst_executed.sum", 0) / sp_active if sp_active else 0.0
    if DIRTY_LARGEST in sums:  # the DRAM bytes were made bytes bound for DRAM (see additive)
        dirty = sums.get(DIRTY_AT_END, 0)
        capacity = sums.get("gpusim__l2_capacity_bytes", 0)
        # more than the L2 holds: a full L2 at the end, as the largest run left it; the same where the extrapolation
        # fell to nothing or below (the runs' dirty bytes fell with the trips or waves: the L2 filled and wrote them
        # back, as the default-size GEMM's shadow L2 does)
        largest = sums.get(DIRTY_LARGEST, 0.0)
        if dirty <= 0 < largest or capacity and dirty > capacity:
            dirty = min(largest, capacity) if capacity else largest
        out[DIRTY_AT_END] = dirty
        duration = sums.get("gpu__time_duration.sum", 0)
        for key in BOUND_FOR_DRAM:
            if key in out:
                written = max(0.0, sums[key] - dirty)
                out[key] = written / duration if key in RATIO_OVER and duration else written
    return out


def mib(size: float) -> str:
    """Bytes as MiB for a message: whole MiB from 10 up, one decimal below."""
    value = size / 2**20
    return f"{value:,.0f}" if value >= 10 else f"{value:.1f}"


def project_line(points: list[tuple[float, dict]], x: float) -> dict:
    """Additive quantities at x from the last two points (x, sums) of one factor, extrapolated linearly;
    a count that would turn negative (a fixed part larger than the steady state implies) is held at 0."""
    (x0, a), (x1, b) = points[-2], points[-1]
    out = {}
    for key, y1 in b.items():
        y0 = a.get(key, y1)
        if key in STEADY_STATE_VALUE or key in MAXIMUM:
            out[key] = max(y0, y1) if key in MAXIMUM else y1
            continue
        value = extrapolate(x0, y0, x1, y1, x)
        out[key] = value if value > 0 or y1 < 0 else 0.0
    return out


def merge_decay(points: list[tuple[float, dict]]) -> float:
    """How fast the L2 merges a trip fall with the trips run: p of merges a trip ~ trip ** -p, fitted to three
    points (trips, additive sums) of one wave count, p within [0, RANDOM_WALK_DECAY] (0: they do not fall; a
    faster early fall is the start's lockstep breaking, which does not go on). The cumulative merges are then
    C + A * trips ** (1 - p), and three points give 1 - p: the exponent q whose curve passes through all three."""
    if len(points) < 3:
        return 0.0
    (x0, a), (x1, b), (x2, c) = sorted(points, key=lambda point: point[0])[-3:]
    m0, m1, m2 = (s.get(L2_MERGED, 0) for s in (a, b, c))
    if not (x0 < x1 < x2) or not (m1 > m0 and m2 > m1):
        return 0.0
    ratio = (m2 - m1) / (m1 - m0)

    def spread(q: float) -> float:  # the later interval's growth over the earlier one's, for C + A * x ** q
        return (x2 ** q - x1 ** q) / (x1 ** q - x0 ** q)

    low, high = 1.0 - RANDOM_WALK_DECAY, 1.0
    if ratio <= spread(low):
        return RANDOM_WALK_DECAY
    if ratio >= spread(high):
        return 0.0
    for _ in range(60):  # spread(q) rises with q: bisect
        mid = (low + high) / 2
        if spread(mid) < ratio:
            low = mid
        else:
            high = mid
    return 1.0 - (low + high) / 2


def with_decaying_merges(line: dict, points: list[tuple[float, dict]], x: float, decay: float) -> dict:
    """`line` (project_line's sums at x from the last two `points`) with the L2 merges projected along
    trips ** (1 - decay) through those two points instead of a line, and the hits as the tag hits (hits plus
    merges, linear) less them; unchanged where decay is 0 or the points have no merges."""
    (x0, a), (x1, b) = points[-2], points[-1]
    if decay <= 0 or L2_MERGED not in b or L2_HITS not in b or x1 == x0:
        return line
    q = 1.0 - decay
    slope = (b[L2_MERGED] - a.get(L2_MERGED, 0)) / (x1 ** q - x0 ** q)
    merged = b[L2_MERGED] + slope * (x ** q - x1 ** q)
    if merged < 0 or merged > line[L2_MERGED] or math.isnan(merged):
        return line
    out = dict(line)
    out[L2_HITS] = line[L2_HITS] + 100.0 * (line[L2_MERGED] - merged)
    out[L2_MERGED] = merged
    return out


def as_record(sums: dict, like: dict) -> dict:
    """The record's metrics from projected additive quantities, in the order of `like` (a point's record),
    integers where `like` holds integers."""
    values = ratios(sums)
    out = {}
    for key, sample in like.items():
        if key not in METRICS:  # not declared: not projected (project names it)
            continue
        value = values.get(key, sample)
        if isinstance(sample, bool) or not isinstance(sample, (int, float)):
            out[key] = sample  # not a number (a metric an arch lacks): as the point has it
        else:
            out[key] = int(round(value)) if type(sample) is int else float(value)
    return out
