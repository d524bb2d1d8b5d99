"""gpusim calibrate: an arch file from microbenchmark results (no GPU needed with --from), its provenance comments,
and the engine on it reproducing what was measured (validation/compare.py's rows).

Fixtures: validation/results/h200-2026-11-29.json (measured on an H200) and tests/calibration/madeup-results.json, a
made-up 16-SM part with other latencies, bandwidths and tensor rates than any shipped arch, in microbench.cu's
format with every later measurement (shared-memory latency, atomics, per-SM and chip bandwidths, tensor rates per
precision, SFU, block launch, TLB, constant cache)."""

import json
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import gpusim
from gpusim.arch.provenance import assumed_fields, field_notes, misread_markers
from gpusim.calibrate import Calibration, Results, calibrate, dry_run
from gpusim.calibrate import device
from gpusim.calibrate.run import ADDITIVE, PROPORTIONAL, load_compare
from gpusim.errors import GpusimError
from tests.conftest import bare_env

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "validation/results/h200-2026-11-29.json"
MADEUP = ROOT / "tests/calibration/madeup-results.json"


def _cli(*args, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "gpusim", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=timeout)


@pytest.fixture(scope="module")
def h200_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("cal") / "h200cal.yaml"
    calibrate(out, "h100", H200, check=False)
    return out


@pytest.fixture(scope="module")
def madeup(tmp_path_factory):
    """The made-up part calibrated from h100 with the engine check (every compare.py row simulated on the file)."""
    out = tmp_path_factory.mktemp("cal") / "madeup.yaml"
    return calibrate(out, "h100", MADEUP, check=True, jobs=2, log=lambda _text: None)


# --- from the H200's results: arch/h200.yaml's measured fields ------------------------------------------------

def test_h200_results_reproduce_the_measured_fields_of_arch_h200(h200_file):
    cal, ref = gpusim.load_arch(h200_file), gpusim.load_arch("h200")
    assert cal.full_name == "NVIDIA H200" and cal.compute_capability == ref.compute_capability
    assert cal.sms == ref.sms and cal.clocks.core_mhz == ref.clocks.core_mhz
    assert cal.memory.l2.size_bytes == ref.memory.l2.size_bytes
    assert cal.sm == ref.sm
    assert cal.shared_memory == ref.shared_memory
    assert cal.pipelines.fp32 == ref.pipelines.fp32
    assert cal.pipelines.tensor.latency == ref.pipelines.tensor.latency
    assert cal.pipelines.tensor.warp_mma_rate == ref.pipelines.tensor.warp_mma_rate
    assert cal.memory.l1.hit_latency == ref.memory.l1.hit_latency
    assert cal.memory.l2.hit_latency == ref.memory.l2.hit_latency
    assert cal.memory.dram.latency == pytest.approx(ref.memory.dram.latency, abs=5)  # h200.yaml: one run, here both
    assert cal.memory.dram.bandwidth_gbs == ref.memory.dram.bandwidth_gbs
    assert cal.memory.dram.read_efficiency == pytest.approx(ref.memory.dram.read_efficiency, rel=0.01)
    assert cal.memory.dram.write_efficiency == pytest.approx(ref.memory.dram.write_efficiency, rel=0.01)


def test_every_value_says_where_it_comes_from(h200_file):
    """Measured values name the device, driver, date and microbenchmark; the rest are derived (D:) or carried over
    from h100 and marked assumed (R), with h100's source; no stray R the provenance reader would misread."""
    notes = field_notes(h200_file)
    assert notes and misread_markers(h200_file) == []
    measured = [(f, c) for f, c, _a in notes if "[CAL]" in c]
    assert len(measured) >= 20
    for field, comment in measured:
        assert "NVIDIA H200" in comment and "580.159.04" in comment and "2026-11-29" in comment, field
        assert "microbench.cu" in comment or "nvidia-smi" in comment, field
    for field, comment, assumed in notes:
        assert "[CAL]" in comment or comment.startswith("D:") or assumed or field == "name", (field, comment)
    assumed = assumed_fields(h200_file)
    assert "pipelines.int32.latency" in assumed and "memory.l2.slices" in assumed
    assert "memory.l1.hit_latency" not in assumed and "structure.enabled_sms" not in assumed
    text = h200_file.read_text()
    assert "# [CAL]" in text and "h100.yaml" in text.split("name:")[0]


def test_the_calibrated_file_loads_and_simulates(h200_file):
    result = gpusim.run(ROOT / "workloads/vecadd.yaml", str(h200_file), params={"n": 8192})
    assert result.metrics["gpu_sim_cycle"] > 0
    proc = _cli("run", "workloads/vecadd.yaml", "--arch", str(h200_file), "--set", "n=8192", "--quiet")
    assert proc.returncode == 0, proc.stderr


def test_same_product_base_keeps_its_sources(tmp_path):
    """Calibrated on h200 itself, the values not measured keep h200.yaml's sources instead of an R."""
    out = tmp_path / "h200self.yaml"
    calibrate(out, None, H200, check=False)  # default base: the shipped arch of the same model
    assumed = set(assumed_fields(out))
    assert "memory.l2.slices" in assumed  # assumed in h200.yaml too
    assert "pipelines.int32.latency" not in assumed  # [AS] there, the same product here
    assert set(assumed) <= set(assumed_fields(ROOT / "arch/h200.yaml")) | {"memory.dram.bandwidth_gbs"}


def test_the_sustained_tensor_clock_is_the_one_held_on_random_operands_where_measured(tmp_path):
    """A results file with microbench's sustained-clock row: clocks.sustained_tensor_mhz is the clock held after
    seconds of wgmma on random operands (a GEMM's data), not the zero-operand one or the short runs' clocks."""
    doc = json.loads(H200.read_text())
    for run in doc["runs"]:
        run["sm_clock_mhz_sustained_wgmma_fp16"] = {"zero_operands": 1755.0, "random_operands": 1605.0,
                                                    "warm_seconds": 3.0}
    results = tmp_path / "h200-sustained.json"
    results.write_text(json.dumps(doc))
    out = tmp_path / "cal.yaml"
    calibrate(out, "h100", results, check=False)
    assert gpusim.load_arch(out).clocks.sustained_tensor_mhz == 1605
    note = out.read_text().split("sustained_tensor_mhz", 1)[1][:500]
    assert "random operands" in note and "zero operands 1755 MHz" in note


@pytest.mark.parametrize("entry, shown", [({"random_operands": "fast", "zero_operands": 1755.0}, "'fast'"),
                                          ({"random_operands": -5, "zero_operands": 1755.0}, "-5"),
                                          ({"zero_operands": 1755.0}, "None"), (1605, "None")])
def test_a_malformed_sustained_clock_row_is_the_results_files_one_line_error(tmp_path, capsys, entry, shown):
    doc = json.loads(H200.read_text())
    doc["runs"][0]["sm_clock_mhz_sustained_wgmma_fp16"] = entry
    results = tmp_path / "bad.json"
    results.write_text(json.dumps(doc))
    proc = _cli("calibrate", "--from", str(results), "--base", "h100", "-o", str(tmp_path / "out.yaml"))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    line = proc.stderr.strip()
    # (the file's name as the error shows it: quoted, and shortened in the middle, where the path is long)
    assert len(line.splitlines()) == 1 and "bad.json" in line
    assert "runs[0].sm_clock_mhz_sustained_wgmma_fp16.random_operands: expected a clock in MHz (a positive number), " \
        f"got {shown}" in line


# --- the made-up part: the engine reproduces what calibrate set --------------------------------------------------

def test_madeup_part_calibrated_fields(madeup):
    spec = gpusim.load_arch(madeup.path)
    assert spec.full_name == "Made-up GPU M16" and spec.sms == 16 and spec.clocks.core_mhz == 1500
    assert spec.clocks.tensor_mhz == 1400 and spec.pipelines.tensor.dense_fp16_flops_per_clock == 750
    rates = spec.pipelines.tensor.rates
    assert rates.fp16.dense == 3000 and rates.fp8.dense == 6000 and rates.tf32.dense == 1500
    assert spec.pipelines.tensor.warp_mma_flops_per_clock == 512  # one m16n8k16 per 8 clocks
    assert spec.pipelines.fp32.lanes == 16 and spec.pipelines.sfu.lanes == 4 and spec.pipelines.sfu.latency == 18
    assert spec.memory.l1.hit_latency == pytest.approx(33, abs=2)
    assert spec.memory.l2.hit_latency == pytest.approx(341, abs=8)  # moved by the engine's own cycles
    assert spec.memory.dram.latency == pytest.approx(812, abs=15)
    assert spec.memory.l1.shared_latency == pytest.approx(25, abs=2)
    assert spec.memory.l2.size_bytes == 4 << 20 and spec.memory.l2.sm_bytes_per_clock == 48
    assert spec.memory.l2.bandwidth_bytes_per_clock == pytest.approx(600, rel=0.02)
    assert spec.memory.l2.atomic_cycles_per_address_update == 2
    assert spec.memory.dram.bandwidth_gbs == pytest.approx(819.2)  # 2 x 1600 MHz x 2048 bits / 8
    # a block's turn on an SM, 898 cycles: the assumed launch kept, the retirement the rest
    assert spec.frontend.block_launch_cycles == 100
    assert spec.frontend.block_launch_cycles + spec.frontend.block_retire_cycles == pytest.approx(898, abs=5)


CALIBRATED_ROWS = {"ffma_latency", "hmma_latency", "hmma_throughput", "chase_l1", "chase_l2", "chase_dram",
                   "stream_read", "stream_copy", "smem_latency", "atomic_same_address", "smem_bandwidth",
                   "l2_bandwidth", "l2_bandwidth_sm", "sfu_latency", "sfu_throughput", "block_launch",
                   *(f"mma_sync_{p}" for p in ("bf16", "tf32", "int8", "fp8")),
                   *(f"wgmma_{p}" for p in ("fp16", "bf16", "tf32", "fp8", "int8"))}


def test_madeup_part_engine_rows_reproduce_the_measurements_within_5_percent(madeup):
    rows = {r.key: r for r in madeup.rows}
    assert CALIBRATED_ROWS <= set(rows)
    off = {k: f"{rows[k].simulated:.2f} vs {rows[k].measured:.2f}" for k in CALIBRATED_ROWS
           if abs(rows[k].ratio - 1) > 0.05}
    assert not off
    assert madeup.mean_error <= 5
    assert set(ADDITIVE) | set(PROPORTIONAL) <= set(rows)


def test_compare_py_prints_the_new_rows_and_leaves_the_unmodelled_out_of_the_mean(madeup, monkeypatch, capsys):
    """validation/compare.py's table on the made-up part's rows (the check simulated them on the calibrated file)."""
    compare = load_compare()
    monkeypatch.setattr(compare, "comparison_rows", lambda results, arch, jobs=None: madeup.rows)
    assert compare.main([str(MADEUP), "--arch", str(madeup.path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"mean absolute error: [0-9.]+%", lines[-1])
    assert float(lines[-1].split()[-1].rstrip("%")) == pytest.approx(madeup.mean_error, abs=0.05)
    assert madeup.mean_error <= 5
    notes = [line for line in lines if line.startswith("not in the mean:")]
    assert any("const_latency" in n for n in notes) and any("tlb_miss" in n for n in notes)
    assert any("stream_write" in n for n in notes)
    assert sum("(not in the mean)" in line for line in lines) == 3
    counted = [r for r in madeup.rows if r.modelled]
    assert compare.mean_absolute_error(madeup.rows) == pytest.approx(sum(r.error_pct for r in counted) / len(counted))


def test_the_madeup_results_give_every_later_compare_row():
    compare = load_compare()
    plans = compare.comparison_plans(json.loads(MADEUP.read_text()), "h100")
    keys = {p.key for p in plans}
    assert {"smem_latency", "const_latency", "tlb_miss", "atomic_same_address", "atomic_spread", "smem_bandwidth",
            "l1_bandwidth", "l2_bandwidth_sm", "l2_bandwidth", "stream_write", "sfu_latency", "sfu_throughput",
            "block_launch", "mma_sync_tf32", "wgmma_fp8"} <= keys
    assert all(p.sims for p in plans)
    old = {p.key for p in compare.comparison_plans(json.loads(H200.read_text()), "h200")}
    assert not old & {"smem_latency", "block_launch", "wgmma_fp16"}  # an older results file: the rows it had


# --- the command line ------------------------------------------------------------------------------------------

def test_without_a_gpu_and_without_from_it_is_one_line(tmp_path):
    proc = _cli("calibrate", "-o", str(tmp_path / "x.yaml"), env=bare_env(tmp_path))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and "no NVIDIA GPU" in proc.stderr and "--from" in proc.stderr
    assert not (tmp_path / "x.yaml").exists()


def test_nvcc_missing_names_what_is_missing(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(device, "CUDA_ROOTS", ("/nonexistent/cuda",))
    with pytest.raises(GpusimError, match=r"nvcc not found: not on PATH, CUDA_HOME is unset, not in "
                                          r"/nonexistent/cuda/bin"):
        device.find_nvcc()


def test_on_a_gpu_it_builds_runs_and_saves_the_results(tmp_path):
    """With a GPU (here nvidia-smi and nvcc stand-ins: the 'binary' prints the made-up part's run), calibrate builds
    validation/microbench.cu for the device's compute capability, runs it twice, saves the results beside the
    arch file and writes the arch file from them."""
    run = json.dumps(json.loads(MADEUP.read_text())["runs"][0])
    (tmp_path / "run.json").write_text(run)
    smi = ("#!/bin/sh\necho 'name, clocks.max.sm [MHz], clocks.current.sm [MHz], clocks.max.memory [MHz], "
           "memory.total [MiB], driver_version, power.limit [W], compute_cap'\n"
           "echo 'Made-up GPU M16, 1500 MHz, 1500 MHz, 1600 MHz, 32768 MiB, 999.1.2, 300.00 W, 9.0'\n")
    cat, chmod = shutil.which("cat"), shutil.which("chmod")
    nvcc = (f"#!/bin/sh\nout=''\nwhile [ $# -gt 0 ]; do case \"$1\" in -o) out=\"$2\"; shift;; -arch=*) echo \"$1\" "
            f">> {tmp_path}/arch.txt;; esac; shift; done\n"
            f"printf '#!/bin/sh\\n{cat} {tmp_path}/run.json\\n' > \"$out\"\n"
            f"{chmod} +x \"$out\"\n")
    env = bare_env(tmp_path, {"nvidia-smi": smi, "nvcc": nvcc})
    out = tmp_path / "m16.yaml"
    proc = _cli("calibrate", "-o", str(out), "--base", "h100", "--no-check", env=env)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "arch.txt").read_text().split() == ["-arch=sm_90a"]
    saved = json.loads((tmp_path / "m16.results.json").read_text())
    assert len(saved["runs"]) == 2 and saved["machine"]["driver_version"] == "999.1.2"
    spec = gpusim.load_arch(out)
    assert spec.sms == 16 and spec.memory.l1.hit_latency == 33
    assert "driver 999.1.2" in out.read_text()


def test_dry_run_lists_what_is_measured_and_what_kept():
    lines = dry_run("h100")
    text = "\n".join(lines)
    assert "pointer_chase.l2" in text and "memory.l2.hit_latency" in text and "wgmma" in text
    kept = lines[lines.index(next(l for l in lines if l.startswith("kept from h100"))) + 1:]
    assert "  memory.l2.slices" in kept and "  memory.l1.hit_latency" not in kept
    proc = _cli("calibrate", "--dry-run", "--from", str(H200), "--base", "h100")
    assert proc.returncode == 0, proc.stderr
    assert "  memory.l2.hit_latency = 287" in proc.stdout and "  memory.l2.slices = 80 (R)" in proc.stdout


@pytest.mark.parametrize("content, message", [
    ("not json", "not valid JSON"),
    ('{"runs": []}', "non-empty list"),
    ('{"runs": [{"device": "x"}]}', "has no compute_capability, sms"),
])
def test_a_bad_results_file_is_one_line(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    proc = _cli("calibrate", "--from", str(path), "--base", "h100", "-o", str(tmp_path / "x.yaml"))
    assert proc.returncode == 1 and message in proc.stderr and proc.stderr.count("\n") == 1


def test_bad_arguments_are_one_line(tmp_path):
    proc = _cli("calibrate", "--from", str(H200), "--base", "nope", "-o", str(tmp_path / "x.yaml"))
    assert proc.returncode == 1 and "--base nope: unknown arch" in proc.stderr
    proc = _cli("calibrate", "--from", str(H200), "-o", str(tmp_path / "x.txt"))
    assert proc.returncode == 1 and "expected a .yaml file name" in proc.stderr
    proc = _cli("calibrate", "--from", str(H200))
    assert proc.returncode == 1 and "-o FILE.yaml is required" in proc.stderr


def test_results_means_over_runs():
    results = Results.load(H200)
    assert results.mean("pointer_chase", "l2", "cycles_per_hop") == pytest.approx((286.66 + 286.9) / 2)
    assert results.mean("no_such_key") is None and results.device == "NVIDIA H200"
    assert Calibration(results, "h100", "x").entries["structure.enabled_sms"].value == 132


# --- the microbenchmarks compile (as the command builds them on a GPU) ------------------------------------------

@pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
                    reason="nvcc is not installed")
def test_microbench_compiles_for_sm_80_sm_90_and_sm_90a(tmp_path):
    nvcc = device.find_nvcc()

    def build(arch):
        return subprocess.run([nvcc, "-O3", "-std=c++17", f"-arch={arch}", "-o", str(tmp_path / arch),
                               str(ROOT / "validation/microbench.cu")], capture_output=True, text=True, timeout=600)

    with ThreadPoolExecutor(2) as pool:
        for arch, proc in zip(("sm_80", "sm_90", "sm_90a"), pool.map(build, ("sm_80", "sm_90", "sm_90a"))):
            assert proc.returncode == 0, f"{arch}: {proc.stderr[-800:]}"
