"""gpusim: a cycle-level GPU SM microarchitecture simulator."""

import sys


def _interrupted_at_start_up(kind, value, traceback) -> None:
    """Ctrl-C while the command line is still importing: one line and the shell's code, as later (cli.main)."""
    if issubclass(kind, KeyboardInterrupt):
        import os

        print("interrupted", file=sys.stderr, flush=True)
        os._exit(130)
    sys.__excepthook__(kind, value, traceback)


_COMMAND_LINE = ("-m", "gpusim") in zip(sys.orig_argv, sys.orig_argv[1:]) or "-mgpusim" in sys.orig_argv \
    or sys.argv[0].endswith(("/gpusim", "\\gpusim.exe"))
if _COMMAND_LINE:  # the command line only: a program that imports gpusim keeps its own hook and settings
    sys.excepthook = _interrupted_at_start_up
    import os

    # the engine is one thread and its numpy work is small: OpenBLAS's worker threads would only spin beside it
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from . import native

native.use_compiled_if_current()  # before any compiled module is imported

# ruff: noqa: E402
from .analytic.occupancy import OccupancyResult, max_potential_block_size, occupancy
from .arch import ArchSpec, known_archs, load_arch
from .errors import ArchError, GpusimError
from .version import __version__

__all__ = ["ArchError", "ArchSpec", "GpusimError", "OccupancyResult", "RunOptions", "RunResult", "known_archs",
           "load_arch", "max_potential_block_size", "occupancy", "run", "sweep"]


def __getattr__(name: str):
    """`gpusim.run` (gpusim.api), `gpusim.RunOptions` (gpusim.options), `gpusim.RunResult` (gpusim.result),
    `gpusim.sweep` (gpusim.sweep), imported on first use: `import gpusim` stays light."""
    if name == "run":
        from . import api

        return api.run
    if name == "RunOptions":
        from .options import RunOptions

        return RunOptions
    if name == "RunResult":
        from .result import RunResult

        return RunResult
    if name == "sweep":  # gpusim.sweep(workload, arch=..., vary={...}): the function of the module gpusim.sweep
        import importlib

        function = importlib.import_module(".sweep", __name__).sweep
        globals()["sweep"] = function  # (in place of the submodule, which importing it put here)
        return function
    raise AttributeError(f"module 'gpusim' has no attribute '{name}'")
