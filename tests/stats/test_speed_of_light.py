"""Speed of light: each unit's percent of its peak, compute and memory throughput as the busiest
unit of each kind, arithmetic intensity; the bound unit of a bandwidth kernel and a tensor kernel is the one near
100%, and none is above it."""

from __future__ import annotations

import pytest

from gpusim.api import run
from gpusim.stats.invariants import COMPUTE_UNITS, MEMORY_UNITS

from tests.conftest import ROOT

PCT = [*dict.fromkeys(COMPUTE_UNITS + MEMORY_UNITS), "sm__throughput.avg.pct_of_peak_sustained_elapsed",
       "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"]


def test_a_copy_is_memory_bound_at_the_dram():
    # an 8 MiB copy (8 grid-stride trips): the SMs' share of DRAM is saturated from the first trips
    m = run(ROOT / "workloads/microbench/stream.yaml", "h100", sms=8, params={"blocks": 64, "n": 2097152}).metrics
    assert all(0.0 <= m[k] <= 100.01 for k in PCT)
    assert m["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"] == \
        m["dram__throughput.avg.pct_of_peak_sustained_elapsed"] >= 80
    assert m["sm__throughput.avg.pct_of_peak_sustained_elapsed"] < 50
    assert m["gpusim__arithmetic_intensity_flop_per_dram_byte"] == 0.0  # a copy does no arithmetic


@pytest.mark.parametrize("arch", ["a100", "h100"])
def test_an_mma_loop_is_tensor_bound(arch):
    """mma.sync at its measured rate keeps the tensor pipe busy on both; in FLOP that is the whole dense peak on
    A100 and about 2/3 of it on Hopper (whose peak is wgmma's; the H200 measured 2,729 FLOP/clk/SM for mma.sync,
    see validation/)."""
    m = run(ROOT / "workloads/microbench/hmma_peak.yaml", arch, sms=2).metrics
    pipe = m["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"]
    flop = m["gpusim__tensor_flop.avg.pct_of_peak_sustained_elapsed"]
    assert m["sm__throughput.avg.pct_of_peak_sustained_elapsed"] == pipe >= 80
    assert pipe <= 100.01
    assert flop == pytest.approx(pipe, rel=0.02) if arch == "a100" else 0.55 * pipe < flop < 0.8 * pipe


def test_a_sampled_run_recomputes_them_from_its_projected_counts():
    r = run(ROOT / "workloads/gemm_tile128_sync.yaml", "h100", params=dict(M=512, N=256, K=1024), sample="on")
    m = r.metrics
    cycles = m["gpu_sim_cycle"]
    expected = 100 * m["smsp__inst_executed.sum"] / cycles / (m["launch__sm_count"] * 4)
    assert m["sm__inst_executed.avg.pct_of_peak_sustained_elapsed"] == pytest.approx(expected)


def test_an_fp8_mma_loop_is_held_to_the_pipe_not_to_the_fp16_peak(tmp_path):
    """FP8 MMAs run at twice the FP16 rate on Hopper: their FLOP/s may pass the dense FP16 peak, but the tensor pipe's
    percent of peak counts their pipe time (FP16-equivalent FLOP), so it stays within 100% and the run breaks no
    physical limit."""
    from gpusim.arch import load_arch
    from gpusim.stats.invariants import violations

    text = (ROOT / "workloads/microbench/hmma_peak.yaml").read_text()
    fp8 = tmp_path / "qmma_peak.yaml"
    fp8.write_text(text.replace("kernel: hmma_peak", "kernel: qmma_peak").replace(
        "HMMA.16816.F32", "QMMA.16832.F32.E4M3.E4M3"))
    fp16 = run(ROOT / "workloads/microbench/hmma_peak.yaml", "h100", sms=2).metrics
    result = run(fp8, "h100", sms=2)
    m = result.metrics
    pipe = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"
    assert m["gpusim__tensor_flop.sum"] == 2 * m["gpusim__tensor_pipe_fp16_equivalent_flop.sum"]
    assert m["gpusim__tensor_flop.per_second"] > 1.5 * fp16["gpusim__tensor_flop.per_second"]
    assert m[pipe] == pytest.approx(fp16[pipe], rel=0.05) and m[pipe] <= 100.01
    assert violations(m, load_arch("h100")) == []
