"""Per-SM counters. The engine adds to them in bulk (intervals, not cycle ticks); metrics.py reads them."""

from __future__ import annotations

from typing import Final

from librt.vecs import vec
from mypy_extensions import i64

from ..isa.opcodes import PIPELINE_CLASSES

# Every resident warp, every cycle, is in exactly one of these states (Nsight Compute's stall reasons,
# with `selected` for the cycle it issues).
REASONS = ("selected", "long_scoreboard", "short_scoreboard", "wait", "math_pipe_throttle", "mio_throttle",
           "lg_throttle", "barrier", "branch_resolving", "not_selected", "no_instruction", "drain",
           "dispatch_stall", "misc")
# The engine keeps a warp's state as its index in REASONS (an int it compares and indexes natively):
SELECTED: Final = 0
LONG_SCOREBOARD: Final = 1
SHORT_SCOREBOARD: Final = 2
WAIT: Final = 3
MATH_PIPE_THROTTLE: Final = 4
MIO_THROTTLE: Final = 5
LG_THROTTLE: Final = 6
BARRIER: Final = 7
BRANCH_RESOLVING: Final = 8
NOT_SELECTED: Final = 9
NO_INSTRUCTION: Final = 10
DRAIN: Final = 11
DISPATCH_STALL: Final = 12
MISC: Final = 13


class Tally:
    """Warp-cycles spent in one stall reason: a native int the engine adds to in place (a dict of ints would box
    every new total)."""

    __slots__ = ("cycles",)

    def __init__(self) -> None:
        self.cycles = 0


class SMCounters:
    """What one SM did. Time-weighted quantities are integrals over cycles, updated when they change."""

    __slots__ = ("tallies", "inst", "thread_inst", "fp32_flops", "tensor_flops", "tensor_pipe_flops", "tensor_pipe_cycles", "pipeline_insts", "warps_resident", "warp_cycles", "active_cycles",
                 "last_change", "sp_resident", "sp_active_cycles", "sp_last_change", "blocks_done")

    def __init__(self, sub_partitions: int):
        self.tallies: list[Tally] = [Tally() for _ in REASONS]  # warp-cycles per stall reason, by its index
        self.inst = 0
        self.thread_inst = 0
        self.fp32_flops = 0  # FP32 FLOP done (FFMA = 2 per active thread)
        self.tensor_flops = 0  # tensor-core FLOP done
        self.tensor_pipe_flops = 0  # the same as FP16 FLOP of equal tensor-pipe time (OpTiming.tensor_pipe_flops)
        self.tensor_pipe_cycles = 0.0  # sub-partition cycles the tensor pipe was held (OpTiming.tensor_pipe_cycles)
        self.pipeline_insts: vec[i64] = vec[i64]([0] * len(PIPELINE_CLASSES))  # issued, by PIPELINE_CLASSES index
        self.warps_resident = 0
        self.warp_cycles = 0  # integral of resident warps over time
        self.active_cycles = 0  # cycles with at least one resident warp
        self.last_change = 0
        self.sp_resident = [0] * sub_partitions
        self.sp_active_cycles = [0] * sub_partitions
        self.sp_last_change = [0] * sub_partitions
        self.blocks_done = 0

    @property
    def by_pipeline(self) -> dict[str, int]:
        """Warp-instructions issued per pipeline class."""
        return dict(zip(PIPELINE_CLASSES, map(int, self.pipeline_insts)))

    def warps_changed(self, now: int, delta: int, sp: int) -> None:
        """Account the interval since the last change, then add `delta` resident warps on sub-partition `sp`."""
        elapsed = now - self.last_change
        if elapsed:
            self.warp_cycles += self.warps_resident * elapsed
            if self.warps_resident:
                self.active_cycles += elapsed
            self.last_change = now
        self.warps_resident += delta
        sp_elapsed = now - self.sp_last_change[sp]
        if sp_elapsed:
            if self.sp_resident[sp]:
                self.sp_active_cycles[sp] = self.sp_active_cycles[sp] + sp_elapsed  # (not +=: compiled, a generic add)
            self.sp_last_change[sp] = now
        self.sp_resident[sp] = self.sp_resident[sp] + delta
