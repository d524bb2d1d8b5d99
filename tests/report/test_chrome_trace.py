"""`gpusim run ... --trace FILE`: the Chrome Trace Event JSON timeline (gpusim.report.chrome_trace), checked
against the trace-event format, against the engine's own counters and, where its binary can be had, by loading
it in Perfetto's trace processor."""

import collections
import json
import os
import re
from pathlib import Path

import pytest

from gpusim.api import run
from gpusim.cli import main
from gpusim.stats.observer import Observer, Tee
from gpusim.report.chrome_trace import ChromeTrace, slot_tid

from tests.conftest import ROOT, run_cli
from tests.trace.test_trace import _chain, write_trace

LATENCY = str(ROOT / "workloads" / "microbench" / "latency_hiding.yaml")
SMALL = ["--set", "blocks=8", "--set", "iters=4"]  # 4 blocks of 4 warps on each of 2 SMs: a few thousand events
REASONS = ("long_scoreboard", "short_scoreboard", "wait", "math_pipe_throttle", "mio_throttle", "lg_throttle",
           "barrier", "branch_resolving", "not_selected", "no_instruction", "drain", "dispatch_stall", "misc")


def load(path) -> dict:
    """The file, checked against the trace-event format as Perfetto's JSON importer reads it: an object whose
    traceEvents hold only X (pid, tid, ts, dur > 0, name, args), C (pid, ts, name, numeric args) and M
    (process_name / thread_name) events, whole-cycle times, no array at an event's top level (the importer
    refuses those), pids from 1 (Perfetto keeps pid 0 for the idle task), and no displayTimeUnit (Perfetto would
    read the times as ns)."""
    doc = json.loads(Path(path).read_text())
    assert set(doc) == {"traceEvents", "otherData"}
    for event in doc["traceEvents"]:
        assert not any(isinstance(v, list) for v in event.values()), event
        assert isinstance(event["pid"], int) and event["pid"] >= 1, event
        if event["ph"] == "X":
            assert isinstance(event["tid"], int) and isinstance(event["ts"], int) and event["ts"] >= 0, event
            assert isinstance(event["dur"], int) and event["dur"] > 0, event
            assert isinstance(event["name"], str) and isinstance(event["args"], dict), event
        elif event["ph"] == "C":
            assert isinstance(event["ts"], int) and event["args"], event
            assert all(isinstance(v, (int, float)) for v in event["args"].values()), event
        else:
            assert event["ph"] == "M" and event["name"] in ("process_name", "thread_name"), event
            assert isinstance(event["args"]["name"], str), event
    return doc


def slices(doc) -> list[dict]:
    return [e for e in doc["traceEvents"] if e["ph"] == "X"]


def counters(doc) -> list[dict]:
    return [e for e in doc["traceEvents"] if e["ph"] == "C"]


def one_line_error(capsys, *argv) -> str:
    """Run the CLI in-process on bad input: a non-zero exit and one line on stderr, no traceback."""
    try:
        code = main(["run", *argv])
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert code != 0 and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.fixture(scope="module")
def acceptance(tmp_path_factory):
    """The README's command, exactly: latency_hiding on 2 H100 SMs, SM 0 traced over the whole run."""
    path = tmp_path_factory.mktemp("trace") / "t.json"
    p = run_cli("run", LATENCY, "--arch", "h100", "--sms", "2", "--trace", str(path))
    assert p.returncode == 0, p.stderr
    return path, p


@pytest.fixture(scope="module")
def acceptance_doc(acceptance):
    """The acceptance command's file, read and checked against the format once for the tests that read it."""
    return load(acceptance[0])


def test_acceptance_command_writes_slices_counters_and_names(acceptance, acceptance_doc):
    """More than 100 complete events with pid, tid, ts, dur and name; counter events; every track named; the
    process named after its SM; the output says what it wrote."""
    path, p = acceptance
    doc = acceptance_doc
    xs = slices(doc)
    assert len(xs) > 100 and all({"pid", "tid", "ts", "dur", "name"} <= set(e) for e in xs)
    assert {e["name"] for e in counters(doc)} == {"active", "eligible", "issued"}
    processes = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert processes == {1: "SM 0 (gpu.gpc[0].tpc[0].sm[0])"}
    threads = {e["tid"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {e["tid"] for e in xs} <= threads
    assert {e["pid"] for e in xs} == {1}  # SM 0 by default
    assert re.search(rf"wrote {re.escape(str(path))}: SM 0, cycles 0 to [\d,]+, [\d,]+ events", p.stdout)
    meta = doc["otherData"]
    assert meta["events"] == len(doc["traceEvents"]) and meta["stopped_at"] is None
    assert "1 us in this file = 1 SM cycle" in meta["time_unit"]


def test_no_two_slices_of_one_track_overlap(acceptance_doc):
    """A scheduler issues one warp a cycle and a warp slot is in one state at a time: on every track the slices
    follow each other without overlap (Perfetto needs that of JSON slices)."""
    doc = acceptance_doc
    tracks = collections.defaultdict(list)
    for e in slices(doc):
        tracks[e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
    assert len(tracks) > 4
    for spans in tracks.values():
        spans.sort()
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))


class Residency(Observer):
    """When each warp became resident and left, by (SM, slot, warp id)."""

    def __init__(self):
        self.spans = {}

    def warp_started(self, sm, sp, warp, now):
        self.spans[(sm.index, warp.slot, warp.gid)] = [now, None]

    def warp_exited(self, sm, sp, warp, now):
        self.spans[(sm.index, warp.slot, warp.gid)][1] = now


def test_a_warp_slots_state_durations_add_up_to_its_resident_time(tmp_path):
    """On a warp slot's track, the slices of one warp (its stall states and issue cycles) cover exactly the
    cycles it was resident: their durations add up to exit - start, for every warp of both traced SMs."""
    path, residency = tmp_path / "t.json", Residency()
    trace = ChromeTrace(path, sms=(0, 1))
    result = run(LATENCY, "h100", sms=2, params={"blocks": 8, "iters": 4}, observer=Tee(trace, residency))
    trace.close(result)
    covered = collections.Counter()
    for e in slices(load(path)):
        if e["tid"] % 10000 >= 5000:
            covered[(e["pid"] - 1, e["tid"] % 10000 - 5000, e["args"]["warp"])] += e["dur"]
    assert len(residency.spans) == 32
    for key, (start, end) in residency.spans.items():
        assert covered[key] == end - start, key


def test_states_and_issues_match_the_engines_counters(tmp_path):
    """With one SM traced whole, the slices named by each stall reason add up to the record's
    smsp__pcsamp_warps_issue_stalled_<reason> warp-cycles, the issue slices number smsp__inst_executed.sum, and
    the counters, integrated over time, give the same active, eligible and issued warp-cycles."""
    path = tmp_path / "t.json"
    trace = ChromeTrace(path)
    result = run(LATENCY, "h100", sms=1, params={"blocks": 4, "iters": 8}, observer=trace)
    trace.close(result)
    doc, m = load(path), result.metrics
    by_name = collections.Counter()
    issues = 0
    for e in slices(doc):
        if e["tid"] % 10000 >= 5000:
            by_name[e["name"]] += e["dur"]
        else:
            issues += 1
    assert issues == m["smsp__inst_executed.sum"] > 0
    for reason in REASONS:
        assert by_name[reason] == m[f"smsp__pcsamp_warps_issue_stalled_{reason}"], reason
    resident = sum(by_name.values())
    integral = collections.Counter()
    series = collections.defaultdict(list)
    for e in counters(doc):
        series[e["name"]].append((e["ts"], e["args"]["warps"]))
    for name, points in series.items():
        integral[name] = sum(v * (t1 - t0) for (t0, v), (t1, _) in zip(points, points[1:]))
    eligible = m["smsp__pcsamp_warps_issue_stalled_not_selected"] + issues
    for name, exact in (("active", resident), ("eligible", eligible), ("issued", issues)):
        assert integral[name] == pytest.approx(exact, rel=1e-3, abs=2), name


def test_window_and_sm_filters(tmp_path):
    """--trace-sm 1 keeps SM 1's process only; --trace-window 500:1500 keeps the cycles [500, 1500): slices
    cut at its edges, counters inside it."""
    path = tmp_path / "w.json"
    p = run_cli("run", LATENCY, "--arch", "h100", "--sms", "2", *SMALL, "--trace", str(path),
                "--trace-window", "500:1500", "--trace-sm", "1")
    assert p.returncode == 0, p.stderr
    doc = load(path)
    xs = slices(doc)
    assert xs and {e["pid"] for e in doc["traceEvents"]} == {2}
    assert "SM 1 (" in next(e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name")
    assert min(e["ts"] for e in xs) == 500 and max(e["ts"] + e["dur"] for e in xs) == 1500
    assert all(500 <= e["ts"] <= 1500 for e in counters(doc))
    assert doc["otherData"]["window"] == [500, 1500] and doc["otherData"]["sms"] == [1]
    assert "wrote" in p.stdout and "SM 1, cycles 500 to 1,500" in p.stdout


def test_the_size_limit_stops_recording_with_one_line(tmp_path):
    """A run that would write more than --trace-max-events stops recording at a cycle, says so in one line on
    stderr, and leaves a complete file of at most that many events that ends at that cycle."""
    path = tmp_path / "big.json"
    p = run_cli("run", LATENCY, "--arch", "h100", "--sms", "2", "--set", "blocks=8", "--set", "iters=32",
                "--trace", str(path), "--trace-max-events", "5000")
    assert p.returncode == 0, p.stderr
    found = re.findall(r"^trace: stopped at cycle ([\d,]+): the 5,000-event limit; narrow it with "
                       r"--trace-window/--trace-sm$", p.stderr, re.M)
    assert len(found) == 1
    stopped = int(found[0].replace(",", ""))
    doc = load(path)
    assert len(doc["traceEvents"]) <= 5000 and doc["otherData"]["stopped_at"] == stopped
    assert max(e["ts"] + e["dur"] for e in slices(doc)) == stopped


@pytest.mark.parametrize("flags, message", [
    (["--trace-window", "5:2"], "--trace-window 5:2: expected START:END in cycles, END > START"),
    (["--trace-window", "soon"], "--trace-window soon: expected START:END"),
    (["--trace-sm", "7"], "--trace-sm 7: the run has SMs 0 to 1"),
    (["--trace-sm", "x"], "--trace-sm x: expected SM indices N[,M...] or all"),
    (["--trace-max-events", "0"], "--trace-max-events 0: expected a positive integer"),
    (["--trace-max-events", "300"], "--trace-max-events 300: too small for 1 SM(s)"),
])
def test_bad_trace_flags_are_one_line_errors(tmp_path, capsys, flags, message):
    """A bad --trace-* value is refused before the run, in one line naming the flag and what was expected."""
    err = one_line_error(capsys, LATENCY, "--arch", "h100", "--sms", "2", "--trace", str(tmp_path / "t.json"),
                         *flags)
    assert message in err


def test_trace_flags_need_trace_and_a_writable_file(tmp_path, capsys):
    """--trace-window without --trace, --trace - and an unwritable path are one-line errors too."""
    base = [LATENCY, "--arch", "h100", "--sms", "2"]
    assert "--trace-window: needs --trace FILE" in one_line_error(capsys, *base, "--trace-window", "0:10")
    assert "--trace -: expected a file path" in one_line_error(capsys, *base, "--trace", "-")
    assert "cannot write" in one_line_error(capsys, *base, "--trace", str(tmp_path / "no" / "t.json"))
    assert "give one --arch" in one_line_error(capsys, LATENCY, "--arch", "h100,a100", "--trace", "t.json")


def test_same_inputs_give_the_same_file(tmp_path):
    """The trace is part of the run's output: the same inputs write the same bytes."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for path in (a, b):
        assert run_cli("run", LATENCY, "--arch", "h100", "--sms", "2", *SMALL, "--quiet",
                       "--trace", str(path)).returncode == 0
    assert a.read_bytes() == b.read_bytes()


def test_a_sampled_run_names_its_observed_run(tmp_path):
    """A sampled run's trace shows one reduced run, and its metadata says which (the record's observed_run)."""
    path = tmp_path / "s.json"
    trace = ChromeTrace(path)
    result = run(LATENCY, "h100", sms=2, params={"blocks": 64, "iters": 16}, sample="on", observer=trace)
    trace.close(result)
    assert result.sampling["method"] != "full"
    meta = load(path)["otherData"]
    assert meta["observed_run"] == result.sampling["observed_run"] and "reduced run" in meta["note"]


def test_a_kernel_lists_kernels_follow_each_other(tmp_path):
    """Each kernel of a command list runs on a fresh GPU from cycle 0; in the trace the second starts where the
    first ended, so no track's slices overlap."""
    write_trace(tmp_path / "kernel-1.traceg", [_chain(20)] * 4)
    write_trace(tmp_path / "kernel-2.traceg", [_chain(30)] * 4)
    (tmp_path / "kernelslist.g").write_text("kernel-1.traceg\nkernel-2.traceg\n")
    path = tmp_path / "k.json"
    trace = ChromeTrace(path)
    result = trace.close(run(tmp_path / "kernelslist.g", "h100", sms=1, observer=trace)) and load(path)
    starts = result["otherData"]["kernel_starts"]
    assert len(starts) == 2 and starts[0] == 0 and starts[1] > 0
    xs = slices(result)
    slot0 = sorted((e["ts"], e["ts"] + e["dur"]) for e in xs if e["tid"] == slot_tid(0, 0))
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(slot0, slot0[1:]))
    assert any(ts >= starts[1] for ts, _ in slot0) and any(end <= starts[1] for _, end in slot0)


def _trace_processor(path):
    """Perfetto's trace processor on `path`, or a skip where its binary cannot be had (it downloads
    trace_processor_shell on first use; PERFETTO_TRACE_PROCESSOR names a local one)."""
    module = pytest.importorskip("perfetto.trace_processor", reason="the perfetto package is not installed "
                                 "(pip install -e '.[test]')")
    config = module.TraceProcessorConfig(bin_path=os.environ.get("PERFETTO_TRACE_PROCESSOR"), load_timeout=60)
    try:
        return module.TraceProcessor(trace=str(path), config=config)
    except Exception as exc:  # noqa: BLE001 - no binary (no network to fetch it), or it could not start
        pytest.skip(f"Perfetto's trace processor could not start here ({type(exc).__name__}; it fetches its "
                    f"binary on first use, or set PERFETTO_TRACE_PROCESSOR); the format itself is checked by "
                    f"the other tests")


def test_perfetto_loads_the_trace(acceptance, acceptance_doc):
    """Perfetto's trace processor imports every slice without a JSON error, under the SM's process, with no
    slice nested in another (no overlap), and makes the three counter tracks; 1 cycle is 1 us (1000 ns)."""
    doc = acceptance_doc
    tp = _trace_processor(acceptance[0])
    try:
        rows = list(tp.query("SELECT p.pid AS pid, p.name AS name, COUNT(s.id) AS n FROM slice s "
                             "JOIN thread_track tt ON s.track_id = tt.id JOIN thread t USING (utid) "
                             "JOIN process p USING (upid) GROUP BY p.pid"))
        assert [(r.pid, r.name, r.n) for r in rows] == [(1, "SM 0 (gpu.gpc[0].tpc[0].sm[0])", len(slices(doc)))]
        assert next(iter(tp.query("SELECT MAX(depth) AS d FROM slice"))).d == 0
        first = min(e["ts"] for e in slices(doc))
        assert next(iter(tp.query("SELECT MIN(ts) AS t FROM slice"))).t == first * 1000
        tracks = {r.name for r in tp.query("SELECT DISTINCT t.name AS name FROM counter c "
                                           "JOIN process_counter_track t ON c.track_id = t.id")}
        assert {"active warps", "eligible warps", "issued warps"} <= tracks
        errors = [(r.name, r.value) for r in tp.query("SELECT name, value FROM stats WHERE name LIKE 'json%' "
                                                      "AND value > 0")]
        assert not errors
    finally:
        tp.close()
