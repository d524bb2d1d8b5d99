"""Hostile input to workloads, the command line and gpusim.run: every case ends in a result or in a
one-line GpusimError naming the file, line or flag and what was expected, in bounded time, with no traceback,
hang, stray warning or silent clamp. Regression tests first, then generators that mutate the shipped workloads
and draw argument lists and keyword arguments (each case within a time budget, each test under a pytest-timeout
limit; their counts are printed, -s)."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import math
import re
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpusim
from gpusim import cli
from gpusim.api import check_size, engine_rate, run
from gpusim.options import MAX_INSTRUCTIONS
from gpusim.errors import GpusimError, one_line, shorten
from gpusim.report.workload_show import mix_record
from gpusim.workload import kernel_mix, load_workload, warp_stream
from gpusim.workload import mix as mix_module

from tests.conftest import ROOT, kernel_workloads, run_cli

SHIPPED = kernel_workloads()
HEADER = "launch: {grid: [1], block: [32], registers_per_thread: 16}\n"


@pytest.fixture
def chdir_root(monkeypatch):
    monkeypatch.chdir(ROOT)


@pytest.fixture
def small_budget(monkeypatch):
    """Counting budgets a tenth of the defaults: a generated huge loop costs the CI run 0.2 s, not 2 s."""
    monkeypatch.setattr(mix_module, "COUNT_STEPS", mix_module.COUNT_STEPS // 10)


def _file(tmp_path: Path, body: str, head: str = HEADER, name: str = "k.yaml", kernel: str = "k") -> Path:
    path = tmp_path / name
    path.write_text(f"kernel: {kernel}\n{head}program:\n{body}")
    return path


def _error(fn, *args, **kwargs) -> str:
    with pytest.raises(GpusimError) as info:
        fn(*args, **kwargs)
    message = str(info.value)
    assert "\n" not in message and len(message) < 700, message
    return message


def _cli(*argv: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of the command line run in this process (much faster than a subprocess)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(list(argv))
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code
    return code, out.getvalue(), err.getvalue()


class _Stop(Exception):
    """Raised from on_count: the size check passed and the run would start (the tests do not simulate it)."""


def _stop(mix):
    raise _Stop(mix)


# --- 2. sizes beyond what can be simulated are refused before simulating, counting in bounded time ----------------

def test_a_loop_of_a_trillion_trips_is_counted_arithmetically_and_refused(tmp_path):
    """loop: 10**12 around an instruction: 10^12 + 1 warp-instructions, counted at once; a run refuses it with
    the count, the time it would take at the engine's stated rate, and how to raise the limit."""
    path = _file(tmp_path, "  - loop: 1000000000000\n    body: [{op: FADD, dst: r1}]\n")
    started = time.perf_counter()
    mix = kernel_mix(load_workload(path))
    assert mix.total_warp_insts == 10**12 + 1 and not mix.estimated
    message = _error(run, path, "h100", sample="off")
    assert time.perf_counter() - started < 5
    assert str(path) in message and "1,000,000,000,001 warp-instructions" in message
    assert f"~{engine_rate():,} warp-instructions/s" in message and "days" in message
    assert "--max-instructions" in message and "--sample auto or on" in message
    sampled = run(path, "h100")  # by default (--sample auto) its steady state is simulated and the rest projected
    assert sampled.sampling["method"] == "loop trips" and sampled.metrics["smsp__inst_executed.sum"] == 10**12 + 1
    assert sampled.metrics["gpu_sim_cycle"] >= 10**12  # at most one warp-instruction a cycle: one warp


def test_a_loop_whose_body_reads_its_index_is_estimated_within_the_budget(tmp_path):
    """The body depends on i, so trips cannot be multiplied: counting stops at its budget and extrapolates."""
    path = _file(tmp_path, "  - loop: 1000000000000\n    body: [{op: FADD, dst: r1, pred: 'i % 2 == 0'}]\n")
    started = time.perf_counter()
    mix = kernel_mix(load_workload(path), steps=50_000)
    assert time.perf_counter() - started < 5
    assert mix.estimated and abs(mix.total_warp_insts - 10**12) < 10**9
    assert "about 1,000,000,000,000 warp-instructions" in _error(run, path, "h100", sample="off")


@pytest.mark.parametrize("inner", ["{loop: 0, body: [{op: FADD, dst: r1}]}", "{exit: 'lane > 99'}",
                                   "{exit: 'lane > 99 + i'}"])
def test_a_trillion_trips_that_issue_nothing_are_refused_too(tmp_path, inner):
    """A loop around nothing that issues (an empty inner loop, an exit no lane takes) would keep the stream busy
    for ever with no instruction to count: the trips count too."""
    path = _file(tmp_path, f"  - loop: 1000000000000\n    body: [{inner}]\n")
    assert kernel_mix(load_workload(path), steps=20_000).trips >= 10**12 * 0.99
    message = _error(run, path, "h100")
    assert re.search(r"its loops take (about )?1,0[0-9,]+ trips \(issuing [01] warp-instructions\); the limit is "
                     r"2,000,000,000", message), message


@pytest.mark.fast
def test_repeat_of_a_billion_is_counted_at_once_and_announced(tmp_path):
    path = _file(tmp_path, "  - {op: FADD, dst: r1, repeat: 1000000000}\n")
    kernel = load_workload(path)
    assert kernel_mix(kernel).total_warp_insts == check_size(kernel).total_warp_insts == 10**9 + 1
    with pytest.raises(_Stop) as info:  # under the default limit: it would run, and says so first
        run(path, "h100", on_count=_stop)
    assert info.value.args[0].total_warp_insts == 10**9 + 1
    assert "1,000,000,001 warp-instructions" in _error(run, path, "h100", max_instructions=10**8)


@pytest.mark.fast
def test_a_predicated_repeat_of_a_billion_is_estimated(tmp_path):
    path = _file(tmp_path, "  - {op: FADD, dst: r1, repeat: 1000000000, pred: 'rep % 3 == 0'}\n")
    mix = kernel_mix(load_workload(path), steps=20_000)
    assert mix.estimated and abs(mix.total_warp_insts - 10**9) < 10**7


@pytest.mark.fast
def test_a_huge_grid_of_differing_warps_is_estimated_from_warps_spread_over_it(tmp_path):
    """2^31 - 1 blocks whose warps exit at different points (every warp differs): a sample spread over the grid."""
    path = _file(tmp_path, "  - {exit: 'gtid >= 1000'}\n  - {op: FADD, dst: r1, repeat: 10}\n",
                 head="launch: {grid: [2147483647], block: [64], registers_per_thread: 16}\n")
    started = time.perf_counter()
    mix = kernel_mix(load_workload(path), steps=30_000)
    assert time.perf_counter() - started < 5 and mix.estimated
    exact = (2**31 - 1) * 2  # one EXIT per warp; the first 1000 threads' warps also run 10 FADDs (and no more)
    assert exact <= mix.total_warp_insts < exact * 1.05  # (warp 0, one of the sample, runs the FADDs)


def test_estimates_agree_with_exact_counts_where_both_are_possible():
    kernel = load_workload(ROOT / "workloads/vecadd.yaml", {"n": 200000})
    exact, estimate = kernel_mix(kernel), kernel_mix(kernel, steps=20_000)
    assert not exact.estimated and estimate.estimated
    assert abs(estimate.total_warp_insts - exact.total_warp_insts) <= 0.02 * exact.total_warp_insts


@pytest.mark.fast
def test_grid_and_block_beyond_cuda_limits_are_refused_at_load(tmp_path):
    for launch, field in (("grid: [1000000000000]", "grid.x"), ("grid: [1, 70000]", "grid.y"),
                          ("block: [2048]", "block.x"), ("block: [1, 1, 65]", "block.z")):
        head = "launch: {" + (launch if "grid" in launch else "grid: [1]") + ", " \
               + (launch if "block" in launch else "block: [32]") + ", registers_per_thread: 16}\n"
        message = _error(load_workload, _file(tmp_path, "  - {op: FADD, dst: r1}\n", head=head))
        assert "k.yaml:2:" in message and f"CUDA's limit for {field}" in message


@pytest.mark.fast
def test_max_instructions_raises_and_lowers_the_limit():
    fma_chain = ROOT / "workloads/microbench/fma_chain.yaml"
    message = _error(run, fma_chain, "h100", max_instructions=1000)
    assert "4,099 warp-instructions" in message and "the limit is 1,000" in message
    assert run(fma_chain, "h100", params={"n": 64}, max_instructions=100).metrics["smsp__inst_executed.sum"] == 67
    assert MAX_INSTRUCTIONS == 2_000_000_000


def test_cli_refuses_a_huge_kernel_in_one_line(tmp_path):
    path = _file(tmp_path, "  - loop: 1000000000000\n    body: [{op: FADD, dst: r1}]\n")
    proc = run_cli("run", str(path), "--arch", "h100", "--sample", "off")  # (one real process: what a user sees)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "warp-instructions" in proc.stderr
    code, _, err = _cli("run", str(ROOT / "workloads/microbench/fma_chain.yaml"), "--arch", "h100",
                        "--max-instructions", "10")
    assert code == 1 and "the limit is 10 " in err and err.count("\n") == 1


@pytest.mark.fast
def test_workload_show_says_when_counts_are_estimated(tmp_path, monkeypatch):
    monkeypatch.setattr(mix_module, "COUNT_STEPS", 20_000)  # (the default budget takes about 2 s)
    path = _file(tmp_path, "  - loop: 1000000000000\n    body: [{op: FADD, dst: r1, pred: 'i % 2 == 0'}]\n")
    code, out, err = _cli("workload", "show", str(path))
    assert code == 0 and err == "", err
    assert "about 1,000,000,000,000 warp-instructions" in out and "(counts estimated" in out
    kernel = load_workload(path)
    assert mix_record(kernel, kernel_mix(kernel, steps=1000))["estimated"].startswith("estimated")
    assert "estimated" not in mix_record(kernel, kernel_mix(load_workload(ROOT / "workloads/reduction.yaml")))


# --- 6. silent clamps become errors ----------------------------------------------------------------------------

@pytest.mark.fast
@pytest.mark.parametrize("body, line, expected", [
    ("  - loop: -3\n    body: [{op: FADD, dst: r1}]\n", 4, "loop count: expected a whole number >= 0, got -3"),
    ("  - loop: true\n    body: [{op: FADD, dst: r1}]\n", 4, "loop count: expected a whole number >= 0, got True"),
    ("  - loop: 2.5\n    body: [{op: FADD, dst: r1}]\n", 4, "loop count: expected a whole number >= 0, got 2.5"),
    ("  - {op: FADD, dst: r1, repeat: -1}\n", 4, "repeat: expected a whole number >= 0, got -1"),
    ("  - {op: FADD, dst: r1, repeat: true}\n", 4, "repeat: expected a whole number >= 0, got True"),
    ("  - loop: 2\n    var: lane\n    body: [{op: FADD, dst: r1}]\n", 4, "loop var 'lane' shadows the built-in"),
    ("  - loop: 2\n    var: rep\n    body: [{op: FADD, dst: r1}]\n", 4, "loop var 'rep' shadows the built-in"),
    ("  - loop: 2\n    var: n\n    body: [{op: FADD, dst: r1}]\n", 6, "loop var 'n' shadows a parameter or buffer"),
    ("  - loop: 2\n    var: x\n    body: [{op: FADD, dst: r1}]\n", 6, "loop var 'x' shadows a parameter or buffer"),
])
def test_silent_clamps_are_load_errors(tmp_path, body, line, expected):
    head = HEADER if line == 4 else "params: {n: 3}\nbuffers: {x: {bytes: 64}}\n" + HEADER
    message = _error(load_workload, _file(tmp_path, body, head=head))
    assert f"k.yaml:{line}:" in message and expected in message, message


@pytest.mark.fast
@pytest.mark.parametrize("head, body, expected", [
    ('params: {"n\\n": 3}\n', "  - {op: FADD, dst: r1}\n", "params: 'n\\n' is not a usable parameter name"),
    ("", '  - loop: 2\n    var: "i\\n"\n    body: [{op: FADD, dst: r1}]\n', "loop var must be a name, got 'i\\n'"),
    ("", '  - {op: FADD, dst: "r1\\n"}\n', "'dst': 'r1\\n' is not a register name"),
])
def test_a_name_with_a_trailing_newline_is_not_a_name(tmp_path, head, body, expected):
    """A regex's '$' matches before a final newline: names are matched to the end of the text (found by the
    generated gpusim.run keywords: params={"n\\n": ...} printed a raw newline)."""
    message = _error(load_workload, _file(tmp_path, body, head=head + HEADER))
    assert expected in message, message
    assert "--set 'n\\n': expected NAME=VALUE" in _error(run, "workloads/vecadd.yaml", "h100", params={"n\n": 1})


@pytest.mark.fast
def test_an_enclosing_loops_index_may_still_be_reused(tmp_path):
    path = _file(tmp_path, "  - loop: 2\n    body:\n      - loop: 3\n"
                           "        body: [{op: FADD, dst: r1, pred: 'i < 2'}]\n")
    assert kernel_mix(load_workload(path)).total_warp_insts == 2 * 3 + 1


@pytest.mark.fast
@pytest.mark.parametrize("body, expected", [
    ("  - {op: FADD, dst: r1, repeat: 'warp - 1'}\n", "repeat must be >= 0, got -1"),
    ("  - loop: 'lane - 4'\n    body: [{op: FADD, dst: r1}]\n", "loop count must be >= 0, got -4 in lane 0"),
    ("  - loop: 'warp - 1'\n    body: [{op: FADD, dst: r1}]\n", "loop count must be >= 0, got -1"),
    ("  - loop: 'lane < 3'\n    body: [{op: FADD, dst: r1}]\n", "loop count must be whole numbers, got true/false"),
    ("  - loop: 'lane * 0.5 if lane > 100 else 1.5'\n    body: [{op: FADD, dst: r1}]\n", "whole numbers, got 1.5"),
])
def test_negative_or_odd_counts_at_run_time_are_errors_in_the_stream_and_the_count(tmp_path, body, expected):
    kernel = load_workload(_file(tmp_path, body))
    for attempt in (lambda: list(warp_stream(kernel, 0, 0)), lambda: kernel_mix(kernel)):
        message = _error(attempt)
        assert "k.yaml:4:" in message and expected in message, message


@pytest.mark.fast
def test_exited_lanes_negative_counts_are_not_checked(tmp_path):
    """Lanes that exited never run the loop: their count is not theirs to check."""
    kernel = load_workload(_file(tmp_path, "  - {exit: 'lane < 4'}\n  - loop: 'lane - 4'\n    body: [{op: FADD}]\n"))
    assert kernel_mix(kernel).total_warp_insts == 1 + 27 + 1


@pytest.mark.fast
@pytest.mark.parametrize("params, expected", [
    ("{a: .nan}", "params: 'a' must be a finite number, got nan"),
    ("{a: .inf}", "params: 'a' must be a finite number, got inf"),
    ("{a: -.inf}", "params: 'a' must be a finite number, got -inf"),
])
def test_non_finite_parameters_are_refused(tmp_path, params, expected):
    message = _error(load_workload, _file(tmp_path, "  - {op: FADD, dst: r1}\n", head=f"params: {params}\n" + HEADER))
    assert "k.yaml:2:" in message and expected in message


@pytest.mark.fast
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e999", "1" * 5000])
def test_non_finite_overrides_are_refused_by_cli_and_api_alike(value):
    code, _, err = _cli("run", str(ROOT / "workloads/vecadd.yaml"), "--arch", "h100", "--set", f"n={value}")
    assert code == 1 and err.count("\n") == 1 and "expected a finite number" in err and len(err) < 200
    message = _error(run, ROOT / "workloads/vecadd.yaml", "h100", params={"n": float(value)})
    assert "expected a finite number" in message


@pytest.mark.fast
def test_out_of_buffer_addresses_are_errors_naming_the_buffer(tmp_path):
    head = "buffers: {x: {bytes: 128}, s: {space: shared, bytes: 64}}\n" + HEADER.replace("[32]", "[64]")
    kernel = load_workload(_file(tmp_path, "  - {op: LDG.E, dst: r1, addr: 'x + tid * 4'}\n", head=head))
    message = _error(lambda: [list(warp_stream(kernel, 0, w)) for w in (0, 1)])
    assert "k.yaml:5:" in message and "global address 0x100000080" in message
    assert "outside every global buffer" in message and "'x', which holds 128" in message
    kernel = load_workload(_file(tmp_path, "  - {op: STS, src: [r1], addr: 's + lane * 8'}\n", head=head))
    message = _error(list, warp_stream(kernel, 0, 0))  # (64 bytes declared, 128 allocated: the block's to use)
    assert "shared address 128" in message and "the block's 128 bytes of shared memory" in message
    message = _error(run, _file(tmp_path, "  - {op: LDG.E, dst: r1, addr: 'x + tid * 4'}\n", head=head), "h100")
    assert "outside every global buffer" in message


@pytest.mark.fast
def test_masked_off_lanes_addresses_are_not_checked(tmp_path):
    head = "buffers: {x: {bytes: 128}}\n" + HEADER.replace("[32]", "[64]")
    kernel = load_workload(_file(tmp_path, "  - {exit: 'tid >= 32'}\n  - {op: LDG.E, dst: r1, addr: 'x + tid * 4'}\n",
                                 head=head))
    assert run(kernel, "h100").metrics["smsp__inst_executed.sum"] == 3  # LDG and EXIT; the other warp's EXIT


def test_every_shipped_workload_stays_inside_its_buffers():
    """The bounds check is an error, not a warning, because no shipped workload needs out-of-buffer addresses
    (every warp of every one was walked at its default parameters): here, the first and last blocks' warps at
    reduced sizes."""
    small = {"gemm_tile128": {"M": 256, "N": 256, "K": 64}, "gemm_tile128_sync": {"M": 256, "N": 256, "K": 64}, "vecadd": {"n": 100000}, "reduction": {"n": 65536},
             "kv_decode": {"seq": 512}, "kv_decode_naive": {"seq": 256}, "microbench/stream": {"n": 1 << 20}}
    for path in SHIPPED:
        name = str(path.relative_to(ROOT / "workloads"))[:-5]
        kernel = load_workload(path, small.get(name, {}))
        for block in {0, kernel.launch.nblocks - 1}:
            for warp in range(kernel.launch.warps_per_block):
                for _ in warp_stream(kernel, block, warp):
                    pass


@pytest.mark.fast
def test_the_json_record_never_holds_nan_or_infinity():
    with pytest.raises(GpusimError, match=r"non-finite number at \['metrics'\]\['x'\]: it cannot be"):
        cli.record_json({"metrics": {"x": float("-inf")}})
    record = cli.record_json({"metrics": {"x": 1.5}})
    json.loads(record, parse_constant=lambda c: pytest.fail(f"{c} in the record"))


# --- 3. Ctrl-C --------------------------------------------------------------------------------------------------

def test_ctrl_c_during_a_run_is_one_line_and_exit_130():
    """Ctrl-C while the simulation runs: the metrics so far under one line that says so, exit 130."""
    proc = subprocess.Popen([sys.executable, "-m", "gpusim", "run", "workloads/microbench/fma_peak.yaml", "--arch",
                             "h100", "--set", "iters=4000", "--sms", "2", "--sample", "off"],  # 30 s or more in full
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()  # the first progress line (stderr is a pipe: plain lines, 5 s apart)
        if line.startswith("note: "):  # a run of more than a minute at the engine's rate says so before it starts
            line = proc.stderr.readline()
        assert line.startswith("gpusim: ") and "warp-inst/s, ETA" in line, line
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert out.startswith("interrupted at cycle ") and out.splitlines()[0].endswith("the metrics so far"), out[:300]


# --- 9. one short line, no stray warnings ---------------------------------------------------------------------

@pytest.mark.fast
def test_shorten_and_one_line():
    assert shorten("a\nb") == "'a\\nb'" and len(shorten("x" * 10**6)) == 80
    assert shorten(10**100000).startswith("<an integer of about 100,00")
    assert one_line("a\nb\x00c") == "a\\nb\\x00c" and len(one_line("y" * 10**6)) <= 600


@pytest.mark.fast
@pytest.mark.parametrize("args", [
    ["run", "no\nsuch.yaml", "--arch", "h100"],
    ["run", "x" * 5000 + ".yaml", "--arch", "h100"],
    ["run", "workloads/vecadd.yaml", "--arch", "h1\n00"],
    ["run", "workloads/vecadd.yaml", "--arch", "h100", "--scheduler", "gt\no"],
    ["run", "workloads/vecadd.yaml", "--arch", "h100", "--set", "n=" + "9" * 100000],
    ["run", "workloads/vecadd.yaml", "--arch", "h100", "--set", "n\nm=3"],
    ["run", "workloads/vecadd.yaml", "--arch", "h100", "--json", ""],
    ["run", "workloads/vecadd.yaml", "--arch", "h100", "--seed", "-1"],
    ["workload", "show", "workloads/vecadd.yaml", "--first", "99999999"],
])
def test_errors_are_one_short_line(args, chdir_root):
    assert _cli_case(args, 30) is None
    code, _, err = _cli(*args)
    assert code in (1, 2) and err.count("\n") == 1 and len(err) < 700, err[:300]


def test_a_bad_file_name_is_one_line_from_a_real_process_too():
    proc = run_cli("run", "no\nsuch.yaml", "--arch", "h100")
    assert proc.returncode == 1 and proc.stderr == "error: no\\nsuch.yaml: cannot read (No such file or directory)\n"


@pytest.mark.fast
def test_an_expression_with_a_newline_is_one_line(tmp_path):
    path = _file(tmp_path, '  - {op: FADD, dst: r1, pred: "lane <\\n 3 +"}\n')
    code, _, err = _cli("workload", "show", str(path))
    assert code == 1 and err.count("\n") == 1 and "k.yaml:4:" in err and len(err) < 700, err[:300]


@pytest.mark.fast
def test_float_overflow_in_an_expression_is_an_error_not_a_numpy_warning(tmp_path):
    head = "params: {big: 1.0e+300}\nbuffers: {x: {bytes: 4096}}\n" + HEADER
    path = _file(tmp_path, "  - {op: LDG.E, dst: r1, addr: 'x + lane * big * big'}\n"
                           "  - {op: FADD, dst: r1, pred: 'lane * big * big > 0'}\n", head=head)
    for args in (["run", str(path), "--arch", "h100"], ["workload", "show", str(path)]):
        assert _cli_case(args, 30) is None  # (no warning, one line)
        code, _, err = _cli(*args)
        # the expression evaluator refuses the magnitude (beyond 2**63) before it overflows to inf
        assert code == 1 and err.count("\n") == 1 and "k.yaml:6:" in err and \
            ("got inf" in err or "beyond 2**63" in err), err
    path = _file(tmp_path, "  - {op: FADD, dst: r1, pred: 'lane * big * big > 0'}\n", head=head)
    assert _cli_case(["run", str(path), "--arch", "h100", "--json", "-"], 30) is None
    code, out, err = _cli("run", str(path), "--arch", "h100", "--json", "-")
    # a clean record (no NaN / Infinity in it) or, where the evaluator refuses the magnitude, one line
    assert (code == 0 and err == "") or (code == 1 and err.count("\n") == 1 and "k.yaml:" in err), err
    if code == 0:
        json.loads(out, parse_constant=lambda c: pytest.fail(c))


# --- 10. the API checks its arguments as the command line does ------------------------------------------------

@pytest.mark.fast
@pytest.mark.parametrize("kwargs, flags", [
    ({"scheduler": "fifo"}, ["--scheduler", "fifo"]),
    ({"seed": -1}, ["--seed", "-1"]),
    ({"seed": 2**32}, ["--seed", str(2**32)]),
    ({"sms": 0}, ["--sms", "0"]),
    ({"simt": "warp"}, ["--simt", "warp"]),
    ({"memory": "cache"}, ["--memory", "cache"]),
    ({"params": {"n": float("nan")}}, ["--set", "n=nan"]),
    ({"max_instructions": 0}, ["--max-instructions", "0"]),
])
def test_api_and_cli_refuse_the_same_values_with_the_same_message(kwargs, flags, chdir_root):
    message = _error(run, "workloads/vecadd.yaml", "h100", **kwargs)
    code, _, err = _cli("run", "workloads/vecadd.yaml", "--arch", "h100", *flags)
    assert code == 1 and err == f"error: {message}\n"


@pytest.mark.fast
@pytest.mark.parametrize("kwargs, expected", [
    ({"scheduler": 5}, "unknown scheduler 5: expected one of"),
    ({"seed": float("nan")}, "--seed nan: expected an integer"),
    ({"seed": "3"}, "--seed 3: expected an integer"),
    ({"seed": True}, "--seed True: expected an integer"),
    ({"sms": 1.5}, "--sms 1.5: expected an integer >= 1"),
    ({"simt": None}, "--simt None: expected one of stack, its"),
    ({"memory": 5}, "--memory 5: expected hierarchy or fixed, or a memory model"),
    ({"params": {"n": "abc"}}, "--set n=abc: expected a number"),
    ({"params": {5: 1}}, "--set 5: expected NAME=VALUE"),
    ({"params": "n=3"}, "params 'n=3': expected a mapping"),
    ({"max_instructions": 1e9}, "--max-instructions 1000000000.0: expected an integer >= 1"),
])
def test_api_refuses_what_the_cli_cannot_even_express(kwargs, expected):
    assert expected in _error(run, "workloads/vecadd.yaml", "h100", **kwargs)


@pytest.mark.fast
def test_api_accepts_numpy_integers_and_floats():
    result = run(ROOT / "workloads/microbench/fma_chain.yaml", "h100", sms=np.int64(1), seed=np.int32(2),
                 params={"n": np.int64(8)})
    assert result.metrics["smsp__inst_executed.sum"] == 11


# --- 5. rich markup and huge names in tables ------------------------------------------------------------------

@pytest.mark.fast
@pytest.mark.parametrize("name", ["'[/bold]'", "'[red]x[/red] [link=file:///etc]y'", '"x\\ny"'])
def test_markup_in_a_kernel_name_is_printed_not_interpreted(tmp_path, name):
    path = _file(tmp_path, "  - {op: FADD, dst: r1}\n", kernel=name)
    shown = yaml.safe_load(name)
    for args in (["run", str(path), "--arch", "h100"], ["workload", "show", str(path)]):
        code, out, err = _cli(*args)
        assert code == 0 and err == "", err
        assert (shown if shown.isprintable() else repr(shown)) in out


@pytest.mark.fast
def test_a_100000_character_name_prints_quickly_and_shortened(tmp_path):
    path = _file(tmp_path, "  - {op: FADD, dst: r1}\n", kernel="n" * 100000)
    started = time.perf_counter()
    for args in (["workload", "show", str(path)], ["run", str(path), "--arch", "h100"]):
        code, out, _ = _cli(*args)
        assert code == 0 and max(map(len, out.splitlines())) < 200
    assert time.perf_counter() - started < 10


# --- generators ------------------------------------------------------------------------------------------------

HOSTILE = [-1, 0, 1, 3, 2**31, 10**12, -10**12, 10**30, 2.5, 1e308, float("nan"), float("inf"), True, None, "",
           "lane", "lane - 40", "tid * 4096", "i", "rep", "n", "x\ny", "[/bold]", "a" * 3000, [], {}, [1, 2, 3, 4],
           {"k": 1}, "1e999", "10 ** 12", "2 ** 62", "rand(1, 0)", "lane * 1e308 * 10", "gtid * 1048576",
           "-(2 ** 40)", "1 / 0", "lane % 0", "(lane + 1) ** 64", "1 << 70", "__import__('os')", "min(lane)"]
ANY_VALUE = st.sampled_from(HOSTILE) | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=40)
SHIPPED_DATA = {p: yaml.safe_load(p.read_text()) for p in SHIPPED}


def _paths(data, prefix=()):
    """Every path (tuple of keys and indices) into a loaded workload."""
    yield prefix
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        yield from _paths(value, prefix + (key,))


def _nodes(data, want):
    """Every mapping in a loaded workload's program for which want(mapping) holds."""
    found = []
    for path in _paths(data):
        node = data
        for key in path:
            node = node[key]
        if isinstance(node, dict) and want(node):
            found.append(node)
    return found


HOSTILE_NUMBERS = st.sampled_from([-1, 0, 2**31, 10**12, -10**12, 10**30, 2.5, 1e308, float("nan"), float("inf"),
                                   -float("inf"), True, "n - 10**12", "-lane", "lane - 16", "1e999"])
HOSTILE_TEXT = st.sampled_from(["", "[/bold]", "[red]x[/red]", "x\ny", "n" * 3000, "\x00", "a\u2028b"])


def _not_a_count(value) -> bool:
    """A literal no loop count or repeat may be: negative, true/false, fractional, NaN or infinite."""
    if isinstance(value, bool) or isinstance(value, int):
        return isinstance(value, bool) or value < 0
    return isinstance(value, float) and not (math.isfinite(value) and value >= 0 and value.is_integer())


def _statements(body):
    """The statements of a program as the compiler walks them (loop bodies, then and else sides)."""
    for item in body if isinstance(body, list) else ():
        if isinstance(item, dict):
            yield item
            for key in ("body", "then", "else"):
                yield from _statements(item.get(key))


def _must_fail(data) -> str | None:
    """Why a (mutated) workload must be refused rather than run, if it must: a literal loop count or repeat
    that is negative, true/false, fractional or not finite; a non-finite parameter; a loop var shadowing a
    built-in, parameter or buffer (none is a silent clamp or a silent use)."""
    if not isinstance(data, dict):
        return None
    params = data.get("params") if isinstance(data.get("params"), dict) else {}
    buffers = data.get("buffers") if isinstance(data.get("buffers"), dict) else {}
    for name, value in params.items():
        if isinstance(value, float) and not math.isfinite(value):
            return f"parameter {name} = {value}"
    for node in _statements(data.get("program")):
        for key in ("loop", "repeat"):
            if key in node and _not_a_count(node[key]):
                return f"{key}: {node[key]!r}"
        if "loop" in node and isinstance(node.get("var"), str) and node["var"] in {"lane", "tid", "rep", "warp",
                                                                                  *params, *buffers}:
            return f"loop var {node['var']}"
    return None


@st.composite
def mutated_workloads(draw):
    """(shipped file, mutated data): one to three mutations: anywhere, a value replaced by a hostile one, a key
    dropped or added; or aimed at what the hostile-input rules name: a parameter, a loop count or repeat, a loop var, the
    kernel's name. Some must be refused, never run (_must_fail)."""
    path = draw(st.sampled_from(SHIPPED))
    data = json.loads(json.dumps(SHIPPED_DATA[path]))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["replace", "replace", "drop", "add", "param", "count", "count", "var", "name"]))
        params = data.get("params") if isinstance(data.get("params"), dict) else {}
        loops = _nodes(data, lambda node: "loop" in node)
        instrs = _nodes(data, lambda node: "op" in node)
        if kind == "param" and params:
            params[draw(st.sampled_from(sorted(params, key=str)))] = draw(HOSTILE_NUMBERS)
        elif kind == "count" and (loops or instrs):
            node = draw(st.sampled_from(loops + instrs))
            node["loop" if "loop" in node else "repeat"] = draw(HOSTILE_NUMBERS | st.sampled_from(HOSTILE))
        elif kind == "var" and loops:
            buffers = data.get("buffers") if isinstance(data.get("buffers"), dict) else {}
            draw(st.sampled_from(loops))["var"] = draw(st.sampled_from(["lane", "tid", "rep", "warp", "i", "k",
                                                                        *map(str, params), *map(str, buffers)]))
        elif kind == "name":
            data["kernel"] = draw(HOSTILE_TEXT | st.text(max_size=20))
        else:
            paths = [p for p in _paths(data) if p]
            if not paths:
                continue
            target = draw(st.sampled_from(paths))
            parent = data
            for key in target[:-1]:
                parent = parent[key]
            if kind == "drop":
                del parent[target[-1]]
            elif kind == "add" and isinstance(parent, dict):
                parent[draw(st.sampled_from(["repeat", "pred", "var", "comment", "bogus", "exit"]))] = \
                    copy.deepcopy(draw(ANY_VALUE))
            else:
                parent[target[-1]] = copy.deepcopy(draw(ANY_VALUE))
    return path, data


def _cli_case(argv: list[str], seconds: float, must_fail: str | None = None) -> str | None:
    """Run the command line in this process; None when it ended in a result or a one-line error, else what
    went wrong (a traceback's exception, a hang, a stray warning, a multi-line or huge error, invalid JSON, or
    a result where `must_fail` says why there should have been an error). A case over `seconds` is a finding;
    the test's timeout mark ends a hang."""
    out, err = io.StringIO(), io.StringIO()
    start = time.monotonic()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        warnings.simplefilter("always")
        try:
            code = cli.main(argv)
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code
        except Exception as exc:  # noqa: BLE001 - what a user would see as a traceback
            return f"{type(exc).__name__}: {shorten(str(exc), 200)}"
    if time.monotonic() - start > seconds:
        return f"no answer within {seconds} s"
    lines = err.getvalue().splitlines()
    errors = [line for line in lines if not line.startswith(("warning: ", "note: "))]
    if caught:
        return f"stray warning: {shorten(str(caught[0].message), 200)}"
    if code == 0:
        if must_fail:
            return f"accepted silently: {must_fail}"
        if errors:
            return f"exit 0 with stderr {shorten(errors, 200)}"
        if "--json" in argv:
            try:
                json.loads(out.getvalue(), parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
            except ValueError as exc:
                return f"invalid JSON: {shorten(str(exc), 100)}"
        return None
    if code not in (1, 2) or len(errors) != 1 or any(len(line) > 700 for line in lines):
        return f"exit {code} with stderr {shorten(lines, 300)}"
    return None


def _generate(strategy, check, examples: int, derandomize: bool = True):
    """Run `check` on `examples` drawn cases (the same ones every run unless `derandomize` is False); return
    (cases, findings). Findings are collected, not raised, so that one run counts them all."""
    cases, findings = [], []

    @settings(max_examples=examples, deadline=None, database=None, derandomize=derandomize,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def each(case):
        cases.append(case)
        problem = check(case)
        if problem:
            findings.append((case, problem))

    each()
    return cases, findings


def _report(what: str, cases, findings) -> None:
    print(f"\n{what}: {len(cases)} cases, {len(findings)} findings")
    for case, problem in findings[:10]:
        print(f"  {shorten(case, 300)} -> {problem}")


class _NoAliases(yaml.SafeDumper):
    def ignore_aliases(self, data):
        return True


def _mutation_check(tmp_dir: Path, budget: float):
    counter = iter(range(10**9))

    def check(case) -> str | None:
        source, data = case
        must_fail = _must_fail(data)
        path = tmp_dir / f"m{next(counter)}.yaml"
        path.write_text(yaml.dump(data, Dumper=_NoAliases, sort_keys=False))
        for argv in (["workload", "show", str(path), "--json"], ["workload", "show", str(path), "--first", "5"],
                     ["run", str(path), "--arch", "a100", "--sms", "1", "--max-instructions", "20000", "--json", "-"]):
            problem = _cli_case(argv, budget, must_fail)
            if problem:
                return f"{' '.join(argv[:2])} ({source.name}): {problem}"
        return None
    return check


FLAG_VALUES = ["0", "-1", "1", "2", "4294967296", "1e3", "nan", "", " ", "abc", "x\ny", "[/bold]", "9" * 50,
               "-", "gto", "lrr", "its", "stack", "fixed", "hierarchy", "h100", "a100", "v100", "b300"]
FLAGS = ["--arch", "--scheduler", "--simt", "--sms", "--memory", "--seed", "--set", "--max-instructions", "--json",
         "--first", "--bogus"]


@st.composite
def cli_arguments(draw):
    command = draw(st.sampled_from([["run"], ["workload", "show"]]))
    workload = draw(st.sampled_from([str(p.relative_to(ROOT)) for p in SHIPPED] + ["", "nope.yaml", "x\ny.yaml",
                                                                                  "a.traceg", "kernelslist.g"]))
    argv = command + [workload]
    if command == ["run"] and draw(st.booleans()):
        argv += ["--arch", draw(st.sampled_from(["h100", "a100", "t4", "h999", "", "x\ny"]))]
    for _ in range(draw(st.integers(0, 4))):
        flag = draw(st.sampled_from(FLAGS))
        value = draw(st.sampled_from(FLAG_VALUES) | st.text(max_size=12))
        if flag == "--set":
            value = draw(st.sampled_from(["n", "M", "iters", "blocks", "x", "", "n\n"])) + "=" + value
        argv += [flag, value]
    if command == ["run"]:
        argv += ["--sms", "1", "--max-instructions", "20000", "--json", "-"]  # bounded: a result comes quickly
    return argv


@st.composite
def api_keywords(draw):
    value = st.sampled_from(HOSTILE) | st.sampled_from(["lrr", "gto", "its", "stack", "fixed", "hierarchy", 1, 2])
    kwargs = {}
    for key in draw(st.sets(st.sampled_from(["scheduler", "simt", "sms", "seed", "memory", "params"]), max_size=3)):
        if key == "params":
            kwargs[key] = draw(st.sampled_from([None, {}, {"n": 8}, "n=3", [1]])
                               | st.dictionaries(st.sampled_from(["n", "x", "", 5, "n\n"]), value, max_size=2))
        else:
            kwargs[key] = draw(value)
    workload = draw(st.sampled_from(["workloads/microbench/fma_chain.yaml", "workloads/vecadd.yaml", 5, None,
                                     "nope.yaml", Path("workloads/microbench/divergence.yaml")]))
    arch = draw(st.sampled_from(["h100", "a100", "H100", "", 7, None, "x\ny"]))
    return workload, arch, kwargs


def _api_check(budget: float):
    def check(case) -> str | None:
        workload, arch, kwargs = case
        start = time.monotonic()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                gpusim.run(workload, arch, max_instructions=20000, **kwargs)
            except GpusimError as exc:
                message = str(exc)
                if "\n" in message or len(message) > 700:
                    return f"error not one short line: {shorten(message, 200)}"
            except Exception as exc:  # noqa: BLE001
                return f"{type(exc).__name__}: {shorten(str(exc), 200)}"
        if time.monotonic() - start > budget:
            return f"no answer within {budget} s"
        if caught:
            return f"stray warning: {shorten(str(caught[0].message), 200)}"
        return None
    return check


# A case over its budget (20 s) is a finding; a test of generated cases ends a hang at GENERATED_S (it takes a few
# seconds on the 2-core machine; its cases' budgets sum past the 600 s default)
GENERATED_S = 120


@pytest.mark.timeout(GENERATED_S)
def test_generated_mutations_of_shipped_workloads_end_in_a_result_or_one_line(tmp_path, chdir_root, small_budget):
    cases, findings = _generate(mutated_workloads(), _mutation_check(tmp_path, 20), 25)
    _report("mutated workloads", cases, findings)
    assert not findings


@pytest.mark.timeout(GENERATED_S)
def test_generated_command_lines_end_in_a_result_or_one_line(chdir_root, small_budget):
    cases, findings = _generate(cli_arguments(), lambda argv: _cli_case(argv, 20), 40)
    _report("command lines", cases, findings)
    assert not findings


@pytest.mark.timeout(GENERATED_S)
def test_generated_api_keywords_end_in_a_result_or_one_error(chdir_root):
    cases, findings = _generate(api_keywords(), _api_check(20), 40)
    _report("gpusim.run keywords", cases, findings)
    assert not findings


@pytest.mark.benchmark
def test_many_generated_hostile_cases(tmp_path, chdir_root):
    """The larger variant, new cases each run (python -m pytest -m benchmark -n 0 -s
    tests/cli/test_hostile_workload_cli.py)."""
    total = []
    for what, strategy, check, n in (
            ("mutated workloads", mutated_workloads(), _mutation_check(tmp_path, 60), 400),
            ("command lines", cli_arguments(), lambda argv: _cli_case(argv, 60), 400),
            ("gpusim.run keywords", api_keywords(), _api_check(60), 300)):
        cases, findings = _generate(strategy, check, n, derandomize=False)
        _report(what, cases, findings)
        total += findings
    assert not total


@pytest.mark.fast
def test_ctrl_c_while_the_command_line_imports_is_one_line_and_exit_130(tmp_path):
    """A SIGINT that lands before cli.main runs (gpusim's own imports): the same line and code, no traceback.
    A sitecustomize makes the import of gpusim.native raise KeyboardInterrupt, deterministically."""
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\n"
        "class Interrupt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'gpusim.native':\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, Interrupt())\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    proc = subprocess.run([sys.executable, "-m", "gpusim", "archs"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 130 and proc.stderr == "interrupted\n", proc.stderr
    library = subprocess.run([sys.executable, "-c", "import gpusim"], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=60)  # a program importing gpusim keeps Python's own handling
    assert library.returncode != 130 and "KeyboardInterrupt" in library.stderr


@pytest.mark.parametrize("arch", ["a100", "a100,h100"])
def test_an_unwritable_json_path_is_one_line_naming_the_flag(tmp_path, arch):
    """`run`, alone and side by side: a --json path it cannot write is one line naming the flag, the path and why,
    with no traceback."""
    from tests.conftest import run_cli

    target = tmp_path / "no-such-dir" / "r.json"
    p = run_cli("run", "workloads/microbench/fma_peak.yaml", "--arch", arch, "--sms", "1", "--quiet",
                "--json", str(target))
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
    assert lines[-1] == f"error: --json {target}: cannot write (No such file or directory)", lines


def test_app_and_llm_write_their_record_through_one_function_that_names_a_bad_path_in_one_line():
    """cli.record.write_record (`gpusim app run` and `gpusim llm`): a path it cannot write is one line naming
    --json, the path (shortened where long) and why."""
    from gpusim.cli import app_command, llm_command
    from gpusim.cli.record import write_record

    assert app_command.write_record is write_record is llm_command.write_record
    long = "/no-such-dir/" + "x" * 200 + ".json"
    with pytest.raises(gpusim.GpusimError, match=r"^--json '/no-such-dir/x+\.\.\.x+\.\.\.: cannot write "
                                                 r"\(No such file or directory\)$") as caught:
        write_record(long, "{}")
    assert len(str(caught.value)) < 120
