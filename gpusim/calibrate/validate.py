"""`gpusim validate`: the CUDA twins of the shipped workloads (validation/kernels/*.cu) timed on this machine's GPU,
or stored results of them, beside gpusim's simulated time of the same workload, parameters and grid.

A results file is {"date", "machine", "kernels": [one twin's JSON line each]}; each line names its workload YAML,
the parameters it ran with and its median time over repetitions (CUDA events around each launch)."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from ..errors import GpusimError, shown
from ..pool import pool_map
from .derive import model_of
from .device import REPO, VALIDATION, arch_flag, build, compute_capability, find_gpu, find_nvcc, run_json

KERNELS = VALIDATION / "kernels"
MAX_RESULTS_BYTES = 16 * 2**20


@dataclass(frozen=True)
class Row:
    workload: str
    params: dict
    measured_s: float
    simulated_s: float
    note: str = ""

    @property
    def ratio(self) -> float:
        return self.simulated_s / self.measured_s if self.measured_s > 0 else float("inf")

    @property
    def error_pct(self) -> float:
        return abs(self.ratio - 1) * 100


def twins() -> list[Path]:
    """The CUDA twins: validation/kernels/*.cu."""
    return sorted(KERNELS.glob("*.cu"))


def needs(twin: Path) -> str | None:
    """The compute capability family a twin needs beyond the default build: '9.0' for wgmma and TMA (sm_90a)."""
    text = twin.read_text(encoding="utf-8", errors="replace")
    return "9.0" if "-arch=sm_90a" in text else None


def measure(out: Path, only: list[str] | None = None, log=print) -> Path:
    """Build every twin for this GPU, run each at its workload's default parameters, save the results file."""
    machine = find_gpu()
    nvcc = find_nvcc()
    cc = compute_capability(machine)
    chosen = [t for t in twins() if not only or t.stem in only]
    if not chosen:
        raise GpusimError(f"--kernels: none of {', '.join(only or [])} is a twin in validation/kernels/ "
                          f"(there: {', '.join(t.stem for t in twins())})")
    kernels, skipped = [], []
    with tempfile.TemporaryDirectory(prefix="gpusim-validate-") as tmp:
        for twin in chosen:
            family = needs(twin)
            if family and cc.split(".")[0] != family.split(".")[0]:
                skipped.append(f"{twin.stem} (needs compute capability {family}, this GPU is {cc})")
                continue
            log(f"building and timing {twin.name} ({arch_flag(cc)})")
            binary = build(twin, Path(tmp) / twin.stem, cc, nvcc)
            kernels.append(run_json(binary, timeout=1800))
    machine = {k: v for k, v in machine.items() if not k.startswith("compute_cap")}
    data = {"date": date.today().isoformat(), "machine": machine, "compute_capability": cc, "kernels": kernels,
            "skipped": skipped}
    out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return out


def load(path: str | Path) -> dict:
    """A validate results file, checked: one line naming the problem otherwise."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_RESULTS_BYTES:
            raise GpusimError(f"{shown(str(path))}: larger than {MAX_RESULTS_BYTES >> 20} MiB: not a results file")
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise GpusimError(f"{shown(str(path))}: cannot read ({exc.strerror or exc})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise GpusimError(f"{shown(str(path))}: not valid JSON ({getattr(exc, 'msg', exc)})") from None
    kernels = data.get("kernels") if isinstance(data, dict) else None
    if not isinstance(kernels, list) or not kernels:
        raise GpusimError(f"{shown(str(path))}: expected 'kernels', a list of the twins' JSON lines (gpusim validate "
                          f"writes it)")
    for i, k in enumerate(kernels):
        ok = isinstance(k, dict) and isinstance(k.get("yaml"), str) and isinstance(k.get("params"), dict) and \
            isinstance(k.get("time_ms"), (int, float)) and not isinstance(k.get("time_ms"), bool) and k["time_ms"] > 0
        if not ok:
            raise GpusimError(f"{shown(str(path))}: kernels[{i}] needs 'yaml', 'params' and a positive 'time_ms'")
    return data


def default_arch(data: dict) -> str:
    """The shipped arch of the measured device's model, or a one-line error asking for --arch."""
    from ..arch.load import known_archs, load_arch

    device = str((data.get("machine") or {}).get("name") or data["kernels"][0].get("device") or "")
    model = model_of(device)
    for name in known_archs():
        try:
            if model and model_of(load_arch(name).full_name) == model:
                return name
        except GpusimError:
            continue
    raise GpusimError(f"no shipped arch for the measured device ({shown(device) or 'unnamed'}): give --arch NAME|FILE "
                      f"(gpusim calibrate writes one)")


def _workload(yaml: str) -> Path:
    """A twin's workload: in the source checkout (workloads/, validation/workloads/), or for workloads/ the copy an
    installed gpusim carries."""
    packaged = Path(__file__).resolve().parents[1] / "_data"
    for root in (REPO, packaged):
        path = (root / yaml).resolve()
        if root.resolve() in path.parents and path.is_file():
            return path
    raise GpusimError(f"{shown(yaml)}: no such workload in this checkout")


def _simulate(task: tuple[str, str, tuple]) -> float:
    from ..api import run

    arch, yaml, params = task
    return run(_workload(yaml), arch, params=dict(params), progress=None).metrics["gpu__time_duration.sum"]


def compare(data: dict, arch: str, jobs: int | None = None) -> list[Row]:
    """Each measured kernel beside gpusim's simulated time of its workload with the same parameters, on `arch`."""
    tasks = []
    for k in data["kernels"]:
        params = tuple(sorted((str(n), v) for n, v in k["params"].items()))
        _workload(k["yaml"])  # a missing workload is an error before anything runs
        tasks.append((str(arch), k["yaml"], params))
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(tasks)))
    if jobs > 1:
        simulated = pool_map(_simulate, tasks, jobs)
    else:
        simulated = [_simulate(t) for t in tasks]
    return [Row(str(k.get("workload") or Path(k["yaml"]).stem), dict(k["params"]), k["time_ms"] / 1e3, s)
            for k, s in zip(data["kernels"], simulated)]


def mean_absolute_error(rows: list[Row]) -> float:
    return sum(r.error_pct for r in rows) / len(rows)


def table(rows: list[Row], arch: str) -> list[str]:
    lines = [f"{'kernel':18} {'parameters':44} {'measured us':>12} {'simulated us':>13} {'sim/measured':>13}"]
    for r in rows:
        params = " ".join(f"{k}={v}" for k, v in r.params.items())
        params = params if len(params) <= 44 else params[:41] + "..."
        lines.append(f"{r.workload:18} {params:44} {r.measured_s * 1e6:12.1f} {r.simulated_s * 1e6:13.1f} "
                     f"{r.ratio:13.3f}")
    lines.append(f"{len(rows)} kernels simulated on {arch}")
    lines.append(f"validate: mean absolute error {mean_absolute_error(rows):.1f}%")
    return lines
