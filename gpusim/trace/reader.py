"""Streaming reader for Accel-Sim kernel traces (`kernel-N.traceg`, or `.traceg.xz` through lzma).

The header is read when the trace is opened; thread-block sections are read one at a time, in file order, when
the dispatcher asks for them, so memory holds a few blocks' lines however large the file is. Every count the
file states (instructions per warp, warps per block, blocks per grid) is checked against what it holds; any
problem is a TraceError naming the file and line number.
"""

from __future__ import annotations

import lzma
import re
from pathlib import Path
from typing import Iterator

import attrs

from ..errors import GpusimError
from ..workload.kernel import Launch

SUPPORTED_VERSIONS = (4, 5, 6)
_DIM = re.compile(r"^\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)$")
_REQUIRED = ("kernel name", "grid dim", "block dim", "shmem", "nregs", "binary version", "accelsim tracer version")


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


@attrs.frozen
class TraceBlock:
    ordinal: int  # position in the file (the dispatch order)
    ctaid: tuple[int, int, int]
    warps: list  # per warp in the block: [(line number, instruction line), ...]


def open_text(path: Path):
    """The trace as text lines; `.xz` files are decompressed on the fly."""
    try:
        if path.suffix == ".xz":
            return lzma.open(path, "rt", encoding="ascii")
        return open(path, encoding="ascii")
    except OSError as exc:
        raise TraceError(f"{path}: cannot open ({exc.strerror or exc})") from None


class _Lines:
    """Numbered lines of a text file, with read errors (bad bytes, corrupt xz) turned into TraceErrors."""

    def __init__(self, path: Path):
        self.path = path
        self.fh = open_text(path)
        self.number = 0

    def __iter__(self):
        return self

    def __next__(self) -> str:
        try:
            line = self.fh.readline()
        except UnicodeDecodeError:
            raise TraceError(f"{self.path}:{self.number + 1}: not a text trace (non-ASCII bytes)") from None
        except (lzma.LZMAError, EOFError) as exc:
            raise TraceError(f"{self.path}:{self.number + 1}: corrupt or truncated xz data ({exc})") from None
        if not line:
            raise StopIteration
        self.number += 1
        return line

    def close(self) -> None:
        self.fh.close()


def _int(path, number, key, text, base=10) -> int:
    try:
        return int(text, base)
    except ValueError:
        raise TraceError(f"{path}:{number}: -{key}: expected a{' hex' if base == 16 else 'n'} integer, got "
                         f"'{text}'") from None


def _dim(path, number, key, text) -> tuple[int, int, int]:
    m = _DIM.match(text)
    if not m or min(int(g) for g in m.groups()) < 1:
        raise TraceError(f"{path}:{number}: -{key}: expected (x,y,z) with positive sizes, got '{text}'")
    return tuple(int(g) for g in m.groups())


def read_header(lines: _Lines) -> TraceHeader:
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
                             f"got '{text[:60]}'")
        key, value = (part.strip() for part in text[1:].split("=", 1))
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
        return parse(path, number, key, value, **kw)

    version = get("accelsim tracer version")
    if version not in SUPPORTED_VERSIONS:
        number = fields["accelsim tracer version"][0]
        raise TraceError(f"{path}:{number}: -accelsim tracer version = {version}: expected one of "
                         f"{', '.join(map(str, SUPPORTED_VERSIONS))}")
    return TraceHeader(
        kernel_name=fields["kernel name"][1], kernel_id=get("kernel id", default=0),
        grid=get("grid dim", _dim), block=get("block dim", _dim),
        shared_memory_bytes=get("shmem"), registers_per_thread=get("nregs"),
        binary_version=get("binary version"), tracer_version=version,
        lineinfo=bool(get("enable lineinfo", default=0)),
        shared_base=get("shmem base_addr", base=16, default=0), local_base=get("local mem base_addr", base=16, default=0),
        lines=lines.number)


class TraceFile:
    """One kernel trace: its header, then its thread blocks on demand (`blocks()`, in file order)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lines = _Lines(self.path)
        self.header = read_header(self._lines)
        h = self.header
        self.launch = Launch(grid=h.grid, block=h.block, registers_per_thread=h.registers_per_thread,
                             shared_memory_bytes=h.shared_memory_bytes, dynamic_shared_memory_bytes=0)
        self.nblocks = self.launch.nblocks
        self.warps_per_block = self.launch.warps_per_block

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
        while True:
            if not opened:
                for line in lines:
                    text = line.strip()
                    if text.startswith("#BEGIN_TB"):
                        opened = True
                        break
                    if text and not text.startswith("#"):
                        raise self._error(f"expected #BEGIN_TB, got '{text[:60]}'")
                if not opened:
                    if ordinal != self.nblocks:
                        raise self._error(f"end of file after {ordinal} thread blocks; -grid dim "
                                          f"{self.header.grid} has {self.nblocks}")
                    lines.close()
                    return
            if ordinal == self.nblocks:
                raise self._error(f"thread block {ordinal + 1} found; -grid dim {self.header.grid} has "
                                  f"{self.nblocks}")
            yield self._block(ordinal)
            ordinal += 1
            opened = False

    def _block(self, ordinal: int) -> TraceBlock:
        lines, path = self._lines, self.path
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
                if text.startswith("#") or text.startswith("warp ="):
                    raise self._error(f"insts = {expected} at line {count_line}, but the warp has "
                                      f"{len(current)} instruction lines")
                current.append((lines.number, text))
                continue
            if text.startswith("thread block"):
                parts = text.split("=", 1)[-1].split(",")
                try:
                    ctaid = tuple(int(p) for p in parts)
                except ValueError:
                    raise self._error(f"expected 'thread block = x,y,z', got '{text[:60]}'") from None
                if len(ctaid) != 3:
                    raise self._error(f"expected 'thread block = x,y,z', got '{text[:60]}'")
            elif text.startswith("warp"):
                warp = _int(path, lines.number, "warp", text.split("=", 1)[-1].strip())
                if not 0 <= warp < self.warps_per_block:
                    raise self._error(f"warp = {warp}: a block of {self.header.block} has warps 0 to "
                                      f"{self.warps_per_block - 1}")
                if warp in warps:
                    raise self._error(f"warp = {warp} appears twice in thread block {ctaid}")
                current = warps[warp] = []
                expected = -1  # until insts = N
            elif text.startswith("insts"):
                if current is None or expected != -1:
                    raise self._error("insts = N must follow a 'warp = N' line")
                expected = _int(path, lines.number, "insts", text.split("=", 1)[-1].strip())
                count_line = lines.number
            elif text.startswith("#END_TB"):
                if ctaid is None:
                    raise self._error("#END_TB before 'thread block = x,y,z'")
                if len(warps) != self.warps_per_block:
                    absent = min(set(range(self.warps_per_block)) - set(warps))
                    raise self._error(f"thread block {ctaid} lists {len(warps)} warps; -block dim "
                                      f"{self.header.block} has {self.warps_per_block} (warp {absent} missing)")
                return TraceBlock(ordinal, ctaid, [warps[w] for w in range(self.warps_per_block)])
            elif current is not None and expected >= 0:
                raise self._error(f"insts = {expected} at line {count_line}, but the warp has more instruction "
                                  f"lines")
            else:
                raise self._error(f"unexpected line '{text[:60]}' in a thread block")
        raise self._error(f"truncated: end of file inside thread block {ordinal} (no #END_TB)")
