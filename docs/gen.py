"""Generate and check the documentation: README.md and docs/.

    python docs/gen.py                 # rewrite the generated pages and every generated region
    python docs/gen.py --check [PAGE]  # exit 1 when a committed page differs from what this would write
    python docs/gen.py --measure WHAT  # refresh a record in validation/results/ (setup, tests, microbench)

What it writes:

* whole pages from the code: docs/reference/cli.md (every command and flag, from gpusim.cli's argparse parser),
  docs/reference/arch-fields.md (every arch-file field, from the attrs spec's metadata) and
  docs/reference/metrics.md (every metric, from gpusim.stats.declared.METRICS),
  docs/reference/run-options.md (every run option, from gpusim.options.RunOptions);
* regions inside hand-written pages, between ``<!-- gen:KIND options -->`` and ``<!-- /gen -->``:
  ``run`` executes the ``$ `` commands of the ```console block inside it and writes their real output;
  ``table NAME`` renders a record of validation/results/ (see RECORDS); ``figure`` copies a committed picture
  into docs/img/ and links it.

Every other ```bash and ```python block of a page is executed too (in the page's order, in one scratch
directory per page, next to links to workloads/, examples/, arch/, validation/ and docs/), except one preceded
by ``<!-- not run: why -->``; ``<!-- file: NAME -->`` before a block writes the block's text to NAME there
first, so a page can show a file and then run it. `--check` runs all of it and compares; the parts of an output
that change from run to run (wall times) are compared with their numbers masked.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import difflib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RESULTS = ROOT / "validation" / "results"
IMG = DOCS / "img"
LINKED = ("workloads", "examples", "arch", "validation", "docs")  # what a page's scratch directory sees

REGION = re.compile(r"<!-- gen:([a-z-]+)(.*?)-->\n(.*?)<!-- /gen -->", re.S)
FENCE = re.compile(r"^```([a-z]*)\n(.*?)^```\n", re.S | re.M)
NOT_RUN = re.compile(r"<!-- not run: [^>]+-->\s*$")
FILE = re.compile(r"<!-- file: (\S+) -->\s*$")
# output that changes between two runs of the same command: compared with its numbers masked
VOLATILE = [
    r"simulated in [0-9.,]+ s: [0-9,]+ warp-instructions/s, [0-9,]+ cycles/s",
    r"\b[0-9.]+ s\b(?= wall| on| \(| total|$)",
    r"took [0-9.]+ s",
    r"in [0-9.]+ s\b",
    r"[0-9.]+ MB\)",
    r"\([0-9.]+ s\)",
    r"[0-9,]+ warp-instructions/s",
    r"[0-9,]+ warp-inst/s",
    r"[0-9,]+ cycles/s",
    r"done in [0-9.]+ s",
]

GENERATED_PAGES = {}  # path under docs/ -> function returning its text (filled below)


# --- small formatting functions ----------------------------------------------------------------------------

def _n(value, digits=0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and digits:
        return f"{value:,.{digits}f}"
    return f"{round(value):,}"


def _pct(value, digits=1, sign=True) -> str:
    return f"{value:+.{digits}f}%" if sign else f"{value:.{digits}f}%"


def _table(header: list[str], rows: list[list], align: str | None = None) -> str:
    align = align or "l" + "r" * (len(header) - 1)
    marks = {"l": "---", "r": "---:", "c": ":---:"}
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join(marks[a] for a in align) + " |"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out) + "\n"


def _load(name: str):
    path = RESULTS / name
    return json.loads(path.read_text()) if path.exists() else None


def _md(text: str) -> str:
    """Help text inside markdown prose: escape what markdown would read as markup (outside `code` spans)."""
    parts = re.split(r"(`[^`]*`)", text)
    return "".join(part if part.startswith("`") else
                   part.replace("*", r"\*").replace("_", r"\_").replace("<", "&lt;") for part in parts)


# --- generated pages ---------------------------------------------------------------------------------------

def _flag_line(action, formatter) -> str:
    if action.option_strings:
        flag = ", ".join(action.option_strings)
        if action.nargs != 0:
            metavar = action.metavar or (
                "{" + ",".join(action.choices) + "}" if action.choices else action.dest.upper())
            flag += f" {metavar}"
    else:
        flag = action.metavar or action.dest
    text = formatter._expand_help(action) if action.help else ""
    extra = []
    if action.required and action.option_strings:
        extra.append("required")
    if action.choices and action.option_strings:
        extra.append("one of " + ", ".join(f"`{c}`" for c in action.choices))
    if action.option_strings and action.default not in (None, False, [], argparse.SUPPRESS) \
            and action.nargs != 0 and "default" not in text:
        extra.append(f"default `{action.default}`")
    if isinstance(action, argparse._AppendAction) and "repeatable" not in text:
        extra.append("repeatable")
    tail = f" ({'; '.join(extra)})" if extra else ""
    return f"- `{flag}`: {_md(text)}{tail}"


def page_cli() -> str:
    from gpusim.cli import build_parser

    os.environ["COLUMNS"] = "100"  # argparse wraps usage lines at the terminal's width: the page's is fixed
    parser = build_parser()
    out = ["# Command line\n",
           "<!-- generated by docs/gen.py from gpusim/cli/parser.py: do not edit -->\n",
           "Every command and flag of `gpusim`, with its help text as `gpusim COMMAND --help` prints it. "
           "Sizes (`SIZE`) take `49152`, `48K`, `64KB` or `1M` (K = 1024). An error is one line on standard "
           "error and exit status 1 (2 for a usage error); a run that breaks a physical limit exits with 3 "
           "and an interrupted one with 130.\n"]

    def render(p: argparse.ArgumentParser, name: str, help_text: str, level: int) -> None:
        formatter = p._get_formatter()
        out.append(f"{'#' * level} `{name}`\n")
        if help_text:
            out.append(_md(help_text[0].upper() + help_text[1:]) + ".\n")
        usage = p.format_usage().strip().removeprefix("usage: ").replace("\n       ", "\n")
        out.append("```text\n" + usage + "\n```\n")
        subparsers = None
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                subparsers = action
        lines = []
        for group in p._action_groups:
            actions = [a for a in group._group_actions
                       if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
            if not actions:
                continue
            if group.title not in ("positional arguments", "options", "optional arguments"):
                lines.append(f"\n*{group.title}*" + (f": {_md(group.description)}" if group.description else "")
                             + "\n")
            for action in actions:
                lines.append(_flag_line(action, formatter))
        if lines:
            out.append("\n".join(lines) + "\n")
        if subparsers is not None:
            helps = {a.dest: a.help for a in subparsers._choices_actions}
            for sub_name, sub in subparsers.choices.items():
                render(sub, f"{name} {sub_name}", helps.get(sub_name, ""), level + 1)

    render(parser, "gpusim", "", 2)
    text = "\n".join(out)
    return text.replace("## `gpusim`\n\n", "## `gpusim`\n\nThe program itself: `--version` prints it, and every "
                                           "command below takes `-h` / `--help`.\n\n", 1)


def page_arch_fields() -> str:
    from gpusim.report.archs import field_rows

    rows = field_rows()
    out = ["# Architecture file fields\n",
           "<!-- generated by docs/gen.py from gpusim/arch/spec.py: do not edit -->\n",
           "Every key an architecture file (`arch/*.yaml`) has, as a dotted path, with its unit, the range the "
           "loader accepts and what it means. This is the schema `gpusim.load_arch` validates against: a missing, "
           "misspelt, mistyped or out-of-range key is a one-line error naming the file and the key. "
           "`gpusim archs --fields` prints the same table; [Add a GPU](../how-to/add-a-gpu.md) shows how to "
           "write a file.\n"]
    section = None
    for r in rows:
        top = r["field"].split(".")[0]
        if top != section:
            section = top
            out.append(f"\n## `{top}`\n")
            out.append("| field | unit | accepted range | meaning |\n|---|---|---|---|")
        rng = r["range"].replace("|", "/")
        out.append(f"| `{r['field']}` | {r['unit'] or ''} | {_md(rng)} | {_md(r['description']).replace('|', '/')} |")
    return "\n".join(out) + "\n"


GPGPUSIM = {"gpu_sim_cycle", "gpu_sim_insn", "gpu_ipc", "gpgpu_n_shmem_bkconflict"}


def page_metrics() -> str:
    from gpusim.stats.declared import KINDS, METRICS

    out = ["# Metrics\n",
           "<!-- generated by docs/gen.py from gpusim/stats/declared.py: do not edit -->\n",
           "Every metric a run's record holds (`metrics` in `gpusim run --json`, `RunResult.metrics` in Python), "
           "declared once with its unit and kind. Names are Nsight Compute's where Nsight has the quantity "
           "(`smsp__`, `sm__`, `l1tex__`, `lts__`, `dram__`, `gpu__`), GPGPU-Sim's for its classic counters, and "
           "`gpusim__` for what only the model has. A record never holds a metric that is not on this page: a "
           "test runs the shipped workloads and fails on one.\n",
           "The kind says how a metric combines over SMs, over kernels run one after another and in a sampled "
           "projection ([Sampling](../explanation/sampling.md)):\n",
           "| kind | combines as |\n|---|---|",
           "| count | adds up over SMs and time; a sampled run extrapolates it |",
           "| ratio | X / Y over the additive metric named in the table; recomputed from projected X and Y |",
           "| ratio_sp_active | a ratio over the sub-partitions' active cycles |",
           "| derived | recomputed from the counts (speed of light, arithmetic intensity) |",
           "| steady | an average whose weights the record does not hold (latencies): the largest run's value |",
           "| maximum | bounded by a maximum (theoretical occupancy) |",
           "| launch | the launch's configuration |\n"]
    assert len(KINDS) == 7

    def origin(name: str) -> str:
        if name in GPGPUSIM:
            return "GPGPU-Sim"
        if name.startswith("gpusim__"):
            return "gpusim"
        return "Nsight Compute"

    groups: dict[str, list] = {}
    for m in METRICS.values():
        if "_issue_stalled_" in m.name and m.name.startswith("smsp__pcsamp"):
            group = "Stall reasons (warp-cycles)"
        elif "_issue_stalled_" in m.name:
            group = "Stall reasons (per issued instruction)"
        elif m.name.endswith("pct_of_peak_sustained_elapsed") or m.name.startswith("gpusim__arithmetic"):
            group = "Speed of light"
        elif m.name.startswith(("l1tex", "lts", "dram", "gpusim__l1", "gpusim__l2", "gpusim__load", "gpusim__dram",
                                "gpusim__bulk", "gpusim__sm_to_sm", "gpusim__sectors")):
            group = "Memory"
        else:
            group = "Execution"
        groups.setdefault(group, []).append(m)
    for group in ("Execution", "Memory", "Speed of light", "Stall reasons (per issued instruction)",
                  "Stall reasons (warp-cycles)"):
        out.append(f"\n## {group}\n")
        out.append("| metric | unit | kind | from | meaning |\n|---|---|---|---|---|")
        for m in groups.get(group, []):
            kind = m.kind + (f" over `{m.over}`" if m.over else "")
            out.append(f"| `{m.name}` | {m.unit} | {kind} | {origin(m.name)} | {_md(m.description)} |")
    return "\n".join(out) + "\n"


def page_run_options() -> str:
    from gpusim.options import reference_rows, variables

    varied = {field: name for name, field in variables().items()}
    out = ["# Run options\n",
           "<!-- generated by docs/gen.py from gpusim/options.py: do not edit -->\n",
           "Every option of a simulation, declared once in `gpusim.RunOptions` (a frozen value): "
           "`gpusim.run(workload, arch, options, **overrides)` takes it (or its fields by name), `gpusim run` and "
           "`gpusim sweep` take each as a flag, `gpusim sweep --vary` varies those with a variation name, and a run's "
           "record holds them all in its `options` block. A value out of range is a one-line error before anything "
           "loads.\n",
           "```python\nimport gpusim\n\nfast = gpusim.RunOptions(sms=8, sample=\"on\")\n"
           "result = gpusim.run(\"workloads/vecadd.yaml\", \"h100\", fast, params={\"n\": 1 << 20})\n```\n",
           "| option | flag | `--vary` name | default | unit | values | meaning |\n|---|---|---|---|---|---|---|"]
    for name, flag, default, unit, accepted, description in reference_rows():
        vary = f"`{varied[name]}`" if name in varied else ""
        out.append(f"| `{name}` | `{flag}` | {vary} | {_md(default)} | {unit} | {_md(accepted).replace('|', '/')} | "
                   f"{_md(description).replace('|', '/')} |")
    return "\n".join(out) + "\n"


GENERATED_PAGES.update({"reference/cli.md": page_cli, "reference/arch-fields.md": page_arch_fields,
                        "reference/metrics.md": page_metrics, "reference/run-options.md": page_run_options})


# --- record tables -----------------------------------------------------------------------------------------

def _quickstart():
    return _load("quickstart.json")


def table_setup(opts) -> str:
    q = _quickstart()
    if q is None:
        return "(no record yet: `python docs/gen.py --measure setup` writes validation/results/quickstart.json)\n"
    main, tests, install = q["main_job"], q.get("tests"), q.get("install")
    rows = []
    if install:
        rows.append([f"`{install['command']}`", "installs gpusim and compiles the engine",
                     f"{install['wall_s']:.0f} s"])
    rows.append([f"`{main['command']}`",
                 f"the run's tables: {_n(main['cycles'])} cycles for {_n(main['warp_instructions'])} "
                 f"warp-instructions, {main['sampled']}", f"{main['wall_s']:.0f} s"])
    if tests:
        rows.append([f"`{tests['command']}`", f"`{tests['summary']}`", f"{tests['wall_s'] / 60:.0f} min"])
    return _table(["command", "prints", f"time ({q['machine']})"], rows, "llr")


def table_main_job_output(opts) -> str:
    q = _quickstart()
    if q is None:
        return ""
    lines = q["main_job"]["stdout"].rstrip("\n").split("\n")
    keep = int(opts.get("head", 0)) or len(lines)
    shown = lines[:keep] + (["..."] if keep < len(lines) else [])
    return "```text\n$ " + q["main_job"]["command"] + "\n" + "\n".join(shown) + "\n```\n"


def table_main_job_time(opts) -> str:
    q = _quickstart()
    if q is None:
        return ""
    main = q["main_job"]
    return (f"The README's main job, `{main['command']}` (a 4096^3 GEMM on a whole H100: "
            f"{_n(main['warp_instructions'])} warp-instructions, {main['sampled']}), took {main['wall_s']:.0f} s on "
            f"a {q['machine']}, most of it in its reduced runs.\n")


def _sampling_rows():
    d = _load("sampling-accuracy.json")
    return d["rows"] if d else []


def table_sampling_accuracy(opts, rows=None) -> str:
    rows = _sampling_rows() if rows is None else rows
    out = []
    for r in rows:
        share = 100 * r["simulated"] / r["total"] if r.get("total") else 100
        out.append([r["label"], r["arch"], r["method"], f"{share:.0f}%", _n(r["cycles_full"]),
                    _n(r["cycles_sampled"]), _pct(r["cycles_err_pct"]), f"{r['error_estimate_pct']:.1f}%",
                    _pct(r["dram_bytes_err_pct"]), f"{r.get('dram_error_estimate_pct', 0):.1f}%",
                    f"{r['l2_hit_err_points']:+.1f} pt", f"{r.get('l2_hit_error_points', 0):.1f} pt",
                    f"{r['wall_full']:.0f} / {r['wall_sampled']:.0f} s"])
    return _table(["workload", "arch", "method", "simulated", "cycles full", "sampled", "error", "stated",
                   "DRAM bytes", "stated", "L2 hit", "stated", "wall full / sampled"], out, "lllrrrrrrrrrr") + "\n" + \
        sampling_summary(rows) + "\n"


def table_sampling_other_parts(opts) -> str:
    d = _load("sampling-other-parts.json")
    return table_sampling_accuracy(opts, d["rows"]) if d else ""


def sampling_summary(rows) -> str:
    within = sum(abs(r["cycles_err_pct"]) <= 5 for r in rows)
    covered = sum(abs(r["cycles_err_pct"]) <= r["error_estimate_pct"] + 1e-9 for r in rows)
    dram_within = sum(abs(r["dram_bytes_err_pct"]) <= 5 for r in rows)
    dram_covered = sum(abs(r["dram_bytes_err_pct"]) <= r.get("dram_error_estimate_pct", 0) + 1e-9 for r in rows)
    l2_covered = sum(abs(r["l2_hit_err_points"]) <= r.get("l2_hit_error_points", 0) + 0.05 for r in rows)
    return (f"{len(rows)} kernels: cycles within 5% of the full simulation on {within}, and the stated error "
            f"covers the actual one on {covered}; DRAM bytes within 5% on {dram_within}, and their stated error "
            f"covers the actual one on {dram_covered}; the L2 hit rate's stated error (in points) covers the "
            f"actual one on {l2_covered}.")


def table_sampling_short(opts) -> str:
    rows = _sampling_rows()
    if not rows:
        return ""
    errs = [abs(r["cycles_err_pct"]) for r in rows]
    sampled = [r for r in rows if r["method"] != "full"]
    speed = [r["wall_full"] / r["wall_sampled"] for r in sampled]
    return (f"| sampled against full simulation, {len(rows)} kernels at full size "
            f"([table](docs/explanation/sampling.md#accuracy)) | cycles within 5% on "
            f"{sum(e <= 5 for e in errs)} of {len(rows)}; largest error {max(errs):.1f}%; the stated error covers "
            f"the actual on {sum(abs(r['cycles_err_pct']) <= r['error_estimate_pct'] + 1e-9 for r in rows)}; DRAM "
            f"bytes within 5% on {sum(abs(r['dram_bytes_err_pct']) <= 5 for r in rows)}, their stated error "
            f"covering the actual on "
            f"{sum(abs(r['dram_bytes_err_pct']) <= r.get('dram_error_estimate_pct', 0) + 1e-9 for r in rows)}; "
            f"{min(speed):.0f}-{max(speed):.0f}x faster where sampled |\n")


def _microbench():
    return _load("h200-simulated.json")


def table_microbench(opts) -> str:
    d = _microbench()
    if d is None:
        return "(no record yet: `python docs/gen.py --measure microbench`)\n"
    rows = [[r["quantity"], f"{r['measured']:,.2f}", f"{r['simulated']:,.2f}",
             "-" if r["measured"] == 0 and r["simulated"] == 0 else f"{r['ratio']:.3f}"] for r in d["rows"]]
    return _table(["quantity", "H200 measured", "gpusim simulated", "ratio"], rows) + \
        f"\nMean absolute error {d['mean_absolute_error_pct']:.1f}% over {len(d['rows'])} rows.\n"


def table_microbench_short(opts) -> str:
    d = _microbench()
    if d is None:
        return ""
    worst = max(d["rows"], key=lambda r: abs(r["ratio"] - 1) if r["measured"] else 0)
    return (f"| H200 microbenchmarks, {len(d['rows'])} quantities: latencies, FFMA and mma.sync rates, "
            f"L1/L2/DRAM pointer chase, shared-memory strides, STREAM, resident blocks "
            f"([table](docs/explanation/validation.md#microbenchmarks)) | mean absolute error "
            f"{d['mean_absolute_error_pct']:.1f}%; worst {worst['quantity']} at {worst['ratio']:.3f} |\n")


def _published():
    return _load("published.json")


def table_published_short(opts) -> str:
    d = _published()
    link = "[table](docs/reference/published-kernels.md)"
    if not d or not d.get("rows"):
        return (f"| published whole-kernel measurements (cuBLAS, FlashAttention, ...) | not yet recorded: the {link} "
                f"renders `validation/results/published.json` once `validation/published.py` writes it |\n")
    summary = d.get("summary", {})
    if summary.get("mean_abs_error_pct") is None:
        return f"| published whole-kernel measurements, {len(d['rows'])} rows ({link}) | no row simulated |\n"
    return (f"| published whole-kernel measurements, {summary['simulated']} kernels ({link}) | mean absolute error "
            f"{summary['mean_abs_error_pct']:.0f}%; worst {summary['worst_row']} at {summary['worst_pct']:.0f}% |\n")


def table_published(opts) -> str:
    d = _published()
    if not d or not d.get("rows"):
        return ("No comparison is recorded yet. `python validation/published.py` simulates every row of "
                "`validation/published.yaml` (public measurements of whole kernels, each with its source) and writes "
                "`validation/results/published.json`; `python docs/gen.py` then renders it here: one row per "
                "kernel, the published number, what gpusim simulates for the same launch, and their ratio.\n")

    def cell(value, unit):
        return "-" if value is None else f"{value:,.1f} {unit}"

    rows = []
    for r in d["rows"]:
        shape = ", ".join(f"{k}={v}" for k, v in (r.get("set") or {}).items())
        simulated = cell(r.get("simulated"), r.get("unit", "")) if not r.get("error") else f"error: {r['error']}"
        clock = r.get("clock", "boost")
        arch = r["arch"] if clock == "boost" else f"{r['arch']} at the {clock} clock" if isinstance(clock, str) \
            else f"{r['arch']} at {clock:g} MHz"
        rows.append([f"`{r['id']}`", f"{r['workload']} ({shape})" if shape else r["workload"], arch,
                     cell(r.get("published"), r.get("unit", "")), simulated,
                     "-" if r.get("ratio") is None else f"{r['ratio']:.3f}", _md(str(r.get("source", "")))])
    out = _table(["row", "workload", "arch", "published", "simulated", "ratio", "source"], rows, "lllrrrl")
    summary = d.get("summary", {})
    if summary.get("mean_abs_error_pct") is not None:
        out += (f"\n{summary['simulated']} of {summary['rows']} rows simulated: mean absolute error "
                f"{summary['mean_abs_error_pct']:.1f}%, worst {summary['worst_row']} at {summary['worst_pct']:.1f}%.\n")
    out += _published_not_simulated()
    return out


def _published_table():
    """validation/published.py as a module: the table's own loader and unit names."""
    import importlib.util

    name = "validation_published"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "validation/published.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # (its dataclasses look their module up there)
        spec.loader.exec_module(module)
    return sys.modules[name]


def _published_not_simulated() -> str:
    """The table's published numbers no row simulates (validation/published.yaml, not_simulated:) and why."""
    table = _published_table()
    _rows, entries = table.load_rows(table.TABLE)
    if not entries:
        return ""

    def number(e) -> str:
        value = e.get("published")
        shown = f"{value:,}" if isinstance(value, (int, float)) else str(value if value is not None else "-")
        return f"{shown} {table.UNITS.get(e.get('metric'), '')}".strip()

    rows = [[f"`{e['id']}`", e.get("arch", ""), number(e), _md(" ".join(str(e.get("reason", "")).split()))]
            for e in entries]
    return (f"\nPublished numbers the table keeps but does not simulate ({len(entries)}), each with why "
            f"(`not_simulated:` in `validation/published.yaml`, where each has its source):\n\n"
            + _table(["row", "arch", "published", "why not simulated"], rows, "llrl"))


def table_sync_window(opts) -> str:
    d = _load("sync-window.json")
    arch = opts.get("arch", "h100")
    rows = [r for r in d["rows"] if r["arch"] == arch]
    labels = list(dict.fromkeys(r["label"] for r in rows))
    windows = sorted({r["sync_window"] for r in rows if r["sync_window"] != 1})
    out = []
    for label in labels:
        mine = {r["sync_window"]: r for r in rows if r["label"] == label}
        exact = mine.get(1)
        cells = [label, f"{exact['wall_s']:.1f} s, {_n(exact['gpu_sim_cycle'])} cycles" if exact else "-"]
        for w in windows:
            r = mine.get(w)
            if r is None or "vs_exact" not in r:
                cells.append("")
                continue
            v = r["vs_exact"]
            cells.append(f"{r['speedup']:.2f}x, cycles {v['gpu_sim_cycle']:+.2f}%, L2 hit "
                         f"{v['lts__t_sector_hit_rate.pct']:+.1f} pt")
        out.append(cells)
    return _table([f"{arch}, full run", "exact"] + [f"W = {w}" for w in windows], out, "l" * (2 + len(windows)))


def table_event_loop(opts) -> str:
    d = _load("event-loop.json")
    base = d["rows"][0]["ns_per_step"]
    rows = [[r["loop"], f"{r['ns_per_step']:,.0f} ns", f"{r['ns_per_step'] / base:.1f}x"] for r in d["rows"]]
    return (_table(["loop", "per SM step", "against the calendar"], rows, "lrr")
            + f"\n({d['machine']}, {d['measured']}; `{d['command']}`.)\n")


def table_host_counts(opts) -> str:
    d = _load("host-counts.json")
    if d is None:
        return "(no record yet: `python validation/host_counts.py`)\n"
    rows = [[r["sms"], r.get("blocks_per_sm", 2), _n(r["warp_instructions"]),
             f"{r['host_instructions_per_warp_instruction']:,.0f}", f"{r['d1_misses_per_warp_instruction']:.1f}",
             f"{r['ll_misses_per_warp_instruction']:.2f}",
             f"{r['mispredicts_per_warp_instruction']:.1f}" if "mispredicts_per_warp_instruction" in r else ""]
            for r in d["rows"]]
    run = d["rows"][0]["runs"][0]
    model = "; ".join(" ".join(run[key].split()) for key in ("d1_model", "ll_model") if run.get(key))  # (padded)
    cpu = f"{d['cpu']}, " if d.get("cpu") else ""
    return (_table(["busy SMs", "blocks an SM", "warp-instructions counted", "host instructions / warp-inst",
                    "L1 data misses / warp-inst", "last-level misses / warp-inst",
                    "mispredicted branches / warp-inst"], rows, "rrrrrrr")
            + f"\n({cpu}{d['machine']}, {d['date']}, commit {d['commit']}; {model}; `{d['command']}`.)\n")


def table_sampling_spread(opts) -> str:
    d = _load("sampling-spread.json")
    out = []
    for r in d["rows"]:
        out.append([r["label"], r["arch"], _n(r["cycles_full"]), len(r["draws"]),
                    f"{r['error_pct_min']:.1f}% to {r['error_pct_max']:.1f}%", f"{r['error_pct_mean']:.1f}%"])
    return _table(["kernel", "arch", "cycles (full run)", "stagger draws", "sampled error, min to max",
                   "mean"], out)


def table_bench(opts) -> str:
    d = _load("bench.json")
    if d is None:
        return "(no record yet: `python docs/gen.py --measure setup`)\n"
    out = []
    for engine, records in d["engines"].items():
        for r in records:
            params = ", ".join(f"{k}={v}" for k, v in r["params"].items())
            out.append([f"{r['workload']} ({params})", f"{r['sms']}", engine, _n(r["warp_instructions"]),
                        _n(r["warp_instructions_per_second"]), _n(r["cycles_per_second"]),
                        _n(r["silicon_slowdown"])])
    return _table(["kernel", "SMs", "engine", "warp-instructions", "warp-inst/s", "cycles/s",
                   "slowdown vs silicon"], out, "lrlrrrr") + f"\n({d['machine']}, `gpusim bench`.)\n"


def table_vectoradd(opts) -> str:
    d = _load("h200-2026-11-30-vectoradd.json")
    cold, warm = d["per_block_summary"]["cold_l2"], d["per_block_summary"]["warm_l2"]
    spans = [(r["globaltimer_span_ns_cold_l2"], r["globaltimer_span_ns_warm_l2"]) for r in d["runs"]]
    cold_span = sum(s[0] for s in spans) / len(spans) / 1000
    warm_span = sum(s[1] for s in spans) / len(spans) / 1000
    return _table(["vectorAdd on an H200", "cold L2", "warm L2"], [
        ["whole grid, first block start to last block end", f"{cold_span:.2f} us", f"{warm_span:.2f} us"],
        ["median block duration (SM cycles)", _n(cold["median_block_duration_sm_cycles"]),
         _n(warm["median_block_duration_sm_cycles"])],
        ["last block start after the first", f"{cold['last_block_start_ns_after_first']} ns",
         f"{warm['last_block_start_ns_after_first']} ns"],
    ])


def _llm_examples(opts) -> list[dict] | None:
    d = _load("llm-examples.json")
    if d is None:
        return None
    wanted = opts.get("ids", "").split(",") if opts.get("ids") else None
    return [e for e in d["examples"] if wanted is None or e["id"] in wanted]


def table_llm(opts) -> str:
    """`gpusim llm` estimates from validation/results/llm-examples.json: latencies against their floors."""
    examples = _llm_examples(opts)
    if examples is None:
        return "(no record yet: `python validation/llm_examples.py`)\n"
    rows = []
    for e in examples:
        gpus = f"{e['tp']} x {e['arch']}" if e["tp"] > 1 else e["arch"]
        rows.append([f"`{e['command']}`", gpus, f"{e['batch']}", f"{e['prompt']:,}",
                     f"{e['time_to_first_token_s'] * 1e3:,.2f}", f"{e['prefill_weight_flops'] / 1e12:,.0f}",
                     f"{e['time_per_output_token_s'] * 1e3:,.3f}", f"{e['decode_floor_s'] * 1e3:,.3f}",
                     f"{e['time_per_output_token_s'] / e['decode_floor_s']:.2f}",
                     f"{e['allreduce_s'] * 1e3:,.3f}" if e["tp"] > 1 else "-", f"{e['tokens_per_s']:,.0f}"])
    return _table(["command", "GPUs", "batch", "prompt", "TTFT ms", "prefill TFLOP/s", "TPOT ms", "DRAM floor ms",
                   "TPOT / floor", "all-reduce ms a token", "tokens/s"], rows, "llrrrrrrrrr")


def table_llm_kernels(opts) -> str:
    """One example's kernels (validation/results/llm-examples.json), one phase: time per step and bound unit."""
    examples = _llm_examples(opts)
    if not examples:
        return "(no record yet: `python validation/llm_examples.py`)\n"
    e, phase = examples[0], opts.get("phase", "decode")
    total = e["time_to_first_token_s"] if phase == "prefill" else e["time_per_output_token_s"]
    layers = e["layers"]
    rows = []
    for k in e["kernels"]:
        if k["phase"] != phase:
            continue
        runs = k["count"] * (layers if k["per"] == "layer" else 1)
        step = k["seconds"] * runs
        rows.append([k["name"], k["shape"], k["workload"].rsplit("/", 1)[-1], f"{k['seconds'] * 1e6:,.2f}",
                     f"{runs:,}", f"{step * 1e3:,.3f}", f"{100 * step / total:.1f}%",
                     f"{k['bound']} {k['bound_pct']:.0f}%"])
    return _table(["kernel", "shape", "workload", "us each", "runs", "ms a step", "share", "bound"], rows,
                  "lllrrrrl") + f"\n(`{e['command']}`.)\n"


def table_llm_validation(opts) -> str:
    """validation/results/inference.json: published inference numbers against gpusim llm's."""
    d = _load("inference.json")
    if d is None:
        return "(no record yet: `python validation/inference.py`)\n"
    rows = []
    for r in d["rows"]:
        sim = f"{r['simulated']:,.2f}" if "simulated" in r else f"error: {r['error']}"
        ratio = f"{r['ratio']:.2f}" if "ratio" in r else "-"
        rows.append([r["id"], r["metric"], f"{r['published']:,.2f}", sim, ratio, r["source"]])
    mae = d["summary"]["mean_abs_error_pct"]
    return _table(["row", "metric", "published", "gpusim", "ratio", "source"], rows, "llrrrl") + \
        f"\nMean absolute error over {d['summary']['rows'] - d['summary']['failed']} rows: {mae:.1f}% " \
        f"(`{d['command']}`, {d['date'][:10]}, {d['machine']}).\n"


def table_accuracy(opts) -> str:
    return "| compared with | result |\n|---|---|\n" + table_microbench_short(opts) + table_sampling_short(opts) + \
        table_published_short(opts)


TOP_LEVEL = {  # the repository's folders beside the package, in words
    "arch/": "one YAML file per GPU, every number with its source; mig.yaml holds the MIG profiles",
    "workloads/": "the shipped kernels (YAML); microbench/ holds the microbenchmarks",
    "examples/": "the three coursework labs (scripts) and their small workloads",
    "validation/": "CUDA microbenchmarks, the H200's measurements, accuracy scripts, results/ (the records)",
    "docs/": "this documentation (MkDocs); gen.py writes its generated parts",
    "tests/": "unit, property, oracle (cuda_occupancy.h) and hardware-data tests",
}


def _first_line(path: Path) -> str:
    import ast

    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return doc.strip().split("\n\n")[0].replace("\n", " ").rstrip(".")


PACKAGES = {  # what each package is, in a few words (its modules are listed from the tree)
    "analytic": "pure functions", "app": "applications on simpy", "arch": "architecture files", "calibrate": "arch files from measurements",
    "cli": "the command line", "engine": "the cycle-level engine", "isa": "the instruction set",
    "llm": "transformer inference (gpusim llm)",
    "memory": "the memory hierarchy", "report": "tables and plots", "sampling": "sampled simulation",
    "stats": "counters and metrics", "sweep": "gpusim sweep", "trace": "NVBit traces", "workload": "the YAML workloads",
}


def table_layout(opts) -> str:
    import textwrap

    package = ROOT / "gpusim"
    width = 24
    top = sorted(p.stem for p in package.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    lines = ["```text"]
    lines += textwrap.wrap("modules: " + ", ".join(top), 114, initial_indent=f"{'gpusim/':<{width}}",
                           subsequent_indent=" " * width)
    for d in sorted(x for x in package.iterdir() if (x / "__init__.py").exists()):
        modules = sorted(m.stem for m in d.glob("*.py") if m.stem != "__init__")
        what = PACKAGES.get(d.name) or _shorten(_first_line(d / "__init__.py"), 40)
        head = f"{'gpusim/' + d.name + '/':<{width}}"
        lines += textwrap.wrap(f"{what}: " + ", ".join(modules), 114, initial_indent=head,
                               subsequent_indent=" " * width)
    for name, what in TOP_LEVEL.items():
        lines += textwrap.wrap(what, 114, initial_indent=f"{name:<{width}}", subsequent_indent=" " * width)
    return "\n".join(lines) + "\n```\n"


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 3].rsplit(" ", 1)[0] + " ..."


def table_accuracy_site(opts) -> str:
    """The README's accuracy table with links relative to docs/."""
    return table_accuracy(opts).replace("(docs/", "(")


TABLES = {"main-job-time": table_main_job_time, "accuracy": table_accuracy, "accuracy-site": table_accuracy_site,
          "layout": table_layout, "setup": table_setup, "main-job-output": table_main_job_output,
          "sampling-accuracy": table_sampling_accuracy, "sampling-other-parts": table_sampling_other_parts,
          "sampling-short": table_sampling_short,
          "microbench": table_microbench, "microbench-short": table_microbench_short,
          "published": table_published, "published-short": table_published_short,
          "sync-window": table_sync_window, "event_loop": table_event_loop, "host-counts": table_host_counts,
          "sampling-spread": table_sampling_spread, "bench": table_bench,
          "vectoradd": table_vectoradd, "llm": table_llm, "llm-kernels": table_llm_kernels,
          "llm-validation": table_llm_validation}


# --- executing a page --------------------------------------------------------------------------------------

def _options(text: str) -> tuple[list[str], dict[str, str]]:
    """`word key=value key="a value with spaces"`: backslashes are kept (values are often regexes)."""
    words, opts = [], {}
    for m in re.finditer(r'([\w-]+)(?:=(?:"([^"]*)"|(\S+)))?', text):
        if m.group(2) is None and m.group(3) is None:
            words.append(m.group(1))
        else:
            opts[m.group(1)] = m.group(2) if m.group(2) is not None else m.group(3)
    return words, opts


def _env(width: int) -> dict:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.update(COLUMNS=str(width), LINES="50", NO_COLOR="1", TERM="dumb", PYTHONHASHSEED="0",
               MPLBACKEND="Agg", PYTHONWARNINGS="ignore")
    env.pop("FORCE_COLOR", None)
    return env


class Failure(Exception):
    pass


def _shell(command: str, cwd: Path, *, width=100, stderr=False, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", "set -eo pipefail\n" + command], cwd=cwd, env=_env(width), text=True,
                          timeout=timeout,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT if stderr else subprocess.PIPE,
                          stdin=subprocess.DEVNULL)


def _commands(console: str) -> list[str]:
    """The `$ ` commands of a console block (a trailing backslash continues a command)."""
    out, current = [], None
    for line in console.split("\n"):
        if current is not None:
            current += "\n" + line
            if not line.endswith("\\"):
                out.append(current)
                current = None
        elif line.startswith("$ "):
            if line.endswith("\\"):
                current = line[2:]
            else:
                out.append(line[2:])
    return out


def _cut(text: str, opts: dict) -> str:
    lines = text.rstrip("\n").split("\n") if text.strip() else []
    if "keep" in opts:
        lines = [l for l in lines if re.search(opts["keep"], l)]
    if "drop" in opts:
        lines = [l for l in lines if not re.search(opts["drop"], l)]
    if "strip" in opts:
        lines = [re.sub(opts["strip"], "", l) for l in lines]
    lines = [l.rstrip() for l in lines]
    if "head" in opts and len(lines) > int(opts["head"]):
        lines = lines[:int(opts["head"])] + ["..."]
    if "tail" in opts and len(lines) > int(opts["tail"]):
        lines = ["..."] + lines[-int(opts["tail"]):]
    return "\n".join(lines)


def run_region(opts: dict, body: str, cwd: Path, where: str) -> str:
    match = re.search(r"```console\n(.*?)```", body, re.S)
    if not match:
        raise Failure(f"{where}: a gen:run region holds no ```console block")
    parts = []
    for command in _commands(match.group(1)):
        started = time.perf_counter()
        p = _shell(command, cwd, width=int(opts.get("width", 100)), stderr="stderr" in opts,
                   timeout=int(opts.get("timeout", 300)))
        expected = int(opts.get("rc", 0))
        if p.returncode != expected:
            raise Failure(f"{where}: `{command}` exited {p.returncode} (expected {expected}) after "
                          f"{time.perf_counter() - started:.1f} s:\n{(p.stdout or '')[-1500:]}"
                          f"{(p.stderr or '')[-1500:]}")
        shown = _cut(p.stdout, opts)
        parts.append("$ " + command + ("\n" + shown if shown else ""))
    for spec in filter(None, opts.get("files", "").split(",")):
        src, dest = spec.split("=")
        if not (cwd / src).exists():
            raise Failure(f"{where}: the commands wrote no {src}")
        (IMG / dest).parent.mkdir(parents=True, exist_ok=True)
        if not CHECKING:
            shutil.copyfile(cwd / src, IMG / dest)
        elif not (IMG / dest).exists():
            raise Failure(f"{where}: docs/img/{dest} is missing (python docs/gen.py writes it)")
    return "```console\n" + "\n".join(parts) + "\n```\n"


def figure_region(opts: dict, page: Path, where: str) -> str:
    src = ROOT / opts["src"]
    dest = IMG / (opts.get("name") or src.name)
    if not src.exists():
        raise Failure(f"{where}: no {opts['src']}")
    if CHECKING:
        if not dest.exists() or dest.read_bytes() != src.read_bytes():
            raise Failure(f"{where}: docs/img/{dest.name} differs from {opts['src']} (python docs/gen.py copies it)")
    else:
        IMG.mkdir(exist_ok=True)
        shutil.copyfile(src, dest)
    rel = os.path.relpath(dest, page.parent)
    return f"![{opts.get('alt', '')}]({rel})\n"


def _run_block(kind: str, text: str, cwd: Path, where: str, index: int) -> None:
    if kind in ("bash", "sh"):
        p = _shell(text, cwd, timeout=300)
        if p.returncode:
            raise Failure(f"{where}: the bash block exited {p.returncode}:\n{text}\n{p.stdout[-1500:]}"
                          f"{p.stderr[-1500:]}")
    elif kind == "python":
        script = cwd / f"_block{index}.py"
        if ">>>" in text:
            script = cwd / f"_block{index}.txt"
            script.write_text(text)
            command = f"{shlex.quote(sys.executable)} -m doctest -o NORMALIZE_WHITESPACE {script.name}"
        else:
            script.write_text(text)
            command = f"{shlex.quote(sys.executable)} {script.name}"
        p = _shell(command, cwd, timeout=300)
        if p.returncode:
            raise Failure(f"{where}: the python block failed:\n{text}\n{p.stdout[-2000:]}{p.stderr[-2000:]}")


def _scratch() -> Path:
    cwd = Path(tempfile.mkdtemp(prefix="gpusim-docs-"))
    for name in LINKED:
        (cwd / name).symlink_to(ROOT / name)
    return cwd


def render_page(page: Path, execute: bool = True) -> tuple[str, list[str]]:
    """The page as this script would write it (executing its commands and blocks in order), and the regions
    that differ from the committed page (their run-to-run noise masked)."""
    text = page.read_text()
    name = str(page.relative_to(ROOT))
    cwd = _scratch() if execute else None
    try:
        out, pos, index, changed = [], 0, 0, []
        # walk regions and free fences in document order
        tokens = sorted([(m.start(), m.end(), "region", m) for m in REGION.finditer(text)]
                        + [(m.start(), m.end(), "fence", m) for m in FENCE.finditer(text)], key=lambda t: t[0])
        end_of_region = -1
        for start, end, kind, m in tokens:
            if start < end_of_region:
                continue  # a fence inside a region
            line = text.count("\n", 0, start) + 1
            where = f"{name}:{line}"
            if kind == "region":
                end_of_region = end
                out.append(text[pos:start])
                gen, args, body = m.group(1), m.group(2), m.group(3)
                words, opts = _options(args)
                if gen == "run":
                    new = run_region(opts, body, cwd, where) if execute else body
                elif gen == "table":
                    new = TABLES[words[0]](opts)
                elif gen == "figure":
                    new = figure_region(opts, page, where)
                else:
                    raise Failure(f"{where}: unknown region gen:{gen}")
                out.append(f"<!-- gen:{gen}{args}-->\n{new}<!-- /gen -->")
                extra = [opts["volatile"]] if "volatile" in opts else []
                if _mask(body, extra) != _mask(new, extra):
                    changed.append(f"{where} (gen:{gen}{args.rstrip()}):\n" + "".join(difflib.unified_diff(
                        _mask(body, extra).splitlines(True), _mask(new, extra).splitlines(True), "committed",
                        "generated", n=1))[:3000])
                pos = end
                continue
            before = text[:start].rstrip("\n").rsplit("\n", 1)[-1]
            lang, body = m.group(1), m.group(2)
            index += 1
            if FILE.search(before) and execute:
                target = cwd / FILE.search(before).group(1)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(body)
            elif NOT_RUN.search(before) or lang not in ("bash", "sh", "python") or not execute:
                pass
            else:
                _run_block(lang, body, cwd, where, index)
        out.append(text[pos:])
        return "".join(out), changed
    finally:
        if cwd is not None:
            shutil.rmtree(cwd, ignore_errors=True)


def _mask(text: str, extra=()) -> str:
    for pattern in [*VOLATILE, *extra]:
        text = re.sub(pattern, lambda m: re.sub(r"[0-9][0-9.,]*", "N", m.group(0)), text, flags=re.M)
    return text


def pages() -> list[Path]:
    generated = {DOCS / p for p in GENERATED_PAGES}
    return [ROOT / "README.md"] + sorted(p for p in DOCS.rglob("*.md") if p not in generated)


CHECKING = False


def main(argv=None) -> int:
    global CHECKING
    parser = argparse.ArgumentParser(description="Generate or check README.md and docs/.")
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on a difference")
    parser.add_argument("--measure", choices=sorted(["setup", "tests", "microbench"]), action="append",
                        help="refresh a record in validation/results/ (then regenerate)")
    parser.add_argument("--no-exec", action="store_true", help="render records and generated pages only")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="pages processed at once")
    parser.add_argument("--timings", action="store_true", help="print each page's time on stderr")
    parser.add_argument("paths", nargs="*", type=Path, help="pages to process (default: all)")
    args = parser.parse_args(argv)
    CHECKING = args.check
    for what in args.measure or []:
        MEASURE[what]()
    selected = [p.resolve() for p in args.paths] or None
    problems = []

    def want(path: Path) -> bool:
        return selected is None or path.resolve() in selected

    for rel, fn in GENERATED_PAGES.items():
        path = DOCS / rel
        if not want(path):
            continue
        new = fn()
        if args.check:
            if not path.exists() or path.read_text() != new:
                problems.append(f"{path.relative_to(ROOT)} differs from what docs/gen.py writes")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(new)

    todo = [p for p in pages() if want(p)]

    def one(page: Path):
        started = time.perf_counter()
        try:
            result = page, *render_page(page, execute=not args.no_exec), None
            if args.timings:
                print(f"{time.perf_counter() - started:6.1f} s  {page.relative_to(ROOT)}", file=sys.stderr)
            return result
        except (Failure, subprocess.TimeoutExpired, re.error, KeyError, OSError) as exc:
            return page, None, None, f"{page.relative_to(ROOT)}: {type(exc).__name__}: {exc}"

    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for page, new, changed, error in pool.map(one, todo):
            name = page.relative_to(ROOT)
            if error:
                problems.append(error)
            elif args.check:
                problems += [f"{name} differs from what docs/gen.py writes at {c}" for c in changed]
            elif new != page.read_text():
                page.write_text(new)
                print(f"wrote {name}")
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems and args.check:
        print(f"{len(problems)} page(s) out of date: run python docs/gen.py", file=sys.stderr)
    return 1 if problems else 0


# --- measuring the records ---------------------------------------------------------------------------------

def _machine() -> str:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{cores}-core machine"


def _write_record(name: str, update: dict) -> None:
    path = RESULTS / name
    record = json.loads(path.read_text()) if path.exists() else {}
    record.update(update)
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {path.relative_to(ROOT)}")


TEST_COMMAND = "python -m pytest"


def main_job_command() -> str:
    """The main job as the README's first command block runs it."""
    first = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    return re.search(r"gpusim run [^&\n]+", first).group(0).strip()


def _fresh_copy() -> Path:
    """The project's files (tracked and untracked, not ignored) copied to a new directory: installing there
    leaves this checkout's compiled modules alone."""
    copy = Path(tempfile.mkdtemp(prefix="gpusim-fresh-"))
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, copy / name)
    return copy


def measure_setup() -> None:
    """The README's set-up: a fresh venv, `pip install -e .` (timed), the main job (timed), `gpusim bench`."""
    copy = _fresh_copy()
    venv = copy / ".venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {**_env(120), "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("VIRTUAL_ENV", None)
    started = time.perf_counter()
    subprocess.run(["pip", "install", "-q", "-e", "."], cwd=copy, env=env, check=True)
    install = time.perf_counter() - started
    command = main_job_command()
    out = copy / "main-job.json"
    started = time.perf_counter()
    p = subprocess.run(shlex.split(command) + ["--quiet", "--json", str(out)], cwd=copy, env=env, text=True,
                       capture_output=True, timeout=3600)
    wall = time.perf_counter() - started
    if p.returncode:
        raise SystemExit(f"{command} failed: {p.stderr[-500:]}")
    record = json.loads(out.read_text())
    sampling = record.get("sampling", {})
    sampled = (f"{sampling.get('simulated_warp_instructions', 0):,} of them simulated and the rest projected "
               f"(stated error {sampling.get('error_estimate_pct', 0):.1f}%)"
               if sampling.get("method") != "full" else "simulated in full")
    engines = {}
    for name, extra in (("compiled", {}), ("interpreted", {"GPUSIM_PURE_PYTHON": "1"})):
        b = subprocess.run(["gpusim", "bench", "--json"], env={**env, **extra}, capture_output=True, text=True,
                           cwd=copy, check=True)
        engines[name] = json.loads(b.stdout)
    shutil.rmtree(copy, ignore_errors=True)
    machine, date = _machine(), time.strftime("%Y-%m-%d")
    _write_record("quickstart.json", {"machine": machine, "date": date,
                                      "install": {"command": "pip install -e .", "wall_s": round(install, 1)},
                                      "main_job": {"command": command, "wall_s": round(wall, 1),
                                                   "stdout": re.sub(r"\n+$", "\n", "".join(
                                                       l for l in p.stdout.splitlines(True)
                                                       if not l.startswith("wrote "))),
                                                   "cycles": record["metrics"]["gpu_sim_cycle"],
                                                   "warp_instructions": record["metrics"]["smsp__inst_executed.sum"],
                                                   "sampled": sampled}})
    _write_record("bench.json", {"command": "gpusim bench --json (and with GPUSIM_PURE_PYTHON=1)",
                                 "machine": machine, "date": date, "engines": engines})


def measure_tests() -> None:
    started = time.perf_counter()
    p = _shell(TEST_COMMAND, ROOT, timeout=7200)
    wall = time.perf_counter() - started
    summary = [l for l in p.stdout.strip().split("\n") if re.search(r"\d+ passed", l)]
    print(p.stdout[-6000:])
    if p.returncode or not summary:
        raise SystemExit(f"{TEST_COMMAND} failed (exit {p.returncode}); the record is left as it was")
    _write_record("quickstart.json", {"tests": {"command": TEST_COMMAND, "wall_s": round(wall, 1),
                                               "summary": re.sub(r" in [0-9.]+s.*", "", summary[-1].strip("= "))}})


def measure_microbench() -> None:
    sys.path.insert(0, str(ROOT / "validation"))
    import compare

    source = RESULTS / "h200-2026-11-29.json"
    rows = compare.comparison_rows(json.loads(source.read_text()), "h200")
    _write_record("h200-simulated.json", {
        "what": "every H200 microbenchmark quantity beside the engine's simulation of the same kernel "
                "(validation/compare.py, arch h200)", "measured": str(source.relative_to(ROOT)),
        "command": "python docs/gen.py --measure microbench", "machine": _machine(),
        "date": time.strftime("%Y-%m-%d"),
        "rows": [{"key": r.key, "quantity": r.quantity, "measured": r.measured, "simulated": r.simulated,
                  "ratio": r.ratio if r.measured else (1.0 if r.simulated == 0 else None)} for r in rows],
        "mean_absolute_error_pct": compare.mean_absolute_error(rows)})


MEASURE = {"setup": measure_setup, "tests": measure_tests, "microbench": measure_microbench}

if __name__ == "__main__":
    sys.exit(main())
