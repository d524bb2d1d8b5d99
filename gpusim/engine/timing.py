"""Per-opcode issue timing for one architecture: which pipe, how long it stays busy, when results are ready.

Every number comes from the ArchSpec (pipelines, frontend); this module only says which number applies.
"""

from __future__ import annotations

import math
from typing import Final

from ..arch import ArchSpec
from ..isa.tensor import is_sparse, mma_precision, precision_scale
from ..analytic.register_banks import RegisterBanks
from ..isa.opcodes import (ASYNC_MMA, BARRIER, BRANCH, FP32, FP64, INT32, LDST_CONST, LDST_GLOBAL, LDST_LOCAL,
                                LDST_SHARED, MISC, PIPELINE_CLASSES, SFU, TCGEN05_MMA, TENSOR, WARPGROUP_MMA,
                                async_kind, commits_group, refusal, tmem_columns)
from ..isa.opinfo import OpInfo
from ..stats.counters import REASONS

# Scoreboards (what a dependent instruction waits on) and the stall reason each produces.
WAIT: Final = "wait"
SHORT: Final = "short_scoreboard"
LONG: Final = "long_scoreboard"
NONE: Final = "none"
# A warp's scoreboard holds, per register, one int: the cycle its value is ready shifted up by BOARD_BITS, with the
# scoreboard it waits on (its index in BOARDS) in the low bits (a tuple per write cost an allocation the garbage
# collector tracks, on every result-writing instruction)
BOARDS: Final = (WAIT, SHORT, LONG)
BOARD_BITS: Final = 2
BOARD_MASK: Final = (1 << BOARD_BITS) - 1
MATH_THROTTLE, MIO_THROTTLE, LG_THROTTLE = "math_pipe_throttle", "mio_throttle", "lg_throttle"
HMMA_16816_FLOPS = 2 * 16 * 8 * 16  # the shape assumed for a tensor opcode that names none
FP32_FLOPS = {"FFMA": 2, "FADD": 1, "FMUL": 1, "FFMA2": 4, "FADD2": 2, "FMUL2": 2}  # per thread
PIPES = (None, FP32, INT32, FP64, SFU, TENSOR, "lsu_global", "lsu_shared")  # None: the issue slot only


def fp16_equivalent(flops: int, scale: float | None) -> int:
    """An MMA's `flops` as the FP16 FLOP that take the tensor pipe as long, `scale` its rate over the FP16 rate (an
    FP8 MMA on an H100 counts half, a TF32 one twice; None: it runs at the FP16 rate)."""
    return round(flops / scale) if scale else flops


class OpTiming:
    """How one opcode issues. A plain typed class rather than attrs: the compiled engine reads these fields
    as native struct slots on every issue."""

    __slots__ = ("pipe", "pipe_index", "interval", "latency", "board", "board_code", "throttle", "throttle_code",
                 "is_memory",
                 "is_branch", "is_barrier", "pipeline", "pipeline_index", "drains", "fp32_flops", "tensor_flops",
                 "tensor_pipe_flops", "tensor_pipe_cycles", "async_kind", "commits", "chains", "refused")

    def __init__(self, pipe: str | None, interval: int, latency: int, board: str, throttle: str, is_memory: bool,
                 is_branch: bool, is_barrier: bool, pipeline: str, drains: bool):
        self.pipe = pipe  # the sub-partition pipe it occupies; None: only the issue slot
        self.pipe_index = PIPES.index(pipe)  # its place in a sub-partition's pipe table
        self.interval = interval  # cycles the pipe stays busy for one warp-instruction
        self.latency = latency  # cycles until a fixed-latency result is ready (memory: the memory model decides)
        self.board = board  # WAIT / SHORT / LONG for results; NONE for instructions without a register result
        self.board_code = BOARDS.index(board) if board in BOARDS else 0  # its index in BOARDS (see BOARD_BITS)
        self.throttle = throttle  # stall reason while the pipe is busy
        self.throttle_code = REASONS.index(throttle)  # the same as the engine keeps it (its index in REASONS)
        self.is_memory = is_memory
        self.is_branch = is_branch
        self.is_barrier = is_barrier
        self.pipeline = pipeline  # the opcode's pipeline class (what the issue counters count)
        self.pipeline_index = PIPELINE_CLASSES.index(pipeline)
        self.drains = drains  # a store or atomic: an exiting warp waits for it to complete
        self.fp32_flops = 0  # FP32 FLOP per active thread (FFMA 2, FADD / FMUL 1)
        self.tensor_flops = 0  # tensor FLOP per warp-instruction
        # the same work in FP16 FLOP at the FP16 rate (FP8 on an H100: half its FLOP; TF32: twice): the share of
        # the tensor pipe's capacity it takes, whatever its precision (gpusim__tensor_flop's percent of the dense peak)
        self.tensor_pipe_flops = 0
        # sub-partition cycles the instruction holds the tensor pipe (sm__pipe_tensor_cycles_active counts them):
        # its interval, which the opcode's own rate sets (an H100's mma.sync takes 1.5 times its FLOP's share of
        # the dense peak)
        self.tensor_pipe_cycles = 0.0
        self.async_kind = ""  # gpusim.isa.opcodes.async_kind: what gpusim.engine.asynchrony does with it
        self.commits = False  # a warpgroup MMA that closes its wgmma group (.GSB0)
        self.chains = False  # a warpgroup MMA: the tensor core orders the writes to its accumulators itself
        self.refused = ""  # why a YAML workload may not use it on this arch (gpusim.isa.opcodes.refusal)

    def __repr__(self) -> str:
        return (f"OpTiming(pipe={self.pipe!r}, interval={self.interval}, latency={self.latency}, "
                f"board={self.board!r}, throttle={self.throttle!r})")


class TimingTable:
    """OpTiming for each opcode, computed once per (arch, opcode)."""

    def __init__(self, spec: ArchSpec):
        self.spec = spec
        self.by_number: list[OpTiming | None] = []  # opcode's number (OpInfo.number) -> timing (read on the hot path)
        pipes = spec.pipelines
        self.register_banks = RegisterBanks(pipes.register_banks, pipes.register_reads_per_bank)

    def __call__(self, info: OpInfo) -> OpTiming:
        by_number = self.by_number
        number = info.number
        timing = by_number[number] if number < len(by_number) else None
        if timing is None:
            timing = self._derive(info)
            kind = async_kind(info)
            if kind:
                timing.async_kind = kind
                timing.refused = refusal([info], self.spec.name, self.spec.compute_capability) or ""
            if info.base in ASYNC_MMA:
                timing.chains = True
                timing.commits = commits_group(info)
            if len(by_number) <= number:
                by_number.extend([None] * (number + 1 - len(by_number)))
            by_number[number] = timing
        return timing

    def tensor_rate(self, warpgroup: bool) -> float:
        """Tensor FLOP per *core* clock per sub-partition. Simulated time runs at the core clock; the dense
        peak (dense_fp16_flops_per_clock) holds at the tensor clock NVIDIA quotes it at (H100: 1830 of
        1980 MHz), so per core clock it is scaled by tensor_mhz / core_mhz. Warp-level MMA runs at its own
        measured rate per core clock (warp_mma_flops_per_clock), never above that peak."""
        tensor, clocks = self.spec.pipelines.tensor, self.spec.clocks
        peak = tensor.dense_fp16_flops_per_clock * min(1.0, clocks.tensor_mhz / clocks.core_mhz)
        return peak if warpgroup else min(float(tensor.warp_mma_rate), peak)

    def precision_scale(self, opcode: str) -> float | None:
        """An MMA's rate over the FP16 rate, from its input precision (FP8 2.0 on an H100, TF32 0.5); None for a
        precision the part has no path for (it keeps the FP16 rate here: the run warns about such opcodes)."""
        precision = mma_precision(opcode)
        return precision_scale(self.spec, precision, is_sparse(opcode)) if precision else None

    def _interval(self, lanes: float) -> int:
        return max(1, math.ceil(self.spec.sm.warp_size / lanes))

    def _derive(self, info: OpInfo) -> OpTiming:
        p, mem = self.spec.pipelines, self.spec.memory
        cls = info.pipeline

        def make(pipe, interval, latency, board, throttle, memory=False):
            return OpTiming(pipe, interval, latency, board, throttle, memory, cls == BRANCH, cls == BARRIER, cls,
                            info.is_store or info.is_atomic)

        if cls in (FP32, INT32, FP64, SFU):
            pipe = {FP32: p.fp32, INT32: p.int32, FP64: p.fp64, SFU: p.sfu}[cls]
            board, throttle = (SHORT, MIO_THROTTLE) if cls == SFU else (WAIT, MATH_THROTTLE)
            timing = make(cls, self._interval(pipe.lanes), pipe.latency, board, throttle)
            if cls == FP32:
                timing.fp32_flops = FP32_FLOPS.get(info.base, 0)
            return timing
        if cls == MISC:
            return make(INT32, self._interval(p.int32.lanes), p.int32.latency, WAIT, MATH_THROTTLE)
        if info.base in TCGEN05_MMA:  # one thread's instruction for the CTA: its issue slot here; gpusim.engine.
            timing = make(None, 1, p.tensor.latency, NONE, MATH_THROTTLE)  # tensor_memory runs it on the SM's tensor core
            timing.tensor_flops = info.mma_flops or HMMA_16816_FLOPS
            timing.tensor_pipe_flops = fp16_equivalent(timing.tensor_flops, self.precision_scale(info.opcode))
            timing.tensor_pipe_cycles = timing.tensor_pipe_flops / p.tensor.dense_fp16_flops_per_clock  # the dense rate
            return timing
        if info.base in ("LDTM", "STTM") and p.tensor.tensor_memory is not None:  # the warp's tensor-memory chunk,
            memory = p.tensor.tensor_memory  # not the MIO (gpusim.engine.tensor_memory queues them)
            transfer = math.ceil(tmem_columns(info.opcode) * 128 / memory.chunk_bytes_per_clock)
            return make(None, 1, transfer + memory.access_latency, SHORT, MATH_THROTTLE)
        if cls == TENSOR:
            flops = info.mma_flops or HMMA_16816_FLOPS
            # the instruction's input precision sets its rate (FP8 twice FP16 on an H100, TF32 half)
            scale = self.precision_scale(info.opcode)
            rate = self.tensor_rate(info.base in WARPGROUP_MMA) * (scale or 1.0)
            interval = max(1, math.ceil(flops / rate))
            # a warpgroup MMA's results are ready when its last step leaves the pipe: its interval, then the
            # pipe's latency (a warp-level MMA's measured dependent latency already covers its short interval)
            latency = interval + p.tensor.latency if info.base in ASYNC_MMA else p.tensor.latency
            timing = make(TENSOR, interval, latency, WAIT, MATH_THROTTLE)
            timing.tensor_flops = flops
            timing.tensor_pipe_flops = fp16_equivalent(flops, scale)
            timing.tensor_pipe_cycles = float(interval)
            return timing
        if cls in (LDST_GLOBAL, LDST_LOCAL):
            return make("lsu_global", self._interval(p.ldst.lanes), mem.l1.hit_latency, LONG, LG_THROTTLE,
                        memory=info.is_memory)
        if cls in (LDST_SHARED, LDST_CONST):  # shared memory, shuffles and constant loads go through the MIO
            return make("lsu_shared", self._interval(p.ldst.lanes), mem.l1.shared_latency, SHORT, MIO_THROTTLE,
                        memory=info.is_memory)
        if cls == BRANCH:
            return make(None, 1, self.spec.frontend.branch_resolve_cycles, NONE, MATH_THROTTLE)
        return make(None, 1, 1, NONE, MATH_THROTTLE)  # barrier
