"""Memory hierarchy: pure coalescing and bank-conflict functions, and the simulated levels against the arch."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpusim
from gpusim.analytic.banks import conflict_degree, ideal_wavefronts, wavefronts
from gpusim.analytic.coalesce import coalesce, sectors_touched
from gpusim.api import run

from tests.conftest import ARCH_NAMES, ROOT

MB = ROOT / "workloads/microbench"
LANES = np.arange(32, dtype=np.int64)
FULL = 0xFFFFFFFF


# --- coalescing -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("addrs, width, mask, sectors, lines", [
    (LANES * 4, 4, FULL, 4, 1),  # seed 2.4.2: consecutive words, 128 bytes
    (LANES * 4096, 4, FULL, 32, 32),  # seed 2.4.2: stride of 1024 words
    (LANES * 8, 8, FULL, 8, 2),
    (LANES * 16, 16, FULL, 16, 4),
    (LANES * 4, 4, 0x0000FFFF, 2, 1),  # half the warp
    (np.zeros(32, dtype=np.int64), 4, FULL, 1, 1),  # every lane the same word
    (LANES * 4 + 64, 4, FULL, 4, 2),  # misaligned to the line: 4 sectors over 2 lines
    (LANES * 4, 4, 0, 0, 0),  # no active lane
])
def test_coalescing_table(addrs, width, mask, sectors, lines):
    assert coalesce(addrs, width, mask) == (sectors, lines)


@settings(max_examples=200)
@given(st.lists(st.integers(0, 1 << 20), min_size=32, max_size=32), st.sampled_from([1, 2, 4, 8, 16]),
       st.integers(1, FULL))
def test_coalescing_properties(raw, width, mask):
    addrs = np.array(raw, dtype=np.int64) // width * width
    sectors, lines = coalesce(addrs, width, mask)
    active = bin(mask).count("1")
    assert 1 <= lines <= sectors <= active and sectors <= 4 * lines
    perm = np.random.default_rng(0).permutation(32)
    permuted_mask = sum(1 << int(i) for i in range(32) if mask >> int(perm[i]) & 1)
    assert coalesce(addrs[perm], width, permuted_mask) == (sectors, lines)
    assert set(sectors_touched(addrs, width, mask).tolist()) == {int(a) // 32 for i, a in enumerate(addrs)
                                                                 if mask >> i & 1}


# --- bank conflicts ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("stride", [1, 2, 3, 4, 8, 16, 32, 33, 64, 5, 6])
def test_word_stride_conflicts_are_gcd(stride):
    assert wavefronts(LANES * stride * 4, 4, FULL) == math.gcd(stride, 32) == conflict_degree(stride)


@pytest.mark.parametrize("addrs, width, expected", [
    (LANES * 8, 8, 2),  # 8-byte, consecutive: two half-warp phases, no conflict
    (LANES * 16, 8, 4),  # 8-byte at 16-byte stride: each half-warp spans 64 words, 2-way
    (LANES * 16, 16, 4),  # 16-byte, consecutive: four quarter-warp phases
    (LANES * 32, 16, 8),  # 16-byte at 32-byte stride: 2-way within each quarter-warp
    ((LANES % 4) * 4, 4, 1),  # lanes read 4 words, 8 lanes each: broadcasts
    ((LANES * 33) * 4, 4, 1),  # a 32 x 33 padded array's column
    ((LANES * 32) * 4, 4, 32),  # a 32 x 32 array's column
])
def test_wide_accesses_and_broadcasts(addrs, width, expected):
    assert wavefronts(addrs, width, FULL) == expected


def test_ideal_wavefronts_count_active_phases():
    assert (ideal_wavefronts(4, FULL), ideal_wavefronts(8, FULL), ideal_wavefronts(16, FULL)) == (1, 2, 4)
    assert ideal_wavefronts(16, 0x000000FF) == 1 and ideal_wavefronts(8, 0x0000FFFF) == 1


@settings(max_examples=300)
@given(st.lists(st.integers(0, 4095), min_size=32, max_size=32), st.integers(1, FULL))
def test_bank_conflict_properties(words, mask):
    addrs = np.array(words, dtype=np.int64) * 4
    degree = wavefronts(addrs, 4, mask)
    assert 1 <= degree <= 32
    perm = np.random.default_rng(1).permutation(32)
    assert wavefronts(addrs[perm], 4, FULL) == wavefronts(addrs, 4, FULL)  # lane order does not matter
    assert wavefronts(np.full(32, addrs[0]), 4, mask) == 1  # a broadcast never conflicts
    assert wavefronts(addrs + 128, 4, mask) == degree  # moving by whole rows of banks changes nothing


# --- simulated levels -------------------------------------------------------------------------------------

L2_HOPS = (1 << 20) // 128 + 1024  # 1 MiB: a pass over its 8,192 lines (from DRAM), then 1,024 hits in L2


def _chase(arch, footprint, **extra):
    params = {"footprint": footprint, **extra}
    return run(MB / "pointer_chase.yaml", arch, params=params).metrics


@pytest.mark.parametrize("arch", ARCH_NAMES)
def test_pointer_chase_latency_per_level(arch):
    """16 KiB stays in L1, 1 MiB in L2 (larger than any L1, smaller than any L2), four times L2 goes to DRAM:
    the load-to-use latency per level is the arch file's figure for that level (plus a sector's transfer)."""
    spec = gpusim.load_arch(arch)
    mem = spec.memory
    assert _chase(arch, 16 * 1024)["gpusim__load_latency_l1_hit"] == mem.l1.hit_latency
    l2 = _chase(arch, 1 << 20, hops=L2_HOPS)["gpusim__load_latency_l2_hit"]
    assert mem.l2.hit_latency <= l2 <= mem.l2.hit_latency + 2
    dram = _chase(arch, 4 * mem.l2.size_bytes, hops=2048)["gpusim__load_latency_dram"]
    assert mem.dram.latency <= dram <= mem.dram.latency + 5


def test_h100_latencies_sit_near_the_published_measurements():
    """arch-facts: H100 load-to-use about 32-40 (L1), ~260 (L2), 480-660 (DRAM) cycles."""
    assert 32 <= _chase("h100", 16 * 1024)["gpusim__load_latency_l1_hit"] <= 40
    assert 250 <= _chase("h100", 1 << 20, hops=L2_HOPS)["gpusim__load_latency_l2_hit"] <= 290
    assert 470 <= _chase("h100", 256 << 20, hops=2048)["gpusim__load_latency_dram"] <= 660


@pytest.mark.parametrize("stride, pad, width, wavefronts_per_request", [
    (1, 0, 4, 1), (2, 0, 4, 2), (3, 0, 4, 1), (4, 0, 4, 4), (8, 0, 4, 8), (16, 0, 4, 16), (32, 0, 4, 32),
    (32, 1, 4, 1),  # the padded 32 x 33 array (seed 2.3.5)
    (2, 0, 8, 2), (4, 0, 8, 4), (4, 0, 16, 4), (8, 0, 16, 8),
])
def test_smem_stride_bank_conflicts(stride, pad, width, wavefronts_per_request):
    """Conflicts per request = wavefronts - the phases the width needs (4 B: gcd(stride, 32) - 1)."""
    m = run(MB / "smem_stride.yaml", "h100", params={"stride": stride, "pad": pad, "width": width}).metrics
    requests = 2 * 64 * 8  # LDS + STS, 64 trips, 8 warps
    assert m["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"] == requests * wavefronts_per_request
    ideal = {4: 1, 8: 2, 16: 4}[width]
    assert m["l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"] == requests * (wavefronts_per_request - ideal)
    assert m["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"] == \
        m["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"] == m["gpgpu_n_shmem_bkconflict"] // 2


@pytest.mark.parametrize("arch", ARCH_NAMES)
def test_stream_reaches_the_achievable_dram_bandwidth(arch):
    """A copy runs DRAM at its measured efficiency: no faster than the read efficiency allows, and at least
    90% of the copy efficiency (reads and write-backs mixed: 2 / (1/read + 1/write) of the peak)."""
    spec = gpusim.load_arch(arch)
    dram = spec.memory.dram
    # 8 SMs keep their share of the DRAM channels, each at its full rate (gpusim/memory/hierarchy.py: N/SMs of
    # the channels, rounded, at least one): the peak is that share's
    channels = max(1, round(dram.channels * 8 / spec.sms))
    peak = channels * dram.bandwidth_gbs * 1e9 / dram.channels
    copy = 2 / (1 / dram.read_efficiency + 1 / dram.write_efficiency)
    # 8 MiB copied by 8 blocks per SM in 8 grid-stride trips: the V100's and T4's L2 overflow and write back
    m = run(MB / "stream.yaml", arch, sms=8, params={"n": 2097152, "blocks": 64}).metrics
    bw = m["dram__bytes.sum.per_second"]
    assert 0.9 * copy * peak <= bw <= dram.read_efficiency * peak


@pytest.mark.parametrize("pattern, low, high", [(0, 4, 4), (1, 32, 32), (2, 24, 32)])
def test_coalescing_patterns_sectors_per_request(pattern, low, high):
    m = run(MB / "coalescing.yaml", "a100", sms=4, params={"pattern": pattern, "blocks": 8}).metrics
    per_request = m["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] / m["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"]
    assert low <= per_request <= high


def test_l2_reuse_when_the_working_set_fits():
    """Two passes over a working set: half the L2 accesses hit when it fits in L2 (the second pass), none when
    it is twice L2 (LRU evicts each line before it comes round again: a pass and a quarter shows it, a fifth of
    the accesses being second visits)."""
    l2 = gpusim.load_arch("t4").memory.l2.size_bytes
    fits = _chase("t4", l2 // 2)["lts__t_sector_hit_rate.pct"]
    lines = 2 * l2 // 128  # the chase's default stride: a line a hop
    exceeds = _chase("t4", 2 * l2, hops=lines + lines // 4)["lts__t_sector_hit_rate.pct"]
    assert fits >= 45 and exceeds <= 5


def test_gemm_reports_hit_rates_and_bank_conflicts():
    m = run(ROOT / "workloads/gemm_tile128_sync.yaml", "h100", sms=4, params={"M": 256, "N": 256, "K": 256}).metrics
    for key in ("l1tex__t_sector_hit_rate.pct", "lts__t_sector_hit_rate.pct", "dram__bytes_read.sum",
                "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"):
        assert key in m
    assert m["l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"] == 0  # the swizzled layouts are conflict-free
    # 2 x 2 blocks: each A and B tile is read by two blocks, the second read hits L2; C's stores all miss.
    a_and_b_sectors = 2 * (2 * 256 * 256 * 2 // 32)  # A and B, each read twice
    c_sectors = 256 * 256 * 4 // 32
    assert m["lts__t_sectors.sum"] == a_and_b_sectors + c_sectors
    # the second read of a tile hits L2, or merges with the first read's DRAM fill while that is in flight
    hits = m["lts__t_sector_hit_rate.pct"] / 100 * m["lts__t_sectors.sum"]
    assert hits + m["gpusim__l2_pending_merged_sectors"] == pytest.approx(a_and_b_sectors / 2)


def test_local_memory_is_interleaved_by_lane(tmp_path):
    """A warp's 4-byte local access at the same per-thread offset lands in one 128-byte line (the hardware
    interleaves local memory by lane): 4 sectors per request. 2 blocks x 2 warps x 4 trips = 16 requests."""
    path = tmp_path / "local.yaml"
    path.write_text("kernel: local_spill\nlaunch: {grid: [2], block: [64], registers_per_thread: 32}\n"
                    "program:\n  - loop: 4\n    var: i\n    body:\n"
                    "      - {op: STL, src: [r0], addr: \"i * 4\"}\n"
                    "      - {op: LDL, dst: r1, addr: \"i * 4\"}\n"
                    "      - {op: FADD, dst: r0, src: [r1]}\n")
    m = run(path, "h100", sms=1).metrics
    assert m["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"] == 16
    assert m["l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"] == 16
    assert m["gpusim__sectors_per_request_global_ld"] == 4.0
    assert m["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"] == 64


@pytest.mark.parametrize("workload, arch, params, sms", [
    ("workloads/vecadd.yaml", "t4", {}, 4),  # writes back
    ("workloads/microbench/stream.yaml", "h100", {"n": 1 << 23}, 8),  # 64 MiB through 50 MB: writes back, ends dirty
    ("workloads/gemm_tile128_sync.yaml", "h100", {"M": 512, "N": 512, "K": 512}, 8),  # reads, many merges in flight
])
def test_a_shadow_l2_of_the_l2s_own_size_counts_exactly_its_dram_traffic(workload, arch, params, sms):
    """The shadow L2 a sampled run keeps (gpusim.sampling.reuse) sees every L2 access and updates its tags as the
    L2 does: given the L2's own size, it counts exactly the L2's DRAM reads, write-backs and dirty bytes at the end."""
    from gpusim import api
    from gpusim.arch import load_arch
    from gpusim.options import RunOptions

    spec = load_arch(arch)
    kernel = api.load_kernel(ROOT / workload, params)
    options = RunOptions(sms=sms, max_instructions=None, sample="off")
    m = api.simulate_kernel(kernel, spec, options, shadow_l2=spec.memory.l2.size_bytes).metrics
    assert m["gpusim__shadow_l2_capacity_bytes"] == m["gpusim__l2_capacity_bytes"]
    assert m["gpusim__shadow_dram_bytes_read"] == m["dram__bytes_read.sum"] > 0
    assert m["gpusim__shadow_dram_bytes_write"] == m["dram__bytes_write.sum"]
    assert m["gpusim__shadow_l2_dirty_bytes_at_end"] == m["gpusim__l2_dirty_bytes_at_end"]
    # and its hits and merges with lines in flight: the L2's own (a line in flight from DRAM is so in both)
    assert m["gpusim__shadow_l2_pending_merged_sectors"] == m["gpusim__l2_pending_merged_sectors"]
    hits = m["lts__t_sector_hit_rate.pct"] * m["lts__t_sectors.sum"] / 100
    assert m["gpusim__shadow_l2_hit_sectors"] == pytest.approx(hits, abs=1e-6)
    plain = api.simulate_kernel(kernel, spec, options).metrics
    assert {k: v for k, v in m.items() if "shadow" not in k} == plain  # it changes nothing else
    assert not any("shadow" in k for k in plain)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(1, 15), st.integers(0, 3), st.integers(0, 20), st.booleans(),
                          st.booleans()), min_size=1, max_size=300), st.integers(0, 60))
def test_a_shadow_l2_counts_the_same_whenever_it_prunes_its_lines_in_flight(accesses, window):
    """A shadow L2's lines in flight are pruned of those back by the floor less its recent window (no later request
    can see them): pruned at every access or never, it counts the same hits, merges, recent hits and DRAM bytes."""
    from types import SimpleNamespace

    from gpusim.memory.shadow_l2 import ShadowL2

    spec = SimpleNamespace(line_bytes=128, sector_bytes=32, associativity=2)
    count = [bin(m).count("1") for m in range(16)]

    def counts(prune: bool) -> dict:
        shadow = ShadowL2(spec, 2, 2, 1024, 32, count, 30)
        shadow.recent_window = window
        now = 0
        for line, mask, step, delay, write, l2_missed in accesses:
            now += step
            shadow.pending_limit = [0 if prune else 1 << 40] * 2
            shadow.access(line % 2, line, mask, 0, write, 0, now, now + delay, mask if l2_missed else 0, now)
        return shadow.metrics()

    assert counts(True) == counts(False)


def test_a_reduced_run_counts_the_l2_hits_close_to_their_lines_fill_and_a_shadow_of_its_size_the_same():
    """A sampled run's reduced runs (block_limit) count the L2 hits on sectors filled from DRAM less than the DRAM's
    latency plus the run's start spread before (they would merge with the fill where the blocks sharing the line
    ran in closer step: the L2 hit rate's stated error); its shadow L2 of the L2's size counts the same; a full run
    counts none and its record has no such key."""
    from gpusim import api
    from gpusim.arch import load_arch
    from gpusim.options import RunOptions

    spec = load_arch("h100")
    kernel = api.load_kernel(ROOT / "workloads/gemm_tile128_sync.yaml", {"M": 512, "N": 512, "K": 512})
    options = RunOptions(sms=8, max_instructions=None, sample="off")
    blocks = 16
    m = api.simulate_kernel(kernel, spec, options, block_limit=blocks, stagger=500,
                            shadow_l2=spec.memory.l2.size_bytes).metrics
    hits = m["lts__t_sector_hit_rate.pct"] * m["lts__t_sectors.sum"] / 100
    assert 0 < m["gpusim__l2_recent_fill_hit_sectors"] <= hits + 1e-6
    assert m["gpusim__shadow_l2_recent_fill_hit_sectors"] == m["gpusim__l2_recent_fill_hit_sectors"]
    assert "gpusim__l2_recent_fill_hit_sectors" not in api.simulate_kernel(kernel, spec, options).metrics
