"""The reduced runs of a sampling plan, on several cores where the machine has them.

The runs are independent simulations, each seeded as the full run is, so their results (and the projection) are
the same whether they run one after another or side by side. Workers are forked (the loaded kernel and arch are
inherited, not pickled) on gpusim.pool's pool; they ignore SIGINT, so Ctrl-C reaches the parent alone, which stops
them. Where fork is not available, or one core is, the runs go one after another in this process.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
from typing import Any, Callable

from ..pool import can_fork, close_pool, process_pool

_TASK: Callable[[int], Any] | None = None  # what a forked worker runs (inherited from the parent)
_DONE: Any = None  # (warp-instructions, blocks, furthest cycle) the workers have simulated so far (shared, for the
# parent's progress)


_JOBS_LIMIT: int | None = None  # see limit_jobs


def limit_jobs(jobs: int | None) -> None:
    """At most `jobs` workers for this process's reduced runs (None: one per core). A sweep's workers, which
    already share the cores out (gpusim.sweep), run their sampled points' reduced runs one after another."""
    global _JOBS_LIMIT
    _JOBS_LIMIT = jobs


def default_jobs(runs: int) -> int:
    """One worker per core this process may use, at most one per run (and at most limit_jobs's)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    if _JOBS_LIMIT is not None:
        cores = min(cores, _JOBS_LIMIT)
    return max(1, min(cores, runs))


class RunsInterrupted(Exception):
    """The parent was asked to stop (Ctrl-C) while the workers ran; they have been stopped."""


def _call(index: int):
    assert _TASK is not None
    return _TASK(index)


def report_done(warp_insts: int, blocks: int, cycle: int = 0) -> None:
    """From a worker: `warp_insts` more simulated and `blocks` more retired, its run at simulated `cycle` (the
    parent's progress reads the sums and the furthest cycle any run has reached)."""
    if _DONE is not None:
        with _DONE.get_lock():
            _DONE[0] += warp_insts
            _DONE[1] += blocks
            if cycle > _DONE[2]:
                _DONE[2] = cycle


def map_runs(task: Callable[[int], Any], count: int, jobs: int, order: list[int],
             on_wait: Callable[[int, int, int], bool] | None = None) -> list | None:
    """[task(0), ..., task(count - 1)], `order` saying which to start first (the longest). `on_wait(insts, blocks,
    cycle)`, if given, is called a few times a second with the warp-instructions simulated and blocks retired so far
    and the furthest simulated cycle a run has reached; when it returns True the workers are stopped and
    RunsInterrupted raised. None: this machine runs them one after
    another (one core, or no fork): the caller does."""
    global _TASK, _DONE
    if jobs <= 1 or count <= 1 or not can_fork() or multiprocessing.current_process().daemon:
        return None  # the caller runs them in this process (a daemonic worker may not have children)
    _TASK, _DONE = task, multiprocessing.get_context("fork").Array("q", 3)
    results: list = [None] * count
    executor = process_pool(min(jobs, count))  # (its workers fork after _TASK is set: they inherit it)
    finished = False
    try:
        pending = {executor.submit(_call, i): i for i in order}
        while pending:
            done, _ = cf.wait(pending, timeout=0.1, return_when=cf.FIRST_COMPLETED)
            for future in done:
                results[pending.pop(future)] = future.result()
            if pending and on_wait is not None and on_wait(_DONE[0], _DONE[1], _DONE[2]):
                raise RunsInterrupted
        finished = True
    finally:
        close_pool(executor, abandon=not finished)
        _TASK, _DONE = None, None
    return results
