"""The compiled engine: which modules mypyc compiles at install time, and whether this process uses them.

The engine's hot modules are plain, fully annotated Python. `pip install` compiles them with mypyc (see
hatch_build.py) into C extensions beside the sources; Python then imports the extension instead of the .py.
Results are the same either way (a test runs both). The sources are used instead when

* no compiled module is there (no C compiler at install time, or `GPUSIM_PURE_PYTHON=1` at install time),
* `GPUSIM_PURE_PYTHON=1` is set now (for debuggers and profilers that need Python frames), or
* a source changed after it was compiled (an editable install being edited): running stale machine code
  would silently ignore the edit, so the sources run and one line on stderr says how to rebuild.

This module imports only the standard library: the build hook loads it by path.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from pathlib import Path

# Compiled together as one group (they call each other natively). What a user may replace (memory models,
# observers) is reached through duck typing; the scheduling policies allow interpreted subclasses.
COMPILED = (
    "gpusim/isa/opinfo.py",
    "gpusim/isa/inst.py",
    "gpusim/engine/timing.py",
    "gpusim/engine/scheduler.py",
    "gpusim/engine/warp.py",
    "gpusim/engine/subpartition.py",
    "gpusim/engine/sm.py",
    "gpusim/engine/calendar.py",
    "gpusim/engine/gpu.py",
    "gpusim/engine/asynchrony.py",
    "gpusim/engine/clusters.py",
    "gpusim/engine/tensor_memory.py",
    "gpusim/memory/cache.py",
    "gpusim/memory/levels.py",
    "gpusim/memory/coalescer.py",
    "gpusim/memory/line_table.py",
    "gpusim/memory/keyed_heap.py",
    "gpusim/memory/mshr.py",
    "gpusim/memory/shared_banks.py",
    "gpusim/memory/sm_network.py",
    "gpusim/memory/l2_tags.py",
    "gpusim/memory/l2_contents.py",
    "gpusim/memory/shadow_l2.py",
    "gpusim/memory/l1.py",
    "gpusim/memory/sm_port.py",
    "gpusim/memory/dram_channel.py",
    "gpusim/memory/l2_slice.py",
    "gpusim/memory/hierarchy.py",
    "gpusim/stats/counters.py",
    "gpusim/workload/warp_walker.py",
    "gpusim/workload/block_walker.py",
    "gpusim/workload/expr_closures.py",
)
GROUP = "gpusim_native"  # the shared library mypyc builds for the group: gpusim_native__mypyc.<abi>.so
STAMP = "_native_stamp.json"  # beside this file: the digest of each source as it was compiled
PURE_ENV = "GPUSIM_PURE_PYTHON"
_ROOT = Path(__file__).resolve().parent.parent  # the directory holding the gpusim package

mode = "interpreted (not compiled)"  # what this process runs; set by use_compiled_if_current()


def module_name(relpath: str) -> str:
    return relpath[:-3].replace("/", ".")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def compiled_present(root: Path = _ROOT) -> bool:
    """True when an extension module sits beside every compiled source."""
    return all(any((root / rel).with_suffix(suffix).exists() for suffix in importlib.machinery.EXTENSION_SUFFIXES)
               for rel in COMPILED)


def stale_sources(root: Path = _ROOT) -> list[str]:
    """Compiled sources that differ from what was compiled (all of them when the stamp is missing)."""
    try:
        stamp = json.loads((root / "gpusim" / STAMP).read_text())
    except (OSError, ValueError):
        return list(COMPILED)
    return [rel for rel in COMPILED if stamp.get(rel) != digest(root / rel)]


def write_stamp(root: Path) -> Path:
    path = root / "gpusim" / STAMP
    path.write_text(json.dumps({rel: digest(root / rel) for rel in COMPILED}, indent=1) + "\n")
    return path


class _SourceFinder:
    """A meta-path finder that loads the listed modules from their .py files, ahead of the extensions."""

    def __init__(self, root: Path):
        self.files = {module_name(rel): root / rel for rel in COMPILED}

    def find_spec(self, fullname, path=None, target=None):
        source = self.files.get(fullname)
        return None if source is None else importlib.util.spec_from_file_location(fullname, source)


def use_compiled_if_current(root: Path = _ROOT) -> str:
    """Decide, before any engine module is imported, whether this process runs the compiled modules."""
    global mode
    if not compiled_present(root):
        mode = "interpreted (not compiled)"
        return mode
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        reason = f"{PURE_ENV} is set"
    else:
        stale = stale_sources(root)
        reason = f"{stale[0].removeprefix('gpusim/')} changed since it was compiled" if stale else ""
        if reason:
            print(f"gpusim: running the engine's sources: {reason} (recompile: pip install -e .)", file=sys.stderr)
    if reason:
        if not any(isinstance(f, _SourceFinder) for f in sys.meta_path):
            sys.meta_path.insert(0, _SourceFinder(root))
        mode = f"interpreted ({reason})"
    else:
        mode = "compiled (mypyc)"
    return mode
