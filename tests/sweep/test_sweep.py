"""Issue 14, item 2: `gpusim sweep`: variations parsed, the Cartesian product run in parallel with the same rows
whatever runs it (one process, a process pool, a Dask local cluster), failing points as rows, --resume, CSV and
JSON output, Ctrl-C keeping the finished rows, arch what-ifs, plots and the Python API. Small kernels on 2 SMs;
no timing assertions."""

from __future__ import annotations

import csv
import errno
import importlib
import importlib.util
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import gpusim
from gpusim.errors import GpusimError
from gpusim.sweep import (DEFAULT_METRICS, ERROR, LIMITER, OCCUPANCY, WALL, evolve_arch, parse_values, parse_vary,
                          points)

ROOT = Path(__file__).resolve().parents[2]
FMA = ROOT / "workloads" / "microbench" / "fma_peak.yaml"
GEMM = ROOT / "workloads" / "gemm_tile128_sync.yaml"
SMALL_FMA = ["--set", "blocks=8", "--set", "iters=8", "--sms", "2"]
SMALL_GEMM = ["--set", "M=512", "--set", "N=512", "--set", "K=256", "--sms", "2"]
HAS_LAUNCH_OVERRIDES = "regs" in __import__("inspect").signature(gpusim.run).parameters


def cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "gpusim", "sweep", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, timeout=timeout)


def csv_rows(path: Path, wall: bool = False) -> list[dict]:
    with open(path, newline="") as fh:
        return [{k: v for k, v in r.items() if wall or k != WALL} for r in csv.DictReader(fh)]


def as_rows(result) -> list[dict]:
    """The Python API's rows as dicts (a DataFrame where pandas is installed)."""
    if isinstance(result, list):
        return result
    return result.astype(object).where(result.notna(), None).to_dict(orient="records")


# --- variations ---------------------------------------------------------------------------------------------------

def test_values_lists_ranges_and_sizes():
    assert parse_values("launch.regs", "32:64:16") == [32, 48, 64]  # stop included when the steps land on it
    assert parse_values("launch.regs", "32:70:16") == [32, 48, 64]
    assert parse_values("STAGES", "4:1:-1") == [4, 3, 2, 1]
    assert parse_values("x", "1:3") == [1, 2, 3]
    assert parse_values("x", "0.5:1:0.25") == [0.5, 0.75, 1.0]
    assert parse_values("launch.smem", "48K,64KB,1M") == [49152, 65536, 1 << 20]
    assert parse_values("launch.smem", "16K:48K:16K") == [16384, 32768, 49152]
    assert parse_values("arch.memory.l2.size_bytes", "25M,50M") == [25 << 20, 50 << 20]
    assert parse_values("scheduler", "lrr,gto") == ["lrr", "gto"]
    assert parse_values("arch", "h100,arch/a100.yaml") == ["h100", "arch/a100.yaml"]
    assert all(type(v) is int for v in parse_values("launch.regs", "32:255:8"))
    assert parse_vary("launch.regs=32,64") == ("launch.regs", [32, 64])
    assert points({"a": [1, 2], "b": ["x", "y"]}) == [{"a": 1, "b": "x"}, {"a": 1, "b": "y"},
                                                      {"a": 2, "b": "x"}, {"a": 2, "b": "y"}]


@pytest.mark.parametrize("text", ["launch.regs", "=1,2", "x=", "x=1,,2", "x=1:2:0", "x=5:1:1", "x=1:a:1",
                                  "x=1,1", "x=1:2:3:4", "x=1:1000000000"])
def test_bad_variations_are_one_line_errors(text):
    with pytest.raises(GpusimError):
        parse_vary(text)


def test_unknown_names_and_conflicts_are_whole_sweep_errors(tmp_path):
    p = cli(FMA, "--arch", "h100", *SMALL_FMA, "--vary", "nosuch=1,2", "--out", tmp_path / "x.csv")
    lines = [line for line in p.stderr.splitlines() if "running the engine's sources" not in line]
    assert p.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: --vary nosuch: not a parameter of")
    assert "iters" in p.stderr and "launch.regs" in p.stderr
    p = cli(FMA, "--arch", "h100", *SMALL_FMA, "--vary", "threads=64", "--out", tmp_path / "x.txt")
    assert p.returncode == 1 and "expected a .csv, .json or .parquet file" in p.stderr
    p = cli(FMA, "--arch", "h100", "--vary", "threads=64", "--dask-scheduler", "local", "--out", tmp_path / "x.csv")
    assert p.returncode == 1 and "--executor dask" in p.stderr


# --- the rows -------------------------------------------------------------------------------------------------------

def test_rows_are_the_same_whatever_the_job_count(tmp_path):
    args = [FMA, "--arch", "h100", *SMALL_FMA, "--vary", "threads=64,128", "--vary", "scheduler=gto,lrr", "--quiet"]
    one, two = cli(*args, "--jobs", "1", "--out", tmp_path / "1.csv"), cli(*args, "--jobs", "2", "--out",
                                                                              tmp_path / "2.csv")
    assert one.returncode == 0 and two.returncode == 0, one.stderr + two.stderr
    rows = csv_rows(tmp_path / "1.csv")
    assert rows == csv_rows(tmp_path / "2.csv")
    assert [(r["threads"], r["scheduler"]) for r in rows] == [("64", "gto"), ("64", "lrr"), ("128", "gto"),
                                                              ("128", "lrr")]
    assert list(rows[0]) == ["threads", "scheduler", *DEFAULT_METRICS, OCCUPANCY, LIMITER, ERROR]
    assert all(r[ERROR] == "" and int(r["gpu_sim_cycle"]) > 0 for r in rows)
    assert rows[0][LIMITER] in ("warps", "blocks", "registers", "shared_memory", "barriers") or "+" in rows[0][LIMITER]
    assert two.stdout.rstrip().endswith("4 rows")


@pytest.mark.skipif(not HAS_LAUNCH_OVERRIDES, reason="gpusim.run has no launch overrides yet")
def test_launch_regs_varies_the_theoretical_occupancy_and_its_limiter(tmp_path):
    out = tmp_path / "regs.json"
    p = cli(GEMM, "--arch", "h100", *SMALL_GEMM, "--vary", "launch.regs=48,128", "--quiet", "--out", out)
    assert p.returncode == 0, p.stderr
    rows = json.loads(out.read_text())
    assert [(r["launch.regs"], r[OCCUPANCY], r[LIMITER]) for r in rows] == [(48, 37.5, "shared_memory"),
                                                                           (128, 25.0, "registers")]
    p = cli(GEMM, "--arch", "h100", *SMALL_GEMM, "--regs", "128", "--vary", "STAGES=2,4", "--metrics",
            "gpu_sim_cycle", "--quiet", "--out", out)  # a fixed override, at every point
    assert p.returncode == 0, p.stderr
    assert [(r["STAGES"], r[OCCUPANCY]) for r in json.loads(out.read_text())] == [(2, 25.0), (4, 25.0)]


@pytest.mark.skipif(not HAS_LAUNCH_OVERRIDES, reason="gpusim.run has no launch overrides yet")
def test_a_failing_point_is_a_row_with_its_error_and_the_sweep_goes_on(tmp_path):
    out = tmp_path / "fail.csv"
    # 1,024 threads x 128 registers need 131,072 registers: no block fits; 300 is over the ISA's 255
    p = cli(FMA, "--arch", "h100", *SMALL_FMA, "--set", "threads=1024", "--vary", "launch.regs=32,128,300",
            "--quiet", "--out", out)
    assert p.returncode == 0, p.stderr
    rows = csv_rows(out)
    assert [r["launch.regs"] for r in rows] == ["32", "128", "300"]
    assert rows[0][ERROR] == "" and int(rows[0]["gpu_sim_cycle"]) > 0
    assert "cannot be resident" in rows[1][ERROR] and rows[1]["gpu_sim_cycle"] == ""
    assert float(rows[1][OCCUPANCY]) == 0.0 and rows[1][LIMITER] == "registers"  # what an occupancy study wants
    assert "255" in rows[2][ERROR] and "\n" not in rows[2][ERROR]
    assert "2 with an error" in p.stdout


def test_a_bad_value_is_its_rows_error(tmp_path):
    out = tmp_path / "bad.json"
    p = cli(FMA, "--arch", "h100", *SMALL_FMA, "--vary", "scheduler=lrr,nosuch", "--vary", "arch=h100,nosuch_gpu",
            "--quiet", "--out", out)
    assert p.returncode == 0, p.stderr
    rows = json.loads(out.read_text())
    assert [bool(r[ERROR]) for r in rows] == [False, True, True, True]
    assert "unknown scheduler" in rows[2][ERROR] or "nosuch" in rows[2][ERROR]
    assert rows[0]["gpu_sim_cycle"] > 0 and rows[1]["gpu_sim_cycle"] is None


def test_json_output_holds_typed_values(tmp_path):
    out = tmp_path / "r.json"
    p = cli(FMA, "--arch", "h100", *SMALL_FMA, "--vary", "iters=4:8:4", "--metrics", "gpu_sim_cycle,gpu_ipc",
            "--quiet", "--out", out)
    assert p.returncode == 0, p.stderr
    rows = json.loads(out.read_text())
    assert [list(r) for r in rows] == [["iters", "gpu_sim_cycle", "gpu_ipc", OCCUPANCY, LIMITER, ERROR, WALL]] * 2
    assert [r["iters"] for r in rows] == [4, 8] and rows[0]["gpu_sim_cycle"] < rows[1]["gpu_sim_cycle"]
    assert isinstance(rows[0]["gpu_ipc"], float) and isinstance(rows[0][WALL], float)


def test_resume_runs_only_the_missing_points_and_keeps_point_order(tmp_path):
    out = tmp_path / "r.csv"
    base = [FMA, "--arch", "h100", *SMALL_FMA, "--quiet", "--jobs", "1", "--out", out]
    assert cli(*base, "--vary", "iters=8", "--vary", "threads=64,128").returncode == 0
    first = csv_rows(out, wall=True)
    p = cli(*base, "--vary", "iters=4,8", "--vary", "threads=64,128", "--resume")
    assert p.returncode == 0, p.stderr
    rows = csv_rows(out, wall=True)
    assert [(r["iters"], r["threads"]) for r in rows] == [("4", "64"), ("4", "128"), ("8", "64"), ("8", "128")]
    assert rows[2:] == first  # the earlier rows kept as they were (their wall time too): not run again
    again = cli(*base, "--vary", "iters=4,8", "--vary", "threads=64,128", "--resume")
    assert again.returncode == 0 and csv_rows(out, wall=True) == rows
    p = cli(*base, "--vary", "threads=64,128", "--resume")  # other columns: refused, the file left alone
    assert p.returncode == 1 and "--resume" in p.stderr and csv_rows(out, wall=True) == rows


def test_ctrl_c_keeps_the_finished_rows_and_resume_completes_them(tmp_path):
    out = tmp_path / "c.csv"
    args = [FMA, "--arch", "h100", "--sms", "2", "--set", "blocks=8", "--vary", "iters=1000,1001,1002,1003,1004",
            "--jobs", "1", "--out", out]
    proc = subprocess.Popen([sys.executable, "-m", "gpusim", "sweep", *map(str, args)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            if out.exists() and len(out.read_text().splitlines()) >= 2:  # the header and the first row
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr
    assert stderr.strip().splitlines()[-1].startswith("interrupted: ") and "--resume" in stderr
    rows = csv_rows(out)
    assert 1 <= len(rows) < 5 and all(r[ERROR] == "" and r["gpu_sim_cycle"] for r in rows)
    assert [r["iters"] for r in rows] == ["1000", "1001", "1002", "1003", "1004"][:len(rows)]


def test_an_arch_what_if_changes_a_metric_and_a_bad_field_is_the_rows_error(tmp_path):
    out = tmp_path / "w.csv"
    p = cli(FMA, "--arch", "h100", *SMALL_FMA, "--set", "threads=1024", "--vary",
            "arch.sm.registers=65536,32768,1001", "--quiet", "--out", out)
    assert p.returncode == 0, p.stderr
    rows = csv_rows(out)
    assert float(rows[0][OCCUPANCY]) == 100.0 and float(rows[1][OCCUPANCY]) == 50.0
    assert rows[1][LIMITER] == "registers" and rows[0][ERROR] == rows[1][ERROR] == ""
    assert int(rows[1]["gpu_sim_cycle"]) > int(rows[0]["gpu_sim_cycle"])  # half the blocks at once: more waves
    assert "multiple of sub_partitions" in rows[2][ERROR]  # the spec's own validator
    p = cli(FMA, "--arch", "h100", *SMALL_FMA, "--vary", "arch.sm.nosuch=1", "--vary",
            "arch.memory.l2.size_bytes=25M", "--quiet", "--out", out)
    rows = csv_rows(out)
    assert p.returncode == 0 and "has no field 'nosuch'" in rows[0][ERROR] and "registers" in rows[0][ERROR]


def test_evolve_arch_rebuilds_nested_specs():
    h100 = gpusim.load_arch("h100")
    spec = evolve_arch(h100, {"memory.l2.size_bytes": 25 << 20, "sm.max_blocks": 16})
    assert spec.memory.l2.size_bytes == 25 << 20 and spec.sm.max_blocks == 16
    assert spec.memory.l1 == h100.memory.l1 and h100.memory.l2.size_bytes != 25 << 20
    with pytest.raises(GpusimError, match="is a group of fields"):
        evolve_arch(h100, {"memory": 1})
    with pytest.raises(GpusimError, match="expected"):
        evolve_arch(h100, {"clocks.core_mhz": -5})


def test_plots_one_png_per_metric_and_axis(tmp_path):
    p = cli(FMA, "--arch", "h100", *SMALL_FMA, "--vary", "threads=64,128", "--vary", "scheduler=lrr,gto",
            "--metrics", "gpu_sim_cycle,dram__bytes.sum.per_second", "--quiet", "--out", tmp_path / "p.csv",
            "--plot", tmp_path / "plots")
    assert p.returncode == 0, p.stderr
    pngs = sorted(x.name for x in (tmp_path / "plots").iterdir())
    assert len(pngs) == 6 and all(x.endswith(".png") for x in pngs)  # (2 metrics + occupancy) x 2 axes
    assert "gpu_sim_cycle__vs__threads.png" in pngs


def test_python_api_returns_the_rows():
    rows = as_rows(gpusim.sweep(FMA, arch="h100", vary={"threads": [64, 128], "scheduler": "lrr,gto"}, jobs=1,
                                metrics=["gpu_sim_cycle"], sms=2, params={"blocks": 8, "iters": 8}))
    assert [(r["threads"], r["scheduler"]) for r in rows] == [(64, "lrr"), (64, "gto"), (128, "lrr"), (128, "gto")]
    assert all(r[ERROR] == "" and r["gpu_sim_cycle"] > 0 for r in rows)
    pool = as_rows(gpusim.sweep(FMA, arch="h100", vary={"threads": [64, 128], "scheduler": "lrr,gto"}, jobs=2,
                                metrics=["gpu_sim_cycle"], sms=2, params={"blocks": 8, "iters": 8}))
    assert [{k: v for k, v in r.items() if k != WALL} for r in pool] == \
        [{k: v for k, v in r.items() if k != WALL} for r in rows]


def test_dask_local_cluster_gives_the_pools_rows(tmp_path):
    pytest.importorskip("dask.distributed")
    args = [FMA, "--arch", "h100", *SMALL_FMA, "--vary", "threads=64,128", "--vary", "scheduler=gto,lrr", "--quiet",
            "--jobs", "2"]
    pool = cli(*args, "--out", tmp_path / "pool.csv")
    dask = cli(*args, "--executor", "dask", "--dask-scheduler", "local", "--out", tmp_path / "dask.csv")
    assert pool.returncode == 0 and dask.returncode == 0, pool.stderr + dask.stderr
    assert "Traceback" not in dask.stderr, dask.stderr
    assert csv_rows(tmp_path / "dask.csv") == csv_rows(tmp_path / "pool.csv") and len(csv_rows(tmp_path / "pool.csv")) == 4


def test_plots_average_the_other_axes_beyond_eight_combinations(tmp_path):
    from gpusim.sweep import plot_sweep

    vary = {"a": [1, 2], "b": [1, 2, 3], "c": ["x", "y", "z"]}
    rows = [{**p, "m.pct": p["a"] * p["b"], OCCUPANCY: 50.0, LIMITER: "warps", ERROR: "" if p["b"] < 3 else "no",
             WALL: 0.0} for p in points(vary)]
    paths = plot_sweep(rows, vary, ["m.pct"], "k", "h100", tmp_path)
    assert len(paths) == 6 and all(p.stat().st_size > 0 for p in paths)  # (m.pct + occupancy) x 3 axes


def test_parquet_needs_pandas_and_pyarrow(tmp_path):
    try:
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        p = cli(FMA, "--arch", "h100", *SMALL_FMA, "--vary", "threads=64", "--out", tmp_path / "r.parquet")
        assert p.returncode == 1 and "pip install pandas pyarrow" in p.stderr and "Traceback" not in p.stderr
        return
    p = cli(FMA, "--arch", "h100", *SMALL_FMA, "--vary", "threads=64,128", "--quiet", "--out", tmp_path / "r.parquet")
    assert p.returncode == 0, p.stderr
    assert list(pandas.read_parquet(tmp_path / "r.parquet")["threads"]) == [64, 128]


@pytest.mark.skipif(not HAS_LAUNCH_OVERRIDES, reason="gpusim.run has no launch overrides yet")
def test_launch_dimensions_as_16x16():
    assert parse_values("launch.threads", "256,16x16,8x8x4") == [256, "16x16", "8x8x4"]
    rows = as_rows(gpusim.sweep(FMA, arch="h100", vary={"launch.threads": "256,16x16", "launch.grid": ["4x2"]},
                                jobs=1, metrics=["gpu_sim_cycle"], sms=2, params={"blocks": 8, "iters": 8}))
    assert [r[ERROR] for r in rows] == ["", ""] and rows[0]["gpu_sim_cycle"] == rows[1]["gpu_sim_cycle"]


def test_dask_missing_is_a_one_line_error_naming_the_extra(tmp_path):
    code = ("import sys; sys.modules['dask'] = sys.modules['dask.distributed'] = None\n"
            "from gpusim.cli import main\n"
            f"sys.exit(main(['sweep', {str(FMA)!r}, '--arch', 'h100', '--vary', 'threads=64', '--executor', 'dask', "
            f"'--out', {str(tmp_path / 'r.csv')!r}]))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 1 and 'pip install "gpusim[cluster]"' in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "r.csv").exists()


# --- the output under hostile conditions ---------------------------------------------------------------------------

TINY = ("kernel: tiny\nparams: {n: 32}\nbuffers: {a: {bytes: n * 4}}\n"
        "launch: {grid: [1], block: [32], registers_per_thread: 16}\n"
        "program:\n  - {op: LDG.E, dst: v, addr: \"a + (lane % n) * 4\"}\n  - {op: FADD, dst: w, src: [v, v]}\n")
SWEEP = importlib.import_module("gpusim.sweep")  # the package (gpusim.sweep may name the function)
EXECUTORS = importlib.import_module("gpusim.sweep.executors")  # where the points run


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    return path


@pytest.fixture
def simulated(monkeypatch):
    """run_point simulating each point once; later sweeps reuse its row (the same wall time too), and `calls`
    counts the points each sweep simulated or took from the cache."""
    real, cache, calls = SWEEP.run_point, {}, []

    def cached(task):
        key = tuple(task["values"].items())
        calls.append(key)
        if key not in cache:
            cache[key] = real(task)
        return dict(cache[key])

    monkeypatch.setattr(EXECUTORS, "run_point", cached)
    return calls


def stderr_lines(stderr: str) -> list[str]:
    """The lines on stderr but the note that the engine's sources run (an edited checkout)."""
    return [line for line in stderr.splitlines() if line.strip() and "running the engine's sources" not in line]


def tiny_sweep(tiny, out, **kw):
    return gpusim.sweep(tiny, "h100", {"n": [32, 64, 96]}, jobs=1, sms=1, out=out, **kw)


def test_a_sweep_cut_at_any_byte_and_resumed_writes_the_uninterrupted_file(tiny, tmp_path, simulated):
    out = tmp_path / "r.csv"
    tiny_sweep(tiny, out)
    whole = out.read_bytes()
    assert whole.count(b"\n") == 4 and all(r[ERROR] == "" for r in csv_rows(out))
    for cut in range(len(whole) + 1):
        out.write_bytes(whole[:cut])
        tiny_sweep(tiny, out, resume=True)
        assert out.read_bytes() == whole, f"cut at byte {cut}: {whole[:cut][-40:]!r}"
        assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert csv_rows(out) == [{k: v for k, v in r.items() if k != WALL} for r in csv.DictReader(io.StringIO(
        whole.decode()))]


def test_resume_reruns_unfinished_rows_ignores_other_points_and_matches_numbers_by_value(tiny, tmp_path, simulated,
                                                                                      capfd):
    out = tmp_path / "r.csv"
    tiny_sweep(tiny, out)
    header, r32, r64, r96 = out.read_text().splitlines()
    columns = header.split(",")
    cycles = columns.index("gpu_sim_cycle")

    def with_cell(row: str, column: int, value: str) -> str:
        cells = row.split(",")
        cells[column] = value
        return ",".join(cells)

    empty = ",".join("" if i else "64" for i in range(len(columns) - 1)) + ",0.1"  # neither metrics nor an error
    cases = {
        "a cut row": [r32.replace("32,", "32.0,", 1), "64,", r96],
        "NaN": [r32, with_cell(r64, cycles, "nan"), with_cell(r96, cycles, "inf")],
        "text": [r32, with_cell(r64, cycles, "many"), r96],
        "nothing": [r32, empty, r96],
        "unparsable": [r32, '64,"592', r96 + ',extra'],
    }
    for what, rows in cases.items():
        out.write_text("\n".join([header, *rows, "128," + r32.split(",", 1)[1], r32]) + "\n")
        simulated.clear()
        capfd.readouterr()
        tiny_sweep(tiny, out, resume=True)
        rerun = [dict(k)["n"] for k in simulated]
        assert rerun == ([64] if what != "unparsable" and what != "NaN" else [64, 96]), what
        assert out.read_text().splitlines() == [header, r32, r64, r96], what  # 32.0 was point 32: kept, as 32
        err = [line for line in capfd.readouterr().err.splitlines() if line]
        assert len(err) == 1 and err[0].startswith(f"note: --resume {out}: "), (what, err)
        assert f"{len(rerun)} row{'s' if len(rerun) > 1 else ''} not a finished point" in err[0], err
        assert "2 rows of no point of this sweep, or repeating one: ignored" in err[0], err


def test_a_write_error_while_appending_is_one_line_naming_the_output(tiny, tmp_path, simulated, monkeypatch):
    out = tmp_path / "r.csv"
    real = SWEEP.run_point

    def fill_the_disk(task):  # after the first row: every write fails as on a full disk
        if task["values"]["n"] == 64:
            out.unlink()
            out.symlink_to("/dev/full")
        return real(task)

    monkeypatch.setattr(EXECUTORS, "run_point", fill_the_disk)
    with pytest.raises(GpusimError, match=rf"^--out {re.escape(str(out))}: cannot write \(No space left on device\)$"):
        tiny_sweep(tiny, out)


def test_a_row_is_appended_whole_or_not_at_all(tmp_path, monkeypatch):
    out = SWEEP.Output(tmp_path / "r.csv", ["n", "m", OCCUPANCY, LIMITER, ERROR, WALL])
    row = {"n": 1, "m": 2.5, OCCUPANCY: 50.0, LIMITER: "warps", ERROR: "", WALL: 0.1}
    out.start([])
    out.add([row])
    before = out.path.read_bytes()
    real = os.write

    def half_then_full(fd, data):  # part of the row written, then the disk is full
        if len(data) > 4:
            return real(fd, bytes(data[:len(data) // 2]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(GpusimError, match="--out .*r.csv: cannot write"):
        out.add([dict(row, n=2)])
    monkeypatch.undo()
    assert out.path.read_bytes() == before and before.endswith(b"\n")


def test_resume_of_a_json_output_with_nan_or_deep_nesting_is_one_line_and_leaves_no_temporary_file(
        tiny, tmp_path, simulated):
    out = tmp_path / "r.json"
    tiny_sweep(tiny, out)
    whole = out.read_text()
    rows = json.loads(whole)
    rows[1]["gpu_sim_cycle"] = float("nan")
    rows[0]["n"] = 32.0
    out.write_text(json.dumps(rows))  # (NaN: Python's json writes it, strict JSON has none)
    simulated.clear()
    tiny_sweep(tiny, out, resume=True)
    assert [dict(k)["n"] for k in simulated] == [64] and out.read_text() == whole
    for text in ("[" * 100_000 + "]" * 100_000, '[{"n": 32, "gpu_sim_cycle": NaN}]', "{}", "[1, 2"):
        out.write_text(text)
        with pytest.raises(GpusimError, match=f"^--resume: .*{re.escape(str(out))}") as caught:
            tiny_sweep(tiny, out, resume=True)
        assert "\n" not in str(caught.value)
        assert out.read_text() == text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "tiny.yaml"]


def test_resume_of_an_output_that_is_no_regular_file_is_one_line(tiny, tmp_path):
    out = tmp_path / "z.csv"
    out.symlink_to("/dev/zero")  # (read, it never ends)
    with pytest.raises(GpusimError, match=f"^--resume: {re.escape(str(out))} is not a regular file$"):
        tiny_sweep(tiny, out, resume=True)


def test_a_failed_rewrite_is_one_line_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    columns = ["n", OCCUPANCY, LIMITER, ERROR, WALL]
    row = {"n": 1, OCCUPANCY: 50.0, LIMITER: "warps", ERROR: "", WALL: 0.1}
    out = SWEEP.Output(tmp_path / "r.json", columns)
    with pytest.raises(GpusimError, match="^--out .*r.json: cannot write"):
        out.start([dict(row, **{OCCUPANCY: float("nan")})])  # JSON has no NaN
    def broken(*args):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "replace", broken)
    for name in ("r.json", "r.csv"):
        with pytest.raises(GpusimError, match=f"^--out .*{name}: cannot write \\(Input/output error\\)$"):
            SWEEP.Output(tmp_path / name, columns).start([row])
    assert list(tmp_path.iterdir()) == []


def test_jobs_above_the_limit_is_one_line_and_workers_never_outnumber_the_points(tiny, tmp_path, monkeypatch):
    limit = SWEEP.max_jobs()
    assert limit == SWEEP.JOBS_PER_CORE * (os.cpu_count() or 1)
    p = cli(tiny, "--arch", "h100", "--sms", "1", "--vary", "n=32,64", "--out", tmp_path / "j.csv", "--jobs",
            str(limit + 1))
    assert p.returncode == 1 and stderr_lines(p.stderr) == [f"error: --jobs {limit + 1:,}: at most {limit:,} "
                                                            f"({SWEEP.JOBS_PER_CORE} x this machine's "
                                                            f"{os.cpu_count() or 1} cores)"], p.stderr
    assert not (tmp_path / "j.csv").exists()
    started = []

    def spy(executor):
        def run(tasks, jobs, *rest):
            started.append((executor, len(tasks), jobs))
            return EXECUTORS.serial_rows(tasks)
        return run

    monkeypatch.setattr(SWEEP, "pool_rows", spy("pool"))
    monkeypatch.setattr(SWEEP, "dask_rows", spy("dask"))
    gpusim.sweep(tiny, "h100", {"n": [32, 64]}, jobs=limit, sms=1)
    if importlib.util.find_spec("dask") is not None and importlib.util.find_spec("distributed") is not None:
        gpusim.sweep(tiny, "h100", {"n": [32, 64]}, jobs=limit, sms=1, executor="dask")
        assert started == [("pool", 2, 2), ("dask", 2, 2)]
    else:
        assert started == [("pool", 2, 2)]


def _serve(reply: bytes | None):
    """A TCP server on loopback answering every connection with `reply` (None: silence, the connection held
    open); (its address, a function that stops it)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    held, stop = [], threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            held.append(conn)
            if reply is not None:
                conn.sendall(reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()

    def close():
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()

    return f"tcp://127.0.0.1:{server.getsockname()[1]}", close


def test_a_dask_scheduler_address_that_is_no_dask_scheduler_is_one_line_within_the_deadline(tiny, tmp_path):
    pytest.importorskip("dask.distributed")
    for reply in (b"HTTP/1.1 400 Bad Request\r\n\r\n", None):
        address, close = _serve(reply)
        try:
            code = ("import importlib, sys\n"
                    "importlib.import_module('gpusim.sweep.executors').DASK_CONNECT_SECONDS = 3\n"
                    "from gpusim.cli import main\n"
                    f"sys.exit(main(['sweep', {str(tiny)!r}, '--arch', 'h100', '--sms', '1', '--vary', 'n=32,64', "
                    f"'--out', {str(tmp_path / 'd.csv')!r}, '--executor', 'dask', '--dask-scheduler', {address!r}]))")
            started = time.monotonic()
            p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
            took = time.monotonic() - started
        finally:
            close()
        lines = stderr_lines(p.stderr)
        assert p.returncode == 1 and len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
        assert lines[0].startswith(f"error: --dask-scheduler {address}: "), lines
        if reply is None:
            assert "no Dask scheduler answered within 3 s" in lines[0] and took < 60, (lines, took)
        else:
            assert "not a Dask scheduler" in lines[0] and took < 30, (lines, took)


def test_ctrl_c_on_a_local_dask_sweep_shows_no_worker_tracebacks(tmp_path):
    pytest.importorskip("dask.distributed")
    slow = tmp_path / "slow.yaml"
    slow.write_text("kernel: slow\nparams: {n: 1}\nlaunch: {grid: [64], block: [256], registers_per_thread: 16}\n"
                    "program:\n  - loop: n * 400\n    body:\n      - {op: FFMA, dst: x, src: [x, x, x]}\n")
    out = tmp_path / "c.csv"
    # a terminal's Ctrl-C signals the whole process group: the workers as well as gpusim
    proc = subprocess.Popen([sys.executable, "-m", "gpusim", "sweep", str(slow), "--arch", "h100", "--sms", "2",
                             "--vary", "n=1:8:1", "--jobs", "2", "--executor", "dask", "--out", str(out)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            if out.exists() and out.read_text().count("\n") >= 2:  # the header and the first row
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        os.killpg(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    lines = stderr_lines(stderr)
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr
    assert len(lines) == 1 and lines[0].startswith("interrupted: ") and "--resume" in lines[0], stderr


# --- generated hostile --resume files and --jobs values ----------------------------------------------------------

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

_RESUME_SETTINGS = settings(max_examples=40, deadline=None,
                            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
_JUNK_LINE = st.one_of(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40),
                       st.sampled_from(["64,", "32.0", "nan,nan", ",,,,,,,,,,,", "\"", "96,1,2,3", "1e309,", "\x00"]))


@_RESUME_SETTINGS
@given(st.lists(st.tuples(st.integers(0, 4), _JUNK_LINE), max_size=6), st.booleans())
def test_resume_of_a_generated_csv_runs_what_is_not_finished_and_writes_the_whole_file(tiny, tmp_path, simulated,
                                                                                        edits, keep_header):
    """Any CSV at --out made of this sweep's rows with lines of junk among them: with its header, --resume writes
    the file one run straight through would (wall times aside); without it (not this sweep's file), a one-line
    refusal naming the file."""
    out = tmp_path / "g.csv"
    tiny_sweep(tiny, out)  # (the points come from the cache after the first example)
    whole = csv_rows(out)
    header, *rows = out.read_text().splitlines()
    for where, junk in edits:
        rows.insert(min(where, len(rows)), junk.replace("\n", " ").replace("\r", " "))
    out.write_text("\n".join(([header] if keep_header else []) + rows) + "\n")
    try:
        tiny_sweep(tiny, out, resume=True)
    except GpusimError as exc:
        assert not keep_header and "\n" not in str(exc) and "g.csv" in str(exc)
    else:
        assert csv_rows(out) == whole


@_RESUME_SETTINGS
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=20))
def test_resume_of_a_generated_json_is_one_line_or_the_whole_file(tiny, tmp_path, simulated, stored):
    """Any JSON value at --out: --resume either refuses it in one line naming the file (and leaves no temporary
    file) or writes every point's row."""
    out = tmp_path / "g.json"
    out.write_text(json.dumps(stored))
    try:
        rows = tiny_sweep(tiny, out, resume=True)
    except GpusimError as exc:
        assert "\n" not in str(exc) and "g.json" in str(exc)
    else:
        assert len(json.loads(out.read_text())) == 3 and len(rows) == 3
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@settings(max_examples=30, deadline=None)
@given(st.one_of(st.integers(-10, 10_000), st.booleans(), st.floats(allow_nan=True), st.text(max_size=5)))
def test_generated_jobs_values_run_within_the_limit_or_are_one_line(jobs):
    """--jobs: a whole number from 1 to the documented multiple of the cores, or a one-line error before any
    point runs (checked without running: the sweep is refused or accepted at its argument checks)."""
    limit = SWEEP.JOBS_PER_CORE * (os.cpu_count() or 1)
    ok = type(jobs) is int and 1 <= jobs <= limit
    try:
        SWEEP.check_jobs(jobs)
    except GpusimError as exc:
        assert not ok and "\n" not in str(exc) and "--jobs" in str(exc)
    else:
        assert ok


def test_an_undeclared_metric_name_is_one_line_naming_the_closest(tiny, tmp_path):
    done = cli(tiny, "--arch", "h100", "--sms", "1", "--vary", "n=32", "--out", tmp_path / "m.csv", "--metrics",
               "gpu_sim_cycle,gpu_sim_cyle")
    lines = stderr_lines(done.stderr)
    assert done.returncode == 1 and len(lines) == 1 and not (tmp_path / "m.csv").exists()
    assert lines[0] == "error: --metrics gpu_sim_cyle: not a metric gpusim records (did you mean gpu_sim_cycle?)"
