"""`gpusim app run ... --trace out.json`: an application's timeline as Chrome Trace Event JSON, for Perfetto
(ui.perfetto.dev) and chrome://tracing, written from its record (gpusim.app's AppResult.to_dict()).

What the file holds:
* a process per GPU, pid = GPU index + 1 (Perfetto keeps pid 0 for the kernel's idle task), named "GPU 0 (h100)";
* a track per stream of that GPU, "stream default": one slice per kernel (args: id, SMs granted and wanted,
  blocks, bound unit, cycles, after) and per copy it issued; an all-reduce is a slice on the stream of its name of
  every GPU;
* a track per copy engine that ran a copy, "copy engine 0": one slice per copy (args: kind, bytes, after).
Time: real time, ts and dur in microseconds (the format's unit; no displayTimeUnit).
"""

from __future__ import annotations

import json

from ..errors import GpusimError, shown

ENGINE_TID = 1000  # copy engine e is thread ENGINE_TID + e (stream tracks count from 1)
_LEFT_OUT = ("name", "stream", "gpu", "start_s", "end_s", "params")


def _slice(pid: int, tid: int, record: dict) -> dict:
    start, end = record["start_s"] * 1e6, record["end_s"] * 1e6
    args = {k: v for k, v in record.items() if k not in _LEFT_OUT}
    return {"ph": "X", "pid": pid, "tid": tid, "ts": round(start, 4), "dur": round(end - start, 4),
            "name": record["name"], "args": args}


def _meta(pid: int, tid: int, what: str, name: str, sort: int | None = None) -> list[dict]:
    events = [{"ph": "M", "pid": pid, "tid": tid, "name": what, "args": {"name": name}}]
    if sort is not None:
        events.append({"ph": "M", "pid": pid, "tid": tid, "name": f"{what.split('_')[0]}_sort_index",
                       "args": {"sort_index": sort}})
    return events


def app_trace_events(record: dict) -> list[dict]:
    """The trace's events for an application record: metadata (process and track names) first, then the slices."""
    gpus, arch = record["gpus"], record["arch"]
    stream_tids: dict[tuple[int, str], int] = {}
    engines: set[tuple[int, int]] = set()

    def stream_tid(gpu: int, stream: str) -> int:
        if (gpu, stream) not in stream_tids:
            stream_tids[(gpu, stream)] = 1 + sum(1 for g, _ in stream_tids if g == gpu)
        return stream_tids[(gpu, stream)]

    slices = []
    for activity in sorted(record["kernels"] + record["copies"] + record["allreduces"],
                           key=lambda a: (a["start_s"], a["id"])):
        if activity["id"].startswith("a"):
            for gpu in range(gpus):
                slices.append(_slice(gpu + 1, stream_tid(gpu, activity["stream"]), activity))
            continue
        pid = activity["gpu"] + 1
        slices.append(_slice(pid, stream_tid(activity["gpu"], activity["stream"]), activity))
        if "engine" in activity:
            engines.add((activity["gpu"], activity["engine"]))
            slices.append(_slice(pid, ENGINE_TID + activity["engine"], activity))
    meta = []
    for gpu in range(gpus):
        meta += _meta(gpu + 1, 0, "process_name", f"GPU {gpu} ({arch})", gpu)
    for (gpu, stream), tid in sorted(stream_tids.items(), key=lambda kv: (kv[0][0], kv[1])):
        meta += _meta(gpu + 1, tid, "thread_name", f"stream {stream}", tid)
    for gpu, engine in sorted(engines):
        meta += _meta(gpu + 1, ENGINE_TID + engine, "thread_name", f"copy engine {engine}", ENGINE_TID + engine)
    return meta + slices


def write_app_trace(record: dict, path: str) -> int:
    """Write the application's timeline to `path`; returns the number of events."""
    events = app_trace_events(record)
    other = {"application": record["name"], "arch": arch_text(record), "time_s": record["time_s"],
             "time_unit": "1 us in this file = 1 us of the application"}
    try:
        with open(path, "w", encoding="utf-8") as out:
            json.dump({"traceEvents": events, "otherData": other}, out, separators=(",", ":"))
    except OSError as exc:
        raise GpusimError(f"--trace {shown(path, 60)}: cannot write ({exc.strerror or exc})") from None
    return len(events)


def arch_text(record: dict) -> str:
    return f"{record['gpus']} x {record['arch']}" if record["gpus"] > 1 else record["arch"]


__all__ = ["ENGINE_TID", "app_trace_events", "write_app_trace"]
