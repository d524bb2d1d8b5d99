"""gpusim validate: the CUDA twins of the shipped workloads (validation/kernels/) and the comparison of their
measured times with gpusim's simulated times. No GPU here: stored results (tests/calibration/validate-results.json,
invented times at small sizes in the twins' format), stand-ins for nvidia-smi and nvcc for the GPU path, and, where
nvcc is installed, every twin compiled as `gpusim validate` builds it."""

import json
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gpusim.calibrate import device
from gpusim.calibrate import validate as v
from gpusim.errors import GpusimError
from gpusim.workload import load_workload
from tests.conftest import bare_env

ROOT = Path(__file__).resolve().parents[2]
STORED = ROOT / "tests/calibration/validate-results.json"
TWINS = sorted((ROOT / "validation/kernels").glob("*.cu"))


def _cli(*args, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "gpusim", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=timeout)


# --- the twins --------------------------------------------------------------------------------------------------

def _twin_facts(path: Path) -> tuple[str, dict, str]:
    """(the YAML its report names, its default parameters, the YAML its header names)."""
    text = path.read_text()
    report = re.search(r'twin_report\("(\w+)", "([^"]+)"', text)
    defaults = re.search(r"TwinParams p\(argc, argv, \{(.*?)\}\);", text, re.S).group(1)
    params = {name: int(value) for name, value in re.findall(r'\{"(\w+)", (-?\d+)\}', defaults)}
    header = re.match(r"// (\w+) twin of (\S+\.yaml)", text)
    assert report and header, path.name
    assert report.group(1) == header.group(1) == path.stem
    return report.group(2), params, header.group(2)


def test_there_is_a_twin_of_each_workload_named():
    assert {p.stem for p in TWINS} >= {"vecadd", "stream", "reduction", "divergence", "transpose", "gemm_tile128",
                                       "gemm_multistage", "gemm_hopper_ws", "flash_attention", "flash_attention_simple", "kv_decode"}


@pytest.mark.parametrize("twin", TWINS, ids=lambda p: p.stem)
def test_each_twin_runs_its_workload_with_the_yamls_parameters(twin):
    """The YAML a twin reports exists, and the twin's parameters are the YAML's, with the same defaults (so a
    measurement is simulated at the size that ran)."""
    yaml, params, header_yaml = _twin_facts(twin)
    assert yaml == header_yaml and (ROOT / yaml).is_file()
    kernel = load_workload(ROOT / yaml)
    assert params == {k: int(val) for k, val in kernel.params.items()}, twin.name


def test_twins_that_need_sm_90a_say_so():
    assert {t.stem for t in TWINS if v.needs(t)} == {"gemm_hopper_ws"}


@pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
                    reason="nvcc is not installed")
def test_every_twin_compiles(tmp_path):
    nvcc = device.find_nvcc()

    def build(twin):
        arch = "sm_90a" if v.needs(twin) else "sm_90"
        return subprocess.run([nvcc, "-O3", "-std=c++17", f"-arch={arch}", "-o", str(tmp_path / twin.stem),
                               str(twin)], capture_output=True, text=True, timeout=600)

    with ThreadPoolExecutor(2) as pool:
        failed = {t.name: p.stderr[-400:] for t, p in zip(TWINS, pool.map(build, TWINS)) if p.returncode}
    assert not failed


# --- comparing stored results -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def stored():
    return v.load(STORED)


@pytest.fixture(scope="module")
def rows(stored):
    return v.compare(stored, "h200", jobs=2)


def test_every_stored_kernel_is_simulated_with_its_parameters(stored, rows):
    assert [r.workload for r in rows] == [k["workload"] for k in stored["kernels"]]
    for row, kernel in zip(rows, stored["kernels"]):
        assert row.params == kernel["params"]
        assert row.measured_s == pytest.approx(kernel["time_ms"] / 1e3)
        assert row.simulated_s > 0 and row.ratio == pytest.approx(row.simulated_s / row.measured_s)


def test_the_table_ends_with_the_mean_absolute_error(rows):
    lines = v.table(rows, "h200")
    assert lines[-1] == f"validate: mean absolute error {v.mean_absolute_error(rows):.1f}%"
    assert len(lines) == len(rows) + 3


def test_validate_from_stored_results_on_the_command_line():
    proc = _cli("validate", "--from", str(STORED), "--kernels", "vecadd,reduction,gemm_hopper_ws", "--jobs", "2")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert re.fullmatch(r"validate: mean absolute error [0-9.]+%", lines[-1])
    assert lines[-2] == "3 kernels simulated on h200"  # the measured device's arch by default
    assert [line.split()[0] for line in lines[1:4]] == ["vecadd", "reduction", "gemm_hopper_ws"]


def test_validate_on_a_calibrated_file(tmp_path):
    from gpusim.calibrate import calibrate

    arch = tmp_path / "h200cal.yaml"
    calibrate(arch, "h100", ROOT / "validation/results/h200-2026-11-29.json", check=False)
    proc = _cli("validate", "--from", str(STORED), "--arch", str(arch), "--kernels", "vecadd")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-2] == f"1 kernels simulated on {arch}"


def test_without_a_gpu_and_without_from_it_is_one_line(tmp_path):
    proc = _cli("validate", env=bare_env(tmp_path))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and "no NVIDIA GPU" in proc.stderr


def test_on_a_gpu_it_builds_and_times_the_twins(tmp_path):
    """With a GPU (stand-ins: each built 'twin' prints its stored line), validate builds the twins for the device
    (sm_90a for the wgmma one), saves what they printed and compares it."""
    stored = json.loads(STORED.read_text())
    lines = tmp_path / "lines"
    lines.mkdir()
    for kernel in stored["kernels"]:
        (lines / f"{kernel['workload']}.json").write_text(json.dumps(kernel))
    smi = ("#!/bin/sh\necho 'name, clocks.max.sm [MHz], clocks.current.sm [MHz], clocks.max.memory [MHz], "
           "memory.total [MiB], driver_version, power.limit [W], compute_cap'\n"
           "echo 'NVIDIA H200, 1980 MHz, 1980 MHz, 3201 MHz, 143771 MiB, 999.1.2, 700.00 W, 9.0'\n")
    cat, chmod, base = shutil.which("cat"), shutil.which("chmod"), shutil.which("basename")
    nvcc = (f"#!/bin/sh\nout=''\nsrc=''\nwhile [ $# -gt 0 ]; do case \"$1\" in -o) out=\"$2\"; shift;; "
            f"-arch=*) echo \"$1\" >> {tmp_path}/arch.txt;; *.cu) src=\"$1\";; esac; shift; done\n"
            f"name=$({base} \"$src\" .cu)\nprintf '#!/bin/sh\\n{cat} {lines}/%s.json\\n' \"$name\" > \"$out\"\n"
            f"{chmod} +x \"$out\"\n")
    env = bare_env(tmp_path, {"nvidia-smi": smi, "nvcc": nvcc})
    out = tmp_path / "measured.json"
    proc = _cli("validate", "--kernels", "vecadd,gemm_hopper_ws", "--out", str(out), env=env)
    assert proc.returncode == 0, proc.stderr
    assert sorted((tmp_path / "arch.txt").read_text().split()) == ["-arch=sm_90a", "-arch=sm_90a"]
    saved = json.loads(out.read_text())
    assert [k["workload"] for k in saved["kernels"]] == ["gemm_hopper_ws", "vecadd"]
    assert proc.stdout.splitlines()[-1].startswith("validate: mean absolute error ")


@pytest.mark.parametrize("content, message", [
    ("[]", "expected 'kernels'"),
    ('{"kernels": [{"yaml": "workloads/vecadd.yaml", "params": {}, "time_ms": 0}]}', "positive 'time_ms'"),
    ('{"kernels": [{"yaml": "../etc/passwd", "params": {}, "time_ms": 1}]}', "no such workload"),
])
def test_a_bad_results_file_is_one_line(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    proc = _cli("validate", "--from", str(path), "--arch", "h200")
    assert proc.returncode == 1 and message in proc.stderr and proc.stderr.count("\n") == 1


def test_an_unknown_device_asks_for_arch(stored):
    data = {**stored, "machine": {"name": "Made-up GPU M16"}, "kernels": [{**stored["kernels"][0],
                                                                           "device": "Made-up GPU M16"}]}
    with pytest.raises(GpusimError, match="give --arch"):
        v.default_arch(data)
