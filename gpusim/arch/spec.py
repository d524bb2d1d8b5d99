"""Frozen, validated descriptions of a GPU, built from arch/*.yaml.

Every field carries a one-line description, a unit and its accepted range in its metadata (see
`describe_fields`; the validators and `spec_field` are in gpusim.arch.fields). Validators refuse booleans, NaN,
infinities and values outside generous but finite ranges (the limits of plausible hardware, so a hostile file
cannot make the engine hang or fill memory). Nothing here is a number about a particular GPU.
"""

from __future__ import annotations

import attrs
from attrs import validators as v

from ..errors import shorten
from .fields import (GIB, KIB, MAX_CYCLES, MIB, NumberRange, OrAbsent, TextLine, UnitFraction, count_range,
                     number_range, power_of_two, spec_field)
from .interconnect import InterconnectSpec

__all__ = [
    "ArchSpec", "Clocks", "Structure", "SMSpec", "FrontendSpec", "SharedMemorySpec", "Pipeline", "TensorPipeline",
    "TensorRate", "TensorRates", "TensorMemorySpec", "InterconnectSpec",
    "Pipelines", "L1Spec", "L2Spec", "DramSpec", "SmToSmSpec", "MemorySpec", "describe_fields",
    "GIB", "KIB", "MAX_CYCLES", "MIB", "OrAbsent", "TextLine", "count_range", "number_range", "spec_field",
]


@attrs.frozen
class Clocks:
    core_mhz: float = spec_field("SM boost clock; FP32/INT peaks and simulated time use it", "MHz",
                                 number_range(1, 10_000))
    tensor_mhz: float = spec_field("clock NVIDIA quotes its tensor-core peak at (often below boost)", "MHz",
                                   number_range(1, 10_000))
    memory_note: str = spec_field("what the memory clock is, in words", validator=TextLine(200), default="")
    sustained_tensor_mhz: float | None = spec_field(
        "SM clock measured under sustained tensor-core load at the board's power limit (`--clock sustained` runs "
        "at it); absent: not measured", "MHz", OrAbsent(number_range(1, 10_000)), default=None)

    def __attrs_post_init__(self):
        if self.sustained_tensor_mhz is not None and self.sustained_tensor_mhz > self.core_mhz:
            raise ValueError(f"clocks.sustained_tensor_mhz: expected at most core_mhz ({self.core_mhz:g}), got "
                             f"{self.sustained_tensor_mhz:g}")

    def at(self, mhz: float) -> Clocks:
        """These clocks with the SMs locked at `mhz` (at most the boost clock): simulated time, the FP32 and INT
        peaks and DRAM's bytes per clock follow it; the tensor pipe's rate per clock is its quoted rate while the
        clock is at or below tensor_mhz (a lower clock does not raise the tensor cores' work per clock)."""
        return attrs.evolve(self, core_mhz=mhz, sustained_tensor_mhz=None if self.sustained_tensor_mhz is None
                            else min(self.sustained_tensor_mhz, mhz))


@attrs.frozen
class Structure:
    gpcs: int = spec_field("graphics processing clusters in the enabled part", "count", count_range(64))
    tpcs_per_gpc: int = spec_field("texture processing clusters per GPC in the full die", "count", count_range(64))
    sms_per_tpc: int = spec_field("SMs per TPC", "count", count_range(8))
    enabled_sms: int = spec_field("SMs enabled in this product", "count", count_range(1024))

    def __attrs_post_init__(self):
        full = self.gpcs * self.tpcs_per_gpc * self.sms_per_tpc
        if self.enabled_sms > full:
            raise ValueError(
                f"enabled_sms: expected at most gpcs*tpcs_per_gpc*sms_per_tpc = {full}, got {self.enabled_sms}")


@attrs.frozen
class SMSpec:
    sub_partitions: int = spec_field("processing blocks (SMSPs) per SM, each with its own scheduler", "count",
                                     count_range(16))
    warp_size: int = spec_field("threads per warp (the workload and trace models are 32 lanes wide)", "threads",
                                power_of_two(32, 32))
    max_warps: int = spec_field("resident warp slots per SM", "warps", count_range(1024))
    max_threads: int = spec_field("resident threads per SM", "threads", count_range(32 * 1024))
    max_blocks: int = spec_field("resident thread-block slots per SM", "blocks", count_range(1024))
    max_threads_per_block: int = spec_field("largest block a launch may ask for", "threads", count_range(32 * 1024))
    registers: int = spec_field("32-bit registers per SM (split evenly across sub-partitions)", "registers",
                                count_range(MIB))
    registers_per_block: int = spec_field("32-bit registers one block may hold", "registers", count_range(MIB))
    max_registers_per_thread: int = spec_field("largest per-thread register count the ISA encodes", "registers",
                                               count_range(1024))
    register_allocation_unit: int = spec_field("per-warp register allocation granularity", "registers",
                                               count_range(8192))

    def __attrs_post_init__(self):
        if self.max_threads != self.max_warps * self.warp_size:
            raise ValueError(f"max_threads: expected max_warps*warp_size = {self.max_warps * self.warp_size}, "
                             f"got {self.max_threads}")
        if self.registers % self.sub_partitions:
            raise ValueError(f"registers: expected a multiple of sub_partitions ({self.sub_partitions}), "
                             f"got {self.registers}")


@attrs.frozen
class FrontendSpec:
    """Warp front-end and block-launch timing (not published by NVIDIA; the files say what they assume)."""

    branch_resolve_cycles: int = spec_field("cycles after a branch issues before its warp can issue again", "cycles",
                                            count_range(MAX_CYCLES))
    block_launch_cycles: int = spec_field("cycles from the dispatcher choosing an SM to the block's first issue",
                                          "cycles", count_range(MAX_CYCLES))
    block_retire_cycles: int = spec_field("cycles from a block's last warp exiting to the dispatcher choosing its SM "
                                          "for the next block (the retirement reaching the CTA dispatcher)", "cycles",
                                          count_range(MAX_CYCLES, 0))


class _CarveoutSteps:
    """1 to 64 carveout sizes, each 0 to 16,384 KiB."""

    text = "1 to 64 sizes, each an integer from 0 to 16,384"

    def __call__(self, instance, attribute, value):
        if not 1 <= len(value) <= 64 or any(isinstance(x, bool) or not isinstance(x, int) or not 0 <= x <= 16 * KIB
                                            for x in value):
            raise ValueError(f"{attribute.name}: expected {self.text}, got {shorten(list(value))}")


@attrs.frozen
class SharedMemorySpec:
    per_sm_bytes: int = spec_field("largest shared-memory carveout per SM", "bytes", count_range(16 * MIB))
    per_block_default_bytes: int = spec_field("per-block limit without the opt-in attribute", "bytes",
                                              count_range(16 * MIB))
    per_block_optin_bytes: int = spec_field("per-block limit with cudaFuncAttributeMaxDynamicSharedMemorySize", "bytes",
                                            count_range(16 * MIB))
    reserved_per_block_bytes: int = spec_field("shared memory the driver reserves per resident block", "bytes",
                                               count_range(64 * KIB, lo=0))
    allocation_granularity_bytes: int = spec_field("per-block allocation granularity", "bytes", power_of_two(64 * KIB))
    carveout_steps_kb: tuple[int, ...] = spec_field(
        "carveout sizes the driver snaps a preference up to, ascending", "KiB", _CarveoutSteps(), converter=tuple)
    banks: int = spec_field("shared-memory banks", "banks", power_of_two(1024))
    bank_width_bytes: int = spec_field("bytes each bank serves per cycle", "bytes", power_of_two(256))
    unified_l1_bytes: int = spec_field("unified L1 data cache + shared memory capacity per SM", "bytes",
                                       count_range(16 * MIB))
    barriers_per_block_slot: int = spec_field("named-barrier sets per block slot (CTA barrier limit)", "barriers",
                                              count_range(64))
    barrier_limit_enforced: bool = spec_field("whether CUDA's occupancy calculator applies the barrier limit",
                                              validator=v.instance_of(bool))

    def __attrs_post_init__(self):
        steps = self.carveout_steps_kb
        if list(steps) != sorted(set(steps)) or steps[0] < 0:
            raise ValueError(f"carveout_steps_kb: expected distinct ascending sizes >= 0, got {list(steps)}")
        if steps[-1] * 1024 != self.per_sm_bytes:
            raise ValueError(f"carveout_steps_kb: expected the last step to equal per_sm_bytes "
                             f"({self.per_sm_bytes // 1024} KiB), got {steps[-1]}")
        if self.per_sm_bytes > self.unified_l1_bytes:
            raise ValueError(f"per_sm_bytes: expected at most unified_l1_bytes ({self.unified_l1_bytes}), "
                             f"got {self.per_sm_bytes}")


@attrs.frozen
class Pipeline:
    lanes: float = spec_field(
        "thread-operations per clock per sub-partition (0.5 = one warp-instruction per 64 clocks)", "lanes",
        NumberRange(0.01, 1024, integer=False))
    latency: int = spec_field("dependent-issue latency (result ready after this many clocks)", "cycles",
                              count_range(MAX_CYCLES))

    def issue_interval(self, warp_size: int) -> float:
        """Clocks one warp-instruction occupies the pipe: warp_size / lanes."""
        return warp_size / self.lanes


@attrs.frozen
class TensorRate:
    """One precision's tensor-core peak per SM per tensor clock (at clocks.tensor_mhz, as the FP16 peak)."""

    dense: int = spec_field("dense peak per SM: FLOP (FMA = 2) for floating point, operations for integers",
                            "FLOP/clk/SM", count_range(MIB))
    sparse: int | None = spec_field("peak with 2:4 structured sparsity (a dense-equivalent rate); absent: the part has "
                                    "no sparse tensor path", "FLOP/clk/SM", OrAbsent(count_range(MIB)), default=None)

    def __attrs_post_init__(self):
        if self.sparse is not None and not self.dense <= self.sparse <= 2 * self.dense:
            raise ValueError(f"sparse: expected dense to 2 x dense ({self.dense} to {2 * self.dense}), "
                             f"got {self.sparse}")


_RATE = OrAbsent(v.instance_of(TensorRate), "a mapping of dense (and sparse) FLOP/clk/SM, or absent")


def _rate(precision: str):
    return spec_field(f"{precision} tensor-core peak per SM (dense, sparse); absent: no {precision} tensor path",
                      "FLOP/clk/SM", _RATE, default=None)


@attrs.frozen
class TensorRates:
    """Tensor-core peaks by input precision, per SM per tensor clock (gpusim.isa.tensor reads them). fp16 is
    the dense_fp16_flops_per_clock peak the engine uses, per SM; the others are NVIDIA's figures in the same
    unit (TFLOPS / (SMs x tensor clock)). int8 and int4 count integer operations."""

    fp16: TensorRate = spec_field("FP16 inputs (HMMA, HGMMA, UTCHMMA): the dense peak is sub_partitions x "
                                  "dense_fp16_flops_per_clock", "FLOP/clk/SM", v.instance_of(TensorRate))
    bf16: TensorRate | None = _rate("BF16")
    tf32: TensorRate | None = _rate("TF32")
    fp8: TensorRate | None = _rate("FP8 (E4M3, E5M2)")
    fp6: TensorRate | None = _rate("FP6 (E3M2, E2M3)")
    fp4: TensorRate | None = _rate("FP4 (E2M1)")
    int8: TensorRate | None = _rate("INT8")
    int4: TensorRate | None = _rate("INT4")


@attrs.frozen
class TensorMemorySpec:
    """Tensor memory (TMEM, Blackwell sm_100): the per-SM accumulator memory of tcgen05 MMA, allocated by columns,
    read and written per warp through its sub-partition's chunk of lanes (gpusim.engine.asynchrony)."""

    lanes: int = spec_field("rows of tensor memory (one 32-lane chunk per sub-partition)", "lanes", power_of_two(1024))
    columns: int = spec_field("32-bit columns of tensor memory per SM", "columns", power_of_two(64 * KIB))
    allocation_columns: int = spec_field("smallest allocation (tcgen05.alloc takes a power of two of at least this)",
                                         "columns", power_of_two(64 * KIB))
    chunk_bytes_per_clock: int = spec_field("bytes one sub-partition's chunk moves per clock between tensor memory and "
                                            "registers (LDTM / STTM)", "B/clk", count_range(64 * KIB))
    access_latency: int = spec_field("cycles from an LDTM's last transfer to its registers being ready (an STTM's data "
                                     "written)", "cycles", count_range(MAX_CYCLES))
    mma_latency: int = spec_field("cycles from the end of a tcgen05 MMA's last step to its completion being seen "
                                  "(UTCBAR's mbarrier arrival)", "cycles", count_range(MAX_CYCLES))
    mma_tile_m: int = spec_field("rows of one tcgen05 MMA step: a smaller M takes as long", "rows", power_of_two(1024))
    mma_tile_n: int = spec_field("columns of one tcgen05 MMA step: a smaller N takes as long", "columns", power_of_two(1024))
    copy_bytes_per_clock: int = spec_field("bytes of shared memory an SM's tensor core reads per clock (UTCCP copies "
                                           "shared memory to tensor memory at this rate)", "B/clk",
                                           count_range(64 * KIB))

    def __attrs_post_init__(self):
        if self.allocation_columns > self.columns:
            raise ValueError(f"allocation_columns: expected at most columns ({self.columns}), "
                             f"got {self.allocation_columns}")


@attrs.frozen
class TensorPipeline:
    dense_fp16_flops_per_clock: int = spec_field("dense FP16 FLOP (FMA = 2) per clock per sub-partition", "FLOP/clk",
                                                 count_range(64 * KIB))
    latency: int = spec_field("dependent-issue latency of one warp-level MMA", "cycles", count_range(MAX_CYCLES))
    warp_mma_flops_per_clock: int | None = spec_field(
        "dense FP16 FLOP per clock per sub-partition that warp-level MMA (mma.sync: HMMA, IMMA) reaches, where "
        "it is below the peak (Hopper and later reach the peak only with warpgroup / tcgen05 MMA); "
        "default: dense_fp16_flops_per_clock", "FLOP/clk",
        validator=OrAbsent(count_range(64 * KIB)), default=None)
    rates: TensorRates | None = spec_field(
        "tensor-core peaks by precision, per SM (fp16, bf16, tf32, fp8, fp6, fp4, int8, int4; dense and sparse); "
        "absent: only the FP16 peak above is known", validator=OrAbsent(v.instance_of(TensorRates), "a mapping of precisions, or absent"), default=None)
    tensor_memory: TensorMemorySpec | None = spec_field(
        "tensor memory and tcgen05 MMA (compute capability 10.x); absent: the part has none",
        validator=OrAbsent(v.instance_of(TensorMemorySpec), "a mapping of tensor-memory figures, or absent"),
        default=None)

    @property
    def warp_mma_rate(self) -> int:
        """FLOP per clock per sub-partition for warp-level MMA."""
        return self.warp_mma_flops_per_clock or self.dense_fp16_flops_per_clock


@attrs.frozen
class Pipelines:
    """Execution units of one sub-partition."""

    fp32: Pipeline = spec_field("FFMA/FADD/FMUL pipe", validator=v.instance_of(Pipeline))
    int32: Pipeline = spec_field("integer ALU pipe", validator=v.instance_of(Pipeline))
    fp64: Pipeline = spec_field("double-precision pipe", validator=v.instance_of(Pipeline))
    sfu: Pipeline = spec_field("special-function unit (MUFU)", validator=v.instance_of(Pipeline))
    tensor: TensorPipeline = spec_field("tensor core", validator=v.instance_of(TensorPipeline))
    ldst: Pipeline = spec_field("load/store address units (MIO issue)", validator=v.instance_of(Pipeline))
    memory_queue_depth: int = spec_field(
        "memory instructions a sub-partition's load/store pipes hold issued but not yet started (the MIO / LSU "
        "instruction queue): issue stalls (mio_throttle, lg_throttle) only when it is full", "instructions",
        count_range(1024), default=2)
    register_banks: int = spec_field(
        "banks of a sub-partition's register file: register Rn is in bank n % register_banks; an instruction whose "
        "source registers need more reads of one bank than it serves in a cycle waits for them (dispatch_stall)",
        "banks", count_range(64), default=2)
    register_bank_width_bits: int = spec_field(
        "bits one register bank delivers per thread per cycle (64: two 32-bit registers, so three source "
        "registers in one bank cost one extra cycle)", "bits", NumberRange(32, 1024, power_of_two=True), default=64)

    @property
    def register_reads_per_bank(self) -> int:
        """32-bit registers one bank delivers per thread per cycle."""
        return self.register_bank_width_bits // 32


def _sectors_per_line(spec) -> None:
    """A line holds 1 to 16 sectors (every modelled part has 4; the caches keep a sector mask per line)."""
    if not spec.sector_bytes <= spec.line_bytes <= 16 * spec.sector_bytes:
        raise ValueError(f"line_bytes: expected 1 to 16 sectors of {spec.sector_bytes} bytes, got {spec.line_bytes}")


def _cache_sets(size_bytes: int, line_bytes: int, associativity: int) -> int:
    """Sets a SectoredCache of this geometry allocates (it keeps one table per set)."""
    lines = max(1, size_bytes // line_bytes)
    return max(1, lines // min(associativity, lines))


MAX_L1_SETS, MAX_L2_SETS = 4096, MIB  # per SM / in all: 64x and 40x the largest modelled part's


@attrs.frozen
class L1Spec:
    line_bytes: int = spec_field("cache line (tag) size", "bytes", power_of_two(4 * KIB, lo=16))
    sector_bytes: int = spec_field("sector (fill) size", "bytes", power_of_two(KIB, lo=4))
    associativity: int = spec_field(f"ways per set (unified_l1_bytes / line_bytes / ways at most {MAX_L1_SETS:,} sets)",
                                    "ways", count_range(64 * KIB))
    hit_latency: int = spec_field("load-to-use latency of an L1 hit", "cycles", count_range(MAX_CYCLES))
    shared_latency: int = spec_field("load-to-use latency of a conflict-free shared-memory load", "cycles",
                                     count_range(MAX_CYCLES))
    mshrs: int = spec_field("outstanding miss entries per SM; at least 32, the distinct lines one warp's 32 lanes can "
                            "touch in one request", "entries", count_range(64 * KIB, lo=32))

    def __attrs_post_init__(self):
        _sectors_per_line(self)


@attrs.frozen
class L2Spec:
    size_bytes: int = spec_field("total L2 capacity", "bytes", count_range(GIB))
    slices: int = spec_field("address-interleaved L2 slices", "slices", count_range(1024))
    line_bytes: int = spec_field("cache line (tag) size", "bytes", power_of_two(4 * KIB, lo=16))
    sector_bytes: int = spec_field("sector size", "bytes", power_of_two(KIB, lo=4))
    associativity: int = spec_field(f"ways per set (size_bytes / line_bytes / ways at most {MAX_L2_SETS:,} sets)",
                                    "ways", count_range(64 * KIB))
    hit_latency: int = spec_field("load-to-use latency of an L1 miss that hits in L2", "cycles",
                                  count_range(MAX_CYCLES))
    bandwidth_bytes_per_clock: int = spec_field("aggregate L2 read bandwidth", "bytes/clk", count_range(MIB))
    sm_bytes_per_clock: int = spec_field(
        "bandwidth of one SM's port to L2 (L1 misses, stores, atomics), per core clock", "bytes/clk",
        count_range(64 * KIB))
    atomic_cycles_per_address_update: int = spec_field(
        "clocks an L2 slice needs per atomic update of one address (updates to one address serialize)", "cycles",
        count_range(MAX_CYCLES), default=1)

    def __attrs_post_init__(self):
        _sectors_per_line(self)
        sets = _cache_sets(self.size_bytes, self.line_bytes, self.associativity)
        if sets > MAX_L2_SETS:
            raise ValueError(f"associativity: expected at most {MAX_L2_SETS:,} sets (size_bytes / line_bytes / "
                             f"associativity), got {sets:,} sets with {self.associativity} ways")


@attrs.frozen
class DramSpec:
    type: str = spec_field("memory technology", validator=TextLine(64))
    capacity_gb: float = spec_field("device memory capacity", "GB", number_range(0, 100_000))
    bandwidth_gbs: float = spec_field("peak DRAM bandwidth NVIDIA quotes", "GB/s", number_range(1, 1_000_000))
    latency: int = spec_field("load-to-use latency of a load that misses L1 and L2", "cycles", count_range(MAX_CYCLES))
    channels: int = spec_field("independent channels the bandwidth is spread over", "channels", count_range(1024))
    read_efficiency: float = spec_field("fraction of the peak that streaming reads reach (refresh, page misses)",
                                        "fraction", UnitFraction())
    write_efficiency: float = spec_field("fraction of the peak that write-backs reach (bus turnaround as well)",
                                         "fraction", UnitFraction())


@attrs.frozen
class SmToSmSpec:
    """The SM-to-SM network of a GPC (Hopper and later): what distributed shared memory (a block reading, writing
    or updating the shared memory of another block of its thread block cluster) and cluster barriers cross."""

    latency: int = spec_field("load-to-use latency of a distributed shared-memory access to another SM of the cluster",
                              "cycles", count_range(MAX_CYCLES))
    sm_bytes_per_clock: float = spec_field(
        "bytes one SM sends (and, separately, receives) over the network per core clock: distributed shared-memory "
        "traffic moves in 32-byte sectors", "bytes/clk", number_range(0, 64 * KIB))


@attrs.frozen
class MemorySpec:
    l1: L1Spec = spec_field("per-SM L1 data cache", validator=v.instance_of(L1Spec))
    l2: L2Spec = spec_field("shared L2", validator=v.instance_of(L2Spec))
    dram: DramSpec = spec_field("device memory", validator=v.instance_of(DramSpec))
    sm_to_sm: SmToSmSpec | None = spec_field(
        "the SM-to-SM network of distributed shared memory (compute capability 9.0 and later); absent: the part "
        "has none", validator=OrAbsent(v.instance_of(SmToSmSpec), "a mapping of latency and sm_bytes_per_clock, "
                                                                   "or absent"), default=None)


@attrs.frozen
class ArchSpec:
    name: str = spec_field("short name (the file's stem)", validator=TextLine(64))
    full_name: str = spec_field("product name", validator=TextLine(200))
    compute_capability: str = spec_field("CUDA compute capability, 'major.minor'",
                                         validator=TextLine(5, r"[0-9]{1,2}\.[0-9]{1,2}", "'major.minor', e.g. '9.0'"))
    clocks: Clocks = spec_field("clock rates", validator=v.instance_of(Clocks))
    structure: Structure = spec_field("GPC/TPC/SM hierarchy", validator=v.instance_of(Structure))
    sm: SMSpec = spec_field("per-SM limits", validator=v.instance_of(SMSpec))
    frontend: FrontendSpec = spec_field("branch and block-launch timing", validator=v.instance_of(FrontendSpec))
    shared_memory: SharedMemorySpec = spec_field("per-SM shared memory", validator=v.instance_of(SharedMemorySpec))
    pipelines: Pipelines = spec_field("per-sub-partition execution units", validator=v.instance_of(Pipelines))
    memory: MemorySpec = spec_field("memory hierarchy", validator=v.instance_of(MemorySpec))
    interconnect: InterconnectSpec | None = spec_field(
        "host link, copy engines, NVLink and all-reduce bandwidth (applications' copies and collectives); absent: "
        "not described", validator=OrAbsent(v.instance_of(InterconnectSpec), "a mapping of interconnect figures, "
                                                                              "or absent"), default=None)

    def __attrs_post_init__(self):
        l1 = self.memory.l1
        sets = _cache_sets(self.shared_memory.unified_l1_bytes, l1.line_bytes, l1.associativity)
        if sets > MAX_L1_SETS:
            raise ValueError(f"'memory.l1.associativity': expected at most {MAX_L1_SETS:,} sets per SM "
                             f"(shared_memory.unified_l1_bytes / line_bytes / associativity), got {sets:,} sets "
                             f"with {l1.associativity} ways")

    @property
    def cc_major(self) -> int:
        return int(self.compute_capability.split(".")[0])

    @property
    def sms(self) -> int:
        return self.structure.enabled_sms

    @property
    def peak_fp32_tflops(self) -> float:
        """FP32 lanes x 2 FLOP (FMA) x sub-partitions x SMs x core clock."""
        lanes_per_sm = self.pipelines.fp32.lanes * self.sm.sub_partitions
        return lanes_per_sm * 2 * self.sms * self.clocks.core_mhz * 1e6 / 1e12

    @property
    def peak_fp16_tensor_tflops(self) -> float:
        """Dense FP16 tensor FLOP per clock x sub-partitions x SMs x tensor clock."""
        per_sm = self.pipelines.tensor.dense_fp16_flops_per_clock * self.sm.sub_partitions
        return per_sm * self.sms * self.clocks.tensor_mhz * 1e6 / 1e12


def describe_fields(cls, with_range: bool = False) -> list[tuple[str, ...]]:
    """(name, unit, description) for every field of a spec class: the schema, readable; with_range=True adds the
    accepted range as a fourth item ('' for nested specs and booleans)."""
    rows = []
    for a in attrs.fields(cls):
        row = (a.name, a.metadata.get("unit", ""), a.metadata.get("doc", ""))
        rows.append(row + (a.metadata.get("range", ""),) if with_range else row)
    return rows
