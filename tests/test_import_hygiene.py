"""Imports in gpusim/ point one way and reach only public names.

* No module imports another module's private names (`from gpusim.x import _helper`, or `x._helper` on a module
  imported as `x`); dunder names are public. A helper two modules share has a public name.
* Only the command line imports the package's root (gpusim/__init__.py), which reaches up to the library's entry
  points; every other module imports the module that defines what it needs.
* The import contracts in pyproject.toml's [tool.importlinter] hold: the layers, top to bottom, and no front end
  imported by the engine or the memory models (checked with import-linter where it is installed).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import gpusim

PACKAGE_DIR = Path(gpusim.__file__).resolve().parent
PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"  # (the contracts)
ROOT_IMPORTERS = {"gpusim.cli", "gpusim.__main__"}  # the command line


def modules() -> dict[str, tuple[Path, bool]]:
    """Every module of the package: dotted name -> (file, whether it is a package's __init__)."""
    found = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
        package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if package else parts)] = (path, package)
    return found


def target(module: str, package: bool, node: ast.ImportFrom) -> str:
    """The module a `from ... import` names, resolved against the importing module."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if package else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def gpusim_module(name: str) -> bool:
    return name == "gpusim" or name.startswith("gpusim.")


@pytest.mark.fast
def test_modules_are_found():
    found = modules()
    assert {"gpusim", "gpusim.cli", "gpusim.api", "gpusim.engine.gpu", "gpusim.arch.load"} <= set(found)


@pytest.mark.fast
def test_no_module_imports_another_modules_private_names():
    found = modules()
    offences = []
    for module, (path, package) in found.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        bound: dict[str, str] = {}  # local name -> the gpusim module it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = target(module, package, node)
                if not gpusim_module(source):
                    continue
                for alias in node.names:
                    if private(alias.name) and source != module:
                        offences.append(f"{path.relative_to(PACKAGE_DIR.parent)}:{node.lineno}: "
                                        f"from {source} import {alias.name}")
                    if f"{source}.{alias.name}" in found:
                        bound[alias.asname or alias.name] = f"{source}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if gpusim_module(alias.name):
                        bound[alias.asname or "gpusim"] = alias.name if alias.asname else "gpusim"
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and private(node.attr) and isinstance(node.value, ast.Name)
                    and bound.get(node.value.id, module) != module):
                offences.append(f"{path.relative_to(PACKAGE_DIR.parent)}:{node.lineno}: "
                                f"{node.value.id}.{node.attr} ({bound[node.value.id]})")
    assert not offences, "private names imported across modules:\n" + "\n".join(offences)


@pytest.mark.fast
def test_only_the_command_line_imports_the_package_root():
    found = modules()
    offences = []
    for module, (path, package) in found.items():
        if module in ROOT_IMPORTERS or module == "gpusim":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and target(module, package, node) == "gpusim":
                names = [a.name for a in node.names if f"gpusim.{a.name}" not in found]  # (submodules are fine)
                if names:
                    offences.append(f"{path.relative_to(PACKAGE_DIR.parent)}:{node.lineno}: "
                                    f"from gpusim import {', '.join(names)}")
            elif isinstance(node, ast.Import):
                offences += [f"{path.relative_to(PACKAGE_DIR.parent)}:{node.lineno}: import gpusim"
                             for a in node.names if a.name == "gpusim"]
    assert not offences, "the package root imported below the command line:\n" + "\n".join(offences)


@pytest.mark.fast
def test_import_contracts_hold():
    """`lint-imports` as CI runs it: in the repository, which holds the contracts (pyproject.toml) and the package
    it reads (gpusim/)."""
    pytest.importorskip("importlinter")
    if not PYPROJECT.is_file():
        pytest.skip("no pyproject.toml above the tests")
    command = "from importlinter.cli import lint_imports_command; lint_imports_command()"
    done = subprocess.run([sys.executable, "-c", command, "--no-cache"],
                          cwd=PYPROJECT.parent, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
