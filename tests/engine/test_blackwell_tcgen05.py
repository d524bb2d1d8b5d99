"""Blackwell's tcgen05 in YAML workloads: tensor memory allocated by columns, MMA issued by one
thread into tensor memory on the SM's whole tensor core, UTCBAR commits on mbarriers, LDTM / STTM. The warp-specialised
UMMA GEMM beats mma.sync on a B200, never runs above the part's peak, never lets an accumulator be read before its MMA
completed, and is refused where tcgen05 does not exist; allocations that cannot be met are one-line errors, those
that only have to wait, wait. Small sizes on one or two SMs."""

from __future__ import annotations

import json

import pytest

import gpusim
from gpusim.api import run
from gpusim.isa.tensor import tensor_rate, umma_cycles
from gpusim.stats.observer import Observer
from gpusim.errors import GpusimError
from gpusim.stats.invariants import violations
from gpusim.workload import load_workload

from tests.conftest import ROOT, run_cli

UMMA = ROOT / "workloads" / "gemm_blackwell_umma.yaml"
SMALL = {"M": 256, "N": 512, "K": 512}
TENSOR = "gpusim__tensor_flop.avg.pct_of_peak_sustained_elapsed"  # the share of the dense FP16 peak


def _kernel(tmp_path, program: str, grid: int = 2, name: str = "tmem.yaml"):
    path = tmp_path / name
    path.write_text(f"kernel: tmem\nlaunch: {{grid: [{grid}], block: [32], registers_per_thread: 32}}\n"
                    f"program:\n{program}")
    return path


def test_the_umma_gemm_reaches_more_of_the_dense_peak_than_mma_sync():
    """The same FP16 GEMM (2 M N K FLOP) on 2 SMs of a B200: tcgen05 (one thread's UTCHMMA on the whole tensor core,
    operands from shared memory) keeps the tensor core busier, a larger share of the dense FP16 peak, than
    gemm_tile128's mma.sync (a third of that peak on a B200) and finishes sooner."""
    umma = run(UMMA, "b200", sms=2, params=SMALL).metrics
    sync = run(ROOT / "workloads" / "gemm_tile128_sync.yaml", "b200", sms=2, params=SMALL).metrics
    assert umma["gpusim__tensor_flop.sum"] == sync["gpusim__tensor_flop.sum"] == 2 * 256 * 512 * 512
    assert umma[TENSOR] > 1.5 * sync[TENSOR]
    assert umma["gpu_sim_cycle"] < sync["gpu_sim_cycle"]
    assert not violations(umma, gpusim.load_arch("b200"))


@pytest.mark.parametrize("arch, params, precision", [
    ("b200", {}, "fp16"), ("b300", {}, "fp16"), ("b200", {"FP8": 1, "BK": 128}, "fp8")])
def test_the_tensor_flop_rate_never_exceeds_the_peak_of_its_precision(arch, params, precision):
    """FLOP per second of the UMMA GEMM, FP16 (UTCHMMA) or FP8 (UTCQMMA), on 2 SMs: at most the arch's dense peak for
    that precision on 2 SMs (rate per SM per tensor clock x SMs x tensor clock)."""
    spec = gpusim.load_arch(arch)
    m = run(UMMA, arch, sms=2, params={**SMALL, **params}).metrics
    assert m["gpusim__tensor_flop.sum"] == 2 * 256 * 512 * 512
    peak = tensor_rate(spec, precision) * 2 * spec.clocks.tensor_mhz * 1e6
    assert 0 < m["gpusim__tensor_flop.per_second"] <= peak


def test_an_mma_takes_its_padded_shape_at_the_peak_of_its_precision():
    """M128 N256 K16 FP16 on a B200: 2 x 128 x 256 x 16 FLOP at 8,192 FLOP/clk/SM per tensor clock (x 1856 / 1965 per
    core clock); M64 takes as long as M128 (the tensor core's step is 128 rows); FP8 runs twice as fast; each SM of a
    .2CTA pair does half the rows."""
    spec = gpusim.load_arch("b200")
    per_clock = 8192 * 1856 / 1965
    assert umma_cycles(spec, "UTCHMMA.128X256X16.F32") == pytest.approx(2 * 128 * 256 * 16 / per_clock)
    assert umma_cycles(spec, "UTCHMMA.64X256X16.F32") == umma_cycles(spec, "UTCHMMA.128X256X16.F32")
    assert umma_cycles(spec, "UTCQMMA.128X256X32.F32.E4M3.E4M3") == umma_cycles(spec, "UTCHMMA.128X256X16.F32")
    assert umma_cycles(spec, "UTCHMMA.2CTA.256X256X16.F32") == umma_cycles(spec, "UTCHMMA.128X256X16.F32")


class _Completions(Observer):
    """Per block: the latest completion of its tcgen05 MMAs and the first issue of an LDTM."""

    def __init__(self):
        self.mma_done: dict[int, int] = {}
        self.first_load: dict[int, int] = {}

    def issued(self, sm, sp, warp, inst, now):
        if inst.info.base == "LDTM":
            self.first_load.setdefault(warp.block.index, now)

    def accessed(self, sm, sp, warp, inst, start, ready_at):
        if inst.info.base.startswith("UTC") and inst.info.base.endswith("MMA"):
            block = warp.block.index
            self.mma_done[block] = max(self.mma_done.get(block, 0), ready_at)


def test_the_accumulator_is_never_read_before_its_mmas_complete():
    """The epilogue's LDTMs follow its wait on `acc_full`, which UTCBAR completes only when every MMA of the block
    has: in every block the first LDTM issues at or after the last MMA's completion cycle."""
    seen = _Completions()
    run(UMMA, "b200", sms=2, params=SMALL, observer=seen)
    assert seen.mma_done and set(seen.mma_done) == set(seen.first_load)
    for block, done in seen.mma_done.items():
        assert seen.first_load[block] >= done


def test_runs_are_deterministic():
    """Same inputs, same record: the UMMA GEMM twice on a B200."""
    a, b = (run(UMMA, "b200", sms=2, params=SMALL) for _ in range(2))
    assert json.dumps(a.to_dict(), sort_keys=True) == json.dumps(b.to_dict(), sort_keys=True)


@pytest.mark.parametrize("arch, reason", [("h100", "h100 is 9.0"), ("a100", "a100 is 8.0")])
def test_the_umma_gemm_is_refused_in_one_line_without_tcgen05(arch, reason):
    """tcgen05 exists on compute capability 10.x (and 11.x) only: exit status 1, one line naming the instructions and
    the arch, no traceback."""
    proc = run_cli("run", str(UMMA), "--arch", arch, "--set", "M=256", "--set", "N=512", "--set", "K=512", "--sms", "2")
    assert proc.returncode == 1
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert reason in proc.stderr and "exists on compute capability 10.0 to 11.x only" in proc.stderr


def test_an_allocation_that_does_not_fit_waits_for_another_block(tmp_path):
    """Two one-warp blocks on one SM each take all 512 columns: the second waits (`misc`, as ptxas's NANOSLEEP retry
    loop) until the first frees them, then runs: the kernel takes longer than one block alone."""
    program = ("  - {op: UTCATOMSWS.FIND_AND_SET.ALIGN, columns: 512}\n"
               "  - {op: FFMA, dst: r1, src: [r1, r2, r3], repeat: 200}\n"
               "  - {op: UTCATOMSWS.AND, columns: 512}\n")
    two = run(_kernel(tmp_path, program, grid=2), "b200", sms=1).metrics
    one = run(_kernel(tmp_path, program, grid=1, name="one.yaml"), "b200", sms=1).metrics
    assert two["smsp__pcsamp_warps_issue_stalled_misc"] > 0 == one["smsp__pcsamp_warps_issue_stalled_misc"]
    assert two["gpu_sim_cycle"] > 1.5 * one["gpu_sim_cycle"]


@pytest.mark.parametrize("program, message", [
    ("  - {op: UTCATOMSWS.FIND_AND_SET.ALIGN, columns: 1024}\n",
     "asks for 1024 tensor-memory columns: expected a power of two from 32 to 512"),
    ("  - {op: UTCATOMSWS.FIND_AND_SET.ALIGN, columns: 96}\n",
     "asks for 96 tensor-memory columns: expected a power of two"),
    ("  - {op: UTCATOMSWS.FIND_AND_SET.ALIGN, columns: 256}\n  - {op: UTCATOMSWS.FIND_AND_SET.ALIGN, columns: 512}\n",
     "asks for 512 tensor-memory columns while it holds 256 of the SM's 512: it can never get them"),
    ("  - {op: UTCATOMSWS.FIND_AND_SET.ALIGN, columns: 128}\n",
     "exited holding 128 tensor-memory columns"),
    ("  - {op: UTCATOMSWS.AND, columns: 64}\n", "frees 64 tensor-memory columns that block 0 does not hold"),
    ("  - {op: UTCHMMA.128X128X16.F32}\n", "block 0 holds none: allocate it first"),
])
def test_tensor_memory_misuse_is_a_one_line_error(tmp_path, program, message):
    """More columns than the SM has, a size that is not a power of two, more than a block could ever hold, exiting
    without freeing, freeing what is not held, an MMA without tensor memory: each a one-line GpusimError."""
    with pytest.raises(GpusimError) as err:
        run(_kernel(tmp_path, program, grid=1), "b200", sms=1)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("line, message", [
    ("{op: UTCHMMA.F32, dst: d, src: [a, b]}",
     "UTCHMMA.F32: a tcgen05 MMA needs its shape as a modifier, MxNxK (e.g. UTCHMMA.128X256X16)"),
    ("{op: UTCATOMSWS.FIND_AND_SET.ALIGN}", "needs 'columns' (the tensor-memory columns it allocates or frees)"),
    ("{op: FADD, dst: v, columns: 64}", "FADD takes no 'columns' (it applies to UTCATOMSWS"),
    ('{op: UTCATOMSWS.FIND_AND_SET.ALIGN, columns: "lots"}', "columns: expression 'lots': unknown name 'lots'"),
])
def test_tcgen05_operands_are_checked_when_the_file_loads(tmp_path, line, message):
    """A tcgen05 MMA without its MxNxK shape, an allocation without `columns`, `columns` on another opcode, a
    `columns` that is not an expression of known names: one line naming the file and line, before anything runs."""
    path = _kernel(tmp_path, f"  - {line}\n", grid=1)
    with pytest.raises(GpusimError) as err:
        load_workload(path)
    assert message in str(err.value) and "tmem.yaml:4:" in str(err.value) and "\n" not in str(err.value)


def test_the_cli_says_an_over_allocation_in_one_line(tmp_path):
    """The same over-allocation through `gpusim run`: exit status 1, one line on stderr."""
    path = _kernel(tmp_path, "  - {op: UTCATOMSWS.FIND_AND_SET.ALIGN, columns: 1024}\n", grid=1)
    proc = run_cli("run", str(path), "--arch", "b200", "--sms", "1")
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1
    assert "1024 tensor-memory columns" in proc.stderr and "Traceback" not in proc.stderr


def test_a_cta_pair_mma_occupies_both_sms_and_commits_to_both_blocks(tmp_path):
    """cta_group::2: one thread of rank 0 issues UTCHMMA.2CTA for the pair (its FLOP counted once) and UTCBAR with
    multicast 3 arrives on the mbarrier of both blocks, so rank 1's wait ends only when the MMAs have completed: the
    kernel lasts at least their 64 x (M128 N256 K16 per SM) cycles."""
    text = ("kernel: pair\nlaunch: {grid: [2], block: [32], registers_per_thread: 32, cluster: [2]}\nprogram:\n"
            "  - {op: SYNCS.EXCH.64, barrier: done, arrivals: 1, pred: 'lane == 0'}\n"
            "  - {op: UTCATOMSWS.2CTA.FIND_AND_SET.ALIGN, columns: 256}\n"
            "  - {op: UCGABAR_ARV}\n  - {op: UCGABAR_WAIT}\n"
            "  - if: 'block.x == 0'\n    then:\n"
            "      - {op: UTCHMMA.2CTA.256X256X16.F32, repeat: 64, pred: 'lane == 0'}\n"
            "      - {op: UTCBAR, barrier: done, multicast: 3, pred: 'lane == 0'}\n"
            "  - {op: SYNCS.PHASECHK.TRANS64.TRYWAIT, barrier: done}\n"
            "  - {op: UCGABAR_ARV}\n  - {op: UCGABAR_WAIT}\n"
            "  - {op: UTCATOMSWS.2CTA.AND, columns: 256}\n")
    path = tmp_path / "pair.yaml"
    path.write_text(text)
    spec = gpusim.load_arch("b200")
    m = run(path, "b200", sms=2).metrics
    assert m["gpusim__tensor_flop.sum"] == 64 * 2 * 256 * 256 * 16
    assert m["gpu_sim_cycle"] > 64 * umma_cycles(spec, "UTCHMMA.2CTA.256X256X16.F32")
