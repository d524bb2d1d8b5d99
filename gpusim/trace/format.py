"""The Accel-Sim trace line format, as pure functions: one instruction line in, its fields out.

An instruction line (tracer versions 4-6) is

    [line_num] PC mask dest_num [reg_dests] opcode src_num [reg_srcs] mem_width [mode addresses] [imm [imm2]]

`mode` says how the active lanes' addresses are written: 0 lists one hex address per active lane, 1 gives a
hex base and a decimal stride (the active lanes must form one contiguous run), 2 gives a hex base for the first
active lane and one decimal delta from the previous active lane for each further one. Version 4 lines end after
the addresses; version 5 adds the immediate, version 6 a second one (both optional here, as old tracers omit
them). Line numbers lead the line when the header says `-enable lineinfo = 1`.
"""

from __future__ import annotations

import sys
from typing import NamedTuple

import numpy as np

from ..workload.kernel import WARP_SIZE

LIST_ALL, BASE_STRIDE, BASE_DELTA = 0, 1, 2
ZERO_REGISTERS = frozenset({"R255", "RZ", "UR63", "URZ", "PT", "UPT", "P7", "UP7"})  # never written, never waited on
_LANE = np.arange(WARP_SIZE, dtype=np.int64)
_TRAILING = {4: 1, 5: 1, 6: 2}  # immediates a line of each tracer version may end with


class LineError(ValueError):
    """What is wrong with one line (the reader adds the file and line number)."""


class TraceInstruction(NamedTuple):
    pc: int
    mask: int
    dst: tuple[str, ...]
    opcode: str
    src: tuple[str, ...]
    mem_width: int
    addrs: np.ndarray | None  # 32 lanes (inactive lanes 0), for instructions with addresses


_LANES: dict[int, list[int]] = {}
_REGISTERS: dict[tuple, tuple[str, ...]] = {}
_CACHE_LIMIT = 65536


def active_lanes(mask: int) -> list[int]:
    lanes = _LANES.get(mask)
    if lanes is None:
        if len(_LANES) > _CACHE_LIMIT:
            _LANES.clear()
        lanes = _LANES[mask] = [lane for lane in range(WARP_SIZE) if mask >> lane & 1]
    return lanes


def decode_addresses(mode: int, fields: list[str], mask: int) -> tuple[np.ndarray, int]:
    """(32-lane address array, fields consumed) for the address part of a line, `fields` starting at the
    first field after the mode."""
    addrs = np.zeros(WARP_SIZE, dtype=np.int64)
    lanes = active_lanes(mask)
    n = len(lanes)
    if mode == LIST_ALL:
        if len(fields) < n:
            raise LineError(f"address mode 0 needs {n} addresses for mask {mask:08x}, found {len(fields)}")
        addrs[lanes] = [int(f, 16) for f in fields[:n]]
        return addrs, n
    if mode == BASE_STRIDE:
        if len(fields) < 2:
            raise LineError("address mode 1 needs a base address and a stride")
        base, stride = int(fields[0], 16), int(fields[1], 10)
        if n == WARP_SIZE:
            return base + stride * _LANE, 2
        if n:
            first = lanes[0]
            if lanes[-1] - first + 1 != n:
                raise LineError(f"address mode 1 needs a contiguous run of active lanes, mask is {mask:08x}")
            addrs[first:first + n] = base + stride * _LANE[:n]
        return addrs, 2
    if mode == BASE_DELTA:
        deltas = max(0, n - 1)
        if len(fields) < 1 + deltas:
            raise LineError(f"address mode 2 needs a base address and {deltas} deltas for mask {mask:08x}, "
                            f"found {max(0, len(fields) - 1)}")
        if n:
            steps = np.array([int(fields[0], 16)] + [int(f, 10) for f in fields[1:1 + deltas]], dtype=np.int64)
            addrs[lanes] = np.cumsum(steps)
        return addrs, 1 + deltas
    raise LineError(f"address mode {mode}: expected 0 (list), 1 (base+stride) or 2 (base+deltas)")


def _registers(fields: list[str], count: int) -> tuple[str, ...]:
    if count < 0 or len(fields) != count:
        raise LineError(f"expected {count} register names, the line ends after {len(fields)}")
    key = tuple(fields)
    names = _REGISTERS.get(key)
    if names is None:
        for name in fields:
            if not (name[:1].isalpha() and name[-1:].isdigit() or name in ZERO_REGISTERS):
                raise LineError(f"expected {count} register names, found '{name}' among them")
        if len(_REGISTERS) > _CACHE_LIMIT:
            _REGISTERS.clear()
        names = _REGISTERS[key] = tuple(sys.intern(name) for name in fields if name not in ZERO_REGISTERS)
    return names


def parse_instruction(line: str, version: int, lineinfo: bool) -> TraceInstruction:
    """One instruction line's fields; LineError says what is wrong with it."""
    f = line.split()
    try:
        i = 1 if lineinfo else 0
        pc = int(f[i], 16)
        if len(f[i + 1]) > 8:
            raise LineError(f"active mask '{f[i + 1]}' has more than 32 lanes")
        mask = int(f[i + 1], 16)
        ndst = int(f[i + 2])
        dst = _registers(f[i + 3:i + 3 + ndst], ndst)
        j = i + 3 + ndst
        opcode = f[j]
        if not opcode[:1].isalpha():
            raise LineError(f"expected an opcode after {ndst} destination registers, found '{opcode}'")
        nsrc = int(f[j + 1])
        src = _registers(f[j + 2:j + 2 + nsrc], nsrc)
        k = j + 2 + nsrc
        width = int(f[k])
        k += 1
        addrs = None
        if width > 0:
            mode = int(f[k])
            addrs, used = decode_addresses(mode, f[k + 1:], mask)
            k += 1 + used
    except IndexError:
        raise LineError(f"line ends early ({len(f)} fields)") from None
    except ValueError as exc:
        if isinstance(exc, LineError):
            raise
        raise LineError(f"bad field: {exc}") from None
    trailing = len(f) - k
    if trailing > _TRAILING.get(version, 2):
        raise LineError(f"{trailing} fields left after the instruction (at most {_TRAILING.get(version, 2)} "
                        f"immediates expected)")
    return TraceInstruction(pc, mask, dst, opcode, src, width, addrs)
