"""`gpusim workload show`: what a workload will do, before simulating it."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from ..workload import Kernel, Mix, warp_stream
from ..trace import TraceStreams
from ..isa.opcodes import PIPELINE_CLASSES
from .text import plain


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


def trace_facts(kernel, streams) -> dict:
    """What a trace adds to the record: its origin, its size and the opcodes no table knows."""
    h = kernel.header
    return {"binary_version": h.binary_version, "tracer_version": h.tracer_version,
            "opcode_table": kernel.family or "all families", "file_bytes": Path(kernel.source).stat().st_size,
            "unknown_opcodes": dict(sorted(streams.unknown.items(), key=lambda kv: (-kv[1], kv[0])))}


def _first_stream(kernel):
    if isinstance(kernel, Kernel):
        return warp_stream(kernel, 0, 0)
    return TraceStreams(kernel)(0, 0)


def mix_record(kernel, mix: Mix, trace: dict | None = None) -> dict:
    """The show output as a record (for --json and tests); `trace`: trace_facts for a traced kernel."""
    launch = kernel.launch
    record = {
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
    if mix.estimated:
        record["estimated"] = mix.estimated  # the counts are extrapolated (counting stopped at its budget)
    if trace is not None:
        record["trace"] = trace
    return record


def print_show(kernel, mix: Mix, first: int = 12, trace: dict | None = None) -> None:
    console = Console(width=130)
    launch = kernel.launch
    console.print(f"[bold]{plain(kernel.name)}[/bold]  ({plain(kernel.source, 200)})")
    if kernel.description:
        console.print(plain(kernel.description.splitlines()[0], 200))
    if getattr(kernel, "bound", None):  # a trace states none
        console.print(plain("bound at its default size by: " + ", ".join(f"{u} on {a}" for a, u in kernel.bound.items()),
                            200))
    if kernel.params:
        console.print(plain("params: " + ", ".join(f"{k}={v}" for k, v in kernel.params.items()), 400))
    console.print(f"launch: grid {launch.grid} x block {launch.block} = {launch.nblocks} blocks of "
                  f"{launch.threads_per_block} threads ({launch.warps_per_block} warps); "
                  f"{launch.registers_per_thread} registers/thread; shared memory {launch.shared_memory_bytes} B "
                  f"static + {launch.dynamic_shared_memory_bytes} B dynamic per block")
    if trace is not None:
        console.print(f"trace: {_fmt_bytes(trace['file_bytes'])}, tracer v{trace['tracer_version']}, "
                      f"sm_{trace['binary_version']} binary, read with the {trace['opcode_table']} opcode table")
        if trace["unknown_opcodes"]:
            console.print("opcodes no table knows (counted as int32-pipe instructions): " + ", ".join(
                f"{plain(op, 40)} ({n:,})" for op, n in trace["unknown_opcodes"].items()))
    about = "about " if mix.estimated else ""
    console.print(f"total: {kernel.total_warps:,} warps, {about}{mix.total_warp_insts:,} warp-instructions, "
                  f"{about}{mix.total_thread_insts:,} thread-instructions"
                  + (f", {about}{mix.mma_flops / 1e9:,.2f} GFLOP on tensor cores" if mix.mma_flops else ""))
    if mix.estimated:
        console.print(f"(counts {mix.estimated})")

    counted = "the program" if isinstance(kernel, Kernel) else "the trace"
    table = Table(title=f"instruction mix (counted from {counted}, not simulated)")
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
    for inst in itertools.islice(_first_stream(kernel), first):
        first_table.add_row(f"{inst.pc:#06x}", plain(inst.op, 40), f"{inst.mask:#010x}", plain(",".join(inst.dst), 40),
                            plain(",".join(inst.src), 40), _addresses(inst.addrs, inst.mask))
    console.print(first_table)
