"""DRAM traffic between waves in a sampled run: a shadow L2 that forgets as fast as the full run's L2 does (pure
math; the shadow itself is memory.hierarchy's).

A plan that samples waves with loop trips runs the hot loop n trips instead of N. That shortens what passes
through the L2 between one wave's use of a line at trip k and the next wave's use of it at trip k: the wave's other
reads, about r bytes a trip (the tail alone's DRAM reads a trip: every line it touches read once), and the W bytes a
wave writes (a GEMM's C tiles), so r N + W at full size and r n + W in a run. Where only the run's fits in the L2's
capacity C, data the waves share (a GEMM's B) stays in the L2 in the runs and is read again by every wave at full
size: gemm_tile128 4096^3 on h100 streams about 68 MB between reuses at full size and 29 MB in its runs at 8 trips,
through a 50 MB L2, and a projection from the runs' own DRAM traffic gave half the full run's.

Under LRU a line is found again when less than the capacity has passed through its set since its last use. So
each run keeps, beside its L2, a shadow of it (its tags alone, the same slices and ways, no timing) of
C' = C (r n + W) / (r N + W) for its own trips n: a reuse across waves then finds its line in the shadow as it
would at full size, the bytes between the two uses standing to C' as they stand to C, and each run keeps the same
share of what the waves share, so its DRAM reads stay linear in the trips. (One size for every run, sized for the
fewest trips, made the runs at more trips forget more: the line through them projected gemm_tile128 4096^3 on h100
to read 178 MB from DRAM, where the full run reads 143 MB and no reuse at all 161.) Where the shadow is too small to
keep what the blocks of one wave share (too few sets a slice: a 1 MiB shadow of a 2 MiB L2 in 80 slices), the runs
of the tail alone, which share nothing across waves, read more through it than through their own L2; runner.py
measures that. A plan of loop trips alone (every run the whole grid) keeps one size, the fewest trips'. The runs'
timing is the L2's (a smaller L2 in the timed model itself was tried: DRAM right, cycles +9.9%, since a wave's writes
arrive at once); the projected DRAM reads are the shadows' misses. r and W are estimated before the runs, from the
pilot (the tail alone at a few trips, less the same run at 0 trips where the full run outgrows the L2: a pipeline's
prologue reads are not a trip's), or where a plan has none from its check run (the whole grid at its fewest trips),
made first: its DRAM reads a trip, and the bytes it sent towards DRAM (written back, or dirty at its end) per block
times the blocks of a wave. The runs' own numbers check the estimate afterwards (runner.py). The L2 hits and merges
are the shadow's too: where it misses a line the run's L2 keeps, later requests meet that line in flight, as at
full size.

Below its capacity an L2 of W-way sets already loses some reuses: its lines are spread over the sets by a hash,
so the lines landing in one set between two uses of a line vary from set to set (about as a Poisson count of mean
W d / C for d bytes between the uses), and a reuse is lost where W of them or more land in its set. That share is
under 1% at half the capacity, 16% at three quarters and 53% at the capacity (16 ways), and it climbs steeply
there, so a shadow sized from an estimate of d (which errs) says little about it: gemm_tile128 4096^3 on h200
(59 MB between reuses by the pilot's estimate, in 60 MB) reads 110 MB from DRAM, 1.58x what runs that keep every
reuse project and 0.87x what their shadows do (lost_share puts it 0.44 of the way, the full run is 0.72 of it).
Between half the capacity and all of it (the borderline) the runs keep a shadow too, and the projection takes the
DRAM reads and L2 hits between the two, lost_share of the way to the shadow's, with the distance to the farther
end as its stated error (runner.py).
"""

from __future__ import annotations

import math

from .warm import bound_for_dram

# The runs' metrics a shadow L2 adds (memory.hierarchy), and the ones the projection takes them for
SHADOW_FOR = {"gpusim__shadow_dram_bytes_read": "dram__bytes_read.sum",
              "gpusim__shadow_dram_bytes_write": "dram__bytes_write.sum",
              "gpusim__shadow_l2_dirty_bytes_at_end": "gpusim__l2_dirty_bytes_at_end",
              "gpusim__shadow_l2_capacity_bytes": "gpusim__l2_capacity_bytes",
              "gpusim__shadow_l2_pending_merged_sectors": "gpusim__l2_pending_merged_sectors",
              "gpusim__shadow_l2_recent_fill_hit_sectors": "gpusim__l2_recent_fill_hit_sectors"}
SHADOW_HITS = "gpusim__shadow_l2_hit_sectors"  # the L2 hit rate's numerator, as the shadow L2 counts it


def bytes_between_reuses(read_per_trip: float, wave_writes: float, trips: int) -> float:
    """What passes through the L2 between a wave's use of a line and the next wave's at `trips` trips: r n + W."""
    return read_per_trip * trips + wave_writes


# The share of its capacity below which an L2 of 16-way sets keeps all but 1% of the reuses (lost_share(0.5 C))
BORDERLINE_FROM = 0.5


def lost_share(distance: float, capacity: float, ways: int) -> float:
    """The share of reuses an L2 of `capacity` bytes in sets of `ways` loses where `distance` bytes pass through it
    between two uses of a line, its lines hashed over the sets: the chance that `ways` or more of them land in the
    line's set, a Poisson count of mean ways x distance / capacity."""
    if capacity <= 0 or ways <= 0:
        return 1.0
    mean = ways * max(0.0, distance) / capacity
    term = kept = math.exp(-mean)
    for k in range(1, ways):
        term *= mean / k
        kept += term
    return min(1.0, max(0.0, 1.0 - kept))


def borderline_reuse(read_per_trip: float, wave_writes: float, capacity: float, trips: int,
                     reduced_trips: int) -> bool:
    """Whether the full run's distance between a wave's use of a line and the next wave's lies between
    BORDERLINE_FROM of the L2's capacity and all of it, and the run's at `reduced_trips` is shorter: the full run
    then loses a share of the reuses the run keeps (lost_share), and no shadow of a size says which."""
    full = bytes_between_reuses(read_per_trip, wave_writes, trips)
    reduced = bytes_between_reuses(read_per_trip, wave_writes, reduced_trips)
    return capacity > 0 and BORDERLINE_FROM * capacity < full <= capacity and reduced < full


def reuse_between_waves(read_per_trip: float, wave_writes: float, capacity: float, trips: int,
                        reduced_trips: int) -> dict | None:
    """The bytes passing through the L2 between a wave's use of a line and the next wave's, at full size (`trips`
    trips) and in a run at `reduced_trips`, when only the run's fit in `capacity` (None: the same in both). The
    sign of the error this makes uncorrected is the kernel's: gemm_tile128 4096^3 on h100 (68 MB against 29 MB,
    in 50 MB) projected half the full run's DRAM traffic, 1024x512x1024 on 4 SMs of an H100 given a 2 MB L2 9.7%
    more reads."""
    full = bytes_between_reuses(read_per_trip, wave_writes, trips)
    reduced = bytes_between_reuses(read_per_trip, wave_writes, reduced_trips)
    if capacity <= 0 or not reduced < capacity < full:
        return None
    return {"bytes_between_reuses_full": round(full), "bytes_between_reuses_reduced": round(reduced),
            "l2_capacity_bytes": round(capacity)}


def reuse_estimate(metrics: dict, trips: int, blocks: int, wave_blocks: int,
                   no_trips: dict | None = None) -> tuple[float, float]:
    """(r, W) from a run of `blocks` blocks at `trips` trips made before the others (the pilot, or a trips plan's
    check run): its DRAM reads a trip, and the bytes it sent towards DRAM (written, or dirty in the L2 at its end)
    scaled from its blocks to a wave's. Its reads include what the program reads outside the loop, so r errs
    high, unless `no_trips` (the same run at 0 trips: those reads alone) is given to take them off."""
    outside = no_trips.get("dram__bytes_read.sum", 0) if no_trips else 0
    read = max(0, metrics.get("dram__bytes_read.sum", 0) - outside) / max(1, trips)
    sent = bound_for_dram(metrics)
    return read, sent * wave_blocks / max(1, blocks)


def shadow_capacity(read_per_trip: float, wave_writes: float, capacity: int, trips: int,
                    run_trips: list[int]) -> int:
    """The shadow L2's size for runs at `run_trips` trips of a hot loop of `trips` (0: none needed, the runs keep
    between waves what the full run keeps): C (r n + W) / (r N + W) for the fewest trips n, when the full run's
    distance between reuses outgrows C and the fewest trips' does not (a run whose own distance outgrows C
    forgets as the full run does, whatever its shadow), or lies in the borderline (borderline_reuse)."""
    if not run_trips or reuse_between_waves(read_per_trip, wave_writes, capacity, trips, min(run_trips)) is None \
            and not borderline_reuse(read_per_trip, wave_writes, capacity, trips, min(run_trips)):
        return 0
    fewest = bytes_between_reuses(read_per_trip, wave_writes, min(run_trips))
    return int(capacity * fewest / bytes_between_reuses(read_per_trip, wave_writes, trips))


def run_shadow_capacity(read_per_trip: float, wave_writes: float, capacity: int, trips: int, run_trips: int) -> int:
    """The shadow L2's size for one run at `run_trips` trips of a hot loop of `trips`: C (r n + W) / (r N + W) for
    its own n (the L2's capacity where that is more)."""
    own = bytes_between_reuses(read_per_trip, wave_writes, run_trips)
    return int(min(capacity, capacity * own / bytes_between_reuses(read_per_trip, wave_writes, trips)))


def with_shadow_traffic(metrics: dict) -> dict:
    """A run's metrics with its DRAM traffic, dirty bytes, L2 capacity, hits and merges the shadow L2's (the
    shadow's own keys removed); the DRAM bandwidth is the shadow's bytes over the run's duration."""
    if "gpusim__shadow_dram_bytes_read" not in metrics:
        return metrics
    out = {k: v for k, v in metrics.items() if k not in SHADOW_FOR and k != SHADOW_HITS}
    for shadow, key in SHADOW_FOR.items():
        if shadow in metrics:
            out[key] = metrics[shadow]
    sectors = metrics.get("lts__t_sectors.sum", 0)
    if SHADOW_HITS in metrics and "lts__t_sector_hit_rate.pct" in metrics:
        out["lts__t_sector_hit_rate.pct"] = 100.0 * metrics[SHADOW_HITS] / sectors if sectors else 0.0
    dram = out["dram__bytes_read.sum"] + out["dram__bytes_write.sum"]
    out["dram__bytes.sum"] = dram
    duration = metrics.get("gpu__time_duration.sum", 0)
    if "dram__bytes.sum.per_second" in metrics:
        out["dram__bytes.sum.per_second"] = dram / duration if duration else 0.0
    return out


__all__ = ["BORDERLINE_FROM", "SHADOW_FOR", "SHADOW_HITS", "borderline_reuse", "bytes_between_reuses", "lost_share",
           "reuse_estimate", "reuse_between_waves", "run_shadow_capacity", "shadow_capacity", "with_shadow_traffic"]
