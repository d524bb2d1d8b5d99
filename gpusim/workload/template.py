"""`gpusim workload new PATH`: a commented starting workload that runs as it is.

The file is a small but real kernel (c = a + b over n floats in a grid-stride loop, plus each block's sum of c
by warp shuffles and shared memory) that uses most of the format, each feature explained by a comment; the
reference is docs/workload-format.md.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import GpusimError, shown

NAME_MARK = "KERNEL_NAME"
DEFAULT_NAME = "my_kernel"
# plain words YAML (1.1, as PyYAML reads it) turns into true/false/null rather than text
_YAML_WORDS = {"yes", "no", "true", "false", "on", "off", "null", "y", "n"}

TEMPLATE = """\
# KERNEL_NAME: a starting workload written by `gpusim workload new`. It runs as it is:
#     gpusim run THIS_FILE --arch a100 --sms 1
#     gpusim workload show THIS_FILE      (launch, instruction mix and a warp's first instructions, no simulation)
# Every key, expression name and function is described in docs/workload-format.md (in the gpusim repository).
#
# The kernel: c = a + b over n floats, and each block's sum of its c values (a fused "add, then reduce" kernel).
# Each thread adds two elements per trip of a grid-stride loop and keeps a running sum; the block then reduces
# the sums: five butterfly shuffles inside each warp, one value per warp through shared memory, a barrier, and
# five more shuffles in warp 0, whose lane 0 writes the block's sum.
kernel: KERNEL_NAME
description: c = a + b over n floats plus each block's sum of c (grid-stride loop, warp shuffles, shared memory).

# Parameters: literal numbers (not expressions). Expressions anywhere below may use them, and
# `gpusim run FILE --set n=100000` replaces one for a run.
params:
  n: 65536           # elements of a, b and c
  threads: 128       # threads per block (a multiple of 32: one shared-memory slot per warp)
  trips: 4           # grid-stride loop trips per thread (two elements per trip)

# Buffers: `bytes` is an expression of the parameters. `space: global` (the default) is device memory,
# `space: shared` a region of each block's shared memory. In an expression a buffer's name is its base address
# in bytes; every access of an active lane must fall inside its buffer (or the block's shared memory).
buffers:
  a: {bytes: n * 4}
  b: {bytes: n * 4}
  c: {bytes: n * 4}
  sums: {bytes: (n + threads * trips * 2 - 1) / (threads * trips * 2) * 4}   # one float per block
  warp_sums: {space: shared, bytes: threads / 32 * 4}                         # one float per warp

# Launch: grid and block take 1 to 3 dimensions (x, y, z), each an expression of the parameters. `/` between
# whole numbers rounds down as in C, so (n + d - 1) / d rounds up: the last block may run past n, and the
# `pred` below masks those lanes off. A comma inside an expression needs quotes in a [...] or {...} list:
# [\"min(n, 4096) / 256\"].
launch:
  grid: [(n + threads * trips * 2 - 1) / (threads * trips * 2)]
  block: [threads]
  registers_per_thread: 32
  # shared_memory_bytes: defaults to the shared buffers' total (128-byte aligned each)
  # dynamic_shared_memory_bytes: defaults to 0

# The program: what every warp runs. A statement is an instruction (op), a loop, an if or an exit.
# Registers are names: an instruction waits until the registers it names in src and dst have been written
# by the instructions before it (the scoreboard). The opcode picks the pipeline (S2R, IMAD, IADD3: integer;
# FADD: FP32; LDG/STG: global memory; LDS/STS: shared memory; SHFL: shuffles; BAR.SYNC: the block barrier),
# and a memory opcode's width modifier the bytes per lane (.E or none: 4, .64: 8, .128: 16).
program:
  - {op: S2R, dst: r_tid, comment: threadIdx.x}
  - {op: S2R, dst: r_ctaid, comment: blockIdx.x}
  - {op: IMAD, dst: r_idx, src: [r_ctaid, r_tid], comment: "gtid = blockIdx.x * blockDim.x + threadIdx.x"}
  - {op: MOV, dst: acc, comment: the thread's running sum starts at 0}

  # A loop runs its body `loop` times (an expression) with `var` counting 0, 1, 2, ...; the trips are issued
  # one after another, nothing for the loop itself: its compare and back branch are instructions you write.
  - loop: trips
    var: i
    body:
      # `repeat: 2` issues an instruction twice, with `rep` = 0 and 1 in its expressions; "{rep}" in a register
      # name is replaced by that value, so these are two independent loads, into va0 and va1. `addr` is each
      # lane's byte address; `pred` keeps only the lanes where it holds active (here: elements below n).
      # Names such as gtid (the global thread index), nblocks (blocks in the grid) and ntid (threads per block)
      # are built in.
      - op: LDG.E
        dst: "va{rep}"
        src: [r_idx]
        addr: a + ((i * 2 + rep) * nblocks * ntid + gtid) * 4
        pred: (i * 2 + rep) * nblocks * ntid + gtid < n
        repeat: 2
      - op: LDG.E
        dst: "vb{rep}"
        src: [r_idx]
        addr: b + ((i * 2 + rep) * nblocks * ntid + gtid) * 4
        pred: (i * 2 + rep) * nblocks * ntid + gtid < n
        repeat: 2
      - {op: FADD, dst: "vc{rep}", src: ["va{rep}", "vb{rep}"], repeat: 2}
      - op: STG.E
        src: ["vc{rep}", r_idx]
        addr: c + ((i * 2 + rep) * nblocks * ntid + gtid) * 4
        pred: (i * 2 + rep) * nblocks * ntid + gtid < n
        repeat: 2
      - {op: FADD, dst: acc, src: [acc, "vc{rep}"], repeat: 2}
      - {op: IADD3, dst: r_idx, src: [r_idx], comment: "the next trip's index"}
      - {op: ISETP.LT.AND, dst: p_more, src: [r_idx]}
      - {op: BRA, src: [p_more], comment: "the loop's back branch: an instruction like any other"}

  # The warp's sum: five butterfly shuffles (SHFL moves registers between lanes: no `addr`).
  - loop: 5
    var: s
    body:
      - {op: SHFL.BFLY, dst: t, src: [acc]}
      - {op: FADD, dst: acc, src: [acc, t]}

  # `if` runs `then` with the lanes where the condition holds and `else` (optional) with the others; as the
  # compiler does, it issues BSSY and BRA before the sides and BSYNC after them (docs: --simt stack and its).
  - if: lane == 0
    then:
      - {op: STS, src: [acc], addr: warp_sums + warp * 4}
  - {op: BAR.SYNC, comment: "__syncthreads(): the block's live warps wait for each other"}

  # `exit` ends the lanes where its condition holds for the rest of the program (`exit: true`: all of them).
  # Warps 1, 2, ... are done; warp 0 adds up the warps' sums.
  - {exit: warp != 0}
  - if: lane < ntid / 32
    then:
      - {op: LDS, dst: acc, addr: warp_sums + lane * 4}
    else:
      - {op: MOV, dst: acc, comment: the lanes without a warp's sum add 0}
  - loop: 5
    var: s
    body:
      - {op: SHFL.BFLY, dst: t, src: [acc]}
      - {op: FADD, dst: acc, src: [acc, t]}
  - {op: STG.E, src: [acc], addr: sums + blockid * 4, pred: lane == 0}
"""


def kernel_name(path: Path) -> str:
    """A kernel name from the file's name: letters, digits and _ (others become _), not starting with a digit,
    and not a word YAML reads as true, false or null."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", path.name.split(".")[0])
    if not name or not (name[0].isalpha() or name[0] == "_"):
        name = f"k_{name}" if name else DEFAULT_NAME
    return f"{name}_kernel" if name.lower() in _YAML_WORDS else name


def template_text(path: Path) -> str:
    """The starting workload for a file at `path`: its kernel named after the file."""
    return TEMPLATE.replace(NAME_MARK, kernel_name(path)).replace("THIS_FILE", shown(str(path), 200))


def write_template(path: str | Path, force: bool = False) -> Path:
    """Write the starting workload to `path`; an existing file is kept (a one-line error) unless `force`."""
    path = Path(path)
    if path.is_dir():
        raise GpusimError(f"gpusim workload new {shown(str(path))}: is a directory (expected a file path, such as "
                          f"{shown(str(path / 'my_kernel.yaml'))})")
    if path.exists() and not force:
        raise GpusimError(f"gpusim workload new {shown(str(path))}: the file exists (pass --force to overwrite it)")
    try:
        path.write_text(template_text(path))
    except OSError as exc:
        raise GpusimError(f"gpusim workload new {shown(str(path))}: cannot write it ({exc.strerror or exc})") from None
    return path
