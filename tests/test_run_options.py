"""Run options are declared once (gpusim.options.RunOptions): the library, both commands' flags, `sweep --vary`,
the record and the reference are made from that declaration, and every value is checked when the options are
made."""

from __future__ import annotations

import attrs
import pytest

import gpusim
from gpusim import cli, options as run_options
from gpusim.errors import GpusimError
from gpusim.options import OptionInfo, RunOptions, option, parse_integer, reference_rows, variables

pytestmark = pytest.mark.fast


def _help(command: str) -> str:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices[command].format_help()


def test_every_option_is_a_flag_of_run_and_sweep_and_a_row_of_the_reference():
    names = [f.name for f in attrs.fields(RunOptions)]
    assert len(names) >= 12
    run_help, sweep_help = _help("run"), _help("sweep")
    for name in names:
        flag = "--" + name.replace("_", "-")
        assert flag in run_help and flag in sweep_help, flag
    assert [row[0] for row in reference_rows()] == names


def test_a_new_option_declared_once_reaches_every_surface(monkeypatch):
    """A throwaway option, declared as one field, shows up in `run --help`, `sweep --vary`, the record and the
    reference, with nothing else written for it."""
    knob = option(3, OptionInfo("a throwaway knob for this test", unit="widgets", range=">= 0",
                                parse=parse_integer, vary="throwaway_knob"))
    extended = attrs.make_class("RunOptions", {"throwaway_knob": knob}, bases=(RunOptions,), frozen=True,
                                kw_only=True)
    monkeypatch.setattr(run_options, "RunOptions", extended)
    assert "--throwaway-knob" in _help("run") and "--throwaway-knob" in _help("sweep")
    assert variables()["throwaway_knob"] == "throwaway_knob"
    from gpusim.sweep import kind

    assert kind("throwaway_knob") == "option"
    assert extended(throwaway_knob=5).record()["throwaway_knob"] == 5
    assert any(row[0] == "throwaway_knob" and row[3] == "widgets" for row in reference_rows())
    args = cli.build_parser().parse_args(["run", "w.yaml", "--arch", "h100", "--throwaway-knob", "7"])
    assert run_options.options_from_args(args).throwaway_knob == 7


def test_overrides_apply_to_the_options_given():
    base = RunOptions(sms=4, sample="off")
    result = gpusim.run("workloads/vecadd.yaml", "h100", base, params={"n": 4096}, sms=2)
    assert result.options["sms"] == 2 and result.options["sample"] == "off"
    assert result.to_dict()["options"] == attrs.evolve(base, sms=2).record()


@pytest.mark.parametrize("changes, message", [
    ({"sms": 0}, "--sms 0: expected an integer >= 1"),
    ({"sync_window": 0}, "--sync-window 0: expected a whole number of cycles"),
    ({"sample": "maybe"}, "--sample maybe: expected auto, on, off"),
    ({"sample_trips": 8, "sample": "off"}, "--sample-trips 8: sets the sampled runs' loop trips"),
    ({"regs": 0}, "regs"),
    ({"scheduler": "fifo"}, "unknown scheduler 'fifo': expected one of"),
    ({"clock": "turbo"}, "--clock turbo: expected boost or sustained or a clock of at least 100 MHz"),
    ({"clock": 50}, "--clock 50: expected boost or sustained or a clock of at least 100 MHz"),
    ({"clock": float("nan")}, "--clock nan: expected boost or sustained"),
])
def test_a_bad_value_is_one_line_when_the_options_are_made(changes, message):
    with pytest.raises(GpusimError) as caught:
        RunOptions(**changes)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_an_unknown_option_is_a_type_error_as_for_any_keyword():
    with pytest.raises(TypeError, match="unexpected keyword argument 'smss'"):
        gpusim.run("workloads/vecadd.yaml", "h100", smss=2)


def test_options_are_frozen_and_numpy_integers_become_ints():
    import numpy as np

    options = RunOptions(sms=np.int64(4), seed=np.int32(7))
    assert type(options.sms) is int and type(options.seed) is int
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        options.sms = 2  # type: ignore[misc]
