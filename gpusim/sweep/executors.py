"""Who simulates a sweep's points: this process (one after another), a pool of forked processes
(gpusim.pool, shared with sampled runs) or a Dask distributed cluster. Each yields (point index, row) as points
finish and (None, None) a few times a second while waiting, for the progress.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import threading
from typing import Iterator

from ..errors import GpusimError, one_line, shown
from ..interrupt import sigint_ignored
from ..pool import close_pool, process_pool
from .point_run import run_point
from .points import ERROR, LIMITER, OCCUPANCY, WALL


def serial_rows(tasks: list[dict]) -> Iterator[tuple[int | None, dict | None]]:
    for task in tasks:
        yield task["index"], run_point(task)


def _failed(task: dict, message: str) -> dict:
    row = dict(task["values"])
    row.update({m: None for m in task["metrics"]})
    row.update({OCCUPANCY: None, LIMITER: "", ERROR: one_line(message), WALL: 0.0})
    return {c: row.get(c) for c in task["columns"]}


def pool_rows(tasks: list[dict], jobs: int) -> Iterator[tuple[int | None, dict | None]]:
    """The points on gpusim.pool's pool of `jobs` processes; (None, None) a few times a second while waiting, for
    the progress."""
    executor = process_pool(jobs)
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
        close_pool(executor, abandon=not finished)  # interrupted: the running points are abandoned


def dask_rows(tasks: list[dict], jobs: int, address: str) -> Iterator[tuple[int | None, dict | None]]:
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
    try:
        with sigint_ignored():
            cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=None,
                                   host="127.0.0.1", silence_logs=logging.CRITICAL, preload=[_IGNORE_SIGINT])
            return Client(cluster), cluster
    except Exception as exc:
        if cluster is not None:
            _close_quietly(cluster)
        raise GpusimError(f"--executor dask: cannot start a local Dask cluster of {jobs} workers "
                          f"({_dask_failure(exc)})") from None


# a worker preload (the text of a script, run as the worker starts): a worker restarted later ignores Ctrl-C too
_IGNORE_SIGINT = "import gpusim.interrupt\ngpusim.interrupt.dask_setup()\n"


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


__all__ = ["JOBS_PER_CORE", "check_jobs", "dask_rows", "max_jobs", "pool_rows", "serial_rows"]
