"""The instruction mix of a trace, counted in one streaming pass (no simulation); the pass also checks every
line, so `gpusim workload show` doubles as a trace validator."""

from __future__ import annotations

from ..workload.mix import Mix
from .kernel import TraceKernel, TraceStreams
from .reader import warp_instruction_count


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


def stated_mix(kernel: TraceKernel) -> Mix:
    """The mix of a trace from the instruction counts it states (`insts = N`, the sum read without decoding a
    line) and the first block's instructions, counted: the first block's mix scaled to the stated total (so
    `estimated`); what a sampling plan needs to weigh a trace's waves, at a fraction of trace_mix's cost."""
    first = Mix()
    streams = TraceStreams(kernel)
    count = first.count
    for warp in range(kernel.launch.warps_per_block):
        for inst in streams(0, warp):
            count(inst.info, inst.mask)
    streams.file.close()
    total = warp_instruction_count(kernel.source)
    mix = Mix(estimated=f"the first block's instruction mix scaled to the {total:,} warp-instructions the trace "
                        f"states", stated_warp_insts=total)
    mix.add(first, total / first.total_warp_insts if first.total_warp_insts else 0.0)
    if first.total_warp_insts:  # the stated total exactly (the scaled classes rounded each)
        top = max(mix.warp_insts, key=mix.warp_insts.get)
        mix.warp_insts[top] += total - mix.total_warp_insts
    return mix
