"""gpusim against numbers measured on a real H200 (validation/results/h200-2026-11-29.json, produced by
validation/microbench.cu). Regression tests on committed hardware data: they need no GPU.

Two kinds:
* arch-file tests: the H200 architecture file and the occupancy calculator against the device's properties and
  the counts it reported (no simulation);
* engine tests: every row of validation/compare.py, the engine's simulation of the kernel that was measured,
  against the measurement, each within its tolerance below.
"""

import json
import math
from pathlib import Path

import pytest

import gpusim
from gpusim.calibrate.run import load_compare
from gpusim.workload import kernel_mix, load_workload

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "validation/results/h200-2026-11-29.json"


compare = load_compare()  # validation/compare.py, registered as calibrate loads it


@pytest.fixture(scope="module")
def results():
    return json.loads(RESULTS.read_text())


@pytest.fixture(scope="module")
def runs(results):
    return results["runs"]


# --- arch-file tests: the H200 file and the occupancy calculator against what the device reported ------------

def test_arch_file_device_properties_match_the_h200(runs):
    spec = gpusim.load_arch("h200")
    for r in runs:
        assert r["compute_capability"] == spec.compute_capability
        assert r["sms"] == spec.sms
        assert r["l2_bytes"] == spec.memory.l2.size_bytes
        assert r["shared_memory_per_sm"] == spec.shared_memory.per_sm_bytes
        assert r["shared_memory_per_block_optin"] == spec.shared_memory.per_block_optin_bytes
        assert r["reserved_shared_memory_per_block"] == spec.shared_memory.reserved_per_block_bytes
        assert r["registers_per_sm"] == spec.sm.registers
        assert r["max_threads_per_sm"] == spec.sm.max_threads
        assert r["max_blocks_per_sm"] == spec.sm.max_blocks


def test_arch_file_occupancy_calculator_matches_the_driver_and_the_resident_blocks_counted(runs):
    """Blocks per SM counted with %smid on the H200 (long-running blocks) equal gpusim.occupancy's answer,
    across register counts 20-172 and 0-64 KB of shared memory, including a launch that cannot be resident."""
    checked = 0
    for r in runs:
        for row in r["occupancy"]:
            smem = row["static_smem"] + row["dynamic_smem"]
            model = gpusim.occupancy("h200", row["threads"], row["regs"], smem)
            assert model.blocks_per_sm == row["driver_blocks_per_sm"], row
            if row["spin_cycles"] >= compare.LONG_SPIN:  # shorter spins retire blocks before the first wave is placed
                assert model.blocks_per_sm == row["measured_blocks_per_sm"], row
                checked += 1
    assert checked == 20


def test_arch_file_measured_shared_memory_strides_cost_gcd_wavefronts(runs):
    """The data itself: lane i loading word i*stride costs gcd(stride, 32) SM cycles per warp-load."""
    banks = gpusim.load_arch("h200").shared_memory.banks
    for r in runs:
        for stride, cycles in r["smem_cycles_per_warp_load_by_stride"].items():
            assert cycles == pytest.approx(math.gcd(int(stride), banks), rel=0.02), stride


def test_arch_file_latencies_are_the_measured_ones(runs):
    spec = gpusim.load_arch("h200")
    chase = [r["pointer_chase"] for r in runs]
    assert spec.memory.l1.hit_latency == pytest.approx(sum(c["l1"]["cycles_per_hop"] for c in chase) / 2, abs=1)
    assert spec.memory.l2.hit_latency == pytest.approx(sum(c["l2"]["cycles_per_hop"] for c in chase) / 2, abs=1)
    assert spec.memory.dram.latency == pytest.approx(sum(c["dram"]["cycles_per_hop"] for c in chase) / 2, abs=5)
    assert spec.pipelines.fp32.latency == round(runs[0]["ffma_dependent_latency_cycles"])
    assert spec.pipelines.tensor.latency == round(runs[0]["hmma_16816_f32_dependent_latency_cycles"])
    measured = sum(r["hmma_16816_flop_per_clock_per_sm"] for r in runs) / len(runs)
    assert spec.sm.sub_partitions * spec.pipelines.tensor.warp_mma_rate == pytest.approx(measured, rel=0.01)


# --- engine tests: the simulated kernels against the measurements ----------------------------------------------

# row key -> (relative tolerance, reason it fails today or None: a failing row is xfail, not strict, with its
# reason; none fails today). 5% everywhere: every row is a steady-state
# marginal cost or an exact count, and the two back-to-back H200 runs agree within 1.4% (DRAM), 0.1% elsewhere.
TOLERANCE = {
    "ffma_latency": (0.05, None),
    "ffma_throughput": (0.05, None),
    "hmma_latency": (0.05, None),
    "hmma_throughput": (0.05, None),
    "chase_l1": (0.05, None),
    "chase_l2": (0.05, None),
    "chase_dram": (0.05, None),
    **{f"smem_stride_{s}": (0.05, None) for s in compare.SMEM_STRIDES},
    "stream_read": (0.05, None),
    "stream_copy": (0.05, None),
    **{key: (0.05, None) for key in ("blocks_256t_20r_0k", "blocks_256t_20r_64k", "blocks_128t_20r_64k",
                                     "blocks_512t_20r_64k", "blocks_256t_40r_0k", "blocks_256t_76r_0k",
                                     "blocks_256t_110r_0k", "blocks_128t_110r_20k", "blocks_128t_172r_0k",
                                     "blocks_1024t_172r_0k")},
}


def _cases():
    return [pytest.param(key, tolerance, id=key,
                         marks=[pytest.mark.xfail(strict=False, reason=failing)] if failing else [])
            for key, (tolerance, failing) in TOLERANCE.items()]


@pytest.fixture(scope="module")
def simulated(results):
    """Every row of validation/compare.py, simulated once for the module (one simulation per CPU at a time)."""
    return {row.key: row for row in compare.comparison_rows(results, "h200")}


def test_every_measured_quantity_has_a_simulated_row_with_a_tolerance(results):
    plans = compare.comparison_plans(results, "h200")
    assert [p.key for p in plans] == list(TOLERANCE)
    assert all(p.sims for p in plans)  # every row runs the engine


@pytest.mark.parametrize("key, tolerance", _cases())
def test_simulated_row_matches_the_h200(simulated, key, tolerance):
    row = simulated[key]
    assert row.simulated == pytest.approx(row.measured, rel=tolerance), (
        f"{row.quantity}: simulated {row.simulated:.3f}, measured {row.measured:.3f} "
        f"({(row.ratio - 1) * 100:+.1f}%); {row.how}")


def test_compare_prints_a_table_ending_with_the_mean_absolute_error(simulated, monkeypatch, capsys):
    rows = list(simulated.values())
    monkeypatch.setattr(compare, "comparison_rows", lambda results, arch, jobs=None: rows)
    assert compare.main([str(RESULTS), "--arch", "h200"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(rows) + 3
    assert lines[-1] == f"mean absolute error: {sum(r.error_pct for r in rows) / len(rows):.1f}%"


# --- the pieces compare.py is built from ---------------------------------------------------------------------

def test_a_refused_launch_is_zero_resident_blocks():
    sim = compare.Sim(compare.OWN / "resident_spin.yaml", 1, (("regs", 172), ("threads", 1024)), residency=True)
    assert compare.simulate("h200", sim) == {compare.RESIDENT: 0}


def test_stream_read_variant_loads_what_the_copy_loads_and_stores_nothing():
    params = {"n": 65536, "blocks": 16}
    copy = kernel_mix(load_workload(ROOT / "workloads/microbench/stream.yaml", params)).bytes
    read = kernel_mix(load_workload(ROOT / "workloads/microbench/stream.yaml", {**params, "read": 1})).bytes
    assert read[("global", "load")] == copy[("global", "load")] == 65536 * 4
    assert ("global", "store") not in +read and copy[("global", "store")] == 65536 * 4


@pytest.mark.parametrize("name", ["smem_load_stride", "resident_spin"])
def test_validation_workloads_load_with_a_header_comment(name):
    path = ROOT / f"validation/workloads/{name}.yaml"
    assert path.read_text().startswith(f"# {name}: microbench.cu's")
    kernel = load_workload(path)
    assert kernel.total_warps > 0 and kernel_mix(kernel).total_warp_insts > 0
