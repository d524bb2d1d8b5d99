"""The GPU side of calibrate and validate: find the GPU (nvidia-smi) and nvcc, build a CUDA source for the
device's compute capability, run it and read the JSON it prints. Each failure is one line naming what is missing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from ..errors import GpusimError, one_line

REPO = Path(__file__).resolve().parents[2]  # a source checkout: validation/ beside gpusim/
VALIDATION = REPO / "validation"
SMI_FIELDS = ("name", "clocks.max.sm", "clocks.current.sm", "clocks.max.memory", "memory.total", "driver_version",
              "power.limit", "compute_cap")
CUDA_ROOTS = ("/usr/local/cuda",)  # where nvcc is looked for after PATH and CUDA_HOME
NO_GPU = "no NVIDIA GPU here ({why}): give --from RESULTS.json to use stored results instead"


def find_gpu() -> dict:
    """nvidia-smi's fields of GPU 0 ({'name [..]': value, ...}, as validation/results/*.json keep them), or a
    one-line GpusimError saying why there is none."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        raise GpusimError(NO_GPU.format(why="nvidia-smi is not on PATH"))
    try:
        proc = subprocess.run([smi, f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv"], capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GpusimError(NO_GPU.format(why=f"nvidia-smi failed: {one_line(str(exc), 80)}")) from None
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode or len(lines) < 2:
        why = (proc.stderr or proc.stdout).strip().splitlines()
        raise GpusimError(NO_GPU.format(why=f"nvidia-smi: {one_line(why[-1] if why else 'no GPU listed', 80)}"))
    header = [h.strip() for h in lines[0].split(",")]
    values = [v.strip() for v in lines[1].split(",")]
    return dict(zip(header, values))


def compute_capability(machine: dict) -> str:
    for key, value in machine.items():
        if key.startswith("compute_cap"):
            return value
    raise GpusimError("nvidia-smi did not report the compute capability (compute_cap needs driver 510 or later)")


def arch_flag(cc: str) -> str:
    """nvcc's -arch for a compute capability: the architecture-specific target (sm_90a, sm_100a) where the
    part has instructions only it runs (wgmma, tcgen05), else sm_XY."""
    major, _, minor = cc.partition(".")
    flag = f"sm_{major}{minor or '0'}"
    return flag + "a" if major in ("9", "10") else flag


def find_nvcc() -> str:
    """nvcc on PATH, else under CUDA_HOME (or /usr/local/cuda), else a one-line error."""
    found = shutil.which("nvcc")
    if found:
        return found
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    for root in filter(None, (home, *CUDA_ROOTS)):
        candidate = Path(root) / "bin" / "nvcc"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    where = f"not in CUDA_HOME/bin ({home}/bin)" if home else "CUDA_HOME is unset"
    tried = ", ".join(f"{root}/bin" for root in CUDA_ROOTS)
    raise GpusimError(f"nvcc not found: not on PATH, {where}, not in {tried or 'a default place'} (install the CUDA "
                      f"toolkit or set CUDA_HOME)")


def source(relative: str) -> Path:
    """A file under validation/ of the source checkout, or a one-line error (an installed gpusim has none)."""
    path = VALIDATION / relative
    if not path.is_file():
        raise GpusimError(f"validation/{relative} is not here (it ships with the source checkout, not the installed "
                          f"package): run from a checkout of gpusim, or give --from RESULTS.json")
    return path


def build(src: Path, out: Path, cc: str, nvcc: str | None = None) -> Path:
    """Compile `src` for the device (nvcc -O3 -std=c++17 -arch=...), include path validation/; the binary."""
    nvcc = nvcc or find_nvcc()
    cmd = [nvcc, "-O3", "-std=c++17", f"-arch={arch_flag(cc)}", "-lineinfo", f"-I{VALIDATION}", "-o", str(out),
           str(src)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GpusimError(f"nvcc on {src.name}: {one_line(str(exc), 120)}") from None
    if proc.returncode:
        errors = [line for line in proc.stderr.splitlines() if "error" in line] or proc.stderr.splitlines() or ["?"]
        raise GpusimError(f"nvcc failed on {src.name} ({arch_flag(cc)}): {one_line(errors[0], 160)}")
    return out


def run_json(binary: Path, args: list[str] | None = None, timeout: float = 1800) -> dict:
    """Run a built benchmark and parse the JSON object it prints on stdout."""
    try:
        proc = subprocess.run([str(binary), *(args or [])], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise GpusimError(f"{binary.name} ran past {timeout:.0f} s") from None
    except OSError as exc:
        raise GpusimError(f"{binary.name}: {one_line(str(exc), 120)}") from None
    start = proc.stdout.find("{")
    try:
        data = json.loads(proc.stdout[start:]) if start >= 0 else None
    except json.JSONDecodeError:
        data = None
    if proc.returncode or not isinstance(data, dict):
        err = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise GpusimError(f"{binary.name} failed: {one_line(err, 160)}")
    return data
