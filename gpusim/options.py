"""The run options: every knob of a simulation that is not the workload, the architecture or a hook, declared once.

`RunOptions` is a frozen value (attrs, like the arch spec). Each field carries its description, unit, range and how
the command line writes it (`option_info`); `gpusim.run(workload, arch, options, **overrides)` takes it, the CLI's
`run` and `sweep` flags are made from it (`add_option_flags`), `sweep --vary` names its variable fields
(`variables()`), the record's `options` block is `RunOptions.record()` and the documentation's reference table is
`reference_rows()`. Adding an option is one field here and its use where it acts.

Every value is checked when the options are made, with the one-line messages the command line gives
(`--sms 0: expected an integer >= 1`), so a bad option fails before anything loads or runs.
"""

from __future__ import annotations

import argparse
import numbers
import re
from typing import Any, Callable

import attrs
import numpy as np

from .engine.scheduler import DEFAULT_POLICY, policy_names
from .errors import GpusimError, shorten, shown
from .workload.overrides import LaunchOverrides, check_launch_overrides

SIMT_MODES = ("stack", "its")
MEMORY_MODELS = ("hierarchy", "fixed")
SAMPLE_MODES = ("auto", "on", "off")
SEED_MAX = 2**32 - 1
# A run refuses a kernel of more warp-instructions than this unless told otherwise (--max-instructions): at the
# engine's rate that is hours. The count is the instruction mix's (`gpusim workload show`), taken before simulating.
MAX_INSTRUCTIONS = 2_000_000_000
MAX_SYNC_WINDOW = 4096  # cycles, several DRAM round trips: a longer window only adds error (README)
MIN_SAMPLE_TRIPS = 4  # --sample-trips N: the runs at N / 4, N / 2 and N trips, at least 1 each
CLOCK_NAMES = ("boost", "sustained")  # --clock: the arch file's core clock, or its clock under tensor load
MIN_CLOCK_MHZ = 100.0  # a locked SM clock below this is no operating point of any part modelled

_SIZE = re.compile(r"^\s*(\d+)\s*([kKmM]?)(i?[bB])?\s*$")


# ----------------------------------------------------------------------------------------------- command-line text

def size_bytes(text: str) -> int | None:
    """'65536', '64K', '64KB', '64KiB', '1M' -> bytes (K = 1024); None where the text is no byte count."""
    m = _SIZE.match(text)
    if not m:
        return None
    return int(m.group(1)) * {"": 1, "k": 1024, "m": 1024 * 1024}[m.group(2).lower()]


def parse_size(text: str) -> int:
    """A byte count on the command line (see size_bytes); anything else is argparse's usage error."""
    size = size_bytes(text)
    if size is None:
        raise argparse.ArgumentTypeError(f"expected a byte count such as 49152, 48K or 1M, got '{text}'")
    return size


def parse_integer(text: str) -> int:
    """An integer whose range RunOptions checks (with the same messages as the library)."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {shorten(text, 40)}") from None


def parse_clock(text: str):
    """--clock: 'boost', 'sustained' or a number of MHz ('1755', '1755MHz'); RunOptions checks its range."""
    word = text.strip().lower()
    if word in CLOCK_NAMES:
        return word
    try:
        return float(word.removesuffix("mhz").strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {' or '.join(CLOCK_NAMES)} or a clock in MHz, got "
                                         f"{shorten(text, 40)}") from None


def parse_dims(text: str):
    """'256' -> 256, '16,16' -> (16, 16): launch dimensions X[,Y[,Z]] (RunOptions checks their ranges)."""
    parts = text.split(",")
    try:
        values = [int(p) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected X[,Y[,Z]] (integers), got {shorten(text, 40)}") from None
    if not 1 <= len(values) <= 3:
        raise argparse.ArgumentTypeError(f"expected X[,Y[,Z]] (1 to 3 integers), got {shorten(text, 40)}")
    return values[0] if len(values) == 1 else tuple(values)


# ----------------------------------------------------------------------------------------------- one option

@attrs.frozen
class OptionInfo:
    """What the documentation and the command line say about an option."""
    description: str  # one sentence or two: what it does (the flag's help and the reference's text)
    unit: str = ""  # "cycles", "bytes", "registers", "" for a word or a count
    range: str = ""  # the values it takes, as the reference shows them
    metavar: str | None = None  # the flag's placeholder (None: argparse's)
    parse: Callable[[str], Any] | None = None  # command-line text -> value (None: the text itself)
    choices: tuple[str, ...] | None = None  # for a flag whose values argparse lists
    group: str = "run"  # "run" or "launch" (a launch override: replaces the workload's launch)
    vary: str | None = None  # the name `sweep --vary` gives it (None: not variable)
    sweep_help: str | None = None  # the `sweep` flag's help where it differs ("... where not varied")


def plain_integer(value):
    """A numpy integer as the int it is (anything else as given, for the checks to judge)."""
    return int(value) if isinstance(value, np.integer) else value


def option(default, info: OptionInfo):
    return attrs.field(default=default, metadata={"info": info}, converter=plain_integer)


def option_info(field: attrs.Attribute) -> OptionInfo:
    return field.metadata["info"]


def _whole(value) -> bool:
    return type(value) is int or isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


# ----------------------------------------------------------------------------------------------- the options

@attrs.frozen(kw_only=True)
class RunOptions:
    """How a workload is simulated: scheduling, divergence, the SMs and memory modelled, the seed, the size limit,
    sampling, synchronisation and the launch overrides. Frozen; `attrs.evolve(options, sms=4)` or
    `options.replace(sms=4)` makes a changed copy (checked again)."""

    scheduler: str = option(DEFAULT_POLICY, OptionInfo(
        "warp scheduler policy: lrr (default: the H200's even progress of warps, see validation/), gto, two_level, "
        "oldest_first; x,y or all: each, side by side", range="lrr, gto, two_level, oldest_first", vary="scheduler",
        sweep_help="warp scheduler where not varied (default lrr; see gpusim run --help)"))
    simt: str = option("stack", OptionInfo(
        "divergence model: reconvergence stack (default) or Volta+ independent thread scheduling",
        range="stack, its", metavar="stack|its", vary="simt", sweep_help="divergence model where not varied"))
    sms: int | None = option(None, OptionInfo(
        "simulate only N SMs (same per-SM model)", unit="SMs", range=">= 1 (default: all the part has)",
        parse=parse_integer))
    memory: Any = option("hierarchy", OptionInfo(
        "memory model: L1/L2/DRAM hierarchy (default) or fixed L1-hit latency", range="hierarchy, fixed (the "
        "library also takes a model object with access() and metrics())", metavar="hierarchy|fixed",
        sweep_help="memory model"))
    seed: int = option(0, OptionInfo(
        "seed mixed into the workload's rand(), 0 to 2^32-1 (default 0)", range=f"0 to {SEED_MAX:,}",
        parse=parse_integer, sweep_help="seed mixed into the workload's rand() (default 0)"))
    max_instructions: int | None = option(MAX_INSTRUCTIONS, OptionInfo(
        "refuse a workload of more warp-instructions than N, counted before simulating (default 2,000,000,000: "
        "hours at the engine's rate)", unit="warp-instructions", range=">= 1, or None (library): no limit",
        metavar="N", parse=parse_integer,
        sweep_help="refuse a point of more warp-instructions than N (default 2,000,000,000)"))
    sample: str = option("auto", OptionInfo(
        "sampled simulation: simulate reduced runs (fewer loop trips, the tail wave and one full wave) and project "
        "the rest; auto (default) samples kernels of more than 5,000,000 warp-instructions, on samples any kernel "
        "that has a steady state, off simulates in full", range="auto, on, off", choices=SAMPLE_MODES,
        vary="sample", sweep_help="sampled simulation where not varied (see gpusim run --help)"))
    sample_trips: int | None = option(None, OptionInfo(
        "the sampled runs' hot loop at N/4, N/2 and N trips, each moved by one where its parity is not the loop's "
        "(default: chosen by the budget, at least 8); more trips settle better and cost more (the unsettled note "
        "says what to try); a loop of more than 8 N trips is projected further than the default plan ever does, "
        "and a warning says the stated error does not cover a cost still changing; samples the kernel whatever "
        "its size",
        unit="loop trips", range=f">= {MIN_SAMPLE_TRIPS}, at most half the loop's trips; not with --sample off",
        metavar="N", parse=parse_integer, vary="sample_trips",
        sweep_help="the sampled runs' loop trips where not varied (see gpusim run --help)"))
    sync_window: int = option(1, OptionInfo(
        "lax synchronisation: each SM runs up to CYCLES cycles ahead of the others before they catch up, which "
        "keeps its state in the host's caches: faster on many SMs, off where they meet in the L2 and DRAM "
        "(measured: 16 within 2% of the exact cycles for 1.0-1.2x, 32-64 1.2-1.8x for up to 9%; README: lax "
        "synchronisation); 1 (default): exact", unit="cycles", range=f"1 (exact) to {MAX_SYNC_WINDOW}",
        metavar="CYCLES", parse=parse_integer, vary="sync_window",
        sweep_help="lax SM synchronisation where not varied (default 1: exact; see gpusim run --help)"))
    clock: str | float = option("boost", OptionInfo(
        "SM clock simulated: boost (default: the arch file's core clock), sustained (the clock the part's SMs were "
        "measured to hold under sustained tensor-core load at its power limit: clocks.sustained_tensor_mhz) or a "
        "locked clock in MHz, as nvidia-smi --lock-gpu-clocks sets it; DRAM keeps its bandwidth in bytes a second",
        unit="MHz", range=f"boost, sustained, or {MIN_CLOCK_MHZ:g} MHz up to the part's boost clock", metavar="CLOCK",
        parse=parse_clock, vary="clock", sweep_help="SM clock where not varied (default boost; see gpusim run --help)"))
    threads: int | tuple | None = option(None, OptionInfo(
        "threads per block", unit="threads", range="X[,Y[,Z]], at most 1,024 in all", metavar="X[,Y[,Z]]",
        parse=parse_dims, group="launch", vary="launch.threads"))
    grid: int | tuple | None = option(None, OptionInfo(
        "blocks in the grid", unit="blocks", range="X[,Y[,Z]]", metavar="X[,Y[,Z]]", parse=parse_dims,
        group="launch", vary="launch.grid"))
    regs: int | None = option(None, OptionInfo(
        "registers per thread", unit="registers", range=">= 1 (the part's limit applies)", metavar="N",
        parse=parse_integer, group="launch", vary="launch.regs"))
    smem: int | None = option(None, OptionInfo(
        "static shared memory per block (bytes; 48K, 64KB, 1M accepted)", unit="bytes", range=">= 0",
        metavar="SIZE", parse=parse_size, group="launch", vary="launch.smem"))
    dynamic_smem: int | None = option(None, OptionInfo(
        "dynamic shared memory per block (bytes; 48K, 64KB, 1M accepted)", unit="bytes", range=">= 0",
        metavar="SIZE", parse=parse_size, group="launch", vary="launch.dynamic_smem"))
    carveout: int | None = option(None, OptionInfo(
        "percent of the unified L1/shared memory preferred for shared memory (default: the smallest step holding "
        "the resident blocks' shared memory); sets the resident blocks and the L1 size", unit="%",
        range="0 to 100", metavar="PCT", parse=parse_integer, group="launch", vary="launch.carveout"))

    def __attrs_post_init__(self) -> None:
        check_run_options(self)

    def replace(self, **changes) -> RunOptions:
        """A copy with `changes` (checked)."""
        return attrs.evolve(self, **changes)

    @property
    def launch(self) -> LaunchOverrides:
        """The launch overrides, checked (gpusim.workload.overrides)."""
        return check_launch_overrides(threads=self.threads, grid=self.grid, regs=self.regs, smem=self.smem,
                                      dynamic_smem=self.dynamic_smem, carveout=self.carveout)

    def record(self) -> dict:
        """The record's `options` block: every option by name (a memory model object by its class name)."""
        out = {}
        for field in attrs.fields(RunOptions):
            value = getattr(self, field.name)
            if field.name == "memory" and not isinstance(value, str):
                value = type(value).__name__
            out[field.name] = list(value) if isinstance(value, tuple) else value
        return out


def option_names() -> list[str]:
    return [field.name for field in attrs.fields(RunOptions)]


def variables() -> dict[str, str]:
    """The names `sweep --vary` takes for the options (scheduler, launch.threads, ...) -> the field each sets."""
    return {option_info(f).vary: f.name for f in attrs.fields(RunOptions) if option_info(f).vary}


def check_sample_trips(trips_wanted, mode: str) -> None:
    """--sample-trips N (`trips_wanted`; None: not given) under --sample `mode`: a whole number of at least
    MIN_SAMPLE_TRIPS, not with `off` (the upper bound is the kernel's loop's: see gpusim.sampling.plan)."""
    if trips_wanted is None:
        return
    whole = isinstance(trips_wanted, numbers.Integral) and not isinstance(trips_wanted, bool)
    if not whole or trips_wanted < MIN_SAMPLE_TRIPS:
        raise GpusimError(f"--sample-trips {str(trips_wanted)[:40]}: expected a whole number of loop trips, at least "
                          f"{MIN_SAMPLE_TRIPS}")
    if mode == "off":
        raise GpusimError(f"--sample-trips {trips_wanted}: sets the sampled runs' loop trips; --sample off simulates "
                          f"in full")


def check_sync_window(sync_window) -> None:
    """A synchronisation window is a whole number of cycles from 1 (exact) to MAX_SYNC_WINDOW."""
    if not _whole(sync_window) or not 1 <= sync_window <= MAX_SYNC_WINDOW:
        raise GpusimError(f"--sync-window {shown(sync_window, 40)}: expected a whole number of cycles from 1 (exact) "
                          f"to {MAX_SYNC_WINDOW}")


def check_clock(clock) -> None:
    """--clock: boost, sustained or a finite number of MHz from MIN_CLOCK_MHZ (the part's own ceiling is checked
    where the arch is known: gpusim.arch.clocked)."""
    if isinstance(clock, str) and clock in CLOCK_NAMES:
        return
    if isinstance(clock, (bool, np.bool_)) or not isinstance(clock, numbers.Real) or not np.isfinite(clock) \
            or clock < MIN_CLOCK_MHZ:
        raise GpusimError(f"--clock {shown(clock, 40)}: expected {' or '.join(CLOCK_NAMES)} or a clock of at least "
                          f"{MIN_CLOCK_MHZ:g} MHz")


def check_run_options(options: RunOptions) -> None:
    """Every option's value, with the command line's one-line messages (GpusimError)."""
    scheduler, simt, sms, seed, memory = options.scheduler, options.simt, options.sms, options.seed, options.memory
    if not isinstance(scheduler, str) or scheduler not in policy_names():
        raise GpusimError(f"unknown scheduler {shorten(scheduler, 40)}: expected one of "
                          f"{', '.join(policy_names())}")
    if not isinstance(simt, str) or simt not in SIMT_MODES:
        raise GpusimError(f"--simt {shown(simt, 40)}: expected one of {', '.join(SIMT_MODES)}")
    if sms is not None and not (_whole(sms) and sms >= 1):
        raise GpusimError(f"--sms {shown(sms, 40)}: expected an integer >= 1")
    if not (_whole(seed) and 0 <= seed <= SEED_MAX):
        raise GpusimError(f"--seed {shown(seed, 40)}: expected an integer from 0 to {SEED_MAX}")
    if isinstance(memory, str) or memory is None:
        if memory not in MEMORY_MODELS:
            raise GpusimError(f"--memory {shown(memory, 40)}: expected {' or '.join(MEMORY_MODELS)}")
    elif not (callable(getattr(memory, "access", None)) and callable(getattr(memory, "metrics", None))):
        raise GpusimError(f"--memory {shown(memory, 40)}: expected {' or '.join(MEMORY_MODELS)}, or a memory "
                          f"model (an object with access() and metrics())")
    limit = options.max_instructions
    if limit is not None and not (_whole(limit) and limit >= 1):
        raise GpusimError(f"--max-instructions {shown(limit, 40)}: expected an integer >= 1")
    options.launch  # noqa: B018 - checks the launch overrides
    check_sync_window(options.sync_window)
    check_clock(options.clock)
    check_sample_trips(options.sample_trips, options.sample)
    if options.sample not in SAMPLE_MODES:
        raise GpusimError(f"--sample {shown(options.sample, 40)}: expected {', '.join(SAMPLE_MODES)}")


def make_options(options: RunOptions | None, overrides: dict, caller: str = "run") -> RunOptions:
    """`options` (None: the defaults) with `overrides` ({option: value}) applied and checked; a name that is not
    an option is a TypeError, as Python gives for an unknown keyword."""
    if options is not None and not isinstance(options, RunOptions):
        raise GpusimError(f"options {shorten(options, 40)}: expected a gpusim.RunOptions")
    names = option_names()
    for name in overrides:
        if name not in names:
            raise TypeError(f"{caller}() got an unexpected keyword argument '{name}'")
    if options is None:
        return RunOptions(**overrides)
    return attrs.evolve(options, **overrides) if overrides else options


# ----------------------------------------------------------------------------------------------- the command line

def add_option_flags(parser, launch_group, *, sweep: bool = False) -> None:
    """The options' flags on `parser` (a `run` or `sweep` subcommand), the launch overrides in `launch_group`:
    --scheduler, --simt, --sms, ..., --threads, --regs, ... Each flag's default is None (not given), so a caller
    builds its RunOptions from the flags given (`options_from_args`). --sample's choices are argparse's."""
    for field in attrs.fields(RunOptions):
        info = option_info(field)
        target = launch_group if info.group == "launch" else parser
        kwargs: dict = {"default": None, "help": (info.sweep_help if sweep and info.sweep_help else info.description)
                        .replace("%", "%%")}
        if info.parse is not None:
            kwargs["type"] = info.parse
        if info.metavar is not None:
            kwargs["metavar"] = info.metavar
        if info.choices is not None:
            kwargs["choices"] = list(info.choices)
        target.add_argument("--" + field.name.replace("_", "-"), dest=field.name, **kwargs)


def options_from_args(args, **fixed) -> RunOptions:
    """RunOptions from parsed flags (those given; the others keep their defaults) and `fixed` values."""
    given = {name: getattr(args, name) for name in option_names() if getattr(args, name, None) is not None}
    return RunOptions(**{**given, **fixed})


def reference_rows() -> list[tuple[str, str, str, str, str, str]]:
    """The documentation's table: (option, flag, default, unit, range, description) for each option."""
    rows = []
    for field in attrs.fields(RunOptions):
        info = option_info(field)
        default = field.default
        shown_default = "all" if field.name == "sms" and default is None else (
            "as the workload says" if default is None else f"{default:,}" if _whole(default) and default > 9999
            else str(default))
        rows.append((field.name, "--" + field.name.replace("_", "-"), shown_default, info.unit, info.range,
                     info.description))
    return rows


__all__ = ["CLOCK_NAMES", "MAX_INSTRUCTIONS", "MAX_SYNC_WINDOW", "MEMORY_MODELS", "MIN_CLOCK_MHZ", "MIN_SAMPLE_TRIPS",
           "OptionInfo", "RunOptions", "SAMPLE_MODES", "SEED_MAX", "SIMT_MODES", "add_option_flags", "check_clock",
           "check_run_options", "check_sample_trips", "check_sync_window", "make_options", "option_info",
           "option_names", "options_from_args", "parse_clock", "parse_dims", "parse_integer", "parse_size",
           "reference_rows", "size_bytes", "variables"]
