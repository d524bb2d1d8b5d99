"""Find and load architecture files: `load_arch("h100")` or `load_arch("path/to/custom.yaml")`; and the
hardened YAML reader every input file goes through (workloads use it too, through workload/yamlio.py).

Unknown keys, missing keys, wrong types and values outside a field's range become a one-line `ArchError`
naming the file, the key (and its line) and what was expected.

The YAML reader bounds time and memory whatever the file holds:
* at most `MAX_YAML_BYTES` are read (a FIFO, /dev/zero or a slow stream included: at most that many bytes,
  and no more than `STREAM_WAIT_S` seconds waiting for them);
* UTF-8 only; anchors and aliases (billion laughs) and merge keys are refused, not expanded;
* nesting deeper than `MAX_YAML_DEPTH`, more than `MAX_YAML_NODES` values, or a number literal longer than
  `MAX_NUMBER_CHARS` is refused; a key given twice in one mapping is an error naming both lines.
"""

from __future__ import annotations

import functools
import os
import re
import select
import stat
import time
from pathlib import Path

import attrs
import cattrs
import yaml
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError
from yaml.composer import Composer
from yaml.constructor import SafeConstructor

from ..errors import ArchError, GpusimError, shorten
from ..errors import one_line as _one_line
from .spec import ArchSpec

MAX_YAML_BYTES = 4 * 2**20
MAX_YAML_DEPTH = 64
MAX_YAML_NODES = 100_000
MAX_NUMBER_CHARS = 100
STREAM_WAIT_S = 10.0
MAX_MESSAGE_CHARS = 300

_PACKAGED = Path(__file__).resolve().parent.parent / "_data" / "arch"  # inside an installed wheel
_CHECKOUT = Path(__file__).resolve().parents[2] / "arch"  # a source checkout / editable install


def shown(text, limit: int = 80) -> str:
    """A path, key or exception as a message shows it: one printable line (escaped, unquoted), long ones
    shortened in the middle (a path's end names the file)."""
    text = str(text)
    if not text.isprintable():
        text = text.encode("unicode_escape", "backslashreplace").decode("ascii")
    return text if len(text) <= limit else f"{text[:limit // 2 - 2]}...{text[-(limit // 2 - 3):]}"


def one_line(message: str) -> str:
    """The last guard on a whole message: one printable line of at most MAX_MESSAGE_CHARS."""
    return _one_line(message, MAX_MESSAGE_CHARS)


# --- the YAML reader ---------------------------------------------------------------------------------------

class LineDict(dict):
    """A mapping from YAML that knows the line it started on and each key's line (1-based)."""

    line: int = 0
    key_lines: dict


class _Refused(yaml.MarkedYAMLError):
    """Input the reader refuses (not a syntax error): its message is the problem itself."""

    def __init__(self, mark, problem: str):
        super().__init__(problem=problem, problem_mark=mark)
        self.keyed = False


def _readable(fd: int, timeout: float) -> bool:
    """Whether fd has data (or its end) within `timeout` seconds."""
    if hasattr(select, "poll"):  # no FD_SETSIZE limit
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(timeout * 1000))
    return bool(select.select([fd], [], [], timeout)[0])


def _read_bytes(path: Path, fail) -> bytes:
    """At most MAX_YAML_BYTES + 1 bytes of the file, within STREAM_WAIT_S for a FIFO or a device."""
    try:
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            fail("cannot read (a directory)")
        regular = stat.S_ISREG(info.st_mode)
        if regular and info.st_size > MAX_YAML_BYTES:
            fail(f"{info.st_size:,} bytes is larger than the {MAX_YAML_BYTES // 2**20} MiB a YAML input may hold")
        fd = os.open(path, os.O_RDONLY | (0 if regular else getattr(os, "O_NONBLOCK", 0)))
    except OSError as exc:
        fail(f"cannot read ({exc.strerror or exc})")
    except ValueError:  # a NUL byte in the path
        fail("cannot read (not a valid path)")
    chunks, size, deadline = [], 0, time.monotonic() + STREAM_WAIT_S
    stream = not regular and hasattr(os, "O_NONBLOCK")  # a FIFO or a device: wait for data, never block
    try:
        while size <= MAX_YAML_BYTES:
            left = deadline - time.monotonic()
            if stream and (left <= 0 or not _readable(fd, left)):
                fail(f"no data within {STREAM_WAIT_S:g} s (a stream that does not end?)")
            try:
                chunk = os.read(fd, min(1 << 20, MAX_YAML_BYTES + 1 - size))
            except BlockingIOError:  # woken with nothing to read after all
                continue
            except OSError as exc:
                fail(f"cannot read ({exc.strerror or exc})")
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > MAX_YAML_BYTES:
        fail(f"larger than the {MAX_YAML_BYTES // 2**20} MiB a YAML input may hold")
    return b"".join(chunks)


def _decode(data: bytes, fail) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        fail(f"not UTF-8 text (byte 0x{data[exc.start]:02x} at column {column})", line)


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml's events where present: 3x faster
    """A SafeLoader that refuses aliases, anchors, merge keys, duplicate keys, deep nesting, too many values and
    over-long number literals, and builds LineDicts. The composer is PyYAML's (Python) one, so these checks
    apply with libyaml's parser too."""

    def __init__(self, stream):
        super().__init__(stream)
        self.anchors, self.nodes, self.keys = {}, 0, []  # keys: the mapping keys above the node being composed

    get_single_node = Composer.get_single_node
    compose_document = Composer.compose_document
    compose_scalar_node = Composer.compose_scalar_node
    compose_sequence_node = Composer.compose_sequence_node
    compose_mapping_node = Composer.compose_mapping_node

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _Refused(event.start_mark, f"YAML anchors and aliases are not accepted ('{shown(event.anchor, 30)}'"
                                             f"; write the value out)")
        self.nodes += 1
        if self.nodes > MAX_YAML_NODES:
            raise _Refused(event.start_mark, f"more than {MAX_YAML_NODES:,} values in one file")
        if len(self.keys) >= MAX_YAML_DEPTH:
            where = ".".join(shown(k, 40) for k in self.keys if k is not None) or "the document"
            where = where if len(where) <= 80 else where[:77] + "..."  # the outer keys say where
            raise _Refused(event.start_mark, f"{where}: nested deeper than {MAX_YAML_DEPTH} levels")
        # a mapping's value is composed with its key node as `index`
        self.keys.append(str(index.value) if isinstance(index, yaml.ScalarNode) else None)
        try:
            return Composer.compose_node(self, parent, index)
        finally:
            self.keys.pop()

    def construct_object(self, node, deep=False):
        try:
            return super().construct_object(node, deep)
        except yaml.YAMLError:
            raise
        except (ValueError, TypeError, OverflowError, ArithmeticError) as exc:  # e.g. a timestamp in year 0
            raise _Refused(node.start_mark, f"cannot read the value ({shown(exc, 100)})") from None

    def construct_mapping(self, node, deep=False):
        mapping = LineDict()
        mapping.line, mapping.key_lines = node.start_mark.line + 1, {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise _Refused(key_node.start_mark, "merge keys ('<<') are not accepted")
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, (str, int, float, bool)):
                raise _Refused(key_node.start_mark, "mapping keys must be plain scalars")
            if key in mapping.key_lines:
                raise _Refused(key_node.start_mark, f"duplicate key {shorten(key)} (also on line "
                                                    f"{mapping.key_lines[key]})")
            try:  # deep: a list's items now, inside this try, so their errors name the key too
                mapping[key] = self.construct_object(value_node, deep=True)
            except _Refused as exc:
                if not exc.keyed:
                    exc.problem, exc.keyed = f"key {shorten(key)}: {exc.problem}", True
                raise
            mapping.key_lines[key] = line
        return mapping

    def _construct_number(self, node, construct):
        if len(node.value) > MAX_NUMBER_CHARS:
            raise _Refused(node.start_mark, f"a number literal of {len(node.value):,} characters (at most "
                                            f"{MAX_NUMBER_CHARS})")
        return construct(self, node)


_Loader.add_constructor("tag:yaml.org,2002:map", _Loader.construct_mapping)
_Loader.add_constructor("tag:yaml.org,2002:int",
                        lambda self, node: self._construct_number(node, SafeConstructor.construct_yaml_int))
_Loader.add_constructor("tag:yaml.org,2002:float",
                        lambda self, node: self._construct_number(node, SafeConstructor.construct_yaml_float))


def read_yaml(path: Path | str, error: type[GpusimError] = GpusimError):
    """The document in a YAML file (mappings as LineDicts), or `error('file:line: problem')` in one line."""
    path = Path(path)

    def fail(problem: str, line: int | None = None):
        raise error(one_line(f"{shown(path)}{'' if line is None else f':{line}'}: {problem}")) from None

    text = _decode(_read_bytes(path, fail), fail)
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except _Refused as exc:
        fail(exc.problem, exc.problem_mark.line + 1)
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1 if isinstance(exc.position, int) else None
        char = f": {shorten(chr(exc.character))}" if isinstance(exc.character, int) else ""
        fail(f"not valid YAML ({exc.reason}{char})", line)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or "invalid YAML"
        fail(f"not valid YAML ({shown(problem, 120)})", mark.line + 1 if mark else None)
    except RecursionError:  # nesting is capped above; this is the last guard
        fail(f"nested too deeply (at most {MAX_YAML_DEPTH} levels)")


# --- architecture files ------------------------------------------------------------------------------------

def arch_dir() -> Path:
    """The directory holding the shipped architecture files."""
    return _PACKAGED if _PACKAGED.is_dir() else _CHECKOUT


MIG_TABLE = "mig.yaml"  # the MIG profile tables beside the arch files (gpusim/arch/mig.py), not an arch


def known_archs() -> list[str]:
    return sorted(p.stem for p in arch_dir().glob("*.yaml") if p.name != MIG_TABLE)


def _strict_int(value, _type):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, got {shorten(value)}")
    return value


def _strict_float(value, _type):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number, got {shorten(value)}")
    try:
        return float(value)
    except OverflowError:
        raise TypeError(f"expected a number, got {shorten(value)}") from None


def _strict_str(value, _type):
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {shorten(value)}")
    return value


def _strict_bool(value, _type):
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {shorten(value)}")
    return value


@functools.cache
def spec_converter() -> cattrs.Converter:
    """The converter from parsed YAML to the spec classes (arch files, the MIG table): unknown keys refused, no
    coercion between kinds of scalar (a boolean is not a number, a number not a string), every problem collected."""
    conv = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    conv.register_structure_hook(int, _strict_int)
    conv.register_structure_hook(float, _strict_float)
    conv.register_structure_hook(str, _strict_str)
    conv.register_structure_hook(bool, _strict_bool)
    conv.register_structure_hook_func(lambda t: t == tuple[int, ...], lambda val, _t: tuple(_list_of_ints(val)))
    conv.register_structure_hook_factory(attrs.has, lambda cls: _mapping_only(conv.gen_structure_attrs_fromdict(cls),
                                                                               cls))
    return conv


def _mapping_only(hook, cls):
    """A spec (clocks:, memory: l1:, ...) must be a mapping; anything else is named as such."""
    def structure(value, _type):
        if not isinstance(value, dict):
            raise TypeError(f"expected a mapping of {cls.__name__} keys, got {shorten(value)}")
        return hook(value, _type)
    return structure


def _list_of_ints(value):
    if not isinstance(value, list):
        raise TypeError(f"expected a list of integers, got {shorten(value)}")
    return [_strict_int(x, int) for x in value]


def _line_of(data, path: str) -> int | None:
    """The line of a dotted key path in LineDict data from the YAML reader (None for plain dicts)."""
    line = None
    for key in re.sub(r"\[\d+\]", "", path).split("."):
        if not isinstance(data, LineDict) or key not in data:
            return line
        line, data = data.key_lines.get(key, line), data[key]
    return line


def describe_problems(exc: BaseException, path: str, data) -> list[str]:
    """Flatten a cattrs validation error into 'key: problem' strings."""
    if isinstance(exc, ForbiddenExtraKeysError):
        where = f"{path}." if path else ""
        return [f"unknown key '{where}{shown(k, 40)}' (a typo?)" for k in sorted(map(str, exc.extra_fields))]
    if isinstance(exc, (ClassValidationError, cattrs.errors.IterableValidationError)):
        out = []
        for sub in exc.exceptions:
            note = getattr(sub, "__notes__", [None])[0]
            name = getattr(note, "name", None) if note is not None else None
            if name is None and note is not None and hasattr(note, "index"):
                name = f"[{note.index}]"
            sub_path = path if name is None else (f"{path}{name}" if name.startswith("[") else
                                                   f"{path}.{name}" if path else name)
            out += describe_problems(sub, sub_path, data)
        return out
    if isinstance(exc, KeyError):
        return [f"missing key '{path}'"]
    msg = str(exc)
    m = re.match(r"(\w+): (.*)", msg)  # our validators: 'field: expected ...'
    if m and not path.endswith(m.group(1)):
        path, msg = f"{path + '.' if path else ''}{m.group(1)}", m.group(2)
    line = _line_of(data, path)
    return [f"'{path}'{f' (line {line})' if line else ''}: {msg}"]


def join_problems(problems: list[str], source: str) -> str:
    """'source: p1; p2; ...' in at most MAX_MESSAGE_CHARS (unknown keys first: a typo's missing key follows),
    naming how many problems did not fit."""
    problems = sorted(problems, key=lambda p: not p.startswith("unknown key"))
    text = f"{source}: {problems[0]}"
    for i, problem in enumerate(problems[1:], 1):
        rest = len(problems) - i
        if len(text) + len(problem) + 2 > MAX_MESSAGE_CHARS - 24:
            return f"{text}; and {rest} more problem{'s' if rest > 1 else ''}"
        text += f"; {problem}"
    return text


def parse_arch(data, source: str) -> ArchSpec:
    """Build an ArchSpec from parsed YAML; `source` names the file in error messages."""
    source = shown(source)
    if not isinstance(data, dict):
        raise ArchError(f"{source}: expected a mapping of architecture keys at the top level")
    try:
        spec = spec_converter().structure(data, ArchSpec)
    except (ClassValidationError, ForbiddenExtraKeysError) as exc:
        raise ArchError(one_line(join_problems(describe_problems(exc, "", data), source))) from None
    except (TypeError, ValueError) as exc:
        raise ArchError(one_line(f"{source}: {exc}")) from None
    _check_fp16_rate(spec, data, source)
    return spec


def _check_fp16_rate(spec: ArchSpec, data, source: str) -> None:
    """A file's tensor rates table states the FP16 peak the engine uses (sub_partitions x
    dense_fp16_flops_per_clock) as its fp16 dense rate: the other precisions are read relative to it."""
    rates = spec.pipelines.tensor.rates
    engine = spec.sm.sub_partitions * spec.pipelines.tensor.dense_fp16_flops_per_clock
    if rates is not None and rates.fp16.dense != engine:
        path = "pipelines.tensor.rates.fp16.dense"
        line = _line_of(data, path)
        raise ArchError(one_line(
            f"{source}: '{path}'{f' (line {line})' if line else ''}: expected sm.sub_partitions x "
            f"pipelines.tensor.dense_fp16_flops_per_clock = {engine} FLOP/clk/SM (the engine's FP16 peak), "
            f"got {rates.fp16.dense}"))


def load_arch_file(path: Path) -> ArchSpec:
    return parse_arch(read_yaml(path, ArchError), str(path))


@functools.cache
def _load_named(name: str) -> ArchSpec:
    return load_arch_file(arch_dir() / f"{name}.yaml")


def _is_file(text: str) -> bool:
    try:
        return Path(text).is_file()
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte
        return False


def load_arch(name_or_path: str | Path | ArchSpec) -> ArchSpec:
    """An ArchSpec from a shipped name ('h100'), a MIG slice of one ('h100:3g.40gb'), a path to a YAML file, or
    an ArchSpec (returned as is)."""
    if isinstance(name_or_path, ArchSpec):
        return name_or_path
    text = str(name_or_path)
    if text.endswith((".yaml", ".yml")) or "/" in text or _is_file(text):
        return load_arch_file(Path(text))
    if ":" in text:
        from .mig import load_mig_slice

        return load_mig_slice(text)
    key = text.lower()
    if key not in known_archs():
        raise ArchError(f"unknown arch '{shown(text, 40)}': expected one of {', '.join(known_archs())} "
                        f"or a path to a .yaml file")
    return _load_named(key)
