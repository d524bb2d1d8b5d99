"""The one process pool gpusim uses: a sampled run's reduced runs (gpusim.sampling.parallel), a sweep's points
(gpusim.sweep.executors) and the calibration's simulations (gpusim.calibrate.validate) run on it.

Workers are forked where the platform can (they inherit what the parent loaded: the kernel, the arch, a task
closure), spawned otherwise; they ignore SIGINT, so Ctrl-C reaches the parent alone, which stops them
(`close_pool(..., abandon=True)` terminates the running ones).
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing

from .interrupt import ignore_sigint


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def process_pool(jobs: int) -> cf.ProcessPoolExecutor:
    """A pool of `jobs` worker processes (forked where possible; see the module)."""
    context = multiprocessing.get_context("fork" if can_fork() else None)
    return cf.ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=ignore_sigint)


def pool_map(fn, items: list, jobs: int) -> list:
    """[fn(item) for item in items] on a pool of `jobs` processes (`fn` a module-level function, picklable where the
    workers are spawned); interrupted, the workers are terminated."""
    executor = process_pool(jobs)
    finished = False
    try:
        results = list(executor.map(fn, items))
        finished = True
        return results
    finally:
        close_pool(executor, abandon=not finished)


def close_pool(executor: cf.ProcessPoolExecutor, abandon: bool = False) -> None:
    """Shut the pool down: after its work (abandon False), or at once, its running workers terminated (an
    interrupt: their work is dropped)."""
    if not abandon:
        executor.shutdown(wait=True)
        return
    processes = list((getattr(executor, "_processes", None) or {}).values())
    executor.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(5)


__all__ = ["can_fork", "close_pool", "pool_map", "process_pool"]
