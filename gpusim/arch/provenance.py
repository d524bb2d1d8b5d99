"""Where an arch file's numbers come from, read from the file itself: `gpusim archs --assumed`.

An arch file states each value's source in the comment on the value's line: a bracketed tag the file's header
expands ([WP] whitepaper, [DS] datasheet, [VAL] our own measurement, ...), "D:" for a value derived from others,
and "R" for a value that is assumed: no measurement and no datasheet gives it (a model choice, a figure carried
over from another part, a recollection). The marker is machine-readable:

* a comment that starts with the token R (`# R`, `# R: ...`, `# R (as Hopper)`) marks every value on its line;
* on a line that holds a flow mapping (`fp64: {lanes: 8, latency: 8}`), `<key> R` anywhere in the comment
  (`# [WP] 32 FP64/SM; latency R`) marks that key alone.

Any other R token in a value's comment is a mistake the tests catch (`stray_markers`): it would read as a
marker to a person but not to this module. Only the comment on the value's own line counts; comment lines
below it continue its explanation.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import ArchError
from .load import LineDict, arch_dir, known_archs, read_yaml

_LEADING = re.compile(r"R(?![\w-])")  # the comment's first token
_TOKEN = re.compile(r"(?<![\w\[\].-])R(?![\w-])")  # R as a word: not R0, [R], R-type, ...


def comment_of(line: str) -> str:
    """The comment on a YAML line ('' if none): the text after the first '#' that starts a comment (at the start
    or after white space, outside quotes), stripped."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            if char == quote:
                quote = None
        elif char in "'\"" and (i == 0 or line[i - 1] in " \t:[{,"):
            quote = char
        elif char == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[i + 1:].strip()
    return ""


def _leaves(data, prefix: str = ""):
    """(dotted path, line, the keys sharing that line) for every value that is not a mapping, in file order."""
    if not isinstance(data, LineDict):
        return
    by_line: dict[int, list[str]] = {}
    for key, line in data.key_lines.items():
        if not isinstance(data[key], dict):
            by_line.setdefault(line, []).append(str(key))
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _leaves(value, path + ".")
        else:
            line = data.key_lines[key]
            yield path, line, by_line[line]


def marked_keys(comment: str, keys: list[str]) -> set[str]:
    """Which of `keys` (the values on one line) the line's comment marks as assumed."""
    if _LEADING.match(comment):
        return set(keys)
    return {key for key in keys if re.search(rf"(?<![\w.-]){re.escape(key)} R(?![\w-])", comment)}


def stray_markers(comment: str, keys: list[str]) -> list[int]:
    """Offsets of R tokens in a value's comment that mark nothing (neither leading nor after a key of the line)."""
    if _LEADING.match(comment):
        return []
    allowed = {m.end() - 1 for key in keys
               for m in re.finditer(rf"(?<![\w.-]){re.escape(key)} R(?![\w-])", comment)}
    return [m.start() for m in _TOKEN.finditer(comment) if m.start() not in allowed]


def _comments(path: Path):
    """(dotted field, the comment on its line, the keys of that line) for every value in an arch file."""
    data = read_yaml(path, ArchError)
    lines = path.read_text(encoding="utf-8-sig").splitlines()
    for field, line, keys in _leaves(data):
        yield field, comment_of(lines[line - 1]) if 0 < line <= len(lines) else "", keys


def field_notes(path: Path | str) -> list[tuple[str, str, bool]]:
    """(dotted field, its source comment, assumed?) for every value in an arch file, in file order."""
    return [(field, comment, field.rsplit(".", 1)[-1] in marked_keys(comment, keys))
            for field, comment, keys in _comments(Path(path))]


def misread_markers(path: Path | str) -> list[tuple[str, str]]:
    """(field, comment) for every value whose comment holds an R that marks nothing (see `stray_markers`)."""
    return [(field, comment) for field, comment, keys in _comments(Path(path)) if stray_markers(comment, keys)]


def assumed_fields(path: Path | str) -> list[str]:
    """The dotted fields of an arch file whose values are marked assumed, in file order."""
    return [field for field, _comment, assumed in field_notes(path) if assumed]


def assumed_by_arch() -> dict[str, list[str]]:
    """{arch: [assumed fields]} for every shipped architecture (an empty list where none is assumed)."""
    return {name: assumed_fields(arch_dir() / f"{name}.yaml") for name in known_archs()}
