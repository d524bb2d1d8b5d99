"""Application files: the YAML format (docs/reference/app-format.md) and an Accel-Sim `kernelslist.g`, each read
into a gpusim.app.commands.Application. Every error is one line naming the file, the line and the field.

```yaml
name: two_streams
gpus: 1
commands:
  - {kernel: workloads/gemm_tile128.yaml, params: {M: 1024}, stream: a}
  - {copy: {bytes: 64M, kind: h2d}, stream: b}
  - {record: done, stream: b}
  - {wait: done, stream: a}
  - {allreduce: {bytes: 1G}, stream: a}
```

A kernel's workload path is looked up beside the application file first, then from the top of the gpusim
checkout (or its installed copy), where `workloads/` is.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..arch.load import LineDict, read_yaml, shown
from ..errors import shorten
from ..trace.commands import is_command_list, read_command_list
from .commands import (AllReduceCommand, AppError, Application, CopyCommand, KernelCommand, RecordCommand,
                       WaitCommand, check_application)

TOP_KEYS = ("name", "description", "gpus", "commands")
COMMAND_KEYS = ("kernel", "copy", "record", "wait", "allreduce")
# the keys each command takes beside its own
OTHER_KEYS = {"kernel": ("params", "stream", "gpu", "name"), "copy": ("stream", "gpu", "name"),
              "record": ("stream", "gpu"), "wait": ("stream", "gpu"), "allreduce": ("stream", "name")}
COPY_KEYS = ("bytes", "kind", "src_gpu", "dst_gpu")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(i?[bB])?\s*$")
_SCIENTIFIC = re.compile(r"^\s*\d+(?:\.\d+)?[eE]\+?\d{1,2}\s*$")
_SCALE = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_PACKAGE = Path(__file__).resolve().parents[1]


def shipped_root() -> Path:
    """The directory holding the shipped `workloads/`: the checkout's top, or the installed package's data."""
    checkout = _PACKAGE.parent
    return checkout if (checkout / "workloads").is_dir() else _PACKAGE / "_data"


def parse_bytes(value):
    """A byte count from YAML: an integer, or text such as 65536, 64K, 64KiB, 1.5M, 2G (K = 1024), 1e9; anything
    else is returned as given, for check_application to refuse with the command's place."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if not isinstance(value, str):
        return value
    if _SCIENTIFIC.match(value):  # 1e9, 2.5e6: YAML reads these as text
        size = float(value)
        return int(size) if size.is_integer() else value
    m = _SIZE.match(value)
    if not m:
        return value
    size = float(m.group(1)) * _SCALE[m.group(2).lower()]
    return int(size) if size.is_integer() else value


def display_path(path: str | Path) -> str:
    """A workload's path as records show it: under shipped_root() relative to it (workloads/x.yaml), else as given."""
    try:
        return Path(path).resolve().relative_to(shipped_root().resolve()).as_posix()
    except (ValueError, OSError):
        return str(path)


def find_workload(text, base: Path) -> Path | None:
    """The workload file a kernel command names: beside the application file, then under shipped_root()."""
    for root in (base, shipped_root()):
        try:
            path = (root / str(text)).resolve()
            if path.is_file():
                return path
        except (OSError, ValueError):  # a name too long, a NUL byte
            return None
    return None


def _line(data, key=None) -> int:
    if isinstance(data, LineDict):
        return data.key_lines.get(key, data.line) if key is not None else data.line
    return 0


def _parse_command(item, index: int, path: Path, line: int):
    where = f"{shown(path)}:{line}: commands[{index}]"
    if not isinstance(item, dict):
        raise AppError(f"{where}: expected a mapping with one of {', '.join(COMMAND_KEYS)}, got "
                       f"{shorten(item, 40)}")
    kinds = [key for key in item if key in COMMAND_KEYS]
    if len(kinds) != 1:
        unknown = [key for key in item if key not in COMMAND_KEYS and all(key not in o for o in OTHER_KEYS.values())]
        what = (f"unknown command {shorten(unknown[0], 40)}" if unknown and not kinds else
                f"one command per item, got {' and '.join(map(str, kinds))}" if kinds else "no command")
        raise AppError(f"{where}: {what} (expected one of {', '.join(COMMAND_KEYS)})")
    kind = kinds[0]
    for key in item:
        if key != kind and key not in OTHER_KEYS[kind]:
            raise AppError(f"{shown(path)}:{_line(item, key)}: commands[{index}]: unknown key {shorten(key, 40)} for "
                           f"a {kind} command (expected {', '.join(OTHER_KEYS[kind])})")
    common = {k: item[k] for k in ("stream", "gpu", "name") if k in item and k in OTHER_KEYS[kind]}
    value = item[kind]
    if kind == "kernel":
        if not isinstance(value, str):
            raise AppError(f"{where}.kernel: expected a workload path, got {shorten(value, 40)}")
        found = find_workload(value, path.parent)
        if found is None:
            raise AppError(f"{where}.kernel: workload {shorten(value, 60)} not found beside the application "
                           f"({shown(path.parent, 60)}) or under {shown(shipped_root(), 60)}")
        params = item.get("params", {})
        if not isinstance(params, dict):
            raise AppError(f"{shown(path)}:{_line(item, 'params')}: commands[{index}].params: expected a mapping of "
                           f"parameter names to numbers, got {shorten(params, 40)}")
        return KernelCommand(found, dict(params), where=where, **common)
    if kind in ("copy", "allreduce"):
        keys = COPY_KEYS if kind == "copy" else ("bytes",)
        if not isinstance(value, dict) or "bytes" not in value:
            raise AppError(f"{where}.{kind}: expected a mapping with bytes ({', '.join(keys)}), got "
                           f"{shorten(value, 40)}")
        for key in value:
            if key not in keys:
                raise AppError(f"{where}.{kind}: unknown key {shorten(key, 40)} (expected "
                               f"{', '.join(keys)})")
        size = parse_bytes(value["bytes"])
        if kind == "allreduce":
            return AllReduceCommand(size, where=where, **common)
        return CopyCommand(size, value.get("kind", "h2d"), src_gpu=value.get("src_gpu"), dst_gpu=value.get("dst_gpu"),
                           where=where, **common)
    if not isinstance(value, str):
        raise AppError(f"{where}.{kind}: expected an event name, got {shorten(value, 40)}")
    return (RecordCommand if kind == "record" else WaitCommand)(value, where=where, **common)


def load_application_file(path: str | Path, gpus: int | None = None) -> Application:
    """An application from its YAML file; a one-line AppError naming `file:line` and the field for anything refused
    (the commands checked as check_application checks them, on `gpus` GPUs: None, the file's own count)."""
    path = Path(path)
    data = read_yaml(path, AppError)
    if not isinstance(data, dict):
        raise AppError(f"{shown(path)}: expected a mapping with name and commands at the top level")
    for key in data:
        if key not in TOP_KEYS:
            raise AppError(f"{shown(path)}:{_line(data, key)}: unknown key {shorten(key, 40)} (expected "
                           f"{', '.join(TOP_KEYS)})")
    for key in ("name", "commands"):
        if key not in data:
            raise AppError(f"{shown(path)}: missing key '{key}'")
    name, description = data["name"], data.get("description", "")
    for key, value in (("name", name), ("description", description)):
        if not isinstance(value, str) or not value.isprintable() or len(value) > (200 if key == "name" else 2000):
            raise AppError(f"{shown(path)}:{_line(data, key)}: {key}: expected one line of text, got "
                           f"{shorten(value, 40)}")
    items = data["commands"]
    if not isinstance(items, list) or not items:
        raise AppError(f"{shown(path)}:{_line(data, 'commands')}: commands: expected a list of at least one command, "
                       f"got {shorten(items, 40)}")
    commands = [_parse_command(item, i, path, _line(item) or _line(data, "commands")) for i, item in enumerate(items)]
    app = Application(name, commands, gpus=data.get("gpus", 1), description=description, source=shown(path))
    try:
        check_application(app, gpus)
    except AppError as exc:
        if str(exc).startswith("gpus:"):
            raise AppError(f"{shown(path)}:{_line(data, 'gpus')}: {exc}") from None
        raise
    return app


_COPY_KIND = {"memcpyhtod": "h2d", "memcpydtoh": "d2h", "memcpydtod": "d2d"}


def load_command_list(path: str | Path) -> Application:
    """An Accel-Sim trace directory's `kernelslist.g` as an application on the default stream of one GPU: each
    kernel line a kernel, each memcpy line a copy (MemcpyHtoD h2d, MemcpyDtoH d2h, MemcpyDtoD d2d); memset lines
    are left out (their count is in `notes`)."""
    path = Path(path)
    commands, memsets = [], 0
    for entry in read_command_list(path):
        where = f"{shown(path)}:{entry.line}"
        if entry.kernel is not None:
            commands.append(KernelCommand(entry.kernel, where=where))
            continue
        kind = _COPY_KIND.get(entry.text.split(",")[0].strip().lower())
        if kind is None:
            memsets += 1
            continue
        commands.append(CopyCommand(int(entry.text.rsplit(",", 1)[1]), kind, where=where))
    notes = [f"{shown(path)}: {memsets} memset line(s) left out (not modelled)"] if memsets else []
    app = Application(path.resolve().parent.name or str(path), commands, source=shown(path), notes=notes)
    check_application(app)
    return app


def load_application(source: str | Path | Application, gpus: int | None = None) -> Application:
    """An Application as given, or read from an application YAML file or a `kernelslist.g` (checked on `gpus` GPUs:
    None, as many as it says)."""
    if isinstance(source, Application):
        return source
    if not isinstance(source, (str, Path)):
        raise AppError(f"expected an Application or the path of an application file, got {shorten(source, 40)}")
    if is_command_list(source):
        return load_command_list(source)
    return load_application_file(source, gpus)


__all__ = ["display_path", "find_workload", "load_application", "load_application_file", "load_command_list",
           "parse_bytes", "shipped_root"]
