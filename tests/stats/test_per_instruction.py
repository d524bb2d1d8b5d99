"""The per-instruction view (`gpusim run --per-inst`): its rows add up to the run's totals, stalls go where
Nsight Compute puts them, the conflicting shared-memory line carries the conflicts, and the table and the
record say what they show."""

from __future__ import annotations

import json

import pytest

from gpusim.api import run
from gpusim.report.per_instruction import MAX_ROWS
from gpusim.stats.counters import REASONS
from gpusim.stats.per_instruction import PerInstructionRecorder, static_instructions
from gpusim.workload import load_workload

from tests.conftest import ROOT, run_cli
from tests.trace.test_trace import _chain, write_trace

SMEM = ROOT / "workloads/microbench/smem_stride.yaml"
MEMORY_TOTALS = (  # per-row memory field -> the run metric it sums to
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "lts__t_sectors.sum", "dram__bytes_read.sum", "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum")


def observed(workload, arch="h100", **options):
    recorder = PerInstructionRecorder()
    result = run(workload, arch, observer=recorder, **options)
    return result, recorder.rows()


def assert_rows_add_up(rows: list[dict], m: dict) -> None:
    """Executions, thread-instructions, each stall reason and each memory counter, summed over the rows, are
    the run's totals; the warp-cycles are the stall ratio times the issued instructions."""
    assert sum(r["executions"] for r in rows) == m["smsp__inst_executed.sum"] > 0
    assert sum(r["thread_instructions"] for r in rows) == m["smsp__thread_inst_executed.sum"]
    for reason in REASONS:
        assert sum(r["stalls"].get(reason, 0) for r in rows) == m[f"smsp__pcsamp_warps_issue_stalled_{reason}"], reason
    assert sum(r["stall_cycles"] for r in rows) == pytest.approx(
        m["smsp__average_warp_latency_per_inst_issued.ratio"] * m["smsp__inst_executed.sum"])
    for name in MEMORY_TOTALS:
        if name in m:
            assert sum(r.get("memory", {}).get(name, 0) for r in rows) == m[name], name


@pytest.mark.parametrize("workload, params, simt, memory", [
    ("microbench/smem_stride.yaml", dict(stride=2, iters=16), "stack", "hierarchy"),
    ("microbench/smem_stride.yaml", dict(stride=4, width=8, iters=8), "its", "hierarchy"),
    ("microbench/coalescing.yaml", dict(pattern=1, blocks=4, iters=2), "stack", "hierarchy"),
    ("microbench/divergence.yaml", dict(n=1000, iters=2), "its", "hierarchy"),
    ("reduction.yaml", dict(n=8192), "stack", "hierarchy"),
    ("microbench/divergence.yaml", dict(n=1000, iters=2), "stack", "fixed"),
])
def test_rows_add_up_to_the_run_totals(workload, params, simt, memory):
    """The sanity rule: every per-instruction column sums to the run's own total, whatever the program's shape
    (loops, ifs, exits, shared and global memory), the SIMT model or the memory model."""
    result, rows = observed(ROOT / "workloads" / workload, sms=2, params=params, simt=simt, memory=memory,
                            sample="off")
    assert_rows_add_up(rows, result.metrics)
    if memory == "fixed":  # no counters to read: no memory fields
        assert not any("memory" in r for r in rows)


def line_of(path, text: str) -> int:
    """The 1-based line of the first line of `path` that holds `text`."""
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_a_yaml_program_lists_every_instruction_in_program_order_by_pc_and_line():
    """Every instruction line of the program is a row (the never-executed ones with zeros), keyed by its pc and
    source line, in pc order, the implicit EXIT last with no line; an if adds its BSSY, BRA and BSYNC."""
    _, rows = observed(ROOT / "workloads/microbench/divergence.yaml", sms=1, params=dict(n=512, iters=1))
    assert [r["pc"] for r in rows] == sorted(r["pc"] for r in rows)
    assert [r["opcode"] for r in rows] == ["EXIT", "LDG.E", "BSSY", "BRA", "FMUL", "STG.E", "FADD", "STG.E",
                                           "BSYNC", "EXIT"]
    assert rows[-1]["line"] is None and all(isinstance(r["line"], int) for r in rows[:-1])
    load = line_of(ROOT / "workloads/microbench/divergence.yaml", "op: LDG.E")
    branch = load + 1  # the if right after the load: its BSSY, BRA and BSYNC
    assert rows[1]["line"] == load and rows[2]["line"] == rows[3]["line"] == rows[8]["line"] == branch
    _, rows = observed(SMEM, sms=1)  # width 4: the 8- and 16-byte loops never run
    assert [(r["opcode"], r["executions"]) for r in rows] == [
        ("LDS", 512), ("STS", 512), ("LDS.64", 0), ("STS.64", 0), ("LDS.128", 0), ("STS.128", 0), ("EXIT", 8)]


def test_the_conflicting_shared_memory_lines_carry_the_conflicts():
    """Stride 32 words: every 4-byte request takes 32 wavefronts, 31 of them conflicts; they sit on the LDS and
    STS lines, nothing else has shared traffic."""
    result, rows = observed(SMEM, sms=1, params=dict(stride=32, iters=8))
    by_line = {r["line"]: r for r in rows}
    lds, sts = line_of(SMEM, "{op: LDS,"), line_of(SMEM, "{op: STS,")
    for line, kind in ((lds, "ld"), (sts, "st")):
        row, memory = by_line[line], by_line[line]["memory"]
        assert row["executions"] == 64
        assert memory["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"] == 32 * 64
        assert memory["l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"] == 31 * 64
        assert memory[f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{kind}.sum"] == 31 * 64
    assert [r["line"] for r in rows if "memory" in r] == [lds, sts]
    assert_rows_add_up(rows, result.metrics)


def test_stalls_go_to_the_instruction_the_warp_waits_to_issue_and_drain_to_the_exit():
    """Nsight's attribution: the FADD that consumes a global load carries the long-scoreboard wait, not the
    LDG; every drain cycle is on the EXIT; each issue is one `selected` cycle."""
    result, rows = observed(ROOT / "workloads/microbench/coalescing.yaml", sms=1, params=dict(blocks=2, iters=2))
    load, add, exit_ = rows
    assert (load["opcode"], add["opcode"], exit_["opcode"]) == ("LDG.E", "FADD", "EXIT")
    assert add["stalls"]["long_scoreboard"] == result.metrics["smsp__pcsamp_warps_issue_stalled_long_scoreboard"]
    assert "long_scoreboard" not in load["stalls"]
    assert exit_["stalls"]["drain"] == result.metrics["smsp__pcsamp_warps_issue_stalled_drain"] > 0
    assert all(r["stalls"].get("selected", 0) == r["executions"] for r in rows)
    memory = load["memory"]
    assert memory["gpusim__sectors_per_request_global_ld"] == 4.0  # coalesced: 128 bytes, 4 sectors
    assert memory["l1tex__t_sector_hit_rate.pct"] == pytest.approx(
        100 * memory["l1tex__t_sector_hits_pipe_lsu_mem_global_op_ld.sum"]
        / memory["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"])


def test_a_repeat_is_one_row_and_a_run_time_repeat_keeps_its_copies(tmp_path):
    """`repeat: N` covers N pcs, summed in one row; a repeat count known only at run time (its copies run onto
    the pcs after it) still has each copy counted on its own line, not on the instruction it overlaps."""
    path = tmp_path / "k.yaml"
    path.write_text("kernel: k\nlaunch: {grid: [3], block: [32], registers_per_thread: 32}\nprogram:\n"
                    "  - {op: FFMA, dst: a, src: [a], repeat: 4}\n"
                    "  - {op: IMAD, dst: b, src: [b], repeat: \"block.x + 2\"}\n"
                    "  - {op: FADD, dst: c, src: [c]}\n")
    kernel = load_workload(path)
    assert [(s.opcode, s.slots, s.variable_repeat) for s in static_instructions(kernel)] == [
        ("FFMA", 4, False), ("IMAD", 1, True), ("FADD", 1, False), ("EXIT", 1, False)]
    result, rows = observed(path, sms=1)
    assert [(r["opcode"], r["line"], r["executions"]) for r in rows] == [
        ("FFMA", 4, 12), ("IMAD", 5, 2 + 3 + 4), ("FADD", 6, 3), ("EXIT", None, 3)]
    assert_rows_add_up(rows, result.metrics)


def test_a_trace_has_a_row_per_pc(tmp_path):
    """A trace's rows are its PCs that ran, with no source line; a command list's rows name their kernel."""
    path = write_trace(tmp_path / "kernel-1.traceg", [_chain(5), _chain(5)], grid=2)
    result, rows = observed(path, sms=1)
    assert [(r["pc"], r["line"], r["executions"]) for r in rows] == [(16 * i, None, 4) for i in range(6)]
    assert [r["opcode"] for r in rows] == ["FFMA"] * 5 + ["EXIT"]
    assert_rows_add_up(rows, result.metrics)
    write_trace(tmp_path / "kernel-2.traceg", [_chain(3)], name="second")
    (tmp_path / "kernelslist.g").write_text("kernel-1.traceg\nkernel-2.traceg\n")
    result, rows = observed(tmp_path / "kernelslist.g", sms=1)
    assert [(r["kernel"], r["kernel_name"]) for r in rows] == [(0, "synthetic")] * 6 + [(1, "second")] * 4
    assert_rows_add_up(rows, result.metrics)


def test_the_acceptance_command_gives_rows_in_the_record():
    """`gpusim run smem_stride.yaml --arch h100 --sms 1 --per-inst --json -`: standard output is the record
    alone, with per_instruction rows (pc, opcode, executions, stalls, line, thread_instructions); the same
    run twice gives the same rows."""
    args = ("run", str(SMEM), "--arch", "h100", "--sms", "1", "--per-inst", "--json", "-")
    first, second = run_cli(*args), run_cli(*args)
    assert first.returncode == 0, first.stderr
    record = json.loads(first.stdout)
    rows = record["per_instruction"]
    assert rows and all({"pc", "opcode", "executions", "stalls", "line", "thread_instructions"} <= set(r)
                        for r in rows)
    assert sum(r["executions"] for r in rows) == record["metrics"]["smsp__inst_executed.sum"]
    assert first.stdout == second.stdout
    assert "per_instruction" not in json.loads(run_cli(*args[:-3], "--json", "-").stdout)  # only when asked


def test_the_table_lists_the_rows_and_shortens_a_long_program(tmp_path):
    """The table shows each executed instruction with its line; past MAX_ROWS executed instructions it keeps
    the heaviest and says how many rows it hid; never-executed instructions are counted."""
    p = run_cli("run", str(SMEM), "--arch", "h100", "--sms", "1", "--per-inst", "--set", "stride=2")
    assert p.returncode == 0, p.stderr
    assert "per instruction: smem_stride" in p.stdout and "4 instructions never executed" in p.stdout
    lines = [line for line in p.stdout.splitlines() if "│ LDS " in line or "│ STS " in line]
    assert len(lines) == 2 and all("512" in line for line in lines)  # 512 conflicts each (2-way)
    path = tmp_path / "long.yaml"
    body = "".join(f"  - {{op: FFMA, dst: r{i % 7}, src: [r{(i + 1) % 7}]}}\n" for i in range(MAX_ROWS + 10))
    path.write_text(f"kernel: long\nlaunch: {{grid: [1], block: [64], registers_per_thread: 32}}\nprogram:\n{body}")
    p = run_cli("run", str(path), "--arch", "h100", "--sms", "1", "--per-inst")
    assert p.returncode == 0, p.stderr
    hidden = sum(int(line.split("│")[3].split()[0]) for line in p.stdout.splitlines() if "rows hidden" in line)
    assert hidden == MAX_ROWS + 11 - MAX_ROWS  # 50 FFMAs and the EXIT, 40 shown


def test_a_sampled_run_shows_its_observed_reduced_run_and_says_so():
    """With sampling the rows are the observed reduced run's (they add up to less than the projected total),
    and the table's title says so."""
    params = dict(M=512, N=256, K=1024)
    result, rows = observed(ROOT / "workloads/gemm_tile128_sync.yaml", params=params, sample="on")
    seen = result.sampling["observed_run"]
    assert seen["blocks"] >= 1 and 0 < sum(r["executions"] for r in rows) < result.metrics["smsp__inst_executed.sum"]
    p = run_cli("run", "workloads/gemm_tile128_sync.yaml", "--arch", "h100", "--per-inst", "--sample", "on", "--quiet",
                *(f"--set={k}={v}" for k, v in params.items()))
    assert p.returncode == 0, p.stderr
    assert "the observed reduced run" in p.stdout and "projected" in p.stdout


def test_per_inst_with_several_runs_is_refused():
    """One view shows one run: two archs with --per-inst is a one-line error."""
    p = run_cli("run", str(SMEM), "--arch", "h100,a100", "--sms", "1", "--per-inst")
    assert p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1 and "--per-inst" in p.stderr


def test_a_rejected_sample_is_left_out_for_the_full_run_that_replaced_it():
    """Under --sample auto a sample rejected as unsettled is followed by a full run, and the observer saw both:
    the rows are the full run's alone (the record names the rejected sample's observed run)."""
    from types import SimpleNamespace

    from gpusim.stats.per_instruction import superseded_runs

    rejected = {"method": "full", "rejected_sample": {"observed_run": {"blocks": 1, "trips": 2, "cycles": 9}}}
    assert superseded_runs(SimpleNamespace(kernels=[], sampling=rejected)) == {0}
    assert superseded_runs(SimpleNamespace(kernels=[], sampling={"method": "full"})) == set()
    listing = [{"sampling": {"method": "full"}}, {"sampling": rejected}, {}]  # a command list: runs 0, (1), 2, 3
    assert superseded_runs(SimpleNamespace(kernels=listing, sampling=None)) == {1}
    recorder = PerInstructionRecorder()
    run(SMEM, "h100", sms=1, params=dict(iters=4), observer=recorder)  # stands in for the rejected reduced run
    result = run(SMEM, "h100", sms=1, observer=recorder)
    rows = recorder.rows(skip=frozenset({0}))
    assert "kernel" not in rows[0] and rows == observed(SMEM, sms=1)[1]
    assert_rows_add_up(rows, result.metrics)
