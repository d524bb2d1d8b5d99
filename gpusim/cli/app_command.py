"""`gpusim app run APP --arch A`: an application (kernels, copies, events and all-reduces on streams; the format:
docs/reference/app-format.md) run on simpy, each kernel simulated cycle by cycle (or found in the kernel cache).
Prints a table of the kernels and one of the copies and all-reduces, the total time and the critical path;
`--json` writes the record, `--trace` a Perfetto timeline."""

from __future__ import annotations

import sys

from ..errors import GpusimError, one_line, shown
from .record import record_json, write_record


def add_app_parser(sub) -> None:
    """The `app` command and its `run` subcommand on the command line's subparsers."""
    from .parser import Parser, int_arg, json_path

    app = sub.add_parser("app", help="run an application: kernels, copies, events and all-reduces on CUDA-like "
                                     "streams over one or more GPUs")
    asub = app.add_subparsers(dest="app_command", required=True, parser_class=Parser)
    run = asub.add_parser("run", help="run an application file (YAML, docs/reference/app-format.md) or an Accel-Sim "
                                      "kernelslist.g: a table per kernel and copy, the total time, the critical path")
    run.add_argument("app", help="an application YAML file or a trace directory's kernelslist.g")
    run.add_argument("--arch", required=True, help="architecture name (see `gpusim archs`) or path to a YAML file; "
                                                   "every GPU of the application is one of these")
    run.add_argument("--gpus", type=int_arg(1, 1024), default=None,
                     help="GPUs (default: as many as the application says, 1 if it does not)")
    run.add_argument("--sms", type=int_arg(1), default=None,
                     help="SMs each GPU has for the kernels to share (default: all the part has)")
    run.add_argument("--json", metavar="PATH", default=None, type=json_path,
                     help="write the application's record as JSON to PATH ('-': standard output, nothing else on it)")
    run.add_argument("--trace", metavar="FILE", default=None,
                     help="write the timeline as Chrome Trace Event JSON (ui.perfetto.dev): a track per stream and "
                          "per copy engine of each GPU")
    run.add_argument("--no-cache", action="store_true",
                     help="neither read nor keep kernel results in the kernel cache ($GPUSIM_CACHE, default "
                          "~/.cache/gpusim/kernels); identical kernels of the run are still simulated once")
    run.add_argument("--quiet", action="store_true", help="no line on stderr as each kernel starts simulating")


def cmd_app(args) -> int:
    from ..app import DEFAULT_CACHE, run_app
    from ..options import RunOptions

    if args.trace is not None and (args.trace == "-" or not args.trace.strip()):
        raise GpusimError(f"--trace {shown(args.trace, 40)}: expected a file path (the trace is a file)")

    def announce(name: str, sms: int) -> None:
        print(f"simulating {name} on {sms} SM{'s' if sms > 1 else ''}", file=sys.stderr, flush=True)

    result = run_app(args.app, args.arch, gpus=args.gpus, options=RunOptions(sms=args.sms),
                     cache=None if args.no_cache else DEFAULT_CACHE, on_simulate=None if args.quiet else announce)
    record = result.to_dict()
    text = record_json(record)
    for line in record["notes"]:
        print(f"note: {one_line(line)}", file=sys.stderr)
    for line in record["warnings"]:
        print(f"warning: {one_line(line)}", file=sys.stderr)
    if args.trace is not None:
        from ..report.app_timeline import write_app_trace

        events = write_app_trace(record, args.trace)
        print(f"wrote {args.trace}: {events:,} events (open it at ui.perfetto.dev)",
              file=sys.stderr if args.json == "-" else sys.stdout)
    if args.json == "-":
        print(text)
        return 0
    if args.json:
        write_record(args.json, text)
    print_app(record)
    if args.json:
        print(f"wrote {args.json}")
    if not args.quiet:
        print(f"kernels simulated: {result.simulated}, from the kernel cache: {result.cache_hits}", file=sys.stderr)
    return 0


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.2f}"


def print_app(record: dict) -> None:
    """The kernels' table, the copies' and all-reduces' table, the total time and the critical path."""
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    if console.width < 120:  # (a pipe or a narrow terminal: the tables' byte counts and times stay whole)
        console = Console(highlight=False, width=120)
    several = record["gpus"] > 1
    gpus = f"{record['gpus']} x {record['arch']}" if several else record["arch"]
    title = f"{record['name']} on {gpus} ({record['sms_per_gpu']} SMs{' each' if several else ''})"
    kernels = Table(title=f"{title}: kernels", title_justify="left")
    columns = ["id", "kernel", "stream"] + (["gpu"] if several else []) + ["SMs", "start us", "end us", "bound"]
    for column in columns:
        kernels.add_column(column, justify="right" if column in ("SMs", "start us", "end us", "gpu") else "left")
    for k in record["kernels"]:
        sms = f"{k['sms']}" if k["sms"] == k["sms_wanted"] else f"{k['sms']} of {k['sms_wanted']}"
        row = [k["id"], k["name"], k["stream"]] + ([str(k["gpu"])] if several else [])
        kernels.add_row(*row, sms, _us(k["start_s"]), _us(k["end_s"]), f"{k['bound']} {k['bound_pct']:.0f}%")
    if record["kernels"]:
        console.print(kernels)
    moves = record["copies"] + record["allreduces"]
    if moves:
        table = Table(title=f"{title}: copies and all-reduces", title_justify="left")
        for column in ["id", "what", "bytes", "stream"] + (["gpu"] if several else []) + ["engine", "start us",
                                                                                          "end us"]:
            table.add_column(column, justify="left" if column in ("id", "what", "stream") else "right")
        for m in sorted(moves, key=lambda m: (m["start_s"], m["id"])):
            gpu = [str(m.get("gpu", "")) if "engine" in m else "all"] if several else []
            table.add_row(m["id"], m["name"], f"{m['bytes']:,}", m["stream"], *gpu, str(m.get("engine", "-")),
                          _us(m["start_s"]), _us(m["end_s"]))
        console.print(table)
    busy = sum(k["end_s"] - k["start_s"] for k in record["kernels"])
    console.print(f"total {_us(record['time_s'])} us (the kernels' durations sum to {_us(busy)} us: total / sum "
                  f"{record['time_s'] / busy:.2f})" if busy else f"total {_us(record['time_s'])} us")
    console.print("critical path: " + " -> ".join(f"{p['id']} {p['name']} ({_us(p['start_s'])}-{_us(p['end_s'])})"
                                                  for p in record["critical_path"]))


__all__ = ["add_app_parser", "cmd_app", "print_app"]
