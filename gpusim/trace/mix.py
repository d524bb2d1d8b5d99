"""The instruction mix of a trace, counted in one streaming pass (no simulation); the pass also checks every
line, so `gpusim workload show` doubles as a trace validator."""

from __future__ import annotations

from ..workload.mix import Mix
from .kernel import TraceKernel, TraceStreams


def trace_mix(kernel: TraceKernel) -> tuple[Mix, TraceStreams]:
    """(the mix, the streams object that read it: its `unknown` counts the opcodes no table knows)."""
    mix = Mix()
    streams = TraceStreams(kernel)
    count = mix.count
    for block in range(kernel.launch.nblocks):
        for warp in range(kernel.launch.warps_per_block):
            for inst in streams(block, warp):
                count(inst.info, inst.mask)
    streams.finish()
    return mix, streams
