"""A traced kernel as the engine sees it: a launch, and per-warp streams of WarpInst read from the trace.

The engine, the memory model and the statistics are the ones YAML kernels use; only the front end differs.
Blocks are handed to the dispatcher in file order (block k of the launch is the k-th section of the file).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Iterator

import attrs
import numpy as np

from ..workload.kernel import Launch
from ..isa.opcodes import MISC, OpInfo, family_of, lookup
from ..isa.inst import WarpInst
from .format import LineError, parse_instruction
from . import reader
from .reader import TraceError, TraceFile, TraceHeader

PARSED_LIMIT = 65536  # distinct address-free instruction lines remembered
KNOWN_BINARY_VERSIONS = (70, 129)  # sm_70 (Volta) to sm_12x (Blackwell): the versions the opcode tables cover


def unknown_opcode(opcode: str) -> OpInfo:
    """The conservative default for an opcode no table knows: an integer-pipe instruction with its latency
    (it occupies the pipe and its result is waited for; it touches no memory)."""
    return OpInfo(opcode=opcode.upper(), base=opcode.upper().split(".")[0], pipeline=MISC, space=None, width=0,
                  is_store=False, is_atomic=False, mma_flops=0)


def binary_version_of(spec) -> int:
    major, minor = spec.compute_capability.split(".")
    return int(major) * 10 + int(minor)


@attrs.frozen
class TraceKernel:
    name: str
    source: str
    header: TraceHeader
    launch: Launch
    family: str | None  # the opcode table the trace is read with (from its binary version)
    description: str = ""
    params: dict = attrs.field(factory=dict)

    @property
    def total_warps(self) -> int:
        return self.launch.nblocks * self.launch.warps_per_block

    def version_warning(self, spec) -> str | None:
        """One warning line about the header, or None: the trace's binary was compiled for another architecture
        than `spec` (and no GPU has its binary version), or the header has keys no tracer writes."""
        arch_version = binary_version_of(spec)
        version = self.header.binary_version
        parts = []
        if version != arch_version:
            parts.append(f"binary version {version} (sm_{version}) differs from {spec.name} (sm_{arch_version}); "
                         f"simulating its SASS on {spec.name} anyway")
            if not KNOWN_BINARY_VERSIONS[0] <= version <= KNOWN_BINARY_VERSIONS[1]:
                table = f"the {self.family} opcode table" if self.family else "every family's opcodes"
                parts.append(f"no GPU has sm_{version} (expected sm_{KNOWN_BINARY_VERSIONS[0]} to "
                             f"sm_{KNOWN_BINARY_VERSIONS[1]}): its opcodes are looked up in {table}")
        unknown = self.header.unknown_keys
        if unknown:
            parts.append(f"{len(unknown)} header key(s) no Accel-Sim tracer writes, ignored: "
                         f"{', '.join(unknown[:3])}{', ...' if len(unknown) > 3 else ''}")
        return f"{self.source}: {'; '.join(parts)}" if parts else None

    def streams(self) -> "TraceStreams":
        return TraceStreams(self)


def load_trace(path: str | Path) -> TraceKernel:
    """Read a trace's header (the blocks are read when simulated or counted)."""
    trace = TraceFile(path)
    trace.close()
    h = trace.header
    return TraceKernel(name=h.kernel_name, source=str(path), header=h, launch=trace.launch,
                       family=family_of(h.binary_version),
                       description=f"NVBit trace (Accel-Sim format v{h.tracer_version}), kernel id {h.kernel_id}, "
                                   f"sm_{h.binary_version} binary")


_ODD = {"misaligned": "addresses that are not a multiple of the access width (a GPU faults on them)",
        "no_addresses": "a memory opcode, active lanes and width 0 (no addresses: it moves no data)"}


class TraceStreams:
    """The engine's stream factory for a trace: `(block, warp in block) -> iterator of WarpInst`. Blocks are read
    from the file when their first warp is asked for; `unknown` counts the opcodes no table knows."""

    def __init__(self, kernel: TraceKernel):
        self.kernel = kernel
        self.file = TraceFile(kernel.source)
        self._blocks = self.file.blocks()
        self._pending: dict[int, list] = {}  # block -> per-warp lines not yet handed out
        self._handed: dict[int, int] = {}
        self._infos: dict[str, tuple[OpInfo, bool]] = {}
        self._parsed: dict[str, object] = {}
        self.unknown: Counter = Counter()
        self.blocks_read = 0
        self.held = 0  # memory of the lines of the blocks read whose warps have not all finished (estimated)
        self._running: dict[int, list] = {}  # block -> [warps not finished, memory]
        self.odd: dict[str, list] = {}  # kind -> [lines, first line number, opcode]: legal but odd lines

    def __call__(self, block: int, warp_in_block: int) -> Iterator[WarpInst]:
        warps = self._pending.get(block)
        while warps is None:
            self.file.budget, self.file.running = reader.HELD_LIMIT - self.held, len(self._running)
            section = next(self._blocks, None)
            if section is None:
                raise TraceError(f"{self.kernel.source}: block {block} requested, the file has {self.blocks_read}")
            self.blocks_read += 1
            self._pending[section.ordinal] = section.warps
            self._handed[section.ordinal] = 0
            self._running[section.ordinal] = [len(section.warps), section.memory]
            self.held += section.memory
            warps = self._pending.get(block)
        lines = warps[warp_in_block]
        self._handed[block] += 1
        if self._handed[block] == len(warps):
            del self._pending[block], self._handed[block]
        gid = block * self.kernel.launch.warps_per_block + warp_in_block
        return self._stream(lines, gid, block)

    def finish(self) -> None:
        """Read to the end of the file (it must hold no more blocks than the grid); call after the run."""
        for _ in self._blocks:
            self.blocks_read += 1

    def warnings(self) -> list[str]:
        """One line per kind of legal but odd instruction line read so far, with its count and first line."""
        source = self.kernel.source
        return [f"{source}: {count:,} line(s) with {_ODD[kind]} (first at line {first}, {opcode}); simulated as "
                f"written" for kind, (count, first, opcode) in sorted(self.odd.items())]

    def _note(self, kind: str, number: int, opcode: str) -> None:
        seen = self.odd.get(kind)
        if seen is None:
            self.odd[kind] = [1, number, opcode]
        else:  # warps run out of file order: keep the earliest line
            seen[0] += 1
            if number < seen[1]:
                seen[1:] = number, opcode

    def known_infos(self) -> list[OpInfo]:
        """The OpInfo of every distinct opcode read so far that the table knows."""
        return [info for info, known in self._infos.values() if known]

    def info(self, opcode: str) -> tuple[OpInfo, bool]:
        known = self._infos.get(opcode)
        if known is None:
            info = lookup(opcode, self.kernel.family)
            known = self._infos[opcode] = (info, True) if info is not None else (unknown_opcode(opcode), False)
        return known

    def _stream(self, lines: list, gid: int, block: int) -> Iterator[WarpInst]:
        h = self.kernel.header
        version, lineinfo, source = h.tracer_version, h.lineinfo, self.kernel.source
        info_of, unknown, parsed = self.info, self.unknown, self._parsed
        for number, text in lines:
            t = parsed.get(text)  # lines without addresses repeat across warps and blocks: parse each once
            if t is None:
                try:
                    t = parse_instruction(text, version, lineinfo)
                except LineError as exc:
                    raise TraceError(f"{source}:{number}: {exc}") from None
                if t.addrs is None:
                    if len(parsed) > PARSED_LIMIT:
                        parsed.clear()
                    parsed[text] = t
            info, known = info_of(t.opcode)
            if not known:
                unknown[info.opcode] += 1
            addrs = t.addrs
            if info.space is None:
                addrs = None  # the table knows better than the tracer's width (e.g. SHFL, TMA): no lane addresses
            elif addrs is not None:
                if t.misaligned:
                    self._note("misaligned", number, t.opcode)
                base = h.local_base if info.space == "local" else h.shared_base if info.space == "shared" else 0
                if base and addrs.max() >= base:  # window addresses -> offsets within the space
                    addrs = np.maximum(addrs - base, 0)
            elif t.mask and info.space != "const":
                self._note("no_addresses", number, t.opcode)
            yield WarpInst(info, gid, block, t.pc, t.mask, t.dst, t.src, addrs)
        running = self._running[block]  # the warp is done: its block's lines go when all its warps are
        running[0] -= 1
        if not running[0]:
            self.held -= running[1]
            del self._running[block]
