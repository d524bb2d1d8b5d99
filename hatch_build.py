"""Build hook: compile the engine's hot modules with mypyc (the list is gpusim/native.py's COMPILED).

The extensions are built in the source tree, beside their sources (where an editable install uses them); a
wheel also packs them.
When compiling is impossible (no C compiler, no Python headers) or GPUSIM_PURE_PYTHON=1 is set, the build
says so in one line and installs the interpreted engine, which gives the same results, slower.
"""

from __future__ import annotations

import importlib.machinery
import os
import runpy
import subprocess
import sys
import tempfile
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

# Runs in a subprocess (a failure cannot take the build down): builds the extensions in place, C files and
# objects in a temporary directory. Arguments: that directory, the group name, the modules.
_SETUP = """
import sys
from setuptools import setup
from mypyc.build import mypycify
target, group, modules = sys.argv[1], sys.argv[2], sys.argv[3:]
setup(name="gpusim-native", packages=[], py_modules=[],
      script_args=["build_ext", "--inplace", "-q", "--build-temp", target],
      ext_modules=mypycify(["--follow-imports=silent", "--ignore-missing-imports"] + modules, opt_level="3",
                           group_name=group, target_dir=target))
"""


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict) -> None:
        root = Path(self.root)
        native = runpy.run_path(str(root / "gpusim" / "native.py"))
        if os.environ.get(native["PURE_ENV"], "") not in ("", "0"):
            self.app.display_info(f"gpusim: {native['PURE_ENV']} is set: installing the interpreted engine")
            return
        with tempfile.TemporaryDirectory() as target:
            done = subprocess.run([sys.executable, "-c", _SETUP, target, native["GROUP"], *native["COMPILED"]],
                                  cwd=root, capture_output=True, text=True)
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            last = [line for line in lines if ": error:" in line][:1] or lines[-1:] or ["no output"]  # (not a warning)
            self.app.display_warning(f"gpusim: compiling the engine with mypyc failed ({last[0][:200]}); "
                                     "installing the interpreted engine (same results, slower)")
            return
        stamp = native["write_stamp"](root)
        self.app.display_info(f"gpusim: compiled {len(native['COMPILED'])} engine modules with mypyc")
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        if version == "editable":
            return  # the extensions sit beside the sources the editable install points at
        suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
        built = [p for p in root.glob(native["GROUP"] + "__mypyc.*") if p.name.endswith(suffixes)]
        built += [p for rel in native["COMPILED"] for p in (root / rel).parent.glob(Path(rel).stem + ".*")
                  if p.name.endswith(suffixes)]
        for path in built:
            build_data["force_include"][str(path)] = str(path.relative_to(root))
        build_data["force_include"][str(stamp)] = str(stamp.relative_to(root))
