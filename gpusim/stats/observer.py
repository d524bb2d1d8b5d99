"""What a run tells an observer (`gpusim.api.run(..., observer=obj)`): every event the timeline, the plots and
the per-instruction view are built from. Subclass `Observer` and override what you need; the engine calls
each method at the cycle it happens (all times in SM cycles), and never when no observer is given.

* `issued(sm, sp, warp, inst, now)`: `warp` issued `inst` on sub-partition `sp` at cycle `now`, before its
  memory access (if any) is made.
* `accessed(sm, sp, warp, inst, start, ready_at)`: the memory access of the instruction just issued was made:
  it entered its pipe at `start` and its data is ready (or its store done) at `ready_at`. The memory model's
  counters have moved by exactly this access since `issued`.
* `state(sp, warp, reason, start, end)`: `warp` spent the cycles [start, end) in stall state `reason` (an
  Nsight Compute stall reason: long_scoreboard, barrier, not_selected, math_pipe_throttle, ... ; `selected` is
  the issue cycle itself, reported through `issued`). `warp.inst` is the instruction it was waiting to issue
  (None while it drains at exit): Nsight attributes the stall to that instruction.
* `warp_started(sm, sp, warp, now)` / `warp_exited(sm, sp, warp, now)`: a warp became resident / left its slot.
* `block_started(sm, block, now)` / `block_retired(sm, block, now)`: block index `block` started on / left `sm`.

The engine imports these from here.
"""

from __future__ import annotations

from typing import Any


class Observer:
    """The events of a run; every method does nothing here."""

    def issued(self, sm: Any, sp: Any, warp: Any, inst: Any, now: int) -> None:
        pass

    def accessed(self, sm: Any, sp: Any, warp: Any, inst: Any, start: int, ready_at: int) -> None:
        pass

    def state(self, sp: Any, warp: Any, reason: str, start: int, end: int) -> None:
        pass

    def warp_started(self, sm: Any, sp: Any, warp: Any, now: int) -> None:
        pass

    def warp_exited(self, sm: Any, sp: Any, warp: Any, now: int) -> None:
        pass

    def block_started(self, sm: Any, block: int, now: int) -> None:
        pass

    def block_retired(self, sm: Any, block: int, now: int) -> None:
        pass


EVENTS = ("issued", "accessed", "state", "warp_started", "warp_exited", "block_started", "block_retired")


def complete(observer: Any) -> Any:
    """`observer` with every event method (an object that defines only some, e.g. `issued`, gets no-ops for the
    rest by being wrapped); None stays None."""
    if observer is None or all(callable(getattr(observer, name, None)) for name in EVENTS):
        return observer
    return _Filled(observer)


class _Filled(Observer):
    def __init__(self, inner: Any):
        for name in EVENTS:
            method = getattr(inner, name, None)
            if callable(method):
                setattr(self, name, method)


class Tee(Observer):
    """Several observers hearing the same run, in the order given (each event goes to those that handle it)."""

    def __init__(self, *observers: Any):
        self.observers = [complete(o) for o in observers if o is not None]
        for name in EVENTS:
            methods = [getattr(o, name) for o in self.observers if _handles(o, name)]
            if len(methods) == 1:
                setattr(self, name, methods[0])
            elif methods:
                setattr(self, name, _fan_out(methods))


def _handles(observer: Any, name: str) -> bool:
    """Whether `observer` does anything on event `name` (not Observer's no-op)."""
    return name in vars(observer) or getattr(type(observer), name) is not getattr(Observer, name)


def _fan_out(methods: list) -> Any:
    def call(*args: Any) -> None:
        for method in methods:
            method(*args)
    return call


__all__ = ["EVENTS", "Observer", "Tee", "complete"]
