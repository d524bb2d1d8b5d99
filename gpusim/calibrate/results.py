"""Microbenchmark results as validation/microbench.cu prints them and validation/results/*.json keeps them: a JSON
object with `date`, `machine` (nvidia-smi's fields), `binary` and `runs`, each run one JSON object of the
microbenchmark. Reading checks the shape and says in one line what is missing; every figure is the mean over the
runs that hold it."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..errors import GpusimError, shown

MAX_RESULTS_BYTES = 64 * 2**20
REQUIRED = ("device", "compute_capability", "sms")  # every run names its device (the rest is optional)


class Results:
    """One results file: its runs and where they came from."""

    def __init__(self, data, source: str = "results"):
        self.source = source
        if not isinstance(data, dict):
            raise GpusimError(f"{source}: expected a JSON object with 'runs', got {type(data).__name__}")
        runs = data.get("runs")
        if not isinstance(runs, list) or not runs or not all(isinstance(r, dict) for r in runs):
            raise GpusimError(f"{source}: expected 'runs', a non-empty list of microbench.cu's JSON objects")
        for i, run in enumerate(runs):
            missing = [k for k in REQUIRED if k not in run]
            if missing:
                raise GpusimError(f"{source}: runs[{i}] has no {', '.join(missing)} (microbench.cu prints them first)")
        self.data, self.runs = data, runs
        machine = data.get("machine") if isinstance(data.get("machine"), dict) else {}
        self.machine: dict = machine
        self.device = str(runs[0]["device"])
        self.date = str(data.get("date") or "undated")
        driver = machine.get("driver_version") or runs[0].get("cuda_driver_version")
        self.driver = str(driver) if driver else "unknown driver"
        self.binary = str(data.get("binary") or "validation/microbench.cu")

    @classmethod
    def load(cls, path: str | Path) -> Results:
        path = Path(path)
        try:
            if path.stat().st_size > MAX_RESULTS_BYTES:
                raise GpusimError(f"{shown(path)}: larger than {MAX_RESULTS_BYTES >> 20} MiB: not a results file")
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise GpusimError(f"{shown(path)}: cannot read ({exc.strerror or exc})") from None
        except UnicodeDecodeError:
            raise GpusimError(f"{shown(path)}: not UTF-8 text (a results file is JSON)") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise GpusimError(f"{shown(path)}:{exc.lineno}: not valid JSON ({exc.msg})") from None
        return cls(data, shown(str(path)))

    def _get(self, run: dict, path: tuple):
        value = run
        for key in path:
            if isinstance(value, dict) and key in value:
                value = value[key]
            elif isinstance(value, list) and isinstance(key, int) and -len(value) <= key < len(value):
                value = value[key]
            else:
                return None
        return value

    def has(self, *path) -> bool:
        """Whether every run holds a finite number at `path` (keys into nested objects)."""
        return all(_number(self._get(r, path)) is not None for r in self.runs)

    def mean(self, *path) -> float | None:
        """The mean over the runs of the number at `path`, or None where a run lacks it."""
        values = [_number(self._get(r, path)) for r in self.runs]
        if any(v is None for v in values):
            return None
        return sum(values) / len(values)

    def first(self, *path):
        """The value at `path` in the first run (device properties are the same in every run)."""
        return self._get(self.runs[0], path)

    def where(self, kernel: str) -> str:
        """The source text of a measured figure: device, driver, date and the microbenchmark kernel."""
        return f"[CAL] {self.device}, driver {self.driver}, {self.date}, microbench.cu {kernel}"


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None
