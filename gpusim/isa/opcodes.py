"""SASS-like opcodes: which pipeline runs each one and, for memory, the space and access width.

The table maps an opcode's base name (the part before the first '.') to a pipeline class; modifiers give the
access width (`.128` = 16 bytes, `.64` = 8, `.U8`/`.S8` = 1, `.U16`/`.S16` = 2, default 4) and, for MMA, the
shape (`HMMA.16816` = m16n8k16; `HGMMA.64X128X16` is shared by the four warps of a warpgroup). The names
each architecture family introduced are listed by family, so a trace is read with its binary's own table. Latencies and throughputs are per architecture (arch/*.yaml), never here.
"""

from __future__ import annotations

import re

from .opinfo import OpInfo

# Pipeline classes
FP32, INT32, FP64, SFU, TENSOR = "fp32", "int32", "fp64", "sfu", "tensor"
LDST_GLOBAL, LDST_SHARED, LDST_LOCAL, LDST_CONST = "ldst_global", "ldst_shared", "ldst_local", "ldst_const"
BRANCH, BARRIER, MISC = "branch", "barrier", "misc"
PIPELINE_CLASSES = (FP32, INT32, FP64, SFU, TENSOR, LDST_GLOBAL, LDST_SHARED, LDST_LOCAL, LDST_CONST,
                    BRANCH, BARRIER, MISC)
MEMORY_CLASSES = {LDST_GLOBAL: "global", LDST_SHARED: "shared", LDST_LOCAL: "local", LDST_CONST: "const"}

# SASS base names by the architecture family that introduced them (each family also runs every earlier
# family's names). YAML workloads use the union; a trace uses the table of its binary's family.
FAMILIES = ("volta", "turing", "ampere", "ada", "hopper", "blackwell")
_INTRODUCED: dict[str, dict[str, str]] = {
    "volta": {
        FP32: "FFMA FADD FMUL FMNMX FSETP FSEL FSET FCHK FRND FSWZADD HADD2 HMUL2 HFMA2 HSETP2 HSET2 F2F FMUL32I "
              "FADD32I FFMA32I",
        INT32: "IMAD IADD3 IADD IMUL ISETP LOP3 LOP SHF SHL SHR IABS IMNMX LEA MOV MOV32I SEL PRMT POPC FLO BREV "
               "ISCADD VABSDIFF VABSDIFF4 I2F F2I I2I PLOP3 P2R R2P CS2R S2R IDP IMUL32I IADD32I LOP32I ISCADD32I "
               "IMAD32I BMSK SGXT LEPC",
        FP64: "DFMA DADD DMUL DSETP DMNMX F2D D2F",
        SFU: "MUFU RRO",
        TENSOR: "HMMA",
        LDST_GLOBAL: "LDG STG LD ST ATOMG ATOM RED CCTL CCTLL",
        LDST_SHARED: "LDS STS ATOMS SHFL",
        LDST_LOCAL: "LDL STL",
        LDST_CONST: "LDC",
        BRANCH: "BRA BRX JMP JMX CALL RET EXIT BSSY BSYNC WARPSYNC BREAK BPT KILL YIELD BMOV RTT",
        BARRIER: "BAR",
        # memory fences and dependency barriers order a warp's own accesses: an issue slot, not a block barrier
        MISC: "NOP VOTE MATCH NANOSLEEP MEMBAR DEPBAR ERRBAR PMTRIG SETCTAID SETLMEMBASE GETLMEMBASE B2R R2B "
              "CSMTEST",
    },
    "turing": {
        INT32: "UMOV ULDC UIADD3 ULOP3 ULOP USHF UIMAD ULEA USEL UISETP UPLOP3 UPRMT UFLO UPOPC UBREV UBMSK USGXT "
               "UP2UR R2UR S2UR",
        TENSOR: "IMMA BMMA",
        LDST_SHARED: "LDSM",
        MISC: "VOTEU",
    },
    "ampere": {
        FP32: "F2FP HMNMX2",
        INT32: "I2FP F2IP UF2FP",
        TENSOR: "DMMA",
        LDST_GLOBAL: "LDGSTS LDGDEPBAR",
        MISC: "REDUX",
    },
    "ada": {},
    "hopper": {
        INT32: "VIADD VIMNMX VIMNMX3 VIADDMNMX VHMNMX USETMAXREG",
        TENSOR: "HGMMA IGMMA QGMMA BGMMA",
        LDST_GLOBAL: "UTMALDG UTMASTG UTMAPF UTMACCTL UTMACMDFLUSH UBLKCP UBLKRED UBLKPF",
        LDST_SHARED: "STSM STAS REDAS",
        MISC: "SYNCS FENCE ELECT ACQBULK WARPGROUP UCGABAR_ARV UCGABAR_WAIT CGAERRBAR ENDCOLLECTIVE",
    },
    "blackwell": {
        FP32: "FADD2 FMUL2 FFMA2 FMNMX3",
        TENSOR: "UTCHMMA UTCQMMA UTCIMMA UTCOMMA UTCBMMA OMMA QMMA",
        LDST_SHARED: "LDTM STTM",
        MISC: "UTCBAR UTCCP UTCSHIFT UTCATOMSWS",
    },
}


# Warpgroup (Hopper wgmma) and tcgen05 (Blackwell) MMA, on those parts the only paths to the tensor peak
# (OMMA and QMMA, sm_120's, are warp-level)
WARPGROUP_MMA = frozenset({"HGMMA", "IGMMA", "QGMMA", "BGMMA", "UTCHMMA", "UTCQMMA", "UTCIMMA", "UTCOMMA", "UTCBMMA"})
# Instructions whose meaning is asynchronous (gpusim.engine.asynchrony gives YAML workloads their semantics):
# cp.async copies, commits and waits; TMA / bulk copies and the mbarriers they complete on; wgmma, its groups
# and waits. A YAML workload that uses one on an architecture without it is refused, not run (see `refusal`).
ASYNC_COPY = frozenset({"LDGSTS", "LDGDEPBAR", "DEPBAR"})  # cp.async (sm_80+); DEPBAR.LE SB0, N is its wait
BULK_COPY = frozenset({"UTMALDG", "UBLKCP"})  # cp.async.bulk(.tensor) global -> shared, completing on an mbarrier
ASYNC_MMA = frozenset({"HGMMA", "IGMMA", "QGMMA", "BGMMA"})  # wgmma.mma_async (sm_90a)
# tcgen05 (sm_100 / sm_103 / sm_110, not sm_120): MMA into tensor memory issued by one thread for the CTA, its commit to
# an mbarrier (UTCBAR), shared memory -> tensor memory copies (UTCCP), tensor-memory allocation (UTCATOMSWS:
# .FIND_AND_SET allocates, .AND frees) and loads / stores between tensor memory and registers (LDTM / STTM)
TCGEN05_MMA = frozenset({"UTCHMMA", "UTCQMMA", "UTCIMMA", "UTCOMMA", "UTCBMMA"})
TCGEN05 = TCGEN05_MMA | {"UTCBAR", "UTCCP", "UTCATOMSWS", "LDTM", "STTM"}
CLUSTER_BARRIER = frozenset({"UCGABAR_ARV", "UCGABAR_WAIT"})  # barrier.cluster.arrive / .wait (sm_90+)
ASYNC_OPS = ASYNC_COPY | BULK_COPY | ASYNC_MMA | CLUSTER_BARRIER | TCGEN05 | {"SYNCS", "WARPGROUP"}
# Shared-memory opcodes that may name a `peer` block of the cluster: distributed shared memory (ld/st/atom on the
# shared::cluster window of a mapa-mapped address), carried over the SM-to-SM network (gpusim.engine.clusters)
DSMEM_OPS = frozenset({"LDS", "STS", "ATOMS"})


def _tables() -> dict[str | None, dict[str, str]]:
    tables: dict[str | None, dict[str, str]] = {}
    running: dict[str, str] = {}
    for family in FAMILIES:
        for cls, names in _INTRODUCED[family].items():
            for name in names.split():
                running.setdefault(name, cls)
        tables[family] = dict(running)
    tables[None] = running  # YAML workloads: every name any family knows
    return tables


_TABLES = _tables()
_BASES = _TABLES[None]
# binary version (sm_XY as XY) -> family; a version not listed takes the nearest family below it
_FAMILY_SINCE = ((70, "volta"), (75, "turing"), (80, "ampere"), (89, "ada"), (90, "hopper"), (100, "blackwell"))


def family_of(binary_version: int) -> str | None:
    """The architecture family whose SASS a binary of this version (70 for sm_70, ...) holds; None before Volta."""
    found = None
    for since, family in _FAMILY_SINCE:
        if binary_version >= since:
            found = family
    return found


_STORES = {"STG", "ST", "STS", "STL", "STSM", "STAS"}
# LSU instructions without per-lane addresses (shuffles, async-copy fences, TMA and bulk copies, tensor memory):
# they use the load/store pipe but no memory model access
_NO_LANE_ADDRESSES = {"SHFL", "LDGDEPBAR", "CCTL", "CCTLL", "UTMALDG", "UTMASTG", "UTMAPF", "UTMACCTL",
                      "UTMACMDFLUSH", "UBLKCP", "UBLKRED", "UBLKPF", "LDTM", "STTM"}
_ATOMICS = {"ATOMG", "ATOM", "RED", "ATOMS"}
WIDTHS = {"128": 16, "64": 8, "U8": 1, "S8": 1, "U16": 2, "S16": 2, "32": 4}
_MMA_SHAPE = re.compile(r"^(\d{2})(\d)(\d+)$")  # 16816 -> m16 n8 k16 ; 884 -> m8 n8 k4


_WARPGROUP_SHAPE = re.compile(r"^(\d+)X(\d+)X(\d+)$")  # HGMMA.64X128X16: one warpgroup (4 warps) shares it
WARPS_PER_WARPGROUP = 4


def mma_shape(opcode: str) -> tuple[int, int, int] | None:
    """(M, N, K) of a warpgroup or tcgen05 MMA opcode's MxNxK modifier ("UTCHMMA.128X256X16" -> (128, 256, 16)); None
    when it names none."""
    for mod in opcode.upper().split(".")[1:]:
        m = _WARPGROUP_SHAPE.match(mod)
        if m:
            mm, nn, kk = (int(g) for g in m.groups())
            return mm, nn, kk
    return None


def _mma_flops(base: str, modifiers: list[str]) -> int:
    for mod in modifiers:
        m = _MMA_SHAPE.match(mod)
        if m:
            mm, nn, kk = (int(g) for g in m.groups())
            return 2 * mm * nn * kk
        m = _WARPGROUP_SHAPE.match(mod)
        if m:
            mm, nn, kk = (int(g) for g in m.groups())
            # a tcgen05 MMA is one instruction of one thread for the whole CTA (with .2CTA: the CTA pair)
            return 2 * mm * nn * kk // (1 if base in TCGEN05_MMA else WARPS_PER_WARPGROUP)
    return 0


# LDTM / STTM (tcgen05.ld / .st): 128-byte columns (32 lanes x 32 bit) each layout moves per .xN, as measured on a B200
# (github.com/cicuvc/nvidia-sass-document, notes/sm100/instr/ldtm.md: .32x32b.xN in N / 2 cycles, .16x64b in N,
# .16x128b in 2N, .16x256b in 8N at two columns a cycle; .PACK16BIT doubles them)
_TMEM_LAYOUT_COLUMNS = {"32DP32BIT": 1, "16DP32BIT_T0_T15": 1, "16DP32BIT_T16_T31": 1, "16DP64BIT": 2,
                        "16DP128BIT": 4, "16DP256BIT": 16}
_TMEM_REPEAT = re.compile(r"^X(\d+)$")


def tmem_columns(opcode: str) -> int:
    """Tensor-memory columns' worth of transfers (128 bytes each) one LDTM / STTM makes: "LDTM.x16" -> 16,
    "LDTM.16dp128bit.x4" -> 16 (default layout .32x32b, default .x1)."""
    layout, repeat, pack = 1, 1, 1
    for mod in opcode.upper().split(".")[1:]:
        m = _TMEM_REPEAT.match(mod)
        if m:
            repeat = int(m.group(1))
        elif mod in _TMEM_LAYOUT_COLUMNS:
            layout = _TMEM_LAYOUT_COLUMNS[mod]
        elif mod in ("PACK16BIT", "UNPACK16BIT", "EXPAND16BIT"):
            pack = 2
    return layout * repeat * pack


def lookup(opcode: str, family: str | None = None) -> OpInfo | None:
    """OpInfo for a SASS-like opcode with modifiers, or None if the base name is unknown (to `family`'s table:
    volta ... blackwell; None: every family's names)."""
    parts = opcode.upper().split(".")
    base, modifiers = parts[0], parts[1:]
    pipeline = _TABLES[family].get(base)
    if pipeline is None:
        return None
    if base == "BAR" and ("ARV" in modifiers or "SCAN" in modifiers):
        pipeline = MISC  # arrive without waiting: the warp goes on
    if base in ("LD", "ST"):  # generic loads/stores: the space modifier decides (LD.LOCAL, ST.SHARED)
        pipeline = {"LOCAL": LDST_LOCAL, "SHARED": LDST_SHARED}.get(next(
            (m for m in modifiers if m in ("LOCAL", "SHARED")), ""), LDST_GLOBAL)
    space = MEMORY_CLASSES.get(pipeline)
    width = 0
    if space is not None and base not in _NO_LANE_ADDRESSES:
        width = 4
        for mod in modifiers:
            width = WIDTHS.get(mod, width)
        if base == "LDSM":  # ldmatrix: each lane supplies a 16-byte row address
            width = 16
    else:
        space = None
    mma = _mma_flops(base, modifiers) if pipeline == TENSOR else 0
    return OpInfo(opcode=opcode.upper(), base=base, pipeline=pipeline, space=space, width=width,
                  is_store=base in _STORES or base == "RED", is_atomic=base in _ATOMICS, mma_flops=mma)


# What an asynchronous opcode does (async_kind): the operands each kind takes in a YAML workload are
# gpusim.workload.program.ASYNC_OPERANDS; gpusim.engine.asynchrony carries each kind out.
COPY, COMMIT, WAIT_COPIES = "copy", "commit", "wait_copies"  # LDGSTS, LDGDEPBAR, DEPBAR
BULK = "bulk"  # UTMALDG, UBLKCP
MBARRIER_INIT, MBARRIER_ARRIVE, MBARRIER_WAIT = "mbarrier_init", "mbarrier_arrive", "mbarrier_wait"  # SYNCS.*
MMA, MMA_FENCE, WAIT_MMA = "mma", "mma_fence", "wait_mma"  # HGMMA..., WARPGROUP.ARRIVE, WARPGROUP.DEPBAR
CLUSTER_ARRIVE, CLUSTER_WAIT = "cluster_arrive", "cluster_wait"  # UCGABAR_ARV, UCGABAR_WAIT
TMEM_ALLOC, TMEM_FREE = "tmem_alloc", "tmem_free"  # UTCATOMSWS.FIND_AND_SET, UTCATOMSWS.AND (tcgen05.alloc / dealloc)
UMMA, UMMA_COMMIT, TMEM_COPY = "umma", "umma_commit", "tmem_copy"  # UTC*MMA, UTCBAR (tcgen05.commit), UTCCP
TMEM_LOAD, TMEM_STORE, TMEM_STORE_WAIT = "tmem_load", "tmem_store", "tmem_store_wait"  # LDTM, STTM, FENCE.VIEW.ASYNC.T
DSMEM = "dsmem"  # an LDS / STS / ATOMS with a `peer`: not an opcode's kind, an instruction's (the YAML key decides)
_SYNCS_KINDS = {"EXCH": MBARRIER_INIT, "ARRIVE": MBARRIER_ARRIVE, "PHASECHK": MBARRIER_WAIT}
_WARPGROUP_KINDS = {"ARRIVE": MMA_FENCE, "DEPBAR": WAIT_MMA}
SYNCS_FORMS = "SYNCS.EXCH (mbarrier init), SYNCS.ARRIVE (arrive; expect-tx with 'bytes') or SYNCS.PHASECHK (wait)"
WARPGROUP_FORMS = "WARPGROUP.ARRIVE (wgmma.fence) or WARPGROUP.DEPBAR (wgmma.wait_group)"
_ALLOC_KINDS = {"FIND_AND_SET": TMEM_ALLOC, "AND": TMEM_FREE}
UTCATOMSWS_FORMS = "UTCATOMSWS.FIND_AND_SET (tcgen05.alloc) or UTCATOMSWS.AND (tcgen05.dealloc)"
_TCGEN05_KINDS = {"UTCBAR": UMMA_COMMIT, "UTCCP": TMEM_COPY, "LDTM": TMEM_LOAD, "STTM": TMEM_STORE}


def async_kind(info: OpInfo) -> str | None:
    """What an asynchronous opcode does ("" for any other opcode; None for a SYNCS or WARPGROUP form that is
    not modelled): a cp.async copy, commit or wait; a bulk (TMA) copy; an mbarrier init, arrive or wait; a
    warpgroup MMA (an HGMMA with the .GSB0 modifier also commits its group), its fence or its wait; a cluster
    barrier's arrive or wait."""
    base, modifiers = info.base, info.opcode.split(".")[1:]
    if base == "LDGSTS":
        return COPY
    if base == "LDGDEPBAR":
        return COMMIT
    if base == "DEPBAR":
        return WAIT_COPIES
    if base in BULK_COPY:
        return BULK
    if base in ASYNC_MMA:
        return MMA
    if base == "UCGABAR_ARV":
        return CLUSTER_ARRIVE
    if base == "UCGABAR_WAIT":
        return CLUSTER_WAIT
    if base == "SYNCS":
        return _SYNCS_KINDS.get(modifiers[0] if modifiers else "")
    if base == "WARPGROUP":
        return _WARPGROUP_KINDS.get(modifiers[0] if modifiers else "")
    if base in TCGEN05_MMA:
        return UMMA
    if base == "UTCATOMSWS":  # the allocator's atomic; .2CTA (cta_group::2) may come before the sub-operation
        return next((_ALLOC_KINDS[m] for m in modifiers if m in _ALLOC_KINDS), None)
    if base == "FENCE" and modifiers[:3] == ["VIEW", "ASYNC", "T"]:
        return TMEM_STORE_WAIT  # tcgen05.wait::st (tcgen05.wait::ld is the LDTM's register scoreboard)
    return _TCGEN05_KINDS.get(base, "")


def commits_group(info: OpInfo) -> bool:
    """An HGMMA whose modifiers hold GSB0 closes the warp's open wgmma group (wgmma.commit_group)."""
    return "GSB0" in info.opcode.split(".")[1:]


def known_bases() -> list[str]:
    return sorted(_BASES)


# --- which architectures have an opcode -------------------------------------------------------------------------
# A name exists from the compute capability of the family that introduced it (sm_XY as XY). Warp-level MMA shapes
# and types came later than the HMMA / IMMA names themselves: m16n8k8 on sm_75 (Turing), m16n8k16 and the BF16 /
# TF32 types on sm_80 (CUTLASS mma_sm75.hpp / mma_sm80.hpp; PTX ISA, mma.sync target notes). Warpgroup MMA
# (wgmma) is an sm_90a feature: Blackwell's SASS has tcgen05 (UTC*MMA) in its place.
_FAMILY_CC = {"volta": 70, "turing": 75, "ampere": 80, "ada": 89, "hopper": 90, "blackwell": 100}
_SINCE = {name: _FAMILY_CC[family] for family in reversed(FAMILIES)
          for names in _INTRODUCED[family].values() for name in names.split()}  # the earliest family wins
_SHAPE_SINCE = {("HMMA", "1688"): 75, ("HMMA", "16816"): 80, ("HMMA", "1684"): 80, ("IMMA", "8816"): 75,
                ("IMMA", "8832"): 75, ("IMMA", "16816"): 80, ("IMMA", "16832"): 80, ("IMMA", "16864"): 80}
_TYPE_SINCE = {"BF16": 80, "TF32": 80}  # HMMA input types
_UNTIL = {name: 100 for name in ("HGMMA", "IGMMA", "QGMMA", "BGMMA", "WARPGROUP")}  # wgmma is sm_90a only
_UNTIL.update({name: 120 for name in TCGEN05})  # tcgen05: sm_100 to sm_110; consumer Blackwell (sm_120) has none


def compute_capability_number(text: str) -> int:
    """"9.0" -> 90, "10.3" -> 103 (the sm_XY number)."""
    major, _, minor = text.partition(".")
    return int(major) * 10 + int(minor or 0)


def _cc_text(number: int) -> str:
    return f"{number // 10}.{number % 10}"


def _only_text(first: int, end: int) -> str:
    """"9.x only" (one major version), "10.0 to 11.x only" (more)."""
    last = (end - 1) // 10
    return f"{first // 10}.x only" if last == first // 10 else f"{_cc_text(first)} to {last}.x only"


def supported_range(info: OpInfo) -> tuple[int, int | None]:
    """(first, end): the compute capabilities (sm_XY as XY) whose SASS has this opcode, first <= cc < end (end
    None: every later one)."""
    modifiers = info.opcode.split(".")[1:]
    first = _SINCE.get(info.base, 0)
    for mod in modifiers:
        first = max(first, _SHAPE_SINCE.get((info.base, mod), 0), _TYPE_SINCE.get(mod, 0) if info.base == "HMMA" else 0)
    return first, _UNTIL.get(info.base)


def unsupported_warning(infos, arch_name: str, compute_capability: str) -> str | None:
    """One line naming the opcodes among `infos` that an architecture of this compute capability ("8.0") lacks,
    or None when it has them all."""
    cc = compute_capability_number(compute_capability)
    missing: dict[str, OpInfo] = {}
    for info in infos:
        first, end = supported_range(info)
        if (cc < first or end is not None and cc >= end) and info.opcode not in missing:
            missing[info.opcode] = info
    if not missing:
        return None
    parts = []
    for opcode, info in sorted(missing.items()):
        first, end = supported_range(info)
        if end is not None and cc >= end:
            parts.append(f"{opcode} exists on compute capability {_only_text(first, end)}")
        else:
            parts.append(f"{opcode} needs compute capability {_cc_text(first)}")
    pipes = sorted({info.pipeline for info in missing.values()})
    subject = "it runs" if len(missing) == 1 else "they run"
    timing = f"the {pipes[0]} pipe's" if len(pipes) == 1 else f"the {' and '.join(pipes)} pipes'"
    return f"{'; '.join(parts)}; {arch_name} is {compute_capability}: {subject} with {timing} timing anyway"


def refusal(infos, arch_name: str, compute_capability: str) -> str | None:
    """One line naming the asynchronous opcodes among `infos` (ASYNC_OPS: cp.async, TMA, mbarriers, wgmma) that an
    architecture of this compute capability lacks, or None. A YAML workload's program is its own meaning: it
    cannot run where those instructions do not exist (a trace's are checked by `unsupported_warning`)."""
    cc = compute_capability_number(compute_capability)
    missing: dict[str, tuple[int, int | None]] = {}
    for info in infos:
        if info.base in ASYNC_OPS and info.opcode not in missing:
            first, end = supported_range(info)
            if cc < first or end is not None and cc >= end:
                missing[info.opcode] = (first, end)
    if not missing:
        return None
    parts = [f"{opcode} exists on compute capability {_only_text(first, end)}" if end is not None
             else f"{opcode} needs compute capability {_cc_text(first)}" for opcode, (first, end) in sorted(missing.items())]
    return f"{'; '.join(parts)}; {arch_name} is {compute_capability}: a workload that uses asynchronous copies, " \
           f"mbarriers, warpgroup MMA or tcgen05 (tensor memory) cannot run there"
