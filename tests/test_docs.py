"""The README and the documentation site: every command and Python block on them runs, every output shown is what
the code prints now, the generated reference pages match the code, and the README stays a short page for users.

`python docs/gen.py` rewrites what these tests compare against; `python docs/gen.py --check` is the same check from
the command line.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import subprocess
import sys

import pytest

from tests.conftest import ROOT

GEN = ROOT / "docs" / "gen.py"
README = (ROOT / "README.md").read_text()
DOC_PAGES = sorted((ROOT / "docs").rglob("*.md"))
HISTORY = re.compile(r"s[e]ssion|issue [0-9]|#[0-9]{2}\b|h[e]lper", re.I)  # words that narrate history


def _gen(*args: str, timeout: int = 1200) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(GEN), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_generated_reference_pages_and_record_tables_are_current():
    """docs/reference/cli.md, arch-fields.md and metrics.md are what gen.py writes from the code, and every table
    rendered from validation/results/ matches its record (no command runs: fast)."""
    proc = _gen("--check", "--no-exec")
    assert proc.returncode == 0, proc.stderr[-4000:]


@pytest.mark.parametrize("page", [ROOT / "README.md", *DOC_PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_example_runs_and_shows_its_real_output(page):
    """Every ```console command on README.md and docs/ exits as expected and prints what the page shows (wall
    times masked), and every ```bash and ```python block runs, except those marked `<!-- not run: why -->`. One
    page a test (all of them: a minute and a half on the 2-core machine; the longest page, README.md, 16 s)."""
    proc = _gen("--check", "--jobs", "1", str(page))
    assert proc.returncode == 0, proc.stderr[-6000:]


def test_readme_is_short_and_starts_with_the_set_up():
    """At most 250 lines; the first code block installs gpusim and runs the main job, then runs the tests with
    exactly the command CI runs."""
    assert README.count("\n") <= 250
    first = re.search(r"```(\w*)\n(.*?)```", README, re.S)
    assert first.group(1) == "bash"
    setup = first.group(2)
    assert "pip install -e ." in setup and "gpusim run workloads/gemm_tile128.yaml --arch h100" in setup
    ci = (ROOT / ".ci" / "run").read_text()
    test_command = re.search(r'pip install -q "\.\[test\]" && python -m pytest', setup)
    assert test_command and test_command.group(0) in ci


def test_the_readme_main_job_runs_and_matches_its_record():
    """The README's main job, run once as written: it exits 0 and simulates the cycles its record says
    (validation/results/quickstart.json; `python docs/gen.py --measure setup` refreshes it)."""
    record = json.loads((ROOT / "validation" / "results" / "quickstart.json").read_text())["main_job"]
    setup = re.search(r"```bash\n(.*?)```", README, re.S).group(1)
    command = re.search(r"gpusim run [^&\n]+", setup).group(0).strip()
    assert command == record["command"]
    proc = subprocess.run([sys.executable, "-m", "gpusim", *shlex.split(command)[1:], "--quiet", "--json", "-"],
                          cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-2000:]
    metrics = json.loads(proc.stdout)["metrics"]
    assert metrics["gpu_sim_cycle"] == record["cycles"], \
        "the main job's cycles moved: run python docs/gen.py --measure setup, then python docs/gen.py"
    assert metrics["smsp__inst_executed.sum"] == record["warp_instructions"]


def test_every_flag_of_every_command_is_documented():
    """Every subcommand's every option string appears literally in docs/ (the CLI reference is generated from
    the parser, so this holds as long as that page is current)."""
    import argparse

    from gpusim.cli import build_parser

    docs = " ".join(p.read_text() for p in DOC_PAGES)
    missing = []

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    walk(sub, f"{name} {sub_name}")
            for flag in action.option_strings:
                if flag.startswith("--") and flag != "--help" and flag not in docs:
                    missing.append(f"{name} {flag}")

    walk(build_parser(), "gpusim")
    assert not missing


@pytest.mark.parametrize("path", [ROOT / "README.md", *DOC_PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_state_what_is_true_now(path):
    """No history on the pages: no work periods, issue numbers or the like."""
    text = path.read_text()
    hits = [line for line in text.splitlines() if HISTORY.search(line)]
    assert not hits, hits[:3]


def test_readme_pictures_and_links_exist():
    for target in re.findall(r"\]\(((?:docs|plots)/[^)#]+)", README):
        assert (ROOT / target).exists(), target


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="the docs extra is not installed")
def test_the_site_builds_strict(tmp_path):
    """`mkdocs build --strict`: no broken link or anchor, no page outside the navigation, every docstring read."""
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    pages = list(tmp_path.rglob("*.html"))
    assert len(pages) >= 15
