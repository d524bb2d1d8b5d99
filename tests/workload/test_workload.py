"""Workload files: every shipped one loads and shows; bad files give one-line errors with file and line."""

import json
from pathlib import Path

import pytest

from gpusim.workload import WorkloadError, kernel_mix, load_workload

from tests.conftest import ROOT, kernel_workloads, run_cli

SHIPPED = sorted(str(p.relative_to(ROOT)) for p in kernel_workloads())
PROMISED = ["gemm_tile128", "gemm_tile128_sync", "gemm_multistage", "gemm_hopper_ws", "gemm_blackwell_umma",
            "gemm_blackwell_2sm",
            "flash_attention3", "vecadd", "reduction", "attention_naive", "flash_attention", "flash_attention_simple",
            "kv_decode",
            "kv_decode_naive", "gemv", "rmsnorm", "swiglu",
            "microbench/fma_chain", "microbench/fma_peak", "microbench/hmma_peak", "microbench/divergence",
            "microbench/smem_stride", "microbench/pointer_chase", "microbench/stream", "microbench/stream_fp64",
            "microbench/coalescing", "microbench/latency_hiding", "microbench/occupancy_sweep"]


@pytest.mark.fast
def test_every_promised_workload_ships():
    assert sorted(f"workloads/{w}.yaml" for w in PROMISED) == SHIPPED


@pytest.mark.parametrize("path", SHIPPED)
def test_shipped_workload_loads_with_a_header_comment(path):
    text = (ROOT / path).read_text()
    assert text.startswith("# ") and "What it shows" in text or "What to expect" in text or "shows" in text
    kernel = load_workload(ROOT / path)
    assert kernel.total_warps > 0 and kernel_mix(kernel).total_warp_insts > 0


@pytest.mark.parametrize("path", SHIPPED)
def test_workload_show_cli(path):
    proc = run_cli("workload", "show", path, "--json")
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["warp_instructions"] > 0 and record["launch"]["blocks"] > 0


def test_gemm_show_table_mix_and_size():
    proc = run_cli("workload", "show", "workloads/gemm_tile128_sync.yaml")
    assert proc.returncode == 0, proc.stderr
    assert "60,981,248 warp-instructions" in proc.stdout  # 8192 warps x 7444 (see test below)
    assert "137.44 GFLOP on tensor cores" in proc.stdout  # 2 * 4096^3
    assert "tensor" in proc.stdout and "LDG.E.128" in proc.stdout


@pytest.mark.fast
def test_gemm_counts_by_hand():
    """Per warp and K step: 4 LDG + 4 STS + 2 BAR + 2 x (6 LDS + 16 HMMA) + 3 int + 1 BRA = 58; 128 steps,
    plus 3 set-up, 16 STG and EXIT: 7444 warp-instructions per warp."""
    kernel = load_workload(ROOT / "workloads/gemm_tile128_sync.yaml")
    mix = kernel_mix(kernel)
    warps = 32 * 32 * 8
    assert mix.total_warp_insts == warps * (128 * 58 + 3 + 16 + 1)
    assert mix.warp_insts["tensor"] == warps * 128 * 32
    assert mix.mma_flops == 2 * 4096 ** 3
    assert mix.bytes[("global", "load")] == 2 * 4096 * 4096 * 2 * 32  # A and B re-read by each tile row/column
    assert mix.bytes[("global", "store")] == 4096 * 4096 * 4


@pytest.mark.fast
def test_overrides_change_the_launch():
    kernel = load_workload(ROOT / "workloads/gemm_tile128_sync.yaml", {"M": 2048, "N": 1024})
    assert kernel.launch.grid == (8, 16, 1) and kernel.params["M"] == 2048


@pytest.mark.fast
def test_seed_launch_numbers_for_gemm():
    launch = load_workload(ROOT / "workloads/gemm_tile128_sync.yaml").launch
    assert (launch.threads_per_block, launch.registers_per_thread, launch.smem_per_block) == (256, 48, 64 * 1024)


@pytest.mark.fast
def test_kv_decode_reads_exactly_the_seeds_kv_cache_formula():
    """KVCache = 2 x L x H_kv x D_head x Batch x SeqLen x dtype_bytes (seed 000), L = 1 per kernel."""
    params = {"batch": 2, "heads_q": 32, "heads_kv": 8, "d": 128, "seq": 4096}
    kv_bytes = 2 * 1 * 8 * 128 * 2 * 4096 * 2
    for name, blocks in (("kv_decode", 2 * 8 * 16), ("kv_decode_naive", 2 * 8)):  # 16 splits per KV head
        mix = kernel_mix(load_workload(ROOT / f"workloads/{name}.yaml", params))
        query_bytes = 4 * blocks * (32 // 8) * 128 * 2  # each of the 4 warps of a block loads its group's queries
        assert mix.bytes[("global", "load")] == kv_bytes + query_bytes, name


@pytest.mark.fast
def test_attention_naive_moves_s_and_p_through_global_memory_and_flash_does_not():
    small = {"seq": 256, "heads": 2}
    naive = kernel_mix(load_workload(ROOT / "workloads/attention_naive.yaml", small))
    flash = kernel_mix(load_workload(ROOT / "workloads/flash_attention.yaml", small))
    s_bytes = 2 * 256 * 256 * 2  # heads x seq x seq x FP16
    assert naive.bytes[("global", "store")] == 2 * s_bytes + 2 * 256 * 64 * 2  # S, P and O
    assert flash.bytes[("global", "store")] == 2 * 256 * 64 * 2  # O only
    assert naive.mma_flops == flash.mma_flops == 2 * 2 * (2 * 256 * 256 * 64)


# --- bad input -------------------------------------------------------------------------------------------

def _write(tmp_path: Path, text: str, name="bad.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


GOOD_HEAD = "kernel: k\nlaunch: {grid: [1], block: [32], registers_per_thread: 32}\nprogram:\n"


@pytest.mark.fast
@pytest.mark.parametrize("body, line, message", [
    ('  - {op: LDG.E, dst: r1, addr: "().__class__.__bases__[0]"}\n', 4, "not allowed"),
    ('  - {op: FFMA, dst: r1, src: [r1, "__import__(\'os\')"]}\n', 4, "is not a register name"),
    ("  - {op: FFMX, dst: r1}\n", 4, "unknown opcode 'FFMX'"),
    ("  - {op: LDG.E, dst: r1}\n", 4, "needs 'addr'"),
    ('  - {op: FFMA, dst: r1, addr: "lane"}\n', 4, "does not access memory"),
    ("  - {op: FFMA, dst: r1, repat: 3}\n", 4, "unknown key 'repat'"),
    ("  - {op: FFMA, dst: r1}\n  - loop: 2\n    body: []\n", 5, "empty body"),
    ('  - {op: FFMA, dst: r1}\n  - if: "lane < bogus"\n    then: [{op: FADD, dst: r2}]\n', 5, "unknown name 'bogus'"),
    ("  - {op: FFMA, dst: r1, repeat: 2.5}\n", 4, "whole number"),
    ("  - {op: FFMA, dst: r1, loop: 3}\n", 4, "exactly one of"),
    ("  - {op: FFMA, dst: r1\n", 5, "not valid YAML"),  # the parser notices at the end
])
def test_bad_program_is_one_line_error_with_file_and_line(short_tmp_path, body, line, message):
    path = _write(short_tmp_path, GOOD_HEAD + body)  # the message starts with the path, compared in full
    with pytest.raises(WorkloadError) as info:
        load_workload(path)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(f"{path}:{line}") and message in msg, msg


@pytest.mark.fast
@pytest.mark.parametrize("text, message", [
    ("kernel: k\nprogram: [{op: FFMA}]\n", "missing key 'launch'"),
    ("kernel: k\nlaunch: {grid: [0], block: [32], registers_per_thread: 8}\nprogram: [{op: FFMA}]\n",
     "launch grid: expected at least 1"),
    ("kernel: k\nlaunch: {grid: [1], block: [32], registers_per_thread: 8, colour: red}\nprogram: [{op: FFMA}]\n",
     "unknown key 'colour' in launch"),
    ("kernel: k\nparams: {n: abc}\nlaunch: {grid: [1], block: [32], registers_per_thread: 8}\nprogram: [{op: FFMA}]\n",
     "must be a number"),
    ("kernel: k\nbuffers: {x: {space: texture, bytes: 4}}\nlaunch: {grid: [1], block: [32], registers_per_thread: 8}\n"
     "program: [{op: FFMA}]\n", "space must be global or shared"),
    ("kernel: k\nlaunch: {grid: [1], block: [32], registers_per_thread: 8}\nprogram: []\n", "program is empty"),
    ("kernel: k\nlaunch: {grid: [1.5], block: [32], registers_per_thread: 8}\nprogram: [{op: FFMA}]\n",
     "whole number"),
    ("kernel: k\nlauch: {grid: [1]}\nprogram: [{op: FFMA}]\n", "unknown key 'lauch'"),
])
def test_bad_structure_is_one_line_error(tmp_path, text, message):
    path = _write(tmp_path, text)
    with pytest.raises(WorkloadError) as info:
        load_workload(path)
    assert str(info.value).startswith(str(path)) and message in str(info.value), str(info.value)


@pytest.mark.fast
def test_runtime_address_errors_name_file_and_line(tmp_path):
    from gpusim.workload import warp_stream

    path = _write(tmp_path, GOOD_HEAD + '  - {op: LDG.E.128, dst: r1, addr: "lane * 4"}\n')
    with pytest.raises(WorkloadError, match=rf"{path}:4: addr: 'lane \* 4': address 4 is not aligned"):
        list(warp_stream(load_workload(path), 0, 0))
    path = _write(tmp_path, GOOD_HEAD + '  - {op: LDG.E, dst: r1, addr: "lane * 4 - 64"}\n', "neg.yaml")
    with pytest.raises(WorkloadError, match="negative address"):
        list(warp_stream(load_workload(path), 0, 0))


@pytest.mark.fast
def test_unknown_override_lists_the_parameters():
    with pytest.raises(WorkloadError, match=r"--set Q: unknown parameter \(this workload has: BK, K, M, N, STAGES, regs\)"):
        load_workload(ROOT / "workloads/gemm_tile128_sync.yaml", {"Q": 1})


@pytest.mark.parametrize("args, expected", [
    (["workload", "show", "workloads/gemm_tile128_sync.yaml", "--set", "M"], "expected NAME=VALUE"),
    (["workload", "show", "workloads/gemm_tile128_sync.yaml", "--set", "M=abc"], "expected a number"),
    (["workload", "show", "workloads/nope.yaml"], "cannot read"),
])
def test_cli_bad_workload_input_is_one_line(args, expected):
    proc = run_cli(*args)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and expected in proc.stderr


def test_evil_workload_through_cli(tmp_path):
    path = _write(tmp_path, "kernel: evil\nlaunch: {grid: [1], block: [32], registers_per_thread: 32}\nprogram:\n"
                            '  - {op: LDG.E, dst: r1, addr: "().__class__.__bases__[0]"}\n', "evil.yaml")
    proc = run_cli("workload", "show", str(path))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and f"{path}:4" in proc.stderr


@pytest.mark.parametrize("pairs, message", [
    ("0", "launch grid: expected at least 1, got 0"),
    ("-1", "launch grid: expected at least 1, got -2"),
    ("1.5", "launch cluster: grid.y = 3 is not a multiple of cluster.y = 2"),
    ("x", "--set PAIRS=x: expected a number"),
])
def test_a_persistent_gemm_given_no_whole_number_of_pairs_is_a_one_line_error(pairs, message):
    proc = run_cli("run", "workloads/gemm_blackwell_2sm.yaml", "--arch", "b200", "--sms", "4", "--set", f"PAIRS={pairs}",
                   "--set", "M=512", "--set", "N=512", "--set", "K=512")
    err = proc.stderr.strip()
    assert proc.returncode != 0 and len(err.splitlines()) == 1 and message in err and "Traceback" not in err
    assert pairs == "x" or "workloads/gemm_blackwell_2sm.yaml:" in err
