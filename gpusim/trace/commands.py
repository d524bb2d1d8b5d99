"""`kernelslist.g`: the command list of an Accel-Sim trace directory (kernel launches and memory copies, in
program order). Kernel lines name a trace file relative to the list; memcpy lines are noted and skipped."""

from __future__ import annotations

from pathlib import Path

import attrs

from .reader import TraceError

TRACE_SUFFIXES = (".traceg", ".traceg.xz")
_MEMCPY = ("memcpyhtod", "memcpydtoh", "memcpydtod", "memset")


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
    try:
        text = path.read_text(encoding="ascii")
    except OSError as exc:
        raise TraceError(f"{path}: cannot open ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise TraceError(f"{path}: not a text command list (non-ASCII bytes)") from None
    commands = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.lower().startswith(_MEMCPY):
            commands.append(Command(number, line, None))
            continue
        if not is_trace(line):
            raise TraceError(f"{path}:{number}: expected a memcpy line or a kernel trace file name ending in "
                             f"{' or '.join(TRACE_SUFFIXES)}, got '{line[:60]}'")
        kernel = path.parent / line
        if not kernel.exists() and Path(str(kernel) + ".xz").exists():
            kernel = Path(str(kernel) + ".xz")  # a compressed trace directory keeps the names in the list
        if not kernel.exists():
            raise TraceError(f"{path}:{number}: kernel trace {line} not found in {path.parent}")
        commands.append(Command(number, line, kernel))
    if not any(c.kernel for c in commands):
        raise TraceError(f"{path}: lists no kernel trace (expected lines such as kernel-1.traceg)")
    return commands
