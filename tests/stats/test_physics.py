"""Physical limits are invariants: kernels written to break each one, run through the engine.

Each test states its rule; the kernels are small YAML programs written here (not the shipped workloads), so a
change in a shipped file cannot hide a broken rule. `gpusim.stats.invariants.violations` checks every run's
rates against the arch's peaks, causality and bytes conserved between levels.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import gpusim
from gpusim.api import run
from gpusim.stats.declared import undeclared
from gpusim.stats.invariants import violations
from gpusim.workload import load_workload
from gpusim.isa.opcodes import refusal
from gpusim.workload.program import program_infos
from tests.conftest import kernel_workloads

REPO = Path(__file__).resolve().parents[2]
MB = REPO / "workloads" / "microbench"
ARCHS = ["v100", "t4", "a100", "l40s", "h100", "h200", "b200", "b300"]


def _kernel(tmp_path: Path, text: str, name: str = "k.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _run(workload, arch, **kw) -> dict:
    result = run(workload, arch, **kw)
    broken = violations(result.metrics, gpusim.load_arch(arch))
    assert not broken, broken
    return result.metrics


# --- 1. data is never used before it arrives ---------------------------------------------------------------
CHAIN = """kernel: chain
params: {warps: 1, blocks: 1, hops: 64}
buffers:
  buf: {bytes: 64 * 1048576 + 4096}
launch: {grid: [blocks], block: [warps * 32], registers_per_thread: 16}
program:
  - {op: MOV, dst: p}
  - loop: hops
    body:
      - {op: LDG.E, dst: p, src: [p], addr: "buf + i * 1048576"}
"""


@pytest.mark.parametrize("arch", ["a100", "h100"])
def test_warps_on_one_pointer_chain_wait_for_the_data(tmp_path, arch):
    """Eight warps of a block follow one DRAM chain (every lane the same word each hop): requests for a sector
    in flight merge with the L1 miss and complete when its data arrives, so they take one warp's time (within
    5%); the merged sectors are counted, and are not L1 hits."""
    k = _kernel(tmp_path, CHAIN)
    one = _run(k, arch, sms=1, params={"warps": 1})
    eight = _run(k, arch, sms=1, params={"warps": 8})
    assert eight["gpu_sim_cycle"] == pytest.approx(one["gpu_sim_cycle"], rel=0.05)
    assert eight["gpusim__l1_mshr_merged_sectors"] == 7 * 64
    assert eight["l1tex__t_sector_hit_rate.pct"] == 0.0
    latency = gpusim.load_arch(arch).memory.dram.latency
    assert one["gpu_sim_cycle"] >= 63 * latency  # the last load has no consumer to wait for it


def test_blocks_on_other_sms_merge_at_the_l2(tmp_path):
    """Four blocks on four SMs follow the same chain: the L2 holds each sector pending until DRAM answers, so
    four SMs take one SM's time (within 5%) and the L2 counts the merges, not hits."""
    k = _kernel(tmp_path, CHAIN)
    one = _run(k, "h100", sms=4, params={"blocks": 1})
    four = _run(k, "h100", sms=4, params={"blocks": 4})
    assert four["gpu_sim_cycle"] == pytest.approx(one["gpu_sim_cycle"], rel=0.05)
    assert four["gpusim__l2_pending_merged_sectors"] == 3 * 64
    assert four["lts__t_sector_hit_rate.pct"] == 0.0


STAGGERED_CHAIN = """kernel: staggered_chain
params: {blocks: 4, hops: 64, delay: 20}
buffers:
  buf: {bytes: 64 * 1048576 + 4096}
launch: {grid: [blocks], block: [32], registers_per_thread: 16}
program:
  - {op: MOV, dst: p}
  - loop: hops
    body:
      - {op: LDG.E, dst: p, src: [p], addr: "buf + i * 1048576"}
      - loop: blockid * delay
        body:
          - {op: IADD3, dst: p, src: [p, p, p]}
"""


@pytest.mark.parametrize("arch", ["a100", "h100", "b200"])
def test_a_load_that_meets_a_dram_read_in_flight_at_the_l2_waits_for_it_from_its_own_l2_latency(tmp_path, arch):
    """Four blocks on four SMs follow the same DRAM chain, block b taking 20 b dependent integer adds after each
    hop before the next: the later blocks' requests meet the first block's DRAM reads in flight at
    the L2 and wait only for the rest of them. Such a load is counted apart (gpusim__load_latency_l2_in_flight,
    between the L2's latency and the DRAM's), not as a DRAM read faster than DRAM (counted so, the full runs of
    gemm_tile128 4096^3 on h200 and b200 average 616 and 774 cycles for "DRAM" loads against latencies of 652 and
    860); the loads that read DRAM themselves take its latency at least, and no limit is broken."""
    k = _kernel(tmp_path, STAGGERED_CHAIN)
    m = _run(k, arch, sms=4, params={"blocks": 4})
    mem = gpusim.load_arch(arch).memory
    assert m["gpusim__l2_pending_merged_sectors"] > 0
    assert mem.l2.hit_latency <= m["gpusim__load_latency_l2_in_flight"] < mem.dram.latency
    assert m["gpusim__load_latency_dram"] >= mem.dram.latency


# --- 2. one L1TEX data stage per SM, 128 bytes a clock ------------------------------------------------------
LDS = """kernel: lds_width
params: {width: 4, iters: 64}
buffers:
  tile: {space: shared, bytes: 32 * 16 * 2}
launch: {grid: [1], block: [1024], registers_per_thread: 32}
program:
  - loop: "iters if width == 4 else 0"
    body:
      - {op: LDS, dst: "v{rep}", repeat: 4, addr: "tile + lane * 4"}
  - loop: "iters if width == 8 else 0"
    body:
      - {op: LDS.64, dst: "v{rep}", repeat: 4, addr: "tile + lane * 8"}
  - loop: "iters if width == 16 else 0"
    body:
      - {op: LDS.128, dst: "v{rep}", repeat: 4, addr: "tile + lane * 16"}
"""


@pytest.mark.parametrize("arch", ARCHS)
def test_shared_memory_never_moves_more_than_the_data_path_width(tmp_path, arch):
    """LDS.32/.64/.128 with 32 warps on one SM: 1, 2 and 4 wavefronts a request, and at most banks x bank
    width (128) bytes a clock through the SM's one data stage, whatever the width: wider loads take longer."""
    spec = gpusim.load_arch(arch)
    per_clock = spec.shared_memory.banks * spec.shared_memory.bank_width_bytes
    k = _kernel(tmp_path, LDS)
    cycles = {}
    for width, waves in ((4, 1), (8, 2), (16, 4)):
        m = _run(k, arch, sms=1, params={"width": width})
        requests = 32 * 64 * 4
        assert m["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"] == requests * waves
        assert requests * 32 * width / m["gpu_sim_cycle"] <= per_clock
        cycles[width] = m["gpu_sim_cycle"]
    assert cycles[4] <= cycles[8] < cycles[16]  # LDS.32 and .64 tie where the LSU issue rate binds (T4, L40S)
    assert cycles[16] / cycles[8] == pytest.approx(2, rel=0.1)


L1_HITS = """kernel: l1_hits
params: {iters: 32}
buffers:
  x: {bytes: 32768}
launch: {grid: [1], block: [1024], registers_per_thread: 32}
program:
  - loop: iters
    body:
      - {op: LDG.E.128, dst: "v{rep}", repeat: 4, addr: "x + ((warp * 4 + rep) % 16) * 512 + lane * 16"}
"""


@pytest.mark.parametrize("arch", ["a100", "h100"])
def test_l1_hits_share_the_data_stage(tmp_path, arch):
    """Global loads that hit L1 go through the same data stage: at most 128 bytes a clock per SM."""
    m = _run(_kernel(tmp_path, L1_HITS), arch, sms=1)
    assert m["l1tex__t_sector_hit_rate.pct"] > 95
    assert m["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] * 32 / m["gpu_sim_cycle"] <= 128


@pytest.mark.parametrize("stride,expected", [(1, 1), (2, 2), (3, 1), (4, 4), (8, 8), (16, 16), (32, 32), (33, 1)])
def test_smem_stride_with_32_warps_costs_what_the_h200_measured(stride, expected):
    """validation/results/h200-2026-11-29.json: 32 warps on one SM, lane i loads word i*stride: SM cycles per
    warp-load = gcd(stride, 32). The engine's cycles per shared-memory request (loads and stores alike) match
    within 5% where conflicts serialize; conflict-free requests are bound by the pipes, within 25%."""
    m = _run(MB / "smem_stride.yaml", "h200", sms=1, params={"warps": 32, "stride": stride})
    per_request = m["gpu_sim_cycle"] / m["sm__inst_executed_pipe_lsu.sum"]
    assert per_request == pytest.approx(expected, rel=0.05 if expected > 1 else 0.25)


TRANSPOSE = """kernel: transpose
params: {pad: 0, iters: 16}
buffers:
  tile: {space: shared, bytes: 32 * 33 * 4}
launch: {grid: [1], block: [1024], registers_per_thread: 32}
program:
  - loop: iters
    body:
      - {op: STS, src: [v], addr: "tile + (warp * (32 + pad) + lane) * 4"}
      - {op: BAR.SYNC}
      - {op: LDS, dst: v, addr: "tile + (lane * (32 + pad) + warp) * 4"}
      - {op: BAR.SYNC}
"""


def test_naive_transpose_pays_for_its_32_way_conflicts(tmp_path):
    """A 32x32 shared-memory transpose read by columns (32-way conflicts) against the padded tile: the column
    reads serialize on the SM's data stage, so the naive one is many times slower (32 wavefronts vs 1)."""
    k = _kernel(tmp_path, TRANSPOSE)
    naive = _run(k, "h100", sms=1, params={"pad": 0})
    padded = _run(k, "h100", sms=1, params={"pad": 1})
    assert naive["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"] == 32 * 16 * 31
    assert padded["l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"] == 0
    assert naive["gpu_sim_cycle"] > 5 * padded["gpu_sim_cycle"]


# --- 3. a busy pipe is a throttle, not "not selected" -------------------------------------------------------
def _stall(m: dict, reason: str) -> float:
    return m[f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio"]


REASONS = ("long_scoreboard", "short_scoreboard", "wait", "math_pipe_throttle", "mio_throttle", "lg_throttle",
           "barrier", "branch_resolving", "not_selected", "drain", "no_instruction")


@pytest.mark.parametrize("workload,params", [
    ("smem_stride.yaml", {"warps": 1, "stride": 32}), ("fma_chain.yaml", {}),
    ("pointer_chase.yaml", {"hops": 256}), ("hmma_peak.yaml", {"blocks": 1, "threads": 32})])
def test_one_warp_per_scheduler_is_never_not_selected(workload, params):
    """not_selected means another warp of the same scheduler issued that cycle: alone, a warp never is."""
    m = _run(MB / workload, "h100", sms=1, params=params)
    assert _stall(m, "not_selected") == 0


@pytest.mark.parametrize("workload,arch,throttle", [
    ("fma_peak.yaml", "a100", "math_pipe_throttle"), ("hmma_peak.yaml", "h100", "math_pipe_throttle"),
    ("smem_stride.yaml", "h100", "mio_throttle")])
def test_a_pipe_bound_kernel_stalls_most_on_its_pipe(workload, arch, throttle):
    """A kernel bound by one pipe shows that pipe's throttle as its largest stall reason, and fewer eligible
    warps than active ones (a warp whose pipe is busy cannot issue: it is not eligible)."""
    params = {"stride": 32, "warps": 32} if workload == "smem_stride.yaml" else {"blocks": 4}
    m = _run(MB / workload, arch, sms=2, params=params)
    largest = max(REASONS, key=lambda r: _stall(m, r))
    assert largest == throttle, {r: round(_stall(m, r), 2) for r in REASONS}
    assert m["smsp__warps_eligible.avg.per_cycle_active"] < m["smsp__warps_active.avg.per_cycle_active"]


def test_eligible_warps_drop_when_a_pipe_saturates():
    """More conflicts saturate the data stage: fewer warps can issue each cycle."""
    free = _run(MB / "smem_stride.yaml", "h100", sms=1, params={"warps": 32, "stride": 1})
    busy = _run(MB / "smem_stride.yaml", "h100", sms=1, params={"warps": 32, "stride": 32})
    for m in (free, busy):
        assert m["smsp__warps_eligible.avg.per_cycle_active"] <= m["smsp__warps_active.avg.per_cycle_active"]
    assert busy["smsp__warps_eligible.avg.per_cycle_active"] < free["smsp__warps_eligible.avg.per_cycle_active"]


# --- 4. atomics to one address serialize -----------------------------------------------------------------
HISTOGRAM = """kernel: histogram
params: {bins: 1, iters: 8, shared: 0}
buffers:
  hist: {bytes: 4096}
  shist: {space: shared, bytes: 4096}
launch: {grid: [8], block: [256], registers_per_thread: 32}
program:
  - {op: MOV, dst: one}
  - loop: "iters if shared == 0 else 0"
    body:
      - {op: RED.E.ADD, src: [one], addr: "hist + (lane % bins) * 4"}
  - loop: "iters if shared == 1 else 0"
    body:
      - {op: ATOMS.ADD, dst: old, src: [one], addr: "shist + (lane % bins) * 4"}
"""


@pytest.mark.parametrize("shared", [0, 1])
def test_a_one_bin_histogram_is_the_slowest(tmp_path, shared):
    """Global RED (at the L2 slice) and shared ATOMS (in the shared-memory atomic unit): lanes updating one
    word serialize, so the cost grows with the lanes hitting the word and one bin is the slowest case."""
    k = _kernel(tmp_path, HISTOGRAM)
    cycles = [_run(k, "h100", sms=4, params={"bins": b, "shared": shared})["gpu_sim_cycle"] for b in (32, 8, 2, 1)]
    assert cycles == sorted(cycles) and cycles[-1] > 4 * cycles[0], cycles


# --- 5. no throughput above the datasheet ----------------------------------------------------------------
@pytest.mark.parametrize("arch", ARCHS)
def test_peak_microbenchmarks_stay_at_or_below_the_peaks(arch):
    """FP32, warp-level MMA and the L1/shared data path, on every arch: achieved <= peak (violations() checks
    FLOP/s against lanes x clock and tensor FLOP/s against the dense peak at the tensor clock)."""
    spec = gpusim.load_arch(arch)
    sms = 2
    fma = _run(MB / "fma_peak.yaml", arch, sms=sms, params={"blocks": 4})
    assert fma["gpusim__fp32_flop.per_second"] <= spec.peak_fp32_tflops * 1e12 * sms / spec.sms * 1.0001
    assert fma["gpusim__fp32_flop.per_second"] >= 0.9 * spec.peak_fp32_tflops * 1e12 * sms / spec.sms
    mma = _run(MB / "hmma_peak.yaml", arch, sms=sms, params={"blocks": 4})
    assert mma["gpusim__tensor_flop.per_second"] <= spec.peak_fp16_tensor_tflops * 1e12 * sms / spec.sms * 1.0001


WGMMA = """kernel: wgmma_peak
launch: {grid: [4], block: [128], registers_per_thread: 128}
program:
  - loop: 64
    body:
      - {op: HGMMA.64x128x16.F32, dst: "c{rep}", src: ["c{rep}"], repeat: 2}
"""


@pytest.mark.parametrize("arch", ["h100", "h200"])
def test_warpgroup_mma_stays_below_the_datasheet_peak(tmp_path, arch):
    """HGMMA-bound on H100: at most 989.4 TFLOP/s over the whole chip (the datasheet figure, at 1830 MHz),
    within 2% of it."""
    spec = gpusim.load_arch(arch)
    m = _run(_kernel(tmp_path, WGMMA), arch, sms=2)
    chip = m["gpusim__tensor_flop.per_second"] * spec.sms / 2 / 1e12
    assert chip <= spec.peak_fp16_tensor_tflops * 1.0001
    assert spec.peak_fp16_tensor_tflops == pytest.approx(989.4, rel=0.01)


@pytest.mark.parametrize("arch", ["b200", "b300"])
def test_a_persistent_pair_gemm_overlaps_its_epilogue_and_stays_below_the_tensor_peak(arch):
    """gemm_blackwell_2sm on 4 SMs, 16 tiles of 256 x 256 x 512: two resident pairs walking 8 tiles each (the
    accumulator double-buffered, one tile's epilogue under the next tile's MMAs) take fewer cycles than the same
    tiles one per pair (16 pairs launched two at a time, each draining its epilogue alone), and neither passes the
    tensor core's dense FP16 peak or any other limit."""
    spec = gpusim.load_arch(arch)
    shape = {"M": 1024, "N": 1024, "K": 512}
    persistent = _run(REPO / "workloads/gemm_blackwell_2sm.yaml", arch, sms=4, sample="off", params={**shape, "PAIRS": 2})
    one_each = _run(REPO / "workloads/gemm_blackwell_2sm.yaml", arch, sms=4, sample="off", params={**shape, "PAIRS": 16})
    assert persistent["gpu_sim_cycle"] < 0.95 * one_each["gpu_sim_cycle"]
    for m in (persistent, one_each):
        assert m["gpusim__tensor_flop.per_second"] * spec.sms / 4 / 1e12 <= spec.peak_fp16_tensor_tflops * 1.0001


# --- 6. one SM's path to L2, and the cache-sensitive lesson ----------------------------------------------
L2_READ = """kernel: l2_read
params: {iters: 16}
buffers:
  x: {bytes: 524288}
launch: {grid: [8], block: [1024], registers_per_thread: 32}
program:
  # the two resident blocks read 128 KiB a trip, 128 KiB further on each trip: a line comes back every 4 trips
  - loop: iters
    body:
      - {op: LDG.E.128, dst: "v{rep}", repeat: 4,
         addr: "x + (((block.x % 2) * 128 + warp * 4 + rep + i * 256) % 1024) * 512 + lane * 16"}
"""


def test_one_sm_reads_l2_no_faster_than_its_port(tmp_path):
    """Eight blocks of 1024 threads on one SM re-read a 512 KiB buffer (in L2 after the first pass, twice the
    L1): the SM pulls at most its port's bytes per clock from L2 (h100: 64), and most of that."""
    spec = gpusim.load_arch("h100")
    m = _run(_kernel(tmp_path, L2_READ), "h100", sms=1)
    per_clock = m["gpusim__l1_to_l2_bytes"] / m["gpu_sim_cycle"]
    assert per_clock <= spec.memory.l2.sm_bytes_per_clock
    assert per_clock >= 0.6 * spec.memory.l2.sm_bytes_per_clock


MSHR_BOUND = """kernel: mshr_bound
description: every lane of 32 warps loads 16 bytes of lines no one else reads, 64 times, nothing between the loads
params: {reps: 64}
buffers:
  buf: {bytes: 32 * 1024 * 16 * reps}
launch: {grid: [1], block: [1024], registers_per_thread: 32}
program:
  - {op: LDG.E.128, dst: "v{rep % 8}", repeat: reps, addr: "buf + (rep * 1024 + tid) * 16"}
"""


@pytest.mark.parametrize("arch", ARCHS)
def test_an_sm_keeps_no_more_lines_in_flight_than_its_mshrs(tmp_path, arch):
    """One SM streams loads of lines nobody else reads: every line is a miss holding an MSHR entry until its data
    is back, no sooner than the L2's latency. By Little's law the lines it can fetch in C cycles are at most
    mshrs x (C / latency + 1); with 32 entries and with 64 the run stays below that bound, the table fills, and the
    smaller table is never the faster (on a T4 one SM's share of the DRAM bounds both)."""
    import attrs

    spec = gpusim.load_arch(arch)
    cycles = {}
    for mshrs in (32, 64):
        small = attrs.evolve(spec, memory=attrs.evolve(spec.memory, l1=attrs.evolve(spec.memory.l1, mshrs=mshrs)))
        result = run(_kernel(tmp_path, MSHR_BOUND), small, sms=1, sample="off")
        m = result.metrics
        assert not violations(m, small), violations(m, small)
        lines = m["gpusim__l1_to_l2_bytes"] / spec.memory.l1.line_bytes
        assert lines == 32 * 64 * 4  # every 512-byte warp access is four lines, each fetched once
        assert lines <= mshrs * (m["gpu_sim_cycle"] / spec.memory.l2.hit_latency + 1), (mshrs, m["gpu_sim_cycle"])
        assert m["gpusim__mshr_full_events"] > 0
        cycles[mshrs] = m["gpu_sim_cycle"]
    assert cycles[32] >= cycles[64]


CACHE_SENSITIVE = """kernel: cache_sensitive
description: each warp re-reads its own 12 KiB; 32 warps overflow the L1, 16 fit
params: {ws: 12288, reps: 16, regs: 32}
buffers:
  buf: {bytes: 2 * 16 * ws}
launch: {grid: [2], block: [512], registers_per_thread: regs}
program:
  - {op: MOV, dst: acc}
  - loop: reps
    body:
      - loop: ws / 512
        body:
          - {op: LDG.E, dst: "v{rep}", repeat: 4, addr: "buf + (block.x * 16 + warp) * ws + (i * 4 + rep) * 128 + lane * 4"}
          - {op: FADD, dst: acc, src: [acc, "v{rep}"], repeat: 4}
"""


@pytest.mark.parametrize("scheduler", ["lrr", "gto"])
def test_throttled_occupancy_that_wins_on_hit_rate_wins_on_time(tmp_path, scheduler):
    """Rogers et al., "Cache-Conscious Wavefront Scheduling" (MICRO 2012): when every warp re-reads its own
    working set and all of them overflow the L1, fewer resident warps (here: more registers, one block per SM)
    keep their sets in L1; misses cost the SM's L2 port, so the higher hit rate is also the shorter run."""
    k = _kernel(tmp_path, CACHE_SENSITIVE)
    full = _run(k, "h100", sms=1, scheduler=scheduler, params={"regs": 32})
    throttled = _run(k, "h100", sms=1, scheduler=scheduler, params={"regs": 128})
    assert throttled["launch__occupancy_limit_registers"] < full["launch__occupancy_limit_registers"]
    assert throttled["l1tex__t_sector_hit_rate.pct"] > full["l1tex__t_sector_hit_rate.pct"] + 50
    assert throttled["gpu_sim_cycle"] < 0.8 * full["gpu_sim_cycle"]


# --- 7. DRAM efficiency and write-back -------------------------------------------------------------------
def test_dirty_l2_bytes_are_reported_and_bytes_are_conserved():
    """An 8 MiB copy on t4 (4 MiB L2): what the stores wrote is either written back to DRAM during the kernel
    or still dirty in L2 at its end, never lost and never counted twice."""
    m = _run(MB / "stream.yaml", "t4", params={"n": 2097152, "blocks": 128})
    written = m["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"] * 32
    assert written == 8 * 2**20
    assert m["dram__bytes_write.sum"] > 0
    assert m["dram__bytes_write.sum"] + m["gpusim__l2_dirty_bytes_at_end"] == written
    assert m["gpusim__l2_dirty_bytes_at_end"] > 0


def test_fewer_sms_get_their_share_of_dram():
    """`--sms 8` on H100 gets about 8/132 of its DRAM bandwidth (5 of 80 channels), not half of the chip's."""
    spec = gpusim.load_arch("h100")
    m = _run(MB / "stream.yaml", "h100", sms=8, params={"n": 1048576, "blocks": 64})
    share = max(1, round(spec.memory.dram.channels * 8 / spec.sms)) / spec.memory.dram.channels
    assert m["dram__bytes.sum.per_second"] <= share * spec.memory.dram.bandwidth_gbs * 1e9
    assert m["dram__bytes.sum.per_second"] >= 0.5 * share * spec.memory.dram.bandwidth_gbs * 1e9


# --- every shipped workload on every arch ------------------------------------------------------------------
SMALL = {
    "gemm_tile128.yaml": {"M": 256, "N": 256, "K": 256},
    "gemm_tile128_sync.yaml": {"M": 256, "N": 256, "K": 256},
    "gemm_multistage.yaml": {"M": 256, "N": 256, "K": 256},
    "gemm_hopper_ws.yaml": {"M": 256, "N": 256, "K": 256},
    "gemm_blackwell_umma.yaml": {"M": 256, "N": 512, "K": 512},
    "gemm_blackwell_2sm.yaml": {"M": 512, "N": 512, "K": 512},
    "flash_attention3.yaml": {"seq": 256, "heads": 2},
    "attention_naive.yaml": {"seq": 128, "heads": 2},
    "flash_attention.yaml": {"seq": 128, "heads": 2},
    "flash_attention_simple.yaml": {"seq": 128, "heads": 2},
    "kv_decode.yaml": {"batch": 1, "seq": 256, "splits": 8},
    "kv_decode_naive.yaml": {"batch": 1, "seq": 256},
    "reduction.yaml": {"n": 8192},
    "vecadd.yaml": {"n": 8192},
    "gemv.yaml": {"N": 256, "K": 1024, "B": 2, "U": 4},
    "rmsnorm.yaml": {"T": 16, "H": 2048},
    "swiglu.yaml": {"n": 65536, "blocks": 16},
    "microbench/coalescing.yaml": {"blocks": 8},
    "microbench/divergence.yaml": {"n": 8192},
    "microbench/fma_chain.yaml": {"n": 256},
    "microbench/fma_peak.yaml": {"blocks": 4, "iters": 8},
    "microbench/hmma_peak.yaml": {"blocks": 4, "iters": 8},
    "microbench/latency_hiding.yaml": {"blocks": 4},
    "microbench/occupancy_sweep.yaml": {"blocks": 16, "iters": 4},
    "microbench/pointer_chase.yaml": {"footprint": 1048576, "hops": 512},
    "microbench/smem_stride.yaml": {"stride": 2, "iters": 8},
    "microbench/stream.yaml": {"n": 262144, "blocks": 16},
    "microbench/stream_fp64.yaml": {"n": 65536, "threads": 256, "kernel": 3},
}


def test_every_shipped_workload_is_listed():
    shipped = {str(p.relative_to(REPO / "workloads")) for p in kernel_workloads()}
    assert shipped == set(SMALL)


@pytest.mark.parametrize("arch", ARCHS)
def test_shipped_workloads_respect_every_physical_limit(arch):
    """No rate above its peak, no load faster than its level's latency, bytes conserved between levels: every
    shipped workload at a small size on every arch (hierarchy memory model, 2 SMs) that has its instructions
    (one that uses asynchronous copies or warpgroup MMA the arch lacks is refused, not run)."""
    check_shipped_workloads(arch, sms=2)


def check_shipped_workloads(arch: str, **options) -> None:
    """Every shipped workload at its SMALL size that `arch` has the instructions for, run with `options` (gpusim.run's):
    no physical limit broken (gpusim.stats.invariants.violations), a finite cycle count."""
    spec = gpusim.load_arch(arch)
    for name, params in SMALL.items():
        infos = program_infos(load_workload(REPO / "workloads" / name, params).program)
        if refusal(infos, spec.name, spec.compute_capability):
            continue
        result = run(REPO / "workloads" / name, arch, params=params, **options)
        broken = violations(result.metrics, spec)
        assert not broken, (name, broken)
        assert result.violations == [] and result.to_dict()["violations"] == []  # the record carries the check
        assert undeclared(result.metrics) == [], name  # every metric says how it combines (gpusim.stats.declared)
        assert math.isfinite(result.metrics["gpu_sim_cycle"])


@pytest.mark.parametrize("arch", ARCHS)
def test_a_warm_l2_writes_back_no_faster_than_dram_and_conserves_the_kernels_bytes(arch):
    """A sampled streaming kernel's runs start from an L2 full of lines no kernel touches, half of them dirty
    (gpusim.sampling.warm): every line the kernel allocates evicts one, and the dirty ones go to DRAM. Run through
    the engine: no rate above its peak, write-backs happen from the first stores, and what went to DRAM or stays
    dirty is the kernel's stores plus the warm lines' dirty bytes, no more."""
    from gpusim.api import load_kernel, simulate_kernel
    from gpusim.options import RunOptions
    from gpusim.stats.invariants import throughputs

    spec = gpusim.load_arch(arch)
    kernel = load_kernel(REPO / "workloads" / "vecadd.yaml", {"n": 1 << 18})
    result = simulate_kernel(kernel, spec, RunOptions(sms=4, max_instructions=None, sample="off"), warm_l2=0.5)
    m = result.metrics
    for name, _, achieved, peak, unit in throughputs(m, spec):
        assert achieved <= peak * 1.0001, (name, achieved, peak, unit)
    capacity, sector = m["gpusim__l2_capacity_bytes"], spec.memory.l2.sector_bytes
    stored = m["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"] * sector
    assert m["dram__bytes_write.sum"] > 0.5 * stored  # (the kernel's 1 MiB of stores evict as many warm lines)
    assert m["dram__bytes_write.sum"] + m["gpusim__l2_dirty_bytes_at_end"] <= stored + 0.5 * capacity * 1.001
