"""An application: commands on CUDA-like streams (kernels, copies, event records and waits, all-reduces) over one or
more GPUs, as frozen values built in Python or read from YAML (gpusim.app.format).

Commands on one stream run in the order given; different streams run concurrently; `WaitCommand` orders a stream
after the most recent `RecordCommand` of its event given before it. A stream belongs to a GPU (`gpu`), as a CUDA
stream belongs to its device; an all-reduce runs on the stream of that name on every GPU at once.
`check_application` refuses what cannot run, in one line naming the command (its `where`: `file:line` for a file,
`NAME: command N` for an application built in code).
"""

from __future__ import annotations

import numbers
from pathlib import Path

import attrs

from ..errors import GpusimError, shorten, shown

DEFAULT_STREAM = "default"
COPY_KINDS = ("h2d", "d2h", "d2d", "p2p")  # host to device, device to host, within a device, device to device
MAX_GPUS = 1024
MAX_BYTES = 2**50  # a petabyte: far above any copy, finite so a time stays finite


class AppError(GpusimError):
    """An application that cannot be read or run; the message names the file and line, or the command."""


def _where(default: str = ""):
    return attrs.field(default=default, eq=False, repr=False, kw_only=True)


@attrs.frozen
class KernelCommand:
    """Launch a kernel: a workload YAML file or an Accel-Sim trace (`.traceg`, `.traceg.xz`), with `params` (as
    `--set`), on `stream` of GPU `gpu`. `name` labels it in the results (default: the kernel's own name)."""
    workload: str | Path
    params: dict = attrs.field(factory=dict)
    stream: str = DEFAULT_STREAM
    gpu: int = 0
    name: str | None = None
    where: str = _where()


@attrs.frozen
class CopyCommand:
    """Copy `bytes` bytes: `h2d` host to device, `d2h` device to host, `d2d` within GPU `gpu`, `p2p` from GPU
    `src_gpu` (default `gpu`) to GPU `dst_gpu`, on `stream` of GPU `gpu` (for p2p: of the source GPU)."""
    bytes: int
    kind: str = "h2d"
    stream: str = DEFAULT_STREAM
    gpu: int = 0
    src_gpu: int | None = None
    dst_gpu: int | None = None
    name: str | None = None
    where: str = _where()

    @property
    def source_gpu(self) -> int:
        """The GPU whose copy engine and stream run the copy."""
        return self.src_gpu if self.kind == "p2p" and self.src_gpu is not None else self.gpu


@attrs.frozen
class AllReduceCommand:
    """Sum `bytes` bytes across every GPU of the application (NCCL's all-reduce), on the stream named `stream` of
    each GPU: it starts when every one of those streams reaches it and ends on all of them together."""
    bytes: int
    stream: str = DEFAULT_STREAM
    name: str | None = None
    where: str = _where()


@attrs.frozen
class RecordCommand:
    """Record `event` on `stream` of GPU `gpu`: it completes when the commands before it on that stream have."""
    event: str
    stream: str = DEFAULT_STREAM
    gpu: int = 0
    where: str = _where()


@attrs.frozen
class WaitCommand:
    """Make `stream` of GPU `gpu` wait for the most recent record of `event` given before this command."""
    event: str
    stream: str = DEFAULT_STREAM
    gpu: int = 0
    where: str = _where()


Command = KernelCommand | CopyCommand | AllReduceCommand | RecordCommand | WaitCommand
COMMAND_TYPES = (KernelCommand, CopyCommand, AllReduceCommand, RecordCommand, WaitCommand)


@attrs.frozen
class Application:
    """A named list of commands over `gpus` GPUs (all of the one architecture the run is given)."""
    name: str
    commands: tuple = attrs.field(converter=tuple)
    gpus: int = 1
    description: str = ""
    source: str = attrs.field(default="", eq=False)  # the file it was read from ('' when built in code)
    notes: tuple = attrs.field(default=(), eq=False, converter=tuple)  # what reading it left out, one line each


def command_where(app: Application, index: int) -> str:
    """Where a message places command `index`: its file and line, or the application's name and its number."""
    command = app.commands[index]
    where = getattr(command, "where", "")
    return where or f"{shown(app.name, 60)}: command {index + 1}"


def at(where: str, field: str) -> str:
    """`where` and a field as a message names them: `app.yaml:5: commands[2].copy.bytes`, `NAME: command 3: gpu`."""
    return f"{where}.{field}" if where.endswith("]") else f"{where}: {field}"


def whole_bytes(value) -> bool:
    """A byte count: a whole number from 1 to MAX_BYTES (not a boolean)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and 1 <= value <= MAX_BYTES


def _gpu_index(value, gpus: int) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and 0 <= value < gpus


def _check_text(where: str, field: str, value) -> None:
    if not isinstance(value, str) or not value or len(value) > 200 or not value.isprintable():
        raise AppError(f"{at(where, field)}: expected a name (one line of at most 200 characters), got "
                       f"{shorten(value, 40)}")


def _check_gpu(where: str, field: str, value, gpus: int) -> None:
    if not _gpu_index(value, gpus):
        raise AppError(f"{at(where, field)}: expected a GPU index from 0 to {gpus - 1} (the application has {gpus} "
                       f"GPU{'s' if gpus > 1 else ''}), got {shorten(value, 40)}")


def _check_bytes(where: str, field: str, value) -> None:
    if not whole_bytes(value):
        raise AppError(f"{at(where, field)}: expected a whole number of bytes from 1 to {MAX_BYTES:,}, got "
                       f"{shorten(value, 40)}")


def check_gpus(gpus, what: str = "gpus") -> int:
    if not isinstance(gpus, numbers.Integral) or isinstance(gpus, bool) or not 1 <= gpus <= MAX_GPUS:
        raise AppError(f"{what}: expected a whole number of GPUs from 1 to {MAX_GPUS}, got {shorten(gpus, 40)}")
    return int(gpus)


def check_command(command, where: str, gpus: int) -> None:
    """One command's fields (types, ranges, GPU indices); the events are checked across commands."""
    if not isinstance(command, COMMAND_TYPES):
        raise AppError(f"{where}: expected a KernelCommand, CopyCommand, AllReduceCommand, RecordCommand or "
                       f"WaitCommand, got {shorten(command, 40)}")
    _check_text(where, "stream", command.stream)
    if getattr(command, "name", None) is not None:
        _check_text(where, "name", command.name)
    if isinstance(command, KernelCommand):
        if not isinstance(command.workload, (str, Path)) or not str(command.workload).strip():
            raise AppError(f"{at(where, 'kernel')}: expected a workload path, got {shorten(command.workload, 40)}")
        if not isinstance(command.params, dict):
            raise AppError(f"{at(where, 'params')}: expected a mapping of parameter names to numbers, got "
                           f"{shorten(command.params, 40)}")
        _check_gpu(where, "gpu", command.gpu, gpus)
    elif isinstance(command, CopyCommand):
        _check_bytes(where, "copy.bytes", command.bytes)
        if command.kind not in COPY_KINDS:
            raise AppError(f"{at(where, 'copy.kind')}: expected one of {', '.join(COPY_KINDS)}, got "
                           f"{shorten(command.kind, 40)}")
        _check_gpu(where, "gpu", command.gpu, gpus)
        if command.kind == "p2p":
            _check_gpu(where, "copy.src_gpu", command.source_gpu, gpus)
            if command.dst_gpu is None:
                raise AppError(f"{at(where, 'copy.dst_gpu')}: a p2p copy names the GPU it copies to")
            _check_gpu(where, "copy.dst_gpu", command.dst_gpu, gpus)
            if command.dst_gpu == command.source_gpu:
                raise AppError(f"{at(where, 'copy.dst_gpu')}: expected another GPU than the source "
                               f"({command.dst_gpu}); a copy within one GPU is kind d2d")
        elif command.src_gpu is not None or command.dst_gpu is not None:
            raise AppError(f"{at(where, 'copy')}: src_gpu and dst_gpu are for kind p2p; a {command.kind} copy runs on "
                           f"`gpu`")
    elif isinstance(command, AllReduceCommand):
        _check_bytes(where, "allreduce.bytes", command.bytes)
    else:
        _check_text(where, "record" if isinstance(command, RecordCommand) else "wait", command.event)
        _check_gpu(where, "gpu", command.gpu, gpus)


def check_application(app: Application, gpus: int | None = None) -> int:
    """Every command of `app` on `gpus` GPUs (None: the application's own count), and every wait after a record of
    its event; returns the GPU count. A one-line AppError for the first problem."""
    if not isinstance(app, Application):
        raise AppError(f"expected an Application (or the path of an application file), got {shorten(app, 40)}")
    _check_text("application", "name", app.name)
    count = check_gpus(app.gpus if gpus is None else gpus, "gpus" if gpus is None else "--gpus")
    if not app.commands:
        raise AppError(f"{app.source or shown(app.name, 60)}: commands: expected at least one command")
    recorded: set[str] = set()
    for index, command in enumerate(app.commands):
        where = command_where(app, index)
        check_command(command, where, count)
        if isinstance(command, RecordCommand):
            recorded.add(command.event)
        elif isinstance(command, WaitCommand) and command.event not in recorded:
            raise AppError(f"{at(where, 'wait')}: event {shorten(command.event, 40)} is not recorded before this "
                           f"command (a `record: {shown(command.event, 40)}` on some stream must come first)")
    return count


__all__ = ["AllReduceCommand", "AppError", "Application", "COMMAND_TYPES", "COPY_KINDS", "Command", "CopyCommand",
           "DEFAULT_STREAM", "KernelCommand", "MAX_BYTES", "MAX_GPUS", "RecordCommand", "WaitCommand",
           "check_application", "check_command", "check_gpus", "command_where", "whole_bytes"]
