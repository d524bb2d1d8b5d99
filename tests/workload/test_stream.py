"""Per-warp instruction streams: SIMT masks, addresses, laziness, and agreement with the counted mix."""

import itertools
import tracemalloc
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpusim.workload import kernel_mix, load_workload, warp_stream
from gpusim.workload.stream import BlockStreams, mask_to_bool

from tests.conftest import ROOT


def _kernel(tmp_path, program: str, block: int = 32, grid: int = 1, extra: str = ""):
    path = tmp_path / "k.yaml"
    path.write_text(f"kernel: k\n{extra}launch: {{grid: [{grid}], block: [{block}], registers_per_thread: 32}}\n"
                    f"program:\n{program}")
    return load_workload(path)


def _trace(kernel, block=0, warp=0):
    return [(i.op, i.mask) for i in warp_stream(kernel, block, warp)]


@pytest.mark.fast
def test_if_else_runs_both_sides_under_complementary_masks_then_reconverges(tmp_path):
    """As Volta+ SASS: BSSY and BRA under the full mask, the two sides, BSYNC where the warp reconverges."""
    k = _kernel(tmp_path, '  - if: "lane % 2 == 0"\n    then: [{op: FMUL, dst: v}]\n    else: [{op: FADD, dst: v}]\n'
                          "  - {op: FFMA, dst: v}\n")
    assert _trace(k) == [("BSSY", 0xFFFFFFFF), ("BRA", 0xFFFFFFFF), ("FMUL", 0x55555555), ("FADD", 0xAAAAAAAA),
                         ("BSYNC", 0xFFFFFFFF), ("FFMA", 0xFFFFFFFF), ("EXIT", 0xFFFFFFFF)]


@pytest.mark.fast
def test_nested_if_inside_per_lane_loop(tmp_path):
    """loop count lane % 4: trip t runs lanes with lane % 4 > t; an inner if keeps only lanes < 16."""
    k = _kernel(tmp_path, '  - loop: "lane % 4"\n    body:\n      - {op: FADD, dst: v}\n'
                          '      - if: "lane < 16"\n        then: [{op: FMUL, dst: v}]\n')
    assert _trace(k) == [
        ("FADD", 0xEEEEEEEE), ("BSSY", 0xEEEEEEEE), ("BRA", 0xEEEEEEEE), ("FMUL", 0x0000EEEE), ("BSYNC", 0xEEEEEEEE),
        ("FADD", 0xCCCCCCCC), ("BSSY", 0xCCCCCCCC), ("BRA", 0xCCCCCCCC), ("FMUL", 0x0000CCCC), ("BSYNC", 0xCCCCCCCC),
        ("FADD", 0x88888888), ("BSSY", 0x88888888), ("BRA", 0x88888888), ("FMUL", 0x00008888), ("BSYNC", 0x88888888),
        ("EXIT", 0xFFFFFFFF)]


@pytest.mark.fast
def test_uniform_if_does_not_diverge(tmp_path):
    k = _kernel(tmp_path, '  - if: "warp == 0"\n    then: [{op: FMUL, dst: v}]\n    else: [{op: FADD, dst: v}]\n',
                block=64)
    sync = [("BSSY", 0xFFFFFFFF), ("BRA", 0xFFFFFFFF)]  # the SASS is the same whether or not the warp diverges
    assert _trace(k, 0, 0) == sync + [("FMUL", 0xFFFFFFFF), ("BSYNC", 0xFFFFFFFF), ("EXIT", 0xFFFFFFFF)]
    assert _trace(k, 0, 1) == sync + [("FADD", 0xFFFFFFFF), ("BSYNC", 0xFFFFFFFF), ("EXIT", 0xFFFFFFFF)]


@pytest.mark.fast
def test_early_exit_and_predication(tmp_path):
    k = _kernel(tmp_path, '  - {exit: "lane >= 8"}\n  - {op: FADD, dst: v}\n  - {op: FMUL, dst: v, pred: "lane < 4"}\n'
                          '  - if: "lane < 2"\n    then: [{exit: true}]\n  - {op: FFMA, dst: v}\n')
    assert _trace(k) == [("EXIT", 0xFFFFFF00), ("FADD", 0xFF), ("FMUL", 0x0F), ("BSSY", 0xFF), ("BRA", 0xFF),
                         ("EXIT", 0x03), ("BSYNC", 0xFC), ("FFMA", 0xFC), ("EXIT", 0xFC)]  # exited lanes skip BSYNC


@pytest.mark.fast
def test_partial_last_warp_and_all_lanes_exited(tmp_path):
    k = _kernel(tmp_path, "  - {exit: true}\n  - {op: FADD, dst: v}\n", block=40)
    assert _trace(k, 0, 1) == [("EXIT", 0xFF)]


@pytest.mark.fast
def test_addresses_match_hand_computed_lanes():
    """gemm A-tile load of block (x=1, y=2), warp 3, lane 5, repeat 1, K step 0 (M = N = K = 1024):
    tid = 3*32 + 5 = 101, chunk = 101 + 256 = 357, row = 357 // 4 = 89, 16-byte column = 357 % 4 = 1:
    A + ((2*128 + 89) * 1024 + 0*32 + 1*8) * 2."""
    k = load_workload(ROOT / "workloads/gemm_tile128_sync.yaml", {"M": 1024, "N": 1024, "K": 1024})
    block = 2 * 8 + 1
    first_ldg = [i for i in itertools.islice(warp_stream(k, block, 3), 10) if i.op == "LDG.E.128"]
    base = k.buffers["A"].base
    assert first_ldg[1].addrs[5] == base + ((2 * 128 + 89) * 1024 + 8) * 2
    assert first_ldg[1].pc == first_ldg[0].pc + 16 and first_ldg[1].dst == ("ga1",)
    assert first_ldg[1].width == 16 and first_ldg[1].space == "global"


@pytest.mark.fast
def test_swizzled_shared_tiles_are_a_permutation():
    """The gemm STS.128 swizzle writes each 16-byte chunk of a stage exactly once across the block."""
    k = load_workload(ROOT / "workloads/gemm_tile128_sync.yaml", {"M": 128, "N": 128, "K": 32})
    seen = Counter()
    for w in range(8):
        for inst in warp_stream(k, 0, w):
            if inst.op == "STS.128":
                seen.update(int(a) for a in inst.addrs)
    stage = 8192
    assert sorted(seen) == list(range(0, stage, 16)) + list(range(k.buffers["smem_b"].base,
                                                                    k.buffers["smem_b"].base + stage, 16))
    assert set(seen.values()) == {1}


@pytest.mark.fast
def test_register_templates_resolve(tmp_path):
    k = _kernel(tmp_path, '  - {op: HMMA.16816.F32, dst: "c{rep}", src: ["a{rep / 2}", "c{rep}"], repeat: 3}\n')
    insts = list(warp_stream(k, 0, 0))[:3]
    assert [(i.dst, i.src) for i in insts] == [(("c0",), ("a0", "c0")), (("c1",), ("a0", "c1")),
                                               (("c2",), ("a1", "c2"))]


def test_streams_are_lazy_and_memory_stays_flat(tmp_path):
    """50,000 warp-instructions (memory ones included) stream through without growing memory (held at once,
    they would take some 15 MB)."""
    k = _kernel(tmp_path, '  - loop: 12500\n    body:\n      - {op: LDG.E, dst: v, addr: "x + ((i * 32 + lane) % 4096) * 4"}\n'
                          '      - {op: FFMA, dst: "f{i % 8}", src: [v]}\n'
                          '  - {op: STS, src: [v], addr: "s + lane * 4", repeat: 25000}\n',
                extra="buffers: {x: {bytes: 16384}, s: {space: shared, bytes: 128}}\n")
    stream = warp_stream(k, 0, 0)
    for _ in itertools.islice(stream, 1000):  # warm caches before measuring
        pass
    tracemalloc.start()
    n = 1000 + sum(1 for _ in stream)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert n == 50_001 and peak < 2_000_000, peak


SMALL = {
    "gemm_tile128": {"M": 256, "N": 256, "K": 128}, "gemm_tile128_sync": {"M": 256, "N": 256, "K": 128}, "vecadd": {"n": 3000}, "reduction": {"n": 2048},
    "attention_naive": {"seq": 128, "heads": 1}, "flash_attention": {"seq": 128, "heads": 1},
    "flash_attention_simple": {"seq": 128, "heads": 1},
    "kv_decode": {"batch": 1, "heads_kv": 2, "seq": 64, "splits": 2},
    "kv_decode_naive": {"batch": 1, "heads_kv": 2, "seq": 64}, "microbench/fma_chain": {"n": 100},
    "microbench/fma_peak": {"blocks": 2}, "microbench/hmma_peak": {"blocks": 2}, "microbench/divergence": {"n": 1000},
    "microbench/smem_stride": {"stride": 3}, "microbench/pointer_chase": {"hops": 300},
    "microbench/stream": {"n": 65536, "blocks": 16}, "microbench/coalescing": {"pattern": 2, "blocks": 4},
    "microbench/latency_hiding": {"blocks": 2}, "microbench/occupancy_sweep": {"blocks": 4},
}


def _stream_mix(kernel):
    warp_insts, thread_insts, byte_counts = Counter(), Counter(), Counter()
    for block in range(kernel.launch.nblocks):
        for w in range(kernel.launch.warps_per_block):
            for inst in warp_stream(kernel, block, w):
                warp_insts[inst.pipeline] += 1
                thread_insts[inst.pipeline] += inst.active_lanes
                if inst.addrs is not None:
                    kind = "atomic" if inst.info.is_atomic else "store" if inst.is_store else "load"
                    byte_counts[(inst.space, kind)] += inst.active_lanes * inst.width
    return warp_insts, thread_insts, byte_counts


@pytest.mark.fast
@pytest.mark.parametrize("name", sorted(SMALL))
def test_counted_mix_equals_generated_streams(name):
    kernel = load_workload(ROOT / f"workloads/{name}.yaml", SMALL[name])
    mix = kernel_mix(kernel)
    assert _stream_mix(kernel) == (+mix.warp_insts, +mix.thread_insts, +mix.bytes)


# --- random well-formed programs --------------------------------------------------------------------------

CONDS = ["lane < 16", "lane % 3 == 0", "warp == 1", "tid >= 40", "block.x == 1", "lane >= 8 and lane < 24",
         "rand(3, 2, i) == 0", "i % 2 == 0"]
COUNTS = ["2", "lane % 3", "warp + 1", "(lane / 8) % 3", "0"]
OPS = ["FFMA", "IADD3", "MUFU.EX2", "LDS", "STG.E", "BAR.SYNC"]


def _instr(draw):
    op = draw(st.sampled_from(OPS))
    extra = ""
    if op in ("LDS",):
        extra = ', addr: "s + lane * 4"'
    elif op == "STG.E":
        extra = ', addr: "g + gtid * 4"'
    if draw(st.booleans()):
        extra += f', pred: "{draw(st.sampled_from(CONDS[:6]))}"'
    if draw(st.booleans()):
        extra += f", repeat: {draw(st.integers(0, 3))}"
    return f"{{op: {op}, dst: r1{extra}}}"


@st.composite
def programs(draw, depth=0):
    lines = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["op", "op", "loop", "if", "exit"] if depth < 2 else ["op", "exit"]))
        if kind == "op":
            lines.append(f"- {_instr(draw)}")
        elif kind == "exit":
            lines.append(f'- {{exit: "{draw(st.sampled_from(CONDS[:6]))}"}}')
        elif kind == "loop":
            body = draw(programs(depth + 1))
            lines.append(f'- loop: "{draw(st.sampled_from(COUNTS))}"\n  body:\n' + _indent(body, 4))
        else:
            then = draw(programs(depth + 1))
            text = f'- if: "{draw(st.sampled_from(CONDS))}"\n  then:\n' + _indent(then, 4)
            if draw(st.booleans()):
                text += "  else:\n" + _indent(draw(programs(depth + 1)), 4)
            lines.append(text)
    return "\n".join(lines)


def _indent(text, n):
    return "".join(" " * n + line + "\n" for line in text.splitlines())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(programs(), st.integers(1, 96), st.integers(1, 3))
def test_random_programs_stream_what_the_mix_predicts(tmp_path, program, threads, blocks):
    if "i %" in program or "rand(3, 2, i)" in program:
        program = f'- loop: 2\n  body:\n{_indent(program, 4)}'
    kernel = _kernel(tmp_path, _indent(program, 2), block=threads, grid=blocks,
                     extra="buffers: {g: {bytes: 4096}, s: {space: shared, bytes: 4096}}\n")
    mix = kernel_mix(kernel)
    assert _stream_mix(kernel) == (+mix.warp_insts, +mix.thread_insts, +mix.bytes)


def _inst_key(inst):
    addrs = None if inst.addrs is None else inst.addrs[mask_to_bool(inst.mask)].tolist()
    warp = None if addrs is None else inst.warp  # address-free instructions may be shared by a block's warps
    return (inst.op, warp, inst.block, inst.pc, inst.mask, tuple(inst.dst), tuple(inst.src), addrs)


@pytest.mark.fast
@pytest.mark.parametrize("name", sorted(SMALL))
def test_shared_block_walker_yields_what_each_warp_walks_alone(name):
    """BlockStreams walks a block once for all its warps where their control flow cannot differ; every
    warp must still get exactly the instructions (masks, registers, active-lane addresses) it would alone."""
    kernel = load_workload(ROOT / f"workloads/{name}.yaml", SMALL[name])
    streams = BlockStreams(kernel)
    for block in range(min(3, kernel.launch.nblocks)):
        shared = [streams(block, w) for w in range(kernel.launch.warps_per_block)]
        for w, stream in enumerate(shared):
            alone = [_inst_key(i) for i in warp_stream(kernel, block, w)]
            insts = list(stream)
            assert [_inst_key(i) for i in insts] == alone, (name, block, w)
            for inst in insts:  # the address keys the walker precomputes (or caches across blocks) for the memory model
                if inst.addrs is not None:
                    base = int(inst.addrs[0])
                    assert inst.address_key() == (base, (inst.addrs - base).tobytes()), (name, block, w, inst)


@pytest.mark.fast
def test_block_invariant_addresses_are_computed_once_per_kernel():
    """Shared-memory tile addresses read no per-block name: every block after the first reuses them; global
    addresses read block.x / block.y: they are evaluated for a batch of blocks at once, each block its own."""
    kernel = load_workload(ROOT / "workloads/gemm_tile128_sync.yaml", {"M": 256, "N": 256, "K": 64})
    streams = BlockStreams(kernel)
    first, second = ([list(streams(block, w)) for w in range(kernel.launch.warps_per_block)] for block in (0, 1))
    cached = {key[0] for key in kernel.address_cache}
    nodes = _instr_nodes(kernel.program)
    assert cached == {id(node) for node in nodes if node.info.space == "shared"}
    # the two blocks took their shares of one batch (kept until the grid's other two blocks take theirs)
    assert {key[0] for key in streams.batches} == {id(node) for node in nodes if node.info.space == "global"}
    for a, b in zip(first[0], second[0]):
        if a.info.space == "shared":
            assert b.addrs.base is a.addrs.base  # the same cached array


@pytest.mark.fast
@pytest.mark.parametrize("order", ["forward", "backward"])
def test_blocks_evaluated_in_batches_get_what_each_warp_walks_alone(tmp_path, order):
    """Per-block addresses are evaluated for BLOCK_BATCH blocks at once, by whichever block of the batch gets
    there first: every block of a 3-D grid (batches across rows and planes, a partial last one) still gets the
    addresses it would alone, whatever order the blocks walk in."""
    from gpusim.workload.block_walker import BLOCK_BATCH

    k = _kernel(tmp_path, "  - loop: 3\n    var: i\n    body:\n"
                          "      - {op: LDG.E, dst: v, repeat: 2, addr: 'A + ((gtid + i * 7 * nblocks * ntid) % 2048"
                          " + rep * 16) * 4 + (block.z * 3 + block.y * 5 + block.x) % 8 * 4'}\n"
                          "      - {op: STG.E, src: [v], addr: 'A + (blockid * ntid + tid) * 4'}\n",
                block=64, extra="params: {}\nbuffers: {A: {bytes: 65536}}\n")
    path = tmp_path / "k.yaml"
    path.write_text(path.read_text().replace("grid: [1]", "grid: [5, 4, 2]"))
    k = load_workload(path)
    assert k.launch.nblocks == 40 and k.launch.nblocks % BLOCK_BATCH  # more than one batch, the last one partial
    streams = BlockStreams(k)
    blocks = range(k.launch.nblocks) if order == "forward" else reversed(range(k.launch.nblocks))
    for block in blocks:
        shared = [list(streams(block, w)) for w in range(k.launch.warps_per_block)]
        for w, insts in enumerate(shared):
            assert [_inst_key(i) for i in insts] == [_inst_key(i) for i in warp_stream(k, block, w)], (block, w)
    assert not streams.batches  # each batch is dropped once all its blocks took their share


@pytest.mark.fast
def test_a_bad_address_in_one_block_of_a_batch_is_that_blocks_error(tmp_path):
    """Evaluated with its batch, a block whose addresses are fine walks as before; the block whose address falls
    outside the buffer (or whose expression fails) is refused when it is walked, with the message it would get
    alone."""
    from gpusim.workload import WorkloadError

    for addr in ("A + blockid * 512 * 4 + tid * 4", "A + tid * 4 * (8 / (7 - blockid))"):
        path = tmp_path / "k.yaml"
        path.write_text("kernel: k\nbuffers: {A: {bytes: 14336}}\n"
                        "launch: {grid: [10], block: [64], registers_per_thread: 32}\n"
                        f"program:\n  - {{op: LDG.E, dst: v, addr: '{addr}'}}\n")
        k = load_workload(path)
        streams = BlockStreams(k)
        for block in range(7):
            assert len([list(streams(block, w)) for w in range(2)][0]) == 2
        with pytest.raises(WorkloadError) as batched:
            [list(streams(7, w)) for w in range(2)]
        with pytest.raises(WorkloadError) as alone:
            list(warp_stream(load_workload(path), 7, 0))
        assert str(batched.value) == str(alone.value)


@pytest.mark.fast
def test_a_loop_trips_instruction_rows_are_made_once_per_kernel():
    """A chunk's rows (pc, lanes, registers, operands) depend on the loop indices, not the block: the second block
    reuses the first one's (the same register-name tuples), its global addresses its own."""
    kernel = load_workload(ROOT / "workloads/gemm_tile128.yaml", {"M": 256, "N": 256, "K": 128})
    streams = BlockStreams(kernel)
    first, second = ([list(streams(block, w)) for w in range(kernel.launch.warps_per_block)] for block in (0, 1))
    assert kernel.row_cache
    differ = 0
    for a, b in zip(first[1], second[1]):
        assert (a.pc, a.mask) == (b.pc, b.mask) and a.dst is b.dst and a.src is b.src
        if a.info.space == "global":
            differ += a.addrs.tolist() != b.addrs.tolist()
    assert differ  # (B's and C's tiles; both blocks read the same rows of A)


def _instr_nodes(program):
    from gpusim.workload.program import walk_instrs

    found = []
    walk_instrs(program, found.append)
    return [n for n in found if n.addr is not None]


@pytest.mark.fast
def test_shared_block_walker_is_used_where_it_can_be(tmp_path):
    uniform = load_workload(ROOT / "workloads/gemm_tile128_sync.yaml", {"M": 256, "N": 256, "K": 64})
    assert BlockStreams(uniform).shared
    per_warp = _kernel(tmp_path, '  - if: "warp == 1"\n    then: [{op: FMUL, dst: v}]\n', block=64)
    assert not BlockStreams(per_warp).shared  # warps take different paths: each walks alone
    partial = _kernel(tmp_path, "  - {op: FFMA, dst: v}\n", block=48)
    assert not BlockStreams(partial).shared  # a partial last warp has its own mask


@pytest.mark.fast
def test_a_warps_queue_is_first_in_first_out_and_stays_at_most_twice_what_waits():
    """A block walker's per-warp queue (InstQueue, a list read from a moving head): what goes in comes out in order,
    and a warp that lags behind its block (its queue never quite empty) does not keep what it has already read."""
    from gpusim.isa.inst import InstQueue, WarpInst
    from gpusim.isa.opcodes import lookup

    ffma = lookup("FFMA")
    queue = InstQueue()
    assert queue.pop() is None and len(queue) == 0
    out, sent = [], 0
    for _ in range(2000):  # the block hands out 3 a round, the warp takes 2: the queue grows by one a round
        queue.extend([WarpInst(ffma, 0, 0, pc, 0xFFFFFFFF, (), (), None) for pc in range(sent, sent + 3)])
        sent += 3
        out += [queue.pop().pc, queue.pop().pc]
        assert len(queue.items) <= max(128, 2 * len(queue))
    while len(queue):
        out.append(queue.pop().pc)
    assert out == list(range(sent)) and queue.pop() is None and queue.items == []


@pytest.mark.fast
def test_predicates_and_async_operands_follow_the_values_they_read_in_every_warp(tmp_path):
    """A warp walker works out a predicate's lanes and an asynchronous instruction's operands once per node and
    values of the names they read: each warp, each trip, still gets its own (a lane chosen by the loop index and
    the warp; an mbarrier and a byte count by the trip), the same as a walk that works everything out afresh."""
    k = _kernel(tmp_path, '  - {op: SYNCS.EXCH.64, barrier: "full{rep}", arrivals: 1, repeat: 2, pred: "lane == 0"}\n'
                          '  - loop: 6\n    var: i\n    body:\n'
                          '      - {op: FADD, dst: v, pred: "lane == (i + warp) % 32"}\n'
                          '      - {op: FMUL, dst: v, pred: "tid % 3 == i % 3"}\n'
                          '      - {op: SYNCS.ARRIVE.TRANS64.A1T0, barrier: "full{i % 2}", bytes: "(i + 1) * 16",'
                          ' pred: "lane == 0"}\n',
                block=64, extra="buffers: {bars: {space: shared, bytes: 16}}\n")
    for warp in (0, 1):
        insts = list(warp_stream(k, 0, warp))
        fadd = [i.mask for i in insts if i.op == "FADD"]
        fmul = [i.mask for i in insts if i.op == "FMUL"]
        arrive = [(i.operands.barrier, i.operands.bytes) for i in insts if i.op.startswith("SYNCS.ARRIVE")]
        assert fadd == [1 << ((i + warp) % 32) for i in range(6)]
        assert fmul == [sum(1 << lane for lane in range(32) if (warp * 32 + lane) % 3 == i % 3) for i in range(6)]
        assert arrive == [(f"full{i % 2}", (i + 1) * 16) for i in range(6)]
