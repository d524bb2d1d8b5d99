"""`gpusim workload show`: what a workload will do, before simulating it."""

from __future__ import annotations

import itertools

import numpy as np
from rich.console import Console
from rich.table import Table

from ..workload import Kernel, Mix, warp_stream
from ..workload.opcodes import PIPELINE_CLASSES


def _fmt_bytes(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def _addresses(addrs: np.ndarray | None, mask: int) -> str:
    if addrs is None:
        return ""
    lanes = [i for i in range(32) if mask >> i & 1]
    if not lanes:
        return "(no active lanes)"
    shown = ", ".join(f"{int(addrs[i]):#x}" for i in lanes[:4])
    if len(lanes) > 1:
        deltas = np.diff(addrs[lanes])
        pattern = f"stride {int(deltas[0])} B" if np.all(deltas == deltas[0]) else "irregular"
        return f"{shown}{', ...' if len(lanes) > 4 else ''} ({pattern})"
    return shown


def mix_record(kernel: Kernel, mix: Mix) -> dict:
    """The show output as a record (for --json and tests)."""
    launch = kernel.launch
    return {
        "kernel": kernel.name,
        "source": kernel.source,
        "params": kernel.params,
        "launch": {"grid": list(launch.grid), "block": list(launch.block), "blocks": launch.nblocks,
                   "threads_per_block": launch.threads_per_block, "warps_per_block": launch.warps_per_block,
                   "registers_per_thread": launch.registers_per_thread,
                   "shared_memory_bytes": launch.shared_memory_bytes,
                   "dynamic_shared_memory_bytes": launch.dynamic_shared_memory_bytes},
        "total_warps": kernel.total_warps,
        "warp_instructions": mix.total_warp_insts,
        "thread_instructions": mix.total_thread_insts,
        "by_pipeline": {cls: {"warp_instructions": mix.warp_insts[cls], "thread_instructions": mix.thread_insts[cls]}
                        for cls in PIPELINE_CLASSES if mix.warp_insts[cls]},
        "by_opcode": dict(sorted(mix.opcodes.items(), key=lambda kv: -kv[1])),
        "bytes": {f"{space}_{kind}": n for (space, kind), n in sorted(mix.bytes.items())},
        "tensor_flops": mix.mma_flops,
    }


def print_show(kernel: Kernel, mix: Mix, first: int = 12) -> None:
    console = Console(width=130)
    launch = kernel.launch
    console.print(f"[bold]{kernel.name}[/bold]  ({kernel.source})")
    if kernel.description:
        console.print(kernel.description.splitlines()[0])
    if kernel.params:
        console.print("params: " + ", ".join(f"{k}={v}" for k, v in kernel.params.items()))
    console.print(f"launch: grid {launch.grid} x block {launch.block} = {launch.nblocks} blocks of "
                  f"{launch.threads_per_block} threads ({launch.warps_per_block} warps); "
                  f"{launch.registers_per_thread} registers/thread; shared memory {launch.shared_memory_bytes} B "
                  f"static + {launch.dynamic_shared_memory_bytes} B dynamic per block")
    console.print(f"total: {kernel.total_warps:,} warps, {mix.total_warp_insts:,} warp-instructions, "
                  f"{mix.total_thread_insts:,} thread-instructions"
                  + (f", {mix.mma_flops / 1e9:,.2f} GFLOP on tensor cores" if mix.mma_flops else ""))

    table = Table(title="instruction mix (counted from the program, not simulated)")
    for col in ("pipeline", "warp-instructions", "share", "avg active lanes"):
        table.add_column(col, justify="left" if col == "pipeline" else "right")
    total = max(1, mix.total_warp_insts)
    for cls in PIPELINE_CLASSES:
        n = mix.warp_insts[cls]
        if n:
            table.add_row(cls, f"{n:,}", f"{100 * n / total:.1f}%", f"{mix.thread_insts[cls] / n:.1f}")
    console.print(table)

    if mix.bytes:
        mem = Table(title="bytes moved (active lanes x width)")
        mem.add_column("space")
        mem.add_column("kind")
        mem.add_column("bytes", justify="right")
        for (space, kind), n in sorted(mix.bytes.items()):
            mem.add_row(space, kind, _fmt_bytes(n))
        console.print(mem)

    first_table = Table(title=f"first {first} instructions of block 0, warp 0")
    for col in ("pc", "opcode", "mask", "dst", "src", "addresses (first active lanes)"):
        first_table.add_column(col)
    for inst in itertools.islice(warp_stream(kernel, 0, 0), first):
        first_table.add_row(f"{inst.pc:#06x}", inst.op, f"{inst.mask:#010x}", ",".join(inst.dst),
                            ",".join(inst.src), _addresses(inst.addrs, inst.mask))
    console.print(first_table)
