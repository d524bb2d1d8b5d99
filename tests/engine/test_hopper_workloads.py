"""The Hopper workloads: the warp-specialised GEMM (TMA producer, wgmma consumers, mbarrier
ring, clusters of 2 sharing B by multicast) and the FlashAttention-3-style attention run on H100, beat their
mma.sync counterparts, and are refused in one line where their instructions do not exist. Small sizes on a few SMs
(seconds each); the numbers at larger sizes are in the README."""

from __future__ import annotations

import pytest

import gpusim
from gpusim.api import run
from gpusim.stats.invariants import violations

from tests.conftest import ROOT, run_cli

WS = ROOT / "workloads" / "gemm_hopper_ws.yaml"
FA3 = ROOT / "workloads" / "flash_attention3.yaml"
SMALL_GEMM = {"M": 512, "N": 512, "K": 512}
TENSOR = "gpusim__tensor_flop.avg.pct_of_peak_sustained_elapsed"  # the share of the dense FP16 peak


def _metrics(path, params, sms=4, arch="h100") -> dict:
    result = run(path, arch, sms=sms, params=params)
    broken = violations(result.metrics, gpusim.load_arch(arch))
    assert not broken, broken
    return result.metrics


def test_warp_specialised_gemm_reaches_more_of_the_tensor_peak_than_mma_sync():
    """At 512^3 on 4 SMs of an H100 the wgmma GEMM keeps the tensor pipe busier (a larger share of the dense peak)
    than gemm_tile128 (mma.sync, whose rate is 2/3 of the peak) and finishes sooner; both do 2 M N K FLOP."""
    ws = _metrics(WS, SMALL_GEMM)
    sync = _metrics(ROOT / "workloads" / "gemm_tile128_sync.yaml", SMALL_GEMM)
    assert ws["gpusim__tensor_flop.sum"] == sync["gpusim__tensor_flop.sum"] == 2 * 512 ** 3
    assert ws[TENSOR] > 1.5 * sync[TENSOR]
    assert ws["gpu_sim_cycle"] < sync["gpu_sim_cycle"]


def test_the_cluster_pair_reads_b_once_by_multicast():
    """Each block copies its A tile (16 KiB a stage) and half of the B slice it shares with its cluster peer (16 of
    32 KiB) from L2; the other half arrives by the peer's multicast: 32 KiB a stage read, 16 KiB delivered twice."""
    m = _metrics(WS, SMALL_GEMM)
    blocks, stages = (512 // 256) * (512 // 128), 512 // 64
    assert m["gpusim__bulk_copy_bytes"] == blocks * stages * (16384 + 16384)
    assert m["gpusim__bulk_copy_multicast_bytes"] == blocks * stages * 16384
    assert m["launch__cluster_size"] == 2


@pytest.mark.parametrize("arch, reason", [("a100", "a100 is 8.0"), ("v100", "v100 is 7.0"), ("b200", "b200 is 10.0")])
def test_the_hopper_gemm_is_refused_in_one_line_elsewhere(arch, reason):
    """The acceptance command on an arch without wgmma (A100 and older: no TMA, mbarriers or clusters either; B200:
    tcgen05 in its place): exit status 1 and one line on stderr naming the instructions and the arch."""
    proc = run_cli("run", str(WS), "--arch", arch, "--set", "M=1024", "--set", "N=1024", "--set", "K=1024",
                   "--sms", "8")
    assert proc.returncode == 1
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert reason in proc.stderr and "HGMMA.64X256X16.F32 exists on compute capability 9.x only" in proc.stderr


def test_flash_attention3_is_faster_than_flash_attention2_on_h100():
    """The same attention (batch 1, 4 heads, 512 keys, head dimension 64, the same FLOP) on 4 SMs of an H100:
    the TMA ring with wgmma and the softmax overlapped with P V takes fewer cycles than the mma.sync kernel that
    stages K and V with LDG -> STS -> BAR."""
    params = {"seq": 512, "heads": 4}
    fa3 = _metrics(FA3, params)
    fa2 = _metrics(ROOT / "workloads" / "flash_attention.yaml", params)
    assert fa3["gpusim__tensor_flop.sum"] == fa2["gpusim__tensor_flop.sum"] == 4 * 4 * 512 * 512 * 64
    assert fa3["gpu_sim_cycle"] < fa2["gpu_sim_cycle"]


def test_flash_attention3_is_refused_in_one_line_on_a100():
    """wgmma, TMA and mbarriers do not exist on compute capability 8.0: one line, exit status 1."""
    proc = run_cli("run", str(FA3), "--arch", "a100", "--set", "seq=256", "--sms", "1")
    assert proc.returncode == 1
    assert len(proc.stderr.strip().splitlines()) == 1 and "needs compute capability 9.0" in proc.stderr
