"""`gpusim sweep`: the same simulation (gpusim.api.run) at every point of a Cartesian product of variations.

    gpusim.sweep("workloads/gemm_tile128.yaml", arch="h100", vary={"launch.regs": "32:255:32", "STAGES": [1, 2, 4]})

A variation names what it varies without ambiguity:

* `launch.threads`, `launch.regs`, `launch.smem`, `launch.dynamic_smem`, `launch.carveout`, `launch.grid`: the
  launch overrides of gpusim.api.run (`threads=`, `regs=`, ...);
* `scheduler`, `simt`, `sample`, `sample_trips`, `sync_window`: the run options of those names; `arch`: an
  architecture name or file;
* `arch.<field path>` (`arch.sm.registers`, `arch.memory.l2.size_bytes`): a hardware what-if, the arch rebuilt with
  attrs.evolve along the path and checked by the spec's own validators;
* any other name: a workload parameter (as `--set NAME=VALUE`).

Points are independent simulations, each seeded alike, so the rows are the same whatever runs them: one process,
a pool of forked processes (the default) or a Dask cluster (`executor="dask"`). A point that fails is a row with
its error; the sweep goes on. Rows are written to the output as they finish, in point order; Ctrl-C keeps every
finished row, and `resume` skips the points already there.

(`gpusim.sweep` is this module's `sweep` function; where this module was imported first, the module object stands
in that place, and calling it calls `sweep`.)
"""

from __future__ import annotations

import csv
import difflib
import errno
import itertools
import json
import math
import numbers
import os
import re
import signal
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any, Iterable, Iterator

from .errors import GpusimError, one_line, shorten, shown

# run()'s launch override keywords, by the name a variation gives them
LAUNCH = {"launch.threads": "threads", "launch.regs": "regs", "launch.smem": "smem",
          "launch.dynamic_smem": "dynamic_smem", "launch.carveout": "carveout", "launch.grid": "grid"}
RUN_OPTIONS = ("scheduler", "simt", "sample", "sample_trips", "sync_window")  # run options a variation may name
SIZE_NAMES = ("launch.smem", "launch.dynamic_smem")  # values that may be written 48K, 64KB, 1M
TEXT_NAMES = ("scheduler", "simt", "sample", "arch")  # values that are words: never a start:stop:step range
DEFAULT_METRICS = ("gpu_sim_cycle", "sm__inst_executed.avg.per_cycle_active",
                   "sm__warps_active.avg.pct_of_peak_sustained_active", "l1tex__t_sector_hit_rate.pct",
                   "lts__t_sector_hit_rate.pct", "dram__bytes.sum.per_second")
OCCUPANCY = "sm__maximum_warps_per_active_cycle_pct"  # the theoretical occupancy, in every row
LIMITER = "occupancy_limiter"  # the resource(s) that limit it, '+'-joined (gpusim.analytic.occupancy.LIMITERS)
ERROR, WALL = "error", "wall_s"
MAX_POINTS = 100_000
FORMATS = (".csv", ".json", ".parquet")
PLAIN_EVERY = 5.0  # seconds between progress lines when stderr is not a terminal
REWRITE_EVERY = 1.0  # seconds between rewrites of a .json or .parquet output (a .csv is appended to)
MAX_LINES = 8  # a plot draws a line per combination of the other axes up to this many, else their mean

_SIZE = re.compile(r"^\s*(\d+)\s*([kKmM]?)(i?[bB])?\s*$")


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during a sweep: the workers were stopped; `rows` are the finished rows (all in the output)."""

    def __init__(self, rows: list[dict], total: int, out: str | None):
        super().__init__(f"{len(rows)} of {total} points done")
        self.rows, self.total, self.out = rows, total, out


# ----------------------------------------------------------------------------------------------- variations

def parse_vary(text: str) -> tuple[str, list]:
    """'NAME=SPEC' -> (NAME, values); SPEC is 'a,b,c' or 'start:stop:step' (see parse_values)."""
    name, eq, spec = text.partition("=")
    name = name.strip()
    if not eq or not name:
        raise GpusimError(f"--vary {shown(text, 60)}: expected NAME=VALUES (VALUES a,b,c or start:stop:step)")
    return name, parse_values(name, spec)


def _number(name: str, text: str, size: bool = False):
    """'64' -> 64, '0.5' -> 0.5, '48K' -> 49152 where sizes are allowed, anything else stays text."""
    text = text.strip()
    if size:
        m = _SIZE.match(text)
        if m:
            return int(m.group(1)) * {"": 1, "k": 1024, "m": 1024 * 1024}[m.group(2).lower()]
    for cast in (int, float):
        try:
            value = cast(text)
        except ValueError:
            continue
        if cast is float and not math.isfinite(value):
            raise GpusimError(f"--vary {name}: {shown(text, 40)} is not a finite number")
        return value
    return text


def _sized(name: str) -> bool:
    return name in SIZE_NAMES or (name.startswith("arch.") and name.endswith("_bytes"))


def parse_values(name: str, spec: str) -> list:
    """The values of one variation: 'a,b,c' (each an int, a float or a word; sizes such as 48K for
    launch.smem, launch.dynamic_smem and arch fields in bytes) or 'start:stop:step' (`stop` included when the
    steps land on it; integers stay integers; 'start:stop' steps by 1)."""
    text = spec.strip()
    if not text:
        raise GpusimError(f"--vary {name}=: expected values (a,b,c or start:stop:step)")
    size = _sized(name)
    if ":" in text and name not in TEXT_NAMES:
        parts = text.split(":")
        if len(parts) not in (2, 3):
            raise GpusimError(f"--vary {name}={shown(text, 40)}: expected start:stop:step")
        numbers = [_number(name, p, size) for p in parts] + ([1] if len(parts) == 2 else [])
        if any(isinstance(n, str) for n in numbers):
            raise GpusimError(f"--vary {name}={shown(text, 40)}: start, stop and step must be numbers")
        start, stop, step = numbers
        if step == 0 or (stop - start) * step < 0:
            raise GpusimError(f"--vary {name}={shown(text, 40)}: the step must go from {start} towards {stop}")
        count = int(math.floor((stop - start) / step + 1e-9)) + 1
        if count > MAX_POINTS:
            raise GpusimError(f"--vary {name}={shown(text, 40)}: {count:,} values; a sweep takes at most "
                              f"{MAX_POINTS:,} points")
        if all(isinstance(n, int) for n in numbers):
            values = list(range(start, stop + (1 if step > 0 else -1), step))
        else:
            values = [float(round(start + k * step, 12)) for k in range(count)]
    else:
        items = [p.strip() for p in text.split(",")]
        if any(not p for p in items):
            raise GpusimError(f"--vary {name}={shown(text, 40)}: an empty value")
        values = [_number(name, p, size) for p in items]
    seen = set()
    for value in values:
        if _key(value) in seen:
            raise GpusimError(f"--vary {name}: the value {shown(value, 40)} is given twice")
        seen.add(_key(value))
    return values


def _values(name: str, given) -> list:
    """A variation's values from Python: a SPEC string, an iterable of values or one value."""
    if isinstance(given, str):
        return parse_values(name, given)
    if isinstance(given, Iterable) and not isinstance(given, (bytes, dict)):
        values = list(given)
    else:
        values = [given]
    if not values:
        raise GpusimError(f"vary[{shorten(name, 40)}]: no values")
    if len({_key(v) for v in values}) != len(values):
        raise GpusimError(f"vary[{shorten(name, 40)}]: a value is given twice")
    return values


def _key(value) -> str:
    """The key a value is matched by (--resume, the plots, repeated values): numbers by value (32, 32.0 and the
    text '32' are one key, as a CSV reads them back), anything else as its text."""
    if value is None:
        return ""
    if isinstance(value, str):
        number = _as_number(value)
        if number is None:
            return value
        value = number
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        value = float(value)
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


def _as_number(text: str):
    """'64' -> 64, '0.5' -> 0.5: a finite number written as text, else None."""
    for cast in (int, float):
        try:
            value = cast(text)
        except (ValueError, OverflowError):
            continue
        return value if cast is int or math.isfinite(value) else None
    return None


def points(vary: dict[str, list]) -> list[dict]:
    """The Cartesian product, the first variation slowest: [{name: value, ...}, ...]."""
    names = list(vary)
    return [dict(zip(names, combo)) for combo in itertools.product(*(vary[n] for n in names))]


def kind(name: str) -> str:
    """'launch', 'run', 'arch', 'arch_field' or 'param' (a workload parameter)."""
    if name in LAUNCH:
        return "launch"
    if name in RUN_OPTIONS:
        return "run"
    if name == "arch":
        return "arch"
    if name.startswith("arch."):
        return "arch_field"
    return "param"


# ----------------------------------------------------------------------------------------------- arch what-ifs

def evolve_arch(spec, changes: dict[str, Any]):
    """`spec` with its fields at `changes` ({'sm.registers': 131072, 'memory.l2.size_bytes': ...}), rebuilt with
    attrs.evolve along each path, so the spec's validators check the result. A path that names no field, or a
    value the spec refuses, is a GpusimError."""
    import attrs

    if not changes:
        return spec
    what = ", ".join(f"arch.{path}={shown(value, 40)}" for path, value in changes.items())
    tree: dict = {}
    for path, value in changes.items():
        node, parts = tree, path.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise GpusimError(f"{what}: arch.{path} is inside a field that is also given a value")
        if isinstance(node.get(parts[-1]), dict):
            raise GpusimError(f"{what}: arch.{path} is a group of fields that is also given a value")
        node[parts[-1]] = value

    def evolve(obj, node: dict, where: str):
        fields = attrs.fields_dict(type(obj))
        updates = {}
        for name, sub in node.items():
            if name not in fields:
                raise GpusimError(f"{what}: {where} has no field {shorten(name, 40)} (it has: {', '.join(fields)})")
            current = getattr(obj, name)
            nested = attrs.has(type(current))
            if isinstance(sub, dict):
                if not nested:
                    raise GpusimError(f"{what}: {where}.{name} is a value, not a group of fields")
                updates[name] = evolve(current, sub, f"{where}.{name}")
            elif nested:
                inner = ", ".join(attrs.fields_dict(type(current)))
                raise GpusimError(f"{what}: {where}.{name} is a group of fields; name one (it has: {inner})")
            else:
                updates[name] = _coerce(current, sub)
        try:
            return attrs.evolve(obj, **updates)
        except (ValueError, TypeError) as exc:
            raise GpusimError(f"{what}: {where}: {one_line(str(exc))}") from None

    return evolve(spec, tree, "arch")


def _coerce(current, value):
    """A what-if value in the field's own type where that is unambiguous (true/false, an int for a float)."""
    if isinstance(current, bool) and isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if isinstance(current, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


# ----------------------------------------------------------------------------------------------- one point

def run_point(task: dict) -> dict:
    """One point, simulated: the row (its varied values, the metrics, the theoretical occupancy and its limiter,
    the error or '', the wall time). Runs in a worker (a forked process, a Dask worker) or in this process."""
    started = time.perf_counter()
    if task.get("nested_jobs"):  # a pool's worker: the cores are shared out already
        from .sampling import parallel

        parallel.limit_jobs(task["nested_jobs"])
    row: dict = dict(task["values"])
    row.update({m: None for m in task["metrics"]})
    row[OCCUPANCY], row[LIMITER], row[ERROR] = None, "", ""
    spec = params = options = None
    try:
        spec, params, options = _prepare(task)
        result = api_run(task["workload"], spec, params=params or None, **options)
        metrics = result.metrics
        for m in task["metrics"]:
            row[m] = _plain(metrics.get(m))
        row[OCCUPANCY] = _plain(metrics.get(OCCUPANCY))
        launch = result.launch
        row[LIMITER] = _limiter(spec, launch["threads_per_block"], launch["registers_per_thread"],
                                launch["shared_memory_bytes"] + launch["dynamic_shared_memory_bytes"],
                                launch.get("carveout", options.get("carveout")))
        if result.partial:  # (only an interrupted run is partial; a sweep's are not interrupted)
            row[ERROR] = "the run stopped early: partial metrics"
        elif result.violations:  # (gpusim.stats.invariants) not an answer: the row says so
            row[ERROR] = one_line("physical limit broken: " + "; ".join(result.violations))
    except GpusimError as exc:
        row[ERROR] = one_line(str(exc))
        if "cannot be resident" in row[ERROR] and spec is not None:  # occupancy 0%, and what limits it
            row[OCCUPANCY], row[LIMITER] = _unresident(task["workload"], spec, params, options)
    except Exception as exc:  # a bug, not the input: still one row, and the sweep goes on
        row[ERROR] = one_line(f"internal error: {type(exc).__name__}: {exc}")
    row[WALL] = round(time.perf_counter() - started, 3)
    return {c: row.get(c) for c in task["columns"]}


def api_run(*args, **kwargs):
    from . import api

    return api.run(*args, **kwargs)


_DIMS = re.compile(r"\d+(x\d+){1,2}")


def _prepare(task: dict):
    """(the point's arch spec, workload parameters, run() keywords)."""
    from .arch import load_arch

    options = dict(task["options"])
    params = dict(options.pop("params") or {})
    arch = task["arch"]
    fields = {}
    for name, value in task["values"].items():
        what = kind(name)
        if what == "launch":
            if name in ("launch.threads", "launch.grid") and isinstance(value, str) and _DIMS.fullmatch(value):
                value = tuple(int(v) for v in value.split("x"))  # 16x16: two dimensions
            options[LAUNCH[name]] = value
        elif what == "run":
            options[name] = value
        elif what == "arch":
            arch = value
        elif what == "arch_field":
            fields[name[len("arch."):]] = value
        else:
            params[name] = value
    if isinstance(arch, str) and arch in task.get("archs", {}):
        arch = task["archs"][arch]  # loaded once by the parent: the workers need no arch files
    return evolve_arch(load_arch(arch), fields), params, options


def _limiter(spec, threads: int, regs: int, smem: int, carveout) -> str:
    from .analytic.occupancy import occupancy

    try:
        return "+".join(occupancy(spec, threads, regs, smem, carveout).limiters)
    except (TypeError, ValueError):
        return ""


def _unresident(workload: str, spec, params: dict, options: dict) -> tuple[float | None, str]:
    """(0.0, the limiting resource) for a launch that cannot be resident, from the workload's launch and the
    point's overrides; (None, '') where that cannot be worked out."""
    from . import api

    try:
        launch = api.load_kernel(workload, params or None, options.get("seed", 0)).launch
        threads = options.get("threads")
        threads = launch.threads_per_block if threads is None else math.prod(threads) \
            if isinstance(threads, tuple) else threads
        regs = options.get("regs") or launch.registers_per_thread
        smem = (launch.shared_memory_bytes if options.get("smem") is None else options["smem"]) + \
            (launch.dynamic_shared_memory_bytes if options.get("dynamic_smem") is None else options["dynamic_smem"])
        carveout = options.get("carveout", getattr(launch, "carveout", None))
        limiter = _limiter(spec, threads, regs, smem, carveout)
    except Exception:  # (the error row stands without it)
        return None, ""
    return (0.0, limiter) if limiter else (None, "")


def _plain(value):
    """A metric as a row holds it: int, float or str; a non-finite number (or none) is None."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float) or hasattr(value, "__float__"):
        value = float(value)
        return value if math.isfinite(value) else None
    return str(value)


# ----------------------------------------------------------------------------------------------- executors

def _worker_init() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent alone, which stops the workers


def _serial(tasks: list[dict]) -> Iterator[tuple[int | None, dict | None]]:
    for task in tasks:
        yield task["index"], run_point(task)


def _failed(task: dict, message: str) -> dict:
    row = dict(task["values"])
    row.update({m: None for m in task["metrics"]})
    row.update({OCCUPANCY: None, LIMITER: "", ERROR: one_line(message), WALL: 0.0})
    return {c: row.get(c) for c in task["columns"]}


def _pool(tasks: list[dict], jobs: int) -> Iterator[tuple[int | None, dict | None]]:
    """The points on a pool of `jobs` forked processes (spawned where fork is not available); (None, None) a few
    times a second while waiting, for the progress."""
    import concurrent.futures as cf
    import multiprocessing

    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    executor = cf.ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_worker_init)
    finished = False
    try:
        futures = {executor.submit(run_point, dict(task, nested_jobs=1)): task for task in tasks}
        pending = set(futures)
        while pending:
            done, pending = cf.wait(pending, timeout=0.25, return_when=cf.FIRST_COMPLETED)
            for future in sorted(done, key=lambda f: futures[f]["index"]):
                task = futures[future]
                try:
                    row = future.result()
                except Exception as exc:  # BrokenProcessPool: a worker died (killed, out of memory)
                    row = _failed(task, f"the worker process running this point died ({type(exc).__name__})")
                yield task["index"], row
            yield None, None
        finished = True
    finally:
        if finished:
            executor.shutdown(wait=True)
        else:  # interrupted: the running points are abandoned
            processes = list((getattr(executor, "_processes", None) or {}).values())
            executor.shutdown(wait=False, cancel_futures=True)
            for process in processes:
                process.terminate()
            for process in processes:
                process.join(5)


def _dask(tasks: list[dict], jobs: int, address: str) -> Iterator[tuple[int | None, dict | None]]:
    """The points on a Dask distributed cluster: `address` tcp://HOST:PORT, or 'local' for a LocalCluster of
    `jobs` single-threaded worker processes on loopback (they ignore Ctrl-C: the parent stops them)."""
    try:
        from dask.distributed import as_completed
    except ImportError:
        raise GpusimError('--executor dask needs dask.distributed: pip install "gpusim[cluster]"') from None
    import uuid

    client, cluster = _local_cluster(jobs) if address == "local" else (_connect(address), None)
    token = uuid.uuid4().hex[:8]
    futures: list = []
    finished = False
    try:
        by_key = {}
        for task in tasks:
            future = client.submit(run_point, dict(task, nested_jobs=1), key=f"gpusim-sweep-{token}-{task['index']}",
                                   pure=False)
            futures.append(future)
            by_key[future.key] = task
        for future in as_completed(futures):
            task = by_key[future.key]
            try:
                row = future.result()
            except Exception as exc:  # a worker lost (KilledWorker) or a point that could not be sent
                row = _failed(task, f"the Dask worker running this point failed ({type(exc).__name__}: {exc})")
            yield task["index"], row
        finished = True
    finally:
        _close_dask(client, cluster, futures, quiet=not finished)


DASK_CONNECT_SECONDS = 20.0  # the most a connection to a Dask scheduler may take, its handshake included


def _dask_failure(exc: BaseException) -> str:
    text = one_line(str(exc)).strip()
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


def _connect(address: str):
    """A Client of the Dask scheduler at `address`, or within DASK_CONNECT_SECONDS a one-line GpusimError whatever
    is there (nothing listening, a silent peer, a server of another protocol). The attempt runs in a thread so the
    deadline covers the connection and the handshake alike; one abandoned past it closes its client if it ever
    connects."""
    from dask.distributed import Client

    box: dict = {}
    lock = threading.Lock()

    def attempt() -> None:
        try:
            client = Client(address, timeout=f"{max(1.0, 0.75 * DASK_CONNECT_SECONDS):g}s")
        except BaseException as exc:  # anything at all: a MemoryError from a reply read as a frame length
            box["error"] = exc
            return
        with lock:
            if box.get("abandoned"):
                _close_quietly(client)
            else:
                box["client"] = client

    thread = threading.Thread(target=attempt, name="gpusim-dask-connect", daemon=True)
    thread.start()
    thread.join(DASK_CONNECT_SECONDS)
    with lock:
        if "client" in box:
            return box["client"]
        box["abandoned"] = True
    where = f"--dask-scheduler {shown(address, 60)}"
    error = box.get("error")
    if isinstance(error, (OSError, TimeoutError)):  # nothing listening, refused, timed out, a name not found
        raise GpusimError(f"{where}: cannot connect ({_dask_failure(error)})")
    if error is not None:  # a reply that is no Dask handshake (read as frame lengths it asks for exabytes)
        raise GpusimError(f"{where}: what answers there is not a Dask scheduler (its reply could not be read as "
                          f"one: {_dask_failure(error)})")
    raise GpusimError(f"{where}: no Dask scheduler answered within {DASK_CONNECT_SECONDS:g} s")


def _local_cluster(jobs: int):
    """(a Client, its LocalCluster) of `jobs` single-threaded worker processes on loopback. The workers start with
    SIGINT ignored, so Ctrl-C at a terminal (which signals every process of the group) reaches the parent alone,
    which stops them without their tracebacks."""
    import logging

    from dask.distributed import Client, LocalCluster

    cluster = None
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=None,
                               host="127.0.0.1", silence_logs=logging.ERROR, preload=[_IGNORE_SIGINT])
        return Client(cluster), cluster
    except Exception as exc:
        if cluster is not None:
            _close_quietly(cluster)
        raise GpusimError(f"--executor dask: cannot start a local Dask cluster of {jobs} workers "
                          f"({_dask_failure(exc)})") from None
    finally:
        if main:
            signal.signal(signal.SIGINT, signal.default_int_handler if previous is None else previous)


# a worker preload (the text of a script): a worker restarted later ignores Ctrl-C too
_IGNORE_SIGINT = ("import signal, threading\n"
                  "if threading.current_thread() is threading.main_thread():\n"
                  "    signal.signal(signal.SIGINT, signal.SIG_IGN)\n")


def _close_quietly(thing) -> None:
    try:
        thing.close()
    except Exception:
        pass


def _close_dask(client, cluster, futures: list, quiet: bool) -> None:
    """The points cancelled, the client and the local cluster closed; when the sweep stops early (Ctrl-C, an
    error) Dask's own log lines about the connections it then loses are not shown."""
    import logging

    loggers = [logging.getLogger(name) for name in ("distributed", "tornado", "asyncio")]
    levels = [logger.level for logger in loggers]
    if quiet:
        for logger in loggers:
            logger.setLevel(logging.CRITICAL + 1)
    try:
        if futures:
            try:
                client.cancel(futures)
            except Exception:
                if not quiet:
                    raise
        if quiet:
            _close_quietly(client)
        else:
            client.close()
    finally:
        try:
            if cluster is not None:
                if quiet:
                    _close_quietly(cluster)
                else:
                    cluster.close()
        finally:
            for logger, level in zip(loggers, levels):
                logger.setLevel(level)


# ----------------------------------------------------------------------------------------------- output

class Output:
    """The output file (.csv, .json or .parquet), written as rows finish: a CSV is appended to (each batch of rows
    whole, flushed and synced to the disk, or cut back to where it was), a JSON list or a Parquet table rewritten
    (at most once a second, and at the end) through a temporary file renamed over it. Every write error is a
    one-line GpusimError naming the file, and no temporary file is left behind."""

    def __init__(self, path, columns: list[str]):
        self.path, self.columns = Path(path), list(columns)
        self.format = self.path.suffix.lower()
        if self.format not in FORMATS:
            raise GpusimError(f"--out {shown(str(path), 60)}: expected a .csv, .json or .parquet file")
        if self.format == ".parquet":
            try:
                import pandas  # noqa: F401
                import pyarrow  # noqa: F401
            except ImportError:
                raise GpusimError("--out .parquet needs pandas and pyarrow: pip install pandas pyarrow") from None
        self.rows: list[dict] = []
        self.written = 0.0

    def read(self) -> list[dict | None]:
        """The rows already in the file ([] where there is none), for --resume: a dict per row, None for one that
        cannot be read back (a CSV line cut short or unparsable, a JSON item that is not an object). A file of
        other columns, or none of this sweep's format, is a GpusimError."""
        if not self.path.exists():
            return []
        if not self.path.is_file():  # a directory, a device (/dev/zero reads forever), a pipe
            raise GpusimError(f"--resume: {self.path} is not a regular file")
        try:
            if self.format == ".csv":
                return self._read_csv()
            if self.format == ".json":
                return self._read_json()
            import pandas

            frame = pandas.read_parquet(self.path)
            self._check_columns(list(frame.columns))
            return [{k: _plain(None if _missing(v) else v) for k, v in r.items()}
                    for r in frame.to_dict(orient="records")]
        except GpusimError:
            raise
        except RecursionError:
            raise GpusimError(f"--resume: cannot read {self.path} (nested too deeply to be a list of rows)") from None
        except Exception as exc:  # OSError, a decoding or parsing error of any kind
            raise GpusimError(f"--resume: cannot read {self.path} ({_why(exc)})") from None

    def _check_columns(self, found: list) -> None:
        if found and list(found) != self.columns:
            raise GpusimError(f"--resume: {self.path} has the columns {', '.join(map(str, found))[:300]}, not this "
                              f"sweep's ({', '.join(self.columns)[:300]}): another --out, or the same --vary and "
                              f"--metrics")

    def _read_csv(self) -> list[dict | None]:
        """Line by line: a line is a row (the rows hold no line breaks), the last one cut short where the file
        does not end with one (a write interrupted), and a file holding less than its header line holds none."""
        header = _csv_text([], self.columns, header=True)
        data = self.path.read_bytes()
        lines = data.split(b"\n")
        tail = lines.pop()  # after the last line break: b"" or a line cut short
        if not lines:
            if header.encode().startswith(tail):
                return []
            lines = [tail]
        try:
            found = next(csv.reader([lines[0].decode("utf-8")], strict=True), [])
        except (UnicodeDecodeError, csv.Error) as exc:
            raise GpusimError(f"--resume: cannot read {self.path}'s header line ({_why(exc)})") from None
        self._check_columns(found or ["(an empty line)"])
        rows = [self._csv_line(raw) for raw in lines[1:] if raw.strip()]
        return rows + [None] if tail.strip() else rows

    def _csv_line(self, raw: bytes) -> dict | None:
        try:
            cells = list(csv.reader([raw.decode("utf-8")], strict=True))
        except (UnicodeDecodeError, csv.Error):
            return None
        if len(cells) != 1 or len(cells[0]) != len(self.columns):
            return None
        return {c: _typed(c, v) for c, v in zip(self.columns, cells[0])}

    def _read_json(self) -> list[dict | None]:
        with open(self.path, encoding="utf-8") as fh:
            rows = json.load(fh)  # (NaN and Infinity read as floats: such a row is run again)
        if not isinstance(rows, list):
            raise GpusimError(f"--resume: cannot read {self.path} (expected a list of rows, got a "
                              f"{type(rows).__name__})")
        first = next((r for r in rows if isinstance(r, dict)), None)
        self._check_columns(list(first) if first is not None else [])
        return [r if isinstance(r, dict) else None for r in rows]

    def start(self, rows: list[dict]) -> None:
        """The file, holding `rows` (a fresh sweep: none)."""
        self.rows = list(rows)
        self._rewrite()

    def add(self, rows: list[dict], *, final: bool = False) -> None:
        self.rows.extend(rows)
        if self.format == ".csv":
            if rows:
                self._append(_csv_text(rows, self.columns).encode("utf-8"))
        elif final or time.monotonic() - self.written >= REWRITE_EVERY:
            self._rewrite()

    def finish(self, rows: list[dict] | None = None) -> None:
        """The last write: `rows` (when given) replace what is there, in this order."""
        if rows is not None:
            self.rows = list(rows)
            self._rewrite()
        elif self.format != ".csv":
            self._rewrite()

    def _failed(self, exc: BaseException) -> GpusimError:
        return GpusimError(f"--out {self.path}: cannot write ({_why(exc)})")

    def _append(self, data: bytes) -> None:
        """`data` (whole lines) at the end of the file, synced; where that fails, the file cut back to its length
        before, so that it never holds part of a row."""
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        except (OSError, ValueError) as exc:
            raise self._failed(exc) from None
        try:
            start = os.lseek(fd, 0, os.SEEK_END)
        except OSError:
            start = None
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            _sync(fd)
        except OSError as exc:
            if start is not None:
                try:
                    os.ftruncate(fd, start)
                except OSError:
                    pass
            raise self._failed(exc) from None
        finally:
            os.close(fd)

    def _rewrite(self) -> None:
        """The whole file, written to a temporary file beside it, synced and renamed over it."""
        temporary = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            name = f".{self.path.name}.{os.getpid()}.tmp"
            if self.format == ".parquet":
                frame = _frame(self.rows, self.columns)
                temporary = self.path.with_name(name)
                frame.to_parquet(temporary, index=False)
                data = None
            elif self.format == ".csv":
                data = _csv_text(self.rows, self.columns, header=True).encode("utf-8")
            else:
                data = (json.dumps(self.rows, indent=1, allow_nan=False) + "\n").encode("utf-8")
            if data is not None:
                temporary = self.path.with_name(name)
                with open(temporary, "wb") as fh:
                    fh.write(data)
            fd = os.open(temporary, os.O_RDONLY)
            try:
                _sync(fd)
            finally:
                os.close(fd)
            os.replace(temporary, self.path)
            temporary = None
        except GpusimError:
            raise
        except Exception as exc:  # OSError, a value JSON or Parquet cannot hold, ...
            raise self._failed(exc) from None
        finally:
            if temporary is not None:
                try:
                    os.unlink(temporary)
                except OSError:
                    pass
        self.written = time.monotonic()


def _sync(fd: int) -> None:
    """fsync, where the file supports it (a pipe or a character device does not)."""
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EROFS):
            raise


def _why(exc: BaseException) -> str:
    """An exception as the end of a one-line message."""
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else one_line(str(exc))
    return shorten(text, 200).strip("'\"") if text else type(exc).__name__


def _csv_text(rows: list[dict], columns: list[str], header: bool = False) -> str:
    """Rows as CSV lines, each ended by a line break (the header line first where `header`)."""
    import io

    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, columns, lineterminator="\n")
    if header:
        writer.writeheader()
    writer.writerows(_csv_row(r) for r in rows)
    return buffer.getvalue()


def _csv_row(row: dict) -> dict:
    return {k: "" if v is None else v for k, v in row.items()}


def _missing(value) -> bool:
    return value is None or isinstance(value, float) and math.isnan(value)


def _typed(column: str, text: str | None):
    """A CSV cell as the row had it: '' -> None (but '' for the error and limiter), numbers as numbers (a
    non-finite one too: such a row is run again), other text as text."""
    if column in (ERROR, LIMITER):
        return text or ""
    if text is None or text == "":
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except (ValueError, OverflowError):
            continue
    return text


def _usable(row, columns: list[str], measured: list[str]) -> bool:
    """Whether a row read back from the output is a finished point that --resume keeps: a dict of exactly the
    sweep's columns, each of the `measured` ones (the metrics, the theoretical occupancy) empty or a finite
    number, the error and the limiter text, the wall time a finite number, and metrics or an error."""
    if not isinstance(row, dict) or set(row) != set(columns) or len(row) != len(columns):
        return False
    if not isinstance(row[ERROR], str) or not isinstance(row[LIMITER], str) or not _finite(row[WALL]):
        return False
    values = [row[m] for m in measured]
    if not all(v is None or _finite(v) for v in values):
        return False
    return bool(row[ERROR]) or any(v is not None for v in values)


def _finite(value) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, int) or math.isfinite(value)


def _frame(rows: list[dict], columns: list[str]):
    import pandas

    return pandas.DataFrame(rows, columns=columns)


# ----------------------------------------------------------------------------------------------- progress

class _Progress:
    """Points done of the total and an ETA on stderr: a rich bar on a terminal, a plain line every few seconds
    otherwise."""

    def __init__(self, total: int, done: int, file=None):
        self.file = sys.stderr if file is None else file
        isatty = getattr(self.file, "isatty", None)
        self.tty = bool(isatty()) if callable(isatty) else False
        self.total, self.done, self.first, self.failed = total, done, done, 0
        self.started = time.monotonic()
        self.next_line = self.started + PLAIN_EVERY
        self.bar = None
        if self.tty:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)

            self.bar = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TextColumn("points"),
                                TextColumn("{task.fields[failed]}"), TimeElapsedColumn(), TextColumn("ETA"),
                                TimeRemainingColumn(), console=Console(file=self.file, force_terminal=True),
                                transient=True, auto_refresh=False, redirect_stdout=False, redirect_stderr=False)
            self.bar.start()
            self.task = self.bar.add_task("sweep", total=total, completed=done, failed="")

    def eta(self) -> float | None:
        ran = self.done - self.first
        if not ran:
            return None
        return (self.total - self.done) * (time.monotonic() - self.started) / ran

    def advance(self, row: dict | None) -> None:
        if row is not None:
            self.done += 1
            self.failed += bool(row.get(ERROR))
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done, failed=f"({self.failed} failed)" if self.failed else "")
            self.bar.refresh()
        elif time.monotonic() >= self.next_line and self.done < self.total:
            from .report.progress import duration

            self.next_line = time.monotonic() + PLAIN_EVERY
            eta = self.eta()
            failed = f", {self.failed} failed" if self.failed else ""
            print(f"gpusim sweep: {self.done:,} of {self.total:,} points{failed}, ETA "
                  f"{'?' if eta is None else duration(eta)}", file=self.file, flush=True)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


class _Quiet:
    def advance(self, row) -> None:
        pass

    def stop(self) -> None:
        pass


class _CtrlC:
    """SIGINT while a sweep runs: KeyboardInterrupt at once, except while a row is being written (then right
    after it), so the output never holds half a row."""

    def __init__(self):
        self.writing, self.pending, self.previous, self.installed = False, False, None, False

    def handle(self, signum, frame) -> None:
        if self.writing:
            self.pending = True
        else:
            raise KeyboardInterrupt

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self.previous, self.installed = signal.signal(signal.SIGINT, self.handle), True
        return self

    def __exit__(self, *exc) -> None:
        if self.installed:
            signal.signal(signal.SIGINT, signal.default_int_handler if self.previous is None else self.previous)

    def write(self, action) -> None:
        self.writing = True
        try:
            action()
        finally:
            self.writing = False
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt


# ----------------------------------------------------------------------------------------------- the sweep

def _check_names(vary: dict, params: dict, workload, kernel_params: dict | None, run_keywords) -> None:
    for name in vary:
        if not isinstance(name, str) or not name:
            raise GpusimError(f"--vary {shorten(name, 40)}: expected a name")
        what = kind(name)
        if what == "launch" and LAUNCH[name] not in run_keywords:
            raise GpusimError(f"--vary {name}: this gpusim's run() has no launch override '{LAUNCH[name]}'")
        if what == "arch_field" and not re.fullmatch(r"arch(\.[A-Za-z_][A-Za-z0-9_]*)+", name):
            raise GpusimError(f"--vary {shown(name, 60)}: expected arch.<field>.<field> (see gpusim archs --fields)")
        if what == "param":
            if kernel_params is None:
                raise GpusimError(f"--vary {shown(name, 40)}: {workload} is a trace: it has no parameters to vary "
                                  f"(launch.*, scheduler, simt, sample, sample_trips, sync_window, arch and "
                                  f"arch.<field> may be varied)")
            if name not in kernel_params:
                raise GpusimError(f"--vary {shown(name, 40)}: not a parameter of {workload} (its parameters: "
                                  f"{', '.join(kernel_params) or 'none'}; or launch.threads, launch.regs, "
                                  f"launch.smem, launch.dynamic_smem, launch.carveout, launch.grid, scheduler, simt, "
                                  f"sample, sample_trips, sync_window, arch, arch.<field>)")


JOBS_PER_CORE = 4  # --jobs at most this many times the machine's cores


def check_jobs(jobs) -> None:
    """--jobs: a whole number from 1 to max_jobs(); anything else a one-line GpusimError."""
    if not (isinstance(jobs, int) and not isinstance(jobs, bool) and jobs >= 1):
        raise GpusimError(f"--jobs {shown(jobs, 40)}: expected an integer >= 1")
    if jobs > max_jobs():
        raise GpusimError(f"--jobs {jobs:,}: at most {max_jobs():,} ({JOBS_PER_CORE} x this machine's "
                          f"{os.cpu_count() or 1} cores)")


def max_jobs() -> int:
    """The largest --jobs: JOBS_PER_CORE x the machine's cores (more workers than that only share the cores)."""
    return JOBS_PER_CORE * (os.cpu_count() or 1)


def _resumed(output: Output, tasks: list[dict], names: list[str], measured: list[str]) -> dict[int, dict]:
    """--resume: the finished points' rows in the output, by point index, each as the sweep writes it (its
    columns in order, its varied values as the point has them). A row that is not a finished point (cut short,
    unreadable, a metric that is not a finite number, neither metrics nor an error) is left out, so its point runs
    again; so is a row of no point of this sweep, or a second row of one. One line on stderr counts them."""
    index = {tuple(_key(v) for v in t["values"].values()): t["index"] for t in tasks}
    done: dict[int, dict] = {}
    unusable = ignored = 0
    for row in output.read():
        if not _usable(row, output.columns, measured):
            unusable += 1
            continue
        i = index.get(tuple(_key(row[n]) for n in names))
        if i is None or i in done:
            ignored += 1
            continue
        done[i] = {c: row[c] for c in output.columns} | tasks[i]["values"]
    said = []
    if unusable:
        said.append(f"{unusable:,} row{'s' if unusable != 1 else ''} not a finished point (cut short, unreadable, "
                    f"a metric that is not a finite number, or neither metrics nor an error): run again")
    if ignored:
        said.append(f"{ignored:,} row{'s' if ignored != 1 else ''} of no point of this sweep, or repeating one: "
                    f"ignored (left out of the file)")
    if said:
        print(f"note: --resume {output.path}: " + "; ".join(said), file=sys.stderr)
    return done


def columns_of(vary_names: list[str], metrics: list[str]) -> list[str]:
    """A row's columns: the varied values, the metrics, the theoretical occupancy and its limiter, error, wall_s."""
    return list(vary_names) + [m for m in metrics if m != OCCUPANCY] + [OCCUPANCY, LIMITER, ERROR, WALL]


def sweep(workload, arch, vary: dict | None = None, *, jobs: int | None = None, metrics=None,
          executor: str = "pool", dask_scheduler: str | None = None, out=None, resume: bool = False,
          plot=None, progress: bool = False, params: dict | None = None, scheduler: str | None = None,
          simt: str = "stack", sms: int | None = None, seed: int = 0, memory: str = "hierarchy",
          sample: str = "auto", max_instructions: int | None = None, on_plot=None, sync_window: int = 1,
          sample_trips: int | None = None, **launch):
    """Simulate `workload` on `arch` at every point of the Cartesian product of `vary` ({name: values}: values a
    list, one value, or a SPEC string 'a,b,c' / 'start:stop:step'; names as this module's docstring lists them)
    and return the rows: a pandas DataFrame when pandas is installed, else a list of dicts, one per point in
    point order (the first variation slowest). Columns: the varied values, `metrics` (default DEFAULT_METRICS),
    the theoretical occupancy (OCCUPANCY) and its limiter, `error` ('' or why the point failed) and `wall_s`.

    `jobs` (default: the cores this process may use; at most JOBS_PER_CORE x the machine's cores, and never more
    workers than points to run) processes run the points (`executor="pool"`), or a Dask cluster does
    (`executor="dask"`, `dask_scheduler` 'tcp://HOST:PORT' or 'local'). `out` (.csv, .json, .parquet) gets the rows
    as they finish; `resume=True` keeps the finished rows already in `out` (matched by value: 32 and 32.0 alike)
    and runs the rest, the points of rows cut short or without finite metrics or an error included.
    `plot`: a directory for one PNG per metric against each varied axis. `progress`: a bar (or lines) on stderr.
    The other keywords are gpusim.api.run's, applied at every point (a varied name wins over them): `params`
    (workload parameters), `scheduler`, `simt`, `sms`, `seed`, `memory`, `sample`, `sample_trips`, `sync_window`,
    `max_instructions` and the
    launch overrides `threads`, `regs`, `smem`, `dynamic_smem`, `carveout`, `grid`.
    Ctrl-C stops the workers and raises SweepInterrupted (a KeyboardInterrupt) once the finished rows are written.
    """
    import inspect

    from . import api
    from .arch import ArchSpec, load_arch
    from .engine.scheduler import DEFAULT_POLICY
    from .sampling.parallel import default_jobs
    from .trace import is_command_list, is_trace

    run_keywords = set(inspect.signature(api.run).parameters)
    for name in launch:
        if name not in LAUNCH.values():
            raise TypeError(f"sweep() got an unexpected keyword argument '{name}'")
        if name not in run_keywords:
            raise GpusimError(f"{name}=: this gpusim's run() has no launch override '{name}'")
    if not isinstance(workload, (str, Path)):
        raise GpusimError(f"workload {shown(workload, 40)}: expected a path (a workload .yaml, a trace or a "
                          f"kernelslist.g): each point loads it with its own parameters")
    if not Path(workload).exists():
        raise GpusimError(f"{workload}: no such file")
    if executor not in ("pool", "dask"):
        raise GpusimError(f"--executor {shown(executor, 40)}: expected pool or dask")
    if dask_scheduler is not None and executor != "dask":
        raise GpusimError("--dask-scheduler: only with --executor dask")
    if executor == "dask":
        dask_scheduler = dask_scheduler or "local"
        if dask_scheduler != "local" and not re.fullmatch(r"(tcp|tls|ws|wss|inproc|ucx)://\S+", dask_scheduler):
            raise GpusimError(f"--dask-scheduler {shown(dask_scheduler, 60)}: expected tcp://HOST:PORT or local")
        try:  # (before the output file is started)
            import dask.distributed  # noqa: F401
        except ImportError:
            raise GpusimError('--executor dask needs dask.distributed: pip install "gpusim[cluster]"') from None
    if memory not in api.MEMORY_MODELS:
        raise GpusimError(f"--memory {shown(memory, 40)}: a sweep takes {' or '.join(api.MEMORY_MODELS)}")
    if jobs is not None:
        check_jobs(jobs)
    metrics = list(DEFAULT_METRICS if metrics is None else
                   [m.strip() for m in metrics.split(",")] if isinstance(metrics, str) else metrics)
    if not all(isinstance(m, str) and m for m in metrics) or len(set(metrics)) != len(metrics):
        raise GpusimError(f"--metrics {shorten(metrics, 80)}: expected distinct metric names (a,b,c)")
    from .stats.declared import METRICS as DECLARED

    unknown = [m for m in metrics if m not in DECLARED]
    if unknown:  # (every metric a record can hold is declared, with its unit: gpusim.stats.declared)
        close = difflib.get_close_matches(unknown[0], list(DECLARED), n=1)
        raise GpusimError(f"--metrics {shown(unknown[0], 80)}: not a metric gpusim records"
                          + (f" (did you mean {close[0]}?)" if close else " (gpusim run --json - lists them)"))
    vary = {name: _values(name, values) for name, values in (vary or {}).items()}
    product = math.prod(len(v) for v in vary.values())
    if product > MAX_POINTS:
        raise GpusimError(f"--vary: {product:,} points; a sweep takes at most {MAX_POINTS:,}")
    params = dict(params or {})
    scheduler = DEFAULT_POLICY if scheduler is None else scheduler
    max_instructions = api.MAX_INSTRUCTIONS if max_instructions is None else max_instructions
    api.check_options(scheduler=scheduler, simt=simt, sms=sms, seed=seed, memory=memory, params=params,
                      max_instructions=max_instructions)
    api.check_sync_window(sync_window)
    api.check_sample_trips(sample_trips, sample)
    base = load_arch(arch)  # a bad --arch is the whole sweep's error, before anything runs
    traced = is_trace(workload) or is_command_list(workload)
    if traced:
        api.reject_trace_params(workload, params)
    kernel = None if traced else api.load_kernel(str(workload), params, seed)
    _check_names(vary, params, workload, None if kernel is None else kernel.params, run_keywords)
    archs = {}  # the varied arch values the parent could load (the others fail in their rows)
    if "arch" in vary:
        for value in vary["arch"]:
            try:
                archs[value.name if isinstance(value, ArchSpec) else str(value)] = load_arch(value)
            except GpusimError:
                pass
        vary["arch"] = [v.name if isinstance(v, ArchSpec) else v for v in vary["arch"]]  # a row holds the name
    options = dict(scheduler=scheduler, simt=simt, sms=sms, seed=seed, memory=memory, sample=sample,
                   max_instructions=max_instructions, params=params, sync_window=sync_window,
                   sample_trips=sample_trips, **launch)
    columns = columns_of(list(vary), metrics)
    tasks = [{"index": i, "values": point, "workload": str(Path(workload).resolve()), "arch": base,
              "archs": archs, "options": options, "metrics": metrics, "columns": columns}
             for i, point in enumerate(points(vary))]

    output = Output(out, columns) if out is not None else None
    done: dict[int, dict] = {}
    if output is not None and resume:
        done = _resumed(output, tasks, list(vary), metrics + [OCCUPANCY])
    todo = [t for t in tasks if t["index"] not in done]
    if output is not None:
        output.start([done[i] for i in sorted(done)])
    jobs = min(default_jobs(len(todo)) if jobs is None else jobs, max(1, len(todo)))  # no idle workers
    if not todo:
        results = iter(())
    elif executor == "dask":
        results = _dask(todo, jobs, dask_scheduler)
    elif jobs <= 1 or len(todo) <= 1:
        results = _serial(todo)
    else:
        results = _pool(todo, jobs)
    bar = _Progress(len(tasks), len(done)) if progress else _Quiet()
    finished: dict[int, dict] = {}
    order, next_todo = [t["index"] for t in todo], 0
    with _CtrlC() as ctrl_c:
        try:
            try:
                for i, row in results:
                    if i is not None:
                        finished[i] = row
                        ready = []
                        while next_todo < len(order) and order[next_todo] in finished:
                            ready.append(finished[order[next_todo]])
                            next_todo += 1
                        if ready and output is not None:
                            ctrl_c.write(lambda: output.add(ready))
                    bar.advance(row if i is not None else None)
            finally:
                bar.stop()
                close = getattr(results, "close", None)
                if close is not None:
                    close()
        except KeyboardInterrupt:
            # every finished row is kept: those waiting for an earlier point go in after the others
            late = [finished[i] for i in order[next_todo:] if i in finished]
            if output is not None:
                output.add(late, final=True)
            kept = {**done, **finished}
            raise SweepInterrupted([kept[i] for i in sorted(kept)], len(tasks),
                                   None if out is None else str(out)) from None
        rows = [done[i] if i in done else finished[i] for i in range(len(tasks))]
        if output is not None:
            ctrl_c.write(lambda: output.finish(rows if resume else None))
    if plot is not None:
        label = kernel.name if kernel is not None else Path(workload).name
        paths = plot_sweep(rows, vary, metrics, label, base.name, plot)
        if on_plot is not None:
            on_plot(paths)
    try:
        return _frame(rows, columns)
    except ImportError:
        return rows


# ----------------------------------------------------------------------------------------------- plots and table

PLOT_NAMES = {"gpu_sim_cycle": "cycles", "sm__inst_executed.avg.per_cycle_active": "IPC per SM",
              "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved occupancy",
              "l1tex__t_sector_hit_rate.pct": "L1 hit rate", "lts__t_sector_hit_rate.pct": "L2 hit rate",
              "dram__bytes.sum.per_second": "DRAM bandwidth", OCCUPANCY: "theoretical occupancy"}
SHORT_NAMES = {"gpu_sim_cycle": "cycles", "sm__inst_executed.avg.per_cycle_active": "IPC/SM",
               "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved occ %",
               "l1tex__t_sector_hit_rate.pct": "L1 hit %", "lts__t_sector_hit_rate.pct": "L2 hit %",
               "dram__bytes.sum.per_second": "DRAM GB/s", OCCUPANCY: "theor. occ %", LIMITER: "limiter",
               ERROR: "error", WALL: "wall s"}


def metric_unit(metric: str) -> tuple[str, float]:
    """(unit, scale) a metric is shown in: '%', 'GB/s' (bytes/s x 1e-9), 'cycles', ..."""
    low = metric.lower()
    if low.endswith((".pct", "_pct")) or "pct_of_peak" in low or low.endswith("_rate.pct"):
        return "%", 1.0
    if "per_second" in low:
        if "byte" in low:
            return "GB/s", 1e-9
        if "flop" in low:
            return "TFLOP/s", 1e-12
        return "per second", 1.0
    if "inst_executed" in low and "per_cycle" in low:
        return "warp-inst per cycle", 1.0
    if "per_cycle" in low or low in ("gpu_ipc",):
        return "per cycle", 1.0
    if "cycle" in low:
        return "cycles", 1.0
    if "duration" in low:
        return "s", 1.0
    if "bytes" in low:
        return "bytes", 1.0
    if low.endswith(".ratio"):
        return "ratio", 1.0
    return "", 1.0


def axis_label(name: str) -> str:
    """A varied axis as a plot labels it, with its unit."""
    fixed = {"launch.threads": "threads per block", "launch.regs": "registers per thread",
             "launch.smem": "shared memory per block (bytes)", "launch.dynamic_smem": "dynamic shared memory (bytes)",
             "launch.carveout": "shared-memory carveout (%)", "launch.grid": "grid (blocks)",
             "scheduler": "warp scheduler", "simt": "divergence model", "sample": "sampling", "arch": "architecture"}
    if name in fixed:
        return f"{fixed[name]} [{name}]"
    if name.startswith("arch."):
        import attrs

        from .arch import ArchSpec

        cls, unit = ArchSpec, ""
        for part in name.split(".")[1:]:
            field = attrs.fields_dict(cls).get(part) if attrs.has(cls) else None
            if field is None:
                break
            unit, cls = field.metadata.get("unit", ""), field.type
            cls = cls if isinstance(cls, type) else object
        return f"{name}" + (f" ({unit})" if unit else "")
    return f"{name} (workload parameter)"


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "x"


def plot_sweep(rows: list[dict], vary: dict[str, list], metrics: list[str], kernel: str, arch: str,
               directory) -> list[Path]:
    """One PNG per metric (and the theoretical occupancy) against each varied axis, under `directory`. The other
    axes: one line per combination of their values where there are at most MAX_LINES, else their mean with the
    min-max range shaded. Failed points are gaps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .report import plot_directory, save_figure

    directory = plot_directory(directory, "--plot")
    archs = sorted({str(r["arch"]) for r in rows}) if "arch" in vary else [arch]
    on = ", ".join(archs) if len(archs) <= 4 else f"{len(archs)} archs"
    paths = []
    for metric in [m for m in metrics if m != OCCUPANCY] + [OCCUPANCY]:
        unit, scale = metric_unit(metric)
        for axis, xs in vary.items():
            others = [n for n in vary if n != axis]
            numeric = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs)
            positions = xs if numeric else list(range(len(xs)))
            fig, ax = plt.subplots(figsize=(7.5, 4.6))

            def value(row):
                v = row.get(metric)
                return float(v) * scale if isinstance(v, (int, float)) and not row.get(ERROR) else math.nan

            combos = list(itertools.product(*(vary[n] for n in others)))
            if len(combos) <= MAX_LINES:
                for combo in combos:
                    match = dict(zip(others, combo))
                    ys = []
                    for x in xs:
                        found = [r for r in rows if _key(r.get(axis)) == _key(x)
                                 and all(_key(r.get(n)) == _key(v) for n, v in match.items())]
                        ys.append(value(found[0]) if found else math.nan)
                    label = ", ".join(f"{n}={v}" for n, v in match.items()) or SHORT_NAMES.get(metric, metric)
                    ax.plot(positions, ys, marker="o", label=label)
                legend = None
            else:
                means, lows, highs = [], [], []
                for x in xs:
                    ys = [value(r) for r in rows if _key(r.get(axis)) == _key(x)]
                    ys = [y for y in ys if not math.isnan(y)]
                    means.append(sum(ys) / len(ys) if ys else math.nan)
                    lows.append(min(ys) if ys else math.nan)
                    highs.append(max(ys) if ys else math.nan)
                ax.plot(positions, means, marker="o", label=f"mean over {', '.join(others)}")
                ax.fill_between(positions, lows, highs, alpha=0.2, label="min to max")
                legend = f"{len(combos)} combinations of the other axes"
            if not numeric or len(xs) <= 12:  # the varied values themselves as ticks
                ax.set_xticks(positions)
                ax.set_xticklabels([str(x) for x in xs])
            ax.set_xlabel(axis_label(axis))
            name = PLOT_NAMES.get(metric, metric)
            ax.set_ylabel(name if not unit or unit == name else f"{name} ({unit})")
            ax.set_title(f"{kernel} on {on}: {metric}", fontsize=10)
            ax.grid(True, alpha=0.3)
            ax.legend(title=legend, fontsize=8, title_fontsize=8)
            fig.tight_layout()
            paths.append(save_figure(fig, directory / f"{_safe(metric)}__vs__{_safe(axis)}.png", "--plot", dpi=110))
    return paths


def _cell(column: str, value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        unit, scale = metric_unit(column)
        value *= scale
        if column == WALL:
            return f"{value:.2f}"
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}" if value else "0"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}" if abs(value) >= 1000 else str(value)
    return str(value)


def print_rows(rows: list[dict], columns: list[str], file=None, head: int = 30, tail: int = 10) -> None:
    """The rows as a table (the first `head` and last `tail` of a long sweep), short column names."""
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for column in columns:
        table.add_column(SHORT_NAMES.get(column, column), justify="left" if column in (LIMITER, ERROR) else "right",
                         overflow="fold")
    shown_rows = rows if len(rows) <= head + tail else rows[:head] + [None] + rows[-tail:]
    for row in shown_rows:
        if row is None:
            table.add_row(*(["..."] * len(columns)))
        else:
            table.add_row(*(_cell(c, row.get(c)) if c != ERROR else shorten(row.get(c) or "", 60).strip("'\"")
                            for c in columns))
    Console(file=file or sys.stdout, width=200).print(table)


class _CallableModule(types.ModuleType):
    """This module, callable as its `sweep` (the package exports `gpusim.sweep`; importing the submodule puts the
    module in that place)."""

    def __call__(self, *args, **kwargs):
        return sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
