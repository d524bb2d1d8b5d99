"""Every shipped workload says which unit bounds it at its default size (its `bound:` key, per arch), and a run at
that size agrees: the busiest unit of the speed of light is the one named, at least BOUND_FLOOR percent busy (or,
for `latency`, no unit is that busy)."""

from __future__ import annotations

import pytest

import gpusim
from gpusim.stats.invariants import BOUND_FLOOR, UNIT_METRICS, busiest_unit
from gpusim.workload.kernel import load_workload
from gpusim.workload.mix import kernel_mix

from tests.conftest import ROOT, kernel_workloads

SHIPPED = kernel_workloads()
SLOW = 20_000_000  # warp-instructions: a default size past this takes a minute or more (sampled): -m slow
SLOW_NAMED = {"gemm_hopper_ws", "gemm_blackwell_2sm"}  # fewer, but 40-50 s each alone on 2 idle cores: -m slow


def _case(path, arch, unit):
    big = kernel_mix(load_workload(path)).total_warp_insts > SLOW or path.stem in SLOW_NAMED
    return pytest.param(path, arch, unit, id=f"{path.stem}-{arch}", marks=[pytest.mark.slow] if big else [])


CASES = [_case(path, arch, unit) for path in SHIPPED for arch, unit in load_workload(path).bound.items()]


def test_every_shipped_workload_names_what_bounds_it():
    unnamed = [str(p.relative_to(ROOT)) for p in SHIPPED if not load_workload(p).bound]
    assert not unnamed


def test_the_header_says_it_too():
    """The comment at the top of the file names the same unit (what a reader of the file sees first)."""
    for path in SHIPPED:
        head = path.read_text().split("\nkernel:")[0].replace("\n# ", " ")
        said = head.split(" Bound at the default size:")[1] if " Bound at the default size:" in head else ""
        for arch, unit in load_workload(path).bound.items():
            assert f"{unit} on {arch}" in said or unit == "latency" and said.startswith(" latency"), (path.name, arch)


@pytest.mark.parametrize("path, arch, unit", CASES)
def test_a_run_at_the_default_size_is_bound_by_the_named_unit(path, arch, unit):
    metrics = gpusim.run(path, arch).metrics
    busiest, pct = busiest_unit(metrics)
    shown = {name: round(metrics.get(key, 0.0), 1) for name, key in UNIT_METRICS.items()}
    assert busiest == unit, (path.name, arch, shown)
    if unit != "latency":
        assert pct >= BOUND_FLOOR


@pytest.mark.parametrize("bound, expected", [
    ("tensor", "bound: expected a mapping of arch names to units"),
    ("{h100: fastest}", "bound: 'h100': 'fastest': expected an arch name and one of tensor, fma"),
    ("{}", "bound: expected a mapping of arch names to units"),
])
def test_a_bad_bound_is_a_one_line_error_naming_the_file_and_field(tmp_path, bound, expected):
    from gpusim.workload.yamlio import WorkloadError

    text = (ROOT / "workloads/vecadd.yaml").read_text()
    start = text.index("\nbound:") + 1
    bad = tmp_path / "bad.yaml"
    bad.write_text(text[:start] + f"bound: {bound}\n" + text[text.index("\n", start) + 1:])
    with pytest.raises(WorkloadError) as err:
        load_workload(bad)
    message = str(err.value)
    assert "\n" not in message and str(bad) in message and expected in message
