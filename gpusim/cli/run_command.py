"""`gpusim run`: one simulation, or several side by side (`--arch a,b`, `--scheduler x,y|all`); its tables, record,
views (--plot, --trace, --per-inst), the physical limits it breaks (exit 3) and Ctrl-C (exit 130, the metrics so
far)."""

from __future__ import annotations

import sys

from ..errors import GpusimError, one_line, shown
from ..interrupt import Interrupt
from ..options import options_from_args
from .record import record_json


def cmd_run(args) -> int:
    from ..api import engine_rate, run, size_text
    from ..stats.observer import Tee
    from ..engine.scheduler import DEFAULT_POLICY
    from ..report.progress import Progress
    from ..sampling.plan import AUTO_THRESHOLD
    from ..workload import parse_overrides

    combos = side_by_side(args.arch, args.scheduler or DEFAULT_POLICY)
    options = options_from_args(args, scheduler=combos[0][1])  # (checked before anything loads)

    def announce(mix) -> None:  # a run of more than a minute in full says so before it starts (a sampled one: its bar)
        if args.quiet:
            return
        in_full = options.sample == "off" or options.sample == "auto" and mix.total_warp_insts <= AUTO_THRESHOLD
        if mix.total_warp_insts > 60 * engine_rate() and in_full:
            print(f"note: {size_text(mix)} (Ctrl-C stops it)", file=sys.stderr)

    views = run_views(args)
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
        return report_side_by_side(args, results)
    for note in result.notes:
        print(f"note: {one_line(note)}", file=sys.stderr)
    for warning in result.warnings:
        print(f"warning: {one_line(warning)}", file=sys.stderr)
    if result.unknown_opcodes:  # listed once, at the end of the run
        print(one_line(f"note: {len(result.unknown_opcodes)} opcode(s) not in the opcode table ran as int32-pipe "
                       f"instructions: " + ", ".join(f"{op} ({n:,} warp-inst)"
                                                     for op, n in result.unknown_opcodes.items())), file=sys.stderr)
    report_violations([result])
    for view in views:  # what the views add to the result (the per-instruction rows) before the record is made
        result = view.attach(result)
    record = record_json(result.to_dict())
    # interrupted: the shell's code for SIGINT, with the metrics so far; a physical limit broken: 3
    code = 130 if result.partial else VIOLATION_EXIT if result.violations else 0
    mark = interrupted_mark(result.interrupted) if result.partial else None
    if args.json == "-":
        if mark:
            print(mark, file=sys.stderr)
        print(record)
        for view in views:  # (files they write are named on stderr: stdout holds the record alone)
            view.report(result, sys.stderr)
        return code
    from ..report.run_report import print_run

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


def run_views(args) -> list:
    """The pictures and views a run was asked for (--plot, --trace, --per-inst), each an object with `observer`
    (a gpusim.stats.observer.Observer recording the run, or None), `attach(result) -> result` (adds what belongs
    in the record) and `report(result, stream)` (writes its files and prints what it wrote, or its table)."""
    views: list = []
    if getattr(args, "per_inst", False):
        from ..report.per_instruction import PerInstructionView

        views.append(PerInstructionView(table=args.json != "-"))
    from ..report.chrome_trace import trace_views

    views += trace_views(args)  # --trace
    if getattr(args, "plot", None) is not None or getattr(args, "plot_sm", None) is not None:
        from ..report.run_plots import views as plot_views  # (matplotlib: imported only when a plot is asked for)

        views += plot_views(args)  # --plot, --plot-sm
    return views


def side_by_side(arch: str, scheduler: str) -> list[tuple[str, str]]:
    """The runs `--arch a,b --scheduler x,y|all` asks for: every arch with every scheduler, in that order (an
    existing file whose name holds a comma is one arch)."""
    from pathlib import Path

    from ..engine.scheduler import policy_names

    archs = [arch] if "," not in arch or Path(arch).exists() else [a.strip() for a in arch.split(",")]
    schedulers = policy_names() if scheduler == "all" else [s.strip() for s in scheduler.split(",")]
    for what, names in (("--arch", archs), ("--scheduler", schedulers)):
        if any(not n for n in names) or len(set(names)) != len(names):
            raise GpusimError(f"{what} {shown(arch if what == '--arch' else scheduler, 60)}: expected distinct "
                              f"comma-separated names")
    return [(a, s) for a in archs for s in schedulers]


def report_side_by_side(args, results) -> int:
    """Several runs of one workload: warnings, one table with a column per run and its ratio to the first, and
    the JSON record {"runs": [a record per run]}."""
    from ..report.run_report import print_side_by_side

    for result in results:
        for warning in result.warnings:
            print(f"warning: {result.arch}/{result.scheduler}: {one_line(warning)}", file=sys.stderr)
    report_violations(results, each=True)
    record = record_json({"runs": [r.to_dict() for r in results]})
    partial = any(r.partial for r in results)
    code = 130 if partial else VIOLATION_EXIT if any(r.violations for r in results) else 0
    if partial:
        print(interrupted_mark(results[-1].interrupted) + f" (run {len(results)}); the runs so far",
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


def report_violations(results, each: bool = False) -> None:
    """One line on stderr per physical limit a run's metrics break (gpusim.stats.invariants): in a full run an
    engine bug, in a sampled one a projection that is not an answer."""
    for result in results:
        sampled = bool(result.sampling) and result.sampling.get("method") not in (None, "full")
        what = "the sampled projection" if sampled else "the simulation (an engine bug: please report it)"
        where = f"{result.arch}/{result.scheduler}: " if each else ""
        for line in result.violations:
            print(f"error: {where}physical limit broken by {what}: {one_line(line)}", file=sys.stderr)


def interrupted_mark(interrupted: dict) -> str:
    """'interrupted at cycle N, k of M blocks retired' (', in kernel i of n' for a command list)."""
    where = f", in kernel {interrupted['kernel']} of {interrupted['kernels']}" if "kernel" in interrupted else ""
    return (f"interrupted at cycle {interrupted['cycle']:,}, {interrupted['blocks_retired']:,} of "
            f"{interrupted['blocks']:,} blocks retired{where}")
