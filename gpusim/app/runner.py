"""Run an application on simpy: `run_app(app_or_path, arch, ...)` -> AppResult.

Each stream is a simpy process that runs its commands in order. A kernel takes SMs from its GPU's pool (the SMs its
grid fills in one wave, as many of them as are free, at least one) and holds them for the duration of its own
cycle-level simulation on exactly that many SMs (gpusim.app.kernels: `sms=` the SMs granted; a grid larger than
that runs in more waves, as the engine models); a copy takes a copy engine of its GPU and the link directions it
crosses for bytes / bandwidth + latency (gpusim.app.transfers); an all-reduce starts when the stream of its name on
every GPU reaches it and holds every GPU's links for the ring's time; a wait holds its stream until the event's
record has been reached. The model's limits: concurrent kernels do not slow each other in the L2 or DRAM (each is
simulated alone, with the share of the L2 slices and DRAM channels its SMs have, as `--sms` gives), kernel launch
and the host's own time are not modelled, and a collective's kernels take no SMs.
"""

from __future__ import annotations

from pathlib import Path

import simpy

from ..arch import load_arch
from ..errors import GpusimError, shorten
from ..options import RunOptions, make_options
from . import kernels
from .commands import (AllReduceCommand, AppError, CopyCommand, KernelCommand, RecordCommand, WaitCommand,
                       at, check_application, command_where)
from .format import display_path, find_workload, load_application, shipped_root
from .resources import CopyEngines, Links, SmPool
from .result import Activity, AppResult
from .transfers import allreduce_links, allreduce_seconds, copy_links, copy_seconds, interconnect_of

DEFAULT_CACHE = "default"  # run_app(cache=...): the on-disk KernelCache at its default place


def human_bytes(n: int) -> str:
    """1 MiB, 1.50 GiB, 200 B: a copy's size as its default name shows it."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n // size} {unit}" if n % size == 0 else f"{n / size:.2f} {unit}"
    return f"{n} B"


class _Collective:
    """An all-reduce's meeting point: the streams that reached it, the candidates they bring, its end."""

    def __init__(self, env: simpy.Environment, streams: int):
        self.streams, self.arrived, self.candidates, self.done = streams, 0, [], env.event()


class _Model:
    """The simpy model of one application on `gpus` GPUs of `spec`, each with `sms` SMs."""

    def __init__(self, app, spec, options: RunOptions, gpus: int, sms: int, cache, on_simulate):
        self.app, self.spec, self.options, self.gpus, self.sms = app, spec, options, gpus, sms
        self.cache, self.on_simulate = cache, on_simulate
        self.env = simpy.Environment()
        self.pools = [SmPool(self.env, sms) for _ in range(gpus)]
        self.engines: list[CopyEngines] = []
        self.nvlink = False
        if any(isinstance(c, (CopyCommand, AllReduceCommand)) for c in app.commands):
            link = interconnect_of(spec)
            self.engines = [CopyEngines(self.env, link.copy_engines) for _ in range(gpus)]
            self.nvlink = link.nvlink_bandwidth_gbs is not None
        self.links = Links(self.env)
        self.activities: list[Activity] = []
        self.by_id: dict[str, Activity] = {}
        self.counts = {"kernel": 0, "copy": 0, "allreduce": 0}
        self.memo: dict[str, kernels.KernelResult] = {}
        self.keys: dict[tuple, str] = {}
        self.demands: dict[tuple, kernels.LaunchDemand] = {}
        self.simulated = 0
        self.warnings: list[str] = []
        self.records: dict[int, simpy.Event] = {}  # command index of a record -> its event
        self.collectives: dict[int, _Collective] = {}
        self.finished: set = set()

    # --- set-up -------------------------------------------------------------------------------------------------

    def streams(self) -> dict[tuple[int, str], list[int]]:
        """(gpu, stream name) -> the indices of its commands, in order; an all-reduce is on its stream of every GPU."""
        streams: dict[tuple[int, str], list[int]] = {}
        for index, command in enumerate(self.app.commands):
            if isinstance(command, AllReduceCommand):
                keys = [(g, command.stream) for g in range(self.gpus)]
                self.collectives[index] = _Collective(self.env, self.gpus)
            elif isinstance(command, CopyCommand):
                keys = [(command.source_gpu, command.stream)]
            else:
                keys = [(command.gpu, command.stream)]
            if isinstance(command, RecordCommand):
                self.records[index] = self.env.event()
            for key in keys:
                streams.setdefault(key, []).append(index)
        return streams

    def record_before(self, index: int) -> int:
        """The most recent record of the event a wait at `index` names, before it (check_application made sure)."""
        event = self.app.commands[index].event
        return max(i for i in self.records if i < index and self.app.commands[i].event == event)

    def run(self) -> None:
        streams = self.streams()
        for key, indices in streams.items():
            self.env.process(self.stream(key, indices))
        self.env.run()
        stuck = [key for key in streams if key not in self.finished]
        if stuck:
            gpu, name = stuck[0]
            raise AppError(f"{self.app.source or self.app.name}: the application cannot finish: stream {name!r} of "
                           f"GPU {gpu} waits for an event or an all-reduce that never comes")

    # --- the streams --------------------------------------------------------------------------------------------

    def after(self, candidates: list) -> str | None:
        """Of the activities that had to end before one could start, the one that ended last (the first of equals)."""
        known = [self.by_id[c] for c in candidates if c is not None]
        return max(known, key=lambda a: a.end_s).id if known else None

    def start(self, kind: str, name: str, stream: str, gpu: int, seconds: float, candidates: list,
              detail: dict) -> Activity:
        number = self.counts[kind]
        self.counts[kind] += 1
        now = float(self.env.now)
        activity = Activity(f"{kind[0]}{number}", kind, name, stream, gpu, now, now + seconds, self.after(candidates),
                            detail)
        self.activities.append(activity)
        self.by_id[activity.id] = activity
        return activity

    def stream(self, key: tuple[int, str], indices: list[int]):
        candidates: list = []  # what the next activity on this stream starts after, at the earliest
        for index in indices:
            command = self.app.commands[index]
            if isinstance(command, RecordCommand):
                self.records[index].succeed(self.after(candidates))
            elif isinstance(command, WaitCommand):
                event = self.records[self.record_before(index)]
                if not event.triggered:
                    yield event
                candidates.append(event.value)
            elif isinstance(command, KernelCommand):
                activity = yield from self.kernel(command, index, key, candidates)
                candidates = [activity.id]
            elif isinstance(command, CopyCommand):
                activity = yield from self.copy(command, key, candidates)
                candidates = [activity.id]
            else:
                meeting = self.collectives[index]
                meeting.arrived += 1
                meeting.candidates.extend(candidates)
                if meeting.arrived == meeting.streams:
                    self.env.process(self.allreduce(command, meeting))
                yield meeting.done
                candidates = [meeting.done.value]
        self.finished.add(key)

    # --- kernels ------------------------------------------------------------------------------------------------

    def workload_path(self, command: KernelCommand, where: str) -> Path:
        path = find_workload(command.workload, Path.cwd())
        if path is None:
            raise AppError(f"{at(where, 'kernel')}: workload {shorten(str(command.workload), 60)} not found (looked "
                           f"in {shorten(str(Path.cwd()), 60)} and under {shorten(str(shipped_root()), 60)})")
        return path

    def demand(self, path: Path, params: dict) -> kernels.LaunchDemand:
        key = (str(path), repr(sorted(params.items())))
        if key not in self.demands:
            self.demands[key] = kernels.launch_demand(path, params, self.spec, self.options)
        return self.demands[key]

    def result(self, path: Path, params: dict, sms: int, name: str) -> kernels.KernelResult:
        """The kernel's result on `sms` SMs: from this run, the cache, or simulated now."""
        options = self.options.replace(sms=sms)
        identity = (str(path), repr(sorted(params.items())), sms)
        if identity not in self.keys:  # (the key hashes the workload file: once per kernel and SM count)
            self.keys[identity] = kernels.kernel_key(path, params, self.spec, options)
        key = self.keys[identity]
        if key not in self.memo:
            found = self.cache.get(key) if self.cache is not None else None
            if found is None:
                if self.on_simulate is not None:
                    self.on_simulate(name, sms)
                found = kernels.simulate(path, params, self.spec, options)
                self.simulated += 1
                if self.cache is not None:
                    self.cache.put(key, found)
            self.memo[key] = found
            for warning in found.warnings:
                if warning not in self.warnings:
                    self.warnings.append(warning)
        return self.memo[key]

    def kernel(self, command: KernelCommand, index: int, key: tuple[int, str], candidates: list):
        where = command_where(self.app, index)
        path = self.workload_path(command, where)
        try:
            demand = self.demand(path, command.params)
        except GpusimError as exc:
            raise AppError(f"{where}: {exc}") from None
        pool = self.pools[command.gpu]
        wanted = demand.sms_wanted(pool.size)
        asked = self.env.now
        granted = yield pool.acquire(wanted)
        waited = [pool.released_by] if self.env.now > asked else []
        try:
            result = self.result(path, command.params, granted, command.name or demand.name)
        except GpusimError as exc:
            raise AppError(f"{where}: {exc}") from None
        detail = {"workload": display_path(path), "params": dict(command.params), "sms": granted,
                  "sms_wanted": wanted, "blocks": demand.blocks, "blocks_per_sm": demand.blocks_per_sm,
                  "seconds": result.seconds, "cycles": result.cycles, "bound": result.bound,
                  "bound_pct": result.bound_pct, "dram_bytes": result.dram_bytes, "flop": result.flop}
        activity = self.start("kernel", command.name or result.name, key[1], command.gpu, result.seconds,
                              candidates + waited, detail)
        yield self.env.timeout(result.seconds)
        pool.release(granted, activity.id)
        return activity

    # --- copies and collectives ----------------------------------------------------------------------------------

    def copy(self, command: CopyCommand, key: tuple[int, str], candidates: list):
        src = command.source_gpu
        dst = command.dst_gpu if command.kind == "p2p" else command.gpu
        seconds = copy_seconds(self.spec, command.kind, command.bytes)
        engines = self.engines[src]
        asked = self.env.now
        with engines.resource.request() as request:
            yield request
            waited = [engines.released_by] if self.env.now > asked else []
            engine = engines.take()
            requests, link_waits = yield from self.links.acquire(copy_links(command.kind, src, dst, self.nvlink))
            detail = {"kind": command.kind, "bytes": command.bytes, "engine": engine, "seconds": seconds}
            if command.kind == "p2p":
                detail.update(src_gpu=src, dst_gpu=dst)
            name = command.name or f"{command.kind} {human_bytes(command.bytes)}"
            activity = self.start("copy", name, key[1], src, seconds, candidates + waited + link_waits, detail)
            yield self.env.timeout(seconds)
            self.links.release(requests, activity.id)
            engines.give_back(engine, activity.id)
        return activity

    def allreduce(self, command: AllReduceCommand, meeting: _Collective):
        seconds = allreduce_seconds(self.spec, command.bytes, self.gpus)
        keys = allreduce_links(self.gpus, self.nvlink) if self.gpus > 1 else []
        requests, waited = yield from self.links.acquire(keys)
        name = command.name or f"allreduce {human_bytes(command.bytes)}"
        activity = self.start("allreduce", name, command.stream, 0, seconds, meeting.candidates + waited,
                              {"bytes": command.bytes, "gpus": self.gpus, "seconds": seconds})
        yield self.env.timeout(seconds)
        self.links.release(requests, activity.id)
        meeting.done.succeed(activity.id)


def run_app(source, arch, *, gpus: int | None = None, options: RunOptions | None = None, cache=DEFAULT_CACHE,
            on_simulate=None) -> AppResult:
    """Run an application (an Application, or the path of an application YAML file or a `kernelslist.g`) on `gpus`
    GPUs of `arch` (None: as many as the application says).

    `options`: the kernels' run options (gpusim.RunOptions; None: the defaults); its `sms`, if set, is each GPU's
    SM count (default: the part's). `cache`: a gpusim.app.KernelCache, DEFAULT_CACHE (the one at
    $GPUSIM_CACHE or ~/.cache/gpusim/kernels) or None (nothing read or kept on disk; identical kernels of one run
    are still simulated once). `on_simulate(kernel name, SMs)`, if given, hears each kernel before it is simulated."""
    app = load_application(source, gpus)
    count = check_application(app, gpus)
    spec = load_arch(arch)
    options = make_options(options, {}, "run_app")
    sms = spec.sms if options.sms is None else options.sms
    if sms > spec.sms:
        raise GpusimError(f"--sms {sms}: expected at most the {spec.sms} SMs {spec.name} has")
    if cache == DEFAULT_CACHE and not isinstance(cache, kernels.KernelCache):
        cache = kernels.KernelCache()
    if cache is not None and not isinstance(cache, kernels.KernelCache):
        raise GpusimError(f"cache {shorten(cache, 40)}: expected a KernelCache, {DEFAULT_CACHE!r} or None")
    model = _Model(app, spec, options.replace(sms=None), count, sms, cache, on_simulate)
    model.run()
    notes = list(app.notes)
    problems = list(cache.problems) if cache is not None else []
    return AppResult(app.name, spec.name, count, sms, tuple(model.activities), warnings=model.warnings + problems,
                     notes=notes, cache_hits=cache.hits if cache is not None else 0, simulated=model.simulated)


__all__ = ["DEFAULT_CACHE", "run_app"]
