"""Ctrl-C (SIGINT) while gpusim works: the one handler the command line and sweeps install.

While a simulation asks (it calls the handler every few milliseconds: `interrupt()` returns whether to stop), the
first Ctrl-C asks it to stop at its next safe point and the run returns the metrics so far; a second one, or one
while nothing asks (loading, counting, a sampled run's reduced runs, a sweep's workers), raises KeyboardInterrupt
at once, except while `write(action)` is writing a file (then right after it), so no output holds half a record or
a row.
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import time
from typing import Callable, Iterator


def ignore_sigint() -> None:
    """This process ignores Ctrl-C from now on (a worker's: its parent stops it)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def dask_setup(worker=None) -> None:
    """A Dask worker's preload calls this as it starts (gpusim.sweep.executors): the worker ignores Ctrl-C, its
    parent (the sweep) stops it; a worker restarted later ignores it too. Its own log lines are not shown: a
    point's failure reaches the sweep as that point's error, and what a worker logs as the sweep stops it (a
    heartbeat to a scheduler already gone, with its traceback) is not the user's business."""
    import logging

    for name in ("distributed", "tornado", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    if threading.current_thread() is threading.main_thread():
        ignore_sigint()


@contextlib.contextmanager
def sigint_ignored() -> Iterator[None]:
    """Ctrl-C ignored while the block runs (processes started in it inherit that), then as before (the main
    thread only: elsewhere Python cannot change it)."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        yield
    finally:
        if main:
            signal.signal(signal.SIGINT, signal.default_int_handler if previous is None else previous)


class Interrupt:
    LISTENING = 1.0  # seconds since the simulation last asked within which it counts as asking

    def __init__(self):
        self.requested = False
        self.asked = -math.inf
        self.writing, self.pending = False, False
        self.previous, self.installed = None, False

    def __call__(self) -> bool:
        """Whether the simulation should stop now (it asks: see gpusim.run's `interrupt`)."""
        self.asked = time.monotonic()
        return self.requested

    def handle(self, signum, frame) -> None:
        if self.writing:
            self.pending = True
        elif self.requested or time.monotonic() - self.asked > self.LISTENING:
            raise KeyboardInterrupt
        else:
            self.requested = True

    def write(self, action: Callable[[], None]) -> None:
        """action(), with Ctrl-C held until it returns."""
        self.writing = True
        try:
            action()
        finally:
            self.writing = False
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self.previous, self.installed = signal.signal(signal.SIGINT, self.handle), True
        return self

    def __exit__(self, *exc) -> None:
        if self.installed:  # (None: a handler not set from Python; Python's own goes back instead)
            signal.signal(signal.SIGINT, signal.default_int_handler if self.previous is None else self.previous)


__all__ = ["Interrupt", "dask_setup", "ignore_sigint", "sigint_ignored"]
