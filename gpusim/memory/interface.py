"""The engine's memory interface, and the fixed-latency model that answers it until the hierarchy lands.

The engine calls `access(sm_index, inst, now)` once per memory warp-instruction at its issue cycle, with
the per-lane addresses, width, space and active mask on `inst`; the model answers when the data is ready
(loads: the destination registers; stores: when the write is done, for draining) and for how many cycles
from issue the load/store pipe stays busy at least (the SM's data stage, bank-conflict wavefronts, full MSHRs;
0 or less than the pipe's issue interval: the interval). Calls arrive in nondecreasing
`now` order across the whole GPU, so a model may keep queue state (L2 slices, DRAM channels).
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from ..arch import ArchSpec


class MemoryResult(NamedTuple):
    """What `access` answers; a model may return any (ready_at, pipe_busy_cycles) pair (the engine unpacks it)."""

    ready_at: int  # cycle the loaded registers are written (or the store/atomic completes)
    pipe_busy_cycles: int = 0  # from issue, at least (the pipe's own issue interval applies in any case)


class MemorySystem(Protocol):
    def access(self, sm_index: int, inst, now: int) -> MemoryResult: ...

    def metrics(self, cycles: int) -> dict: ...


class FixedLatencyMemory:
    """Every access takes the architecture's L1-hit (global, local, constant) or shared-memory latency."""

    def __init__(self, spec: ArchSpec):
        self.global_latency = spec.memory.l1.hit_latency
        self.shared_latency = spec.memory.l1.shared_latency

    def access(self, sm_index: int, inst, now: int) -> MemoryResult:
        latency = self.shared_latency if inst.space == "shared" else self.global_latency
        return MemoryResult(now + latency)

    def metrics(self, cycles: int) -> dict:
        return {}
