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
