"""Frozen, validated descriptions of a GPU, built from arch/*.yaml.

Every field carries a one-line description and a unit in its metadata (see `describe_fields`);
validators reject non-positive counts. Nothing here is a number about a particular GPU.
"""

from __future__ import annotations

import attrs
from attrs import validators as v

__all__ = [
    "ArchSpec", "Clocks", "Structure", "SMSpec", "FrontendSpec", "SharedMemorySpec", "Pipeline", "TensorPipeline",
    "Pipelines", "L1Spec", "L2Spec", "DramSpec", "MemorySpec", "describe_fields",
]


def short_repr(value, limit: int = 40) -> str:
    """`repr(value)` for a one-line message: at most `limit` characters, never a 5,000-digit number."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1:,} digits"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit - 15]}...({len(text)} chars)"


def _positive(instance, attribute, value):
    if value <= 0:
        raise ValueError(f"{attribute.name}: expected a positive number, got {value!r}")


def _non_negative(instance, attribute, value):
    if value < 0:
        raise ValueError(f"{attribute.name}: expected zero or more, got {value!r}")


def _fraction(instance, attribute, value):
    if not 0 < value <= 1:
        raise ValueError(f"{attribute.name}: expected a fraction in (0, 1], got {value!r}")


def _power_of_two(instance, attribute, value):
    if value <= 0 or value & (value - 1):
        raise ValueError(f"{attribute.name}: expected a power of two, got {value!r}")


def _field(doc: str, unit: str = "", validator=_positive, **kw):
    return attrs.field(validator=validator, metadata={"doc": doc, "unit": unit}, **kw)


@attrs.frozen
class Clocks:
    core_mhz: float = _field("SM boost clock; FP32/INT peaks and simulated time use it", "MHz")
    tensor_mhz: float = _field("clock NVIDIA quotes its tensor-core peak at (often below boost)", "MHz")
    memory_note: str = _field("what the memory clock is, in words", validator=v.instance_of(str), default="")


@attrs.frozen
class Structure:
    gpcs: int = _field("graphics processing clusters in the enabled part", "count")
    tpcs_per_gpc: int = _field("texture processing clusters per GPC in the full die", "count")
    sms_per_tpc: int = _field("SMs per TPC", "count")
    enabled_sms: int = _field("SMs enabled in this product", "count")

    def __attrs_post_init__(self):
        full = self.gpcs * self.tpcs_per_gpc * self.sms_per_tpc
        if self.enabled_sms > full:
            raise ValueError(
                f"enabled_sms: expected at most gpcs*tpcs_per_gpc*sms_per_tpc = {full}, got {self.enabled_sms}")


@attrs.frozen
class SMSpec:
    sub_partitions: int = _field("processing blocks (SMSPs) per SM, each with its own scheduler", "count")
    warp_size: int = _field("threads per warp", "threads", validator=_power_of_two)
    max_warps: int = _field("resident warp slots per SM", "warps")
    max_threads: int = _field("resident threads per SM", "threads")
    max_blocks: int = _field("resident thread-block slots per SM", "blocks")
    max_threads_per_block: int = _field("largest block a launch may ask for", "threads")
    registers: int = _field("32-bit registers per SM (split evenly across sub-partitions)", "registers")
    registers_per_block: int = _field("32-bit registers one block may hold", "registers")
    max_registers_per_thread: int = _field("largest per-thread register count the ISA encodes", "registers")
    register_allocation_unit: int = _field("per-warp register allocation granularity", "registers")

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

    branch_resolve_cycles: int = _field("cycles after a branch issues before its warp can issue again", "cycles")
    block_launch_cycles: int = _field("cycles from the dispatcher choosing an SM to the block's first issue",
                                      "cycles")


@attrs.frozen
class SharedMemorySpec:
    per_sm_bytes: int = _field("largest shared-memory carveout per SM", "bytes")
    per_block_default_bytes: int = _field("per-block limit without the opt-in attribute", "bytes")
    per_block_optin_bytes: int = _field("per-block limit with cudaFuncAttributeMaxDynamicSharedMemorySize", "bytes")
    reserved_per_block_bytes: int = _field("shared memory the driver reserves per resident block", "bytes",
                                           validator=_non_negative)
    allocation_granularity_bytes: int = _field("per-block allocation granularity", "bytes", validator=_power_of_two)
    carveout_steps_kb: tuple[int, ...] = _field(
        "carveout sizes the driver snaps a preference up to, ascending", "KiB",
        validator=v.min_len(1), converter=tuple)
    banks: int = _field("shared-memory banks", "banks", validator=_power_of_two)
    bank_width_bytes: int = _field("bytes each bank serves per cycle", "bytes", validator=_power_of_two)
    unified_l1_bytes: int = _field("unified L1 data cache + shared memory capacity per SM", "bytes")
    barriers_per_block_slot: int = _field("named-barrier sets per block slot (CTA barrier limit)", "barriers")
    barrier_limit_enforced: bool = _field("whether CUDA's occupancy calculator applies the barrier limit",
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
    lanes: float = _field("thread-operations per clock per sub-partition (0.5 = one warp-instruction per 64 clocks)",
                          "lanes")
    latency: int = _field("dependent-issue latency (result ready after this many clocks)", "cycles")

    def issue_interval(self, warp_size: int) -> float:
        """Clocks one warp-instruction occupies the pipe: warp_size / lanes."""
        return warp_size / self.lanes


@attrs.frozen
class TensorPipeline:
    dense_fp16_flops_per_clock: int = _field("dense FP16 FLOP (FMA = 2) per clock per sub-partition", "FLOP/clk")
    latency: int = _field("dependent-issue latency of one warp-level MMA", "cycles")
    warp_mma_flops_per_clock: int | None = _field(
        "dense FP16 FLOP per clock per sub-partition that warp-level MMA (mma.sync: HMMA, IMMA) reaches, where "
        "it is below the peak (Hopper and later reach the peak only with warpgroup / tcgen05 MMA); "
        "default: dense_fp16_flops_per_clock", "FLOP/clk",
        validator=v.optional(_positive), default=None)

    @property
    def warp_mma_rate(self) -> int:
        """FLOP per clock per sub-partition for warp-level MMA."""
        return self.warp_mma_flops_per_clock or self.dense_fp16_flops_per_clock


@attrs.frozen
class Pipelines:
    """Execution units of one sub-partition."""

    fp32: Pipeline = _field("FFMA/FADD/FMUL pipe", validator=v.instance_of(Pipeline))
    int32: Pipeline = _field("integer ALU pipe", validator=v.instance_of(Pipeline))
    fp64: Pipeline = _field("double-precision pipe", validator=v.instance_of(Pipeline))
    sfu: Pipeline = _field("special-function unit (MUFU)", validator=v.instance_of(Pipeline))
    tensor: TensorPipeline = _field("tensor core", validator=v.instance_of(TensorPipeline))
    ldst: Pipeline = _field("load/store address units (MIO issue)", validator=v.instance_of(Pipeline))
    memory_queue_depth: int = _field(
        "memory instructions a sub-partition's load/store pipes hold issued but not yet started (the MIO / LSU "
        "instruction queue): issue stalls (mio_throttle, lg_throttle) only when it is full", "instructions",
        default=2)


def _sectors_per_line(spec) -> None:
    """A line holds 1 to 16 sectors (every modelled part has 4; the caches keep a sector mask per line)."""
    if not spec.sector_bytes <= spec.line_bytes <= 16 * spec.sector_bytes:
        raise ValueError(f"line_bytes: expected 1 to 16 sectors of {spec.sector_bytes} bytes, got {spec.line_bytes}")


@attrs.frozen
class L1Spec:
    line_bytes: int = _field("cache line (tag) size", "bytes", validator=_power_of_two)
    sector_bytes: int = _field("sector (fill) size", "bytes", validator=_power_of_two)
    associativity: int = _field("ways per set", "ways")
    hit_latency: int = _field("load-to-use latency of an L1 hit", "cycles")
    shared_latency: int = _field("load-to-use latency of a conflict-free shared-memory load", "cycles")
    mshrs: int = _field("outstanding miss entries per SM", "entries")

    def __attrs_post_init__(self):
        _sectors_per_line(self)


@attrs.frozen
class L2Spec:
    size_bytes: int = _field("total L2 capacity", "bytes")
    slices: int = _field("address-interleaved L2 slices", "slices")
    line_bytes: int = _field("cache line (tag) size", "bytes", validator=_power_of_two)
    sector_bytes: int = _field("sector size", "bytes", validator=_power_of_two)
    associativity: int = _field("ways per set", "ways")
    hit_latency: int = _field("load-to-use latency of an L1 miss that hits in L2", "cycles")
    bandwidth_bytes_per_clock: int = _field("aggregate L2 read bandwidth", "bytes/clk")
    sm_bytes_per_clock: int = _field(
        "bandwidth of one SM's port to L2 (L1 misses, stores, atomics), per core clock", "bytes/clk")
    atomic_cycles_per_address_update: int = _field(
        "clocks an L2 slice needs per atomic update of one address (updates to one address serialize)", "cycles",
        default=1)

    def __attrs_post_init__(self):
        _sectors_per_line(self)


@attrs.frozen
class DramSpec:
    type: str = _field("memory technology", validator=v.instance_of(str))
    capacity_gb: float = _field("device memory capacity", "GB")
    bandwidth_gbs: float = _field("peak DRAM bandwidth NVIDIA quotes", "GB/s")
    latency: int = _field("load-to-use latency of a load that misses L1 and L2", "cycles")
    channels: int = _field("independent channels the bandwidth is spread over", "channels")
    read_efficiency: float = _field("fraction of the peak that streaming reads reach (refresh, page misses)",
                                    "fraction", validator=_fraction)
    write_efficiency: float = _field("fraction of the peak that write-backs reach (bus turnaround as well)",
                                     "fraction", validator=_fraction)


@attrs.frozen
class MemorySpec:
    l1: L1Spec = _field("per-SM L1 data cache", validator=v.instance_of(L1Spec))
    l2: L2Spec = _field("shared L2", validator=v.instance_of(L2Spec))
    dram: DramSpec = _field("device memory", validator=v.instance_of(DramSpec))


@attrs.frozen
class ArchSpec:
    name: str = _field("short name (the file's stem)", validator=v.instance_of(str))
    full_name: str = _field("product name", validator=v.instance_of(str))
    compute_capability: str = _field("CUDA compute capability, 'major.minor'", validator=v.matches_re(r"\d+\.\d+"))
    clocks: Clocks = _field("clock rates", validator=v.instance_of(Clocks))
    structure: Structure = _field("GPC/TPC/SM hierarchy", validator=v.instance_of(Structure))
    sm: SMSpec = _field("per-SM limits", validator=v.instance_of(SMSpec))
    frontend: FrontendSpec = _field("branch and block-launch timing", validator=v.instance_of(FrontendSpec))
    shared_memory: SharedMemorySpec = _field("per-SM shared memory", validator=v.instance_of(SharedMemorySpec))
    pipelines: Pipelines = _field("per-sub-partition execution units", validator=v.instance_of(Pipelines))
    memory: MemorySpec = _field("memory hierarchy", validator=v.instance_of(MemorySpec))

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


def describe_fields(cls) -> list[tuple[str, str, str]]:
    """(name, unit, description) for every field of a spec class: the schema, readable."""
    return [(a.name, a.metadata.get("unit", ""), a.metadata.get("doc", "")) for a in attrs.fields(cls)]
