"""gpusim against numbers measured on a real H200 (validation/results/h200-2026-11-29.json, produced by
validation/microbench.cu). These are regression tests on committed hardware data: they need no GPU."""

import json
import math
from pathlib import Path

import pytest

import gpusim

RESULTS = Path(__file__).resolve().parents[1] / "validation/results/h200-2026-11-29.json"


@pytest.fixture(scope="module")
def runs():
    return json.loads(RESULTS.read_text())["runs"]


def test_device_properties_match_the_arch_file(runs):
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


def test_occupancy_calculator_matches_resident_blocks_measured_on_hardware(runs):
    """Blocks per SM counted with %smid on the H200 (long-running blocks) equal gpusim.occupancy's answer,
    across register counts 20-172 and 0-64 KB of shared memory, including a launch that cannot be resident."""
    checked = 0
    for r in runs:
        for row in r["occupancy"]:
            smem = row["static_smem"] + row["dynamic_smem"]
            model = gpusim.occupancy("h200", row["threads"], row["regs"], smem)
            assert model.blocks_per_sm == row["driver_blocks_per_sm"], row
            if row["spin_cycles"] >= 100000:  # shorter spins retire blocks before the first wave is placed
                assert model.blocks_per_sm == row["measured_blocks_per_sm"], row
                checked += 1
    assert checked == 20


def test_shared_memory_stride_costs_gcd_wavefronts(runs):
    """Lane i loading word i*stride costs gcd(stride, 32) wavefronts: measured SM cycles per warp-load."""
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
