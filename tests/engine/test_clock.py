"""`--clock`: a run at another SM clock (boost, the measured clock under tensor load, or a locked clock). Time,
the SM's per-clock peaks and DRAM's bytes per clock follow the clock; DRAM keeps its bandwidth in bytes a second;
the tensor pipe's rate per clock is its quoted one at or below tensor_mhz; a part without a measured sustained
clock, or a clock above boost, is a one-line error."""

from __future__ import annotations

import pytest

import gpusim
from gpusim.arch import clocked, load_arch
from gpusim.errors import GpusimError

from tests.conftest import ROOT, run_cli

HMMA = ROOT / "workloads/microbench/hmma_peak.yaml"
WGMMA = ROOT / "validation/workloads/wgmma_rate.yaml"
STREAM = ROOT / "workloads/microbench/stream.yaml"


def _run(path, clock, **params):
    return gpusim.run(path, "h100", params=params, sms=2, clock=clock).metrics


def test_a_clock_bound_kernel_takes_the_same_cycles_and_longer_at_a_lower_clock():
    """mma.sync's rate is per SM clock: the cycles stay, the time grows by the clocks' ratio."""
    boost, locked = _run(HMMA, "boost", blocks=4, iters=8), _run(HMMA, 1500, blocks=4, iters=8)
    assert locked["gpu_sim_cycle"] == boost["gpu_sim_cycle"]
    assert locked["gpu__time_duration.sum"] == pytest.approx(boost["gpu__time_duration.sum"] * 1980 / 1500)
    assert (boost["sm__cycles_elapsed.avg.per_second"], locked["sm__cycles_elapsed.avg.per_second"]) == (1980e6, 1500e6)


def test_wgmma_keeps_its_quoted_rate_per_clock_at_the_sustained_clock():
    """The dense peak is quoted at tensor_mhz (1830 MHz): per boost clock the pipe does 1830 / 1980 of it, per clock
    at 1793 MHz all of it, so the cycles drop by that ratio and the FLOP/s stay within the clock's own peak."""
    spec = load_arch("h100")
    boost, sustained = _run(WGMMA, "boost"), _run(WGMMA, "sustained")
    assert sustained["gpu_sim_cycle"] < boost["gpu_sim_cycle"]
    assert sustained["gpu_sim_cycle"] / boost["gpu_sim_cycle"] == pytest.approx(1830 / 1980, rel=0.02)
    peak = spec.pipelines.tensor.dense_fp16_flops_per_clock * spec.sm.sub_partitions * 1793e6 * 2  # 2 SMs
    assert sustained["gpusim__tensor_flop.sum"] / sustained["gpu__time_duration.sum"] <= peak


def test_dram_keeps_its_bandwidth_in_bytes_a_second():
    """A copy bound by DRAM takes about the same time at a lower SM clock (fewer cycles, more bytes per cycle)."""
    boost = _run(STREAM, "boost", n=262144, blocks=16)
    locked = _run(STREAM, 1500, n=262144, blocks=16)
    assert locked["gpu_sim_cycle"] < boost["gpu_sim_cycle"]
    assert locked["gpu__time_duration.sum"] == pytest.approx(boost["gpu__time_duration.sum"], rel=0.1)


def test_the_clock_is_in_the_record_and_the_report():
    result = gpusim.run(HMMA, "h100", params={"blocks": 2, "iters": 4}, sms=1, clock="sustained")
    assert result.options["clock"] == "sustained"
    assert result.metrics["sm__cycles_elapsed.avg.per_second"] == 1793e6
    proc = run_cli("run", str(HMMA), "--arch", "h100", "--sms", "1", "--set", "blocks=2", "--set", "iters=4",
                   "--clock", "sustained")
    assert proc.returncode == 0 and "time at 1,793 MHz (sustained)" in proc.stdout


@pytest.mark.parametrize("arch, clock, message", [
    ("a100", "sustained", "--clock sustained: a100 has no measured clock under tensor load"),
    ("h100", 2100, "--clock 2100: above h100's boost clock (1980 MHz)"),
])
def test_a_clock_the_part_cannot_run_is_one_line(arch, clock, message):
    with pytest.raises(GpusimError) as caught:
        clocked(load_arch(arch), clock)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    proc = run_cli("run", str(HMMA), "--arch", arch, "--sms", "1", "--clock", str(clock))
    assert proc.returncode == 1 and message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_a_bad_clock_word_is_a_usage_error():
    proc = run_cli("run", str(HMMA), "--arch", "h100", "--clock", "fast")
    assert proc.returncode == 2 and "argument --clock: expected boost or sustained or a clock in MHz" in proc.stderr


@pytest.mark.parametrize("path, params", [
    (ROOT / "workloads/microbench/stream.yaml", {"n": 262144, "blocks": 16}),
    (ROOT / "workloads/gemm_tile128.yaml", {"M": 256, "N": 256, "K": 256}),
    (ROOT / "workloads/gemm_hopper_ws.yaml", {"M": 256, "N": 256, "K": 256}),
    (ROOT / "workloads/flash_attention.yaml", {"seq": 256, "heads": 2}),
])
@pytest.mark.parametrize("clock", ["sustained", 1000])
def test_a_lower_clock_breaks_no_physical_limit(path, params, clock):
    """Every rate of a run at a locked clock stays within that clock's peaks (checked against the clocked part)."""
    from gpusim.stats.invariants import violations

    result = gpusim.run(path, "h100", params=params, sms=4, clock=clock)
    assert violations(result.metrics, clocked(load_arch("h100"), clock)) == []


def test_at_the_clock_the_h200_held_mma_sync_runs_at_its_measured_throughput():
    """validation/results/h200-2026-11-29.json: the saturating mma.sync kernel ran at 645.8 TFLOP/s with the SM clock
    at 1793 MHz. The engine's hmma_peak on two SMs at --clock sustained, scaled to the part's 132 SMs, gives that
    within 2%, and no more than the clock's peak."""
    m = gpusim.run(HMMA, "h200", params={"blocks": 4, "iters": 64}, sms=2, clock="sustained").metrics
    tflops = m["gpusim__tensor_flop.sum"] / m["gpu__time_duration.sum"] / 2 * 132 / 1e12
    assert tflops == pytest.approx(645.771, rel=0.02)
    assert tflops <= 683 * 4 * 132 * 1793e6 / 1e12


@pytest.mark.parametrize("value, message", [
    (2100, "clocks.sustained_tensor_mhz: expected at most core_mhz (1980), got 2100"),
    ("'fast'", "'clocks.sustained_tensor_mhz' (line"),
])
def test_a_bad_sustained_clock_in_an_arch_file_is_one_line(tmp_path, value, message):
    text = (ROOT / "arch/h100.yaml").read_text().replace("sustained_tensor_mhz: 1793", f"sustained_tensor_mhz: {value}")
    path = tmp_path / "bad_h100.yaml"
    path.write_text(text)
    proc = run_cli("run", str(HMMA), "--arch", str(path), "--sms", "1")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert path.name in proc.stderr and message in proc.stderr  # (a long path is shortened in the middle)
