"""The command line's other commands: archs, occupancy (and --suggest), workload show/new, sweep, bench, calibrate
and validate. Each is a thin layer over the library."""

from __future__ import annotations

import sys

from ..errors import GpusimError, one_line, shown
from ..options import options_from_args
from .record import record_json


def cmd_archs(args) -> int:
    from ..report.archs import arch_rows, field_rows, print_arch_table, print_field_table

    if args.fields and args.mig:
        raise GpusimError("gpusim archs: --fields and --mig are two different lists; give one")
    if args.assumed:
        if args.fields or args.mig:
            raise GpusimError(f"gpusim archs: --assumed and {'--fields' if args.fields else '--mig'} are two "
                              f"different lists; give one")
        from ..arch.provenance import assumed_by_arch

        assumed = assumed_by_arch()
        if args.json:
            print(record_json(assumed))
        else:
            print_assumed(assumed)
        return 0
    if args.mig:
        from ..arch.mig import archs_without_mig, mig_rows
        from ..report.archs import print_mig_table

        rows = mig_rows()
        if args.json:
            print(record_json(rows))
        else:
            print_mig_table(rows, archs_without_mig())
        return 0
    rows = field_rows() if args.fields else arch_rows()
    if args.json:
        print(record_json(rows))
    else:
        (print_field_table if args.fields else print_arch_table)(rows)
    return 0


def print_assumed(assumed: dict[str, list[str]]) -> None:
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


def cmd_occupancy(args) -> int:
    from ..analytic.occupancy import occupancy
    from ..arch import load_arch

    spec = load_arch(args.arch)
    if args.non_portable and args.cluster is None:
        raise GpusimError("gpusim occupancy: --non-portable applies with --cluster only")
    if args.suggest:
        if args.cluster is not None:
            raise GpusimError("gpusim occupancy: --cluster applies without --suggest (the suggestion is per SM)")
        return cmd_suggest(args, spec)
    for flag, value in (("--block-size-limit", args.block_size_limit), ("--smem-per-thread", args.smem_per_thread)):
        if value:
            raise GpusimError(f"gpusim occupancy: {flag} applies with --suggest only")
    if args.threads is None:
        raise GpusimError("gpusim occupancy: --threads is required (or --suggest, which suggests a block size)")
    try:
        result = occupancy(spec, args.threads, args.regs, args.smem, args.carveout, args.barriers)
    except ValueError as exc:
        raise GpusimError(f"gpusim occupancy: {exc}") from None
    clusters = None if args.cluster is None else cluster_occupancy(args, spec)
    if args.json:
        print(record_json((result if clusters is None else clusters).to_dict()))
    else:
        from ..report.occupancy_table import print_occupancy

        print_occupancy(spec, result)
        if clusters is not None:
            from ..report.cluster_table import print_clusters

            print_clusters(clusters)
    if args.plot:
        from ..report.occupancy_plot import plot_occupancy

        for path in plot_occupancy(spec, result, args.plot_dir):
            print(path)
    return 0


def cluster_occupancy(args, spec):
    """`gpusim occupancy --cluster`: cudaOccupancyMaxActiveClusters' answer for the launch."""
    from ..analytic.clusters import check_cluster, cluster_occupancy, parse_cluster

    try:
        dims = check_cluster(spec, parse_cluster(args.cluster), args.non_portable)
    except ValueError as exc:  # "cluster X: why" names the flag once prefixed
        raise GpusimError(f"gpusim occupancy: --{exc}") from None
    return cluster_occupancy(spec, args.threads, args.regs, dims, args.smem, args.carveout, args.barriers,
                             args.non_portable)


def cmd_suggest(args, spec) -> int:
    """`gpusim occupancy --suggest`: cudaOccupancyMaxPotentialBlockSize's answer, and the given block's occupancy."""
    from ..analytic.occupancy import occupancy, suggest_block_size

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
        print(record_json(record))
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


def cmd_workload(args) -> int:
    if args.workload_command == "new":
        from ..workload.template import write_template

        path = write_template(args.path, force=args.force)
        print(f"wrote {path}: try gpusim run {path} --arch a100 --sms 1 (the format: docs/workload-format.md)")
        return 0
    from ..api import reject_trace_params
    from ..report.workload_show import mix_record, print_show, trace_facts
    from ..trace import is_command_list, is_trace, load_trace, read_command_list
    from ..trace.mix import trace_mix
    from ..workload import kernel_mix, load_workload, parse_overrides

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
            print(record_json(records[0] if is_trace(path) else records))
        return 0
    kernel = load_workload(path, parse_overrides(args.set))
    for warning in kernel.warnings:
        print(f"warning: {one_line(warning)}", file=sys.stderr)
    mix = kernel_mix(kernel)
    if args.json:
        print(record_json(mix_record(kernel, mix)))
    else:
        import numpy as np

        with np.errstate(all="ignore"):  # the first instructions' expressions: an inf is refused, not warned
            print_show(kernel, mix, args.first)
    return 0


def cmd_sweep(args) -> int:
    from ..sweep import DEFAULT_METRICS, SweepInterrupted, columns_of, parse_vary, print_rows, sweep
    from ..workload import parse_overrides

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


def cmd_bench(args) -> int:
    from ..bench import bench

    rows = bench(args.arch, args.repeat, args.memory)
    if args.json:
        print(record_json(rows))
        return 0
    from rich.console import Console
    from rich.table import Table

    from .. import native

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


def cmd_calibrate(args) -> int:
    from ..calibrate import calibrate, dry_run

    if args.dry_run:
        for line in dry_run(args.base, args.from_results):
            print(line)
        return 0
    if not args.output:
        raise GpusimError("calibrate: -o FILE.yaml is required (the arch file to write), unless --dry-run")
    report = calibrate(args.output, args.base, args.from_results, check=not args.no_check, jobs=args.jobs,
                       log=lambda text: print(text, file=sys.stderr))
    from ..arch.provenance import assumed_fields

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


def cmd_validate(args) -> int:
    from datetime import date
    from pathlib import Path

    from ..calibrate import validate as v

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
    from ..arch import load_arch

    load_arch(arch)  # a bad --arch is one line before anything runs
    for line in v.table(v.compare(data, arch, args.jobs), arch):
        print(line)
    return 0
