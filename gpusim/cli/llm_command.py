"""`gpusim llm --model M --arch A`: transformer inference estimated from one layer's kernels simulated cycle by cycle
(gpusim.llm.estimate). Prints a table of the kernels and a paragraph: time to first token, time per output token
against the DRAM floor, tokens per second, weights, KV cache and whether they fit; `--json` writes the record,
`--plot` the roofline of the layer's kernels and the time of each phase stacked by kernel."""

from __future__ import annotations

import sys

from ..errors import one_line
from .record import record_json, write_record

KV_DTYPES = ("fp16", "bf16", "fp8")


def add_llm_parser(sub) -> None:
    """The `llm` command on the command line's subparsers."""
    from .parser import int_arg, json_path

    llm = sub.add_parser("llm", help="estimate transformer inference (time to first token, time per output token, "
                                     "memory) from one layer's kernels simulated cycle by cycle")
    llm.add_argument("--model", required=True,
                     help="a model name (llama-3-8b, llama-3-70b, mixtral-8x7b: workloads/models/), the path of a "
                          "model YAML or of a Hugging Face config.json")
    llm.add_argument("--arch", required=True, help="architecture name (see `gpusim archs`) or path to a YAML file")
    llm.add_argument("--batch", type=int_arg(1), default=1, help="sequences served together (default 1)")
    llm.add_argument("--prompt", type=int_arg(1), default=512, help="prompt tokens per sequence (default 512)")
    llm.add_argument("--generate", type=int_arg(1), default=128,
                     help="tokens generated per sequence (default 128)")
    llm.add_argument("--tp", type=int_arg(1, 1024), default=1,
                     help="tensor parallelism: GPUs the model is split over (default 1); each layer then adds two "
                          "all-reduces")
    llm.add_argument("--kv-dtype", choices=KV_DTYPES, default=None,
                     help="the KV cache's element type (default: the model's dtype)")
    llm.add_argument("--json", metavar="PATH", default=None, type=json_path,
                     help="write the estimate's record as JSON to PATH ('-': standard output, nothing else on it)")
    llm.add_argument("--plot", metavar="DIR", default=None,
                     help="write the layer's kernels on a roofline and the two phases' time by kernel under DIR")
    llm.add_argument("--no-cache", action="store_true",
                     help="neither read nor keep kernel results in the kernel cache ($GPUSIM_CACHE, default "
                          "~/.cache/gpusim/kernels); identical kernels are still simulated once")
    llm.add_argument("--quiet", action="store_true", help="no line on stderr as each kernel starts simulating")


def cmd_llm(args) -> int:
    from ..llm import estimate
    from ..report import plot_directory

    if args.plot is not None:
        plot_directory(args.plot)  # a directory that cannot be made is refused before minutes of simulation

    def announce(kernel) -> None:
        print(f"simulating {kernel.phase} {kernel.role}: {kernel.workload.rsplit('/', 1)[-1]} {kernel.shape}",
              file=sys.stderr, flush=True)

    result = estimate(args.model, args.arch, batch=args.batch, prompt=args.prompt, generate=args.generate,
                      tp=args.tp, kv_dtype=args.kv_dtype, cache=None if args.no_cache else "default",
                      on_simulate=None if args.quiet else announce)
    record = result.to_dict()
    text = record_json(record)
    for line in record["warnings"]:
        print(f"warning: {one_line(line)}", file=sys.stderr)
    if args.json == "-":
        print(text)
    elif args.json:
        write_record(args.json, text)
    if args.json != "-":
        print_llm(record)
    written = []
    if args.plot is not None:
        from ..llm.plots import write_plots

        written = write_plots(record, args.plot)
    out = sys.stderr if args.json == "-" else sys.stdout
    for path in written:
        print(path, file=out)
    if args.json and args.json != "-":
        print(f"wrote {args.json}")
    return 0


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.3f}"


def _bytes(nbytes: float) -> str:
    """16.06 GB, 75.50 MB, 272.00 kB (powers of 10, as capacities are quoted)."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= size:
            return f"{nbytes / size:,.2f} {unit}"
    return f"{nbytes:,.0f} B"


def _count(n: float) -> str:
    return f"{n / 1e9:,.2f} B" if n >= 1e9 else f"{n / 1e6:,.1f} M"


def print_llm(record: dict) -> None:
    """The kernels' table (a section per phase) and the summary paragraph."""
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    if console.width < 120:
        console = Console(highlight=False, width=120)
    layers = record["model"]["layers"]
    table = Table(title=f"{record['model']['name']} on {_gpus(record)}: the kernels of one layer (runs: x {layers} "
                        f"layers) and of the LM head", title_justify="left")
    for column, justify in (("kernel", "left"), ("shape", "left"), ("workload", "left"), ("us each", "right"),
                            ("runs", "right"), ("ms a step", "right"), ("share", "right"), ("bound", "left")):
        table.add_column(column, justify=justify)
    totals = {"prefill": record["time_to_first_token_s"], "decode": record["time_per_output_token_s"]}
    titles = {"prefill": "to the first token", "decode": "per output token"}
    for phase, allreduce in (("prefill", record["prefill_allreduce_s"]), ("decode", record["allreduce_s"])):
        table.add_row(f"[bold]{phase}[/bold]", titles[phase], "", "", "", f"[bold]{_ms(totals[phase])}[/bold]",
                      "100%", "")
        for k in record["kernels"]:
            if k["phase"] != phase:
                continue
            runs = k["count"] * (layers if k["per"] == "layer" else 1)
            step = k["seconds"] * runs
            table.add_row(f"  {k['name']}", k["shape"], k["workload"].rsplit("/", 1)[-1].removesuffix(".yaml"),
                          f"{k['seconds'] * 1e6:,.2f}", f"{runs:,}", _ms(step),
                          f"{100 * step / totals[phase]:.1f}%", f"{k['bound']} {k['bound_pct']:.0f}%")
        if allreduce:
            table.add_row("  all-reduce", f"2 a layer over {record['tp']} GPUs", "-", "-", f"{2 * layers:,}",
                          _ms(allreduce), f"{100 * allreduce / totals[phase]:.1f}%", "interconnect")
        table.rows[-1].end_section = True
    console.print(table)
    console.print(summary(record))
    notes = sorted({note for k in record["kernels"] for note in k["notes"]})
    for note in notes:
        console.print(f"note: {note}")


def _gpus(record: dict) -> str:
    return f"{record['tp']} x {record['arch']} (tensor parallel)" if record["tp"] > 1 else f"one {record['arch']}"


def summary(record: dict) -> str:
    """One paragraph: the two latencies, the decode floor, the throughput, the memory."""
    model, memory = record["model"], record["memory_per_gpu"]
    tpot, floor = record["time_per_output_token_s"], record["decode_floor_s"]
    batch = record["batch"]
    decode_bound = max((k for k in record["kernels"] if k["phase"] == "decode"),
                       key=lambda k: k["seconds_total"] * (model["layers"] if k["per"] == "layer" else 1))
    text = (f"{model['name']} ({_count(record['parameters'])} parameters, "
            f"{_bytes(record['weight_bytes'])} of {model['dtype'].upper()} weights) on {_gpus(record)}: the prefill of "
            f"{batch} x {record['prompt']} tokens takes {_ms(record['time_to_first_token_s'])} ms to the first token "
            f"({record['prefill_weight_flops'] / 1e12:,.0f} TFLOP/s of weight math over "
            f"{record['tp']} GPU{'s' if record['tp'] > 1 else ''}); each decode step of {batch} token"
            f"{'s' if batch > 1 else ''} at a mean context of {record['context']:,} takes {_ms(tpot)} ms, "
            f"{tpot / floor:.2f}x the {_ms(floor)} ms its weights and KV cache take to read at the peak DRAM "
            f"bandwidth ({decode_bound['name']} the longest kernel, {decode_bound['bound']}-bound): "
            f"{record['tokens_per_s']:,.1f} tokens/s.")
    if record["tp"] > 1:
        text += (f" The all-reduces take {_ms(record['allreduce_s'])} ms of each decode step and "
                 f"{_ms(record['prefill_allreduce_s'])} ms of the prefill.")
    fits = "fit" if memory["fits"] else "do not fit"
    text += (f" The KV cache ({record['kv_dtype'].upper()}) reaches {_bytes(record['kv_cache_bytes'])} at "
             f"{record['prompt'] + record['generate']:,} tokens a sequence; per GPU the weights "
             f"({_bytes(memory['weight_bytes'])}), the cache ({_bytes(memory['kv_cache_bytes'])}) and the activation "
             f"reserve ({_bytes(memory['reserve_bytes'])}) {fits} in {_bytes(memory['capacity_bytes'])}")
    text += (f" (the largest batch that fits: {memory['max_batch']:,})." if memory["max_batch"]
             else " (not even one sequence fits: more --tp).")
    return text


__all__ = ["add_llm_parser", "cmd_llm", "print_llm", "summary"]
