"""Every record that leaves gpusim is checked against the physical limits, and every metric is declared.

A full run that breaks a limit is an engine bug: one line per limit on stderr, the record's "violations", exit
status 3. A sampled run that breaks one is a projection that is not an answer: `--sample on` reports it the
same way, `auto` refines or simulates in full and says why. The limits are injected here by wrapping the
metrics the engine reports, since the engine itself keeps them (test_physics.py).
"""

from __future__ import annotations

import json

import pytest

import gpusim
import gpusim.api as api
from gpusim.cli import main
from gpusim.stats.declared import METRICS, kind, percentages_out_of_range, undeclared
from gpusim.stats.metrics import combine_metrics
from gpusim.sampling import project as projection

FMA = "workloads/microbench/fma_peak.yaml"
VECADD = "workloads/vecadd.yaml"


def _inflated(factor: float, key: str = "dram__bytes.sum.per_second"):
    """kernel_metrics with `key` multiplied by `factor` (an impossible rate the engine never reports)."""
    real = api.kernel_metrics

    def fake(gpu, cycles):
        metrics = real(gpu, cycles)
        metrics[key] = metrics[key] * factor
        return metrics

    return fake


def test_a_plain_run_carries_an_empty_violations_list():
    result = gpusim.run(FMA, "a100", sms=2, sample="off")
    assert result.violations == [] and result.to_dict()["violations"] == []


def test_a_full_run_breaking_a_limit_exits_3_with_one_line_per_limit(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(api, "kernel_metrics", _inflated(50.0))
    out = tmp_path / "r.json"
    code = main(["run", VECADD, "--arch", "h100", "--sms", "2", "--sample", "off", "--json", str(out), "--quiet"])
    err = capsys.readouterr().err
    record = json.loads(out.read_text())
    assert code == 3
    assert len(record["violations"]) == 1 and "DRAM bandwidth" in record["violations"][0]
    lines = [line for line in err.splitlines() if line.startswith("error: physical limit")]
    assert len(lines) == 1 and "engine bug" in lines[0]


def test_the_json_on_stdout_carries_the_violations_and_the_exit_status(monkeypatch, capsys):
    monkeypatch.setattr(api, "kernel_metrics", _inflated(50.0))
    code = main(["run", VECADD, "--arch", "h100", "--sms", "2", "--sample", "off", "--json", "-", "--quiet"])
    captured = capsys.readouterr()
    assert code == 3 and json.loads(captured.out)["violations"]


def test_side_by_side_runs_are_each_checked(monkeypatch, capsys):
    monkeypatch.setattr(api, "kernel_metrics", _inflated(50.0))
    code = main(["run", VECADD, "--arch", "h100,a100", "--sms", "2", "--sample", "off", "--json", "-", "--quiet"])
    captured = capsys.readouterr()
    runs = json.loads(captured.out)["runs"]
    assert code == 3 and all(r["violations"] for r in runs)
    assert sum(line.startswith("error: h100/") for line in captured.err.splitlines()) == 1


def test_a_sweep_row_that_breaks_a_limit_is_an_error_row(monkeypatch):
    from gpusim.sweep import run_point

    monkeypatch.setattr(api, "kernel_metrics", _inflated(50.0))
    task = {"values": {"n": 65536}, "metrics": ["gpu_sim_cycle"], "columns": ["n", "gpu_sim_cycle", "error"],
            "workload": VECADD, "arch": "h100", "options": gpusim.RunOptions(sms=2, sample="off"), "params": {}}
    row = run_point(task)
    assert row["error"].startswith("physical limit broken") and row["gpu_sim_cycle"] > 0


def test_a_sampled_projection_breaking_a_limit_is_reported_under_on_and_refused_under_auto(monkeypatch):
    from gpusim.sampling import sampled_run

    real = sampled_run.project

    def too_fast(*args, **kwargs):  # a projection with 1% of the cycles: every rate 100x
        metrics, record, more = real(*args, **kwargs)
        metrics["gpu_sim_cycle"] = max(1, metrics["gpu_sim_cycle"] // 100)
        metrics["gpu__time_duration.sum"] /= 100
        metrics["dram__bytes.sum.per_second"] *= 100
        return metrics, record, more

    monkeypatch.setattr(sampled_run, "project", too_fast)
    on = gpusim.run(VECADD, "t4", sms=4, params={"n": 1 << 20}, sample="on")
    assert on.sampling["method"] == "waves" and on.violations
    assert any(w.startswith("--sample on: the projection breaks a physical limit") for w in on.warnings)
    auto = gpusim.run(VECADD, "t4", sms=4, params={"n": 1 << 20}, sample="auto")
    assert auto.sampling["method"] == "full"  # (small: auto runs it in full anyway)
    monkeypatch.setattr("gpusim.sampling.plan.AUTO_THRESHOLD", 1000)
    refused = gpusim.run(VECADD, "t4", sms=4, params={"n": 1 << 20}, sample="auto")
    assert refused.violations == [] and refused.sampling["method"] == "full"
    assert "the projection breaks a physical limit" in refused.sampling["detail"]
    assert refused.metrics == gpusim.run(VECADD, "t4", sms=4, params={"n": 1 << 20}, sample="off").metrics


def test_every_declared_ratio_is_over_a_declared_count():
    for metric in METRICS.values():
        if metric.kind == "ratio":
            assert kind(metric.over) == "count", metric.name


def test_undeclared_metrics_are_named_not_summed():
    assert undeclared({"gpu_sim_cycle": 1, "my_new_ratio": 0.5}) == ["my_new_ratio"]
    sums = projection.additive({"gpu_sim_cycle": 10, "my_new_ratio": 0.5, "launch__grid_size": 64})
    assert "my_new_ratio" not in sums and "launch__grid_size" not in sums and sums["gpu_sim_cycle"] == 10
    assert "my_new_ratio" not in projection.as_record(sums, {"gpu_sim_cycle": 10, "my_new_ratio": 0.5})


def test_bytes_between_levels_agree_to_a_projections_rounding_and_no_further():
    """A projected record rounds the L2's sectors and the SMs' bytes each on its own: a few bytes apart is the same
    traffic (a real run's both are whole sectors); a sector apart is bytes lost between the levels."""
    from gpusim.stats.invariants import violations

    spec = gpusim.load_arch("h100")
    m = gpusim.run(VECADD, "h100", sms=2, params={"n": 65536}).metrics
    assert violations(m, spec) == []
    sent = m["lts__t_sectors.sum"] * spec.memory.l2.sector_bytes
    assert violations({**m, "gpusim__l1_to_l2_bytes": sent - 2}, spec) == []
    broken = violations({**m, "gpusim__l1_to_l2_bytes": sent - spec.memory.l2.sector_bytes}, spec)
    assert len(broken) == 1 and broken[0].startswith("L2 saw")


def test_percentages_beyond_100_are_violations():
    assert percentages_out_of_range({"lts__t_sector_hit_rate.pct": 100.0}) == []
    assert len(percentages_out_of_range({"lts__t_sector_hit_rate.pct": 130.0,
                                         "sm__warps_active.avg.pct_of_peak_sustained_active": -1.0})) == 2


def test_kernels_one_after_another_weight_their_ratios():
    a = {"lts__t_sectors.sum": 100, "lts__t_sector_hit_rate.pct": 90.0, "gpu_sim_cycle": 10,
         "gpu__time_duration.sum": 1.0, "dram__bytes.sum": 5, "dram__bytes.sum.per_second": 5.0}
    b = {"lts__t_sectors.sum": 300, "lts__t_sector_hit_rate.pct": 50.0, "gpu_sim_cycle": 30,
         "gpu__time_duration.sum": 3.0, "dram__bytes.sum": 15, "dram__bytes.sum.per_second": 5.0}
    total = combine_metrics([a, b])
    assert total["lts__t_sectors.sum"] == 400 and total["gpu_sim_cycle"] == 40
    assert total["lts__t_sector_hit_rate.pct"] == pytest.approx(60.0)
    assert total["dram__bytes.sum.per_second"] == pytest.approx(5.0) and total["kernels"] == 2
