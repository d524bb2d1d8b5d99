"""Streaming reader for Accel-Sim kernel traces (`kernel-N.traceg`, or `.traceg.xz` through lzma).

The header is read when the trace is opened; thread-block sections are read one at a time, in file order, when
the dispatcher asks for them, so memory holds a few blocks' lines however large the file is. Every count the
file states (instructions per warp, warps per block, blocks per grid) is checked against what it holds; any
problem is a TraceError naming the file and line number.

Input is held to bounds whatever it is (a symlink to /dev/zero, an .xz bomb): a line is at most LINE_LIMIT bytes,
plain ASCII without NUL bytes, the xz decoder gets XZ_MEMORY_LIMIT and anything after the last xz stream is an
error. Header values are plain digits within CUDA's limits, each key given once; every block id lies in the
grid and appears once.
"""

from __future__ import annotations

import bisect
import io
import lzma
import re
from pathlib import Path
from typing import Iterator

import attrs

from ..errors import GpusimError
from ..workload.kernel import Launch

SUPPORTED_VERSIONS = (4, 5, 6)
LINE_LIMIT = 65536  # bytes per line, newline included: an instruction line with 32 addresses is under 1 KiB
XZ_MEMORY_LIMIT = 256 << 20  # the xz decoder's memory (xz -9 needs 65 MiB)
HELD_LIMIT = 2 << 30  # memory the lines of the blocks still running may take (Python objects, estimated)
LINE_COST = 150  # bytes a held line takes beyond its text (its str, tuple and list slot)
_CHUNK = 1 << 16
_TOO_LONG = (f"line longer than {LINE_LIMIT:,} bytes: expected an Accel-Sim line (the longest, an instruction with "
             f"32 addresses, is under 1 KiB)")
_DIM = re.compile(r"\(\s*([0-9]{1,10})\s*,\s*([0-9]{1,10})\s*,\s*([0-9]{1,10})\s*\)\Z")
_CTAID = re.compile(r"thread block\s*=\s*([0-9]{1,10})\s*,\s*([0-9]{1,10})\s*,\s*([0-9]{1,10})\Z")
_KEYED = re.compile(r"(\w+)\s*=\s*(\S+)\Z")  # warp = N, insts = N
_DEC = re.compile(r"[0-9]{1,19}\Z")
_HEX = re.compile(r"(?:0[xX])?[0-9a-fA-F]{1,16}\Z")
ADDRESS_LIMIT = 1 << 63  # addresses, PCs and counts: what a signed 64-bit number holds
GRID_LIMITS = (2**31 - 1, 65535, 65535)  # CUDA's launch limits
BLOCK_LIMITS = (1024, 1024, 64)
THREADS_LIMIT = 1024
_REQUIRED = ("kernel name", "grid dim", "block dim", "shmem", "nregs", "binary version", "accelsim tracer version")
_OPTIONAL = ("kernel id", "cuda stream id", "shmem base_addr", "local mem base_addr", "nvbit version",
             "enable lineinfo")


class TraceError(GpusimError):
    """A trace file that cannot be read as the Accel-Sim format."""


@attrs.frozen
class TraceHeader:
    kernel_name: str
    kernel_id: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_memory_bytes: int
    registers_per_thread: int
    binary_version: int  # 80 for an sm_80 binary
    tracer_version: int
    lineinfo: bool
    shared_base: int
    local_base: int
    lines: int  # header lines, up to the first thread block
    unknown_keys: tuple[str, ...] = ()  # '-key (line N)' for keys no Accel-Sim tracer writes: ignored


@attrs.frozen
class TraceBlock:
    ordinal: int  # position in the file (the dispatch order)
    ctaid: tuple[int, int, int]
    warps: list  # per warp in the block: [(line number, instruction line), ...]
    memory: int = 0  # what its lines take in memory, estimated (to a chunk of the file)


class _XzStreams(io.RawIOBase):
    """The decompressed bytes of an `.xz` file: its streams one after another (NUL stream padding allowed between
    and after them). Anything else after the last stream is an error: Python's lzma module would drop it, and
    with it any stream that follows padding. The decoder's memory is capped (a hostile header can ask for 4 GiB)."""

    def __init__(self, raw):
        self.raw = raw
        self.decoder = lzma.LZMADecompressor(memlimit=XZ_MEMORY_LIMIT)
        self.done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.read_chunk(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def read_chunk(self, size: int) -> bytes:
        """Up to `size` decompressed bytes (b"" at the end); an error comes only after the good data before it."""
        while not self.done:
            decoder = self.decoder
            if decoder.eof:  # the stream ended: padding, another stream, or the end of the file
                rest = decoder.unused_data.lstrip(b"\0")
                while not rest:
                    chunk = self.raw.read(_CHUNK)
                    if not chunk:
                        self.done = True
                        return b""
                    rest = chunk.lstrip(b"\0")
                self.decoder = lzma.LZMADecompressor(memlimit=XZ_MEMORY_LIMIT)
                try:
                    data = self.decoder.decompress(rest, size)
                except lzma.LZMAError:
                    raise _XzError("data after the end of the xz stream is not another xz stream "
                                   "(garbage appended to the file?)") from None
            else:
                chunk = self.raw.read(_CHUNK) if decoder.needs_input else b""
                if decoder.needs_input and not chunk:
                    raise _XzError("corrupt or truncated xz data (the file ends inside a compressed stream)")
                try:
                    data = decoder.decompress(chunk, size)
                except lzma.LZMAError as exc:
                    if "memory" in str(exc).lower():
                        raise _XzError(f"the xz stream needs more than {XZ_MEMORY_LIMIT >> 20} MiB to decompress "
                                       f"(recompress with xz -9 or a lower preset)") from None
                    raise _XzError(f"corrupt or truncated xz data ({exc})") from None
            if data:
                return data
        return b""

    def close(self) -> None:
        self.raw.close()
        super().close()


class _XzError(Exception):
    """A problem with the compressed bytes (the line reader adds the file and line)."""


def _open_bytes(path: Path):
    """(the open file, a function reading up to N of its bytes): an `.xz` file's decompressed (_XzStreams), or a
    one-line TraceError naming the file where it cannot be opened."""
    try:
        raw = open(path, "rb", buffering=0)
    except OSError as exc:
        raise TraceError(f"{path}: cannot open ({exc.strerror or exc})") from None
    if path.suffix == ".xz":
        fh = _XzStreams(raw)
        return fh, fh.read_chunk
    return raw, raw.read


def printable(text: str, limit: int = 60) -> str:
    """`text` cut to `limit` characters, control characters escaped: safe to quote in a one-line message."""
    cut = text[:limit]
    if not cut.isprintable():
        cut = cut.encode("unicode_escape").decode("ascii")
    return cut + ("..." if len(text) > limit else "")


class Lines:
    """Numbered lines of a text file (`.xz` decompressed on the fly), each under LINE_LIMIT bytes and ASCII;
    read errors (bad bytes, corrupt xz, an overlong line) become TraceErrors naming the file and line. Every
    `for line in lines` continues where the last one stopped; `number` is the last line's. Lines come without
    their newline."""

    def __init__(self, path: Path):
        self.path = path
        self.fh, read = _open_bytes(path)
        self.number = 0
        self.memory = 0  # what the lines read so far take as Python objects (estimated a chunk at a time)
        self.stop_at: tuple[int, str] | None = None  # (memory, message): an error once past it
        self._lines = self._read(read)

    def __iter__(self):
        return self._lines

    def _read(self, read):
        """Chunks of the file split into lines in C (as fast as a text file's readline): memory holds one chunk
        and one partial line, and a bad byte is reported at its line."""
        number, rest = 0, b""
        while True:
            try:
                chunk = read(_CHUNK)
            except _XzError as exc:
                raise TraceError(f"{self.path}:{number + 1}: {exc}") from None
            except OSError as exc:
                raise TraceError(f"{self.path}:{number + 1}: read error ({exc.strerror or exc})") from None
            self.memory += len(chunk) + LINE_COST * chunk.count(b"\n")
            if self.stop_at is not None and self.memory > self.stop_at[0]:
                raise self._error(number + 1, self.stop_at[1])  # the line being read
            if not chunk:
                if rest:  # a last line without a newline
                    self.number = number + 1
                    yield self._text(rest + b"\n", number)[0]
                return
            data = rest + chunk if rest else chunk
            cut = data.rfind(b"\n") + 1
            rest = data[cut:]
            if cut:
                for line in self._text(data[:cut], number):
                    number += 1
                    self.number = number
                    yield line
            if len(rest) >= LINE_LIMIT:  # no end in sight
                raise self._error(number + 1, _TOO_LONG)

    def _text(self, data: bytes, number: int) -> list[str]:
        """The lines of `data` (whole lines, after line `number`), or the first problem among them."""
        try:
            text = data.decode("ascii")
        except UnicodeDecodeError as exc:
            text = None
            bad = exc.start
        else:
            bad = data.find(0)  # ASCII, but never in a text file: a zero-filled block of a damaged file, /dev/zero
        lines = (text or "").split("\n")
        if bad < 0 and (len(data) <= LINE_LIMIT or max(map(len, lines)) < LINE_LIMIT):
            lines.pop()  # after the last newline
            return lines
        long = next((n for n, line in enumerate(data.split(b"\n")) if len(line) >= LINE_LIMIT), None)
        if bad >= 0 and (long is None or data.count(b"\n", 0, bad) <= long):
            column = bad - data.rfind(b"\n", 0, bad)
            what = "NUL byte at column" if data[bad] == 0 else f"byte 0x{data[bad]:02x} at column"
            raise self._error(number + 1 + data.count(b"\n", 0, bad), f"{what} {column}"
                              f"{'' if data[bad] == 0 else ' is not ASCII'}: expected a plain-text Accel-Sim file")
        raise self._error(number + 1 + long, _TOO_LONG)

    def _error(self, number: int, message: str) -> TraceError:
        self.number = number
        return TraceError(f"{self.path}:{number}: {message}")

    def close(self) -> None:
        self.fh.close()


def _int(path, number, key, text, base=10, low=0, high=ADDRESS_LIMIT - 1) -> int:
    """A header or block-structure number: plain digits (hex with an optional 0x for base 16), within
    [low, high]; int() alone would take '+5', '1_000' and '-3'."""
    pattern = _HEX if base == 16 else _DEC
    value = int(text, base) if pattern.match(text) else None
    if value is None or not low <= value <= high:
        kind = "a hex number" if base == 16 else "a decimal number"
        raise TraceError(f"{path}:{number}: {key}: expected {kind} from {low:,} to {high:,}, got "
                         f"'{printable(text)}'")
    return value


def _dim(path, number, key, text, limits) -> tuple[int, int, int]:
    m = _DIM.match(text)
    if not m:
        raise TraceError(f"{path}:{number}: -{key}: expected (x,y,z) with positive sizes, got '{printable(text)}'")
    dims = tuple(int(g) for g in m.groups())
    if not all(1 <= d <= most for d, most in zip(dims, limits)):
        raise TraceError(f"{path}:{number}: -{key} = {text}: expected (x,y,z) with sizes from 1 to "
                         f"({','.join(map(str, limits))}) (CUDA's launch limits)")
    return dims


def read_header(lines: Lines) -> TraceHeader:
    path = lines.path
    fields: dict[str, tuple[int, str]] = {}
    for line in lines:
        text = line.strip()
        if text.startswith("#BEGIN_TB"):
            break
        if not text or text.startswith("#"):
            continue
        if not text.startswith("-") or "=" not in text:
            raise TraceError(f"{path}:{lines.number}: expected a header line '-key = value' or #BEGIN_TB, "
                             f"got '{printable(text)}'")
        key, value = (part.strip() for part in text[1:].split("=", 1))
        if key in fields:
            raise TraceError(f"{path}:{lines.number}: -{printable(key)} given twice (lines {fields[key][0]} and "
                             f"{lines.number}): expected each header key once")
        fields[key] = (lines.number, value)
    else:
        if not fields:
            raise TraceError(f"{path}: empty file, not an Accel-Sim trace")
        raise TraceError(f"{path}:{lines.number}: end of file before the first thread block (#BEGIN_TB)")
    missing = [k for k in _REQUIRED if k not in fields]
    if missing:
        raise TraceError(f"{path}: header: missing -{missing[0]} (an Accel-Sim trace header names "
                         f"{', '.join(_REQUIRED)})")

    def get(key, parse=_int, default=None, **kw):
        if key not in fields:
            return default
        number, value = fields[key]
        return parse(path, number, f"-{key}" if parse is _int else key, value, **kw)

    version = get("accelsim tracer version")
    if version not in SUPPORTED_VERSIONS:
        number = fields["accelsim tracer version"][0]
        raise TraceError(f"{path}:{number}: -accelsim tracer version = {version}: expected one of "
                         f"{', '.join(map(str, SUPPORTED_VERSIONS))}")
    name_line, name = fields["kernel name"]
    if not name or not name.isprintable():
        shown = f"'{printable(name)}'" if name else "nothing"
        raise TraceError(f"{path}:{name_line}: -kernel name: expected the kernel's (mangled) name, got {shown}")
    grid = get("grid dim", _dim, limits=GRID_LIMITS)
    block = get("block dim", _dim, limits=BLOCK_LIMITS)
    if block[0] * block[1] * block[2] > THREADS_LIMIT:
        raise TraceError(f"{path}:{fields['block dim'][0]}: -block dim = {fields['block dim'][1]}: "
                         f"{block[0] * block[1] * block[2]} threads, expected at most {THREADS_LIMIT} per block")
    return TraceHeader(
        kernel_name=name, kernel_id=get("kernel id", default=0), grid=grid, block=block,
        shared_memory_bytes=get("shmem"), registers_per_thread=get("nregs", low=1, high=255),
        binary_version=get("binary version", low=1), tracer_version=version,
        lineinfo=bool(get("enable lineinfo", default=0, high=1)),
        shared_base=get("shmem base_addr", base=16, default=0),
        local_base=get("local mem base_addr", base=16, default=0),
        lines=lines.number, unknown_keys=tuple(f"-{printable(key)} (line {number})" for key, (number, _) in
                                               fields.items() if key not in _REQUIRED + _OPTIONAL))


class TraceFile:
    """One kernel trace: its header, then its thread blocks on demand (`blocks()`, in file order)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lines = Lines(self.path)
        self.header = read_header(self._lines)
        h = self.header
        self.launch = Launch(grid=h.grid, block=h.block, registers_per_thread=h.registers_per_thread,
                             shared_memory_bytes=h.shared_memory_bytes, dynamic_shared_memory_bytes=0)
        self.nblocks = self.launch.nblocks
        self.warps_per_block = self.launch.warps_per_block
        self.budget = HELD_LIMIT  # memory the next block may take (TraceStreams lowers it by what it holds)
        self.running = 0  # blocks still held by the reader's user (for the message)

    def close(self) -> None:
        self._lines.close()

    def _error(self, message: str, number: int | None = None):
        return TraceError(f"{self.path}:{self._lines.number if number is None else number}: {message}")

    def blocks(self) -> Iterator[TraceBlock]:
        """Thread blocks in file order; the file's #BEGIN_TB that ended the header opens the first. After the
        last block the rest of the file must hold no further block."""
        lines = self._lines
        ordinal = 0
        opened = True  # read_header consumed the first #BEGIN_TB
        seen = _Runs()
        while True:
            if not opened:
                for line in lines:
                    text = line.strip()
                    if text.startswith("#BEGIN_TB"):
                        opened = True
                        break
                    if text and not text.startswith("#"):
                        raise self._error(f"expected #BEGIN_TB, got '{printable(text)}'")
                if not opened:
                    if ordinal != self.nblocks:
                        raise self._error(f"end of file after {ordinal} thread blocks; -grid dim "
                                          f"{self.header.grid} has {self.nblocks}")
                    lines.close()
                    return
            if ordinal == self.nblocks:
                raise self._error(f"thread block {ordinal + 1} found; -grid dim {self.header.grid} has "
                                  f"{self.nblocks}")
            yield self._block(ordinal, seen)
            ordinal += 1
            opened = False

    def _ctaid(self, text: str, seen: "_Runs") -> tuple[int, int, int]:
        m = _CTAID.match(text)
        if not m:
            raise self._error(f"expected 'thread block = x,y,z', got '{printable(text)}'")
        ctaid = tuple(int(g) for g in m.groups())
        grid = self.header.grid
        if not all(c < g for c, g in zip(ctaid, grid)):
            raise self._error(f"thread block = {m.group(1)},{m.group(2)},{m.group(3)} is outside -grid dim "
                              f"{grid} (expected ids from 0 to one less than each size)")
        if not seen.add(ctaid[0] + grid[0] * (ctaid[1] + grid[1] * ctaid[2])):
            raise self._error(f"thread block = {m.group(1)},{m.group(2)},{m.group(3)} appears a second time "
                              f"(expected each block of the grid once)")
        return ctaid

    def _block(self, ordinal: int, seen: "_Runs") -> TraceBlock:
        lines, path = self._lines, self.path
        start = lines.memory
        others = f"with the {self.running} block(s) still running, " if self.running else ""
        lines.stop_at = (start + self.budget, f"thread block {ordinal} does not fit: {others}its lines would take "
                                              f"more than {_size(HELD_LIMIT)} of memory (a block's lines stay in "
                                              f"memory while its warps run)")
        ctaid = None
        warps: dict[int, list] = {}
        current: list | None = None
        expected = 0
        count_line = 0
        for line in lines:
            text = line.strip()
            if not text:
                continue
            if current is not None and len(current) < expected:
                if text.startswith("#") or text.startswith("warp"):
                    raise self._error(f"insts = {expected} at line {count_line}, but the warp has "
                                      f"{len(current)} instruction lines")
                current.append((lines.number, text))
                continue
            if text.startswith("thread block"):
                if ctaid is not None or warps:
                    raise self._error("a second 'thread block = x,y,z' line in one block" if ctaid is not None
                                      else "'thread block = x,y,z' after the block's warps: expected it first")
                ctaid = self._ctaid(text, seen)
            elif text.startswith("warp"):
                if ctaid is None:
                    raise self._error("'warp = N' before 'thread block = x,y,z': expected the block's id first")
                if current is not None and expected == -1:
                    raise self._error(f"'warp = N' at line {count_line} has no 'insts = N' line")
                warp = _number(text, "warp", lines.number, path, self.warps_per_block - 1)
                if warp in warps:
                    raise self._error(f"warp = {warp} appears twice in thread block {ctaid}")
                current = warps[warp] = []
                expected = -1  # until insts = N
                count_line = lines.number
            elif text.startswith("insts"):
                if current is None or expected != -1:
                    raise self._error("insts = N must follow a 'warp = N' line")
                expected = _number(text, "insts", lines.number, path)
                count_line = lines.number
            elif text.startswith("#END_TB"):
                if ctaid is None:
                    raise self._error("#END_TB before 'thread block = x,y,z'")
                if current is not None and expected == -1:
                    raise self._error(f"'warp = N' at line {count_line} has no 'insts = N' line")
                if len(warps) != self.warps_per_block:
                    absent = min(set(range(self.warps_per_block)) - set(warps))
                    raise self._error(f"thread block {ctaid} lists {len(warps)} warps; -block dim "
                                      f"{self.header.block} has {self.warps_per_block} (warp {absent} missing)")
                lines.stop_at = None
                return TraceBlock(ordinal, ctaid, [warps[w] for w in range(self.warps_per_block)],
                                  lines.memory - start)
            elif current is not None and expected >= 0:
                raise self._error(f"insts = {expected} at line {count_line}, but the warp has more instruction "
                                  f"lines")
            else:
                raise self._error(f"unexpected line '{printable(text)}' in a thread block")
        raise self._error(f"truncated: end of file inside thread block {ordinal} (no #END_TB)")


_INSTS = re.compile(rb"^[ \t]*insts[ \t]*=[ \t]*([0-9]{1,19})[ \t\r]*$", re.MULTILINE)


def warp_instruction_count(path: str | Path) -> int:
    """The warp-instructions a trace states (the sum of its `insts = N` lines), read as bytes without decoding a
    line (a fraction of reading its blocks: the vectorAdd trace x64, 12,544 blocks, in under a tenth of the time
    counting its instructions takes). The counts are checked against the lines when the blocks are read."""
    path = Path(path)
    fh, read = _open_bytes(path)
    total, rest = 0, b""
    try:
        while True:
            try:
                chunk = read(1 << 20)
            except _XzError as exc:
                raise TraceError(f"{path}: {exc}") from None
            except OSError as exc:
                raise TraceError(f"{path}: read error ({exc.strerror or exc})") from None
            data = rest + chunk
            cut = len(data) if not chunk else data.rfind(b"\n") + 1
            total += sum(int(m.group(1)) for m in _INSTS.finditer(data, 0, cut))
            rest = data[cut:]
            if not chunk:
                return total
            if len(rest) >= LINE_LIMIT:
                raise TraceError(f"{path}: {_TOO_LONG}")
    finally:
        fh.close()


def _number(text: str, key: str, number: int, path: Path, high: int = ADDRESS_LIMIT - 1) -> int:
    """N from a 'key = N' line of a block (`warp = 3`, `insts = 17`): as the tracer writes it, or the slow path
    that accepts other spacing and explains what is wrong."""
    value = text[len(key) + 3:]
    if text[len(key):len(key) + 3] == " = " and value.isdigit() and len(value) < 19:
        n = int(value)
        if n <= high:
            return n
    m = _KEYED.match(text)
    if not m or m.group(1) != key:
        raise TraceError(f"{path}:{number}: expected '{key} = N', got '{printable(text)}'")
    return _int(path, number, key, m.group(2), high=high)


def _size(n: int) -> str:
    return f"{n / 2**30:g} GiB" if n >= 2**30 else f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n:,} bytes"


class _Runs:
    """A set of non-negative integers as sorted, disjoint [start, end) runs. Thread blocks come (mostly) in
    order, so the set of blocks seen stays a few runs long however large the grid."""

    def __init__(self):
        self.starts: list[int] = []
        self.ends: list[int] = []

    def add(self, value: int) -> bool:
        """Add `value`; False when it was there already."""
        starts, ends = self.starts, self.ends
        i = bisect.bisect_right(starts, value)
        if i and value < ends[i - 1]:
            return False
        after_previous = bool(i) and ends[i - 1] == value
        before_next = i < len(starts) and starts[i] == value + 1
        if after_previous and before_next:
            ends[i - 1] = ends[i]
            del starts[i], ends[i]
        elif after_previous:
            ends[i - 1] = value + 1
        elif before_next:
            starts[i] = value
        else:
            starts.insert(i, value)
            ends.insert(i, value + 1)
        return True
