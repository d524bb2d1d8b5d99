"""The Accel-Sim trace line format, as pure functions: one instruction line in, its fields out.

An instruction line (tracer versions 4-6) is

    [line_num] PC mask dest_num [reg_dests] opcode src_num [reg_srcs] mem_width [mode addresses] [imm [imm2]]

`mode` says how the active lanes' addresses are written: 0 lists one hex address per active lane, 1 gives a
hex base and a decimal stride (the active lanes must form one contiguous run), 2 gives a hex base for the first
active lane and one decimal delta from the previous active lane for each further one. Version 4 lines end after
the addresses; version 5 adds the immediate, version 6 a second one (both optional here, as old tracers omit
them). Line numbers lead the line when the header says `-enable lineinfo = 1`.

What the format cannot hold is a LineError: a negative or non-hex PC or mask, a mask of more than 32 lanes, a
width other than 0, 1, 2, 4, 8, 16 or 32 bytes, an address outside [0, 2^63) (however the mode writes it), a
register count over 255, a field with '_' or '+' (int() would take them), an immediate that is no decimal
number. What it can hold but a GPU would not run (an address that is not a multiple of the width) is flagged
on the instruction for the caller to count.
"""

from __future__ import annotations

import sys
from functools import reduce
from itertools import accumulate
from operator import or_
from typing import NamedTuple

import numpy as np

from ..workload.kernel import WARP_SIZE
from .reader import ADDRESS_LIMIT, printable

LIST_ALL, BASE_STRIDE, BASE_DELTA = 0, 1, 2
ZERO_REGISTERS = frozenset({"R255", "RZ", "UR63", "URZ", "PT", "UPT", "P7", "UP7"})  # never written, never waited on
_LANE = np.arange(WARP_SIZE, dtype=np.int64)
MAX_REGISTERS = 255  # register operands one instruction line may list
WIDTHS = frozenset({0, 1, 2, 4, 8, 16, 32})  # bytes per lane a SASS memory instruction can move
# the fields of a line, in order, and what each holds (for messages)
_LINE_NUMBER, _PC, _MASK, _NDST, _NSRC, _WIDTH, _MODE, _ADDRESSES = range(8)
_FIELDS = ["the source line number (decimal)", "the PC (hex)", "the active mask (up to 8 hex digits)",
           f"the number of destination registers (0 to {MAX_REGISTERS})",
           f"the number of source registers (0 to {MAX_REGISTERS})",
           f"the memory width: 0 (no memory access) or {', '.join(map(str, sorted(WIDTHS)[1:-1]))} or "
           f"{max(WIDTHS)} bytes per lane",
           "the address mode", "a hex address or a decimal stride or delta"]
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
    misaligned: bool = False  # an active lane's address is not a multiple of the width


_LANES: dict[int, list[int]] = {}
_STRIDES: dict[int, np.ndarray] = {}  # stride -> stride * lane, for base+stride lines
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
    first field after the mode. The arithmetic alone: any value a signed 64-bit lane holds is decoded (a line
    read from a trace is held to real addresses by parse_instruction)."""
    addrs, used, _ = _decode(mode, fields, mask, 1, -ADDRESS_LIMIT)
    return addrs, used


def _decode(mode: int, fields: list[str], mask: int, width: int, low: int = 0) -> tuple[np.ndarray, int, bool]:
    """decode_addresses, plus whether an active lane's address is not a multiple of `width` (a power of two).
    Every address must lie in [low, 2^63): the tracer writes unsigned 64-bit virtual addresses, and no GPU
    maps one at or above 2^63."""
    addrs = np.zeros(WARP_SIZE, dtype=np.int64)
    lanes = active_lanes(mask)
    n = len(lanes)
    if mode == LIST_ALL:
        if len(fields) < n:
            raise LineError(f"address mode 0 needs {n} addresses for mask {mask:08x}, found {len(fields)}")
        if not n:
            return addrs, 0, False
        values = [int(f, 16) for f in fields[:n]]
        bits = reduce(or_, values)  # negative when one is; its low bits say whether all are aligned
        if not 0 <= bits < ADDRESS_LIMIT:
            _check_range(values, low)
        addrs[lanes] = values
        return addrs, n, bool(bits & (width - 1))
    if mode == BASE_STRIDE:
        if len(fields) < 2:
            raise LineError("address mode 1 needs a base address and a stride")
        base, stride = int(fields[0], 16), int(fields[1], 10)
        if not n:
            if not 0 <= base < ADDRESS_LIMIT:
                _check_range([base], low)
            return addrs, 2, False
        last = base + stride * (n - 1)
        if not (0 <= base < ADDRESS_LIMIT and 0 <= last < ADDRESS_LIMIT):
            _check_range([base, last], low)
        misaligned = bool((base | stride if n > 1 else base) & (width - 1))
        steps = _STRIDES.get(stride)
        if steps is None:
            if len(_STRIDES) > _CACHE_LIMIT:
                _STRIDES.clear()
            steps = _STRIDES[stride] = stride * _LANE
        if n == WARP_SIZE:
            return base + steps, 2, misaligned
        first = lanes[0]
        if lanes[-1] - first + 1 != n:
            raise LineError(f"address mode 1 needs a contiguous run of active lanes, mask is {mask:08x}")
        addrs[first:first + n] = base + steps[:n]
        return addrs, 2, misaligned
    if mode == BASE_DELTA:
        deltas = max(0, n - 1)
        if len(fields) < 1 + deltas:
            raise LineError(f"address mode 2 needs a base address and {deltas} deltas for mask {mask:08x}, "
                            f"found {max(0, len(fields) - 1)}")
        if not n:
            base = int(fields[0], 16)
            if not 0 <= base < ADDRESS_LIMIT:
                _check_range([base], low)
            return addrs, 1, False
        values = list(accumulate([int(fields[0], 16)] + [int(f, 10) for f in fields[1:1 + deltas]]))
        bits = reduce(or_, values)
        if not 0 <= bits < ADDRESS_LIMIT:
            _check_range(values, low)
        addrs[lanes] = values
        return addrs, 1 + deltas, bool(bits & (width - 1))
    raise LineError(f"address mode {mode}: expected 0 (list), 1 (base+stride) or 2 (base+deltas)")


def _check_range(values: list[int], low: int) -> None:
    bad = next((v for v in values if not low <= v < ADDRESS_LIMIT), None)
    if bad is not None:
        shown = f"{'-' if bad < 0 else ''}0x{abs(bad):x}"
        if len(shown) > 40:
            shown = f"{shown[:20]}... ({len(shown) - 2} hex digits)"
        raise LineError(f"address {shown}: expected a virtual address from 0 to 0x{ADDRESS_LIMIT - 1:x}")


def _registers(fields: list[str], count: int) -> tuple[str, ...]:
    if len(fields) != count:
        raise LineError(f"expected {count} register names, the line ends after {len(fields)}")
    key = tuple(fields)
    names = _REGISTERS.get(key)
    if names is None:
        for name in fields:
            if not (name.isalnum() and name[:1].isalpha() and name[-1:].isdigit() or name in ZERO_REGISTERS):
                raise LineError(f"expected {count} register names, found '{printable(name)}' among them")
        if len(_REGISTERS) > _CACHE_LIMIT:
            _REGISTERS.clear()
        names = _REGISTERS[key] = tuple(sys.intern(name) for name in fields if name not in ZERO_REGISTERS)
    return names


def parse_instruction(line: str, version: int, lineinfo: bool) -> TraceInstruction:
    """One instruction line's fields; LineError says what is wrong with it."""
    f = line.split()
    i = 1 if lineinfo else 0
    j = k = 0
    stage = _LINE_NUMBER  # the field being read, for the message
    try:
        if lineinfo and int(f[0]) < 0:
            raise ValueError
        stage = _PC
        pc = int(f[i], 16)
        if not 0 <= pc < ADDRESS_LIMIT:
            raise ValueError
        stage = _MASK
        mask = int(f[i + 1], 16)
        if len(f[i + 1]) > 8 or mask < 0:
            raise ValueError
        stage = _NDST
        ndst = int(f[i + 2])
        if not 0 <= ndst <= MAX_REGISTERS:
            raise ValueError
        dst = _registers(f[i + 3:i + 3 + ndst], ndst)
        j = i + 3 + ndst
        opcode = f[j]
        if not (opcode[:1].isalpha() and opcode.isprintable()):
            raise LineError(f"expected an opcode after {ndst} destination registers, found '{printable(opcode)}'")
        stage = _NSRC
        nsrc = int(f[j + 1])
        if not 0 <= nsrc <= MAX_REGISTERS:
            raise ValueError
        src = _registers(f[j + 2:j + 2 + nsrc], nsrc)
        k = j + 2 + nsrc
        stage = _WIDTH
        width = int(f[k])
        if width not in WIDTHS:
            raise ValueError
        k += 1
        addrs = None
        misaligned = False
        if width:
            stage = _MODE
            mode = int(f[k])
            if mode not in (LIST_ALL, BASE_STRIDE, BASE_DELTA):
                raise LineError(f"bad field {k + 1}: address mode {printable(f[k])}: expected 0 (list), "
                                f"1 (base+stride) or 2 (base+deltas)")
            stage = _ADDRESSES
            addrs, used, misaligned = _decode(mode, f[k + 1:], mask, width)
            k += 1 + used
    except IndexError:
        raise LineError(f"line ends early ({len(f)} fields)") from None
    except ValueError as exc:
        if isinstance(exc, LineError):
            raise
        raise _bad_field(f, stage, i, j, k) from None
    trailing = len(f) - k
    if trailing > _TRAILING.get(version, 2):
        raise LineError(f"{trailing} fields left after the instruction (at most {_TRAILING.get(version, 2)} "
                        f"immediates expected)")
    if trailing and not (f[k].isdigit() and len(f[k]) < 20 and
                         (trailing == 1 or f[k + 1].isdigit() and len(f[k + 1]) < 20)):
        _check_immediates(f, k)  # the tracer prints a C int: unused here, but still a number
    if "_" in line or "+" in line:  # int() reads '1_0' and '+5'; the tracer writes neither
        for n, field in enumerate(f):
            if n != j and ("_" in field or "+" in field):
                raise LineError(f"bad field {n + 1}: expected plain digits, got '{printable(field)}'")
    return TraceInstruction(pc, mask, dst, opcode, src, width, addrs, misaligned)


def _check_immediates(f: list[str], k: int) -> None:
    for n in range(k, len(f)):
        x = f[n]
        digits = x[1:] if x[:1] == "-" else x
        if not digits.isdigit() or len(digits) > 19:
            raise LineError(f"bad field {n + 1}: expected an immediate (a decimal number), got '{printable(x)}'")


def _bad_field(f: list[str], stage: int, i: int, j: int, k: int) -> LineError:
    """The message for a field that failed to convert (or was out of range) at `stage` of parse_instruction."""
    at = {_LINE_NUMBER: 0, _PC: i, _MASK: i + 1, _NDST: i + 2, _NSRC: j + 1, _WIDTH: k, _MODE: k}.get(stage)
    if at is None:  # somewhere in the addresses: the first field that is no number
        at = next((n for n in range(k + 1, len(f)) if not _is_number(f[n])), k + 1)
    return LineError(f"bad field {at + 1}: expected {_FIELDS[stage]}, got '{printable(f[at])}'")


def _is_number(text: str) -> bool:
    try:
        int(text, 16 if text[:2] in ("0x", "0X") else 10)
        return True
    except ValueError:
        return False
