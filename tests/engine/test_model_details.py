"""Model details that are easy to get silently wrong: the mma.sync rate on Blackwell, opcodes an arch lacks,
SIMT modes counting the same instructions, launch dimensions that floor, and the README's Python examples."""

import doctest
import re

import pytest

import gpusim
from gpusim.api import run
from gpusim.errors import GpusimError
from gpusim.workload import kernel_mix, load_workload

from tests.conftest import ARCH_NAMES, ROOT, kernel_workloads, run_cli
from tests.trace.test_trace import write_trace

MB = ROOT / "workloads/microbench"


def _kernel_file(tmp_path, program: str, block: int = 32, grid: int = 1, extra: str = "", name: str = "k.yaml"):
    path = tmp_path / name
    path.write_text(f"kernel: k\n{extra}launch: {{grid: [{grid}], block: [{block}], registers_per_thread: 32}}\n"
                    f"program:\n{program}")
    return path


# --- mma.sync on Blackwell -------------------------------------------------------------------------------------

@pytest.mark.fast
@pytest.mark.parametrize("arch", ["b200", "b300"])
def test_blackwell_hmma_runs_at_the_warp_mma_rate_below_the_tcgen05_peak(arch):
    """mma.sync (HMMA.16816) on Blackwell runs at tensor.warp_mma_flops_per_clock per sub-partition: hmma_peak
    reaches 4 x that per SM, below the dense peak that only tcgen05 (UTCHMMA) reaches."""
    tensor = gpusim.load_arch(arch).pipelines.tensor
    assert tensor.warp_mma_flops_per_clock is not None
    m = run(MB / "hmma_peak.yaml", arch, sms=2, params={"blocks": 4, "iters": 16}).metrics
    per_sm = m["sm__inst_executed_pipe_tensor.sum"] * 4096 / (m["sm__cycles_active.avg"] * 2)
    assert per_sm == pytest.approx(4 * tensor.warp_mma_flops_per_clock, rel=0.03)
    assert per_sm < 0.5 * 4 * tensor.dense_fp16_flops_per_clock


@pytest.mark.fast
def test_hmma_peak_comment_states_the_warp_mma_rate():
    """The workload's header explains mma.sync with warp_mma_flops_per_clock (683 x 4 = 2732 on Hopper), not the
    dense 4096 per SM that needs warpgroup MMA."""
    header = "".join(line for line in (MB / "hmma_peak.yaml").read_text().splitlines(True) if line.startswith("#"))
    assert "warp_mma_flops_per_clock" in header and "683 x 4 = 2732" in header
    assert "4096 per SM" not in header


# --- opcodes an architecture lacks -----------------------------------------------------------------------------

WGMMA = '  - {op: HGMMA.64x128x16.F32, dst: "acc{rep % 2}", src: [a, b], repeat: 8}\n'
HMMA = '  - {op: HMMA.16816.F32, dst: c, src: [a, b, c], repeat: 4}\n'
TCGEN05 = "  - {op: UTCHMMA.128X128X16.F32, dst: d, src: [a, b]}\n"


def _opcode_warnings(result):
    return [w for w in result.warnings if "compute capability" in w]


@pytest.mark.fast
@pytest.mark.parametrize("arch", ["v100", "t4", "a100", "l40s", "b200", "b300"])
def test_warpgroup_mma_on_an_arch_without_it_is_refused(tmp_path, arch):
    """HGMMA (wgmma) exists on compute capability 9.x only: before Hopper and on Blackwell (tcgen05 instead) a
    YAML workload that uses it (an asynchronous instruction whose meaning the arch lacks) is refused in one line
    naming the opcode and the arch, not run."""
    with pytest.raises(gpusim.GpusimError) as info:
        run(_kernel_file(tmp_path, WGMMA + WGMMA, block=128), arch)
    message = str(info.value)
    assert "\n" not in message and "HGMMA.64X128X16.F32" in message and f"{arch} is " in message
    assert "9.x" in message


@pytest.mark.parametrize("arch, warns", [("v100", True), ("t4", True), ("a100", False), ("l40s", False),
                                         ("h100", False), ("b200", False)])
def test_hmma_16816_needs_sm_80(tmp_path, arch, warns):
    """mma.sync m16n8k16 (HMMA.16816) is an sm_80 shape: V100 has HMMA.884 and T4 HMMA.1688 only."""
    warnings = _opcode_warnings(run(_kernel_file(tmp_path, HMMA), arch))
    assert bool(warnings) == warns
    if warns:
        assert warnings == [f"HMMA.16816.F32 needs compute capability 8.0; {arch} is "
                            f"{gpusim.load_arch(arch).compute_capability}: it runs with the tensor pipe's timing "
                            f"anyway"]


@pytest.mark.fast
@pytest.mark.parametrize("arch", ARCH_NAMES)
def test_tcgen05_needs_blackwell(tmp_path, arch):
    """UTCHMMA (tcgen05) needs compute capability 10.0: a YAML workload that uses it is refused in one line below
    that (as one using wgmma is below 9.0), not run with a warning; on Blackwell it is the tensor-memory MMA, which
    needs the block to hold tensor memory (gpusim.engine.tensor_memory), also a one-line error without it."""
    path = _kernel_file(tmp_path, TCGEN05 + HMMA + TCGEN05, block=128)
    cc = float(gpusim.load_arch(arch).compute_capability)
    expected = "UTCHMMA.128X128X16.F32 exists on compute capability 10.0 to 11.x only" if cc < 10 else "tensor memory"
    with pytest.raises(GpusimError, match=expected) as error:
        run(path, arch)
    assert "\n" not in str(error.value)


def test_opcode_warning_is_printed_on_stderr(tmp_path):
    proc = run_cli("run", str(_kernel_file(tmp_path, HMMA, block=128)), "--arch", "v100")
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "HMMA" in line]
    assert len(lines) == 1 and lines[0].startswith("warning: ") and "v100 is 7.0" in lines[0]


def test_a_refused_workload_is_one_line_on_stderr(tmp_path):
    """The refusal of an asynchronous opcode the arch lacks reaches the command line as one error line, exit 1."""
    proc = run_cli("run", str(_kernel_file(tmp_path, WGMMA, block=128)), "--arch", "v100")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "HGMMA" in lines[0] and "v100 is 7.0" in lines[0]


def test_trace_opcodes_are_checked_against_the_arch(tmp_path):
    """A Hopper trace's HGMMA run on an A100: the binary-version warning, and one warning naming the opcode."""
    lines = ["0000 ffffffff 1 R5 HGMMA.64x128x16.F32 2 R2 R3 0 0", "0010 ffffffff 1 R6 HGMMA.64x128x16.F32 2 R2 R3 0 0",
             "0020 ffffffff 0 EXIT 0 0 0"]
    path = write_trace(tmp_path / "k.traceg", [lines] * 4, grid=2, version=90)
    result = run(path, "a100")
    assert len(result.warnings) == 2 and "binary version 90" in result.warnings[0]
    assert _opcode_warnings(result) == [result.warnings[1]] and "HGMMA.64X128X16.F32" in result.warnings[1]
    assert _opcode_warnings(run(path, "h100")) == []


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


@pytest.mark.fast
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


@pytest.mark.fast
def test_divergence_counts_by_hand():
    """divergence.yaml per warp and trip: LDG, BSSY, BRA, BSYNC at 32 lanes and FMUL + STG, FADD + STG at 16;
    with EXIT: 4 trips give 33 warp-instructions and 4 x 192 + 32 = 800 thread-instructions per warp."""
    mix = kernel_mix(load_workload(MB / "divergence.yaml", {"n": 8192, "iters": 4}))
    warps = 8192 // 32
    assert mix.total_warp_insts == 33 * warps
    assert mix.total_thread_insts == 800 * warps


# --- launch dimensions that floor -------------------------------------------------------------------------------

@pytest.mark.fast
def test_a_grid_that_floors_warns_with_field_expression_and_values():
    """gemm_tile128 with M=500: grid[1] = M / 128 = 3.90625 is floored to 3 blocks, which cover 384 of the 500
    rows; the run warns (it does not fail) and names the field, the expression and the values."""
    result = run(ROOT / "workloads/gemm_tile128_sync.yaml", "a100", sms=2, params={"M": 500, "N": 128, "K": 32})
    assert result.launch["grid"] == [1, 3, 1]
    floor = [w for w in result.warnings if "floored" in w]
    assert len(floor) == 1
    for part in ("launch.grid[1]", "M / 128", "3.90625", "M=500", "floored to 3 blocks", "384 of 500", "116 left over"):
        assert part in floor[0], part


def test_floored_grid_is_printed_by_the_cli():
    for command in (("workload", "show"), ("run",)):
        extra = ("--arch", "a100", "--sms", "2") if command == ("run",) else ()
        proc = run_cli(*command, "workloads/gemm_tile128_sync.yaml", *extra, "--set", "M=500", "--set", "N=128",
                       "--set", "K=32")
        assert proc.returncode == 0, proc.stderr
        assert any(line.startswith("warning: ") and "launch.grid[1]" in line for line in proc.stderr.splitlines())


@pytest.mark.fast
def test_round_up_idiom_explicit_floor_and_exact_division_do_not_warn(tmp_path):
    """(n + d - 1) / d rounds up on purpose, // asks for the floor, and 512 / 128 is exact: no warning. A block
    dimension that floors warns like a grid dimension."""
    text = ('kernel: k\nparams: {n: 1000, t: 128}\nlaunch: {grid: ["(n + t - 1) / t", "(n + 255) / 256", "n // 500"], '
            'block: [BLOCK], registers_per_thread: 32}\nprogram:\n  - {op: FFMA, dst: r}\n')
    path = tmp_path / "k.yaml"
    path.write_text(text.replace("BLOCK", '"512 / 128 * 8"'))
    kernel = load_workload(path)
    assert kernel.launch.grid == (8, 4, 2) and kernel.launch.block[0] == 32 and kernel.warnings == ()
    path.write_text(text.replace("BLOCK", '"n / 7"'))
    (warning,) = load_workload(path).warnings
    assert "launch.block[0] = n / 7" in warning and "floored to 142 threads" in warning


@pytest.mark.fast
@pytest.mark.parametrize("path", sorted(str(p.relative_to(ROOT)) for p in kernel_workloads()))
def test_shipped_workloads_do_not_floor_at_their_defaults(path):
    assert load_workload(ROOT / path).warnings == ()


# --- the README's Python examples -------------------------------------------------------------------------------

README_BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


@pytest.mark.fast
def test_readme_has_python_examples():
    assert len(README_BLOCKS) >= 2 and any("gpusim.run(" in block for block in README_BLOCKS)


@pytest.mark.parametrize("index", range(len(README_BLOCKS)))
def test_readme_python_example_runs(index, monkeypatch):
    """Every ```python block of README.md runs from the repository root: `>>>` blocks as doctests (their output
    must match), others as scripts."""
    monkeypatch.chdir(ROOT)
    block = README_BLOCKS[index]
    if ">>>" not in block:
        exec(compile(block, f"README.md python block {index}", "exec"), {})
        return
    test = doctest.DocTestParser().get_doctest(block, {}, f"README.md python block {index}", "README.md", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test, out=lambda text: pytest.fail(text))
    assert runner.failures == 0 and runner.tries > 0
