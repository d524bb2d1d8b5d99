"""`gpusim run --arch a,b --scheduler x,y|all`: one table, a column per run with its ratio to
the first, and a JSON record per run."""

from __future__ import annotations

import json

from gpusim.engine.scheduler import policy_names

from tests.conftest import run_cli

FMA = ["run", "workloads/microbench/fma_peak.yaml", "--sms", "2", "--set", "blocks=2"]


def test_archs_side_by_side_give_a_record_per_run_and_one_table():
    proc = run_cli(*FMA, "--arch", "a100,h100", "--json", "-")
    assert proc.returncode == 0, proc.stderr
    runs = json.loads(proc.stdout)["runs"]
    assert [(r["arch"], r["scheduler"]) for r in runs] == [("a100", "lrr"), ("h100", "lrr")]
    table = run_cli(*FMA, "--arch", "a100,h100")
    assert table.returncode == 0 and "side by side (ratio to a100/lrr)" in table.stdout
    assert "h100 / lrr" in table.stdout and "x)" in table.stdout


def test_every_scheduler_side_by_side():
    proc = run_cli(*FMA, "--arch", "h100", "--scheduler", "all", "--json", "-")
    assert proc.returncode == 0, proc.stderr
    runs = json.loads(proc.stdout)["runs"]
    assert [r["scheduler"] for r in runs] == policy_names()
    assert len({r["metrics"]["smsp__inst_executed.sum"] for r in runs}) == 1  # the same work, scheduled apart


def test_a_bad_list_is_one_line():
    for arch in ("a100,,h100", "h100,h100"):
        proc = run_cli(*FMA, "--arch", arch)
        assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "distinct comma-separated" in proc.stderr
