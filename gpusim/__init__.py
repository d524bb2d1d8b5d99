"""gpusim: a cycle-level GPU SM microarchitecture simulator."""

from . import native

native.use_compiled_if_current()  # before any compiled module is imported

# ruff: noqa: E402
from .analytic.occupancy import OccupancyResult, occupancy
from .arch import ArchSpec, known_archs, load_arch
from .errors import ArchError, GpusimError

__version__ = "0.1.0"
__all__ = ["ArchError", "ArchSpec", "GpusimError", "OccupancyResult", "RunResult", "known_archs", "load_arch",
           "occupancy", "run"]


def __getattr__(name: str):
    """`gpusim.run` and `gpusim.RunResult` (gpusim.api), imported on first use: `import gpusim` stays light."""
    if name in ("run", "RunResult"):
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'gpusim' has no attribute '{name}'")
