"""Per-instruction statistics, as Nsight Compute's Source page shows them: for every static instruction of the
program, its executions (warp-instructions issued), thread-instructions, the warp-cycles spent in each stall
state while it was the instruction the warp waited to issue, and the memory traffic its accesses made.

A static instruction is known by its pc: a trace's PC, or the pc a YAML program gives each instruction (a
`repeat: N` instruction covers N consecutive pcs, one per unrolled copy; its row sums them, under its first pc
and its source line). Stalls follow Nsight's rule: a warp's stall cycles go to the instruction it waits to issue
(`warp.inst`); the cycles an exiting warp drains its stores and loads (`drain`) go to its last instruction, the
EXIT, as Nsight shows them. Each issue is one `selected` cycle. Memory traffic is the memory model's counters'
movement between `issued` and `accessed` (exactly that access's); the fixed-latency model has no counters, and
its rows carry none.

Summed over the rows, executions, thread-instructions, stall cycles and the memory counters give the run's
totals (smsp__inst_executed.sum, smsp__pcsamp_warps_issue_stalled_*, l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,
...), of the run the observer saw (a sampled run shows it one reduced run: the record's sampling.observed_run).
"""

from __future__ import annotations

from bisect import bisect_right
from operator import attrgetter
from typing import Any

import attrs

from ..workload.program import PC_STEP, Exit, If, Instr, Loop
from .counters import REASONS
from .observer import Observer

# (record field, the memory hierarchy's counter): what an access moves, summed per instruction
MEMORY_COUNTERS = (
    ("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "ld_requests"),
    ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "ld_sectors"),
    ("l1tex__t_sector_hits_pipe_lsu_mem_global_op_ld.sum", "ld_sector_hits"),
    ("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", "st_requests"),
    ("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "st_sectors"),
    ("l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum", "atom_requests"),
    ("gpusim__atomic_sectors", "atom_sectors"),
    ("lts__t_sectors.sum", "l2_sectors"),
    ("lts__t_sector_hits.sum", "l2_hits"),
    ("dram__bytes_read.sum", "dram_read"),
    ("l1tex__data_pipe_lsu_wavefronts_mem_shared.sum", "smem_wavefronts"),
    ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "smem_conflicts_ld"),
    ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "smem_conflicts_st"),
    ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_atom.sum", "smem_conflicts_atom"),
)
_READ_COUNTERS = attrgetter(*(attr for _, attr in MEMORY_COUNTERS))
_ORDER = {reason: i for i, reason in enumerate(REASONS)}


@attrs.frozen
class StaticInstruction:
    """One instruction of a YAML program: its first pc, the pcs it covers (a constant repeat covers one per
    copy), its source line (None: the implicit EXIT at the end) and whether its repeat count varies at run time
    (its copies past the first then take the pcs after it, which later instructions also use)."""
    pc: int
    slots: int
    line: int | None
    opcode: str
    variable_repeat: bool = False


def static_instructions(kernel: Any) -> list[StaticInstruction]:
    """A YAML kernel's instructions in program order (pc order): the statements, each `if`'s BSSY, BRA and
    BSYNC, each `exit`, and the implicit EXIT; [] for a trace (its PCs are what ran)."""
    program = getattr(kernel, "program", None)
    if program is None:
        return []
    out: list[StaticInstruction] = []
    _walk(program, out)
    out.append(StaticInstruction(kernel.exit_pc, 1, None, "EXIT"))
    out.sort(key=lambda s: s.pc)
    return out


def _walk(nodes, out: list) -> None:
    for node in nodes:
        kind = type(node)
        if kind is Instr:
            constant = node.repeat.constant
            slots = max(1, constant) if isinstance(constant, int) else 1
            out.append(StaticInstruction(node.pc, slots, node.line, node.info.opcode, constant is None))
        elif kind is Loop:
            _walk(node.body, out)
        elif kind is If:
            out.append(StaticInstruction(node.setup_pc, 1, node.line, "BSSY"))
            out.append(StaticInstruction(node.pc, 1, node.line, "BRA"))
            _walk(node.then, out)
            _walk(node.orelse, out)
            out.append(StaticInstruction(node.reconverge.pc, 1, node.line, "BSYNC"))
        elif kind is Exit:
            out.append(StaticInstruction(node.pc, 1, node.line, "EXIT"))


class _Tally:
    __slots__ = ("executions", "thread_instructions", "stalls", "memory", "space", "bank_conflicts")

    def __init__(self):
        self.executions = 0
        self.thread_instructions = 0
        self.bank_conflicts = 0  # extra register-file read cycles its executions cost (gpusim.analytic.register_banks)
        self.stalls: dict[str, int] = {}
        self.memory: list[int] | None = None  # the memory counters its accesses moved, as MEMORY_COUNTERS
        self.space: str | None = None  # the memory space it accesses


class _Kernel:
    """What one kernel's run told the recorder (a command list runs several, each on its own GPU)."""

    def __init__(self, gpu: Any):
        self.name = gpu.kernel.name
        self.static = static_instructions(gpu.kernel)
        self.memory = gpu.memory
        self.counted = all(hasattr(gpu.memory, attr) for _, attr in MEMORY_COUNTERS)  # not the fixed model
        self.tallies: dict[tuple[int, str], _Tally] = {}


class PerInstructionRecorder(Observer):
    """Tallies a run by static instruction, keyed by (pc, opcode); `rows()` makes the records."""

    def __init__(self):
        self.kernels: list[_Kernel] = []
        self._gpu: Any = None
        self._tallies: dict[tuple[int, str], _Tally] = {}
        self._last: dict[int, tuple[int, str]] = {}  # warp id -> its last issued instruction (drain goes there)
        self._memory: Any = None  # the memory model whose counters move, None when it has none
        self._before: tuple | None = None

    def block_started(self, sm: Any, block: int, now: int) -> None:
        gpu = sm.gpu
        if gpu is not self._gpu:
            self._gpu = gpu
            kernel = _Kernel(gpu)
            self.kernels.append(kernel)
            self._tallies, self._last = kernel.tallies, {}
            self._memory = kernel.memory if kernel.counted else None

    def _new(self, key: tuple[int, str]) -> _Tally:
        tally = self._tallies[key] = _Tally()
        return tally

    def issued(self, sm: Any, sp: Any, warp: Any, inst: Any, now: int) -> None:
        info = inst.info
        key = (inst.pc, info.opcode)
        tally = self._tallies.get(key) or self._new(key)
        tally.executions += 1
        tally.thread_instructions += inst.mask.bit_count()
        if inst.bank_conflicts > 0:
            tally.bank_conflicts += inst.bank_conflicts
        self._last[warp.gid] = key
        if info.space is not None and self._memory is not None:
            self._before = _READ_COUNTERS(self._memory)

    def accessed(self, sm: Any, sp: Any, warp: Any, inst: Any, start: int, ready_at: int) -> None:
        before = self._before
        if before is None:
            return
        self._before = None
        after = _READ_COUNTERS(self._memory)
        tally = self._tallies[(inst.pc, inst.info.opcode)]
        moved = tally.memory
        if moved is None:
            tally.memory = [a - b for a, b in zip(after, before)]
            tally.space = inst.info.space
        else:
            for i, (a, b) in enumerate(zip(after, before)):
                moved[i] += a - b

    def state(self, sp: Any, warp: Any, reason: str, start: int, end: int) -> None:
        inst = warp.inst
        key = (inst.pc, inst.info.opcode) if inst is not None else self._last.get(warp.gid, _NOWHERE)
        stalls = (self._tallies.get(key) or self._new(key)).stalls
        stalls[reason] = stalls.get(reason, 0) + end - start

    def rows(self, skip: frozenset[int] = frozenset()) -> list[dict]:
        """One record per static instruction, in program order (a command list's kernels one after another,
        each row naming its kernel). `skip`: the runs seen (in order) to leave out (see superseded_runs)."""
        kept = [kernel for index, kernel in enumerate(self.kernels) if index not in skip]
        out = []
        for index, kernel in enumerate(kept):
            for row in kernel_rows(kernel.static, kernel.tallies, kernel.counted):
                out.append({"kernel": index, "kernel_name": kernel.name, **row} if len(kept) > 1 else row)
        return out


def superseded_runs(result: Any) -> frozenset[int]:
    """The runs an observer saw (in order) that a result does not stand for: under `--sample auto` a sample
    rejected as unsettled is followed by a full run of the kernel (the record's sampling.rejected_sample), and
    the observer saw both, the rejected one's reduced run first."""
    records = result.kernels or [{"sampling": result.sampling}]
    skip, seen = set(), 0
    for record in records:
        rejected = (record.get("sampling") or {}).get("rejected_sample") or {}
        if "observed_run" in rejected:
            skip.add(seen)
            seen += 1
        seen += 1
    return frozenset(skip)


_NOWHERE = (-1, "(drain before any issue)")  # a warp that drains without having issued: never seen, kept honest


def kernel_rows(static: list[StaticInstruction], tallies: dict[tuple[int, str], _Tally], counted: bool) -> list[dict]:
    """The records of one kernel: a YAML program's every instruction (those that never ran with zeros), or a
    trace's every PC that ran, each with its tallies summed."""
    merged: dict[tuple[int, str], tuple[int | None, list[_Tally]]] = {}
    for s in static:
        merged[(s.pc, s.opcode)] = (s.line, [])
    starts = [s.pc for s in static]
    for key, tally in tallies.items():
        home = _home(static, starts, key)
        if home is None:
            merged.setdefault(key, (None, []))[1].append(tally)
        else:
            merged[(home.pc, home.opcode)][1].append(tally)
    return [_row(pc, opcode, line, parts, counted) for (pc, opcode), (line, parts) in sorted(merged.items())]


def _home(static: list[StaticInstruction], starts: list[int], key: tuple[int, str]) -> StaticInstruction | None:
    """The static instruction an issued (pc, opcode) belongs to: the one covering the pc with that opcode, else
    the nearest instruction before it with that opcode and a repeat count that varies (whose copies run past
    its own pc); None for a trace."""
    pc, opcode = key
    at = bisect_right(starts, pc) - 1  # (every static instruction has pcs of its own)
    if at >= 0 and pc < starts[at] + static[at].slots * PC_STEP and static[at].opcode == opcode:
        return static[at]
    for s in reversed(static[:at + 1]):
        if s.variable_repeat and s.opcode == opcode:
            return s
    return None


def _row(pc: int, opcode: str, line: int | None, parts: list[_Tally], counted: bool) -> dict:
    stalls: dict[str, int] = {}
    executions = sum(t.executions for t in parts)
    if executions:
        stalls["selected"] = executions  # the issue cycles themselves
    for t in parts:
        for reason, cycles in t.stalls.items():
            stalls[reason] = stalls.get(reason, 0) + cycles
    row = {"pc": pc, "line": line, "opcode": opcode, "executions": executions,
           "thread_instructions": sum(t.thread_instructions for t in parts),
           "stall_cycles": sum(stalls.values()),
           "stalls": {r: stalls[r] for r in sorted(stalls, key=lambda r: _ORDER.get(r, len(_ORDER))) if stalls[r]}}
    conflicts = sum(t.bank_conflicts for t in parts)
    if conflicts:
        row["gpusim__register_bank_conflicts"] = conflicts
    moved = [t for t in parts if t.memory is not None]
    if counted and moved and moved[0].space in ("shared", "global", "local"):
        row["memory"] = memory_record([sum(column) for column in zip(*(t.memory for t in moved))], moved[0].space)
    return row


_SHARED_FIELDS = ("l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
                  "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
                  "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                  "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
                  "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_atom.sum")


def memory_record(totals: list[int], space: str) -> dict:
    """An instruction's memory counters by their Nsight names (those of its space: shared memory's wavefronts and
    bank conflicts, or global and local memory's requests, sectors, hits and DRAM bytes), with its rates:
    sectors per load request and the L1 and L2 sector hit rates."""
    m = {name: value for (name, _), value in zip(MEMORY_COUNTERS, totals)}
    loads = m["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"]
    sectors = m["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"]
    m["l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"] = (
        m["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"]
        + m["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"]
        + m["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_atom.sum"])
    m["gpusim__sectors_per_request_global_ld"] = sectors / loads if loads else 0.0
    m["l1tex__t_sector_hit_rate.pct"] = 100.0 * m["l1tex__t_sector_hits_pipe_lsu_mem_global_op_ld.sum"] / sectors \
        if sectors else 0.0
    l2 = m["lts__t_sectors.sum"]
    m["lts__t_sector_hit_rate.pct"] = 100.0 * m["lts__t_sector_hits.sum"] / l2 if l2 else 0.0
    if space == "shared":
        return {name: m[name] for name in _SHARED_FIELDS}
    return {name: value for name, value in m.items() if name not in _SHARED_FIELDS}


__all__ = ["MEMORY_COUNTERS", "PerInstructionRecorder", "StaticInstruction", "kernel_rows", "memory_record",
           "static_instructions", "superseded_runs"]
