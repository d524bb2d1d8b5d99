"""Applications (gpusim.app, `gpusim app run`): streams order their commands and overlap each other, kernels share a
GPU's SMs, copies and all-reduces take the times the arch file's interconnect gives, kernel results are simulated
once and kept, and bad input is a one-line error naming the file and line."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from gpusim.app import (AllReduceCommand, AppError, Application, CopyCommand, KernelCache, KernelCommand,
                        KernelResult, RecordCommand, WaitCommand, kernel_result, load_application, run_app)
from gpusim.app import kernels as app_kernels
from gpusim.app.transfers import allreduce_seconds, copy_seconds
from gpusim.arch import load_arch
from gpusim.errors import GpusimError
from gpusim.options import RunOptions

from tests.conftest import ROOT, run_cli

VECADD = "workloads/vecadd.yaml"  # 256 blocks of 8 per SM at n = 65,536: 32 SMs, about 1.3 us on an H100
SMALL = {"n": 65536}
TRACES = ROOT.parent / "shared" / "traces" / "accelsim-vectoradd"
H100 = load_arch("h100")


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> KernelCache:
    """One kernel cache for the module's runs: a kernel simulated by one test is reused by the next."""
    return KernelCache(tmp_path_factory.mktemp("kernels"))


def by_name(result, name: str):
    return next(a for a in result.activities if a.name == name)


@pytest.mark.fast
def test_two_streams_overlap(cache):
    """Two kernels on two streams that each fill a quarter of the SMs start together: the application takes the
    longer one's time, not the sum."""
    app = Application("pair", [KernelCommand(VECADD, SMALL, stream="a", name="left"),
                               KernelCommand(VECADD, {"n": 131072}, stream="b", name="right")])
    result = run_app(app, "h100", cache=cache)
    left, right = by_name(result, "left"), by_name(result, "right")
    assert left.start_s == right.start_s == 0.0
    assert (left.detail["sms"], right.detail["sms"]) == (32, 64)
    assert result.time_s == pytest.approx(max(left.end_s, right.end_s))
    assert result.time_s < 0.9 * (left.detail["seconds"] + right.detail["seconds"])


def test_the_shipped_two_streams_app_overlaps(cache):
    """workloads/apps/two_streams.yaml: a GEMM and a decode attention, each under half an H100, overlap."""
    result = run_app(ROOT / "workloads/apps/two_streams.yaml", "h100", cache=cache)
    kernels = result.kernels
    assert len(kernels) == 2 and all(k.start_s == 0.0 for k in kernels)
    assert all(k.detail["sms"] == k.detail["sms_wanted"] < 66 for k in kernels)
    total = sum(k.detail["seconds"] for k in kernels)
    assert all(k.detail["seconds"] > 10e-6 for k in kernels)  # tens of microseconds each
    assert result.time_s < 0.9 * total


@pytest.mark.fast
def test_a_stream_runs_its_commands_in_order(cache):
    app = Application("order", [KernelCommand(VECADD, SMALL, name="first"),
                                KernelCommand(VECADD, SMALL, name="second")])
    result = run_app(app, "h100", cache=cache)
    first, second = by_name(result, "first"), by_name(result, "second")
    assert second.start_s == pytest.approx(first.end_s) and second.after == first.id
    assert [p.id for p in result.critical_path()] == [first.id, second.id]


@pytest.mark.fast
def test_a_wait_holds_its_stream_until_the_event_is_recorded(cache):
    """The kernel after the wait starts when the copy before the record ends; the kernel before it does not wait."""
    app = Application("event", [CopyCommand(4 << 20, "h2d", stream="upload"),
                                RecordCommand("uploaded", stream="upload"),
                                KernelCommand(VECADD, SMALL, stream="compute", name="independent"),
                                WaitCommand("uploaded", stream="compute"),
                                KernelCommand(VECADD, SMALL, stream="compute", name="dependent")])
    result = run_app(app, "h100", cache=cache)
    copy = result.copies[0]
    independent, dependent = by_name(result, "independent"), by_name(result, "dependent")
    assert independent.start_s == 0.0 and independent.end_s < copy.end_s
    assert dependent.start_s == pytest.approx(copy.end_s) and dependent.after == copy.id
    assert [p.id for p in result.critical_path()] == [copy.id, dependent.id]


@pytest.mark.fast
def test_a_later_kernel_takes_the_sms_an_earlier_one_leaves(cache):
    """On a GPU of 40 SMs a kernel wanting 32 gets them; the next, wanting 32, gets the 8 left (and runs more
    waves); a third waits for SMs and starts when the first gives its 32 back."""
    app = Application("share", [KernelCommand(VECADD, SMALL, stream="a", name="first"),
                                KernelCommand(VECADD, SMALL, stream="b", name="second"),
                                KernelCommand(VECADD, SMALL, stream="c", name="third")])
    result = run_app(app, "h100", options=RunOptions(sms=40), cache=cache)
    first, second, third = (by_name(result, n) for n in ("first", "second", "third"))
    assert (first.detail["sms"], second.detail["sms"]) == (32, 8)
    assert second.detail["sms_wanted"] == 32 and second.detail["seconds"] > first.detail["seconds"]
    assert third.start_s == pytest.approx(first.end_s) and third.after == first.id
    assert third.detail["sms"] == 32


@pytest.mark.fast
@pytest.mark.parametrize("arch", ["h100", "a100", "l40s", "t4"])
def test_copy_times_are_latency_plus_bytes_over_bandwidth(arch):
    spec = load_arch(arch)
    link, dram = spec.interconnect, spec.memory.dram
    n = 64 << 20
    latency = link.host_latency_us * 1e-6
    assert copy_seconds(spec, "h2d", n) == pytest.approx(latency + n / (link.h2d_bandwidth_gbs * 1e9))
    assert copy_seconds(spec, "d2h", n) == pytest.approx(latency + n / (link.d2h_bandwidth_gbs * 1e9))
    read, write = dram.bandwidth_gbs * dram.read_efficiency * 1e9, dram.bandwidth_gbs * dram.write_efficiency * 1e9
    assert copy_seconds(spec, "d2d", n) == pytest.approx(link.host_latency_us * 1e-6 + n / read + n / write)
    if link.nvlink_bandwidth_gbs is not None:
        expected = link.nvlink_latency_us * 1e-6 + n / (link.nvlink_bandwidth_gbs * 1e9)
    else:  # no NVLink: over the host link, at its slower direction
        expected = link.host_latency_us * 1e-6 + n / (min(link.h2d_bandwidth_gbs, link.d2h_bandwidth_gbs) * 1e9)
    assert copy_seconds(spec, "p2p", n) == pytest.approx(expected)


@pytest.mark.fast
def test_copies_in_an_application_take_those_times_and_share_a_link_direction():
    """Two h2d copies on two streams cross one host-link direction one after the other; a d2h beside them
    overlaps; an H100's 51 GB/s h2d and 6 us latency give 64 MiB in 1.32 ms."""
    n = 64 << 20
    app = Application("copies", [CopyCommand(n, "h2d", stream="a"), CopyCommand(n, "h2d", stream="b"),
                                 CopyCommand(n, "d2h", stream="c")])
    result = run_app(app, "h100", cache=None)
    first, second, back = ({c.stream: c for c in result.copies}[s] for s in "abc")
    one = 6e-6 + n / 51e9
    assert first.end_s - first.start_s == pytest.approx(one)
    assert second.start_s == pytest.approx(first.end_s) and second.after == first.id
    assert back.start_s == 0.0 and back.end_s == pytest.approx(6e-6 + n / 52e9)
    assert {first.detail["engine"], second.detail["engine"], back.detail["engine"]} <= {0, 1, 2}


@pytest.mark.fast
@pytest.mark.parametrize("gpus", [2, 4, 8])
def test_allreduce_follows_the_ring_formula(gpus):
    """t = latency x 2(n-1) + 2(n-1)/n x bytes / bus bandwidth (nccl-tests PERFORMANCE.md), with the H100's measured
    478.87 GB/s bus bandwidth and 2.0 us step latency."""
    n = 1 << 30
    expected = 2.0e-6 * 2 * (gpus - 1) + 2 * (gpus - 1) / gpus * n / 478.87e9
    assert allreduce_seconds(H100, n, gpus) == pytest.approx(expected)
    app = Application("ring", [AllReduceCommand(n, stream="s")], gpus=gpus)
    result = run_app(app, "h100", cache=None)
    (reduce,) = result.allreduces
    assert reduce.end_s - reduce.start_s == pytest.approx(expected) and result.time_s == pytest.approx(expected)


@pytest.mark.fast
def test_allreduce_without_a_measured_bus_bandwidth_uses_nvlink_and_one_gpu_takes_no_time():
    b200 = load_arch("b200")
    assert b200.interconnect.allreduce_bus_bandwidth_gbs is None
    n = 1 << 30
    assert allreduce_seconds(b200, n, 8) == pytest.approx(2.0e-6 * 14 + 14 / 8 * n / 900e9)
    assert allreduce_seconds(H100, n, 1) == 0.0


@pytest.mark.fast
def test_an_arch_without_an_interconnect_section_refuses_copies():
    bare = attrs.evolve(H100, interconnect=None)
    with pytest.raises(GpusimError, match="h100: no interconnect section"):
        run_app(Application("c", [CopyCommand(1024)]), bare, cache=None)


@pytest.mark.fast
def test_a_second_run_simulates_nothing(tmp_path, monkeypatch):
    """Identical kernels of one run simulate once; a second run finds every kernel in the cache and gives the same
    record."""
    calls = []
    simulate = app_kernels.simulate

    def counting(*args, **kwargs):
        calls.append(args[0])
        return simulate(*args, **kwargs)

    monkeypatch.setattr(app_kernels, "simulate", counting)
    app = Application("layers", [KernelCommand(VECADD, SMALL, name=f"layer{i}") for i in range(3)])
    first = run_app(app, "h100", cache=KernelCache(tmp_path))
    assert len(calls) == 1 and first.simulated == 1
    assert len(list(tmp_path.glob("*.json"))) == 1
    second = run_app(app, "h100", cache=KernelCache(tmp_path))
    assert len(calls) == 1 and second.simulated == 0 and second.cache_hits == 1
    assert second.to_dict() == first.to_dict()


@pytest.mark.fast
def test_kernel_result_keeps_what_an_application_needs(tmp_path):
    cache = KernelCache(tmp_path)
    options = RunOptions(sms=4)
    result = kernel_result(ROOT / VECADD, SMALL, H100, options, cache)
    assert isinstance(result, KernelResult) and cache.stored == 1 and cache.hits == 0
    assert (result.name, result.arch, result.sms, result.blocks) == ("vecadd", "h100", 4, 256)
    assert result.seconds == pytest.approx(result.metrics["gpu__time_duration.sum"])
    assert result.cycles == result.metrics["gpu_sim_cycle"] and result.dram_bytes > 0 and result.flop == 65536
    assert result.bound in ("latency", "dram", "l2", "l1tex", "issue", "alu", "fma", "xu", "tensor", "sm-to-l2")
    again = kernel_result(ROOT / VECADD, SMALL, H100, options, cache)
    assert cache.hits == 1 and again == result
    other = kernel_result(ROOT / VECADD, SMALL, H100, RunOptions(sms=8), cache)
    assert other.sms == 8 and cache.stored == 2  # the SM count is part of the key


@pytest.mark.fast
def test_a_broken_cache_file_is_simulated_again(tmp_path):
    cache = KernelCache(tmp_path)
    kernel_result(ROOT / VECADD, SMALL, H100, RunOptions(sms=4), cache)
    (path,) = tmp_path.glob("*.json")
    path.write_text("{not json")
    result = kernel_result(ROOT / VECADD, SMALL, H100, RunOptions(sms=4), cache)
    assert cache.hits == 0 and cache.stored == 2 and result.sms == 4


@pytest.mark.skipif(not (TRACES / "kernelslist.g").exists(), reason="../shared/traces/accelsim-vectoradd is absent")
def test_a_kernelslist_runs_as_an_application(tmp_path):
    """Each MemcpyHtoD line is an h2d copy and each kernel line a kernel, in order, on the default stream."""
    app = load_application(TRACES / "kernelslist.g")
    assert [type(c).__name__ for c in app.commands] == ["CopyCommand", "CopyCommand", "KernelCommand"]
    result = run_app(app, "h100", cache=KernelCache(tmp_path))
    copies, (kernel,) = result.copies, result.kernels
    assert [c.detail["bytes"] for c in copies] == [200000, 200000]
    assert copies[1].start_s == pytest.approx(copies[0].end_s)
    assert copies[0].end_s == pytest.approx(copy_seconds(H100, "h2d", 200000))
    assert kernel.start_s == pytest.approx(copies[1].end_s) and kernel.after == copies[1].id
    assert kernel.detail["blocks"] == 196 and kernel.stream == "default"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "app.yaml"
    path.write_text(text)
    return path


@pytest.mark.fast
@pytest.mark.parametrize("body, expected", [
    ("commands:\n  - {launch: x}\n", r"app.yaml:3: commands\[0\]: unknown command 'launch'"),
    ("commands:\n  - {kernel: " + str(ROOT / VECADD) + ", stream: a}\n  - {wait: ready, stream: b}\n",
     r"app.yaml:4: commands\[1\].wait: event 'ready' is not recorded before this command"),
    ("commands:\n  - {copy: {bytes: -5}}\n", r"app.yaml:3: commands\[0\].copy.bytes: expected a whole number of bytes"),
    ("commands:\n  - {copy: {bytes: lots}}\n", r"app.yaml:3: commands\[0\].copy.bytes: expected a whole number"),
    ("commands:\n  - {kernel: no_such_workload.yaml}\n",
     r"app.yaml:3: commands\[0\].kernel: workload 'no_such_workload.yaml' not found"),
    ("commands:\n  - {copy: {bytes: 1M, kind: p2p, dst_gpu: 3}}\n",
     r"app.yaml:3: commands\[0\].copy.dst_gpu: expected a GPU index from 0 to 0"),
    ("commands:\n  - {record: e, strem: a}\n", r"app.yaml:3: commands\[0\]: unknown key 'strem' for a record"),
    ("gpus: 0\ncommands:\n  - {copy: {bytes: 1M}}\n", r"app.yaml:2: gpus: expected a whole number of GPUs"),
    ("comands: []\n", r"app.yaml:2: unknown key 'comands'"),
])
def test_bad_input_is_one_line_naming_the_file_and_line(tmp_path, body, expected):
    path = write(tmp_path, "name: bad\n" + body)
    with pytest.raises(AppError, match=expected) as info:
        load_application(path)
    assert "\n" not in str(info.value)


@pytest.mark.fast
def test_bad_input_through_the_command_line_is_one_line(tmp_path):
    path = write(tmp_path, "name: bad\ncommands:\n  - {copy: {bytes: 0}}\n")
    proc = run_cli("app", "run", str(path), "--arch", "h100", "--no-cache")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ")
    assert "app.yaml:3: commands[0].copy.bytes" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.fast
def test_a_workload_that_fails_to_load_names_the_command(tmp_path):
    path = write(tmp_path, f"name: bad\ncommands:\n  - {{kernel: {ROOT / VECADD}, params: {{n: -1}}}}\n")
    with pytest.raises(AppError, match=r"app.yaml:3: commands\[0\]: .*vecadd.yaml"):
        run_app(path, "h100", cache=None)


@pytest.mark.fast
def test_an_application_built_in_code_names_its_command():
    app = Application("mine", [CopyCommand(1024, "sideways")])
    with pytest.raises(AppError, match=r"mine: command 1: copy.kind: expected one of h2d, d2h, d2d, p2p"):
        run_app(app, "h100", cache=None)


@pytest.mark.fast
def test_the_same_application_gives_the_same_record(cache):
    app = Application("twice", [CopyCommand(1 << 20, stream="u"), RecordCommand("e", stream="u"),
                                KernelCommand(VECADD, SMALL, stream="k"), WaitCommand("e", stream="k"),
                                KernelCommand(VECADD, {"n": 131072}, stream="k")])
    first = json.dumps(run_app(app, "h100", cache=None).to_dict())
    second = json.dumps(run_app(app, "h100", cache=cache).to_dict())
    assert first == second


@pytest.mark.fast
def test_the_command_line_writes_the_record_and_the_timeline(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUSIM_CACHE", str(tmp_path / "kernels"))
    path = write(tmp_path, f"name: cli\ncommands:\n  - {{copy: {{bytes: 1M}}, stream: up}}\n"
                           f"  - {{kernel: {ROOT / VECADD}, params: {{n: 65536}}, stream: k}}\n")
    trace = tmp_path / "app.json"
    proc = run_cli("app", "run", str(path), "--arch", "h100", "--json", "-", "--trace", str(trace), "--quiet")
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert set(record) >= {"time_s", "kernels", "copies", "allreduces", "critical_path"}
    (kernel,) = record["kernels"]
    assert {"name", "stream", "gpu", "sms", "start_s", "end_s", "bound"} <= set(kernel)
    assert {"kind", "bytes", "stream", "start_s", "end_s"} <= set(record["copies"][0])
    events = json.loads(trace.read_text())["traceEvents"]
    tracks = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert tracks == {"stream up", "stream k", "copy engine 0"}
    assert sum(e["ph"] == "X" for e in events) == 3  # the kernel, the copy on its stream and on its engine
    table = run_cli("app", "run", str(path), "--arch", "h100")
    assert table.returncode == 0 and "critical path:" in table.stdout and "kernels simulated: 0" in table.stderr
