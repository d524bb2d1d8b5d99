"""Find and load architecture files: `load_arch("h100")` or `load_arch("path/to/custom.yaml")`.

Unknown keys, missing keys, wrong types and non-positive counts become a one-line `ArchError`
naming the file, the key and what was expected.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import cattrs
import yaml
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError

from ..errors import ArchError
from .spec import ArchSpec

_PACKAGED = Path(__file__).resolve().parent.parent / "_data" / "arch"  # inside an installed wheel
_CHECKOUT = Path(__file__).resolve().parents[2] / "arch"  # a source checkout / editable install


def arch_dir() -> Path:
    """The directory holding the shipped architecture files."""
    return _PACKAGED if _PACKAGED.is_dir() else _CHECKOUT


def known_archs() -> list[str]:
    return sorted(p.stem for p in arch_dir().glob("*.yaml"))


def _strict_int(value, _type):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, got {value!r}")
    return value


def _strict_float(value, _type):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number, got {value!r}")
    return float(value)


def _strict_str(value, _type):
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value


def _strict_bool(value, _type):
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {value!r}")
    return value


@functools.cache
def _converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    conv.register_structure_hook(int, _strict_int)
    conv.register_structure_hook(float, _strict_float)
    conv.register_structure_hook(str, _strict_str)
    conv.register_structure_hook(bool, _strict_bool)
    conv.register_structure_hook_func(lambda t: t == tuple[int, ...], lambda val, _t: tuple(_list_of_ints(val)))
    return conv


def _list_of_ints(value):
    if not isinstance(value, list):
        raise TypeError(f"expected a list of integers, got {value!r}")
    return [_strict_int(x, int) for x in value]


def _describe(exc: BaseException, path: str) -> list[str]:
    """Flatten a cattrs validation error into 'key: problem' strings."""
    if isinstance(exc, ForbiddenExtraKeysError):
        where = f"{path}." if path else ""
        return [f"unknown key '{where}{k}' (a typo?)" for k in sorted(exc.extra_fields)]
    if isinstance(exc, (ClassValidationError, cattrs.errors.IterableValidationError)):
        out = []
        for sub in exc.exceptions:
            note = getattr(sub, "__notes__", [None])[0]
            name = getattr(note, "name", None) if note is not None else None
            if name is None and note is not None and hasattr(note, "index"):
                name = f"[{note.index}]"
            sub_path = path if name is None else (f"{path}{name}" if name.startswith("[") else
                                                   f"{path}.{name}" if path else name)
            out += _describe(sub, sub_path)
        return out
    if isinstance(exc, KeyError):
        return [f"missing key '{path}'"]
    msg = str(exc)
    m = re.match(r"(\w+): (.*)", msg)  # our validators: 'field: expected ...'
    if m and not path.endswith(m.group(1)):
        return [f"'{path + '.' if path else ''}{m.group(1)}': {m.group(2)}"]
    return [f"'{path}': {msg}"]


def parse_arch(data, source: str) -> ArchSpec:
    """Build an ArchSpec from parsed YAML; `source` names the file in error messages."""
    if not isinstance(data, dict):
        raise ArchError(f"{source}: expected a mapping of architecture keys at the top level")
    try:
        return _converter().structure(data, ArchSpec)
    except (ClassValidationError, ForbiddenExtraKeysError) as exc:
        problems = _describe(exc, "")
        raise ArchError(f"{source}: " + "; ".join(problems)) from None
    except (TypeError, ValueError) as exc:
        raise ArchError(f"{source}: {exc}") from None


def load_arch_file(path: Path) -> ArchSpec:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ArchError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ArchError(f"{path}:{where}: not valid YAML ({problem})") from None
    return parse_arch(data, str(path))


@functools.cache
def _load_named(name: str) -> ArchSpec:
    return load_arch_file(arch_dir() / f"{name}.yaml")


def load_arch(name_or_path: str | Path | ArchSpec) -> ArchSpec:
    """An ArchSpec from a shipped name ('h100'), a path to a YAML file, or an ArchSpec (returned as is)."""
    if isinstance(name_or_path, ArchSpec):
        return name_or_path
    text = str(name_or_path)
    if text.endswith((".yaml", ".yml")) or "/" in text or Path(text).is_file():
        return load_arch_file(Path(text))
    key = text.lower()
    if key not in known_archs():
        raise ArchError(f"unknown arch '{text}': expected one of {', '.join(known_archs())} or a path to a .yaml file")
    return _load_named(key)
