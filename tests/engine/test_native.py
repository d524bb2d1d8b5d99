"""The compiled engine (mypyc) and the interpreted one are the same program: same results, and the sources
win whenever they are newer than what was compiled."""

from __future__ import annotations

import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from gpusim import native

REPO = Path(__file__).resolve().parents[2]
CASES = [  # small runs that reach every compiled module: memory hierarchy, barriers, divergence, ITS
    ("workloads/gemm_tile128_sync.yaml", "h100", ["--set", "M=256", "--set", "N=256", "--set", "K=256", "--sms", "2"]),
    # divergence: 64 blocks on 2 SMs (4 waves); reduction: 128 blocks on 2 SMs (8 waves of 8 resident blocks)
    ("workloads/microbench/divergence.yaml", "a100", ["--simt", "its", "--sms", "2", "--set", "n=16384"]),
    ("workloads/reduction.yaml", "v100", ["--sms", "2", "--scheduler", "two_level", "--set", "n=32768"]),
]


def _installed(code: str, cwd: Path, pure: bool) -> subprocess.CompletedProcess:
    """Run Python code against the installed gpusim (from outside the source tree)."""
    env = {k: v for k, v in os.environ.items() if k != native.PURE_ENV}
    if pure:
        env[native.PURE_ENV] = "1"
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def _installed_mode(tmp_path: Path) -> str:
    done = _installed("import gpusim.native as n; print(n.mode)", tmp_path, pure=False)
    if done.returncode != 0:
        pytest.skip(f"gpusim is not installed in this interpreter: {done.stderr.strip()[-120:]}")
    return done.stdout.strip()


def _metrics(workload: str, arch: str, extra: list[str], cwd: Path, pure: bool) -> dict:
    args = ["run", str(REPO / workload), "--arch", arch, *extra, "--json", "-"]
    done = _installed(f"import sys; from gpusim.cli import main; sys.exit(main({args!r}))", cwd, pure)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    return {k: v for k, v in result["metrics"].items() if "wall" not in k and not k.endswith("_per_second")}


@pytest.mark.parametrize("workload,arch,extra", CASES)
def test_compiled_and_interpreted_engines_agree(tmp_path, workload, arch, extra):
    """Every metric is identical, bit for bit, whichever engine runs."""
    mode = _installed_mode(tmp_path)
    if not mode.startswith("compiled"):
        pytest.skip(f"the installed engine is {mode}: nothing to compare")
    assert _metrics(workload, arch, extra, tmp_path, pure=False) == _metrics(workload, arch, extra, tmp_path,
                                                                              pure=True)


def test_install_compiled_the_engine_where_it_could(tmp_path):
    """Where a C compiler and the Python headers are present, `pip install` must have compiled the engine: a
    module mypyc rejects would otherwise fall back to the interpreted engine unnoticed (pip hides the
    build hook's warning)."""
    compiler = sysconfig.get_config_var("CC") or "cc"
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if shutil.which(compiler.split()[0]) is None or not headers.exists():
        pytest.skip("no C compiler or Python headers here: the interpreted engine is expected")
    mode = _installed_mode(tmp_path)
    assert mode == "compiled (mypyc)", (f"the installed engine is {mode}; see what mypyc says: "
                                        "pip install -v . 2>&1 | grep -A5 'gpusim:'")


def test_forcing_the_interpreted_engine_loads_the_sources(tmp_path):
    done = _installed("import gpusim.native as n, gpusim.engine.subpartition as m, gpusim.memory.hierarchy as h;"
                      "print(n.mode); print(m.__file__); print(h.__file__)", tmp_path, pure=True)
    assert done.returncode == 0, done.stderr
    mode, *files = done.stdout.splitlines()
    assert mode == f"interpreted ({native.PURE_ENV} is set)"
    assert all(f.endswith(".py") for f in files)


def _fake_build(root: Path) -> None:
    """A package tree with every compiled source, an extension beside each and the stamp."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    for rel in native.COMPILED:
        source = root / rel
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(f"# {rel}\n")
        source.with_suffix(suffix).write_bytes(b"")
    native.write_stamp(root)


def test_stamp_matches_the_sources_it_was_written_for(tmp_path):
    _fake_build(tmp_path)
    assert native.compiled_present(tmp_path)
    assert native.stale_sources(tmp_path) == []


def test_an_edited_source_is_stale(tmp_path):
    """An editable install whose source was edited after compiling must not run the old machine code."""
    _fake_build(tmp_path)
    edited = native.COMPILED[3]
    (tmp_path / edited).write_text("# edited\n")
    assert native.stale_sources(tmp_path) == [edited]


def test_without_a_stamp_every_source_is_stale(tmp_path):
    _fake_build(tmp_path)
    (tmp_path / "gpusim" / native.STAMP).unlink()
    assert native.stale_sources(tmp_path) == list(native.COMPILED)


def test_a_missing_extension_means_not_compiled(tmp_path):
    _fake_build(tmp_path)
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    (tmp_path / native.COMPILED[0]).with_suffix(suffix).unlink()
    assert not native.compiled_present(tmp_path)


def test_source_finder_resolves_compiled_modules_to_their_sources(tmp_path):
    _fake_build(tmp_path)
    finder = native._SourceFinder(tmp_path)
    for rel in native.COMPILED:
        spec = finder.find_spec(native.module_name(rel))
        assert spec is not None and spec.origin == str(tmp_path / rel)
    assert finder.find_spec("gpusim.engine.dispatcher") is None  # everything else: the normal import system


def test_compiled_list_names_real_modules():
    for rel in native.COMPILED:
        assert (REPO / rel).is_file(), rel


def test_the_issue_paths_full_mask_is_the_kernels():
    """subpartition keeps its own copy of FULL_MASK (a C static when compiled): it must be the workload's."""
    from gpusim.engine.subpartition import FULL_MASK as issue_full_mask
    from gpusim.workload.kernel import FULL_MASK

    assert issue_full_mask == FULL_MASK
