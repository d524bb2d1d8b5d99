"""SASS-like opcodes: which pipeline runs each one and, for memory, the space and access width.

The table maps an opcode's base name (the part before the first '.') to a pipeline class; modifiers give the
access width (`.128` = 16 bytes, `.64` = 8, `.U8`/`.S8` = 1, `.U16`/`.S16` = 2, default 4) and, for MMA, the
shape (`HMMA.16816` = m16n8k16). Latencies and throughputs are per architecture (arch/*.yaml), never here.
"""

from __future__ import annotations

import re

import attrs

# Pipeline classes
FP32, INT32, FP64, SFU, TENSOR = "fp32", "int32", "fp64", "sfu", "tensor"
LDST_GLOBAL, LDST_SHARED, LDST_LOCAL, LDST_CONST = "ldst_global", "ldst_shared", "ldst_local", "ldst_const"
BRANCH, BARRIER, MISC = "branch", "barrier", "misc"
PIPELINE_CLASSES = (FP32, INT32, FP64, SFU, TENSOR, LDST_GLOBAL, LDST_SHARED, LDST_LOCAL, LDST_CONST,
                    BRANCH, BARRIER, MISC)
MEMORY_CLASSES = {LDST_GLOBAL: "global", LDST_SHARED: "shared", LDST_LOCAL: "local", LDST_CONST: "const"}

_BASES: dict[str, str] = {}
for _cls, _names in {
    FP32: "FFMA FADD FMUL FMNMX FSETP FSEL FSET FCHK FRND FSWZADD HADD2 HMUL2 HFMA2 HSETP2 HMNMX2 F2F F2FP FMUL32I "
          "FADD32I FFMA32I",
    INT32: "IMAD IADD3 IADD IMUL ISETP LOP3 LOP SHF SHL SHR IABS IMNMX LEA LEA.HI MOV MOV32I SEL PRMT POPC FLO BREV "
           "ISCADD IMNMX VABSDIFF VIADD VIMNMX I2F F2I I2I PLOP3 P2R R2P CS2R S2R S2UR IDP BMSK SGXT UIADD3 UMOV "
           "ULDC ULOP3 USHF UIMAD ULEA USEL UISETP UPLOP3 R2UR FLO",
    FP64: "DFMA DADD DMUL DSETP DMNMX F2D D2F",
    SFU: "MUFU RRO",
    TENSOR: "HMMA IMMA BMMA DMMA HGMMA IGMMA QGMMA BGMMA UTCMMA UTCHMMA UTCQMMA",
    LDST_GLOBAL: "LDG STG LD ST ATOMG ATOM RED LDGSTS LDGDEPBAR CCTL ATOMG.ADD",
    LDST_SHARED: "LDS STS ATOMS LDSM STSM SHFL",
    LDST_LOCAL: "LDL STL",
    LDST_CONST: "LDC",
    BRANCH: "BRA BRX JMP JMX CALL RET EXIT BSSY BSYNC WARPSYNC BREAK BPT KILL YIELD",
    BARRIER: "BAR MEMBAR DEPBAR ERRBAR",
    MISC: "NOP VOTE VOTEU MATCH REDUX NANOSLEEP",
}.items():
    for _name in _names.split():
        _BASES.setdefault(_name, _cls)

_STORES = {"STG", "ST", "STS", "STL", "STSM"}
_ATOMICS = {"ATOMG", "ATOM", "RED", "ATOMS"}
_WIDTHS = {"128": 16, "64": 8, "U8": 1, "S8": 1, "U16": 2, "S16": 2, "32": 4}
_MMA_SHAPE = re.compile(r"^(\d{2})(\d)(\d+)$")  # 16816 -> m16 n8 k16 ; 884 -> m8 n8 k4


@attrs.frozen
class OpInfo:
    opcode: str  # the full name, modifiers included
    base: str
    pipeline: str  # one of PIPELINE_CLASSES
    space: str | None  # global / shared / local / const for memory instructions
    width: int  # bytes per lane for memory instructions, 0 otherwise
    is_store: bool
    is_atomic: bool
    mma_flops: int  # FLOP per warp-instruction for MMA opcodes with a shape, 0 otherwise

    @property
    def is_memory(self) -> bool:
        return self.space is not None and self.base != "SHFL"


def _mma_flops(modifiers: list[str]) -> int:
    for mod in modifiers:
        m = _MMA_SHAPE.match(mod)
        if m:
            mm, nn, kk = (int(g) for g in m.groups())
            return 2 * mm * nn * kk
    return 0


def lookup(opcode: str) -> OpInfo | None:
    """OpInfo for a SASS-like opcode with modifiers, or None if the base name is unknown."""
    parts = opcode.upper().split(".")
    base, modifiers = parts[0], parts[1:]
    pipeline = _BASES.get(base)
    if pipeline is None:
        return None
    if base in ("LD", "ST"):  # generic loads/stores: the space modifier decides (LD.LOCAL, ST.SHARED)
        pipeline = {"LOCAL": LDST_LOCAL, "SHARED": LDST_SHARED}.get(next(
            (m for m in modifiers if m in ("LOCAL", "SHARED")), ""), LDST_GLOBAL)
    space = MEMORY_CLASSES.get(pipeline)
    width = 0
    if space is not None and base not in ("SHFL", "LDGDEPBAR", "CCTL"):
        width = 4
        for mod in modifiers:
            width = _WIDTHS.get(mod, width)
        if base == "LDSM":  # ldmatrix: each lane supplies a 16-byte row address
            width = 16
    elif base == "SHFL":
        space = None
    mma = _mma_flops(modifiers) if pipeline == TENSOR else 0
    return OpInfo(opcode=opcode.upper(), base=base, pipeline=pipeline, space=space, width=width,
                  is_store=base in _STORES or base == "RED", is_atomic=base in _ATOMICS, mma_flops=mma)


def known_bases() -> list[str]:
    return sorted(_BASES)
