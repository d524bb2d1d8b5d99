"""Sampling at real sizes: a streaming kernel's write-back L2 in its steady state, and warp-specialised kernels'
loop families shortened together (gpusim.sampling.warm, gpusim.sampling.plan.hot_loops)."""

from __future__ import annotations

import pytest

import gpusim
from gpusim.api import load_kernel
from gpusim.memory.hierarchy import MemoryHierarchy
from gpusim.sampling.plan import Plan, Point, hot_loops, with_trips
from gpusim.sampling.runner import two_regimes
from gpusim.sampling.warm import warm_plan

WS = {"workloads/gemm_hopper_ws.yaml": {"M": 256, "N": 256, "K": 8192},
      "workloads/gemm_blackwell_umma.yaml": {"M": 256, "N": 256, "K": 8192},
      "workloads/flash_attention3.yaml": {"batch": 1, "heads": 1, "seq": 4096}}


@pytest.mark.parametrize("workload", sorted(WS))
def test_a_warp_specialised_kernels_loops_are_one_family(workload):
    kernel = load_kernel(workload, WS[workload])
    loops, base = hot_loops(kernel)
    counts = sorted(int(loop.count.constant) for loop in loops)
    assert len(loops) == 2 and counts[0] == base and 1 <= counts[1] - counts[0] <= 4  # producer and consumers
    shorter = _counts(with_trips(kernel, loops, 8).program)
    written = _counts(kernel.program)
    for line, count in written.items():  # the family 8 trips and its offsets; every other loop as written
        family = next((int(loop.count.constant) for loop in loops if loop.line == line), None)
        assert shorter[line] == (count if family is None else 8 + family - base)


def _counts(nodes, out=None) -> dict:
    """line -> trip count of every constant loop at the top level (inside top-level ifs too)."""
    out = {} if out is None else out
    for node in nodes:
        if type(node).__name__ == "Loop" and node.count.constant is not None:
            out[node.line] = int(node.count.constant)
        elif type(node).__name__ == "If":
            _counts(node.then, out)
            _counts(node.orelse, out)
    return out


def test_a_prologue_and_an_epilogue_keep_their_counts():
    """min(STAGES, K / BK), the ring's first fill, is shorter than any sampled run; the epilogue's 256 / 32 loop
    is as long as one but written in no parameter of the K loops: neither is shortened."""
    kernel = load_kernel("workloads/gemm_blackwell_umma.yaml", {"M": 256, "N": 256, "K": 1024})
    loops, base = hot_loops(kernel)
    assert sorted(loop.count.source for loop in loops) == ["K / BK", "max(K / BK - STAGES, 0)"] and base == 12


@pytest.mark.parametrize("workload,arch", [("workloads/gemm_hopper_ws.yaml", "h100"),
                                           ("workloads/gemm_blackwell_umma.yaml", "b200")])
def test_a_warp_specialised_kernel_samples_without_a_deadlock(workload, arch):
    """Shortened alone, the consumers' loop waited for stages the producer never filled ("block 0 can never
    finish"); shortened together the reduced runs finish and the instruction count projects exactly."""
    params = {"M": 256, "N": 256, "K": 4096}
    result = gpusim.run(workload, arch, params=params, sms=2, sample="on")
    assert result.sampling["method"] == "loop trips"
    assert "shortened together" in result.sampling["detail"]
    assert result.sampling["projected_vs_exact_warp_instructions"] < 0.01 and result.violations == []


def _spec():
    return gpusim.load_arch("t4")


def test_a_warm_l2_is_full_with_its_dirty_share_and_never_meets_the_kernel():
    spec = _spec()
    memory = MemoryHierarchy(spec, spec.sms, 64 * 1024)
    memory.warm_l2(0.25)
    held = [line for cache in memory.l2_caches() for line, _state in cache.lines()]
    assert len(held) == sum(cache.sets * cache.ways for cache in memory.l2_caches())
    assert memory.dirty_bytes() == pytest.approx(0.25 * spec.memory.l2.size_bytes, rel=0.01)
    keys = held
    assert min(keys) * spec.memory.l2.line_bytes >= 1 << 48  # far above every buffer


def _runs(pairs):
    return [(Point(blocks=0, trips=None, waves=w, role="projection"), m) for w, m in pairs]


def _plan(full_waves: int) -> Plan:
    return Plan("waves", "", blocks=1000, wave_blocks=10, tail_blocks=10, full_waves=full_waves)


def _metrics(read, write, dirty, cycles=100):
    return {"dram__bytes_read.sum": read, "dram__bytes_write.sum": write, "gpusim__l2_dirty_bytes_at_end": dirty,
            "gpusim__l2_capacity_bytes": 1000, "gpu_sim_cycle": cycles}


def test_the_steady_state_is_needed_only_where_the_full_run_fills_the_l2_with_dirty_lines():
    # 100 bytes allocated a wave, a third of them written: the L2 of 1,000 bytes fills at wave 10
    runs = _runs([(2, _metrics(133, 0, 67)), (4, _metrics(267, 0, 133))])
    warm = warm_plan(_plan(99), runs)
    assert warm["fill_at"] == pytest.approx(10, abs=0.01) and warm["dirty_fraction"] == pytest.approx(0.333, abs=0.01)
    assert warm_plan(_plan(8), runs) is None  # the full run never fills its L2
    reads_only = _runs([(2, _metrics(200, 0, 0)), (4, _metrics(400, 0, 0))])
    assert warm_plan(_plan(99), reads_only) is None  # nothing to write back
    assert warm_plan(Plan("loop trips and waves", "", 1000, 10, 10, 99, trips=64), runs) is None


def test_two_regimes_join_the_cold_line_and_the_warm_slope_at_the_fill():
    cold = [(2, {"gpu_sim_cycle": 20.0}), (4, {"gpu_sim_cycle": 40.0})]  # 10 a unit from empty
    warm = [(2, {"gpu_sim_cycle": 35.0}), (4, {"gpu_sim_cycle": 65.0})]  # 15 a unit once write-back starts
    assert two_regimes(cold, warm, 10, 30)["gpu_sim_cycle"] == pytest.approx(100 + 20 * 15)


def test_vecadd_streaming_through_a_small_l2_projects_its_write_back():
    """vecadd of 24 MiB on a T4 (4 MiB L2): the reduced runs of a few waves keep their writes dirty in the L2,
    the full run writes them back; sampled from a warm L2, cycles and DRAM bytes within 3% and no limit broken."""
    params = {"n": 1 << 21}
    on = gpusim.run("workloads/vecadd.yaml", "t4", params=params, sample="on")
    off = gpusim.run("workloads/vecadd.yaml", "t4", params=params, sample="off")
    assert "l2_steady_state" in on.sampling and on.violations == []
    steady = on.sampling["steady_state"]  # the estimate: the trend, the fill point's share and the runs' noise
    assert steady["error_from_run_noise_pct"] > 0 and on.sampling["error_estimate_pct"] == pytest.approx(
        steady["error_from_trend_pct"] + on.sampling["l2_steady_state"]["error_from_fill_pct"]
        + steady["error_from_run_noise_pct"], abs=0.03)
    for key in ("gpu_sim_cycle", "dram__bytes.sum"):
        assert on.metrics[key] == pytest.approx(off.metrics[key], rel=0.03), key
    assert on.metrics["dram__bytes_write.sum"] > 0.5 * off.metrics["dram__bytes_write.sum"]


def test_the_midpoint_check_moves_the_check_between_the_projections_runs():
    """No steady state from n/4 on: the check moves to 3n/4 (one run), the projection's runs stay; from there a
    longer plan doubles them as before. A projection reaching MAX_REACH times n or more has no midpoint check:
    settled over n/2 to n says too little that far out, and the trips double."""
    import attrs

    from gpusim.sampling.plan import extend_trips, midpoint_check

    plan = Plan("loop trips", "the loop at line 9 (48 trips) at 2, 4 and 8 trips", blocks=64, wave_blocks=132,
                tail_blocks=64, full_waves=0, trips=48,
                points=(Point(64, 4, 0, "projection", 400), Point(64, 8, 0, "projection", 800),
                        Point(64, 2, 0, "check", 200)))
    moved = midpoint_check(plan)
    assert [(p.trips, p.role, p.warp_insts) for p in moved.points] == [(4, "projection", 400), (8, "projection", 800),
                                                                      (6, "check", 600)]
    assert moved.reason.endswith("at 4 and 8 trips, checked at 6") and midpoint_check(moved) is None
    longer = extend_trips(moved, "no steady state")
    assert sorted((p.trips, p.role) for p in longer.points) == [(4, "check"), (8, "projection"), (16, "projection")]
    assert "at 4, 8 and 16 trips (from 4 and 8, checked at 6: no steady state)" in longer.reason
    assert midpoint_check(attrs.evolve(plan, trips=64)) is None  # (8 x 8 trips)


def test_a_waves_plans_midpoint_check_is_the_run_after_the_wave():
    """The projection multiplies the cost a trip of the run after a full wave by the waves: that run, not the tail
    alone, is the one checked between n/2 and n."""
    from gpusim.sampling.plan import midpoint_check

    plan = Plan("loop trips and waves", "the loop at line 9 (48 trips) at 2, 4 and 8 trips; 3 full waves of 264 "
                "blocks and a tail of 232: the tail alone and after one full wave", blocks=1024, wave_blocks=264,
                tail_blocks=232, full_waves=3, trips=48,
                points=(Point(232, 4, 0, "projection", 400), Point(232, 8, 0, "projection", 800),
                        Point(496, 4, 1, "projection", 900), Point(496, 8, 1, "projection", 1700),
                        Point(232, 2, 0, "check", 200)))
    moved = midpoint_check(plan)
    check = next(p for p in moved.points if p.role == "check")
    assert (check.blocks, check.trips, check.waves, check.warp_insts) == (496, 6, 1, 1300)
    assert "at 4 and 8 trips, checked at 6" in moved.reason and "(checked there at 6 trips)" in moved.reason


def test_a_long_loop_is_run_to_an_eighth_of_its_trips_at_least():
    """Past the budget (up to REACH_BUDGET), the longest run makes at least 1 / MAX_REACH of the loop's trips: a
    128-trip loop whose runs at 8 trips already pass the budget is still run at 4, 8 and 16 trips; a loop whose runs
    would pass REACH_BUDGET too stops at the budget's trips."""
    from gpusim.sampling.plan import MAX_REACH, make_plan

    kernel = load_kernel("workloads/gemm_tile128.yaml", {"M": 4096, "N": 4096, "K": 4096})
    plan = make_plan(kernel, 264, 10**9, "auto", cost=lambda trips: 500_000 * (trips + 1))
    assert plan.trips == 128 and sorted({p.trips for p in plan.points}) == [4, 8, 16] and 16 * MAX_REACH >= 128
    dear = make_plan(kernel, 264, 10**9, "auto", cost=lambda trips: 10**7 * (trips + 1))
    assert sorted({p.trips for p in dear.points}) == [2, 4, 8]



def test_sampled_trips_keep_the_loops_parity():
    """A run drops a whole number of turns of a two-stage ring: its trips have the parity of the loop's count (1 of 14
    trips left FA3's last P V waiting on a stage its producer never filled)."""
    from gpusim.sampling.plan import extend_trips, make_plan, midpoint_check, ring_trips

    assert [ring_trips(n, 14) for n in (0, 1, 2, 3)] == [0, 2, 2, 4]
    assert [ring_trips(n, 15) for n in (0, 1, 2, 4, 8)] == [1, 1, 3, 5, 9]
    assert ring_trips(1, 14, up=False) == 0 and ring_trips(2, 15, up=False) == 1
    for seq, expected in ((2048, [0, 2, 4]), (2176, [1, 3, 5])):
        kernel = load_kernel("workloads/flash_attention3.yaml", {"batch": 1, "heads": 1, "seq": seq})
        plan = make_plan(kernel, 132, 10**9, "on", cost=lambda trips: 10**6 * (trips + 1))
        assert sorted({p.trips for p in plan.points}) == expected and all(
            (plan.trips - p.trips) % 2 == 0 for p in plan.points)
        for longer in (extend_trips(plan, "why"), midpoint_check(plan)):
            assert longer is None or all((plan.trips - p.trips) % 2 == 0 for p in longer.points)


@pytest.mark.parametrize("seq", [2048, 2176])
def test_a_ring_indexed_from_the_full_count_samples_without_a_deadlock(seq):
    """flash_attention3 at 2K keys (14 trips: runs at 0, 2 and 4) and at 2,176 (15: runs at 1, 3 and 5) samples, with
    the instruction count exact."""
    result = gpusim.run("workloads/flash_attention3.yaml", "h100", params={"batch": 1, "heads": 1, "seq": seq},
                        sms=4, sample="on")
    assert result.sampling["method"] != "full" and result.sampling["projected_vs_exact_warp_instructions"] < 0.01
