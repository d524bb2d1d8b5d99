"""`gpusim run ... --trace out.json`: the run's timeline as Chrome Trace Event JSON, for Perfetto
(ui.perfetto.dev) and chrome://tracing.

What the file holds, for each traced SM (`--trace-sm`, SM 0 by default):
* a process, pid = SM index + 1 (Perfetto keeps pid 0 for the kernel's idle task), named
  "SM 0 (gpu.gpc[0].tpc[0].sm[0])";
* a track per warp scheduler (sub-partition), "scheduler 0 issue": one 1-cycle slice per issue, named by the
  opcode, args warp (global id), block, pc;
* a track per warp slot, "warp slot 5 (scheduler 1)": one slice per warp-state interval, named by the Nsight
  stall reason (long_scoreboard, not_selected, ...) or, in an issue cycle, by the opcode issued; args warp,
  block, and the waiting instruction's op and pc (none while the warp drains at exit);
* counters "active warps", "eligible warps" (not_selected or issuing) and "issued warps" (= warp-instructions
  issued per cycle): averages per cycle over buckets of 1 cycle on a run of at most 2,048 cycles, else of the
  smallest power of two keeping at most 2,048 buckets (fewer where many SMs share a small `max_events`).
Time: 1 cycle = 1 us in the file (ts and dur are whole cycles; no displayTimeUnit, which Perfetto would take
as ns). The slices of a kernel list's kernels follow each other (each kernel starts where the one before ended).
Size: the events stream to the file as the run makes them; `max_events` bounds them: when the next one would
not fit, recording stops at that cycle (the intervals in progress are closed there) and `stopped_at` says so.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, Iterable, TextIO

from ..analytic.layout import sm_layout
from ..errors import GpusimError, shown
from ..stats.observer import Observer
from ..version import __version__

DEFAULT_MAX_EVENTS = 2_000_000
BUCKETS = 2048  # counter buckets per SM at most (their width doubles as the run grows past them)
NOT_SELECTED = "not_selected"
TIME_UNIT = "1 us in this file = 1 SM cycle (ts and dur are cycles)"
_WINDOW = re.compile(r"^\s*(\d*)\s*:\s*(\d*)\s*$")
_SM_LIST = re.compile(r"^\s*\d+\s*(,\s*\d+\s*)*$")
_EVENT = '{{"ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"name":{},"args":{}}}'


def scheduler_tid(sm: int, sp: int) -> int:
    """The track of SM `sm`'s scheduler `sp` (tids are unique in the file: Perfetto names threads by tid)."""
    return (sm + 1) * 10000 + sp


def slot_tid(sm: int, slot: int) -> int:
    return (sm + 1) * 10000 + 5000 + slot


def fixed_events(sms: int, sub_partitions: int, max_warps: int) -> int:
    """Events kept aside for `sms` SMs: track names, and the intervals in progress closed when recording stops."""
    return sms * (1 + sub_partitions + max_warps + 2 * max_warps + sub_partitions)


def counter_buckets(max_events: int, sms: int) -> int:
    """Counter buckets per SM: at most BUCKETS, and their three counters at most a quarter of `max_events`."""
    return max(1, min(BUCKETS, max_events // (4 * 3 * sms) - 1))


def slice_room(max_events: int, sms: int, sub_partitions: int, max_warps: int) -> int:
    """The slices `max_events` leaves room for once the track names, the counters and the intervals closed at a
    stop are set aside; a limit that leaves less than a quarter of itself is refused."""
    room = max_events - fixed_events(sms, sub_partitions, max_warps) - sms * 3 * (counter_buckets(max_events, sms) + 1)
    if room < max_events // 4:
        raise GpusimError(f"--trace-max-events {max_events:,}: too small for {sms} SM(s) (the track names and "
                          f"counters take {max_events - room:,}); raise it or trace fewer SMs with --trace-sm")
    return room


class _Counters:
    """Per SM, warp-cycles active, eligible and issued in buckets of 2**shift cycles from `origin`."""

    def __init__(self, sms: Iterable[int], origin: int, buckets: int):
        self.origin, self.cap, self.shift = origin, buckets, 0
        self.sums = {sm: ([0] * buckets, [0] * buckets, [0] * buckets) for sm in sms}

    def add(self, sm: int, which: int, start: int, end: int) -> None:
        """Count the cycles [start, end) (already inside the window) in counter `which` of SM `sm`."""
        shift = self.shift
        k1, k2 = (start - self.origin) >> shift, (end - 1 - self.origin) >> shift
        while k2 >= self.cap:
            self._coarsen()
            shift = self.shift
            k1, k2 = (start - self.origin) >> shift, (end - 1 - self.origin) >> shift
        row = self.sums[sm][which]
        if k1 == k2:
            row[k1] += end - start
            return
        width = 1 << shift
        row[k1] += self.origin + (k1 + 1) * width - start
        for k in range(k1 + 1, k2):
            row[k] += width
        row[k2] += end - (self.origin + k2 * width)

    def _coarsen(self) -> None:
        half = (self.cap + 1) // 2
        for rows in self.sums.values():
            for row in rows:
                row[:] = [sum(row[2 * k:2 * k + 2]) for k in range(half)] + [0] * (self.cap - half)
        self.shift += 1

    def rows(self, sm: int, end: int) -> Iterable[tuple[int, tuple[float, float, float]]]:
        """(bucket start, its three averages per cycle) for the buckets before `end`, and (end, zeros)."""
        width = 1 << self.shift
        sums = self.sums[sm]
        for k in range(self.cap):
            t0 = self.origin + k * width
            if t0 >= end:
                break
            cycles = min(end, t0 + width) - t0
            yield t0, tuple(round(row[k] / cycles, 4) for row in sums)  # type: ignore[misc]
        yield end, (0.0, 0.0, 0.0)


class ChromeTrace(Observer):
    """Writes the timeline of SMs `sms` in the cycles window [start, end) (end None: to the run's end) to
    `path`, at most `max_events` events; `close(result)` finishes the file and returns its summary."""

    def __init__(self, path: str, *, sms: Iterable[int] = (0,), window: tuple[int, int | None] = (0, None),
                 max_events: int = DEFAULT_MAX_EVENTS):
        self.path, self.sms = str(path), tuple(sorted(set(sms)))
        self._traced = frozenset(self.sms)
        self.max_events = max_events
        self._lo, end = window
        self._hi = end if end is not None else 1 << 62
        try:
            self._file: TextIO | None = open(self.path, "w", encoding="utf-8")
        except OSError as exc:
            raise GpusimError(f"--trace {shown(self.path, 60)}: cannot write ({exc.strerror})") from None
        self._file.write('{"traceEvents":[\n')
        self._pending: list[str] = []  # events not yet written (written 8,192 at a time)
        self._events, self._room, self._dropped = 0, 0, 0
        self.stopped_at: int | None = None
        self._gpu: Any = None
        self._offset = self._last = 0
        self._kernel_starts: list[int] = []
        self._resident: dict[int, dict[int, int]] = {sm: {} for sm in self.sms}
        self._names: dict[str, str] = {}
        self._counters: _Counters | None = None
        self.summary: dict | None = None

    # --- the run's events --------------------------------------------------------------------------------
    def block_started(self, sm: Any, block: int, now: int) -> None:
        if sm.gpu is not self._gpu:
            self._begin(sm.gpu)

    def warp_started(self, sm: Any, sp: Any, warp: Any, now: int) -> None:
        if sm.index in self._traced:
            self._resident[sm.index][warp.slot] = now + self._offset

    def warp_exited(self, sm: Any, sp: Any, warp: Any, now: int) -> None:
        index = sm.index
        if index in self._traced:
            now += self._offset
            self._active(index, self._resident[index].pop(warp.slot, now), now)

    def state(self, sp: Any, warp: Any, reason: str, start: int, end: int) -> None:
        index = sp.sm_index
        if index not in self._traced:
            return
        offset = self._offset
        start, end = start + offset, end + offset
        if end > self._last:
            self._last = end
        if reason == NOT_SELECTED:
            self._count(index, 1, start, end)
        inst = warp.inst
        name = self._names.get(reason) or self._name(reason)
        where = "" if inst is None else \
            f',"op":{self._names.get(inst.info.opcode) or self._name(inst.info.opcode)},"pc":"{inst.pc:#06x}"'
        args = f'{{"warp":{warp.gid},"block":{warp.block.index}{where}}}'
        tid = (index + 1) * 10000 + 5000 + warp.slot  # slot_tid, inline: this runs for every interval
        if self._lo <= start and end <= self._hi and self._room > 0:
            self._room -= 1
            self._events += 1
            pending = self._pending
            pending.append(f',\n{{"ph":"X","pid":{index + 1},"tid":{tid},"ts":{start},"dur":{end - start},'
                           f'"name":{name},"args":{args}}}')
            if len(pending) >= 8192:
                self._flush()
        else:
            self._slice(index, tid, start, end, name, args)

    def issued(self, sm: Any, sp: Any, warp: Any, inst: Any, now: int) -> None:
        index = sm.index
        if index not in self._traced:
            return
        now += self._offset
        if now >= self._last:
            self._last = now + 1
        op = inst.info.opcode
        name = self._names.get(op) or self._name(op)
        args = f'{{"warp":{warp.gid},"block":{warp.block.index},"pc":"{inst.pc:#06x}"}}'
        pid = index + 1
        scheduler, slot = pid * 10000 + sp.index, pid * 10000 + 5000 + warp.slot  # scheduler_tid, slot_tid
        counts = self._counters
        bucket = (now - self._lo) >> counts.shift  # type: ignore[union-attr]
        if self._lo <= now < self._hi and self._room > 1 and bucket < counts.cap:  # type: ignore[union-attr]
            rows = counts.sums[index]  # type: ignore[union-attr]
            rows[1][bucket] += 1  # the issuing warp is eligible in its issue cycle
            rows[2][bucket] += 1
            self._room -= 2
            self._events += 2
            pending = self._pending
            pending.append(f',\n{{"ph":"X","pid":{pid},"tid":{scheduler},"ts":{now},"dur":1,"name":{name},'
                           f'"args":{args}}},\n{{"ph":"X","pid":{pid},"tid":{slot},"ts":{now},"dur":1,'
                           f'"name":{name},"args":{args}}}')
            if len(pending) >= 8192:
                self._flush()
            return
        self._count(index, 1, now, now + 1)
        self._count(index, 2, now, now + 1)
        self._slice(index, scheduler, now, now + 1, name, args)
        self._slice(index, slot, now, now + 1, name, args)

    # --- writing -----------------------------------------------------------------------------------------
    def _begin(self, gpu: Any) -> None:
        """The first event of a run: check the SMs, name the tracks, set the budget. A later GPU is the next
        kernel of a command list: its cycles follow the previous kernel's."""
        if self._gpu is not None:
            self._offset += self._gpu.end_cycle
            self._last = max(self._last, self._offset)
            self._gpu = gpu
            self._kernel_starts.append(self._offset)
            return
        self._gpu = gpu
        self._kernel_starts.append(0)
        by_index = {sm.index: sm for sm in gpu.sms}
        missing = [i for i in self.sms if i not in by_index]
        if missing:
            raise GpusimError(f"--trace-sm {missing[0]}: the run has SMs 0 to {len(by_index) - 1}")
        spec = gpu.sms[0].spec.sm
        self._room = slice_room(self.max_events, len(self.sms), spec.sub_partitions, spec.max_warps)
        self._counters = _Counters(self.sms, self._lo, counter_buckets(self.max_events, len(self.sms)))
        for index in self.sms:
            self._name_tracks(by_index[index], spec.sub_partitions, spec.max_warps)

    def _name_tracks(self, sm: Any, sub_partitions: int, max_warps: int) -> None:
        pid = sm.index + 1
        self._meta(pid, scheduler_tid(sm.index, 0), "process_name", f"SM {sm.index} ({sm.name})")
        for sp in range(sub_partitions):
            self._meta(pid, scheduler_tid(sm.index, sp), "thread_name", f"scheduler {sp} issue")
        for slot in range(max_warps):
            self._meta(pid, slot_tid(sm.index, slot), "thread_name",
                       f"warp slot {slot} (scheduler {slot % sub_partitions})")

    def _meta(self, pid: int, tid: int, what: str, name: str) -> None:
        self._write(f'{{"ph":"M","pid":{pid},"tid":{tid},"name":"{what}","args":{{"name":{json.dumps(name)}}}}}')

    def _slice(self, sm: int, tid: int, start: int, end: int, name: str, args: str) -> None:
        if self._room <= 0 and self.stopped_at is None and start < self._hi and end > self._lo:
            self._stop(end)
        if start < self._lo:
            start = self._lo
        if end > self._hi:
            end = self._hi
        if end > start:
            self._room -= 1
            self._write(_EVENT.format(sm + 1, tid, start, end - start, name, args))

    def _stop(self, now: int) -> None:
        """No room for more: record nothing from cycle `now` on (what is in progress ends there)."""
        self.stopped_at = max(now, self._lo)
        self._hi = min(self._hi, self.stopped_at)

    def _write(self, event: str) -> None:
        if self._events >= self.max_events:
            self._dropped += 1  # (the room kept aside makes this not happen)
            return
        self._pending.append(event if not self._events else ",\n" + event)
        self._events += 1
        if len(self._pending) >= 8192:
            self._flush()

    def _flush(self) -> None:
        assert self._file is not None, "a closed trace records nothing"
        self._file.write("".join(self._pending))
        self._pending.clear()

    def _count(self, sm: int, which: int, start: int, end: int) -> None:
        start, end = max(start, self._lo), min(end, self._hi)
        if end > start and self._counters is not None:
            self._counters.add(sm, which, start, end)

    def _active(self, sm: int, start: int, end: int) -> None:
        self._count(sm, 0, start, end)
        if end > self._last:
            self._last = end

    def _name(self, text: str) -> str:
        quoted = self._names.get(text)
        if quoted is None:
            quoted = self._names[text] = json.dumps(text)
        return quoted

    @property
    def bucket_cycles(self) -> int:
        """The counters' bucket width in cycles (it doubles as the run grows past BUCKETS buckets)."""
        return 1 << self._counters.shift if self._counters is not None else 1

    # --- the end -----------------------------------------------------------------------------------------
    def close(self, result: Any = None) -> dict:
        """Write the counters and the closing metadata (`otherData`); the file is complete after this. Returns
        the summary (events, bytes, cycles shown, stopped_at); `result`, if given, names the run in the file."""
        if self.summary is not None:
            return self.summary
        ran_to = self._offset + self._gpu.end_cycle if self._gpu is not None else 0
        end = min(self._hi, max(self._last, ran_to))
        for index in self.sms:  # warps still resident (an interrupted run) count as active to the end
            for start in self._resident[index].values():
                self._active(index, start, end)
            self._write_counters(index, end)
        self.summary = self._metadata(result, end)
        self.summary["run_end"] = max(self._last, ran_to)
        self._flush()
        assert self._file is not None
        self._file.write("\n],\n" + '"otherData":' + json.dumps(self.summary, separators=(",", ":")) + "}\n")
        self.summary["bytes"] = self._file.tell()
        self._file.close()
        self._file = None
        return self.summary

    def _write_counters(self, sm: int, end: int) -> None:
        if self._counters is None or end <= self._lo:
            return
        previous: list = [None, None, None]
        for t, values in self._counters.rows(sm, end):
            for which, name in enumerate(("active", "eligible", "issued")):
                if values[which] != previous[which]:
                    previous[which] = values[which]
                    self._write(f'{{"ph":"C","pid":{sm + 1},"tid":{scheduler_tid(sm, 0)},"ts":{t},'
                                f'"name":"{name}","args":{{"warps":{values[which]}}}}}')

    def _metadata(self, result: Any, end: int) -> dict:
        meta: dict[str, Any] = {"generator": f"gpusim {__version__}", "time_unit": TIME_UNIT}
        if result is not None:
            meta.update(kernel=result.kernel, arch=result.arch, scheduler=result.scheduler)
            observed = (result.sampling or {}).get("observed_run")
            if observed:
                meta["observed_run"] = observed
                meta["note"] = "a sampled run: this trace shows the one reduced run named in observed_run"
        meta.update(sms=list(self.sms), window=[self._lo, max(self._lo, end)], events=self._events,
                    max_events=self.max_events, stopped_at=self.stopped_at,
                    counters=f"active, eligible and issued warps per cycle, averaged over buckets of "
                             f"{self.bucket_cycles} cycle(s)")
        if len(self._kernel_starts) > 1:
            meta["kernel_starts"] = self._kernel_starts
        if self._dropped:
            meta["dropped_events"] = self._dropped
        return meta


# --- the command line ------------------------------------------------------------------------------------------
def parse_window(text: str) -> tuple[int, int | None]:
    """'1000:5000' -> (1000, 5000), '1000:' -> (1000, None), ':5000' -> (0, 5000): cycles [START, END)."""
    m = _WINDOW.match(text)
    start, end = (int(m.group(1) or 0), int(m.group(2)) if m.group(2) else None) if m else (0, 0)
    if not m or (end is not None and end <= start):
        raise GpusimError(f"--trace-window {shown(text, 40)}: expected START:END in cycles, END > START (either "
                          f"may be left out: 1000: or :5000)")
    return start, end


def parse_sms(text: str, count: int) -> tuple[int, ...]:
    """'0', '0,3' or 'all' (the run has `count` SMs) -> SM indices, each checked against `count`."""
    if text.strip() == "all":
        return tuple(range(count))
    if not _SM_LIST.match(text):
        raise GpusimError(f"--trace-sm {shown(text, 40)}: expected SM indices N[,M...] or all")
    sms = tuple(sorted({int(part) for part in text.split(",")}))
    if sms[-1] >= count:
        raise GpusimError(f"--trace-sm {shown(text, 40)}: the run has SMs 0 to {count - 1}")
    return sms


def parse_max_events(text: str) -> int:
    try:
        value = int(text.replace(",", "").replace("_", ""))
    except ValueError:
        value = 0
    if value < 1:
        raise GpusimError(f"--trace-max-events {shown(text, 40)}: expected a positive integer, e.g. 2000000")
    return value


class TraceView:
    """The CLI's view object (see gpusim.cli.run_command.run_views) for --trace: `observer`, `attach`, `report`."""

    def __init__(self, args: Any):
        if args.trace == "-" or not args.trace.strip():
            raise GpusimError(f"--trace {shown(args.trace, 40)}: expected a file path (the trace is a file)")
        window = parse_window(args.trace_window) if args.trace_window else (0, None)
        max_events = parse_max_events(args.trace_max_events) if args.trace_max_events else DEFAULT_MAX_EVENTS
        spec = _single_arch(args.arch)
        scheduler = args.scheduler or ""
        if spec is None or "," in scheduler or scheduler == "all":
            raise GpusimError("--trace shows one run: give one --arch and one --scheduler")
        count = sum(len(tpc) for gpc in sm_layout(spec, args.sms) for tpc in gpc)
        sms = parse_sms(args.trace_sm or "0", count)
        slice_room(max_events, len(sms), spec.sm.sub_partitions, spec.sm.max_warps)  # refused before the run
        self.observer = ChromeTrace(args.trace, sms=sms, window=window, max_events=max_events)

    def attach(self, result: Any) -> Any:
        self.observer.close(result)
        return result

    def report(self, result: Any, stream: TextIO) -> None:
        summary = self.observer.close(result)
        if self.observer.stopped_at is not None:
            print(f"trace: stopped at cycle {self.observer.stopped_at:,}: the {self.observer.max_events:,}-event "
                  f"limit; narrow it with --trace-window/--trace-sm", file=sys.stderr)
        start, end = summary["window"]
        sms = ("SM " if len(summary["sms"]) == 1 else "SMs ") + ",".join(str(i) for i in summary["sms"])
        print(f"wrote {self.observer.path}: {sms}, cycles {start:,} to {end:,}, {summary['events']:,} events, "
              f"{summary['bytes'] / 1e6:.1f} MB (open it at ui.perfetto.dev; 1 us there = 1 cycle)", file=stream)
        if end <= start:
            print(f"note: the run ended at cycle {summary['run_end']:,}, before the window", file=stream)
        if "observed_run" in summary:
            print("note: a sampled run: the trace shows its one reduced run (the record's sampling.observed_run)",
                  file=stream)


def _single_arch(arch: str) -> Any:
    """The arch spec, or None for a side-by-side --arch a,b."""
    from pathlib import Path

    from ..arch import load_arch

    if "," in arch and not Path(arch).exists():
        return None
    return load_arch(arch)


def trace_views(args: Any) -> list:
    """[TraceView] when --trace is given; the other --trace-* flags need it."""
    if getattr(args, "trace", None) is None:
        for flag in ("trace_window", "trace_sm", "trace_max_events"):
            if getattr(args, flag, None):
                raise GpusimError(f"--{flag.replace('_', '-')}: needs --trace FILE")
        return []
    return [TraceView(args)]


__all__ = ["DEFAULT_MAX_EVENTS", "ChromeTrace", "TraceView", "parse_sms", "parse_window", "trace_views"]
