"""`kernelslist.g`: the command list of an Accel-Sim trace directory (kernel launches and memory copies, in
program order). Kernel lines name a trace file relative to the list; memcpy lines are noted and skipped."""

from __future__ import annotations

import re
from pathlib import Path

import attrs

from .reader import Lines, TraceError, printable

TRACE_SUFFIXES = (".traceg", ".traceg.xz")
_MEMCPY = ("memcpyhtod", "memcpydtoh", "memcpydtod", "memset")
_COPY = re.compile(r"memcpy(htod|dtoh|dtod),\s*0x[0-9a-f]{1,16},\s*[0-9]{1,19}\Z", re.IGNORECASE)


@attrs.frozen
class Command:
    line: int
    text: str
    kernel: Path | None  # the trace file for a kernel launch; None for a memory copy


def is_trace(path: str | Path) -> bool:
    return str(path).endswith(TRACE_SUFFIXES)


def is_command_list(path: str | Path) -> bool:
    return str(path).endswith(".g") and not is_trace(path)


def read_command_list(path: str | Path) -> list[Command]:
    path = Path(path)
    lines = Lines(path)  # lines of at most LINE_LIMIT bytes, ASCII, each error naming its line
    commands = []
    try:
        for raw in lines:
            number = lines.number
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if line.lower().startswith(_MEMCPY):
                if line.lower().startswith("memcpy") and not _COPY.match(line):
                    raise TraceError(f"{path}:{number}: expected 'MemcpyHtoD,0xADDRESS,BYTES' (hex address, "
                                     f"decimal size), got '{printable(line)}'")
                commands.append(Command(number, line, None))
                continue
            if not is_trace(line):
                raise TraceError(f"{path}:{number}: expected a memcpy line or a kernel trace file name ending in "
                                 f"{' or '.join(TRACE_SUFFIXES)}, got '{printable(line)}'")
            kernel = _find(path, number, line)
            commands.append(Command(number, line, kernel))
    finally:
        lines.close()
    if not any(c.kernel for c in commands):
        raise TraceError(f"{path}: lists no kernel trace (expected lines such as kernel-1.traceg)")
    return commands


def _find(path: Path, number: int, line: str) -> Path:
    """The trace file a kernel line names (relative to the list); a compressed directory keeps the names in
    the list, so `kernel-1.traceg` also finds `kernel-1.traceg.xz`."""
    kernel = path.parent / line
    try:
        if not kernel.exists() and Path(str(kernel) + ".xz").exists():
            kernel = Path(str(kernel) + ".xz")
        if not kernel.exists():
            raise TraceError(f"{path}:{number}: kernel trace {printable(line)} not found in {path.parent}")
    except (OSError, ValueError) as exc:  # a name too long, a NUL byte in it
        raise TraceError(f"{path}:{number}: kernel trace '{printable(line)}' cannot be looked up "
                         f"({getattr(exc, 'strerror', None) or exc})") from None
    return kernel
