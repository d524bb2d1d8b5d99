"""Model details that are easy to get silently wrong: the mma.sync rate on Blackwell, opcodes an arch lacks,
SIMT modes counting the same instructions, launch dimensions that floor, and the README's Python examples."""

import pytest

from gpusim.api import run
from gpusim.workload import kernel_mix, load_workload

from .conftest import ROOT

MB = ROOT / "workloads/microbench"


def _kernel_file(tmp_path, program: str, block: int = 32, grid: int = 1, extra: str = "", name: str = "k.yaml"):
    path = tmp_path / name
    path.write_text(f"kernel: k\n{extra}launch: {{grid: [{grid}], block: [{block}], registers_per_thread: 32}}\n"
                    f"program:\n{program}")
    return path


# --- SIMT modes count the same instructions ---------------------------------------------------------------------

IF_ELSE = """  - {op: LDG.E, dst: v, addr: "x + gtid * 4"}
  - loop: 3
    body:
      - if: "lane % 3 == 0"
        then:
          - {op: FMUL, dst: v, src: [v]}
          - if: "lane < 8"
            then: [{op: FADD, dst: v, src: [v]}]
            else: [{op: FFMA, dst: v, src: [v]}]
        else:
          - {op: FADD, dst: w, src: [v]}
          - {exit: "lane == 31"}
      - if: "warp == 0"
        then: [{op: IADD3, dst: i}]
  - {op: STG.E, src: [v], addr: "x + gtid * 4"}
"""


@pytest.mark.parametrize("case", ["divergence", "if_else"])
def test_stack_and_its_issue_the_same_instructions(tmp_path, case):
    """Volta+ SASS has a BSSY before a branch that may diverge and a BSYNC where it reconverges, whichever way the
    warp is scheduled: `--simt stack` and `--simt its` issue the same warp- and thread-instructions, and both
    equal the mix counted from the program."""
    if case == "divergence":
        path, params = MB / "divergence.yaml", {"n": 1000, "iters": 2}
    else:
        path = _kernel_file(tmp_path, IF_ELSE, block=96, grid=2, extra="buffers: {x: {bytes: 4096}}\n")
        params = None
    stack = run(path, "h100", simt="stack", params=params).metrics
    its = run(path, "h100", simt="its", params=params).metrics
    for key in ("smsp__inst_executed.sum", "smsp__thread_inst_executed.sum", "sm__inst_executed_pipe_fma.sum"):
        assert stack[key] == its[key], key
    mix = kernel_mix(load_workload(path, params))
    assert stack["smsp__inst_executed.sum"] == mix.total_warp_insts
    assert stack["smsp__thread_inst_executed.sum"] == mix.total_thread_insts
    assert mix.opcodes["BSSY"] == mix.opcodes["BRA"] > 0
    assert 0 < mix.opcodes["BSYNC"] <= mix.opcodes["BSSY"]


def test_divergence_counts_by_hand():
    """divergence.yaml per warp and trip: LDG, BSSY, BRA, BSYNC at 32 lanes and FMUL + STG, FADD + STG at 16;
    with EXIT: 4 trips give 33 warp-instructions and 4 x 192 + 32 = 800 thread-instructions per warp."""
    mix = kernel_mix(load_workload(MB / "divergence.yaml", {"n": 8192, "iters": 4}))
    warps = 8192 // 32
    assert mix.total_warp_insts == 33 * warps
    assert mix.total_thread_insts == 800 * warps
