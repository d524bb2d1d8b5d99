"""`gpusim calibrate`: measure (or read stored results), write the arch file, and check the engine on it.

The check simulates every row of validation/compare.py (the kernel each microbenchmark ran) on the written file.
Where a latency row comes out more than 1% off the measurement the field is moved by the difference (the engine
adds a cycle or two of its own around a pointer-chase hop or a block launch), and a bandwidth field in proportion;
then the rows that moved are simulated again and the table printed."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from ..arch.load import load_arch_file
from ..errors import GpusimError, shown
from .derive import DERIVED, KEPT, MEASURED, MEASUREMENTS, Calibration, base_path, default_base
from .device import VALIDATION, build, compute_capability, find_gpu, find_nvcc, run_json, source
from .results import Results
from .write import render

MICROBENCH_RUNS = 2
# compare.py row -> the field it calibrates: moved by the difference (latencies) or in proportion (rates)
ADDITIVE = {"ffma_latency": "pipelines.fp32.latency", "hmma_latency": "pipelines.tensor.latency",
            "sfu_latency": "pipelines.sfu.latency", "chase_l1": "memory.l1.hit_latency",
            "chase_l2": "memory.l2.hit_latency", "chase_dram": "memory.dram.latency",
            "smem_latency": "memory.l1.shared_latency", "block_launch": "frontend.block_retire_cycles"}
PROPORTIONAL = {"stream_read": "memory.dram.read_efficiency", "stream_copy": "memory.dram.write_efficiency",
                "l2_bandwidth": "memory.l2.bandwidth_bytes_per_clock",
                "l2_bandwidth_sm": "memory.l2.sm_bytes_per_clock"}
DEPENDS = {"stream_read": ("stream_copy",)}  # rows that move with another row's field
TOLERANCE = 0.01


@dataclass
class Report:
    path: Path
    results_path: Path | None
    base: str
    rows: list = field(default_factory=list)
    refined: list[str] = field(default_factory=list)
    checked: bool = False
    note: str = ""

    @property
    def mean_error(self) -> float | None:
        counted = [r for r in self.rows if r.modelled]
        return sum(r.error_pct for r in counted) / len(counted) if counted else None


def _file_name(out: Path) -> str:
    """The arch's short name: the output file's stem, made printable and at most 64 characters."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", out.stem)[:64]
    return name or "calibrated"


def measure_on_gpu(results_out: Path, log=print) -> Path:
    """Build validation/microbench.cu for this GPU, run it MICROBENCH_RUNS times, save the results file."""
    machine = find_gpu()
    nvcc = find_nvcc()
    src = source("microbench.cu")
    cc = compute_capability(machine)
    with tempfile.TemporaryDirectory(prefix="gpusim-calibrate-") as tmp:
        log(f"building {src.name} for compute capability {cc} ({machine.get('name', 'GPU')}) with {nvcc}")
        binary = build(src, Path(tmp) / "microbench", cc, nvcc)
        runs = []
        for i in range(MICROBENCH_RUNS):
            log(f"running the microbenchmarks ({i + 1} of {MICROBENCH_RUNS}; a few minutes)")
            runs.append(run_json(binary, timeout=3600))
    machine = {k: v for k, v in machine.items() if not k.startswith("compute_cap")}
    data = {"date": date.today().isoformat(), "machine": machine,
            "binary": f"validation/microbench.cu built by gpusim calibrate (nvcc -O3 -arch for {cc})",
            "notes": [f"{MICROBENCH_RUNS} back-to-back runs of the same binary; every figure is per run."],
            "runs": runs}
    results_out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return results_out


def load_compare():
    """validation/compare.py as a module (registered, so the process pool's workers find its functions), or None
    where this gpusim has no source checkout beside it."""
    name = "gpusim_validation_compare"
    if name in sys.modules:
        return sys.modules[name]
    path = VALIDATION / "compare.py"
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def calibrate(out: str | Path, base: str | None = None, results: str | Path | None = None, check: bool = True,
              jobs: int | None = None, log=print) -> Report:
    """Write a calibrated arch file to `out` from stored `results`, or measure them on this machine's GPU first
    (saved beside `out` as NAME.results.json). `check`: simulate validation/compare.py's rows on the file, move
    what the engine reproduces more than 1% off, and keep the rows in the report."""
    out = Path(out)
    if out.suffix not in (".yaml", ".yml"):
        raise GpusimError(f"-o {shown(out)}: expected a .yaml file name (gpusim loads arch files by that suffix)")
    if results is None:
        results_path = measure_on_gpu(out.with_name(out.stem + ".results.json"), log)
    else:
        results_path = Path(results)
    measured = Results.load(results_path)
    base = base or default_base(measured)
    cal = Calibration(measured, base, _file_name(out))
    report = Report(out, results_path if results is None else None, base)
    _write(cal, out)
    if check:
        compare = load_compare()
        if compare is None:
            report.note = "not checked: validation/compare.py is not here (a source checkout has it)"
        else:
            _check(cal, out, measured, compare, report, jobs)
    return report


def _write(cal: Calibration, out: Path) -> None:
    text = render(cal)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise GpusimError(f"-o {shown(out)}: cannot write ({exc.strerror or exc})") from None
    load_arch_file(out)  # the file loads (a value out of a field's range is a one-line error naming it)


def _check(cal: Calibration, out: Path, measured: Results, compare, report: Report, jobs: int | None) -> None:
    plans = compare.comparison_plans(measured.data, str(out))
    rows = {r.key: r for r in compare.run_plans(plans, str(out), jobs)}
    moved = []
    for key, row in rows.items():
        if not row.modelled or row.measured == 0 or abs(row.ratio - 1) <= TOLERANCE:
            continue
        if key in ADDITIVE and cal.entries[ADDITIVE[key]].kind in (MEASURED, DERIVED):
            path = ADDITIVE[key]
            step = round(row.measured - row.simulated)
            if step:
                entry = cal.entries[path]
                entry.value = max(1, entry.value + step)
                entry.text += f"; {step:+d} for the engine's own cycles around it ({key} simulated {row.simulated:.1f})"
                moved.append(key)
        elif key in PROPORTIONAL and cal.entries[PROPORTIONAL[key]].kind in (MEASURED, DERIVED):
            path = PROPORTIONAL[key]
            entry = cal.entries[path]
            value = entry.value * row.measured / row.simulated
            entry.value = round(min(1.0, value), 4) if isinstance(entry.value, float) else max(1, round(value))
            entry.text += f"; x {row.measured / row.simulated:.3f} for the engine ({key} simulated {row.simulated:.1f})"
            moved.append(key)
    if moved:
        _write(cal, out)
        again = set(moved) | {k for m in moved for k in DEPENDS.get(m, ())}
        plans = [p for p in compare.comparison_plans(measured.data, str(out)) if p.key in again]
        rows.update({r.key: r for r in compare.run_plans(plans, str(out), jobs)})
    report.rows, report.refined, report.checked = list(rows.values()), moved, True


def dry_run(base: str | None = None, results: str | Path | None = None) -> list[str]:
    """What calibrate measures and what it keeps from the base file, as lines (with --from: the values too)."""
    lines = []
    if results is not None:
        measured = Results.load(results)
        base = base or default_base(measured)
        cal = Calibration(measured, base, "dry-run")
        lines.append(f"from {shown(results)}: {measured.device} (driver {measured.driver}, {measured.date}); "
                     f"base {base} ({base_path(base)})")
        for kind, label in ((MEASURED, "measured"), (DERIVED, "derived"), ("assumed", "assumed here (R)"),
                            (KEPT, "kept from the base")):
            chosen = [(p, e) for p, e in cal.entries.items() if e.kind == kind and p != "name"]
            lines.append(f"{label}: {len(chosen)}")
            for path, entry in chosen:
                shown_value = entry.value if not isinstance(entry.value, str) else f"'{entry.value}'"
                tag = " (R)" if kind == KEPT and entry.assumed else ""
                lines.append(f"  {path} = {shown_value}{tag}")
        return lines
    base = base or "h100"
    lines.append(f"on this machine's GPU: build and run validation/microbench.cu {MICROBENCH_RUNS} times, then "
                 f"write every field below from it; the rest from {base} ({base_path(base)})")
    lines.append("measured (results key, microbench.cu kernel -> fields):")
    for key, kernel, fields in MEASUREMENTS:
        lines.append(f"  {key} ({kernel}) -> {fields}")
    settable = {f.strip() for _k, _n, fields in MEASUREMENTS
                for f in re.split(r",\s*", re.sub(r"\s*\(.*?\)", "", fields))}
    kept = []
    for path, _value in _base_fields(base):
        leaf, parent = path.rsplit(".", 1)[-1], path.rsplit(".", 1)[0] if "." in path else ""
        if path in settable or leaf in settable or any(s.startswith(f"{parent}.") and s.endswith(leaf)
                                                       for s in settable):
            continue
        if path.startswith("pipelines.tensor.rates.") or path in ("name",):
            continue
        kept.append(path)
    lines.append(f"kept from {base} (marked R where {base} is another part): {len(kept)}")
    lines.extend(f"  {p}" for p in kept)
    return lines


def _base_fields(base: str):
    from ..arch.load import read_yaml
    from .derive import leaves

    return list(leaves(read_yaml(base_path(base))))
