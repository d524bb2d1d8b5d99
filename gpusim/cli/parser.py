"""The command line's grammar: every command and flag (argparse), the run options' flags made from
gpusim.options.RunOptions. A usage error is one line."""

from __future__ import annotations

import argparse

from ..errors import one_line, shorten
from ..options import add_option_flags, parse_size, variables
from ..version import __version__
from .app_command import add_app_parser
from .llm_command import add_llm_parser


def json_path(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a file path or '-' (standard output), got {shorten(text, 40)}")
    return text


def int_arg(minimum: int, maximum: int | None = None):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {shorten(text, 40)}") from None
        if value < minimum or (maximum is not None and value > maximum):
            bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
            raise argparse.ArgumentTypeError(f"expected an integer {bound}, got {value}")
        return value
    return parse


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line."""

    def error(self, message):  # noqa: D401 - argparse API
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="gpusim", description="Cycle-level GPU SM simulator and CUDA-exact occupancy calculator.")
    parser.add_argument("--version", action="version", version=f"gpusim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    archs = sub.add_parser("archs", help="list the modelled architectures and their derived peaks")
    archs.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    archs.add_argument("--fields", action="store_true",
                       help="list every arch-file field with its unit, accepted range and description instead")
    archs.add_argument("--mig", action="store_true",
                       help="list the MIG profiles instead (SMs, memory, L2, DRAM bandwidth per slice); use one as "
                            "--arch ARCH:PROFILE, e.g. --arch h100:3g.40gb")
    archs.add_argument("--assumed", action="store_true",
                       help="list, per architecture, the fields whose values are assumed (no measured or datasheet "
                            "source: the file's comment on the value marks it R) instead")

    occ = sub.add_parser("occupancy", help="theoretical occupancy of a launch, as CUDA's calculator computes it")
    occ.add_argument("--arch", required=True, help="architecture name (see `gpusim archs`), a MIG slice of one "
                                                   "(h100:3g.40gb; see `gpusim archs --mig`) or path to a YAML file")
    occ.add_argument("--threads", type=int_arg(1), default=None,
                     help="threads per block (required without --suggest; with it, shown beside the suggestion)")
    occ.add_argument("--regs", required=True, type=int_arg(1), help="registers per thread")
    occ.add_argument("--smem", default=0, type=parse_size,
                     help="shared memory per block, static + dynamic (bytes; 48K, 64KB, 1M accepted)")
    occ.add_argument("--carveout", type=int_arg(0, 100), default=None,
                     help="shared-memory carveout preference in percent (default: the device default, maximum)")
    occ.add_argument("--barriers", type=int_arg(0), default=1, help="named barriers per block (default 1)")
    occ.add_argument("--cluster", default=None, metavar="X[,Y[,Z]]",
                     help="thread block cluster shape (cc 9.0 and newer): also the most clusters resident at once, "
                          "per GPC and in all, as cudaOccupancyMaxActiveClusters reports it")
    occ.add_argument("--non-portable", action="store_true",
                     help="with --cluster: the kernel allows a non-portable cluster size (up to 16 blocks on H100 and "
                          "B200; portable: 8)")
    occ.add_argument("--suggest", action="store_true",
                     help="suggest the block size that maximises occupancy and the smallest grid that fills the GPU, "
                          "as cudaOccupancyMaxPotentialBlockSize does")
    occ.add_argument("--block-size-limit", type=int_arg(0), default=0, metavar="N",
                     help="with --suggest: the largest block the kernel can use (default 0: the arch's maximum)")
    occ.add_argument("--smem-per-thread", type=parse_size, default=0, metavar="SIZE",
                     help="with --suggest: shared memory per thread, added to --smem for each block size tried "
                          "(as the VariableSMem variant)")
    occ.add_argument("--json", action="store_true", help="print the result as JSON")
    occ.add_argument("--plot", action="store_true", help="write the calculator's three graphs, and the three in one "
                                                         "figure, under plots/")
    occ.add_argument("--plot-dir", default="plots", help="directory for --plot (default: plots)")

    run = sub.add_parser("run", help="simulate a kernel cycle by cycle")
    run.add_argument("workload", help="a workload YAML file, an Accel-Sim trace (.traceg, .traceg.xz) or a trace "
                                      "directory's kernelslist.g")
    run.add_argument("--arch", required=True, help="architecture name (see `gpusim archs`), a MIG slice of one "
                                                   "(h100:3g.40gb; see `gpusim archs --mig`) or path to a YAML file; "
                                                   "a,b,c runs each and prints them side by side")
    launch = run.add_argument_group("launch overrides", "replace the workload's launch (the program stays as written; "
                                    "an override that contradicts the workload is refused: see the README)")
    add_option_flags(run, launch)  # every run option (gpusim.options.RunOptions)
    run.add_argument("--set", action="append", metavar="NAME=VALUE", default=[],
                     help="override a workload parameter (repeatable)")
    run.add_argument("--json", metavar="PATH", default=None, type=json_path,
                     help="write the result record as JSON to PATH ('-': standard output, nothing else on it)")
    run.add_argument("--quiet", action="store_true",
                     help="no progress on stderr (by default a run of more than a second shows a progress bar on a "
                          "terminal, a line every few seconds otherwise) and no note before a long run")
    run.add_argument("--per-inst", action="store_true",
                     help="per-instruction view (as Nsight Compute's Source page): each static instruction's "
                          "executions, stall cycles by reason, bank conflicts, sectors and hit rates (a table, and "
                          "per_instruction in the JSON record; a sampled run shows its observed reduced run)")
    timeline = run.add_argument_group("timeline", "Chrome Trace Event JSON for ui.perfetto.dev: a process per SM, "
                                      "a track per warp scheduler (its issues) and per warp slot (its stall "
                                      "states), counters of active, eligible and issued warps; 1 us = 1 cycle")
    timeline.add_argument("--trace", metavar="FILE", default=None, help="write the run's timeline to FILE")
    timeline.add_argument("--trace-window", metavar="START:END", default=None,
                          help="only the cycles [START, END) (default: the whole run; 1000: or :5000 accepted)")
    timeline.add_argument("--trace-sm", metavar="N[,M...]|all", default=None,
                          help="the SMs traced (default 0), each a process: pid = SM index + 1")
    timeline.add_argument("--trace-max-events", metavar="N", default=None,
                          help="stop recording before the file holds more than N events (default 2,000,000, "
                               "about 230 MB at some 114 bytes an event)")
    plots = run.add_argument_group("plots", "PNGs of the run: warp states, one SM's warp slots, occupancy, block "
                                   "placement, memory over time, roofline")
    plots.add_argument("--plot", metavar="DIR", default=None, help="write the run's plots under DIR")
    plots.add_argument("--plot-sm", metavar="N", type=int_arg(0), default=None,
                       help="the SM whose warp slots the timeline plot shows (default 0)")

    sweep = sub.add_parser("sweep", help="run a workload at every point of a Cartesian product of variations, in "
                                         "parallel, one row per point")
    sweep.add_argument("workload", help="a workload YAML file, an Accel-Sim trace or a kernelslist.g")
    sweep.add_argument("--arch", required=True, help="architecture name (see `gpusim archs`), a MIG slice of one "
                                                     "(h100:3g.40gb; see `gpusim archs --mig`) or path to a YAML file")
    sweep.add_argument("--vary", action="append", metavar="NAME=VALUES", default=[],
                       help="a variation (repeatable; the sweep is their Cartesian product): VALUES a,b,c or "
                            "start:stop:step (stop included when the steps land on it); NAME "
                            + ", ".join(variables()) + ", arch (names or files), arch.<field path> (a hardware "
                            "what-if, e.g. arch.sm.registers; see gpusim archs --fields), or a workload parameter")
    sweep.add_argument("--metrics", default=None, metavar="A,B,...",
                       help="metrics per row (default: gpu_sim_cycle, sm__inst_executed.avg.per_cycle_active, "
                            "sm__warps_active.avg.pct_of_peak_sustained_active, l1tex__t_sector_hit_rate.pct, "
                            "lts__t_sector_hit_rate.pct, dram__bytes.sum.per_second); every row also has the "
                            "theoretical occupancy, its limiter, error and wall_s")
    sweep.add_argument("--out", required=True, metavar="FILE",
                       help="the rows: .csv, .json (a list of rows) or .parquet (needs pandas and pyarrow)")
    from ..sweep import JOBS_PER_CORE

    sweep.add_argument("--jobs", type=int_arg(1), default=None,
                       help="points simulated at once (default: the cores this process may use; never more "
                            f"workers than points to run; at most {JOBS_PER_CORE} x this machine's cores)")
    sweep.add_argument("--executor", default="pool", choices=["pool", "dask"],
                       help="pool (default): processes on this machine; dask: a Dask distributed cluster "
                            "(pip install \"gpusim[cluster]\")")
    sweep.add_argument("--dask-scheduler", default=None, metavar="tcp://HOST:PORT|local",
                       help="with --executor dask: the cluster's scheduler address, or local (default) for a "
                            "LocalCluster of --jobs worker processes on loopback")
    sweep.add_argument("--resume", action="store_true",
                       help="keep the finished rows already in --out and run only the other points (a row cut "
                            "short, unreadable or with neither metrics nor an error runs again; rows of points "
                            "not in this sweep are left out, and a line on stderr counts them)")
    sweep.add_argument("--plot", default=None, metavar="DIR",
                       help="write one PNG per metric against each varied axis under DIR")
    sweep.add_argument("--quiet", action="store_true",
                       help="no progress on stderr and no table on standard output")
    sweep.add_argument("--set", action="append", metavar="NAME=VALUE", default=[],
                       help="a workload parameter at every point (repeatable)")
    fixed = sweep.add_argument_group("launch overrides", "at every point where not varied (see gpusim run --help)")
    add_option_flags(sweep, fixed, sweep=True)  # every run option (gpusim.options.RunOptions), where not varied

    bench = sub.add_parser("bench", help="simulation speed on fma_peak and a reduced gemm_tile128")
    bench.add_argument("--arch", default="h100", help="architecture (default h100)")
    bench.add_argument("--repeat", type=int_arg(1), default=1, help="runs per case, best kept (default 1)")
    bench.add_argument("--memory", default="hierarchy", choices=["hierarchy", "fixed"],
                       help="memory model (default: the hierarchy)")
    bench.add_argument("--json", action="store_true", help="print the records as JSON")

    workload = sub.add_parser("workload", help="inspect workload files, or write a starting one")
    wsub = workload.add_subparsers(dest="workload_command", required=True, parser_class=Parser)
    show = wsub.add_parser("show", help="launch, instruction mix, bytes and the first instructions of a warp")
    show.add_argument("workload", help="a workload YAML file, an Accel-Sim trace or a kernelslist.g")
    show.add_argument("--set", action="append", metavar="NAME=VALUE", default=[],
                      help="override a parameter (repeatable), e.g. --set M=2048")
    show.add_argument("--first", type=int_arg(0, 10_000), default=12,
                      help="instructions of warp 0 to list (default 12, at most 10,000)")
    show.add_argument("--json", action="store_true", help="print the summary as JSON")
    new = wsub.add_parser("new", help="write a commented starting workload that runs as it is (the format: "
                                      "docs/workload-format.md)")
    new.add_argument("path", help="the YAML file to write")
    new.add_argument("--force", action="store_true", help="overwrite the file if it exists")

    cal = sub.add_parser("calibrate", help="write an arch file from microbenchmarks run on this machine's GPU (or "
                                           "from stored results), and check the engine on it")
    cal.add_argument("-o", "--output", metavar="FILE.yaml", default=None,
                     help="the arch file to write (required unless --dry-run); on a GPU the results are saved beside "
                          "it as FILE.results.json")
    cal.add_argument("--base", metavar="ARCH", default=None,
                     help="the arch (name or file) every value that is not measured comes from, marked R where it is "
                          "another part (default: the shipped arch of the same model, else of the same compute "
                          "capability)")
    cal.add_argument("--from", dest="from_results", metavar="RESULTS.json", default=None,
                     help="use stored validation/microbench.cu results instead of a GPU (e.g. "
                          "validation/results/h200-2026-11-29.json)")
    cal.add_argument("--dry-run", action="store_true",
                     help="list what would be measured and what kept from the base (with --from: the values), "
                          "write nothing")
    cal.add_argument("--no-check", action="store_true",
                     help="skip the engine check (simulating validation/compare.py's rows on the written file, and "
                          "moving a latency or bandwidth the engine reproduces more than 1%% off)")
    cal.add_argument("--jobs", type=int_arg(1), default=None,
                     help="simulations at once in the check (default: one per CPU)")

    val = sub.add_parser("validate", help="time the CUDA twins of the workloads (validation/kernels/) on this "
                                          "machine's GPU, or read stored results, beside gpusim's simulated time")
    val.add_argument("--arch", default=None, metavar="FILE|NAME",
                     help="the arch to simulate on (default: the shipped arch of the measured device's model; "
                          "gpusim calibrate writes one for any GPU)")
    val.add_argument("--from", dest="from_results", metavar="RESULTS.json", default=None,
                     help="compare stored twin results (what gpusim validate saved) instead of timing on a GPU")
    val.add_argument("--kernels", metavar="A,B,...", default=None,
                     help="only these twins (file stems in validation/kernels/, e.g. vecadd,gemm_tile128)")
    val.add_argument("--out", metavar="RESULTS.json", default=None,
                     help="on a GPU: where to save the measured results (default: validate-DATE.json here)")
    val.add_argument("--jobs", type=int_arg(1), default=None, help="simulations at once (default: one per CPU)")
    add_app_parser(sub)  # gpusim app run (gpusim.cli.app_command)
    add_llm_parser(sub)  # gpusim llm (gpusim.cli.llm_command)
    return parser
