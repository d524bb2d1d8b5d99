"""A part at another SM clock (`--clock`): the boost clock its arch file gives, the clock it was measured to hold
under sustained tensor-core load at its power limit, or a locked clock (nvidia-smi --lock-gpu-clocks)."""

from __future__ import annotations

import attrs

from ..errors import GpusimError
from .spec import ArchSpec


def clocked(spec: ArchSpec, clock: str | float) -> ArchSpec:
    """`spec` with its SMs at `clock` (RunOptions.clock, already checked for its form): 'boost' is the spec itself;
    'sustained' its clocks.sustained_tensor_mhz (a one-line error where the file has none); a number of MHz at most
    its boost clock. Only the SM clock moves (Clocks.at): DRAM keeps its bandwidth in bytes a second."""
    if clock == "boost":
        return spec
    if clock == "sustained":
        mhz = spec.clocks.sustained_tensor_mhz
        if mhz is None:
            raise GpusimError(f"--clock sustained: {spec.name} has no measured clock under tensor load "
                              f"(clocks.sustained_tensor_mhz in its arch file); give a clock in MHz instead")
    else:
        mhz = float(clock)
        if mhz > spec.clocks.core_mhz:
            raise GpusimError(f"--clock {mhz:g}: above {spec.name}'s boost clock ({spec.clocks.core_mhz:g} MHz); "
                              f"expected at most that")
    return attrs.evolve(spec, clocks=spec.clocks.at(mhz))


__all__ = ["clocked"]
