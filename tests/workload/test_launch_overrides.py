"""Launch overrides (`gpusim run --threads/--grid/--regs/--smem/--dynamic-smem/--carveout`, and the same keywords
of gpusim.run): applied to the launch, shown in the record, carried into occupancy and the L1 size, and every
override that contradicts the workload refused in one line naming the flag."""

import json

import pytest

from gpusim import GpusimError, load_arch, occupancy
from gpusim.api import load_kernel, run
from gpusim.engine.gpu import build_gpu
from gpusim.workload.overrides import apply_launch_overrides, check_launch_overrides

from tests.conftest import ROOT, run_cli
from tests.trace.test_hostile_trace import VALID, write

GEMM = ROOT / "workloads" / "gemm_tile128_sync.yaml"
GEMM_SMALL = {"M": 512, "N": 512, "K": 256}
FMA = ROOT / "workloads" / "microbench" / "fma_peak.yaml"
VECADD = ROOT / "workloads" / "vecadd.yaml"
REDUCTION = ROOT / "workloads" / "reduction.yaml"


def _kernel(path, params=None, arch="h100", **overrides):
    spec = load_arch(arch)
    return apply_launch_overrides(load_kernel(path, params), spec, check_launch_overrides(**overrides))


def _gpu(kernel, arch="h100"):
    return build_gpu(load_arch(arch), kernel, sms=1, stream_factory=kernel.streams())


def test_regs_override_sets_occupancy_in_the_record():
    """The issue's example: 128 registers x 256 threads = 32768 per block -> 2 blocks, 16 of 64 warps."""
    result = run(GEMM, "h100", params=GEMM_SMALL, sms=2, regs=128)
    assert result.launch["registers_per_thread"] == 128
    assert result.metrics["sm__maximum_warps_per_active_cycle_pct"] == 25.0
    assert result.params["regs"] == 48  # the workload's parameter is left alone: the launch field is overridden


def test_cli_regs_example():
    proc = run_cli("run", str(GEMM), "--arch", "h100", "--set", "M=512", "--set", "N=512", "--set", "K=256",
                   "--sms", "2", "--regs", "128", "--quiet", "--json", "-")
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["launch"]["registers_per_thread"] == 128
    assert record["metrics"]["sm__maximum_warps_per_active_cycle_pct"] == 25.0


@pytest.mark.fast
def test_record_shows_every_override():
    result = run(FMA, "h100", params={"iters": 1}, sms=1, threads=(64, 2), grid=3, smem=1000, dynamic_smem=4096,
                 carveout=50, regs=40)
    assert result.launch == {"grid": [3, 1, 1], "block": [64, 2, 1], "blocks": 3, "threads_per_block": 128,
                             "registers_per_thread": 40, "shared_memory_bytes": 1000,
                             "dynamic_shared_memory_bytes": 4096, "carveout": 50}
    assert result.metrics["launch__grid_size"] == 3
    expected = occupancy("h100", 128, 40, 5096, carveout=50)
    assert result.metrics["sm__maximum_warps_per_active_cycle_pct"] == 100 * expected.occupancy


@pytest.mark.fast
def test_no_overrides_leave_the_kernel_and_record_as_they_were():
    kernel = load_kernel(GEMM, GEMM_SMALL)
    assert apply_launch_overrides(kernel, load_arch("h100"), check_launch_overrides()) is kernel
    assert kernel.launch.carveout is None


@pytest.mark.fast
def test_threads_change_the_warps_and_addresses():
    kernel = _kernel(FMA, threads=512)
    assert kernel.launch.block == (512, 1, 1) and kernel.launch.warps_per_block == 16
    assert kernel.address_ranges["shared"][1] == [0]
    kernel = _kernel(FMA, smem=2048, dynamic_smem=1024)
    assert kernel.address_ranges["shared"][1] == [3072]  # accesses are checked against the new size


# --- the carveout: resident blocks and the L1 the memory hierarchy gets ----------------------------------------

@pytest.mark.fast
def test_carveout_preference_limits_blocks_and_sets_l1():
    """gemm: 64 KB + 1 KB reserved per block. Automatic: 3 blocks in the 196 KB step, L1 = 256 - 196 KB.
    100%: 228 KB of shared memory, still 3 blocks, L1 28 KB. 50% (114 KB snaps up to 132 KB): 2 blocks.
    0%: the smallest step holding one block (100 KB): 1 block, L1 156 KB."""
    spec = load_arch("h100")
    unified = spec.shared_memory.unified_l1_bytes
    cases = {None: (3, unified - 196 * 1024), 100: (3, unified - 228 * 1024), 50: (2, unified - 132 * 1024),
             0: (1, unified - 100 * 1024)}
    for carveout, (blocks, l1) in cases.items():
        gpu = _gpu(_kernel(GEMM, GEMM_SMALL, carveout=carveout))
        assert (gpu.occupancy.blocks_per_sm, gpu.l1_bytes()) == (blocks, l1), carveout
        assert gpu.memory.l1_bytes == l1


def test_carveout_changes_the_simulation():
    auto = run(GEMM, "h100", params=GEMM_SMALL, sms=2)
    low = run(GEMM, "h100", params=GEMM_SMALL, sms=2, carveout=0)
    assert low.launch["carveout"] == 0 and auto.launch["carveout"] is None
    assert low.metrics["gpusim__blocks_per_sm"] == 1 and auto.metrics["gpusim__blocks_per_sm"] == 3
    assert low.metrics["sm__maximum_warps_per_active_cycle_pct"] == 12.5
    assert low.metrics["gpu_sim_cycle"] > auto.metrics["gpu_sim_cycle"]
    unified = load_arch("h100").shared_memory.unified_l1_bytes
    assert low.metrics["gpusim__l1_capacity_bytes"] == unified - 100 * 1024
    assert auto.metrics["gpusim__l1_capacity_bytes"] == unified - 196 * 1024


# --- contradictions: one line naming the flag -----------------------------------------------------------------

@pytest.mark.fast
@pytest.mark.parametrize("path, params, overrides, expected", [
    (GEMM, GEMM_SMALL, {"threads": 128}, "--threads 128: .*reads 'warp'.*expected 256 threads"),
    (GEMM, GEMM_SMALL, {"threads": 100}, "--threads 100: expected a multiple of 32"),
    (GEMM, GEMM_SMALL, {"threads": 2048}, r"--threads 2048: expected block.x from 1 to 1,024"),
    (GEMM, GEMM_SMALL, {"threads": (32, 32, 2)}, "--threads 32,32,2: expected at most 1024 threads per block"),
    (GEMM, GEMM_SMALL, {"threads": (1, 1, 65)}, "--threads 1,1,65: expected block.z from 1 to 64"),
    (GEMM, GEMM_SMALL, {"grid": (8, 8)}, "--grid 8,8: .*computes its grid from parameter 'M', which also sets "
                                         "buffer 'A': change it with --set M=... instead"),
    (GEMM, GEMM_SMALL, {"grid": (1, 65536)}, "--grid 1,65536: expected grid.y from 1 to 65,535"),
    (GEMM, GEMM_SMALL, {"smem": 32768}, "--smem 32768: expected at least 65536 bytes.*smem_a, smem_b"),
    (GEMM, GEMM_SMALL, {"dynamic_smem": 200 * 1024}, "--dynamic-smem 204800: static 65536 \\+ dynamic 204800 = "
                                                     "270336 bytes.*at most 232448 on h100"),
    (GEMM, GEMM_SMALL, {"regs": 0}, "--regs 0: expected registers per thread"),
    (GEMM, GEMM_SMALL, {"regs": 256}, "--regs 256: expected at most 255 registers per thread on h100"),
    (GEMM, GEMM_SMALL, {"carveout": 101}, "--carveout 101: expected a percentage, an integer from 0 to 100"),
    (GEMM, GEMM_SMALL, {"carveout": -1}, "--carveout -1: expected a percentage"),
    (FMA, None, {"threads": 1024, "regs": 255}, "--threads 1024 --regs 255: the launch cannot be resident on "
                                                "h100: the block needs"),
    (VECADD, None, {"threads": 512}, "--threads 512: .*vecadd.yaml computes its block from parameter 'threads', "
                                     "which also sets launch.grid: change it with --set threads=... instead"),
    (REDUCTION, None, {"threads": 128}, "--threads 128: .*parameter 'log2_threads', which also sets buffer"),
])
def test_contradicting_overrides_are_one_line(path, params, overrides, expected):
    with pytest.raises(GpusimError, match=expected) as info:
        run(path, "h100", params=params, sms=1, **overrides)
    message = str(info.value)
    assert "\n" not in message and len(message) < 400


@pytest.mark.fast
@pytest.mark.parametrize("overrides, expected", [
    ({"threads": True}, "--threads True: expected X"), ({"threads": 1.5}, "--threads 1.5: expected X"),
    ({"threads": (1, 2, 3, 4)}, "--threads 1,2,3,4: expected X"), ({"threads": ()}, "--threads"),
    ({"grid": "8"}, "--grid 8: expected X"), ({"grid": 0}, "--grid 0: expected grid.x from 1"),
    ({"regs": "32"}, "--regs '32'|--regs 32"), ({"regs": 2.0}, "--regs 2.0"), ({"smem": -1}, "--smem -1"),
    ({"dynamic_smem": None, "smem": True}, "--smem True"), ({"carveout": 50.0}, "--carveout 50.0"),
])
def test_api_types_checked_before_loading(overrides, expected):
    with pytest.raises(GpusimError, match=expected):
        run(ROOT / "no-such-file.yaml", "h100", **overrides)


@pytest.mark.fast
def test_accepted_shapes_and_sizes():
    assert _kernel(GEMM, GEMM_SMALL, threads=256).launch.block == (256, 1, 1)
    assert _kernel(GEMM, GEMM_SMALL, threads=(128, 2)).launch.block == (128, 2, 1)  # same 8 warps
    assert _kernel(GEMM, GEMM_SMALL, smem=65536).launch.shared_memory_bytes == 65536
    assert _kernel(GEMM, GEMM_SMALL, smem=100 * 1024).launch.smem_per_block == 100 * 1024
    assert _kernel(FMA, grid=(2, 3, 4)).launch.nblocks == 24  # `blocks` sets nothing but the grid


@pytest.mark.fast
def test_floored_launch_warning_goes_with_the_dimension_it_describes(tmp_path):
    path = tmp_path / "k.yaml"
    path.write_text("kernel: k\nparams: {n: 1000}\nbuffers:\n  x: {bytes: 4096}\nlaunch:\n  grid: [n / 256]\n"
                    "  block: [64]\n  registers_per_thread: 16\nprogram:\n  - {op: FADD, dst: a}\n")
    kernel = load_kernel(path)
    assert any("launch.grid[0]" in w for w in kernel.warnings)
    assert any("launch.grid[0]" in w for w in _kernel(path, threads=128).warnings)


@pytest.mark.fast
def test_address_error_during_the_run_names_the_overrides(tmp_path):
    """A literal grid the program reads through gtid: a larger grid runs past the buffer, found as it runs."""
    path = tmp_path / "k.yaml"
    path.write_text("kernel: k\nbuffers:\n  x: {bytes: 4 * 256 * 4}\nlaunch:\n  grid: [4]\n  block: [256]\n"
                    "  registers_per_thread: 16\nprogram:\n  - {op: LDG.E, dst: a, addr: \"x + gtid * 4\"}\n")
    assert run(path, "h100", sms=1, grid=4).metrics["launch__grid_size"] == 4
    with pytest.raises(GpusimError, match=r"^with --grid 8: .*k.yaml:\d+: .*outside") as info:
        run(path, "h100", sms=1, grid=8, sample="off")
    assert "\n" not in str(info.value)


@pytest.mark.fast
def test_dynamic_shared_memory_the_program_addresses(tmp_path):
    """Shared memory without a declared buffer (dynamic): a smaller --dynamic-smem is caught by the access check."""
    path = tmp_path / "k.yaml"
    path.write_text("kernel: k\nlaunch:\n  grid: [1]\n  block: [256]\n  registers_per_thread: 16\n"
                    "  dynamic_shared_memory_bytes: 1024\nprogram:\n  - {op: STS, src: [a], addr: \"tid * 4\"}\n")
    assert run(path, "h100", sms=1, dynamic_smem=2048).launch["dynamic_shared_memory_bytes"] == 2048
    with pytest.raises(GpusimError, match="^with --dynamic-smem 512: "):
        run(path, "h100", sms=1, dynamic_smem=512)


# --- traces ---------------------------------------------------------------------------------------------------

@pytest.mark.fast
@pytest.mark.parametrize("name", ["k.traceg", "kernelslist.g"])
@pytest.mark.parametrize("overrides, flag", [({"threads": 64}, "--threads 64"), ({"grid": 2}, "--grid 2"),
                                             ({"smem": 0}, "--smem 0"), ({"dynamic_smem": 0}, "--dynamic-smem 0")])
def test_trace_refuses_launch_shape_overrides(tmp_path, name, overrides, flag):
    trace = write(tmp_path / "k.traceg", VALID)
    path = trace if name == "k.traceg" else tmp_path / name
    if name == "kernelslist.g":
        path.write_text("k.traceg\n")
    with pytest.raises(GpusimError, match=f"^{flag}: .*k.traceg is a trace.*only --regs and --carveout apply"):
        run(path, "h100", sms=1, **overrides)


@pytest.mark.fast
def test_trace_takes_regs_and_carveout(tmp_path):
    trace = write(tmp_path / "k.traceg", VALID)
    (tmp_path / "kernelslist.g").write_text("k.traceg\n")
    for path in (trace, tmp_path / "kernelslist.g"):
        result = run(path, "h100", sms=1, regs=200, carveout=0)
        assert result.launch["registers_per_thread"] == 200 and result.launch["carveout"] == 0
        threads = result.launch["threads_per_block"]
        assert result.metrics["sm__maximum_warps_per_active_cycle_pct"] == \
            100 * occupancy("h100", threads, 200, result.launch["shared_memory_bytes"], 0).occupancy


# --- command line ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, expected", [
    (["--threads", "1,2,3,4"], "--threads: expected X[,Y[,Z]] (1 to 3 integers)"),
    (["--threads", "a"], "--threads: expected X[,Y[,Z]] (integers)"),
    (["--smem", "12Q"], "--smem"),
    (["--regs", "x"], "--regs"),
    (["--threads", "128"], "error: --threads 128: "),
    (["--smem", "32K"], "error: --smem 32768: expected at least 65536 bytes"),
    (["--carveout", "150"], "error: --carveout 150: expected a percentage"),
])
def test_cli_errors_are_one_line(args, expected):
    proc = run_cli("run", str(GEMM), "--arch", "h100", "--set", "M=512", "--quiet", *args)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    lines = [l for l in proc.stderr.strip().splitlines() if not l.startswith("note:")]
    assert len(lines) == 1 and expected in lines[0], proc.stderr
