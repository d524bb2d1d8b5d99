"""Asynchronous copies, mbarriers and warpgroup MMA: cp.async (LDGSTS, LDGDEPBAR,
DEPBAR), TMA / bulk copies completing on mbarriers (UTMALDG, SYNCS), wgmma (HGMMA, WARPGROUP.DEPBAR), and the
multistage GEMM built on them. Each test states its rule; the kernels are small YAML programs written here."""

from __future__ import annotations

import re
from pathlib import Path

import attrs
import pytest

import gpusim
from gpusim.api import run
from gpusim.engine.timing import TimingTable
from gpusim.stats.invariants import violations
from gpusim.workload import load_workload
from gpusim.isa.opcodes import lookup

from tests.conftest import ROOT, run_cli

GEMM = ROOT / "workloads" / "gemm_multistage.yaml"


def _kernel(tmp_path: Path, text: str, name: str = "k.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


class Events:
    """What a run did, by warp: each issue (cycle, opcode), each memory access's data-ready cycle, and the stall
    intervals with their reasons."""

    def __init__(self):
        self.issues: dict[int, list[tuple[int, str]]] = {}
        self.ready: dict[int, list[tuple[str, int]]] = {}
        self.states: dict[int, list[tuple[str, int, int]]] = {}

    def issued(self, sm, sp, warp, inst, now):
        self.issues.setdefault(warp.gid, []).append((now, inst.info.opcode))

    def accessed(self, sm, sp, warp, inst, start, ready_at):
        self.ready.setdefault(warp.gid, []).append((inst.info.opcode, ready_at))

    def state(self, sp, warp, reason, start, end):
        self.states.setdefault(warp.gid, []).append((reason, start, end))

    def first(self, gid: int, opcode: str, after: int = -1) -> int:
        """The cycle warp `gid` first issued `opcode` after cycle `after`."""
        return next(t for t, op in self.issues[gid] if op == opcode and t > after)

    def reason_before(self, gid: int, cycle: int) -> str:
        """The stall reason of the interval that ends at `cycle`."""
        return next(reason for reason, start, end in self.states[gid] if end == cycle)


def _run(path, arch, **kw):
    events = Events()
    result = run(path, arch, observer=events, **kw)
    assert not violations(result.metrics, gpusim.load_arch(arch)), violations(result.metrics, gpusim.load_arch(arch))
    return result, events


# --- cp.async: LDGSTS, LDGDEPBAR, DEPBAR ------------------------------------------------------------------------

COPY = """kernel: copy
buffers:
  x: {bytes: 1048576}
  s: {space: shared, bytes: 8192}
launch: {grid: [1], block: [32], registers_per_thread: 32}
program:
  - {op: LDGSTS.E.BYPASS.128, addr: "x + lane * 16"}
  - {op: FFMA, dst: a, src: [b, c], repeat: 4}
  - {op: LDGDEPBAR}
  - {op: DEPBAR.LE, pending: 0}
  - {op: LDS.128, dst: v, addr: "s + lane * 16"}
"""


def test_ldgsts_writes_no_register_and_the_warp_goes_on_until_depbar(tmp_path):
    """LDGSTS has no register result: the math after it issues at once, long before the copy lands; the DEPBAR
    that waits for it holds the next instruction until the copy's data is in shared memory, as long_scoreboard."""
    result, ev = _run(_kernel(tmp_path, COPY), "a100", sms=1)
    copy_ready = dict(ev.ready[0])["LDGSTS.E.BYPASS.128"]
    copy_issue = ev.first(0, "LDGSTS.E.BYPASS.128")
    assert ev.first(0, "FFMA") <= copy_issue + 4 < copy_ready
    lds = ev.first(0, "LDS.128")
    assert lds >= copy_ready and ev.reason_before(0, lds) == "long_scoreboard"
    m = result.metrics
    assert m["l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum"] == 1
    assert m["l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum"] == 16  # 32 lanes x 16 bytes
    assert m["dram__bytes_read.sum"] == 512  # through L2 and DRAM like a load


GROUPS = """kernel: groups
buffers:
  x: {bytes: 4194304}
launch: {grid: [1], block: [32], registers_per_thread: 32}
program:
  - {op: LDG.E.128, dst: w, addr: "x + lane * 16"}             # warms L2 with the lines groups 0 and 1 read
  - {op: LDG.E.128, dst: w2, addr: "x + 512 + lane * 16"}
  - {op: FADD, dst: z, src: [w, w2]}
  - {op: LDGSTS.E.BYPASS.128, addr: "x + lane * 16", src: [z]}  # group 0: L2 hits
  - {op: LDGDEPBAR}
  - {op: LDGSTS.E.BYPASS.128, addr: "x + 512 + lane * 16"}      # group 1: L2 hits
  - {op: LDGDEPBAR}
  - {op: LDGSTS.E.BYPASS.128, addr: "x + 2097152 + lane * 16"}  # group 2: from DRAM
  - {op: LDGDEPBAR}
  - {op: DEPBAR.LE, pending: PENDING}
  - {op: NOP}
"""


@pytest.mark.parametrize("pending", [0, 1, 2, 3])
def test_depbar_waits_until_at_most_n_of_the_newest_groups_are_in_flight(tmp_path, pending):
    """DEPBAR.LE SB0, N (cp.async.wait_group N) waits for every committed group but the N most recent: the
    instruction after it issues once those older groups have landed, and not later because of the newer ones."""
    path = _kernel(tmp_path, GROUPS.replace("PENDING", str(pending)))
    _, ev = _run(path, "a100", sms=1)
    groups = [ready for op, ready in ev.ready[0] if op.startswith("LDGSTS")]
    assert groups[2] > max(groups[:2]) + 100  # DRAM, after the L2 hits
    after = ev.first(0, "NOP")
    waited = groups[:3 - pending]
    if waited:
        assert max(waited) <= after <= max(waited) + 2
    else:
        assert after <= ev.first(0, "DEPBAR.LE") + 2


def test_a_warp_exits_only_once_its_copies_have_landed(tmp_path):
    """A warp whose program ends with copies in flight drains until they have written shared memory."""
    text = COPY.replace('  - {op: LDGDEPBAR}\n  - {op: DEPBAR.LE, pending: 0}\n  - {op: LDS.128, dst: v, addr: "s + lane * 16"}\n', "")
    result, ev = _run(_kernel(tmp_path, text), "a100", sms=1)
    assert result.metrics["gpu_sim_cycle"] >= dict(ev.ready[0])["LDGSTS.E.BYPASS.128"]


def test_ldgsts_without_bypass_fills_the_l1(tmp_path):
    """LDGSTS.E.128 (cp.async.ca) allocates in L1, so a second copy of the same bytes hits there; .BYPASS
    (cp.async.cg) neither hits nor fills."""
    text = """kernel: twice
buffers:
  x: {bytes: 65536}
launch: {grid: [1], block: [32], registers_per_thread: 32}
program:
  - {op: OPCODE, addr: "x + lane * 16"}
  - {op: LDGDEPBAR}
  - {op: DEPBAR.LE}
  - {op: OPCODE, addr: "x + lane * 16"}
"""
    cached = run(_kernel(tmp_path, text.replace("OPCODE", "LDGSTS.E.128")), "a100", sms=1).metrics
    bypass = run(_kernel(tmp_path, text.replace("OPCODE", "LDGSTS.E.BYPASS.128"), "b.yaml"), "a100", sms=1).metrics
    assert cached["l1tex__t_sector_hit_rate.pct"] == 50.0
    assert bypass["l1tex__t_sector_hit_rate.pct"] == 0.0
    assert bypass["lts__t_sectors.sum"] == 2 * cached["lts__t_sectors.sum"]


def test_a_copy_in_flight_overlaps_the_math(tmp_path):
    """The point of cp.async: a stage's copy issued before the previous stage's math lands while it runs, so a
    loop that waits for the copy one trip later (pending 1) spends far fewer cycles waiting on memory."""
    text = """kernel: overlap
params: {trips: 8, pending: 0}
buffers:
  x: {bytes: 4194304}
  s: {space: shared, bytes: 16384}
launch: {grid: [1], block: [128], registers_per_thread: 64}
program:
  - loop: trips
    var: k
    body:
      - {op: LDGSTS.E.BYPASS.128, addr: "x + (k * 128 + tid) * 16"}
      - {op: LDGDEPBAR}
      - {op: DEPBAR.LE, pending: pending}
      - {op: BAR.SYNC}
      - {op: LDS.128, dst: v, addr: "s + tid * 16"}
      - {op: FFMA, dst: "a{rep}", src: ["a{rep}", v], repeat: 64}
"""
    path = _kernel(tmp_path, text)
    serial = run(path, "a100", sms=1).metrics
    overlapped = run(path, "a100", sms=1, params={"pending": 1}).metrics
    assert overlapped["gpu_sim_cycle"] < 0.85 * serial["gpu_sim_cycle"]
    key = "smsp__pcsamp_warps_issue_stalled_long_scoreboard"
    assert overlapped[key] < 0.5 * serial[key]


# --- TMA / bulk copies and mbarriers ------------------------------------------------------------------------

TMA = """kernel: tma
params: {tiles: 1, delay: 0}
buffers:
  A: {bytes: 1048576}
  s: {space: shared, bytes: 32768}
launch: {grid: [1], block: [64], registers_per_thread: 32}
program:
  - if: "warp == 0"
    then:
      - {op: SYNCS.EXCH.64, barrier: "full{rep}", arrivals: 1, repeat: 2, pred: "lane == 0"}
  - {op: BAR.SYNC}
  - if: "warp == 0"
    then:   # the producer: delay, then arrive.expect_tx and one TMA per tile
      - {op: FFMA, dst: d, src: [d], repeat: delay}
      - loop: tiles
        var: k
        body:
          - {op: SYNCS.ARRIVE.TRANS64.A1T0, barrier: "full{k % 2}", bytes: 8192, pred: "lane == 0"}
          - {op: UTMALDG.2D, addr: "A + k * 128", rows: 64, pitch: 4096, bytes: 8192, barrier: "full{k % 2}",
             pred: "lane == 0"}
    else:   # the consumer
      - loop: tiles
        var: k
        body:
          - {op: SYNCS.PHASECHK.TRANS64.TRYWAIT, barrier: "full{k % 2}"}
          - {op: LDS.128, dst: v, addr: "s + lane * 16"}
"""


def test_a_tma_copy_completes_on_its_mbarrier_and_the_waiter_goes_on_then(tmp_path):
    """UTMALDG moves its whole tile from L2 (rows of bytes / rows, pitch apart) without registers; the phase of
    the mbarrier it completes on is done once the expected bytes have landed, and the consumer's try-wait holds
    it until then (long_scoreboard)."""
    result, ev = _run(_kernel(tmp_path, TMA), "h100", sms=1)
    m = result.metrics
    assert m["gpusim__bulk_copies"] == 1 and m["gpusim__bulk_copy_bytes"] == 8192
    assert m["lts__t_sectors.sum"] == 8192 // 32  # 64 rows of 128 bytes, read from L2
    tile = dict(ev.ready[0])["UTMALDG.2D"]
    lds = ev.first(1, "LDS.128")
    assert tile <= lds <= tile + 2 and ev.reason_before(1, lds) == "long_scoreboard"


def test_a_waiter_that_arrives_first_is_parked_until_the_phase_completes(tmp_path):
    """A consumer that waits before the producer has even arrived is woken by the event that completes the
    phase (here the TMA, issued long after), not before."""
    result, ev = _run(_kernel(tmp_path, TMA), "h100", sms=1, params={"delay": 64})
    tma_issue = ev.first(0, "UTMALDG.2D")
    wait_issue = ev.first(1, "SYNCS.PHASECHK.TRANS64.TRYWAIT")
    assert wait_issue < tma_issue
    lds = ev.first(1, "LDS.128")
    assert lds >= dict(ev.ready[0])["UTMALDG.2D"]


def test_the_nth_wait_on_an_mbarrier_waits_for_its_nth_phase(tmp_path):
    """Two barriers used in turn over four tiles: the consumer's n-th wait on full{k % 2} waits for phase n,
    i.e. for tile k's own TMA, never an earlier tile's."""
    _, ev = _run(_kernel(tmp_path, TMA), "h100", sms=1, params={"tiles": 4})
    tiles = [ready for op, ready in ev.ready[0] if op == "UTMALDG.2D"]
    loads = [t for t, op in ev.issues[1] if op == "LDS.128"]
    assert len(tiles) == len(loads) == 4
    assert all(load >= tile for load, tile in zip(loads, tiles))


def test_a_block_that_can_never_finish_is_an_error_not_a_hang(tmp_path):
    """A phase that needs two arrivals when only one ever comes: once every live warp of the block waits, the
    run stops with one line naming the mbarrier, its phase and what it lacks."""
    text = TMA.replace('arrivals: 1', 'arrivals: 2')
    with pytest.raises(gpusim.GpusimError) as info:
        run(_kernel(tmp_path, text), "h100", sms=1)
    message = str(info.value)
    assert "\n" not in message and "can never finish" in message
    assert "mbarrier 'full0': phase 0 has 1 of 2 arrivals" in message


def test_an_mbarrier_used_before_its_init_is_an_error(tmp_path):
    text = TMA.replace('      - {op: SYNCS.EXCH.64, barrier: "full{rep}", arrivals: 1, repeat: 2, pred: "lane == 0"}\n',
                       '      - {op: NOP}\n')
    with pytest.raises(gpusim.GpusimError, match="before a SYNCS.EXCH initialised it"):
        run(_kernel(tmp_path, text), "h100", sms=1)


# --- warpgroup MMA: HGMMA, commit groups, WARPGROUP.DEPBAR --------------------------------------------------------

WGMMA = """kernel: wgmma
params: {pending: 0}
launch: {grid: [1], block: [128], registers_per_thread: 128}
program:
  - {op: WARPGROUP.ARRIVE}
  - {op: HGMMA.64X128X16.F32, dst: acc0, repeat: 3}
  - {op: HGMMA.64X128X16.F32.GSB0, dst: acc0}
  - {op: HGMMA.64X128X16.F32.GSB0, dst: acc1}
  - {op: FFMA, dst: x, src: [y, z]}
  - {op: WARPGROUP.DEPBAR.LE, pending: pending}
  - {op: NOP}
"""


def _hgmma(arch: str):
    return TimingTable(gpusim.load_arch(arch))(lookup("HGMMA.64X128X16.F32"))


def test_hgmma_chains_on_its_accumulators_and_the_warp_goes_on(tmp_path):
    """wgmma.mma_async: HGMMAs into the same accumulators issue one pipe interval apart (the tensor core orders
    them; no scoreboard wait for the previous result), and the FFMA after them issues before they are done."""
    _, ev = _run(_kernel(tmp_path, WGMMA), "h100", sms=1)
    timing = _hgmma("h100")
    issues = [t for t, op in ev.issues[0] if op.startswith("HGMMA")]
    assert [b - a for a, b in zip(issues, issues[1:])] == [timing.interval] * 4
    assert ev.first(0, "FFMA") <= issues[-1] + 2 < issues[-1] + timing.latency


@pytest.mark.parametrize("pending", [0, 1, 2])
def test_wait_group_waits_for_every_group_but_the_newest_n(tmp_path, pending):
    """WARPGROUP.DEPBAR.LE gsb0, N (wgmma.wait_group N): groups close at each .GSB0 HGMMA; the instruction after
    the wait issues once every group but the N newest is done (an MMA is done its interval plus the tensor
    latency after it issues), as the `wait` stall."""
    _, ev = _run(_kernel(tmp_path, WGMMA), "h100", sms=1, params={"pending": pending})
    latency = _hgmma("h100").latency
    issues = [t for t, op in ev.issues[0] if op.startswith("HGMMA")]
    groups = [issues[3] + latency, issues[4] + latency]  # each group ends with its .GSB0 HGMMA
    after = ev.first(0, "NOP")
    waited = groups[:2 - pending]
    if waited:
        assert after == max(waited) and ev.reason_before(0, after) == "wait"
    else:
        assert after < groups[0]


def test_hgmma_runs_on_whole_warpgroups(tmp_path):
    """wgmma is issued by the 4 warps of a warpgroup: a block of 2 warps cannot run it (a one-line error)."""
    with pytest.raises(gpusim.GpusimError, match="warpgroups of 4 warps; the launch has 2 warps per block"):
        run(_kernel(tmp_path, WGMMA.replace("block: [128]", "block: [64]")), "h100", sms=1)


# --- refused before their architecture, and checked when loaded ------------------------------------------------

@pytest.mark.parametrize("arch, refused", [("v100", True), ("t4", True), ("a100", False), ("h100", False),
                                           ("b200", False)])
def test_cp_async_needs_compute_capability_8(tmp_path, arch, refused):
    """LDGSTS exists from sm_80 on: a YAML workload that uses it before is refused in one line, not run."""
    path = _kernel(tmp_path, COPY)
    if refused:
        with pytest.raises(gpusim.GpusimError) as info:
            run(path, arch, sms=1)
        assert "LDGSTS.E.BYPASS.128 needs compute capability 8.0" in str(info.value) and f"{arch} is" in str(info.value)
    else:
        assert run(path, arch, sms=1).metrics["l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum"] == 1


@pytest.mark.parametrize("arch", ["a100", "l40s"])
def test_tma_and_mbarriers_need_compute_capability_9(tmp_path, arch):
    with pytest.raises(gpusim.GpusimError, match=r"needs compute capability 9\.0"):
        run(_kernel(tmp_path, TMA), arch, sms=1)


def test_gemm_multistage_on_volta_is_one_line_on_stderr():
    proc = run_cli("run", str(GEMM), "--arch", "v100", "--sms", "1", "--set", "M=128", "--set", "N=128",
                   "--set", "K=64")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: ")
    assert "LDGSTS.E.BYPASS.128 needs compute capability 8.0; v100 is 7.0" in lines[0]


# one warp and a 64 KiB global buffer x; the program's lines follow
ONE_WARP = ("kernel: k\nbuffers:\n  x: {bytes: 65536}\nlaunch: {grid: [1], block: [32], registers_per_thread: 32}\n"
            "program:\n")

LOAD_ERRORS = [
    ('{op: LDGSTS.E.128, dst: v, addr: "x + lane * 16"}', "writes no register: remove 'dst'"),
    ('{op: LDGSTS.E.128, pending: 1, addr: "x + lane * 16"}', "LDGSTS.E.128 takes no 'pending' (it applies to "
                                                            "DEPBAR and WARPGROUP.DEPBAR)"),
    ('{op: UTMALDG.2D, bytes: 512, addr: x}', "UTMALDG.2D needs 'barrier' (the mbarrier's name)"),
    ('{op: UTMALDG.2D, barrier: b, bytes: 512}', "needs 'addr' (its first byte)"),
    ('{op: SYNCS.EXCH.64, barrier: b}', "SYNCS.EXCH.64 needs 'arrivals' (arrivals per phase)"),
    ('{op: SYNCS.FOO, barrier: b}', "SYNCS.FOO: expected SYNCS.EXCH (mbarrier init)"),
    ('{op: WARPGROUP.FOO}', "WARPGROUP.FOO: expected WARPGROUP.ARRIVE (wgmma.fence) or WARPGROUP.DEPBAR"),
    ('{op: FADD, dst: v, barrier: b}', "FADD takes no 'barrier'"),
    ('{op: SYNCS.PHASECHK.TRANS64.TRYWAIT, barrier: "b.c"}', "is not an mbarrier name"),
]


@pytest.mark.parametrize("line, message", LOAD_ERRORS, ids=[m[:30] for _, m in LOAD_ERRORS])
def test_asynchronous_operands_are_checked_when_the_file_loads(tmp_path, line, message):
    """Each asynchronous opcode takes the keys its kind needs, and only those: a mistake is one line with file:line."""
    text = f"{ONE_WARP}  - {line}\n"
    with pytest.raises(gpusim.GpusimError) as info:
        load_workload(_kernel(tmp_path, text))
    assert message in str(info.value) and "k.yaml:6:" in str(info.value)


WALK_ERRORS = [
    ("bytes: 1000, rows: 3", "bytes 1000 is not a whole number of 3 rows"),
    ("bytes: 1024, rows: 4, pitch: 100", "rows (256 bytes) and pitch (100) must be multiples of 16 bytes"),
    ("bytes: 65536, rows: 2, pitch: 65536", "is outside every global buffer"),
    ("bytes: \"lane * 16 + 16\"", "must be the same for every lane"),
]


@pytest.mark.parametrize("operands, message", WALK_ERRORS, ids=[m[:30] for _, m in WALK_ERRORS])
def test_a_bulk_copys_tile_is_checked_as_the_warp_runs(tmp_path, operands, message):
    """A tile is whole rows of 16-byte multiples, inside a global buffer, the same for every lane: else one line."""
    text = f"{ONE_WARP}  - {{op: UBLKCP.S.G, barrier: b, addr: x, pred: \"lane == 0\", {operands}}}\n"
    with pytest.raises(gpusim.GpusimError, match=re.escape(message)):
        run(_kernel(tmp_path, text), "h100", sms=1)


# --- the multistage GEMM -------------------------------------------------------------------------------------

SMALL = {"M": 128, "N": 256, "K": 512}


def _stages(arch, mshrs: int | None = None) -> list[dict]:
    spec = gpusim.load_arch(arch)
    if mshrs is not None:
        spec = attrs.evolve(spec, memory=attrs.evolve(spec.memory, l1=attrs.evolve(spec.memory.l1, mshrs=mshrs)))
    return [run(GEMM, spec, sms=2, params={**SMALL, "STAGES": s}).metrics for s in (1, 2, 3, 4)]


@pytest.mark.parametrize("arch", ["a100", "h100"])
def test_more_stages_hide_more_latency(arch):
    """gemm_multistage with STAGES = 1 .. 4: each stage puts one more tile in flight behind the math, so the
    latency left exposed (long_scoreboard per issue) falls, and with miss entries (L1 MSHRs) for every copy in
    flight the cycles never rise from STAGES = 2 to 3 to 4, until the pipe or the memory bandwidth is the limit;
    pipelining at all (STAGES = 2) saves more than 10%. Every run respects the physical limits."""
    runs = _stages(arch, mshrs=2048)
    cycles = [m["gpu_sim_cycle"] for m in runs]
    exposed = [m["smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"] for m in runs]
    assert cycles[1] < 0.9 * cycles[0]
    assert cycles[3] <= cycles[2] <= cycles[1]
    assert exposed[3] <= exposed[2] <= exposed[1] < exposed[0]
    spec = gpusim.load_arch(arch)
    assert all(not violations(m, spec) for m in runs)


def test_with_the_arch_own_miss_entries_pipelining_still_wins():
    """On the stock a100 (256 L1 miss entries) a pipeline still beats none by far, and its exposed latency falls
    with each stage; a stage beyond what the miss entries hold only queues copies (lg_throttle), so the cycles
    past STAGES = 2 are not checked here."""
    runs = _stages("a100")
    cycles = [m["gpu_sim_cycle"] for m in runs]
    exposed = [m["smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"] for m in runs]
    assert max(cycles[1:]) < 0.75 * cycles[0]
    assert exposed[3] <= exposed[2] <= exposed[1] < exposed[0]


def test_gemm_multistage_moves_what_gemm_tile128_moves():
    """The same GEMM: cp.async copies the tiles gemm_tile128 loads (one 16-byte request per tile chunk) and the
    tensor work is 2 x M x N x K either way."""
    params = {"M": 128, "N": 128, "K": 128}
    multi = run(GEMM, "a100", sms=1, params=params).metrics
    tile = run(ROOT / "workloads" / "gemm_tile128_sync.yaml", "a100", sms=1, params=params).metrics
    assert multi["gpusim__tensor_flop.sum"] == tile["gpusim__tensor_flop.sum"] == 2 * 128 ** 3
    assert multi["l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum"] == tile[
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"]
