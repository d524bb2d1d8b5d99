"""gpusim: a cycle-level GPU SM microarchitecture simulator."""

from . import native

native.use_compiled_if_current()  # before any compiled module is imported

# ruff: noqa: E402
from .analytic.occupancy import OccupancyResult, occupancy
from .arch import ArchSpec, known_archs, load_arch
from .errors import ArchError, GpusimError

__version__ = "0.1.0"
__all__ = ["ArchError", "ArchSpec", "GpusimError", "OccupancyResult", "known_archs", "load_arch", "occupancy"]
