"""Register-file banks and the operand collector (seed 2.3.4). Each test states its rule."""

from __future__ import annotations

from pathlib import Path

import pytest

import gpusim
from gpusim.analytic.register_banks import RegisterBanks
from gpusim.api import run
from gpusim.arch.spec import Pipelines, describe_fields
from gpusim.stats.per_instruction import PerInstructionRecorder

from tests.conftest import ARCH_NAMES

pytestmark = pytest.mark.fast  # every test here is quick (the -m fast tier)


# --- the rule, as a pure function ------------------------------------------------------------------------------

@pytest.mark.parametrize("sources, extra", [
    (["R2", "R4", "R6"], 1),        # three sources in bank 0: one extra cycle (Jia et al.'s FFMA conflict)
    (["R2", "R4", "R5"], 0),        # two in bank 0, one in bank 1: a 64-bit bank serves two a cycle
    (["R2", "R2", "R4"], 0),        # a register read twice is read once
    (["R1", "R3", "R5", "R7"], 1),  # four in bank 1: two cycles of two
    (["R1", "R3", "R5", "R7", "R9"], 2),
    (["R2", "R4", "RZ"], 0),        # the zero register is not in the file
    (["R2", "R4", "P0", "UR6", "PT"], 0),  # predicates and uniform registers are not in the banked file
    (["R2"], 0), ([], 0),
])
def test_extra_cycles_are_the_reads_one_bank_cannot_serve_in_one_cycle(sources, extra):
    """With 2 banks of two 32-bit registers a cycle (Volta to Hopper), Rn is in bank n % 2, and n distinct
    sources in one bank take ceil(n / 2) cycles to collect: the extra cycles are that minus one."""
    assert RegisterBanks(2, 2).extra_cycles(sources) == extra


@pytest.mark.parametrize("banks, reads, sources, extra", [
    (2, 1, ["R2", "R4"], 1),        # one register per bank a cycle: two in a bank conflict
    (4, 1, ["R0", "R4", "R8"], 2),  # 4 banks: R0, R4, R8 all in bank 0
    (4, 1, ["R0", "R1", "R2", "R3"], 0),
])
def test_the_bank_count_and_width_set_the_rule(banks, reads, sources, extra):
    assert RegisterBanks(banks, reads).extra_cycles(sources) == extra


def test_virtual_registers_are_placed_so_the_first_instruction_does_not_conflict():
    """Names that are not physical registers are placed by a bank-aware allocator: an instruction whose sources
    are all new never conflicts, and each keeps its bank, so a later instruction can still conflict."""
    banks = RegisterBanks(2, 1)
    assert banks.extra_cycles(["a", "b"]) == 0
    assert banks.bank_of["a"] != banks.bank_of["b"]
    assert banks.extra_cycles(["a", "c"]) == 0  # c goes to the bank a does not use: b's
    assert banks.bank_of["c"] == banks.bank_of["b"]
    assert banks.extra_cycles(["b", "c"]) == 1


def test_placement_is_reproducible():
    """The same instructions in the same order give the same banks, run after run."""
    names = [[f"v{i}", f"v{i + 1}", f"w{i % 3}"] for i in range(20)]
    first, second = RegisterBanks(2, 2), RegisterBanks(2, 2)
    assert [first.extra_cycles(n) for n in names] == [second.extra_cycles(n) for n in names]
    assert first.bank_of == second.bank_of


# --- the arch files ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("arch", ARCH_NAMES)
def test_every_arch_file_states_its_register_banks_with_a_source(arch):
    """Each arch file gives pipelines.register_banks and register_bank_width_bits with a source tag (Jia et al.
    on Volta and Turing, Huerta et al. on Ampere; later parts say what they assume)."""
    spec = gpusim.load_arch(arch)
    assert spec.pipelines.register_banks == 2 and spec.pipelines.register_reads_per_bank == 2
    text = (Path(gpusim.__file__).resolve().parents[1] / "arch" / f"{arch}.yaml").read_text()
    for line in text.splitlines():
        if line.strip().startswith(("register_banks:", "register_bank_width_bits:")):
            assert "# [" in line or "# R:" in line, line


def test_the_fields_are_described():
    names = {row[0] for row in describe_fields(Pipelines, with_range=True)}
    assert {"register_banks", "register_bank_width_bits"} <= names


# --- in the engine ------------------------------------------------------------------------------------------------

FFMAS = """kernel: banks
params: {third: 6}
launch: {grid: [1], block: [32], registers_per_thread: 32}
program:
  - {op: NOP}
  - {op: FFMA, dst: "R{20 + rep}", src: [R2, R4, "R{third}"], repeat: 16}
"""


def _kernel(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "k.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("arch", ["v100", "a100", "h100"])
def test_a_conflicting_instruction_waits_one_cycle_as_dispatch_stall(tmp_path, arch):
    """FFMA R20, R2, R4, R6 (three sources in bank 0) issued 16 times by one warp: each costs one extra cycle,
    counted in gpusim__register_bank_conflicts and, nothing else holding the warp, as dispatch_stall; with R5 in
    place of R6 there is no conflict and no such stall."""
    path = _kernel(tmp_path, FFMAS)
    conflicting = run(path, arch, sms=1).metrics
    clean = run(path, arch, sms=1, params={"third": 5}).metrics
    assert conflicting["gpusim__register_bank_conflicts"] == 16
    assert clean["gpusim__register_bank_conflicts"] == 0
    assert clean["smsp__pcsamp_warps_issue_stalled_dispatch_stall"] == 0
    assert 0 < conflicting["smsp__pcsamp_warps_issue_stalled_dispatch_stall"] <= 16
    assert conflicting["gpu_sim_cycle"] >= clean["gpu_sim_cycle"]


def test_conflicts_cost_issue_rate_when_the_pipe_keeps_up(tmp_path):
    """On H100 the FP32 pipe takes one FFMA a cycle, so one warp issuing independent FFMAs with three sources in
    one bank runs at half the rate it runs without the conflict: the extra cycles are the run's."""
    path = _kernel(tmp_path, FFMAS.replace("repeat: 16", "repeat: 64").replace("R{20 + rep}", "R{20 + rep % 8}"))
    conflicting = run(path, "h100", sms=1).metrics
    clean = run(path, "h100", sms=1, params={"third": 5}).metrics
    assert conflicting["gpusim__register_bank_conflicts"] == 64
    assert conflicting["gpu_sim_cycle"] - clean["gpu_sim_cycle"] >= 0.9 * 64


def test_the_per_instruction_view_shows_the_conflicts_where_they_are(tmp_path):
    """The per-instruction record carries gpusim__register_bank_conflicts on the instructions that had them, and
    they add up to the run's counter."""
    recorder = PerInstructionRecorder()
    result = run(_kernel(tmp_path, FFMAS), "a100", sms=1, observer=recorder)
    rows = recorder.rows()
    with_conflicts = [r for r in rows if r.get("gpusim__register_bank_conflicts")]
    assert [r["opcode"] for r in with_conflicts] == ["FFMA"]
    assert sum(r.get("gpusim__register_bank_conflicts", 0) for r in rows) == \
        result.metrics["gpusim__register_bank_conflicts"] == 16


def test_runs_with_conflicts_are_reproducible():
    """Same inputs, same conflicts and cycles (virtual registers are placed in issue order, not by hash seeds)."""
    path = Path(gpusim.__file__).resolve().parents[1] / "workloads" / "microbench" / "fma_peak.yaml"
    first = run(path, "h100", sms=1, params={"blocks": 2, "iters": 4}).to_dict()
    second = run(path, "h100", sms=1, params={"blocks": 2, "iters": 4}).to_dict()
    assert first == second
