"""Hostile trace input: a malformed, truncated, overlong or endless trace or command list ends in a
one-line GpusimError naming the file and line and what was expected, in bounded time and memory; what the format
can hold but a real tracer would not write is a counted warning. Hand-written cases for each rule first, then
hypothesis mutations of a small valid trace, each run in a worker process with an address-space limit and a
time limit."""

from __future__ import annotations

import json
import lzma
import re
import select
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from gpusim.api import run
from gpusim.trace import TraceError, TraceStreams, load_trace, read_command_list
from gpusim.trace.mix import trace_mix
from gpusim.trace.reader import LINE_LIMIT

from tests.conftest import ROOT, run_cli

SHARED = 0x7F0000000000  # the trace's -shmem base_addr
GLOBAL = 0x7FB0FC400000
HEADER = """-kernel name = _Z6hostilePfS_
-kernel id = 1
-grid dim = (2,1,1)
-block dim = (64,1,1)
-shmem = 1024
-nregs = 32
-binary version = 80
-cuda stream id = 0
-shmem base_addr = 0x{shared:016x}
-local mem base_addr = 0x00007e0000000000
-nvbit version = 1.7
-accelsim tracer version = 5
-enable lineinfo = 0

#traces format = [line_num] PC mask dest_num [reg_dests] opcode src_num [reg_srcs] mem_width {rest}

"""


def warp_lines(block: int, warp: int) -> list[str]:
    """One warp of the valid trace: ALU work, loads in the three address modes, a predicated-off load, a
    constant load, a barrier, a store and EXIT."""
    base = GLOBAL + 4 * 32 * (2 * block + warp)
    half = " ".join(f"0x{base + 8 * lane:x}" for lane in range(16))
    deltas = " ".join(["16"] * 3 + ["-48"] + ["16"] * 11)  # lanes 0-3, 8-11, 16-19, 24-27 of f0f0f0f0: 16 lanes
    return [
        "0000 ffffffff 1 R1 MOV 0 0 0",
        "0010 ffffffff 1 R2 FFMA 3 R2 R3 R4 0 0",
        f"0020 ffffffff 1 R4 LDG.E 1 R2 4 1 0x{base:x} 4 0",
        f"0030 0000ffff 1 R6 LDG.E.64 1 R2 8 0 {half} 0",
        f"0040 0f0f0f0f 1 R8 LDS.U.128 1 R3 16 2 0x{SHARED + 0x100:x} {deltas} 0",
        "0050 00000000 1 R7 LDG.E 1 R2 4 0 0",
        "0060 ffffffff 1 R9 LDC 1 R2 0 0",
        "0070 ffffffff 0 BAR.SYNC 0 0 0",
        f"0080 ffffffff 0 STG.E 2 R6 R9 4 1 0x{base + 0x10000:x} 4 0",
        "0090 ffffffff 0 EXIT 0 0 0",
    ]


def valid_text() -> str:
    text = HEADER.format(shared=SHARED, rest="[adrrescompress?] [mem_addresses] immediate")
    for block in range(2):
        text += f"\n#BEGIN_TB\n\nthread block = {block},0,0\n"
        for warp in range(2):
            lines = warp_lines(block, warp)
            text += f"\nwarp = {warp}\ninsts = {len(lines)}\n" + "".join(line + "\n" for line in lines)
        text += "\n#END_TB\n"
    return text


VALID = valid_text()
VALID_LINES = VALID.splitlines()


def line_of(text: str, fragment: str) -> int:
    """The 1-based number of the first line of `text` holding `fragment`."""
    return next(n for n, line in enumerate(text.splitlines(), start=1) if fragment in line)


def write(path: Path, text: str | bytes) -> Path:
    data = text.encode("latin-1") if isinstance(text, str) else text
    path.write_bytes(lzma.compress(data) if path.name.endswith(".xz") else data)
    return path


def read_all(path: Path) -> TraceStreams:
    """Read every block and line of a trace (the instruction-mix pass); the streams hold the warnings."""
    _, streams = trace_mix(load_trace(path))
    return streams


def assert_one_line(message: str, path: Path, line: int | None = None) -> None:
    assert message.isprintable() and len(message) < 1000, message
    assert str(path) in message, message
    if line is not None:
        assert f"{path}:{line}:" in message, message


@pytest.mark.fast
def test_valid_trace_reads_and_runs_without_warnings(tmp_path):
    path = write(tmp_path / "k.traceg", VALID)
    streams = read_all(path)
    assert streams.warnings() == [] and streams.unknown == {}
    result = run(path, "a100", sms=2)
    assert result.warnings == []
    assert result.metrics["smsp__inst_executed.sum"] == 4 * 10


# --- 1. line length, endless streams, xz framing ---------------------------------------------------------------
@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
@pytest.mark.parametrize("name", ["k.traceg", "kernelslist.g"])
def test_endless_stream_is_an_overlong_first_line(tmp_path, worker, name):
    """A trace or command list that is a symlink to /dev/zero: one endless line of NUL bytes."""
    path = tmp_path / name
    path.symlink_to("/dev/zero")
    reply = worker.check(path)
    assert reply["outcome"] == "error", reply
    assert_one_line(reply["message"], path, 1)
    assert f"longer than {LINE_LIMIT:,} bytes" in reply["message"]


@pytest.mark.fast
def test_endless_stream_named_by_a_command_list(tmp_path, worker):
    (tmp_path / "kernel-1.traceg").symlink_to("/dev/zero")
    (tmp_path / "kernelslist.g").write_text("MemcpyHtoD,0x7fb0fc400000,256\nkernel-1.traceg\n")
    reply = worker.check(tmp_path / "kernelslist.g")
    assert reply["outcome"] == "error", reply
    assert_one_line(reply["message"], tmp_path / "kernel-1.traceg", 1)


def gib_line_xz(path: Path, prefix: str, gib: float = 1.5) -> Path:
    """An .xz file of ~250 KB holding `prefix` then one line of `gib` GiB: 16 MiB of 'f' compresses to 2.5 KB,
    and an xz file may be many streams one after another."""
    chunk = lzma.compress(b"f" * (16 << 20), check=lzma.CHECK_NONE)
    path.write_bytes(lzma.compress(prefix.encode()) + chunk * int(gib * 64) + lzma.compress(b"\n"))
    return path


def test_xz_holding_a_gigabyte_line_stops_at_the_limit(tmp_path, worker):
    prefix = VALID[:VALID.index("0000 ffffffff 1 R1 MOV")]
    path = gib_line_xz(tmp_path / "k.traceg.xz", prefix)
    assert path.stat().st_size < 260_000
    reply = worker.check(path)
    assert reply["outcome"] == "error", reply
    assert_one_line(reply["message"], path, prefix.count("\n") + 1)
    assert "longer than" in reply["message"] and reply["seconds"] < 5


def test_cli_reports_the_overlong_line_in_one_line(tmp_path):
    path = gib_line_xz(tmp_path / "k.traceg.xz", "", gib=0.25)
    p = run_cli("run", str(path), "--arch", "a100")
    assert p.returncode == 1 and p.stderr.startswith("error: ") and p.stderr.count("\n") == 1, p.stderr
    assert f"{path}:1: line longer than" in p.stderr


@pytest.mark.fast
def test_a_line_just_under_the_limit_is_read(tmp_path):
    """The limit is on bytes per line, newline included; a long but legal header line is fine."""
    name = "_Z" + "x" * (LINE_LIMIT - 40)
    text = VALID.replace("-kernel name = _Z6hostilePfS_", f"-kernel name = {name}")
    assert max(len(line) + 1 for line in text.splitlines()) < LINE_LIMIT
    assert load_trace(write(tmp_path / "k.traceg", text)).name == name
    with pytest.raises(TraceError, match=r"k.traceg:1: line longer than"):
        load_trace(write(tmp_path / "k.traceg", text.replace(name, name + "x" * 100)))


@pytest.mark.fast
@pytest.mark.parametrize("tail", [b"garbage!", b"\0\0\0\0garbage!", b"\xfd7zXZ\0not a stream"])
def test_garbage_after_the_xz_stream_is_an_error(tmp_path, tail):
    """Python's lzma module stops at the first stream and ignores what follows; gpusim does not."""
    path = tmp_path / "k.traceg.xz"
    path.write_bytes(lzma.compress(VALID.encode()) + tail)
    with pytest.raises(TraceError) as info:
        read_all(path)
    message = str(info.value)
    assert_one_line(message, path, len(VALID_LINES) + 1)
    assert "xz" in message


@pytest.mark.fast
def test_xz_streams_and_padding_are_read_whole(tmp_path):
    """Concatenated streams with NUL stream padding between them are one file (Python's lzma module would drop
    every stream after the padding)."""
    cut = VALID.index("thread block = 1")
    path = tmp_path / "k.traceg.xz"
    path.write_bytes(lzma.compress(VALID[:cut].encode()) + b"\0" * 8 + lzma.compress(VALID[cut:].encode()) + b"\0" * 4)
    plain = read_all(write(tmp_path / "k.traceg", VALID))
    assert read_all(path).blocks_read == plain.blocks_read == 2


def _dict_size_xz(data: bytes, code: int) -> bytes:
    """An xz stream whose LZMA2 filter claims the dictionary size `code` (40: 4 GiB - 1), its block-header CRC
    fixed: what a hostile header can ask the decoder to allocate."""
    raw = bytearray(lzma.compress(data, check=lzma.CHECK_NONE))
    start = 12  # after the stream header
    size = (raw[start] + 1) * 4
    header = raw[start:start + size]
    filters = header.index(b"\x21\x01")  # LZMA2, one property byte: the dictionary size
    header[filters + 2] = code
    header[-4:] = struct.pack("<I", zlib.crc32(bytes(header[:-4])))
    raw[start:start + size] = header
    return bytes(raw)


@pytest.mark.fast
def test_xz_decoder_memory_is_capped(tmp_path, worker):
    path = tmp_path / "k.traceg.xz"
    path.write_bytes(_dict_size_xz(VALID.encode(), 40))
    reply = worker.check(path)
    assert reply["outcome"] == "error", reply
    assert_one_line(reply["message"], path, 1)
    assert "MiB to decompress" in reply["message"]


def big_blocks_text(blocks: int, insts: int, line: str = "0000 ffffffff 0 NOP 0 0 0") -> str:
    """A trace of `blocks` one-warp blocks of `insts` identical lines each."""
    text = VALID.split("#BEGIN_TB")[0].replace("(2,1,1)", f"({blocks},1,1)").replace("(64,1,1)", "(32,1,1)")
    body = f"{line}\n" * insts
    for block in range(blocks):
        text += f"#BEGIN_TB\nthread block = {block},0,0\nwarp = 0\ninsts = {insts}\n{body}#END_TB\n"
    return text


@pytest.mark.fast
def test_a_block_too_large_to_hold_is_an_error(tmp_path, monkeypatch):
    """A warp's lines stay in memory while it runs: one block whose lines would pass the limit is an error at
    the line being read, before the memory is taken (a 200 KB xz can hold a block of 20 million lines)."""
    from gpusim.trace import reader

    monkeypatch.setattr(reader, "HELD_LIMIT", 4 << 20)
    path = write(tmp_path / "k.traceg.xz", big_blocks_text(1, 40_000))  # ~7 MB as Python lines
    with pytest.raises(TraceError) as info:
        read_all(path)
    message = str(info.value)
    assert_one_line(message, path)
    assert "thread block 0 does not fit: its lines would take more than 4 MiB of memory" in message
    assert int(re.search(r":(\d+): ", message).group(1)) < 40_000


def test_blocks_running_at_once_share_the_limit(tmp_path, monkeypatch):
    """20 blocks of ~0.5 MB (as Python lines) fit one at a time (the instruction-mix pass releases each block
    when its warps are done) but not all resident at once on 108 SMs."""
    from gpusim.trace import reader

    path = write(tmp_path / "k.traceg", big_blocks_text(20, 2500))
    monkeypatch.setattr(reader, "HELD_LIMIT", 2 << 20)
    assert read_all(path).blocks_read == 20
    with pytest.raises(TraceError, match=r"thread block \d+ does not fit: with the \d+ block\(s\) still running"):
        run(path, "a100")
    monkeypatch.undo()
    assert run(path, "a100").metrics["smsp__inst_executed.sum"] == 20 * 2500


@pytest.mark.benchmark
def test_an_xz_bomb_block_stops_at_the_default_limit(tmp_path):
    """A ~120 KB xz holding one block of 60 million lines: an error after ~2 GiB, not the 9 GiB its lines
    would take (in a worker allowed 3 GiB)."""
    from gpusim.trace.reader import HELD_LIMIT

    line = b"0000 ffffffff 0 NOP 0 0 0\n"
    chunk = lzma.compress(line * ((16 << 20) // len(line)), check=lzma.CHECK_NONE)
    head = big_blocks_text(1, 0).replace("insts = 0", "insts = 60000000").replace("#END_TB\n", "")
    path = tmp_path / "k.traceg.xz"
    path.write_bytes(lzma.compress(head.encode()) + chunk * 95 + lzma.compress(b"#END_TB\n"))
    worker = Worker(budget=HELD_LIMIT + (1 << 30))
    try:
        reply = worker.check(path, seconds=120)
    finally:
        worker.stop()
    assert reply["outcome"] == "error", reply
    assert "does not fit" in reply["message"]


# --- 3. non-ASCII bytes are reported at their line -------------------------------------------------------------
@pytest.mark.fast
@pytest.mark.parametrize("suffix", [".traceg", ".traceg.xz"])
def test_non_ascii_byte_is_reported_at_its_line(tmp_path, suffix):
    number = line_of(VALID, "thread block = 1")
    lines = VALID_LINES[:]
    lines[number - 1] = "thread block = 1,0,0 \u00e9"
    path = write(tmp_path / f"k{suffix}", "\n".join(lines) + "\n")
    with pytest.raises(TraceError) as info:
        read_all(path)
    assert_one_line(str(info.value), path, number)
    assert "byte 0xe9 at column 22 is not ASCII" in str(info.value)


@pytest.mark.fast
def test_non_ascii_byte_in_a_command_list_is_reported_at_its_line(tmp_path):
    write(tmp_path / "kernel-1.traceg", VALID)
    listing = write(tmp_path / "kernelslist.g", "MemcpyHtoD,0x7fb0fc400000,256\n\nkernel-1.traceg \xff\n")
    with pytest.raises(TraceError) as info:
        read_command_list(listing)
    assert_one_line(str(info.value), listing, 3)


@pytest.mark.fast
@pytest.mark.parametrize("line,message", [
    ("MemcpyHtoD,0x7fb0fc400000", "expected 'MemcpyHtoD,0xADDRESS,BYTES'"),
    ("MemcpyHtoD,0x7fb0fc400000,-5", "expected 'MemcpyHtoD,0xADDRESS,BYTES'"),
    ("MemcpyHtoD garbage", "expected 'MemcpyHtoD,0xADDRESS,BYTES'"),
    ("kernel-1\0.traceg", "NUL byte at column 9"),
    ("k" * 5000 + ".traceg", "cannot be looked up"),
    ("kernel-2.traceg", "not found"),
    ("kernel\x07.txt", "expected a memcpy line or a kernel trace file name"),
])
def test_bad_command_list_lines(tmp_path, line, message):
    write(tmp_path / "kernel-1.traceg", VALID)
    listing = write(tmp_path / "kernelslist.g", f"kernel-1.traceg\n{line}\n")
    with pytest.raises(TraceError) as info:
        read_command_list(listing)
    assert_one_line(str(info.value), listing, 2)
    assert message in str(info.value)


# --- 2. what the format cannot hold is an error with file and line ---------------------------------------------
LDG = f"0020 ffffffff 1 R4 LDG.E 1 R2 4 1 0x{GLOBAL:x} 4 0"  # block 0, warp 0's mode-1 load
LDG64 = "0030 0000ffff 1 R6 LDG.E.64 1 R2 8 0 "  # its mode-0 load (16 addresses follow)
LDS = f"0040 0f0f0f0f 1 R8 LDS.U.128 1 R3 16 2 0x{SHARED + 0x100:x} 16 16 16 -48"  # its mode-2 load


@pytest.mark.fast
@pytest.mark.parametrize("old,new,message", [
    # addresses outside [0, 2^63): the tracer writes unsigned 64-bit addresses, numpy lanes are signed
    (LDG, LDG.replace(f"0x{GLOBAL:x}", "0x8000000000000000"),
     "address 0x8000000000000000: expected a virtual address from 0 to 0x7fffffffffffffff"),
    (LDG, LDG.replace(f"0x{GLOBAL:x}", "0xffffffffffffffff"), "address 0xffffffffffffffff"),
    (LDG, LDG.replace(f"0x{GLOBAL:x}", "0x1" + "0" * 40), "expected a virtual address"),
    (LDG, LDG.replace(f"0x{GLOBAL:x}", "-0x40"), "address -0x40"),
    (LDG, LDG.replace(f"0x{GLOBAL:x} 4", "0x7ffffffffffffff0 4"), "address 0x800000000000006c"),  # wraps
    (LDG, LDG.replace(f"0x{GLOBAL:x} 4", "0x40 -4"), "address -0x3c"),
    (LDG64, LDG64 + "0x8000000000000000 ", "address 0x8000000000000000"),
    (LDG64, LDG64 + "-0x8 ", "address -0x8"),
    (LDS, LDS.replace("16 16 16 -48", "16 16 16 -99999999999999999999"), "address -0x56bc6df2d630ffecf"),
    (LDS, LDS.replace("16 16 16 -48", "9223372036854775807 16 16 -48"), "address 0x80007f"),
    # widths a memory instruction cannot have
    (LDG, LDG.replace(" 4 1 ", " 3 1 "), "bad field 8: expected the memory width"),
    (LDG, LDG.replace(" 4 1 ", " 1000 1 "), "got '1000'"),
    (LDG, LDG.replace(" 4 1 ", " -4 1 "), "got '-4'"),
    (LDG, LDG.replace(" 4 1 ", " 64 1 "), "got '64'"),
    (LDG, LDG.replace(" 4 1 ", " 99999999999999999999999 1 "), "expected the memory width"),
    # PCs, masks, counts, modes
    (LDG, LDG.replace("0020 ", "-020 "), "bad field 1: expected the PC (hex), got '-020'"),
    (LDG, LDG.replace("0020 ", "0x8000000000000000 "), "expected the PC"),
    (LDG, LDG.replace("ffffffff", "-fffffff"), "expected the active mask"),
    (LDG, LDG.replace("ffffffff", "fffffffff"), "got 'fffffffff'"),
    (LDG, LDG.replace("ffffffff", "ff_fffff"), "bad field 2: expected plain digits, got 'ff_fffff'"),
    (LDG, LDG.replace("1 R4 LDG", "-1 R4 LDG"),
     "bad field 3: expected the number of destination registers (0 to 255), got '-1'"),
    (LDG, LDG.replace("LDG.E 1 R2", "LDG.E 99999999 R2"), "got '99999999'"),
    (LDG, LDG.replace("LDG.E 1 R2", "LDG.E 2 R2"), "expected 2 register names, found '4'"),
    (LDG, LDG.replace(" 4 1 ", " 4 -1 "),
     "bad field 9: address mode -1: expected 0 (list), 1 (base+stride) or 2 (base+deltas)"),
    (LDG, LDG.replace(" 4 1 ", " 4 +1 "), "got '+1'"),
    (LDG, LDG.replace(" 4 0", " 4_0 0"), "bad field"),
    (LDG, LDG.replace(f"0x{GLOBAL:x}", f"0x{GLOBAL:x}_0"), "got '0x7fb0fc400000_0'"),
    (LDG, LDG.replace(f"0x{GLOBAL:x}", "0xzz"), "bad field 10: expected a hex address or a decimal stride"),
    (LDG, LDG.replace(" 4 1 ", " 4 1 0x40 4 0 0 0 0 "), "fields left after the instruction"),
    (LDG, LDG.replace("LDG.E", "\x01LDG.E"), "expected an opcode"),
    (LDG, LDG.replace("LDG.E", "LD\x01G.E"), "found 'LD\\x01G.E'"),
    (LDG, LDG.replace(" 4 0", " 4 ffffffffff"),
     "bad field 12: expected an immediate (a decimal number), got 'ffffffffff'"),
    (LDG, LDG.replace(" 4 0", " 4 18446744073709551616"), "expected an immediate"),
    (LDG, LDG.replace("R4 LDG", "R\x7f4 LDG"), "found 'R\\x7f4'"),
])
def test_what_the_format_cannot_hold_is_an_error_naming_file_and_line(tmp_path, old, new, message):
    assert old in VALID
    text = VALID.replace(old, new, 1)
    path = write(tmp_path / "k.traceg", text)
    with pytest.raises(TraceError) as info:
        read_all(path)
    assert_one_line(str(info.value), path, line_of(VALID, old))
    assert message in str(info.value)


@pytest.mark.fast
@pytest.mark.parametrize("old,new,message", [
    ("-kernel id = 1", "-kernel id = -1", "-kernel id: expected a decimal number from 0"),
    ("-shmem = 1024", "-shmem = +1024", "got '+1024'"),
    ("-shmem = 1024", "-shmem = 1_024", "got '1_024'"),
    ("-nregs = 32", "-nregs = 0", "-nregs: expected a decimal number from 1 to 255, got '0'"),
    ("-nregs = 32", "-nregs = 256", "from 1 to 255"),
    ("-binary version = 80", "-binary version = 0", "-binary version: expected a decimal number from 1"),
    ("-binary version = 80", "-binary version = -80", "got '-80'"),
    ("-binary version = 80", "-binary version = 8.0", "got '8.0'"),
    ("-enable lineinfo = 0", "-enable lineinfo = 2", "from 0 to 1, got '2'"),
    ("-grid dim = (2,1,1)", "-grid dim = (0,1,1)", "expected (x,y,z) with sizes from 1 to (2147483647,65535,65535)"),
    ("-grid dim = (2,1,1)", "-grid dim = (2,65536,1)", "(CUDA's launch limits)"),
    ("-grid dim = (2,1,1)", "-grid dim = (2,1)", "expected (x,y,z) with positive sizes"),
    ("-block dim = (64,1,1)", "-block dim = (64,1,65)", "from 1 to (1024,1024,64)"),
    ("-block dim = (64,1,1)", "-block dim = (64,32,1)", "2048 threads, expected at most 1024 per block"),
    ("-shmem base_addr = 0x00007f0000000000", "-shmem base_addr = 0x8000000000000000", "expected a hex number"),
    ("-shmem base_addr = 0x00007f0000000000", "-shmem base_addr = 0xg", "got '0xg'"),
    ("-kernel name = _Z6hostilePfS_", "-kernel name =", "-kernel name: expected the kernel's (mangled) name"),
    ("-accelsim tracer version = 5", "-accelsim tracer version = 5\x00", "NUL byte at column 29"),
    ("-accelsim tracer version = 5", "-accelsim tracer version = 5\x01", "got '5\\x01'"),
])
def test_bad_header_values_are_errors_at_their_line(tmp_path, old, new, message):
    text = VALID.replace(old, new, 1)
    path = write(tmp_path / "k.traceg", text)
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert_one_line(str(info.value), path, line_of(VALID, old))
    assert message in str(info.value)


@pytest.mark.fast
@pytest.mark.parametrize("key", ["-nregs = 32", "-grid dim = (2,1,1)", "-accelsim tracer version = 5",
                                 "-cuda stream id = 0"])
@pytest.mark.parametrize("same", [True, False])
def test_a_duplicate_header_key_names_both_lines(tmp_path, key, same):
    first = line_of(VALID, key)
    again = key if same else key.replace("= ", "= 1")
    lines = VALID_LINES[:]
    lines.insert(13, again)  # after -enable lineinfo
    path = write(tmp_path / "k.traceg", "\n".join(lines) + "\n")
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert_one_line(str(info.value), path, 14)
    assert f"given twice (lines {first} and 14)" in str(info.value)


@pytest.mark.fast
@pytest.mark.parametrize("old,new,message", [
    ("thread block = 1,0,0", "thread block = 2,0,0", "thread block = 2,0,0 is outside -grid dim (2, 1, 1)"),
    ("thread block = 1,0,0", "thread block = 0,1,0", "is outside -grid dim"),
    ("thread block = 1,0,0", "thread block = 0,0,0", "thread block = 0,0,0 appears a second time"),
    ("thread block = 1,0,0", "thread block = -1,0,0", "expected 'thread block = x,y,z'"),
    ("thread block = 1,0,0", "thread block = 1,0", "expected 'thread block = x,y,z'"),
    ("thread block = 1,0,0", "thread block = 1_0,0,0", "expected 'thread block = x,y,z'"),
    ("thread block = 1,0,0", "thread block = 1,0,0\nthread block = 1,0,0", "a second 'thread block"),
    ("thread block = 1,0,0\n\nwarp = 0", "warp = 0\nthread block = 1,0,0", "'warp = N' before 'thread block"),
    ("warp = 1\ninsts = 10", "warp = 1\ninsts = -10", "insts: expected a decimal number from 0"),
    ("warp = 1\ninsts = 10", "warp = +1\ninsts = 10", "warp: expected a decimal number from 0 to 1, got '+1'"),
    ("warp = 1\ninsts = 10", "warp = 2\ninsts = 10", "warp: expected a decimal number from 0 to 1, got '2'"),
    ("warp = 1\ninsts = 10", "warp = 1\nwarp = 1\ninsts = 10", "has no 'insts = N' line"),
    ("warp = 1\ninsts = 10", "warp = 1 2\ninsts = 10", "expected 'warp = N'"),
    ("warp = 1\ninsts = 10", "warp = 1\ninsts = 10 x", "expected 'insts = N'"),
])
def test_bad_block_structure_is_an_error_at_its_line(tmp_path, old, new, message):
    text = VALID.replace(old, new, 1)
    assert text != VALID
    path = write(tmp_path / "k.traceg", text)
    with pytest.raises(TraceError) as info:
        read_all(path)
    assert_one_line(str(info.value), path)
    assert re.search(re.escape(str(path)) + r":\d+: ", str(info.value))
    assert message in str(info.value)


@pytest.mark.fast
def test_blocks_in_any_order_each_once_are_read():
    from gpusim.trace.reader import _Runs

    runs = _Runs()
    order = [5, 3, 4, 0, 9, 1, 2, 8, 6, 7]
    assert all(runs.add(v) for v in order)
    assert runs.starts == [0] and runs.ends == [10]
    assert not any(runs.add(v) for v in order)


# --- 2. what is legal but odd is a counted warning -------------------------------------------------------------
@pytest.mark.fast
def test_misaligned_addresses_are_a_counted_warning(tmp_path):
    """Every block's mode-1 loads move by 2 bytes: 4 lines whose 4-byte lanes are not 4-aligned."""
    text = re.sub(r"(LDG\.E 1 R2 4 1 0x[0-9a-f]+)0 4 0", r"\g<1>2 4 0", VALID)
    path = write(tmp_path / "k.traceg", text)
    streams = read_all(path)
    [warning] = streams.warnings()
    assert warning.startswith(f"{path}: 4 line(s) with addresses that are not a multiple of the access width")
    assert f"first at line {line_of(text, 'LDG.E 1 R2 4 1')}, LDG.E" in warning
    result = run(path, "a100", sms=2)
    assert result.metrics["smsp__inst_executed.sum"] == 40  # simulated as written
    assert warning in result.warnings  # and the run says so


@pytest.mark.fast
def test_a_memory_opcode_of_width_zero_under_a_mask_is_a_counted_warning(tmp_path):
    text = re.sub(r"LDG\.E 1 R2 4 1 0x[0-9a-f]+ 4 0", "LDG.E 1 R2 0 0", VALID)
    path = write(tmp_path / "k.traceg", text)
    [warning] = read_all(path).warnings()
    assert f"{path}: 4 line(s) with a memory opcode, active lanes and width 0" in warning
    sectors = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
    valid = write(tmp_path / "v.traceg", VALID)
    result = run(path, "a100", sms=2)
    assert result.metrics[sectors] < run(valid, "a100", sms=2).metrics[sectors]
    assert any("width 0" in w for w in result.warnings)


@pytest.mark.fast
def test_predicated_off_and_constant_loads_are_not_odd(tmp_path):
    """The valid trace has an LDG under mask 0 and an LDC of width 0 in every warp: no warning."""
    assert read_all(write(tmp_path / "k.traceg", VALID)).warnings() == []


@pytest.mark.fast
def test_header_keys_no_tracer_writes_are_a_warning(tmp_path):
    """A mistyped optional key (here `-enable line info`) is not silently taken for a known one."""
    text = VALID.replace("-enable lineinfo = 0", "-enable line info = 1").replace("-nvbit version", "-nvbit  version")
    path = write(tmp_path / "k.traceg", text)
    [warning] = run(path, "a100", sms=2).warnings
    assert warning == (f"{path}: 2 header key(s) no Accel-Sim tracer writes, ignored: -nvbit  version (line 11), "
                       f"-enable line info (line 13)")


@pytest.mark.fast
@pytest.mark.parametrize("version", [80, 90, 61, 999, 1])
def test_binary_versions_no_gpu_has_are_warned_about(tmp_path, version):
    path = write(tmp_path / "k.traceg", VALID.replace("-binary version = 80", f"-binary version = {version}"))
    result = run(path, "a100", sms=2)
    assert bool(result.warnings) == (version != 80)
    assert any("no GPU has" in w for w in result.warnings) == (version in (61, 999, 1))
    assert all(w.startswith(str(path)) and w.isprintable() for w in result.warnings)


# --- generated hostile input -----------------------------------------------------------------------------------
WORKER = r"""
import faulthandler, json, resource, sys, time, traceback
from gpusim.api import run
from gpusim.errors import GpusimError

budget = int(sys.argv[1])
with open("/proc/self/statm") as fh:
    mapped = int(fh.read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (mapped + budget, mapped + budget))

for request in sys.stdin:
    path, seconds = json.loads(request)
    started = time.perf_counter()
    # past its time, a case ends the worker with every thread's stack on stderr (a C thread: a loop in C that
    # no Python signal handler would interrupt is ended too); the parent reports it as died, with that stack
    faulthandler.dump_traceback_later(seconds, exit=True)
    try:
        result = run(path, "a100", sms=2)
        reply = {"outcome": "result", "warnings": result.warnings}
    except GpusimError as exc:
        reply = {"outcome": "error", "message": str(exc)}
    except BaseException as exc:
        reply = {"outcome": "crash", "message": traceback.format_exc()[-3000:]}
    finally:
        faulthandler.cancel_dump_traceback_later()
    reply["seconds"] = time.perf_counter() - started
    print(json.dumps(reply), flush=True)
"""
MEMORY_BUDGET = 768 << 20  # address space a case may add to the worker's
TIME_BUDGET = 10  # seconds a case may take


class Worker:
    """A gpusim process that runs one path per request under an address-space limit and a time limit; a case
    that crashes, hangs or dies is reported, and the worker started again."""

    def __init__(self, budget: int = MEMORY_BUDGET):
        self.proc = None
        self.budget = budget
        self.start()

    def start(self):
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, "-c", WORKER, str(self.budget)], cwd=ROOT, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr)

    def stop(self):
        self.proc.kill()
        self.proc.wait()

    def check(self, path: Path, seconds: int = TIME_BUDGET) -> dict:
        self.proc.stdin.write(json.dumps([str(path), seconds]) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], seconds + 30)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            outcome = "hang" if not ready else "died"
            self.stop()
            self.stderr.seek(0)
            said = self.stderr.read().decode(errors="replace")[-2000:]
            self.start()
            return {"outcome": outcome, "seconds": float(seconds), "stderr": said}
        reply = json.loads(line)
        if reply["outcome"] == "crash":  # a MemoryError or a traceback: start clean for the next case
            self.stop()
            self.start()
        return reply


@pytest.fixture(scope="module")
def worker():
    if sys.platform != "linux":
        pytest.skip("the worker's memory limit reads /proc and sets RLIMIT_AS (Linux)")
    w = Worker()
    yield w
    w.stop()


HUGE = ["-1", "0", "3", "1000", "+4", "1_0", "18446744073709551616", "9223372036854775808", "0x8000000000000000",
        "-9223372036854775809", "99999999999999999999", "0x" + "f" * 40, "1" * 5000, "ffffffffff", "0x",
        "-0x10", "7fffffffffffffff"]
ODD_BYTES = [b"\0", b"\xff", b"\x80", b"\r", b"\x0b", b"\x1c", b"\t", b" ", b"=", b",", b"#", b"-", b"\n"]


class Case:
    """A mutated trace: what was done, its bytes, and whether it must be an error (the repr stays short)."""

    def __init__(self, kind: str, data: bytes, must_fail: bool = False):
        self.kind, self.data, self.must_fail = kind, data, must_fail

    def __repr__(self) -> str:
        at = next((i for i, (a, b) in enumerate(zip(self.data, VALID.encode())) if a != b), len(self.data))
        return f"Case({self.kind!r}, {len(self.data)} bytes, first change at {at}: {self.data[at:at + 80]!r})"


KINDS = ["flip", "truncate", "number", "width", "mask", "address", "overlong", "duplicate_header", "duplicate_line",
         "drop_line", "swap_lines", "odd_byte", "token", "block_id"]


@st.composite
def hostile(draw, kind: str) -> Case:
    """A mutated valid trace: byte flips, truncations, huge numbers, bad widths, masks and addresses, overlong
    lines, duplicated header lines and lines, odd bytes, swapped or dropped lines, bad block ids."""
    lines = VALID_LINES[:]
    numbered = [n for n, line in enumerate(lines) if re.match(r"[0-9a-f]{4} [0-9a-f]{8} ", line)]  # instructions
    memory = [n for n in numbered if " 0x" in lines[n]]  # instruction lines with addresses
    if kind == "flip":
        data = bytearray(VALID.encode())
        for _ in range(draw(st.integers(1, 4))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        return Case(kind, bytes(data), must_fail=bool(re.search(rb"[\x80-\xff\0]", data)))
    if kind == "truncate":
        return Case(kind, VALID.encode()[:draw(st.integers(0, len(VALID) - 1))])
    if kind == "odd_byte":
        data = VALID.encode()
        at = draw(st.integers(0, len(data)))
        byte = draw(st.sampled_from(ODD_BYTES))
        return Case(kind, data[:at] + byte + data[at:], must_fail=byte in b"\x80\xff\0")
    if kind in ("number", "width", "mask", "address", "token"):
        n = draw(st.sampled_from(memory if kind in ("width", "address") else numbered))
        fields = lines[n].split()
        if kind == "number":
            numeric = [i for i, f in enumerate(fields) if re.fullmatch(r"-?(0x)?[0-9a-f]+", f)]
            fields[draw(st.sampled_from(numeric))] = draw(st.sampled_from(HUGE))
        elif kind == "width":
            ndst = int(fields[2])
            at = 5 + ndst + int(fields[4 + ndst])  # after the opcode and the source registers
            fields[at] = draw(st.sampled_from(["0", "3", "1000", "-4", "64", "2", str(2**70), "x"]))
        elif kind == "mask":
            fields[1] = draw(st.sampled_from(["-1", "ffffffffff", "0", "-fffffff", "g", "1_0", "80000001", "+f"]))
        elif kind == "address":
            at = draw(st.sampled_from([i for i, f in enumerate(fields) if f.startswith("0x")]))
            fields[at] = draw(st.sampled_from(["-0x10", "0x8000000000000000", "0x7ffffffffffffffc", "0x1001",
                                               "0x" + "f" * 17, "-1", "0x7fffffffffffff00", "0"]))
        else:
            at = draw(st.integers(0, len(fields)))
            if draw(st.booleans()) and at < len(fields):
                del fields[at]
            else:
                fields.insert(at, draw(st.sampled_from(HUGE + ["R7", "EXIT", "LDG.E"])))
        lines[n] = " ".join(fields)
    elif kind == "overlong":  # a line of exactly LINE_LIMIT bytes, newline included, is the longest read
        length = draw(st.integers(LINE_LIMIT - 10, 4 * LINE_LIMIT))
        fill = draw(st.sampled_from(["0", "f", " ", "0x10 "]))
        lines.insert(draw(st.integers(0, len(lines))), (fill * length)[:length])
        return Case(kind, ("\n".join(lines) + "\n").encode(), must_fail=length >= LINE_LIMIT)
    elif kind == "duplicate_header":
        n = draw(st.integers(0, 12))
        value = draw(st.sampled_from(["", "1", "(1,1,1)", "0x10"]))
        lines.insert(draw(st.integers(n + 1, 13)), lines[n] if not value else lines[n].split("=")[0] + "= " + value)
        return Case(kind, ("\n".join(lines) + "\n").encode(), must_fail=True)
    elif kind == "duplicate_line":
        n = draw(st.integers(0, len(lines) - 1))
        lines.insert(draw(st.integers(0, len(lines))), lines[n])
    elif kind == "drop_line":
        del lines[draw(st.integers(0, len(lines) - 1))]
    elif kind == "swap_lines":
        a, b = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
        lines[a], lines[b] = lines[b], lines[a]
    elif kind == "block_id":
        n = line_of(VALID, f"thread block = {draw(st.integers(0, 1))}") - 1
        ids = draw(st.lists(st.sampled_from(["0", "1", "2", "-1", "4294967296", "1_0", "+1"]), min_size=1,
                            max_size=4))
        lines[n] = "thread block = " + ",".join(ids)
    return Case(kind, ("\n".join(lines) + "\n").encode())


def _container(draw_data: bytes, how: str, directory: Path) -> tuple[Path, Path]:
    """(the path to run, the trace file inside it) for the mutated bytes as a plain trace, an .xz trace (some
    with bytes after the stream) or a trace named by a command list."""
    if how == "xz":
        return (write(directory / "kernel-1.traceg.xz", draw_data),) * 2
    if how == "xz+tail":
        path = directory / "kernel-1.traceg.xz"
        path.write_bytes(lzma.compress(draw_data) + b"\0\0\0\0tail")
        return path, path
    trace = write(directory / "kernel-1.traceg", draw_data)
    if how == "list":
        return write(directory / "kernelslist.g", "MemcpyHtoD,0x7fb0fc400000,512\nkernel-1.traceg\n"), trace
    return trace, trace


def check_hostile(worker: Worker, directory: Path, case: Case, how: str) -> dict:
    kind = case.kind
    path, trace = _container(case.data, how, directory)
    reply = worker.check(path)
    event(f"{kind}: {reply['outcome']}")
    assert reply["outcome"] in ("result", "error"), (kind, how, reply)
    assert reply["seconds"] < TIME_BUDGET, (kind, reply)
    if reply["outcome"] == "error":
        message = reply["message"]
        assert message.isprintable() and len(message) < 1000, (kind, message)
        assert str(trace) in message or str(path) in message, (kind, message)
        event("error names the line" if re.search(r"\.(traceg|xz|g):\d+: ", message) else "error names the file")
    if how == "xz+tail" or case.must_fail:
        assert reply["outcome"] == "error", (kind, reply)
    return reply


CONTAINERS = st.sampled_from(["plain", "plain", "plain", "xz", "xz+tail", "list"])


@pytest.mark.fast
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.timeout(12 * TIME_BUDGET)
def test_generated_hostile_traces_give_a_result_or_one_line_error(tmp_path_factory, worker, kind):
    """12 cases of each kind (168 in all, about 10 s)."""

    @settings(max_examples=12, deadline=None, database=None)
    @given(hostile(kind), CONTAINERS)
    def check(case, how):
        check_hostile(worker, tmp_path_factory.mktemp("h"), case, how)

    check()


@pytest.mark.benchmark
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.timeout(400 * TIME_BUDGET)
def test_generated_hostile_traces_large(tmp_path_factory, worker, kind):
    """400 cases of each kind (5,600 in all, several minutes)."""

    @settings(max_examples=400, deadline=None, database=None)
    @given(hostile(kind), CONTAINERS)
    def check(case, how):
        check_hostile(worker, tmp_path_factory.mktemp("h"), case, how)

    check()


def test_the_stated_count_reader_holds_hostile_files_to_the_same_bounds(tmp_path):
    """warp_instruction_count (the `insts = N` lines read as bytes, for a sampling plan) reads in bounded memory and
    refuses a line with no end in sight (past LINE_LIMIT after a chunk), xz data that is corrupt or has garbage
    after its stream, and a missing file; each a one-line TraceError naming the file (a long line within a chunk
    is the block reader's to name, with its line number, when the run reads it)."""
    from gpusim.trace.reader import warp_instruction_count

    long = tmp_path / "long.traceg"
    long.write_bytes(b"-kernel name = k\ninsts = 3\n" + b"x" * (2 << 20))
    corrupt = tmp_path / "corrupt.traceg.xz"
    corrupt.write_bytes(lzma.compress(b"insts = 3\n" * 1000)[:-40])
    garbage = tmp_path / "garbage.traceg.xz"
    garbage.write_bytes(lzma.compress(b"insts = 3\n") + b"not xz")
    for path, why in ((long, "line longer than"), (corrupt, "corrupt or truncated xz data"),
                      (garbage, "data after the end of the xz stream"), (tmp_path / "absent.traceg", "cannot open")):
        with pytest.raises(TraceError) as caught:
            warp_instruction_count(path)
        message = str(caught.value)
        assert message.startswith(str(path)) and why in message and "\n" not in message, message
    plain = tmp_path / "ok.traceg"
    plain.write_bytes(b"warp = 0\ninsts = 3\n  insts = 4\r\ninsts=5\ninstsx = 9\n# insts = 7\n")
    assert warp_instruction_count(plain) == 12
