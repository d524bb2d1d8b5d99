"""The coursework under examples/: each study runs as a student would run it and draws its pictures, and the
small workloads it ships show what their header comments say they show."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpusim.api import run
from gpusim.workload import kernel_mix, load_workload
from tests.conftest import ROOT

EXAMPLES = ROOT / "examples"
WORKLOADS = sorted((EXAMPLES / "workloads").glob("*.yaml"))
PNG = b"\x89PNG\r\n\x1a\n"
STUDIES = {
    "occupancy_what_if": ["course_occupancy_regs_smem.png", "course_occupancy_vs_time.png"],
    "scheduler_policies": ["course_scheduler_policies.png", "course_scheduler_cache.png",
                           "course_scheduler_timeline_lrr_gto.png"],
    "divergence_and_banks": ["course_divergence_banks.png", "course_per_instruction.png"],
}
WAVEFRONTS = "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"
CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"
THREADS = "smsp__thread_inst_executed_per_inst_executed.ratio"


@pytest.mark.parametrize("study", sorted(STUDIES))
def test_study_runs_and_writes_its_pictures(study, tmp_path):
    """`python examples/STUDY.py --quick --out DIR` exits 0 and writes each of its PNGs (a real picture, not an
    empty file), from any working directory."""
    proc = subprocess.run([sys.executable, str(EXAMPLES / f"{study}.py"), "--quick", "--out", str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for name in STUDIES[study]:
        path = tmp_path / name
        assert path.exists(), f"{name} not written; stdout: {proc.stdout[-1000:]}"
        assert path.read_bytes()[:8] == PNG and path.stat().st_size > 5000
        assert str(path) in proc.stdout  # each picture is named in the output


def test_every_study_is_listed():
    assert sorted(p.stem for p in EXAMPLES.glob("*.py")) == sorted(STUDIES)


@pytest.mark.parametrize("path", WORKLOADS, ids=lambda p: p.name)
def test_example_workload_has_the_shipped_header_and_loads(path):
    """Like the shipped workloads: a comment naming the kernel, what it shows and a command to try, and it loads
    without a floored launch dimension."""
    text = path.read_text()
    assert text.startswith(f"# {path.stem}: ") and "# What it shows:" in text and "# Try: gpusim " in text
    kernel = load_workload(path)
    assert kernel.name == path.stem and kernel.warnings == ()
    assert kernel_mix(kernel).total_warp_insts > 0


def _metrics(name: str, **params) -> dict:
    return run(EXAMPLES / "workloads" / f"{name}.yaml", "h100", sms=1, params=params).metrics


def test_stride_two_shared_reads_conflict_two_ways_and_padding_removes_it():
    """sdata[tid * 2] puts lanes i and i + 16 in one bank: 2 wavefronts per warp-wide access; shifting the array
    by a word keeps them paired; one pad word per 32 makes every access 1 wavefront."""
    warp_accesses = 2 * 8 * (1 + 4)  # blocks x warps x (STS + iters LDS)
    before = _metrics("bank_conflict", blocks=2, iters=4)
    shifted = _metrics("bank_conflict", blocks=2, iters=4, shift=1)
    after = _metrics("bank_padded", blocks=2, iters=4)
    assert before[WAVEFRONTS] == shifted[WAVEFRONTS] == 2 * warp_accesses
    assert before[CONFLICTS] == shifted[CONFLICTS] == warp_accesses
    assert after[WAVEFRONTS] == warp_accesses and after[CONFLICTS] == 0
    assert after["gpu_sim_cycle"] < before["gpu_sim_cycle"]


def test_branch_free_update_keeps_every_lane_active_and_issues_fewer_instructions():
    """The even/odd branch runs its four side instructions at 16 lanes between BSSY/BRA and BSYNC (8 per trip);
    the select version runs 6 per trip (and a LOP3 once), all at 32 lanes."""
    n, iters = 512, 2
    warps = n // 32
    before = _metrics("divergent_branch", n=n, iters=iters)
    after = _metrics("branch_free", n=n, iters=iters)
    assert before["smsp__inst_executed.sum"] == warps * (8 * iters + 1)
    assert after["smsp__inst_executed.sum"] == warps * (6 * iters + 2)
    assert before[THREADS] == pytest.approx((4 * 32 + 4 * 16) * iters / (8 * iters + 1) + 32 / (8 * iters + 1))
    assert after[THREADS] == 32


def test_cache_reuse_hits_more_under_gto_than_lrr_when_the_working_sets_overflow_the_l1():
    """64 warps' working sets of 288 KiB overflow an H100 SM's 256 KiB L1 when every warp interleaves (lrr);
    gto lets the oldest run ahead, so they hit, and finish sooner. Sets that fit (lines=24) hit alike."""
    path = EXAMPLES / "workloads" / "cache_reuse.yaml"
    big = {p: run(path, "h100", sms=1, scheduler=p, params={"blocks": 2, "passes": 3}).metrics for p in ("lrr", "gto")}
    assert big["gto"]["l1tex__t_sector_hit_rate.pct"] > big["lrr"]["l1tex__t_sector_hit_rate.pct"] + 20
    assert big["gto"]["gpu_sim_cycle"] < big["lrr"]["gpu_sim_cycle"]
    small = {p: run(path, "h100", sms=1, scheduler=p, params={"blocks": 2, "passes": 3, "lines": 24}).metrics
             for p in ("lrr", "gto")}
    assert small["gto"]["l1tex__t_sector_hit_rate.pct"] == small["lrr"]["l1tex__t_sector_hit_rate.pct"]
