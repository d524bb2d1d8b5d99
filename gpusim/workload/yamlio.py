"""YAML loading that remembers line numbers, so errors can say `file:line`."""

from __future__ import annotations

from pathlib import Path

import yaml

from ..errors import GpusimError


class WorkloadError(GpusimError):
    """A workload file that cannot be loaded or run; the message starts with `file:line:`."""


class LineDict(dict):
    """A mapping from YAML that knows the line it started on (1-based)."""

    line: int = 0


class _LineLoader(yaml.SafeLoader):
    pass


def _construct_mapping(loader, node, deep=False):
    loader.flatten_mapping(node)
    mapping = LineDict()
    mapping.line = node.start_mark.line + 1
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, (str, int, float, bool)):
            raise yaml.constructor.ConstructorError(None, None, "mapping keys must be plain scalars",
                                                    key_node.start_mark)
        mapping[key] = loader.construct_object(value_node, deep=deep)
    return mapping


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_yaml_with_lines(path: Path):
    try:
        text = path.read_text()
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        return yaml.load(text, Loader=_LineLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise WorkloadError(f"{path}{line}: not valid YAML ({problem})") from None
