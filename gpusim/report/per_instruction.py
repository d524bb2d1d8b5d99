"""`gpusim run --per-inst`: the per-instruction view (Nsight Compute's Source page). The recorder
(gpusim.stats.per_instruction) watches the run; `attach` puts its rows in the record (`per_instruction`); the
table lists the instructions in program order with their stall cycles, top stall reasons and memory columns,
the heaviest rows highlighted and, for a long program, only the heaviest rows kept."""

from __future__ import annotations

from typing import Any, TextIO

import attrs
from rich.console import Console
from rich.table import Table

from ..stats.per_instruction import PerInstructionRecorder, superseded_runs
from .text import plain

MAX_ROWS = 40  # a longer program shows its heaviest rows (by warp-cycles), the rest counted as hidden
HIGHLIGHTED = 3  # the heaviest rows, in bold
TOP_REASONS = 2  # stall reasons named per row (besides `selected`, the issue cycles)


class PerInstructionView:
    """The CLI's view object (see gpusim.cli.run_command.run_views): `observer`, `attach(result)`, `report(result, stream)`.
    `table`: print the table (False when the record alone goes to standard output)."""

    def __init__(self, table: bool = True):
        self.observer = PerInstructionRecorder()
        self.table = table

    def attach(self, result: Any) -> Any:
        return attrs.evolve(result, per_instruction=self.observer.rows(skip=superseded_runs(result)))

    def report(self, result: Any, stream: TextIO) -> None:
        if self.table:
            counted = all(kernel.counted for kernel in self.observer.kernels)
            print_per_instruction(result, stream, counted)


def print_per_instruction(result: Any, stream: TextIO, counted: bool = True) -> None:
    """The table of `result.per_instruction` (a table per kernel of a command list); `counted`: the memory model
    kept counters (not --memory fixed)."""
    console = Console(file=stream, width=176)
    rows = result.per_instruction or []
    if not rows:
        console.print("per instruction: no instruction was observed")
        return
    kernels: dict[Any, list[dict]] = {}
    for row in rows:
        kernels.setdefault(row.get("kernel"), []).append(row)
    for index, kernel_rows in kernels.items():
        name = result.kernel if index is None else f"kernel {index}: {kernel_rows[0]['kernel_name']}"
        console.print(instruction_table(kernel_rows, f"per instruction: {plain(name)}{_observed(result)}"))
        for line in _notes(kernel_rows, counted):
            console.print(line)


def _observed(result: Any) -> str:
    seen = (result.sampling or {}).get("observed_run")
    if not seen:
        return ""
    return (f" (sampled: the observed reduced run, {seen['blocks']:,} blocks, {seen['cycles']:,} cycles; "
            f"the totals above are projected)")


def instruction_table(rows: list[dict], title: str) -> Table:
    """Executed instructions in program order; memory columns where any row has them; the heaviest rows bold;
    past MAX_ROWS, only the heaviest kept, a marker row where rows are left out."""
    ran = [r for r in rows if r["executions"] or r["stall_cycles"]]
    total = sum(r["stall_cycles"] for r in ran) or 1
    heaviest = sorted(range(len(ran)), key=lambda i: (-ran[i]["stall_cycles"], i))
    kept = set(heaviest[:MAX_ROWS])
    bold = set(heaviest[:HIGHLIGHTED])
    shared = any(r.get("memory", {}).get("l1tex__data_pipe_lsu_wavefronts_mem_shared.sum") for r in ran)
    global_ = any(_global_requests(r) for r in ran)
    banks = any(r.get("gpusim__register_bank_conflicts") for r in ran)
    table = Table(title=title)
    columns = ["pc", "line", "opcode", "executed", "threads", "warp-cycles", "share", "per exec", "top stalls"]
    if banks:
        columns += ["reg bank conflicts"]
    if shared:
        columns += ["smem wavefronts", "conflicts"]
    if global_:
        columns += ["sectors/req", "L1 hit", "L2 hit"]
    for col in columns:
        table.add_column(col, justify="left" if col in ("opcode", "top stalls") else "right")
    hidden = 0
    for i, row in enumerate(ran):
        if i not in kept:
            hidden += 1
            continue
        if hidden:
            table.add_row("...", "", f"{hidden} rows hidden", *[""] * (len(columns) - 3), style="dim")
            hidden = 0
        table.add_row(*_cells(row, total, shared, global_, banks), style="bold" if i in bold else None)
    if hidden:
        table.add_row("...", "", f"{hidden} rows hidden", *[""] * (len(columns) - 3), style="dim")
    return table


def _cells(row: dict, total: int, shared: bool, global_: bool, banks: bool = False) -> list[str]:
    executions = row["executions"]
    cells = [f"{row['pc']:#06x}", "-" if row["line"] is None else str(row["line"]), plain(row["opcode"], 24),
             f"{executions:,}", f"{row['thread_instructions'] / executions:.1f}" if executions else "-",
             f"{row['stall_cycles']:,}", f"{100 * row['stall_cycles'] / total:.1f}%",
             f"{row['stall_cycles'] / executions:.1f}" if executions else "-", _top_stalls(row)]
    if banks:  # extra operand-collector cycles (gpusim__register_bank_conflicts)
        conflicts = row.get("gpusim__register_bank_conflicts", 0)
        cells.append(f"{conflicts:,}" if conflicts else "")
    memory = row.get("memory")
    if shared:
        waves = memory.get("l1tex__data_pipe_lsu_wavefronts_mem_shared.sum") if memory else 0
        cells += [f"{waves:,}", f"{memory['l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum']:,}"] if waves \
            else ["", ""]
    if global_:
        if _global_requests(row):
            loads = memory["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"]
            l2 = memory["lts__t_sectors.sum"]
            cells += [f"{_sectors_per_request(memory):.1f}",
                      f"{memory['l1tex__t_sector_hit_rate.pct']:.0f}%" if loads else "-",
                      f"{memory['lts__t_sector_hit_rate.pct']:.0f}%" if l2 else "-"]
        else:
            cells += ["", "", ""]
    return cells


def _top_stalls(row: dict) -> str:
    """The row's largest stall reasons besides `selected` (those of at least 0.5% of its warp-cycles), with their
    share."""
    stalls = row["stalls"]
    cycles = row["stall_cycles"] or 1
    top = sorted((r for r in stalls if r != "selected" and 200 * stalls[r] >= cycles), key=lambda r: -stalls[r])
    return ", ".join(f"{r} {100 * stalls[r] / cycles:.0f}%" for r in top[:TOP_REASONS])


def _global_requests(row: dict) -> int:
    memory = row.get("memory") or {}
    return sum(memory.get(f"l1tex__t_requests_pipe_lsu_mem_global_op_{op}.sum", 0) for op in ("ld", "st", "atom"))


def _sectors_per_request(memory: dict) -> float:
    """Global sectors per request, loads, stores and atomics together."""
    requests = sectors = 0
    for op, sector_key in (("ld", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"),
                           ("st", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"),
                           ("atom", "gpusim__atomic_sectors")):
        requests += memory[f"l1tex__t_requests_pipe_lsu_mem_global_op_{op}.sum"]
        sectors += memory[sector_key]
    return sectors / requests if requests else 0.0


def _notes(rows: list[dict], counted: bool) -> list[str]:
    """What the table leaves out or cannot show."""
    notes = []
    idle = sum(1 for r in rows if not r["executions"] and not r["stall_cycles"])
    if idle:
        notes.append(f"{idle} instruction{'s' if idle > 1 else ''} never executed (not shown; in the record with "
                     f"zeros)")
    if not counted:
        notes.append("no memory columns: the memory model keeps no counters (--memory fixed)")
    notes.append("warp-cycles: the cycles warps waited to issue the instruction (its stalls, as Nsight attributes "
                 "them: drain at exit on the EXIT) and its issue cycles")
    notes.append("line -: no source line (a trace's instruction, or the program's implicit EXIT)")
    return notes


__all__ = ["PerInstructionView", "instruction_table", "print_per_instruction"]
