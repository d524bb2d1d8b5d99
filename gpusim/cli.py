"""Command line: a thin layer over the library API. Errors are one line, never a traceback."""

from __future__ import annotations

import argparse
import json
import math
import sys

from . import __version__
from .errors import GpusimError, one_line, shorten, shown
from .interrupt import Interrupt
from .options import add_option_flags, options_from_args, parse_size, variables

def _json_path(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a file path or '-' (standard output), got {shorten(text, 40)}")
    return text


def _int_arg(minimum: int, maximum: int | None = None):
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


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line."""

    def error(self, message):  # noqa: D401 - argparse API
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gpusim", description="Cycle-level GPU SM simulator and CUDA-exact occupancy calculator.")
    parser.add_argument("--version", action="version", version=f"gpusim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

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
    occ.add_argument("--threads", type=_int_arg(1), default=None,
                     help="threads per block (required without --suggest; with it, shown beside the suggestion)")
    occ.add_argument("--regs", required=True, type=_int_arg(1), help="registers per thread")
    occ.add_argument("--smem", default=0, type=parse_size,
                     help="shared memory per block, static + dynamic (bytes; 48K, 64KB, 1M accepted)")
    occ.add_argument("--carveout", type=_int_arg(0, 100), default=None,
                     help="shared-memory carveout preference in percent (default: the device default, maximum)")
    occ.add_argument("--barriers", type=_int_arg(0), default=1, help="named barriers per block (default 1)")
    occ.add_argument("--cluster", default=None, metavar="X[,Y[,Z]]",
                     help="thread block cluster shape (cc 9.0 and newer): also the most clusters resident at once, "
                          "per GPC and in all, as cudaOccupancyMaxActiveClusters reports it")
    occ.add_argument("--non-portable", action="store_true",
                     help="with --cluster: the kernel allows a non-portable cluster size (up to 16 blocks on H100 and "
                          "B200; portable: 8)")
    occ.add_argument("--suggest", action="store_true",
                     help="suggest the block size that maximises occupancy and the smallest grid that fills the GPU, "
                          "as cudaOccupancyMaxPotentialBlockSize does")
    occ.add_argument("--block-size-limit", type=_int_arg(0), default=0, metavar="N",
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
    run.add_argument("--json", metavar="PATH", default=None, type=_json_path,
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
    plots.add_argument("--plot-sm", metavar="N", type=_int_arg(0), default=None,
                       help="the SM whose warp slots the timeline plot shows (default 0)")

    sweep = sub.add_parser("sweep", help="run a workload at every point of a Cartesian product of variations, in "
                                         "parallel, one row per point")
    sweep.add_argument("workload", help="a workload YAML file, an Accel-Sim trace or a kernelslist.g")
    sweep.add_argument("--arch", required=True, help="architecture name (see `gpusim archs`), a MIG slice of one "
                                                     "(h100:3g.40gb; see `gpusim archs --mig`) or path to a YAML file")
    sweep.add_argument("--vary", action="append", metavar="NAME=VALUES", default=[],
                       help="a variation (repeatable; the sweep is their Cartesian product): VALUES a,b,c or "
                            "start:stop:step (stop included when the steps land on it); NAME "
                            + ", ".join(variables()) + ", arch (names or files), arch.<field path> (a hardware what-if, "
                            "e.g. arch.sm.registers; see gpusim archs --fields), or a workload parameter")
    sweep.add_argument("--metrics", default=None, metavar="A,B,...",
                       help="metrics per row (default: gpu_sim_cycle, sm__inst_executed.avg.per_cycle_active, "
                            "sm__warps_active.avg.pct_of_peak_sustained_active, l1tex__t_sector_hit_rate.pct, "
                            "lts__t_sector_hit_rate.pct, dram__bytes.sum.per_second); every row also has the "
                            "theoretical occupancy, its limiter, error and wall_s")
    sweep.add_argument("--out", required=True, metavar="FILE",
                       help="the rows: .csv, .json (a list of rows) or .parquet (needs pandas and pyarrow)")
    from .sweep import JOBS_PER_CORE

    sweep.add_argument("--jobs", type=_int_arg(1), default=None,
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
    bench.add_argument("--repeat", type=_int_arg(1), default=1, help="runs per case, best kept (default 1)")
    bench.add_argument("--memory", default="hierarchy", choices=["hierarchy", "fixed"],
                       help="memory model (default: the hierarchy)")
    bench.add_argument("--json", action="store_true", help="print the records as JSON")

    workload = sub.add_parser("workload", help="inspect workload files, or write a starting one")
    wsub = workload.add_subparsers(dest="workload_command", required=True, parser_class=_Parser)
    show = wsub.add_parser("show", help="launch, instruction mix, bytes and the first instructions of a warp")
    show.add_argument("workload", help="a workload YAML file, an Accel-Sim trace or a kernelslist.g")
    show.add_argument("--set", action="append", metavar="NAME=VALUE", default=[],
                      help="override a parameter (repeatable), e.g. --set M=2048")
    show.add_argument("--first", type=_int_arg(0, 10_000), default=12,
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
    cal.add_argument("--jobs", type=_int_arg(1), default=None,
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
    val.add_argument("--jobs", type=_int_arg(1), default=None, help="simulations at once (default: one per CPU)")
    return parser


def _json(record) -> str:
    """A record as JSON, which has no NaN or infinity: a non-finite number is an error naming its field."""
    try:
        return json.dumps(record, indent=2, allow_nan=False)
    except ValueError:
        raise GpusimError(f"the record holds a non-finite number at {_non_finite(record)}: "
                          f"it cannot be written as JSON") from None


def _non_finite(value, path: str = "") -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return path or "the top level"
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) else ()
    for key, item in items:
        found = _non_finite(item, f"{path}[{shorten(key, 40)}]")
        if found:
            return found
    return None


def _cmd_archs(args) -> int:
    from .report.archs import arch_rows, field_rows, print_arch_table, print_field_table

    if args.fields and args.mig:
        raise GpusimError("gpusim archs: --fields and --mig are two different lists; give one")
    if args.assumed:
        if args.fields or args.mig:
            raise GpusimError(f"gpusim archs: --assumed and {'--fields' if args.fields else '--mig'} are two "
                              f"different lists; give one")
        from .arch.provenance import assumed_by_arch

        assumed = assumed_by_arch()
        if args.json:
            print(_json(assumed))
        else:
            _print_assumed(assumed)
        return 0
    if args.mig:
        from .arch.mig import archs_without_mig, mig_rows
        from .report.archs import print_mig_table

        rows = mig_rows()
        if args.json:
            print(_json(rows))
        else:
            print_mig_table(rows, archs_without_mig())
        return 0
    rows = field_rows() if args.fields else arch_rows()
    if args.json:
        print(_json(rows))
    else:
        (print_field_table if args.fields else print_arch_table)(rows)
    return 0


def _print_assumed(assumed: dict[str, list[str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="assumed arch-file values (no measured or datasheet source; marked R in arch/NAME.yaml)",
                  title_justify="left")
    table.add_column("arch")
    table.add_column("assumed", justify="right")
    table.add_column("fields", overflow="fold")
    for name, fields in assumed.items():
        table.add_row(name, str(len(fields)), ", ".join(fields) or "-")
    Console(width=140, highlight=False).print(table)


def _cmd_occupancy(args) -> int:
    from .analytic.occupancy import occupancy
    from .arch import load_arch

    spec = load_arch(args.arch)
    if args.non_portable and args.cluster is None:
        raise GpusimError("gpusim occupancy: --non-portable applies with --cluster only")
    if args.suggest:
        if args.cluster is not None:
            raise GpusimError("gpusim occupancy: --cluster applies without --suggest (the suggestion is per SM)")
        return _cmd_suggest(args, spec)
    for flag, value in (("--block-size-limit", args.block_size_limit), ("--smem-per-thread", args.smem_per_thread)):
        if value:
            raise GpusimError(f"gpusim occupancy: {flag} applies with --suggest only")
    if args.threads is None:
        raise GpusimError("gpusim occupancy: --threads is required (or --suggest, which suggests a block size)")
    try:
        result = occupancy(spec, args.threads, args.regs, args.smem, args.carveout, args.barriers)
    except ValueError as exc:
        raise GpusimError(f"gpusim occupancy: {exc}") from None
    clusters = None if args.cluster is None else _cluster_occupancy(args, spec)
    if args.json:
        print(_json((result if clusters is None else clusters).to_dict()))
    else:
        from .report.occupancy_table import print_occupancy

        print_occupancy(spec, result)
        if clusters is not None:
            from .report.cluster_table import print_clusters

            print_clusters(clusters)
    if args.plot:
        from .report.occupancy_plot import plot_occupancy

        for path in plot_occupancy(spec, result, args.plot_dir):
            print(path)
    return 0


def _cluster_occupancy(args, spec):
    """`gpusim occupancy --cluster`: cudaOccupancyMaxActiveClusters' answer for the launch."""
    from .analytic.clusters import check_cluster, cluster_occupancy, parse_cluster

    try:
        dims = check_cluster(spec, parse_cluster(args.cluster), args.non_portable)
    except ValueError as exc:  # "cluster X: why" names the flag once prefixed
        raise GpusimError(f"gpusim occupancy: --{exc}") from None
    return cluster_occupancy(spec, args.threads, args.regs, dims, args.smem, args.carveout, args.barriers,
                             args.non_portable)


def _cmd_suggest(args, spec) -> int:
    """`gpusim occupancy --suggest`: cudaOccupancyMaxPotentialBlockSize's answer, and the given block's occupancy."""
    from .analytic.occupancy import occupancy, suggest_block_size

    if args.plot:
        raise GpusimError("gpusim occupancy: --plot draws one launch's graphs; leave out --suggest (or --plot)")
    base, per_thread = args.smem, args.smem_per_thread
    smem = base if not per_thread else (lambda size: base + per_thread * size)
    try:
        s = suggest_block_size(spec, args.regs, smem, args.block_size_limit, args.carveout, args.barriers)
        given = None if args.threads is None else \
            occupancy(spec, args.threads, args.regs, base + per_thread * args.threads, args.carveout, args.barriers)
    except ValueError as exc:
        raise GpusimError(f"gpusim occupancy: {exc}") from None
    if args.json:
        record = s.to_dict()
        if given is not None:
            record["given"] = {"threads_per_block": given.threads_per_block, "occupancy": given.occupancy,
                               "blocks_per_sm": given.blocks_per_sm, "limiters": list(given.limiters)}
        print(_json(record))
        return 0
    smem_text = f"{base} B" + (f" + {per_thread} B per thread" if per_thread else "")
    print(f"{spec.full_name} (cc {spec.compute_capability}), {args.regs} registers per thread, {smem_text} of shared "
          f"memory per block, block sizes up to {s.block_size_limit}:")
    if s.block_size == 0:
        print(f"  {s.reason}")
    else:
        r = s.result
        print(f"  suggested block size: {s.block_size} threads ({r.blocks_per_sm} blocks per SM, {r.warps_per_sm} of "
              f"{r.max_warps_per_sm} warps = {100 * r.occupancy:.2f}% occupancy, limited by {', '.join(r.limiters)})")
        print(f"  minimum grid that fills the GPU: {s.min_grid_size} blocks ({r.blocks_per_sm} per SM x {s.sms} SMs)")
    if given is not None:
        limited = f"limited by {', '.join(given.limiters)}" if given.blocks_per_sm else given.reason
        print(f"  the given {given.threads_per_block} threads: {given.blocks_per_sm} blocks per SM, "
              f"{100 * given.occupancy:.2f}% occupancy ({limited})")
    return 0


def _cmd_workload(args) -> int:
    if args.workload_command == "new":
        from .workload.template import write_template

        path = write_template(args.path, force=args.force)
        print(f"wrote {path}: try gpusim run {path} --arch a100 --sms 1 (the format: docs/workload-format.md)")
        return 0
    from .api import reject_trace_params
    from .report.workload_show import mix_record, print_show, trace_facts
    from .trace import is_command_list, is_trace, load_trace, read_command_list
    from .trace.mix import trace_mix
    from .workload import kernel_mix, load_workload, parse_overrides

    path = args.workload
    if is_command_list(path) or is_trace(path):
        reject_trace_params(path, parse_overrides(args.set))
        paths = [c.kernel for c in read_command_list(path) if c.kernel] if is_command_list(path) else [path]
        records = []
        for kernel_path in paths:
            kernel = load_trace(kernel_path)
            mix, streams = trace_mix(kernel)
            facts = trace_facts(kernel, streams)
            records.append(mix_record(kernel, mix, facts))
            if not args.json:
                print_show(kernel, mix, args.first, facts)
        if args.json:
            print(_json(records[0] if is_trace(path) else records))
        return 0
    kernel = load_workload(path, parse_overrides(args.set))
    for warning in kernel.warnings:
        print(f"warning: {one_line(warning)}", file=sys.stderr)
    mix = kernel_mix(kernel)
    if args.json:
        print(_json(mix_record(kernel, mix)))
    else:
        import numpy as np

        with np.errstate(all="ignore"):  # the first instructions' expressions: an inf is refused, not warned
            print_show(kernel, mix, args.first)
    return 0


def _cmd_run(args) -> int:
    from .api import engine_rate, run, size_text
    from .stats.observer import Tee
    from .engine.scheduler import DEFAULT_POLICY
    from .report.progress import Progress
    from .sampling.plan import AUTO_THRESHOLD
    from .workload import parse_overrides

    combos = _side_by_side(args.arch, args.scheduler or DEFAULT_POLICY)
    options = options_from_args(args, scheduler=combos[0][1])  # (checked before anything loads)

    def announce(mix) -> None:  # a run of more than a minute in full says so before it starts (a sampled one: its bar)
        if args.quiet:
            return
        in_full = options.sample == "off" or options.sample == "auto" and mix.total_warp_insts <= AUTO_THRESHOLD
        if mix.total_warp_insts > 60 * engine_rate() and in_full:
            print(f"note: {size_text(mix)} (Ctrl-C stops it)", file=sys.stderr)

    views = _views(args)
    if views and len(combos) > 1:
        raise GpusimError("--plot, --trace and --per-inst show one run: give one --arch and one --scheduler")
    observer = Tee(*(v.observer for v in views)) if any(v.observer is not None for v in views) else None
    results = []
    with Interrupt() as ctrl_c:
        for arch, scheduler in combos:
            result = run(args.workload, arch, options.replace(scheduler=scheduler), params=parse_overrides(args.set),
                         on_count=announce if not results else None, progress=None if args.quiet else Progress(),
                         interrupt=ctrl_c, observer=observer)
            results.append(result)
            if result.partial:
                break
    if len(combos) > 1:
        return _print_side_by_side(args, results)
    for note in result.notes:
        print(f"note: {one_line(note)}", file=sys.stderr)
    for warning in result.warnings:
        print(f"warning: {one_line(warning)}", file=sys.stderr)
    if result.unknown_opcodes:  # listed once, at the end of the run
        print(one_line(f"note: {len(result.unknown_opcodes)} opcode(s) not in the opcode table ran as int32-pipe "
                       f"instructions: " + ", ".join(f"{op} ({n:,} warp-inst)"
                                                     for op, n in result.unknown_opcodes.items())), file=sys.stderr)
    _report_violations([result])
    for view in views:  # what the views add to the result (the per-instruction rows) before the record is made
        result = view.attach(result)
    record = _json(result.to_dict())
    # interrupted: the shell's code for SIGINT, with the metrics so far; a physical limit broken: 3
    code = 130 if result.partial else VIOLATION_EXIT if result.violations else 0
    mark = _interrupted_mark(result.interrupted) if result.partial else None
    if args.json == "-":
        if mark:
            print(mark, file=sys.stderr)
        print(record)
        for view in views:  # (files they write are named on stderr: stdout holds the record alone)
            view.report(result, sys.stderr)
        return code
    from .report.run_report import print_run

    if args.json:  # written first: a second Ctrl-C while the tables print still leaves the record
        try:
            with open(args.json, "w") as fh:
                fh.write(record + "\n")
        except OSError as exc:
            raise GpusimError(f"--json {args.json}: cannot write ({exc.strerror})") from None
    if mark and not result.metrics:  # a sampled run stopped before its reduced runs finished
        print(f"{mark}: {result.sampling['detail']}" if result.sampling else mark)
    elif mark:
        print(f"{mark}: the metrics so far")
    if result.metrics:
        print_run(result)
    for view in views:
        view.report(result, sys.stdout)
    if args.json:
        print(f"wrote {args.json}")
    return code


def _views(args) -> list:
    """The pictures and views a run was asked for (--plot, --trace, --per-inst), each an object with `observer`
    (a gpusim.engine.observer.Observer recording the run, or None), `attach(result) -> result` (adds what belongs
    in the record) and `report(result, stream)` (writes its files and prints what it wrote, or its table)."""
    views: list = []
    if getattr(args, "per_inst", False):
        from .report.per_instruction import PerInstructionView

        views.append(PerInstructionView(table=args.json != "-"))
    from .report.chrome_trace import trace_views

    views += trace_views(args)  # --trace
    if getattr(args, "plot", None) is not None or getattr(args, "plot_sm", None) is not None:
        from .report.run_plots import views as plot_views  # (matplotlib: imported only when a plot is asked for)

        views += plot_views(args)  # --plot, --plot-sm
    return views


def _side_by_side(arch: str, scheduler: str) -> list[tuple[str, str]]:
    """The runs `--arch a,b --scheduler x,y|all` asks for: every arch with every scheduler, in that order (an
    existing file whose name holds a comma is one arch)."""
    from pathlib import Path

    from .engine.scheduler import policy_names

    archs = [arch] if "," not in arch or Path(arch).exists() else [a.strip() for a in arch.split(",")]
    schedulers = policy_names() if scheduler == "all" else [s.strip() for s in scheduler.split(",")]
    for what, names in (("--arch", archs), ("--scheduler", schedulers)):
        if any(not n for n in names) or len(set(names)) != len(names):
            raise GpusimError(f"{what} {shown(arch if what == '--arch' else scheduler, 60)}: expected distinct "
                              f"comma-separated names")
    return [(a, s) for a in archs for s in schedulers]


def _print_side_by_side(args, results) -> int:
    """Several runs of one workload: warnings, one table with a column per run and its ratio to the first, and
    the JSON record {"runs": [a record per run]}."""
    from .report.run_report import print_side_by_side

    for result in results:
        for warning in result.warnings:
            print(f"warning: {result.arch}/{result.scheduler}: {one_line(warning)}", file=sys.stderr)
    _report_violations(results, each=True)
    record = _json({"runs": [r.to_dict() for r in results]})
    partial = any(r.partial for r in results)
    code = 130 if partial else VIOLATION_EXIT if any(r.violations for r in results) else 0
    if partial:
        print(_interrupted_mark(results[-1].interrupted) + f" (run {len(results)}); the runs so far",
              file=sys.stderr if args.json == "-" else sys.stdout)
    if args.json == "-":
        print(record)
        return code
    if args.json:
        try:
            with open(args.json, "w") as fh:
                fh.write(record + "\n")
        except OSError as exc:
            raise GpusimError(f"--json {args.json}: cannot write ({exc.strerror})") from None
    print_side_by_side([r for r in results if r.metrics])
    if args.json:
        print(f"wrote {args.json}")
    return code


VIOLATION_EXIT = 3  # the exit status of a run whose reported metrics break a physical limit


def _report_violations(results, each: bool = False) -> None:
    """One line on stderr per physical limit a run's metrics break (gpusim.stats.invariants): in a full run an
    engine bug, in a sampled one a projection that is not an answer."""
    for result in results:
        sampled = bool(result.sampling) and result.sampling.get("method") not in (None, "full")
        what = "the sampled projection" if sampled else "the simulation (an engine bug: please report it)"
        where = f"{result.arch}/{result.scheduler}: " if each else ""
        for line in result.violations:
            print(f"error: {where}physical limit broken by {what}: {one_line(line)}", file=sys.stderr)


def _interrupted_mark(interrupted: dict) -> str:
    """'interrupted at cycle N, k of M blocks retired' (', in kernel i of n' for a command list)."""
    where = f", in kernel {interrupted['kernel']} of {interrupted['kernels']}" if "kernel" in interrupted else ""
    return (f"interrupted at cycle {interrupted['cycle']:,}, {interrupted['blocks_retired']:,} of "
            f"{interrupted['blocks']:,} blocks retired{where}")


def _cmd_sweep(args) -> int:
    from .sweep import DEFAULT_METRICS, SweepInterrupted, columns_of, parse_vary, print_rows, sweep
    from .workload import parse_overrides

    vary: dict = {}
    for text in args.vary:
        name, values = parse_vary(text)
        if name in vary:
            raise GpusimError(f"--vary {name}: given twice")
        vary[name] = values
    plots: list = []
    try:
        rows = sweep(args.workload, args.arch, vary, options_from_args(args), jobs=args.jobs, metrics=args.metrics,
                     executor=args.executor, dask_scheduler=args.dask_scheduler, out=args.out, resume=args.resume,
                     plot=args.plot, progress=not args.quiet, params=parse_overrides(args.set), on_plot=plots.extend)
    except SweepInterrupted as stop:
        print(f"interrupted: {len(stop.rows)} of {stop.total} points done, their rows in {args.out} "
              f"(--resume runs the rest)", file=sys.stderr)
        return 130
    failed = sum(bool(r.get("error")) for r in rows)
    metrics = [m.strip() for m in args.metrics.split(",")] if args.metrics else list(DEFAULT_METRICS)
    ran = [r for r in rows if not r.get("error")]
    for name in metrics:
        if ran and all(r.get(name) is None for r in ran):
            print(f"warning: --metrics {shown(name, 80)}: no run's record has it (gpusim run --json - lists the "
                  f"metrics)", file=sys.stderr)
    if not args.quiet:
        print_rows(rows, columns_of(list(vary), metrics))
    for path in plots:
        print(path)
    print(f"wrote {args.out}: {len(rows)} row{'' if len(rows) == 1 else 's'}"
          + (f", {failed} with an error" if failed else ""))
    return 0


def _cmd_bench(args) -> int:
    from .bench import bench

    rows = bench(args.arch, args.repeat, args.memory)
    if args.json:
        print(_json(rows))
        return 0
    from rich.console import Console
    from rich.table import Table

    from . import native

    table = Table(title=f"gpusim simulation speed (one process, {args.memory} memory, {native.mode} engine)")
    for col in ("workload", "SMs", "warp-inst", "cycles", "wall s", "warp-inst/s", "thread-inst/s", "cycles/s",
                "slowdown"):
        table.add_column(col, justify="left" if col == "workload" else "right")
    for r in rows:
        table.add_row(r["workload"], str(r["sms"]), f"{r['warp_instructions']:,}", f"{r['cycles']:,}",
                      f"{r['wall_seconds']:.2f}", f"{r['warp_instructions_per_second']:,}",
                      f"{r['thread_instructions_per_second']:,}", f"{r['cycles_per_second']:,}",
                      f"{r['silicon_slowdown']:,}x")
    Console(width=140).print(table)
    return 0


def _cmd_calibrate(args) -> int:
    from .calibrate import calibrate, dry_run

    if args.dry_run:
        for line in dry_run(args.base, args.from_results):
            print(line)
        return 0
    if not args.output:
        raise GpusimError("calibrate: -o FILE.yaml is required (the arch file to write), unless --dry-run")
    report = calibrate(args.output, args.base, args.from_results, check=not args.no_check, jobs=args.jobs,
                       log=lambda text: print(text, file=sys.stderr))
    from .arch.provenance import assumed_fields

    if report.results_path:
        print(f"wrote {report.results_path} (the microbenchmark results)")
    assumed = assumed_fields(report.path)
    print(f"wrote {report.path}: base {report.base}, {len(assumed)} values assumed (R)")
    if report.rows:
        print(f"{'quantity':48} {'measured':>10} {'simulated':>10} {'sim/measured':>13}")
        for row in report.rows:
            ratio = f"{row.ratio:.3f}" if row.measured else ("-" if row.simulated == 0 else "inf")
            print(f"{row.quantity:48} {row.measured:10.2f} {row.simulated:10.2f} {ratio:>13}"
                  + ("" if row.modelled else "  (not in the mean)"))
        if report.refined:
            print(f"moved for the engine: {', '.join(report.refined)}")
        print(f"calibrate: the engine on {report.path} reproduces the measurements with a mean absolute error of "
              f"{report.mean_error:.1f}% ({sum(r.modelled for r in report.rows)} rows of validation/compare.py)")
    elif report.note:
        print(report.note)
    return 0


def _cmd_validate(args) -> int:
    from datetime import date
    from pathlib import Path

    from .calibrate import validate as v

    only = [k.strip() for k in args.kernels.split(",") if k.strip()] if args.kernels else None
    if args.from_results:
        data = v.load(args.from_results)
    else:
        out = Path(args.out or f"validate-{date.today().isoformat()}.json")
        data = v.load(v.measure(out, only, log=lambda text: print(text, file=sys.stderr)))
        print(f"wrote {out} (the measured times)")
    if only:
        data = {**data, "kernels": [k for k in data["kernels"] if k.get("workload") in only
                                    or Path(str(k.get("yaml", ""))).stem in only]}
        if not data["kernels"]:
            raise GpusimError(f"--kernels {args.kernels}: none of them is in the results")
    arch = args.arch or v.default_arch(data)
    from .arch import load_arch

    load_arch(arch)  # a bad --arch is one line before anything runs
    for line in v.table(v.compare(data, arch, args.jobs), arch):
        print(line)
    return 0


_COMMANDS = {"bench": _cmd_bench, "archs": _cmd_archs, "occupancy": _cmd_occupancy, "workload": _cmd_workload, "run": _cmd_run,
             "sweep": _cmd_sweep, "calibrate": _cmd_calibrate, "validate": _cmd_validate}


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return _COMMANDS[args.command](args)
    except GpusimError as exc:
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:  # Ctrl-C: one line, the shell's code for SIGINT (with the metrics so far)
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
