"""Lax SM synchronisation (`--sync-window CYCLES`, gpusim.engine.gpu): each SM runs up to a window's end before the
next SM is stepped. It must keep every physical rule the exact engine keeps (no rate above its peak, no data
before it arrives, bytes conserved), be deterministic, stay close to the exact run, and leave the default exact.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gpusim
from gpusim.api import run
from gpusim.options import MAX_SYNC_WINDOW
from gpusim.errors import GpusimError
from gpusim.memory.hierarchy import MemoryHierarchy
from gpusim.memory.l2_tags import line_hash
from gpusim.memory.levels import DRAM, L2_IN_FLIGHT
from gpusim.stats.invariants import violations

from tests.cli.test_hostile_workload_cli import _cli
from tests.stats.test_physics import ARCHS, CHAIN, check_shipped_workloads

REPO = Path(__file__).resolve().parents[2]
GEMM = REPO / "workloads" / "gemm_tile128_sync.yaml"
SMALL_GEMM = {"M": 512, "N": 1024, "K": 256}  # 32 blocks on 32 SMs


def test_the_default_is_exact_and_a_window_of_one_is_the_default():
    default = run(GEMM, "h100", params=SMALL_GEMM, sms=32)
    one = run(GEMM, "h100", params=SMALL_GEMM, sms=32, sync_window=1)
    assert default.sync_window == 1 and default.to_dict() == one.to_dict()


def test_a_lax_run_is_deterministic_and_says_so():
    first = run(GEMM, "h100", params=SMALL_GEMM, sms=32, sync_window=64)
    second = run(GEMM, "h100", params=SMALL_GEMM, sms=32, sync_window=64)
    assert first.to_dict() == second.to_dict()
    assert first.to_dict()["sync_window"] == 64


def test_a_lax_gemm_stays_within_a_few_percent_of_the_exact_one():
    """32 blocks on 32 SMs sharing A and B through the L2: the SMs meet there up to 64 cycles out of order."""
    exact = run(GEMM, "h100", params=SMALL_GEMM, sms=32).metrics
    lax = run(GEMM, "h100", params=SMALL_GEMM, sms=32, sync_window=64).metrics
    assert lax["gpu_sim_cycle"] == pytest.approx(exact["gpu_sim_cycle"], rel=0.03)
    assert lax["smsp__inst_executed.sum"] == exact["smsp__inst_executed.sum"]
    assert lax["dram__bytes_read.sum"] == pytest.approx(exact["dram__bytes_read.sum"], rel=0.05)


def test_sms_on_one_chain_still_merge_at_the_l2_when_stepped_ahead(tmp_path):
    """Four SMs follow the same pointer chain; the one stepped first in a window makes each miss, the others merge
    with it and wait for its data (no hit on a line whose data has not arrived)."""
    path = tmp_path / "chain.yaml"
    path.write_text(CHAIN)
    one = run(path, "h100", sms=4, params={"blocks": 1}, sync_window=64).metrics
    four = run(path, "h100", sms=4, params={"blocks": 4}, sync_window=64).metrics
    assert four["gpusim__l2_pending_merged_sectors"] == 3 * 64
    assert four["lts__t_sector_hit_rate.pct"] == 0.0
    assert four["gpu_sim_cycle"] >= one["gpu_sim_cycle"]


@pytest.mark.parametrize("arch", ARCHS)
def test_lax_runs_respect_every_physical_limit(arch):
    """Every shipped workload at a small size on every arch, 4 SMs a window of 64 cycles apart: no rate above its
    peak, no load faster than its level's latency, bytes conserved between levels."""
    check_shipped_workloads(arch, sms=4, sync_window=64)


@pytest.mark.parametrize("key", ["stream_read", "stream_copy"])
def test_a_lax_whole_chip_stream_matches_the_h200_as_the_exact_one_does(key):
    """The DRAM limit, every SM of an H200 streaming, stepped 64 cycles apart: the bandwidth the engine gives still
    matches what the H200 measured (validation/results/h200-2026-11-29.json) within the exact engine's tolerance
    (tests/test_hardware_validation.py), so never beats it by more."""
    from tests.test_hardware_validation import RESULTS, TOLERANCE, compare

    plan = next(p for p in compare.comparison_plans(json.loads(RESULTS.read_text()), "h200") if p.key == key)
    metrics = [run(s.workload, "h200", sms=s.sms, params=dict(s.params), sync_window=64).metrics for s in plan.sims]
    for m in metrics:
        assert not violations(m, gpusim.load_arch("h200"))
    assert plan.value(metrics) == pytest.approx(plan.measured, rel=TOLERANCE[key][0])


def test_a_launch_with_clusters_runs_exact(tmp_path):
    """A cluster's SMs wait on each other (barriers, distributed shared memory): its launch is stepped exactly."""
    from tests.engine.test_clusters_engine import KERNEL

    path = tmp_path / "clustered.yaml"
    path.write_text(KERNEL)
    result = run(path, "h100", sync_window=64)
    assert result.sync_window == 1


def test_an_l2_line_in_flight_is_kept_while_an_earlier_request_can_still_come():
    """A line missed at cycle 1,000 is in flight until its DRAM data is back. A request to the same slice made at a
    later cycle (an SM whose pipe queue runs ahead) tidies the slice's in-flight table; an SM not yet stepped to
    cycle 1,100 then asks for the line: it must merge with the miss (counted as merged, its data no earlier than
    the miss's), not count as a hit on the tags the miss already set (the GPU's clock, at cycle 1,000, is the
    horizon no later request comes before; forgetting by the request's own cycle, as before, made it a hit)."""
    spec = gpusim.load_arch("h100")
    memory = MemoryHierarchy(spec, 4, 256 * 1024)
    memory.horizon = 1000.0
    slices = len(memory.slices)
    line = 4096
    other = next(n for n in range(line + 1, line + 100_000) if line_hash(n) % slices == line_hash(line) % slices)
    back, level = memory._l2_access(line, 0b1111, 1000, False)
    assert level == DRAM
    for l2 in memory.slices:
        l2.pending_limit = 0  # tidy at the next miss
    memory._l2_access(other, 0b1111, back + 10, False)
    ready, level = memory._l2_access(line, 0b1111, 1100, False)
    assert level == L2_IN_FLIGHT and ready >= back  # (merged with the read in flight)


@pytest.mark.parametrize("value", ["0", "-3", "1.5", "abc", str(MAX_SYNC_WINDOW + 1)])
def test_a_bad_window_is_a_one_line_error(value):
    code, out, err = _cli("run", str(REPO / "workloads" / "vecadd.yaml"), "--arch", "h100", "--quiet",
                          "--sync-window", value)
    assert code != 0 and out == ""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "--sync-window" in lines[0], err


@pytest.mark.parametrize("value", [0, -1, 2.5, "8", True, MAX_SYNC_WINDOW + 1])
def test_a_bad_window_from_python_is_refused(value):
    with pytest.raises(GpusimError, match="sync-window"):
        run(REPO / "workloads" / "vecadd.yaml", "h100", sync_window=value)


def test_a_sweep_varies_the_window_and_checks_a_fixed_one(tmp_path):
    rows = gpusim.sweep(str(REPO / "workloads" / "vecadd.yaml"), "h100", {"sync_window": [1, 64]}, jobs=1,
                        params={"n": 65536})
    rows = rows.to_dict(orient="records") if hasattr(rows, "to_dict") else rows
    assert [r["sync_window"] for r in rows] == [1, 64] and not any(r["error"] for r in rows)
    with pytest.raises(GpusimError, match="sync-window"):
        gpusim.sweep(str(REPO / "workloads" / "vecadd.yaml"), "h100", {"n": [65536]}, sync_window=0)


@pytest.mark.parametrize("argv,says", [(["--rows", "nosuch"], "--rows: unknown nosuch"),
                                       (["--windows", "0"], "--windows: expected whole numbers"),
                                       (["--windows"], "argument --windows: expected at least one argument"),
                                       (["--windows", "one"], "argument --windows: invalid int value: 'one'")])
def test_the_measuring_script_refuses_bad_arguments_in_one_line(argv, says):
    """`validation/sync_window.py`, which measured the README's table: a bad argument is one line on stderr and
    exit status 1, before anything runs."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(REPO / "validation" / "sync_window.py"), *argv],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("sync_window.py: ") and says in done.stderr


def test_a_lax_run_stops_at_the_end_of_a_window():
    """Ctrl-C (an interrupt) stops a lax run where every SM has been stepped to the same cycle: the last of a
    window, which the partial record names."""
    asked = []

    def interrupt() -> bool:
        asked.append(1)
        return len(asked) >= 3

    result = run(GEMM, "h100", params=SMALL_GEMM, sms=32, sync_window=64, interrupt=interrupt)
    assert result.partial and result.interrupted["cycle"] % 64 == 63
    assert result.metrics["gpu_sim_cycle"] == result.interrupted["cycle"]
