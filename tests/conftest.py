import faulthandler
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_timeout

ROOT = Path(__file__).resolve().parents[1]
ARCH_NAMES = ["v100", "t4", "a100", "l40s", "h100", "h200", "b200", "b300"]


def kernel_workloads() -> list[Path]:
    """The shipped kernel workloads (workloads/**/*.yaml but the applications in workloads/apps/ and the model
    configs in workloads/models/, which are not kernels)."""
    return sorted(p for p in (ROOT / "workloads").rglob("*.yaml")
                  if p.relative_to(ROOT / "workloads").parts[0] not in ("apps", "models"))


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run `python -m gpusim ARGS` as a user would; return the completed process."""
    return subprocess.run([sys.executable, "-m", "gpusim", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=120)


def _compile_oracle(tmp_path_factory, name: str) -> Path:
    """tests/oracle/NAME.cpp, a small stdin/stdout program around CUDA's cuda_occupancy.h, compiled; the test is
    skipped where the header or a C++ compiler is absent."""
    header = Path("/usr/local/cuda/include/cuda_occupancy.h")
    compiler = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if not header.exists() or compiler is None:
        pytest.skip("cuda_occupancy.h or a C++ compiler is not available")
    exe = tmp_path_factory.mktemp("oracle") / name
    subprocess.run([compiler, "-O1", f"-I{header.parent}", str(ROOT / f"tests/oracle/{name}.cpp"),
                    "-o", str(exe)], check=True, capture_output=True)
    return exe


@pytest.fixture(scope="session")
def occupancy_oracle(tmp_path_factory):
    """CUDA's occupancy calculator (cudaOccMaxActiveBlocksPerMultiprocessor)."""
    return _compile_oracle(tmp_path_factory, "occupancy_oracle")


@pytest.fixture(scope="session")
def block_size_oracle(tmp_path_factory):
    """CUDA's block-size advisor (cudaOccMaxPotentialOccupancyBlockSize and its VariableSMem variant)."""
    return _compile_oracle(tmp_path_factory, "block_size_oracle")


def bare_env(tmp_path, tools: dict[str, str] | None = None) -> dict:
    """An environment whose PATH holds only the given fake tools (and the running Python), no CUDA_HOME."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, script in (tools or {}).items():
        path = bin_dir / name
        path.write_text(script)
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}"
    return env


@pytest.fixture
def short_tmp_path(tmp_path_factory) -> Path:
    """A fresh temporary directory with a short path, for a test that compares a message with the path it wrote:
    gpusim shows a path of over 80 characters cut in the middle (gpusim.arch.load.shown), and pytest's tmp_path
    (BASETEMP/popen-gwN/<test name, 30 characters>N/ under an xdist worker) can pass that."""
    return tmp_path_factory.mktemp("t")


# --- time limits (pytest-timeout; pyproject.toml sets 600 s a test, the signal method) -------------------------
LONG_TIERS_S = 3600  # a test marked slow or benchmark without a timeout mark of its own
BACKSTOP_S = 60  # after a test's limit, the process ends (see pytest_timeout_set_timer)
_STDERR: list[int] = []


def pytest_configure(config):
    _STDERR.append(os.dup(2))  # the terminal's stderr (pytest's output capture replaces fd 2 during a test)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("timeout") is None and (item.get_closest_marker("slow")
                                                           or item.get_closest_marker("benchmark")):
            item.add_marker(pytest.mark.timeout(LONG_TIERS_S))


@pytest.hookimpl(optionalhook=True)  # (pytest-timeout's hooks)
def pytest_timeout_set_timer(item, settings):
    """A backstop to pytest-timeout's signal: hypothesis catches the Failed it raises in a test and shrinks,
    running the hanging example again with no timer left. BACKSTOP_S after the limit, faulthandler (a C thread: a
    loop holding the GIL does not stop it) prints every thread's stack to the terminal and ends the process (an
    xdist worker: the test is reported as crashed, a new worker goes on). Returns None: pytest-timeout's own
    timer is set as well."""
    if settings.timeout and settings.timeout > 0 and _STDERR and (
            settings.disable_debugger_detection or not pytest_timeout.is_debugging()):
        faulthandler.dump_traceback_later(settings.timeout + BACKSTOP_S, exit=True, file=_STDERR[0])


@pytest.hookimpl(optionalhook=True)
def pytest_timeout_cancel_timer(item):
    faulthandler.cancel_dump_traceback_later()
