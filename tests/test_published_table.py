"""validation/published.yaml, as validation/published.py reads it (nothing simulated here): every row has a source
and a workload that exists, its parameters fit the formula, and a bad row field is the table's one-line error."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.fast


def _published():
    name = "validation_published"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "validation/published.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def test_the_shipped_table_loads_with_a_source_on_every_row():
    rows, _not_simulated = _published().load_rows(ROOT / "validation/published.yaml")
    assert len(rows) >= 30 and all(row.source.strip() for row in rows)
    assert {row.clock for row in rows} <= {"boost", "sustained"}


@pytest.mark.parametrize("clock, message", [
    ("turbo", "row bad: clock: --clock turbo: expected boost or sustained or a clock of at least 100 MHz"),
    ("50", "row bad: clock: --clock 50: expected boost or sustained or a clock of at least 100 MHz"),
])
def test_a_bad_clock_on_a_row_is_the_tables_one_line_error(tmp_path, capsys, clock, message):
    table = tmp_path / "table.yaml"
    table.write_text("rows:\n  - {id: bad, workload: workloads/vecadd.yaml, arch: h100, clock: " + clock + ",\n"
                     "     metric: time_us, published: 1.0, source: a test, differs: nothing}\n")
    assert _published().main(["--table", str(table), "--list"]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("carveout", ["half", "101", "-1", "7.5"])
def test_a_bad_carveout_on_a_row_is_the_tables_one_line_error(tmp_path, capsys, carveout):
    table = tmp_path / "table.yaml"
    table.write_text("rows:\n  - {id: bad, workload: workloads/vecadd.yaml, arch: h100, carveout: " + carveout + ",\n"
                     "     metric: time_us, published: 1.0, source: a test, differs: nothing}\n")
    assert _published().main(["--table", str(table), "--list"]) == 2
    err = capsys.readouterr().err
    message = f"row bad: carveout: --carveout {carveout}: expected a percentage, an integer from 0 to 100"
    assert message in err and len(err.strip().splitlines()) == 1


def test_a_sample_stating_more_error_than_the_tables_tolerance_is_simulated_again_in_full(monkeypatch):
    """A projection whose stated error is wider than +-15% is no answer to hold against a published number: the row
    runs again with --sample off, and the record keeps what the rejected sample stated."""
    published = _published()
    calls = []

    class Result:
        def __init__(self, sample):
            stated = {"auto": 23.9, "off": None}[sample]
            self.sampling = {"method": "loop trips and waves", "error_estimate_pct": stated} if stated else None
            self.metrics = {"gpu_sim_cycle": 9_502_640 if stated else 7_606_460, "gpu__time_duration.sum": 1e-3}
            self.partial, self.warnings = False, []

    def fake_run(workload, arch, *, sample, **options):
        calls.append(sample)
        return Result(sample)

    monkeypatch.setattr(published, "run", fake_run)
    out = published.simulate(published.Sim("workloads/gemm_hopper_ws.yaml", "h100", (("M", 12288),)))
    assert calls == ["auto", "off"]
    assert out["metrics"]["gpu_sim_cycle"] == 7_606_460 and out["sampling"] is None
    assert out["rejected_sample"] == {"method": "loop trips and waves", "error_estimate_pct": 23.9}


def test_a_sample_within_the_tables_tolerance_stands(monkeypatch):
    published = _published()
    calls = []

    class Result:
        sampling = {"method": "loop trips and waves", "error_estimate_pct": 12.9}
        metrics = {"gpu_sim_cycle": 4_396_914}
        partial, warnings = False, []

    monkeypatch.setattr(published, "run", lambda workload, arch, *, sample, **o: calls.append(sample) or Result())
    out = published.simulate(published.Sim("workloads/flash_attention3.yaml", "h100", ()))
    assert calls == ["auto"] and out["sampling"]["error_estimate_pct"] == 12.9 and "rejected_sample" not in out
