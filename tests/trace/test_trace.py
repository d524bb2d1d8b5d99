"""Accel-Sim trace import: the real vectorAdd trace (read from ../shared/traces, never copied here), the three
address encodings, the opcode tables, and every malformed-input message."""

import json
import lzma
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpusim.api import run
from gpusim.arch import load_arch
from gpusim.trace import TraceError, TraceStreams, load_trace, read_command_list
from gpusim.trace.format import LineError, decode_addresses, parse_instruction
from gpusim.trace.mix import trace_mix
from gpusim.isa.opcodes import FAMILIES, family_of, lookup

from tests.conftest import ROOT, run_cli

VECTORADD = Path(os.environ.get("GPUSIM_TRACES", ROOT.parent / "shared" / "traces")) / "accelsim-vectoradd"
needs_vectoradd = pytest.mark.skipif(not (VECTORADD / "kernelslist.g").exists(),
                                     reason=f"the vectorAdd trace is not at {VECTORADD} (set GPUSIM_TRACES)")


def _trace_totals(path: Path) -> tuple[int, int, int]:
    """(warp-instructions, thread-instructions, blocks) counted straight from the file, independently of the
    reader: every instruction line is 'PC mask ...' with an 8-digit hex mask."""
    warp = thread = blocks = 0
    for line in path.read_text().splitlines():
        fields = line.split()
        if line.startswith("#BEGIN_TB"):
            blocks += 1
        elif len(fields) > 3 and len(fields[1]) == 8 and all(c in "0123456789abcdef" for c in fields[1]):
            warp += 1
            thread += bin(int(fields[1], 16)).count("1")
    return warp, thread, blocks


# --- the real trace --------------------------------------------------------------------------------------------
@pytest.mark.fast
@needs_vectoradd
@pytest.mark.parametrize("arch", ["a100", "h100"])
def test_vectoradd_counts_match_the_trace(arch):
    warp, thread, blocks = _trace_totals(VECTORADD / "kernel-1.traceg")
    assert (warp, thread, blocks) == (26601, 801056, 196)  # the totals the issue quotes for this trace
    result = run(VECTORADD / "kernelslist.g", arch)
    m = result.metrics
    assert m["smsp__inst_executed.sum"] == warp
    assert m["smsp__thread_inst_executed.sum"] == thread
    assert m["launch__grid_size"] == blocks
    assert result.launch["blocks"] == blocks
    # vectorAdd: the two inputs the command list copies to the device are read once from DRAM (nothing hits in
    # L1), and the output, as large as one input, is written in 32-byte sectors
    copied = [int(c.text.split(",")[2]) for c in read_command_list(VECTORADD / "kernelslist.g") if c.kernel is None]
    assert m["dram__bytes_read.sum"] == sum(copied)
    assert m["l1tex__t_sector_hit_rate.pct"] == 0.0
    assert m["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"] == copied[0] // 32
    assert any("MemcpyHtoD" in n for n in result.notes)
    assert bool(result.warnings) == (arch != "a100")  # sm_80 binary: a warning on h100 only
    assert result.unknown_opcodes == {}
    assert result.simt == "trace"  # the record says the order came from the trace, not a SIMT model


@pytest.mark.fast
@needs_vectoradd
def test_every_load_and_store_gets_its_addresses():
    """Loads read inside the two buffers the command list copies to the device; stores write the third."""
    copies = [c.text.split(",") for c in read_command_list(VECTORADD / "kernelslist.g") if c.kernel is None]
    inputs = [(int(a, 16), int(a, 16) + int(n)) for _, a, n in copies]
    kernel = load_trace(VECTORADD / "kernel-1.traceg")
    streams = TraceStreams(kernel)
    loads = stores = 0
    for block in range(kernel.launch.nblocks):
        for warp in range(kernel.launch.warps_per_block):
            for inst in streams(block, warp):
                if inst.info.space is None:
                    assert inst.addrs is None
                    continue
                lanes = inst.active_addresses()
                assert len(lanes) == inst.active_lanes and inst.active_lanes > 0
                if inst.is_store:
                    stores += 1
                    assert all(not lo <= a < hi for a in lanes for lo, hi in inputs)
                else:
                    loads += 1
                    assert all(any(lo <= a < hi for lo, hi in inputs) for a in lanes)
    streams.finish()
    working_warps = -(-(inputs[0][1] - inputs[0][0]) // 4 // 32)  # one float per thread: ceil(n / 32) warps
    assert (loads, stores) == (2 * working_warps, working_warps)


@needs_vectoradd
def test_trace_and_xz_trace_and_command_list_agree(tmp_path):
    xz = tmp_path / "kernel-1.traceg.xz"
    xz.write_bytes(lzma.compress((VECTORADD / "kernel-1.traceg").read_bytes()))
    (tmp_path / "kernelslist.g").write_text("MemcpyHtoD,0x1000,16\nkernel-1.traceg\n")  # resolved to the .xz
    plain = run(VECTORADD / "kernel-1.traceg", "a100", sms=8).to_dict()
    compressed = run(xz, "a100", sms=8).to_dict()
    listed = run(tmp_path / "kernelslist.g", "a100", sms=8).to_dict()
    assert plain["metrics"] == compressed["metrics"] == listed["metrics"]


@pytest.mark.fast
@needs_vectoradd
def test_blocks_are_read_when_dispatched_not_up_front():
    kernel = load_trace(VECTORADD / "kernel-1.traceg")
    streams = TraceStreams(kernel)
    first = streams(0, 0)
    assert streams.blocks_read == 1  # only block 0 has been parsed
    next(first)
    for warp in range(1, 8):
        streams(0, warp)
    assert streams.blocks_read == 1 and not streams._pending  # handed out whole: nothing kept


@needs_vectoradd
def test_vectoradd_is_deterministic_and_cli_json_is_clean():
    a = run_cli("run", str(VECTORADD / "kernelslist.g"), "--arch", "a100", "--json", "-")
    b = run_cli("run", str(VECTORADD / "kernelslist.g"), "--arch", "a100", "--json", "-")
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout
    record = json.loads(a.stdout)
    assert record["metrics"]["smsp__inst_executed.sum"] == 26601
    assert "note:" in a.stderr and "MemcpyHtoD" in a.stderr


@needs_vectoradd
def test_workload_show_on_a_trace():
    p = run_cli("workload", "show", str(VECTORADD / "kernel-1.traceg"), "--json")
    assert p.returncode == 0, p.stderr
    record = json.loads(p.stdout)
    warp, thread, _ = _trace_totals(VECTORADD / "kernel-1.traceg")
    assert record["warp_instructions"] == warp and record["thread_instructions"] == thread
    assert record["launch"]["blocks"] == 196 and record["launch"]["registers_per_thread"] == 12
    copied = [int(c.text.split(",")[2]) for c in read_command_list(VECTORADD / "kernelslist.g") if c.kernel is None]
    assert record["bytes"] == {"global_load": sum(copied), "global_store": copied[0]}
    assert record["trace"]["opcode_table"] == "ampere" and record["trace"]["unknown_opcodes"] == {}
    text = run_cli("workload", "show", str(VECTORADD / "kernelslist.g"))
    assert text.returncode == 0 and "LDG.E" in text.stdout


@needs_vectoradd
@pytest.mark.parametrize("cut,message", [
    (0.5, "truncated: end of file inside thread block"),
    (None, "end of file after"),
])
def test_truncated_trace_is_one_line_error(tmp_path, cut, message):
    lines = (VECTORADD / "kernel-1.traceg").read_text().splitlines(keepends=True)
    if cut is not None:
        kept = lines[:int(len(lines) * cut)]
    else:  # cut at a block boundary: complete blocks, but fewer than the grid
        ends = [i for i, line in enumerate(lines) if line.startswith("#END_TB")]
        kept = lines[:ends[10] + 1]
    path = tmp_path / "kernel-1.traceg"
    path.write_text("".join(kept))
    p = run_cli("run", str(path), "--arch", "a100")
    assert p.returncode == 1
    assert p.stderr.count("\n") == 1 and message in p.stderr and f"{path}:" in p.stderr


# --- synthetic traces ------------------------------------------------------------------------------------------
HEADER = """-kernel name = {name}
-kernel id = 1
-grid dim = ({grid},1,1)
-block dim = ({threads},1,1)
-shmem = 0
-nregs = 32
-binary version = {version}
-cuda stream id = 0
-shmem base_addr = 0x00007f0000000000
-local mem base_addr = 0x00007e0000000000
-nvbit version = 1.7
-accelsim tracer version = 5
-enable lineinfo = 0

#traces format = [line_num] PC mask dest_num [reg_dests] opcode src_num [reg_srcs] mem_width [adrrescompress?] [mem_addresses] immediate

"""


def write_trace(path: Path, warps_lines: list[list[str]], grid: int = 1, version: int = 80, insts=None,
                name="synthetic") -> Path:
    """A trace whose every block holds the same warps (warps_lines[w] = warp w's instruction lines)."""
    text = HEADER.format(name=name, grid=grid, threads=32 * len(warps_lines), version=version)
    for block in range(grid):
        text += f"\n#BEGIN_TB\n\nthread block = {block},0,0\n"
        for w, lines in enumerate(warps_lines):
            count = len(lines) if insts is None else insts
            text += f"\nwarp = {w}\ninsts = {count}\n" + "".join(line + "\n" for line in lines)
        text += "\n#END_TB\n"
    path.write_text(text)
    return path


def _chain(n: int) -> list[str]:
    return [f"{16 * i:04x} ffffffff 1 R2 FFMA 3 R2 R3 R4 0 0" for i in range(n)] + \
        [f"{16 * n:04x} ffffffff 0 EXIT 0 0 0"]


@pytest.mark.fast
@pytest.mark.parametrize("arch", ["v100", "a100", "h100", "b200"])
def test_dependent_ffma_chain_from_a_trace_costs_the_fp32_latency(tmp_path, arch):
    """The trace front end feeds the same engine: 100 more dependent FFMAs cost 100 x the arch's FP32 latency."""
    short = run(write_trace(tmp_path / "a.traceg", [_chain(50)]), arch).metrics["gpu_sim_cycle"]
    long = run(write_trace(tmp_path / "b.traceg", [_chain(150)]), arch).metrics["gpu_sim_cycle"]
    assert long - short == 100 * load_arch(arch).pipelines.fp32.latency


@pytest.mark.fast
def test_zero_register_carries_no_dependency(tmp_path):
    """RZ (R255) is never written: FFMAs that only 'write' RZ do not wait on each other."""
    lines = [f"{16 * i:04x} ffffffff 1 R255 FFMA 3 R255 R3 R4 0 0" for i in range(64)] + ["0400 ffffffff 0 EXIT 0 0 0"]
    m = run(write_trace(tmp_path / "k.traceg", [lines]), "h100").metrics
    assert m["smsp__average_warps_issue_stalled_wait_per_issue_active.ratio"] < 1.5


def test_unknown_opcode_is_counted_and_listed_once(tmp_path):
    lines = ["0000 ffffffff 1 R2 FOOBAR.X 1 R3 0 0", "0010 ffffffff 1 R2 FOOBAR.X 1 R2 0 0",
             "0020 ffffffff 1 R5 HGMMA.64x128x16.F32 2 R2 R3 0 0", "0030 ffffffff 0 EXIT 0 0 0"]
    path = write_trace(tmp_path / "k.traceg", [lines], grid=3)
    result = run(path, "a100")
    # HGMMA arrived with Hopper: an sm_80 binary cannot hold it, so the ampere table does not know it either
    assert result.unknown_opcodes == {"FOOBAR.X": 6, "HGMMA.64X128X16.F32": 3}
    assert result.metrics["smsp__inst_executed.sum"] == 12
    p = run_cli("run", str(path), "--arch", "a100")
    assert p.returncode == 0
    notes = [line for line in p.stderr.splitlines() if "not in the opcode table" in line]
    assert len(notes) == 1 and "FOOBAR.X (6 warp-inst)" in notes[0]


@pytest.mark.fast
def test_hopper_trace_knows_warpgroup_mma(tmp_path):
    lines = ["0000 ffffffff 1 R5 HGMMA.64x128x16.F32 2 R2 R3 0 0", "0010 ffffffff 0 EXIT 0 0 0"]
    assert run(write_trace(tmp_path / "k.traceg", [lines], version=90), "h100").unknown_opcodes == {}


@pytest.mark.fast
def test_predicated_off_memory_instruction_moves_no_data(tmp_path):
    lines = ["0000 00000000 1 R4 LDG.E 1 R2 4 0 0", "0010 ffffffff 1 R4 LDG.E 1 R2 4 1 0x10000 4 0",
             "0020 ffffffff 0 EXIT 0 0 0"]
    m = run(write_trace(tmp_path / "k.traceg", [lines]), "a100").metrics
    assert m["smsp__inst_executed.sum"] == 3
    assert m["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] == 4  # only the full-warp load: 128 B


@pytest.mark.parametrize("edit,message", [
    (lambda t: t.replace("insts = 3", "insts = 4", 1), "insts = 4 at line"),
    (lambda t: t.replace("insts = 3", "insts = 2", 1), "insts = 2 at line"),
    (lambda t: t.replace("0010 ffffffff 1 R2", "0010 fffffzff 1 R2", 1), "bad field"),
    (lambda t: t.replace("4 1 0x10000 4 0", "4 7 0x10000 4 0", 1), "address mode 7"),
    (lambda t: t.replace("4 1 0x10000 4 0", "4 0 0x10000", 1), "address mode 0 needs 32 addresses"),
    (lambda t: t.replace("FFMA 3 R2 R3 R4", "FFMA 3 R2 R3", 1), "register"),
    (lambda t: t.replace("-grid dim = (2,1,1)", "-grid dim = (3,1,1)"), "end of file after 2 thread blocks"),
    (lambda t: t.replace("-grid dim = (2,1,1)", "-grid dim = (1,1,1)"), "thread block 2 found"),
    (lambda t: t.replace("-block dim = (64,1,1)", "-block dim = (96,1,1)"), "lists 2 warps"),
    (lambda t: t.replace("-accelsim tracer version = 5", "-accelsim tracer version = 2"), "expected one of 4, 5, 6"),
    (lambda t: t.replace("-nregs = 32\n", ""), "missing -nregs"),
    (lambda t: t.replace("thread block = 1,0,0", "thread block = one"), "thread block = x,y,z"),
])
def test_malformed_traces_are_one_line_errors_with_file_and_line(tmp_path, edit, message):
    lines = ["0000 ffffffff 1 R2 FFMA 3 R2 R3 R4 0 0", "0010 ffffffff 1 R2 LDG.E 1 R2 4 1 0x10000 4 0",
             "0020 ffffffff 0 EXIT 0 0 0"]
    path = write_trace(tmp_path / "k.traceg", [lines, lines], grid=2)
    path.write_text(edit(path.read_text()))
    p = run_cli("run", str(path), "--arch", "a100")
    assert p.returncode == 1, p.stdout
    assert p.stderr.startswith("error: ") and p.stderr.count("\n") == 1, p.stderr
    assert message in p.stderr and str(path) in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


def test_bad_command_lists_and_flags(tmp_path):
    path = write_trace(tmp_path / "kernel-1.traceg", [_chain(2)])
    listing = tmp_path / "kernelslist.g"
    listing.write_text("MemcpyHtoD,0x1000,16\nkernel-2.traceg\n")
    p = run_cli("run", str(listing), "--arch", "a100")
    assert p.returncode == 1 and "kernelslist.g:2: kernel trace kernel-2.traceg not found" in p.stderr
    listing.write_text("launch something\n")
    p = run_cli("run", str(listing), "--arch", "a100")
    assert p.returncode == 1 and "kernelslist.g:1: expected a memcpy line or a kernel trace" in p.stderr
    for extra, message in ((["--simt", "its"], "--simt applies to YAML workloads only"),
                           (["--set", "N=4"], "a trace has no parameters")):
        p = run_cli("run", str(path), "--arch", "a100", *extra)
        assert p.returncode == 1 and message in p.stderr and p.stderr.count("\n") == 1
    corrupt = tmp_path / "bad.traceg.xz"
    corrupt.write_bytes(lzma.compress(path.read_bytes())[:-20])
    p = run_cli("run", str(corrupt), "--arch", "a100")
    assert p.returncode == 1 and "corrupt or truncated xz" in p.stderr and p.stderr.count("\n") == 1


def test_command_list_of_two_kernels_adds_them_up(tmp_path):
    write_trace(tmp_path / "kernel-1.traceg", [_chain(10)], name="first")
    write_trace(tmp_path / "kernel-2.traceg", [_chain(30), _chain(30)], grid=2, name="second")
    (tmp_path / "kernelslist.g").write_text("kernel-1.traceg\nMemcpyDtoH,0x1000,16\nkernel-2.traceg\n")
    result = run(tmp_path / "kernelslist.g", "a100")
    one, two = (run(tmp_path / f"kernel-{i}.traceg", "a100").metrics for i in (1, 2))
    m = result.metrics
    assert [k["kernel"] for k in result.kernels] == ["first", "second"]
    assert m["kernels"] == 2
    assert m["gpu_sim_cycle"] == one["gpu_sim_cycle"] + two["gpu_sim_cycle"]
    assert m["smsp__inst_executed.sum"] == 11 + 4 * 31
    assert m["gpu__inst_executed_per_cycle"] == pytest.approx(m["smsp__inst_executed.sum"] / m["gpu_sim_cycle"])
    reasons = sum(v for k, v in m.items() if k.startswith("smsp__average_warps_issue_stalled_"))
    assert reasons == pytest.approx(m["smsp__average_warp_latency_per_inst_issued.ratio"])
    p = run_cli("run", str(tmp_path / "kernelslist.g"), "--arch", "a100")  # the readable report: a row each
    assert p.returncode == 0, p.stderr
    assert "first" in p.stdout and "second" in p.stdout and "total" in p.stdout
    assert f"{m['gpu_sim_cycle']:,}" in p.stdout


# --- the address encodings -------------------------------------------------------------------------------------
@pytest.mark.fast
def test_the_three_address_modes_decode_hand_written_examples():
    # mode 0: every active lane listed (lanes 0, 2, 5)
    addrs, used = decode_addresses(0, ["0x100", "0x200", "0x300", "7"], 0b100101)
    assert used == 3 and [addrs[0], addrs[2], addrs[5]] == [0x100, 0x200, 0x300] and addrs.sum() == 0x600
    # mode 1: base + stride over a contiguous run (lanes 4..7)
    addrs, used = decode_addresses(1, ["0x1000", "8", "0"], 0xF0)
    assert used == 2 and list(addrs[4:8]) == [0x1000, 0x1008, 0x1010, 0x1018] and addrs[:4].sum() == 0
    # mode 2: base, then one delta per further active lane (lanes 1, 3, 4)
    addrs, used = decode_addresses(2, ["0x2000", "-16", "64", "0"], 0b11010)
    assert used == 3 and [addrs[1], addrs[3], addrs[4]] == [0x2000, 0x1FF0, 0x2030]
    with pytest.raises(LineError, match="contiguous"):
        decode_addresses(1, ["0x1000", "4"], 0b101)


def _encode(addrs: list[int], mask: int, mode: int) -> list[str]:
    """The tracer's encodings, written here from the format description (not from the reader)."""
    active = [addrs[lane] for lane in range(32) if mask >> lane & 1]
    if mode == 0:
        return [f"0x{a:016x}" for a in active]
    if mode == 1:
        return [f"0x{active[0]:x}", str(active[1] - active[0] if len(active) > 1 else 0)]
    return [f"0x{active[0]:x}"] + [str(b - a) for a, b in zip(active, active[1:])]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2**48), min_size=32, max_size=32), st.integers(1, 2**32 - 1),
       st.sampled_from([0, 2]))
def test_list_and_delta_modes_round_trip(addrs, mask, mode):
    decoded, used = decode_addresses(mode, _encode(addrs, mask, mode), mask)
    assert [int(decoded[lane]) for lane in range(32) if mask >> lane & 1] == \
        [addrs[lane] for lane in range(32) if mask >> lane & 1]
    assert used == len(_encode(addrs, mask, mode))


@pytest.mark.fast
@settings(max_examples=200, deadline=None)
@given(st.integers(0, 31), st.integers(1, 32), st.integers(0, 2**40), st.integers(-4096, 4096))
def test_stride_mode_round_trips_any_contiguous_run(first, length, base, stride):
    length = min(length, 32 - first)
    mask = ((1 << length) - 1) << first
    addrs = [0] * 32
    for k in range(length):
        addrs[first + k] = base + k * stride
    decoded, _ = decode_addresses(1, _encode(addrs, mask, 1), mask)
    assert list(decoded) == [a if mask >> i & 1 else 0 for i, a in enumerate(addrs)]


@pytest.mark.fast
def test_instruction_line_fields_and_line_numbers():
    t = parse_instruction("12 00a0 ffffffff 1 R4 LDG.E.128 1 R4 16 1 0x7000 16 0", 5, lineinfo=True)
    assert (t.pc, t.mask, t.dst, t.opcode, t.src, t.mem_width) == (0xA0, 0xFFFFFFFF, ("R4",), "LDG.E.128", ("R4",), 16)
    assert int(t.addrs[31]) == 0x7000 + 31 * 16
    v4 = parse_instruction("0000 ffffffff 1 UR4 ULDC 0 0", 4, lineinfo=False)  # version 4: no immediate
    assert v4.dst == ("UR4",) and v4.addrs is None
    with pytest.raises(LineError, match="fields left"):
        parse_instruction("0000 ffffffff 0 NOP 0 0 0 0", 5, lineinfo=False)


# --- the opcode tables -----------------------------------------------------------------------------------------
@pytest.mark.fast
def test_each_family_table_extends_the_one_before():
    from gpusim.isa.opcodes import _TABLES

    for older, newer in zip(FAMILIES, FAMILIES[1:]):
        assert set(_TABLES[older]) <= set(_TABLES[newer])
        assert all(_TABLES[newer][k] == v for k, v in _TABLES[older].items())


@pytest.mark.fast
@pytest.mark.parametrize("opcode,family,pipeline,width", [  # family: the first one whose SASS has the opcode
    ("LDG.E.128", "volta", "ldst_global", 16), ("IMAD.WIDE", "volta", "int32", 0),
    ("HMMA.16816.F32", "volta", "tensor", 0), ("ISETP.GE.AND", "volta", "int32", 0),
    ("LDGSTS.E.BYPASS.128", "ampere", "ldst_global", 16), ("LDSM.16.M88.4", "turing", "ldst_shared", 16),
    ("HGMMA.64x128x16.F32", "hopper", "tensor", 0), ("UTCHMMA", "blackwell", "tensor", 0),
    ("MEMBAR.SC.GPU", "volta", "misc", 0), ("BAR.SYNC.DEFER_BLOCKING", "volta", "barrier", 0),
    ("ULDC.64", "turing", "int32", 0), ("STS.U16", "volta", "ldst_shared", 2),
])
def test_opcode_table_entries(opcode, family, pipeline, width):
    info = lookup(opcode, family)
    assert info is not None and (info.pipeline, info.width) == (pipeline, width)
    if family != "volta":
        assert lookup(opcode, FAMILIES[FAMILIES.index(family) - 1]) is None  # introduced by this family


@pytest.mark.fast
def test_warpgroup_mma_flops_are_shared_by_four_warps():
    assert lookup("HGMMA.64x128x16.F32").mma_flops == 2 * 64 * 128 * 16 // 4


@pytest.mark.fast
def test_binary_versions_map_to_families():
    assert [family_of(v) for v in (70, 75, 80, 86, 89, 90, 100, 120)] == \
        ["volta", "turing", "ampere", "ampere", "ada", "hopper", "blackwell", "blackwell"]
    assert family_of(61) is None


@pytest.mark.fast
def test_trace_mix_counts_match_a_simulation(tmp_path):
    lines = ["0000 ffffffff 1 R2 LDS.U.128 1 R3 16 1 0x0 16 0", "0010 0000ffff 1 R2 FFMA 3 R2 R3 R4 0 0",
             "0020 ffffffff 0 BAR.SYNC 0 0 0", "0030 ffffffff 0 EXIT 0 0 0"]
    kernel = load_trace(write_trace(tmp_path / "k.traceg", [lines, lines, lines], grid=5))
    mix, _ = trace_mix(kernel)
    m = run(kernel, "h100").metrics
    assert mix.total_warp_insts == m["smsp__inst_executed.sum"] == 4 * 3 * 5
    assert mix.total_thread_insts == m["smsp__thread_inst_executed.sum"] == (32 * 3 + 16) * 15
    assert mix.bytes[("shared", "load")] == 32 * 16 * 15
    assert np.isclose(m["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"], 4 * 15)  # 512 B = 4 wavefronts


# --- random well-formed traces ---------------------------------------------------------------------------------
@st.composite
def _random_warp(draw):
    """(instruction lines, [(mask, addresses or None)]) for one warp, ending in EXIT."""
    lines, expected = [], []
    for k in range(draw(st.integers(0, 6))):
        mask = draw(st.sampled_from([0xFFFFFFFF, 0x0000FFFF, 0x00FF0000, 0x80000001, 0x00000000, 0x12345678]))
        op = draw(st.sampled_from(["FFMA", "IMAD.WIDE", "LDG.E", "STG.E.64", "LDS.U.128", "MUFU.EX2", "FOO.BAR"]))
        pc = f"{16 * k:04x}"
        if op in ("LDG.E", "STG.E.64", "LDS.U.128"):
            width = {"LDG.E": 4, "STG.E.64": 8, "LDS.U.128": 16}[op]
            base = draw(st.integers(0, 2**20)) * width
            addrs = [base + width * lane for lane in range(32)] if draw(st.booleans()) else \
                [draw(st.integers(0, 2**24)) * width for _ in range(32)]
            lanes = [lane for lane in range(32) if mask >> lane & 1]
            contiguous = bool(lanes) and lanes == list(range(lanes[0], lanes[-1] + 1))
            strided = len(lanes) < 2 or len({addrs[b] - addrs[a] for a, b in zip(lanes, lanes[1:])}) == 1
            mode = draw(st.sampled_from([0, 2] + ([1] if contiguous and strided else [])))
            fields = _encode(addrs, mask, mode) if lanes else (["0x0", "0"] if mode == 1 else ["0x0"] if mode == 2 else [])
            operands = f"0 {op} 2 R2 R4" if op.startswith("ST") else f"1 R4 {op} 1 R2"
            lines.append(f"{pc} {mask:08x} {operands} {width} {mode} {' '.join(fields)} 0")
            expected.append((mask, [addrs[lane] for lane in lanes]))
        else:
            lines.append(f"{pc} {mask:08x} 1 R{draw(st.integers(0, 9))} {op} 2 R{draw(st.integers(0, 9))} R255 0 0")
            expected.append((mask, None))
    lines.append(f"{16 * len(lines):04x} ffffffff 0 EXIT 0 0 0")
    expected.append((0xFFFFFFFF, None))
    return lines, expected


@settings(max_examples=40, deadline=None)
@given(st.lists(_random_warp(), min_size=1, max_size=3), st.integers(1, 3))
def test_random_traces_round_trip_through_reader_and_engine(tmp_path_factory, warps, grid):
    path = write_trace(tmp_path_factory.mktemp("t") / "k.traceg", [lines for lines, _ in warps], grid=grid)
    kernel = load_trace(path)
    streams = TraceStreams(kernel)
    for block in range(grid):
        for w, (_, expected) in enumerate(warps):
            got = [(i.mask, None if i.addrs is None else [int(a) for a in i.active_addresses()])
                   for i in streams(block, w)]
            assert got == expected
    streams.finish()
    m = run(kernel, "h100").metrics
    assert m["smsp__inst_executed.sum"] == grid * sum(len(e) for _, e in warps)
    assert m["smsp__thread_inst_executed.sum"] == grid * sum(mask.bit_count() for _, e in warps for mask, _ in e)


@pytest.mark.fast
@pytest.mark.parametrize("version,lineinfo", [(4, False), (5, True), (6, False)])
def test_tracer_versions_and_line_numbers(tmp_path, version, lineinfo):
    """Version 4 lines end after the addresses; 5 adds an immediate, 6 a second one; with -enable lineinfo = 1
    every line starts with its source line number. All read to the same instructions."""
    tail = {4: "", 5: " 0", 6: " 0 0"}[version]
    lines = [f"0000 ffffffff 1 R2 FFMA 3 R2 R3 R4 0{tail}", f"0010 0000ffff 1 R4 LDG.E 1 R2 4 1 0x1000 4{tail}",
             f"0020 ffffffff 0 EXIT 0 0{tail}"]
    if lineinfo:
        lines = [f"{40 + i} {line}" for i, line in enumerate(lines)]
    path = write_trace(tmp_path / "k.traceg", [lines])
    text = path.read_text().replace("-accelsim tracer version = 5", f"-accelsim tracer version = {version}")
    path.write_text(text.replace("-enable lineinfo = 0", f"-enable lineinfo = {int(lineinfo)}"))
    insts = list(TraceStreams(load_trace(path))(0, 0))
    assert [(i.op, i.pc, i.mask) for i in insts] == [("FFMA", 0, 0xFFFFFFFF), ("LDG.E", 0x10, 0xFFFF),
                                                     ("EXIT", 0x20, 0xFFFFFFFF)]
    assert [int(a) for a in insts[1].active_addresses()] == [0x1000 + 4 * lane for lane in range(16)]
    assert run(path, "a100").metrics["smsp__inst_executed.sum"] == 3


@pytest.mark.fast
@needs_vectoradd
def test_the_stated_counts_are_read_without_decoding_and_agree_with_the_counted_ones(tmp_path):
    """A trace's `insts = N` lines give its warp-instructions without decoding a line; the sampling plan of a trace
    of many waves takes them (and the first block's mix) instead of counting every instruction first."""
    from gpusim.trace.mix import stated_mix
    from gpusim.trace.reader import warp_instruction_count

    kernel = load_trace(VECTORADD / "kernel-1.traceg")
    counted = trace_mix(kernel)[0]
    assert warp_instruction_count(kernel.source) == counted.total_warp_insts == 26601
    stated = stated_mix(kernel)
    assert stated.estimated and stated.total_warp_insts == counted.total_warp_insts
    xz = tmp_path / "kernel-1.traceg.xz"
    xz.write_bytes(lzma.compress((VECTORADD / "kernel-1.traceg").read_bytes()))
    assert warp_instruction_count(xz) == 26601


def test_the_default_path_on_a_trace_of_many_waves_does_not_count_it_first(tmp_path, monkeypatch):
    """`--sample auto` on a trace of several waves plans from the stated counts: no pass decoding the whole trace
    before the simulation (trace_mix is never called), and the record is the full run's where it runs in full."""
    import gpusim.api as api
    import gpusim.trace.mix as mix_module

    path = write_trace(tmp_path / "many.traceg", [_chain(8)], grid=512)  # 4 waves of 128 one-warp blocks on 4 SMs
    assert not hasattr(api, "trace_mix")
    monkeypatch.setattr(mix_module, "trace_mix", lambda kernel: pytest.fail("the whole trace decoded to count it"))
    planned = []
    monkeypatch.setattr(api, "stated_mix", lambda kernel: planned.append(kernel) or mix_module.stated_mix(kernel))
    auto = run(path, "h100", sms=4)
    off = run(path, "h100", sms=4, sample="off")
    assert len(planned) == 1
    assert auto.metrics["smsp__inst_executed.sum"] == off.metrics["smsp__inst_executed.sum"] == 512 * 9
    assert auto.metrics["gpu_sim_cycle"] == off.metrics["gpu_sim_cycle"]
