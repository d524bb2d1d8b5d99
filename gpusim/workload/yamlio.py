"""Workload YAML: the hardened reader (gpusim.arch.load.read_yaml: bounded size, UTF-8, no aliases, a depth
cap, duplicate keys refused) with line numbers, so errors can say `file:line`."""

from __future__ import annotations

from pathlib import Path

from ..arch.load import LineDict, read_yaml
from ..errors import GpusimError

__all__ = ["LineDict", "WorkloadError", "load_yaml_with_lines"]


class WorkloadError(GpusimError):
    """A workload file that cannot be loaded or run; the message starts with `file:line:`."""


def load_yaml_with_lines(path: Path):
    """The workload file's document, mappings as LineDicts; a one-line WorkloadError for anything refused."""
    return read_yaml(path, WorkloadError)
