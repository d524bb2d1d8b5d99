"""What a run looked like over time, recorded from the engine's observer events (gpusim.stats.observer) for the
run plots (gpusim.report.run_plots).

`TimelineRecorder` is an Observer: pass it to `gpusim.run(..., observer=recorder)`, then
`result = recorder.attach(result)` puts a `Timeline` on `result.timeline`. It records

* per SM, in time buckets: active warps (resident: from warp_started to warp_exited), eligible warps (Nsight's
  rule: a warp in state not_selected, or issuing: its `selected` cycle) and warp-instructions issued;
* every block's placement: the SM it ran on, the cycle its warps started and the cycle it retired;
* the memory hierarchy's cumulative counters (L1 and L2 sectors requested and hit, DRAM bytes), sampled at the
  first issue in each bucket;
* for one SM (`sm`, default 0) and one window of cycles (`window_start`, `window_cycles`): each warp slot's state
  intervals [start, end) and every issue (cycle, scheduler, slot), at cycle resolution.

It stays bounded on long runs: a series has at most `buckets` buckets, whose width (a power of two, from one
cycle) doubles when the run outgrows them (neighbours merge); the window has a fixed length; at most
`max_blocks` placements are kept (the rest are counted). Sums are exact at any width: a bucket holds warp-cycles,
kept as the change in warp count within it and the area that change adds before the bucket's end.

It hears one GPU: the first kernel it sees (a command list's later kernels are counted, not recorded). In a
sampled run the engine shows it one reduced run (the record's sampling.observed_run).
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from ..errors import GpusimError, shown
from .counters import REASONS
from .observer import Observer

BUCKETS = 512  # time buckets per series at most
WINDOW_CYCLES = 2048  # cycles of the recorded SM's warp-slot states, at cycle resolution
MAX_BLOCKS = 65_536  # block placements kept
NOT_SELECTED = "not_selected"
REASON_CODE = {reason: code for code, reason in enumerate(REASONS)}
MEMORY_COUNTERS = ("l1_hit_sectors", "l1_sectors", "l2_hit_sectors", "l2_sectors", "dram_bytes")


@attrs.define(eq=False)
class Timeline:
    """A run over time (all times in SM cycles). Series are arrays [SM, bucket] of `bucket_cycles`-cycle
    buckets covering [0, cycles); the last bucket may be shorter (`bucket_widths`)."""

    spec: Any  # the ArchSpec the run used
    sms: int  # SMs simulated
    cycles: int  # the run's last cycle (the kernel's gpu_sim_cycle for a run that finished)
    bucket_cycles: int
    active: np.ndarray  # mean resident warps per SM in each bucket, [sm, bucket]
    eligible: np.ndarray  # mean eligible warps per SM (not_selected or issuing), [sm, bucket]
    issued: np.ndarray  # warp-instructions issued per SM in each bucket, [sm, bucket]
    theoretical_warps: int  # resident warps per SM the occupancy calculator allows this launch
    blocks_per_sm: int  # resident blocks per SM the calculator allows (a wave is this x sms blocks)
    nblocks: int  # blocks the run launched
    blocks: np.ndarray  # one row per block kept: [block index, sm, cycle its warps started, cycle it retired]
    blocks_dropped: int  # placements beyond MAX_BLOCKS, not kept
    memory: dict | None  # "cycle" (samples) and MEMORY_COUNTERS (cumulative at each), or None: no hierarchy
    window_sm: int  # the SM whose warp slots were recorded
    window: tuple[int, int]  # [start, end) cycles of the warp-slot record
    slot_states: np.ndarray  # [slot, reason code (REASONS), start, end] clipped to the window, one row each
    issues: np.ndarray  # [cycle, sub-partition, slot] of each issue on window_sm within the window
    kernels_ignored: int = 0  # a command list's kernels after the first (not recorded)

    @property
    def bucket_starts(self) -> np.ndarray:
        return np.arange(self.active.shape[1], dtype=np.int64) * self.bucket_cycles

    @property
    def bucket_widths(self) -> np.ndarray:
        starts = self.bucket_starts
        return np.minimum(starts + self.bucket_cycles, max(self.cycles, 1)) - starts

    @property
    def wave_blocks(self) -> int:
        return self.blocks_per_sm * self.sms

    def memory_rates(self, intervals: int | None = None) -> dict | None:
        """Between consecutive memory samples (or, with `intervals`, between the samples nearest at most that
        many even steps of time): "start"/"end" cycles, "l1_hit_rate" and "l2_hit_rate" (% of the sectors
        requested then; NaN where none were) and "dram_gbs" (GB/s)."""
        if self.memory is None:
            return None
        mem = self.memory
        if intervals is not None and len(mem["cycle"]) > intervals + 1:
            edges = np.linspace(0, mem["cycle"][-1], intervals + 1)
            keep = np.unique(np.searchsorted(mem["cycle"], edges, side="right") - 1)
            mem = {k: v[keep] for k, v in mem.items()}
        cycles = mem["cycle"]
        span = np.diff(cycles).astype(float)
        seconds = span / (self.spec.clocks.core_mhz * 1e6)

        def rate(hits: str, total: str) -> np.ndarray:
            h, t = np.diff(mem[hits]).astype(float), np.diff(mem[total]).astype(float)
            out = np.full(len(t), np.nan)
            np.divide(100.0 * h, t, out=out, where=t > 0)
            return out

        gbs = np.zeros(len(span))
        np.divide(np.diff(mem["dram_bytes"]) / 1e9, seconds, out=gbs, where=seconds > 0)
        return {"start": cycles[:-1], "end": cycles[1:], "l1_hit_rate": rate("l1_hit_sectors", "l1_sectors"),
                "l2_hit_rate": rate("l2_hit_sectors", "l2_sectors"), "dram_gbs": gbs}

    def to_dict(self) -> dict:
        """Every recorded number as plain lists (what a determinism check compares)."""
        d = {f.name: getattr(self, f.name) for f in attrs.fields(Timeline) if f.name != "spec"}
        d["arch"] = self.spec.name
        d["memory"] = None if self.memory is None else {k: v.tolist() for k, v in self.memory.items()}
        return {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in d.items()}


class _Series:
    """Per SM, per bucket: the net change in warp count (`delta`) and the warp-cycles those changes add before
    the bucket's end (`area`). Warp-cycles in bucket k = level at its start x width + area[k]."""

    def __init__(self, sms: int, buckets: int):
        self.delta = [[0] * buckets for _ in range(sms)]
        self.area = [[0] * buckets for _ in range(sms)]

    def merge(self, width: int) -> None:
        """Halve the resolution: bucket j becomes old buckets 2j and 2j+1 (`width`: the old width)."""
        for delta, area in zip(self.delta, self.area):
            n = len(delta)
            merged_area = [area[2 * j] + delta[2 * j] * width + area[2 * j + 1] for j in range(n // 2)]
            merged_delta = [delta[2 * j] + delta[2 * j + 1] for j in range(n // 2)]
            delta[:] = merged_delta + [0] * (n - n // 2)
            area[:] = merged_area + [0] * (n - n // 2)

    def warp_cycles(self, width: int, buckets: int, end: int) -> np.ndarray:
        """[sm, bucket] warp-cycles in the first `buckets` buckets, the last clipped at cycle `end`."""
        out = np.zeros((len(self.delta), buckets))
        for sm, (delta, area) in enumerate(zip(self.delta, self.area)):
            level = 0
            for k in range(buckets):
                out[sm, k] = level * width + area[k]
                level += delta[k]
            out[sm, buckets - 1] -= level * ((buckets * width) - end)  # a level left open (a stopped run)
        return out


class TimelineRecorder(Observer):
    """Records a run over time (see the module docstring). `sm`: the SM whose warp slots are recorded;
    `window_start`, `window_cycles`: the cycles recorded for it; `buckets`: the most time buckets a series
    keeps; `max_blocks`: the most block placements kept."""

    def __init__(self, sm: int = 0, window_start: int = 0, window_cycles: int = WINDOW_CYCLES,
                 buckets: int = BUCKETS, max_blocks: int = MAX_BLOCKS):
        for name, value, low in (("sm", sm, 0), ("window_start", window_start, 0), ("window_cycles", window_cycles, 1),
                                 ("buckets", buckets, 2), ("max_blocks", max_blocks, 0)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise GpusimError(f"TimelineRecorder {name}={shown(value, 40)}: expected an integer >= {low}")
        if buckets % 2:
            raise GpusimError(f"TimelineRecorder buckets={buckets}: expected an even number")
        self.sm = int(sm)
        self.window = (int(window_start), int(window_start) + int(window_cycles))
        self.buckets = int(buckets)
        self.max_blocks = int(max_blocks)
        self.gpu: Any = None
        self.memory: Any = None
        self.kernels_ignored = 0
        self._other: Any = None  # the last GPU heard that is not the recorded one

    # --- binding to the GPU --------------------------------------------------------------------------------
    def _bind(self, gpu: Any) -> bool:
        """True when `gpu` is the one recorded (the first heard); a later GPU is counted once and ignored."""
        if self.gpu is None:
            self._start(gpu)
            return True
        if gpu is not self._other:
            self._other = gpu
            self.kernels_ignored += 1
        return False

    def _start(self, gpu: Any) -> None:
        sms = len(gpu.sms)
        if self.sm >= sms:
            raise GpusimError(f"--plot-sm {self.sm}: the run simulates {sms} SM{'s' if sms > 1 else ''}: expected "
                              f"0 to {sms - 1}")
        self.gpu = gpu
        self.kernels_ignored = 0
        self._other = None
        self._shift = 0  # bucket width = 1 << shift
        self._last = 0  # the latest cycle any event reached
        self.active_series = _Series(sms, self.buckets)
        self.eligible_series = _Series(sms, self.buckets)
        self.issue_counts = [[0] * self.buckets for _ in range(sms)]
        self.block_rows: list[list[int]] = []
        self.open_blocks: dict[int, int] = {}  # block index -> its row
        self.blocks_dropped = 0
        self.slot_states: list[tuple[int, int, int, int]] = []
        self.issues: list[tuple[int, int, int]] = []
        memory = gpu.memory
        self.memory = memory if hasattr(memory, "dram_read") and hasattr(memory, "ld_sectors") else None
        self.samples: dict[int, tuple] = {}  # bucket -> the counters at its first issue
        self._next_sample = 0

    # --- time buckets ----------------------------------------------------------------------------------------
    def _grow(self, t: int) -> None:
        """Coarsen until cycle `t` falls in the buckets."""
        while t >> self._shift >= self.buckets:
            width = 1 << self._shift
            self.active_series.merge(width)
            self.eligible_series.merge(width)
            for row in self.issue_counts:
                n = len(row)
                row[:] = [row[2 * j] + row[2 * j + 1] for j in range(n // 2)] + [0] * (n - n // 2)
            self.samples = {k // 2: v for k, v in sorted(self.samples.items(), reverse=True)}  # the earlier wins
            self._shift += 1
            self._next_sample = ((max(self.samples, default=-1) + 1) << self._shift)

    def _step(self, series: _Series, sm: int, t: int, change: int) -> None:
        k = t >> self._shift
        if k >= self.buckets:
            self._grow(t)
            k = t >> self._shift
        series.delta[sm][k] += change
        series.area[sm][k] += change * (((k + 1) << self._shift) - t)
        if t > self._last:
            self._last = t

    def _sample(self, now: int) -> None:
        """The memory counters as the run reaches `now` (the first issue in its bucket)."""
        m = self.memory
        k = now >> self._shift
        backlog = m.dram_backlog_bytes(now)
        self.samples[k] = (now, m.ld_sector_hits, m.ld_sectors, m.l2_hits, m.l2_sectors, m.dram_read + m.dram_write,
                           backlog)
        self._next_sample = (k + 1) << self._shift

    # --- events --------------------------------------------------------------------------------------------
    def issued(self, sm: Any, sp: Any, warp: Any, inst: Any, now: int) -> None:
        if sm.gpu is not self.gpu and not self._bind(sm.gpu):
            return
        k = now >> self._shift
        if k >= self.buckets:
            self._grow(now)
            k = now >> self._shift
        index = sm.index
        self.issue_counts[index][k] += 1
        self.eligible_series.area[index][k] += 1  # the issue cycle: one eligible warp-cycle
        if now >= self._last:
            self._last = now + 1
        if self.memory is not None and now >= self._next_sample:
            self._sample(now)
        if index == self.sm and self.window[0] <= now < self.window[1]:
            self.issues.append((now, sp.index, warp.slot))

    def state(self, sp: Any, warp: Any, reason: str, start: int, end: int) -> None:
        sm = sp.sm
        if sm.gpu is not self.gpu and not self._bind(sm.gpu):
            return
        index = sm.index
        if end > self._last:
            self._last = end
        if reason == NOT_SELECTED:
            self._step(self.eligible_series, index, start, 1)
            self._step(self.eligible_series, index, end, -1)
        if index == self.sm and start < self.window[1] and end > self.window[0]:
            self.slot_states.append((warp.slot, REASON_CODE[reason], max(start, self.window[0]),
                                     min(end, self.window[1])))

    def warp_started(self, sm: Any, sp: Any, warp: Any, now: int) -> None:
        if sm.gpu is self.gpu or self._bind(sm.gpu):
            self._step(self.active_series, sm.index, now, 1)

    def warp_exited(self, sm: Any, sp: Any, warp: Any, now: int) -> None:
        if sm.gpu is self.gpu or self._bind(sm.gpu):
            self._step(self.active_series, sm.index, now, -1)

    def block_started(self, sm: Any, block: int, now: int) -> None:
        if sm.gpu is not self.gpu and not self._bind(sm.gpu):
            return
        if len(self.block_rows) >= self.max_blocks:
            self.blocks_dropped += 1
            return
        self.open_blocks[block] = len(self.block_rows)
        self.block_rows.append([block, sm.index, now, -1])

    def block_retired(self, sm: Any, block: int, now: int) -> None:
        if sm.gpu is not self.gpu and not self._bind(sm.gpu):
            return
        row = self.open_blocks.pop(block, None)
        if row is not None:
            self.block_rows[row][3] = now
        if now > self._last:
            self._last = now

    # --- the result ----------------------------------------------------------------------------------------
    def finish(self) -> Timeline | None:
        """What was recorded, as a Timeline (None when nothing was heard)."""
        gpu = self.gpu
        if gpu is None:
            return None
        end = max(self._last, gpu.end_cycle, 1)
        self._grow(end - 1)
        width = 1 << self._shift
        buckets = -(-end // width)
        widths = np.minimum(np.arange(1, buckets + 1) * width, end) - np.arange(buckets) * width
        active = self.active_series.warp_cycles(width, buckets, end) / widths
        eligible = self.eligible_series.warp_cycles(width, buckets, end) / widths
        issued = np.array([row[:buckets] for row in self.issue_counts], dtype=np.int64)
        blocks = np.array(self.block_rows, dtype=np.int64).reshape(-1, 4)
        if len(blocks):
            blocks[blocks[:, 3] < 0, 3] = end  # still running when a run stopped
        occ = gpu.occupancy
        window = (self.window[0], min(self.window[1], max(end, self.window[0] + 1)))
        return Timeline(spec=gpu.spec, sms=len(gpu.sms), cycles=end, bucket_cycles=width, active=active,
                        eligible=eligible, issued=issued, theoretical_warps=occ.warps_per_sm,
                        blocks_per_sm=occ.blocks_per_sm, nblocks=gpu.dispatcher.nblocks, blocks=blocks,
                        blocks_dropped=self.blocks_dropped, memory=self._memory_record(end), window_sm=self.sm,
                        window=window, slot_states=np.array(self.slot_states, dtype=np.int64).reshape(-1, 4),
                        issues=np.array(self.issues, dtype=np.int64).reshape(-1, 3),
                        kernels_ignored=self.kernels_ignored)

    def _memory_record(self, end: int) -> dict | None:
        """The samples and a last one at the end (or when DRAM's queues drain, if later), as cumulative arrays.
        DRAM bytes count as their channels move them: requested minus what is still queued (the channels'
        backlog in cycles x their read rate), never decreasing."""
        m = self.memory
        if m is None:
            return None
        rows = [self.samples[k] for k in sorted(self.samples)]
        if not rows or rows[0][0] > 0:
            rows.insert(0, (0, 0, 0, 0, 0, 0, 0.0))
        last = max(end, int(np.ceil(m.dram_busy_until)))
        rows = [row for row in rows if row[0] < last]
        rows.append((last, m.ld_sector_hits, m.ld_sectors, m.l2_hits, m.l2_sectors, m.dram_read + m.dram_write, 0.0))
        table = np.array(rows, dtype=float)
        moved = np.maximum.accumulate(np.clip(table[:, 5] - table[:, 6], 0, None))
        moved = np.minimum(moved, table[:, 5])
        record = {"cycle": table[:, 0].astype(np.int64)}
        for i, name in enumerate(MEMORY_COUNTERS[:4], start=1):
            record[name] = table[:, i].astype(np.int64)
        record["dram_bytes"] = moved
        return record

    def attach(self, result: Any) -> Any:
        """`result` with what was recorded as its `timeline` (the Timeline; None when nothing was heard)."""
        timeline = self.finish()
        self.gpu = self.memory = None  # (the recorder no longer holds the simulated GPU)
        return attrs.evolve(result, timeline=timeline)



__all__ = ["BUCKETS", "MAX_BLOCKS", "MEMORY_COUNTERS", "REASON_CODE", "WINDOW_CYCLES", "Timeline", "TimelineRecorder"]
