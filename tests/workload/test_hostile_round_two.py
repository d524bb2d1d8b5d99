"""Hostile input: an occupancy plot directory that cannot be one, a command list of many host-device copies, and
an arch file with fewer MSHRs than the lines one warp request can touch. Each is one line (or one note), never a
traceback."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpusim import load_arch, run
from gpusim.errors import GpusimError

from tests.conftest import ARCH_NAMES, ROOT, run_cli
from tests.trace.test_hostile_trace import VALID, write


def error_lines(stderr: str) -> list[str]:
    """stderr's lines but the note that the engine's sources run (an edited checkout)."""
    return [line for line in stderr.splitlines() if line.strip() and "running the engine's sources" not in line]


# --- occupancy --plot-dir --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("where", ["a file", "under a file"])
def test_occupancy_plot_dir_that_cannot_be_a_directory_is_one_line(tmp_path, where):
    afile = tmp_path / "afile"
    afile.write_text("x")
    target = afile if where == "a file" else afile / "plots"
    p = run_cli("occupancy", "--arch", "h100", "--threads", "256", "--regs", "32", "--plot", "--plot-dir",
                str(target))
    lines = error_lines(p.stderr)
    assert p.returncode == 1 and "Traceback" not in p.stderr and len(lines) == 1, p.stderr
    assert lines[0].startswith(f"error: --plot-dir {target}: cannot create the directory ("), lines
    assert afile.read_text() == "x"


def test_occupancy_plot_dir_is_created_and_filled(tmp_path):
    target = tmp_path / "new" / "plots"
    p = run_cli("occupancy", "--arch", "h100", "--threads", "256", "--regs", "32", "--plot", "--plot-dir",
                str(target))
    assert p.returncode == 0, p.stderr
    assert len(list(target.glob("*.png"))) == 4


# --- a command list's memcpy lines ------------------------------------------------------------------------------------

def test_many_memcpy_lines_are_one_note_with_their_count_and_the_first_line(tmp_path):
    write(tmp_path / "kernel-1.traceg", VALID)
    copies = [f"Memcpy{'DtoH' if i % 3 == 0 else 'HtoD'},0x7fb0fc{i:06x},256\n" for i in range(20_000)]
    listing = tmp_path / "kernelslist.g"
    listing.write_text("# copies first\n" + "".join(copies) + "kernel-1.traceg\n")
    result = run(listing, "h100", sms=1)
    assert result.notes == [f"{listing}: 20,000 MemcpyDtoH/MemcpyHtoD lines skipped (host-device copies are not "
                            f"simulated); the first at line 2"]
    p = run_cli("run", str(listing), "--arch", "h100", "--sms", "1")
    assert p.returncode == 0, p.stderr
    notes = [line for line in p.stderr.splitlines() if line.startswith("note:")]
    assert notes == [f"note: {result.notes[0]}"], p.stderr[:2000]


def test_one_memcpy_line_is_noted_at_its_line(tmp_path):
    write(tmp_path / "kernel-1.traceg", VALID)
    listing = tmp_path / "kernelslist.g"
    listing.write_text("kernel-1.traceg\nMemcpyDtoH,0x1000,16\n")
    assert run(listing, "h100", sms=1).notes == [f"{listing}:2: MemcpyDtoH skipped (host-device copies are not "
                                                 f"simulated)"]
    listing.write_text("kernel-1.traceg\n")
    assert run(listing, "h100", sms=1).notes == []


# --- memory.l1.mshrs --------------------------------------------------------------------------------------------------

def _with_mshrs(tmp_path: Path, mshrs: int) -> Path:
    text = (ROOT / "arch" / "h100.yaml").read_text()
    edited, count = re.subn(r"(\n\s+mshrs:)\s*\d+", rf"\g<1> {mshrs}", text, count=1)
    assert count == 1
    path = tmp_path / f"m{mshrs}.yaml"
    path.write_text(edited)
    return path


def test_fewer_mshrs_than_a_warps_32_lines_is_refused_when_the_arch_loads(short_tmp_path):
    tmp_path = short_tmp_path  # the message starts with the arch file's path, compared in full
    arch = _with_mshrs(tmp_path, 31)
    with pytest.raises(GpusimError, match=r"'memory\.l1\.mshrs' \(line \d+\): expected an integer from 32 to "
                                          r"65,536, got 31"):
        load_arch(arch)
    wide = tmp_path / "wide.yaml"
    wide.write_text("kernel: k\nbuffers: {a: {bytes: 4096}}\nlaunch: {grid: [1], block: [32], registers_per_thread: "
                    "16}\nprogram:\n  - {op: LDG.E, dst: r, addr: \"a + lane * 128\"}\n")
    p = run_cli("run", str(wide), "--arch", str(arch), "--sms", "1")
    lines = error_lines(p.stderr)
    assert p.returncode == 1 and "Traceback" not in p.stderr and len(lines) == 1, p.stderr
    assert lines[0].startswith(f"error: {arch}: 'memory.l1.mshrs'") and "32 to 65,536" in lines[0], lines
    p = run_cli("run", str(wide), "--arch", str(_with_mshrs(tmp_path, 32)), "--sms", "1")
    assert p.returncode == 0, p.stderr  # 32 entries: the warp's 32 lines at once


def test_the_mshr_floor_is_documented_and_every_shipped_arch_is_above_it():
    p = run_cli("archs", "--fields", "--json")
    assert p.returncode == 0, p.stderr
    field = next(f for f in json.loads(p.stdout) if f["field"] == "memory.l1.mshrs")
    assert field["range"] == "an integer from 32 to 65,536" and "32 lanes" in field["description"], field
    for name in ARCH_NAMES:
        assert load_arch(name).memory.l1.mshrs >= 32, name


# --- a global access in a workload with no global buffer ---------------------------------------------------------

NO_BUFFER = """kernel: k
launch: {grid: [1], block: [32], registers_per_thread: 16}
program:
  - {op: LDG.E, dst: v, addr: "lane * 4"}
"""


@pytest.mark.parametrize("command", [("run", "--arch", "h100", "--sms", "1"), ("workload", "show")])
def test_a_global_access_without_a_global_buffer_is_one_line(tmp_path, command):
    path = tmp_path / "nobuf.yaml"
    path.write_text(NO_BUFFER)
    args = [command[0], *command[1:2], str(path), *command[2:]] if command[0] == "workload" else \
        [command[0], str(path), *command[1:]]
    done = run_cli(*args)
    lines = error_lines(done.stderr)
    assert done.returncode == 1 and len(lines) == 1 and "Traceback" not in done.stderr
    assert lines[0].endswith("the workload declares no global buffer") and "nobuf.yaml:4" in lines[0]
