"""Thread block clusters working together: distributed shared memory over the SM-to-SM network
(LDS / STS / ATOMS with `peer`), remote mbarrier arrivals, TMA multicast and cluster barriers (UCGABAR_ARV /
UCGABAR_WAIT), and the steps an SM is owed when an event on another SM wakes one of its warps. Each test states its
rule; the kernels are small YAML programs written here."""

from __future__ import annotations

from pathlib import Path

import pytest

import gpusim
from gpusim.api import run
from gpusim.stats.observer import Observer
from gpusim.errors import GpusimError
from gpusim.stats.invariants import violations
from gpusim.workload import kernel_mix, load_workload

from tests.conftest import run_cli

H100 = gpusim.load_arch("h100")
NET = H100.memory.sm_to_sm


def _kernel(tmp_path: Path, text: str, name: str = "k.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


class Issues(Observer):
    """Each warp's issues: (cycle, opcode, pc), by global warp id; and every stall interval's reason."""

    def __init__(self):
        self.issues: dict[int, list[tuple[int, str, int]]] = {}
        self.reasons: dict[str, int] = {}

    def issued(self, sm, sp, warp, inst, now):
        self.issues.setdefault(warp.gid, []).append((now, inst.info.opcode, inst.pc))

    def state(self, sp, warp, reason, start, end):
        self.reasons[reason] = self.reasons.get(reason, 0) + end - start

    def at(self, gid: int, opcode: str, nth: int = 0) -> int:
        return [t for t, op, _pc in self.issues[gid] if op == opcode][nth]


def _run(path, arch="h100", **kw):
    events = Issues()
    result = run(path, arch, observer=events, **kw)
    broken = violations(result.metrics, gpusim.load_arch(arch))
    assert not broken, broken
    return result.metrics, events


# --- distributed shared memory -------------------------------------------------------------------------------
RING = """kernel: ring
params: {iters: 16, C: 2}
buffers:
  s: {space: shared, bytes: 32768}
launch: {grid: [2], block: [256], registers_per_thread: 32, cluster: [C]}
program:
  - {op: UCGABAR_ARV}
  - {op: UCGABAR_WAIT}
  - loop: iters
    body:
      - {op: LDS.128, dst: "v{rep}", repeat: 4, addr: "s + ((tid + 256 * rep) * 16) % 32768", peer: "(block.x + 1) % C"}
  - {op: UCGABAR_ARV}
  - {op: UCGABAR_WAIT}
"""


def test_a_ring_copy_moves_at_the_sm_to_sm_bandwidth(tmp_path):
    """Two blocks of a cluster each read the other's shared memory (Luo et al.'s ring copy): every LDS.128 of a full
    warp moves 16 sectors (512 bytes) over the network, counted as dshared loads and not as shared-memory requests;
    each SM receives at most memory.sm_to_sm.sm_bytes_per_clock (16.3 on H100), and the ring keeps the network busy
    (at least 85% of it)."""
    m, _ = _run(_kernel(tmp_path, RING), sms=2)
    requests = 2 * 8 * 16 * 4
    assert m["l1tex__t_requests_pipe_lsu_mem_dshared_op_ld.sum"] == requests
    assert m["l1tex__t_sectors_pipe_lsu_mem_dshared_op_ld.sum"] == requests * 16
    assert m["l1tex__t_bytes_pipe_lsu_mem_dshared.sum"] == requests * 512
    assert m["l1tex__t_requests_pipe_lsu_mem_dshared_op_st.sum"] == 0
    per_sm = m["l1tex__t_bytes_pipe_lsu_mem_dshared.sum"] / m["gpu_sim_cycle"] / 2
    assert 0.85 * NET.sm_bytes_per_clock <= per_sm <= NET.sm_bytes_per_clock


CHAIN = """kernel: chain
params: {hops: 32, own: 0}
buffers:
  s: {space: shared, bytes: 4096}
launch: {grid: [2], block: [32], registers_per_thread: 32, cluster: [2]}
program:
  - {op: UCGABAR_ARV}
  - {op: UCGABAR_WAIT}
  - loop: hops
    body:
      - {op: LDS, dst: p, src: [p], addr: "s + lane * 4", peer: "block.x % 2 if own else (block.x + 1) % 2"}
  - {op: UCGABAR_ARV}
  - {op: UCGABAR_WAIT}
"""


def test_a_dependent_chain_of_remote_loads_pays_the_network_latency_each_hop(tmp_path):
    """Each load of a dependent chain on the peer block's shared memory waits its data: the SM-to-SM latency (180
    cycles on H100) plus its sectors' crossing, about 8 cycles more; a chain on the block's own shared memory
    through the same `peer` key (its own rank) is an ordinary shared-memory load (29 cycles) and no dshared
    traffic."""
    k = _kernel(tmp_path, CHAIN)
    remote, events = _run(k, sms=2, params={"own": 0})
    hops = [events.at(0, "LDS", i) for i in range(32)]
    per_hop = (hops[-1] - hops[0]) / 31
    assert NET.latency <= per_hop <= NET.latency + 12
    local, events = _run(k, sms=2, params={"own": 1})
    hops = [events.at(0, "LDS", i) for i in range(32)]
    assert (hops[-1] - hops[0]) / 31 <= H100.memory.l1.shared_latency + 4
    assert local["l1tex__t_requests_pipe_lsu_mem_dshared_op_ld.sum"] == 0
    assert local["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"] > 0


STORE_ATOM = """kernel: store_atom
buffers:
  s: {space: shared, bytes: 4096}
launch: {grid: [2], block: [64], registers_per_thread: 32, cluster: [2]}
program:
  - {op: UCGABAR_ARV}
  - {op: UCGABAR_WAIT}
  - {op: STS, src: [v], addr: "s + tid * 4", peer: "(block.x + 1) % 2"}
  - {op: ATOMS.ADD, dst: w, addr: "s", peer: 0}
  - {op: UCGABAR_ARV}
  - {op: UCGABAR_WAIT}
"""


def test_remote_stores_and_atomics_are_counted_apart(tmp_path):
    """A cluster of 2: each warp stores 32 words (4 sectors) into the other block and adds to one word of block 0
    (one sector; block 0's own warps' atomics stay local): dshared stores and atomics counted as such."""
    m, _ = _run(_kernel(tmp_path, STORE_ATOM), sms=2)
    assert m["l1tex__t_requests_pipe_lsu_mem_dshared_op_st.sum"] == 4
    assert m["l1tex__t_sectors_pipe_lsu_mem_dshared_op_st.sum"] == 4 * 4
    assert m["l1tex__t_requests_pipe_lsu_mem_dshared_op_atom.sum"] == 2
    assert m["l1tex__t_sectors_pipe_lsu_mem_dshared_op_atom.sum"] == 2


# --- one-line errors -------------------------------------------------------------------------------------------
NO_CLUSTER = """kernel: nocluster
buffers:
  s: {space: shared, bytes: 4096}
launch: {grid: [2], block: [32], registers_per_thread: 32}
program:
  - {op: LDS, dst: v, addr: "s + lane * 4", peer: 1}
"""


def test_distributed_shared_memory_without_clusters_is_a_one_line_error(tmp_path):
    """A `peer` on a launch without clusters: exit status 1 and one line naming the opcode and the fix."""
    proc = run_cli("run", str(_kernel(tmp_path, NO_CLUSTER)), "--arch", "h100", "--sms", "1")
    assert proc.returncode == 1
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert "LDS with peer 1" in proc.stderr and "no cluster" in proc.stderr and "launch.cluster" in proc.stderr


@pytest.mark.parametrize("program, expected", [
    ('  - {op: UCGABAR_ARV}\n  - {op: UCGABAR_WAIT}\n  - {op: LDS, dst: v, addr: "s + lane * 4", peer: 2}\n',
     "names the block of rank 2; the cluster has 2 blocks"),
    ('  - {exit: "block.x == 1"}\n  - {op: FFMA, dst: r, src: [r], repeat: 64}\n'
     '  - {op: LDS, dst: v, addr: "s + lane * 4", peer: 1}\n',
     "reaches block 1 of its cluster after it exited"),
    ('  - {op: UCGABAR_WAIT}\n', r"UCGABAR_WAIT in block \d \(warp 0\) before its UCGABAR_ARV"),
])
def test_cluster_misuse_is_a_one_line_error(tmp_path, program, expected):
    """A rank outside the cluster, an access to a block that has exited, a wait before an arrival."""
    text = ("kernel: misuse\nbuffers:\n  s: {space: shared, bytes: 4096}\n"
            "launch: {grid: [2], block: [32], registers_per_thread: 32, cluster: [2]}\nprogram:\n" + program)
    with pytest.raises(GpusimError, match=expected):
        run(_kernel(tmp_path, text), "h100", sms=2)


def test_peer_outside_any_cluster_is_refused_when_the_file_loads(tmp_path):
    """`peer` is a rank from 0 to 15 (a cluster has at most 16 blocks): a larger constant is refused at load, one
    line with file and line; `peer` on an opcode other than LDS / STS / ATOMS / SYNCS.ARRIVE names where it applies."""
    text = NO_CLUSTER.replace("peer: 1", "peer: 16")
    with pytest.raises(GpusimError, match=r"k.yaml:6: .*expected at most 15"):
        load_workload(_kernel(tmp_path, text))
    text = NO_CLUSTER.replace("LDS, dst: v,", "LDG.E, dst: v,")
    with pytest.raises(GpusimError, match="LDG.E takes no 'peer' \\(it applies to LDS, STS, ATOMS and SYNCS.ARRIVE\\)"):
        load_workload(_kernel(tmp_path, text))


# --- cluster barriers ------------------------------------------------------------------------------------------
BARRIER = """kernel: cluster_barrier
params: {work: 40}
launch: {grid: [4], block: [128], registers_per_thread: 32, cluster: [2]}
program:
  - {op: FFMA, dst: r, src: [r], repeat: "work * (1 + block.x)"}
  - {op: UCGABAR_ARV}
  - {op: UCGABAR_WAIT}
  - {op: NOP}
"""


def test_a_cluster_barrier_opens_for_every_block_a_network_latency_after_the_last_arrival(tmp_path):
    """Blocks 0 and 1 (one cluster) arrive after 40 and 80 dependent FFMAs, blocks 2 and 3 (another) after 120 and
    160: no warp of a cluster goes past the wait until the last warp of its last block has arrived, and then all of
    them do, one SM-to-SM latency later (within the cycles their sub-partitions take to issue them); the waiting is
    Nsight's `barrier` stall."""
    _m, events = _run(_kernel(tmp_path, BARRIER), sms=4)
    for cluster in ((0, 1), (2, 3)):
        gids = [block * 4 + w for block in cluster for w in range(4)]
        last = max(events.at(gid, "UCGABAR_ARV") for gid in gids)
        after = [events.at(gid, "NOP") for gid in gids]
        assert min(after) >= last + NET.latency
        assert max(after) - min(after) <= 2
    assert events.reasons["barrier"] > 2 * 4 * 40 * 4


def test_warps_and_blocks_that_exit_count_as_arrived(tmp_path):
    """Half the warps of every block, and then a whole block, leave before the barrier: the others still pass it
    (an exited warp counts as arrived at every later phase), and every block retires."""
    text = BARRIER.replace("program:\n", 'program:\n  - {exit: "warp % 2 == 1 or block.x == 3"}\n')
    m, events = _run(_kernel(tmp_path, text), sms=4)
    mix = kernel_mix(load_workload(_kernel(tmp_path, text, "again.yaml")))
    assert m["smsp__inst_executed.sum"] == mix.total_warp_insts
    assert sum(1 for gid in events.issues if any(op == "NOP" for _t, op, _pc in events.issues[gid])) == 3 * 2


def test_a_cluster_barrier_on_a_launch_without_clusters_spans_the_block(tmp_path):
    """Without `cluster` each block is a cluster of one (as in CUDA): its barrier waits for its own warps only and
    opens the cycle after the last arrival."""
    text = BARRIER.replace(", cluster: [2]", "").replace("block.x", "warp")
    _m, events = _run(_kernel(tmp_path, text), sms=1)
    for block in range(4):
        arrivals = {gid: events.at(gid, "UCGABAR_ARV") for gid in range(block * 4, block * 4 + 4)}
        last = max(arrivals.values())
        waited = [gid for gid, t in arrivals.items() if t < last]
        assert len(waited) == 3 and all(last < events.at(gid, "NOP") <= last + 4 for gid in waited)


STUCK = """kernel: stuck
launch: {grid: [2], block: [64], registers_per_thread: 32, cluster: [2]}
program:
  - if: "block.x == 1"
    then:
      - {op: SYNCS.EXCH.64, barrier: never, arrivals: 1, pred: "warp == 0 and lane == 0"}
      - {op: BAR.SYNC}
      - {op: SYNCS.PHASECHK.TRANS64.TRYWAIT, barrier: never}
  - {op: UCGABAR_ARV}
  - {op: UCGABAR_WAIT}
"""


def test_a_cluster_that_can_never_finish_is_an_error_not_a_hang(tmp_path):
    """Block 0 waits at the cluster barrier for block 1, whose warps wait on an mbarrier nobody arrives on: every
    live warp of the cluster waits for another: a one-line error naming the cluster."""
    with pytest.raises(GpusimError, match=r"the cluster of blocks 0, 1 can never finish: .*cluster barrier"):
        run(_kernel(tmp_path, STUCK), "h100", sms=2)


# --- across blocks: remote mbarrier arrivals and TMA multicast, woken SMs --------------------------------------
REMOTE_ARRIVE = """kernel: remote_arrive
params: {work: 200}
launch: {grid: [2], block: [32], registers_per_thread: 32, cluster: [2]}
program:
  - {op: SYNCS.EXCH.64, barrier: ready, arrivals: 1, pred: "lane == 0"}
  - {op: UCGABAR_ARV}
  - {op: UCGABAR_WAIT}
  - if: "block.x == 0"
    then:
      - {op: SYNCS.PHASECHK.TRANS64.TRYWAIT, barrier: ready}
      - {op: NOP}
    else:
      - {op: FFMA, dst: r, src: [r], repeat: work}
      - {op: SYNCS.ARRIVE.A1T0, barrier: ready, peer: 0, pred: "lane == 0"}
  - {op: UCGABAR_ARV}
  - {op: UCGABAR_WAIT}
"""


def test_a_remote_arrival_wakes_a_warp_of_an_idle_sm_after_the_network_latency(tmp_path):
    """Block 0's only warp waits on its mbarrier, which block 1 (on the other SM) arrives on after 200 FFMAs: block
    0's SM has nothing else to do, yet its warp goes on one SM-to-SM latency after the arrival (the SM is stepped
    when the event on the other SM wakes it), not at the end of the run."""
    _m, events = _run(_kernel(tmp_path, REMOTE_ARRIVE), sms=2)
    arrival = events.at(1, "SYNCS.ARRIVE.A1T0")
    assert arrival + NET.latency <= events.at(0, "NOP") <= arrival + NET.latency + 4


MULTICAST = """kernel: multicast
params: {multicast: 1}
buffers:
  A: {bytes: 1048576}
  tile: {space: shared, bytes: 32768}
launch: {grid: [2], block: [32], registers_per_thread: 32, cluster: [2]}
program:
  - {op: SYNCS.EXCH.64, barrier: full, arrivals: 1, pred: "lane == 0"}
  - {op: UCGABAR_ARV}
  - {op: UCGABAR_WAIT}
  - {op: SYNCS.ARRIVE.TRANS64.A1T0, barrier: full, bytes: 32768, pred: "lane == 0"}
  - if: multicast
    then:
      - {op: UTMALDG.2D, addr: "A + (block.x % 2) * 16384", bytes: 16384, rows: 64, barrier: full, multicast: 3,
         pred: "lane == 0"}
    else:
      - {op: UTMALDG.2D, addr: "A", bytes: 32768, rows: 128, barrier: full, pred: "lane == 0"}
  - {op: SYNCS.PHASECHK.TRANS64.TRYWAIT, barrier: full}
  - {op: UCGABAR_ARV}
  - {op: UCGABAR_WAIT}
"""


def test_multicast_reads_l2_once_for_both_blocks(tmp_path):
    """Two blocks need the same 32 KiB tile: with multicast each copies half of it into both blocks' shared memory
    (on both blocks' mbarriers), so L2 serves 32 KiB instead of 64 KiB (counted once in the SMs' bytes to L2); the
    32 KiB delivered beyond the L2 reads are counted as multicast bytes."""
    k = _kernel(tmp_path, MULTICAST)
    shared, _ = _run(k, sms=2, params={"multicast": 1})
    alone, _ = _run(k, sms=2, params={"multicast": 0})
    assert shared["lts__t_sectors.sum"] * 32 == 32768 == alone["lts__t_sectors.sum"] * 32 // 2
    assert shared["gpusim__bulk_copy_multicast_bytes"] == 32768 and alone["gpusim__bulk_copy_multicast_bytes"] == 0
    assert shared["gpusim__bulk_copy_bytes"] == shared["gpusim__l1_to_l2_bytes"] == 32768


UNEVEN = """kernel: uneven
buffers:
  g: {bytes: 8 * 128 * 4}
launch: {grid: [8], block: [128], registers_per_thread: 32, shared_memory_bytes: 200000, cluster: [2]}
program:
  - loop: "4 + (block.x % 2) * 20"
    body:
      - {op: LDG.E, dst: r1, src: [r0], addr: "g + gtid * 4"}
      - {op: FFMA, dst: r2, src: [r1, r2]}
"""


def test_a_cluster_placed_on_an_idle_sm_starts(tmp_path):
    """One block per SM, clusters of 2 on a GPC of 2 SMs, blocks of unequal length: the next cluster is placed
    when the slower block retires, on both SMs, one of which has been idle since its block retired; both of its
    blocks run (every warp-instruction of the grid is issued)."""
    path = _kernel(tmp_path, UNEVEN)
    m, _ = _run(path, sms=2)
    assert m["smsp__inst_executed.sum"] == kernel_mix(load_workload(path)).total_warp_insts


def test_cluster_runs_are_deterministic(tmp_path):
    """Same inputs, same record: a run with clusters, distributed shared memory and multicast, twice."""
    k = _kernel(tmp_path, RING)
    assert run(k, "h100", sms=2).metrics == run(k, "h100", sms=2).metrics
