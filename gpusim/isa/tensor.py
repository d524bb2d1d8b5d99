"""Tensor-core peaks by precision, and which precision an MMA opcode runs at: pure functions of the ArchSpec.

`tensor_rate(spec, "fp8")` is the dense FP8 peak in FLOP per clock per SM at the tensor clock (the unit of
`pipelines.tensor.rates`); `precision_scale(spec, "fp8")` is that peak over the FP16 one, the factor the timing
table multiplies its FP16 tensor rate by. Both follow the engine's FP16 peak (sub_partitions x
dense_fp16_flops_per_clock): a what-if that changes it scales every precision with it. A precision the part has
no tensor path for is None (FP8 on an A100, FP4 on an H100); `require_tensor_rate` makes that a one-line error.

`mma_precision("HMMA.16816.F32.BF16") == "bf16"`: the input precision of a SASS MMA opcode, from its base name
and type modifiers; `is_sparse` says whether it is the 2:4 structured-sparse form (`.SP`). `umma_cycles(spec,
"UTCHMMA.128X256X16.F32")`: the core clocks a tcgen05 MMA keeps an SM's tensor core busy (its shape padded to the
tensor core's step, at its precision's dense rate).
"""

from __future__ import annotations

from ..arch.spec import ArchSpec
from ..errors import GpusimError
from .opcodes import mma_shape

# Narrowest last within each family; floating point first.
PRECISIONS = ("fp16", "bf16", "tf32", "fp8", "fp6", "fp4", "int8", "int4")
FLOAT_WIDTHS = {"tf32": 19, "fp16": 16, "bf16": 16, "fp8": 8, "fp6": 6, "fp4": 4}

# SASS type modifiers -> precision (the accumulator's .F32 / .F16 does not set the input precision)
_TYPE_MODIFIERS = {"BF16": "bf16", "TF32": "tf32", "E4M3": "fp8", "E5M2": "fp8", "E3M2": "fp6", "E2M3": "fp6",
                   "E2M1": "fp4", "S8": "int8", "U8": "int8", "S4": "int4", "U4": "int4"}
# The precision an MMA base name runs at when no type modifier says otherwise.
_BASE_DEFAULT = {
    "HMMA": "fp16", "HGMMA": "fp16", "UTCHMMA": "fp16",  # FP16 inputs; .BF16 / .TF32 modifiers select those
    "IMMA": "int8", "IGMMA": "int8", "UTCIMMA": "int8",  # .S4 / .U4: int4
    "QGMMA": "fp8", "QMMA": "fp8", "UTCQMMA": "fp8",  # FP8 / FP6 / FP4 operands (tcgen05 kind::f8f6f4)
    "OMMA": "fp4", "UTCOMMA": "fp4",  # block-scaled FP4 (tcgen05 kind::mxf4, mxf4nvf4)
}
# Bases whose operands the narrowest-kind rule does not apply to: tcgen05 kind::f8f6f4 (UTCQMMA) and the QMMA /
# QGMMA forms run FP6 and FP4 operands on the FP8/FP6 datapath (NVIDIA's tables quote FP6 at the FP8 rate; the
# FP4 rate needs the block-scaled FP4 kinds, UTCOMMA / OMMA).
_F8F6F4 = frozenset({"QGMMA", "QMMA", "UTCQMMA"})


def _rates(spec: ArchSpec):
    return spec.pipelines.tensor.rates


def fp16_peak(spec: ArchSpec) -> float:
    """The engine's dense FP16 tensor peak, FLOP per clock per SM at the tensor clock."""
    return float(spec.pipelines.tensor.dense_fp16_flops_per_clock * spec.sm.sub_partitions)


def _check(precision: str) -> None:
    if precision not in PRECISIONS:
        raise GpusimError(f"unknown tensor precision '{precision}': expected one of {', '.join(PRECISIONS)}")


def tensor_rate(spec: ArchSpec, precision: str, sparse: bool = False) -> float | None:
    """Peak FLOP (integer precisions: operations) per clock per SM at clocks.tensor_mhz for `precision`, dense or
    with 2:4 sparsity; None where the part has no such tensor path (or no sparse one)."""
    _check(precision)
    rates = _rates(spec)
    if rates is None:  # an arch file without a rates table: only FP16 dense is known
        return fp16_peak(spec) if precision == "fp16" and not sparse else None
    rate = getattr(rates, precision)
    if rate is None:
        return None
    value = rate.sparse if sparse else rate.dense
    if value is None:
        return None
    return value * fp16_peak(spec) / rates.fp16.dense  # follows a what-if on the FP16 peak


def precision_scale(spec: ArchSpec, precision: str, sparse: bool = False) -> float | None:
    """`tensor_rate(spec, precision, sparse)` over the dense FP16 peak: 2.0 for FP8 on an H100, 0.5 for TF32;
    None where the part has no such path."""
    rate = tensor_rate(spec, precision, sparse)
    return None if rate is None else rate / fp16_peak(spec)


def available_precisions(spec: ArchSpec) -> list[str]:
    """The precisions the part has a (dense) tensor path for, in PRECISIONS order."""
    return [p for p in PRECISIONS if tensor_rate(spec, p) is not None]


def require_tensor_rate(spec: ArchSpec, precision: str, sparse: bool = False) -> float:
    """tensor_rate, or a one-line GpusimError naming what the part does have."""
    rate = tensor_rate(spec, precision, sparse)
    if rate is None:
        kind = "sparse " if sparse and tensor_rate(spec, precision) is not None else ""
        has = ", ".join(available_precisions(spec)) or "none"
        raise GpusimError(f"{spec.name} has no {kind}{precision} tensor-core path (its tensor precisions: {has})")
    return rate


def mma_precision(opcode: str) -> str | None:
    """The input precision an MMA opcode runs at ("HMMA.16816.F32" -> "fp16", "HMMA.16816.F32.BF16" -> "bf16",
    "HMMA.1684.F32.TF32" -> "tf32", "QGMMA.64X128X32.F32.E4M3.E4M3" -> "fp8", "IMMA.16832.S8.S8" -> "int8",
    "IMMA.16864.S4.S4" -> "int4", "UTCOMMA..." -> "fp4"); None for what has no rate row here: FP64 (DMMA),
    single-bit (BMMA, BGMMA, UTCBMMA) and non-MMA opcodes. With mixed operand types the wider one decides."""
    parts = opcode.upper().split(".")
    base, modifiers = parts[0], parts[1:]
    default = _BASE_DEFAULT.get(base)
    if default is None:
        return None
    found = [_TYPE_MODIFIERS[m] for m in modifiers if m in _TYPE_MODIFIERS]
    if base in ("IMMA", "IGMMA", "UTCIMMA"):
        return "int8" if not found or "int8" in found else "int4"
    floats = [p for p in found if p in FLOAT_WIDTHS and p not in ("int8", "int4")]
    if not floats:
        return default
    if base in ("HMMA", "HGMMA", "UTCHMMA"):
        return next((p for p in ("tf32", "bf16") if p in floats), default)
    widest = max(floats, key=lambda p: FLOAT_WIDTHS[p])
    if base in _F8F6F4 and widest == "fp4":
        return "fp6"  # the f8f6f4 datapath: FP4 operands at the FP6 (= FP8) rate
    return widest


def is_sparse(opcode: str) -> bool:
    """Whether an MMA opcode is the 2:4 structured-sparse form (HMMA.SP.16832..., the .SP modifier)."""
    return "SP" in opcode.upper().split(".")[1:]


TCGEN05_SHAPE_NEEDED = "a tcgen05 MMA needs its shape as a modifier, MxNxK (e.g. UTCHMMA.128X256X16)"


def umma_cycles(spec: ArchSpec, opcode: str) -> float:
    """Core clocks a tcgen05 MMA ("UTCHMMA.128X256X16.F32", M x N x K of the CTA; with .2CTA of the CTA pair, each
    SM running half the rows) keeps one SM's tensor core busy: its shape padded to the tensor core's step
    (tensor_memory.mma_tile_m x mma_tile_n: a smaller M or N takes as long) at the part's dense peak for its input
    precision, per core clock (x tensor_mhz / core_mhz, as for every tensor rate here). A one-line error where the
    part has no tensor memory or no rate for the precision."""

    memory = spec.pipelines.tensor.tensor_memory
    if memory is None:
        raise GpusimError(f"{opcode}: {spec.name} has no tensor memory (pipelines.tensor.tensor_memory): tcgen05 MMA "
                          f"needs it")
    shape = mma_shape(opcode)
    if shape is None:
        raise GpusimError(f"{opcode}: {TCGEN05_SHAPE_NEEDED}")
    rows, cols, depth = shape
    if "2CTA" in opcode.upper().split(".")[1:]:
        rows //= 2
    precision = mma_precision(opcode)
    if precision is None:
        raise GpusimError(f"{opcode}: gpusim has no tensor rate for its type (single-bit MMA)")
    rate = require_tensor_rate(spec, precision, is_sparse(opcode))
    rows = -(-rows // memory.mma_tile_m) * memory.mma_tile_m
    cols = -(-cols // memory.mma_tile_n) * memory.mma_tile_n
    clocks = spec.clocks
    return 2 * rows * cols * depth / (rate * min(1.0, clocks.tensor_mhz / clocks.core_mhz))
