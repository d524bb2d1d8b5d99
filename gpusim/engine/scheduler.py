"""Warp-scheduling policies: small strategy objects, one per sub-partition, chosen by name.

A policy sees the candidate warps (those whose operands are ready; their pipe may still be busy), oldest first
(in warp-slot order for a policy whose `ready_by_slot` is True),
and returns them in the order it prefers; the sub-partition issues the first whose pipe is free. Policies need only each
warp's `slot` (its warp-slot index in the SM) and `age` (launch order, smaller = older), so they are testable
without the engine. Add one by subclassing `Policy` (or any built-in policy) and registering it with
`register_policy`. The module is compiled with the engine (gpusim/native.py); the classes allow interpreted
subclasses, so a user's policy needs no compiler.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from mypy_extensions import mypyc_attr


def age(warp: Any) -> int:
    """Sort key: launch order (smaller = older)."""
    return warp.age


def slot(warp: Any) -> int:
    """Sort key: warp slot in the SM."""
    return warp.slot



@mypyc_attr(allow_interpreted_subclasses=True)
class Policy:
    name = "policy"
    ready_by_slot = False  # candidates come oldest first; True: in warp-slot order instead

    def order(self, candidates: list[Any], now: int) -> Sequence[Any]:
        raise NotImplementedError

    def issued(self, warp: Any, now: int) -> None:
        """Called after `warp` issues."""

    def stalled_long(self, warp: Any) -> None:
        """Called when an issued warp must wait for a long-latency (global memory) result."""

    def forget(self, warp: Any) -> None:
        """Called when `warp` exits."""


@mypyc_attr(allow_interpreted_subclasses=True)
class LooseRoundRobin(Policy):
    """lrr: start after the warp slot that issued last and go round."""

    name = "lrr"
    ready_by_slot = True  # the sub-partition keeps its ready warps in slot order: the round is a rotation

    def __init__(self, slots: int):
        self.slots: int = slots
        self.last: int = -1

    def order(self, candidates: list[Any], now: int) -> Sequence[Any]:
        # the engine does not call this for lrr itself: SubPartition.cycle rotates its slot-ordered ready list in
        # place the same way (this serves subclasses and callers outside the engine)
        count = len(candidates)
        if count < 2:
            return candidates
        last = self.last
        first = 0  # the first candidate after the slot that issued last
        while first < count and candidates[first].slot <= last:
            first += 1
        if first == 0 or first == count:
            return candidates
        return candidates[first:] + candidates[:first]

    def issued(self, warp: Any, now: int) -> None:
        self.last = warp.slot


@mypyc_attr(allow_interpreted_subclasses=True)
class GreedyThenOldest(Policy):
    """gto: keep issuing from the same warp while it can; otherwise the oldest ready warp."""

    name = "gto"

    def __init__(self, slots: int):
        self.greedy: Any = None

    def order(self, candidates, now):
        greedy = self.greedy
        if greedy is None or candidates[0] is greedy or greedy not in candidates:
            return candidates  # already oldest first
        ordered = candidates[:]
        ordered.remove(greedy)
        ordered.insert(0, greedy)
        return ordered

    def issued(self, warp, now):
        self.greedy = warp


@mypyc_attr(allow_interpreted_subclasses=True)
class OldestFirst(Policy):
    """oldest_first: always the oldest ready warp."""

    name = "oldest_first"

    def __init__(self, slots: int):
        pass

    def order(self, candidates, now):
        return candidates  # the sub-partition keeps them oldest first


@mypyc_attr(allow_interpreted_subclasses=True)
class TwoLevel(Policy):
    """two_level: round-robin over a small active set; a warp that waits on global memory is moved to the
    pending set, and the oldest pending warp takes its place (Narasiman et al., MICRO 2011)."""

    name = "two_level"
    active_size = 4

    def __init__(self, slots: int):
        self.slots = slots
        self.active: list[Any] = []
        self.last = -1

    def order(self, candidates, now):
        active = self.active
        ready_active = [w for w in candidates if w in active]
        pending = sorted((w for w in candidates if w not in active), key=lambda w: w.age)
        for w in pending:  # fill free active places, oldest first
            if len(active) >= self.active_size:
                break
            active.append(w)
            ready_active.append(w)
        if not ready_active and pending:  # nothing active can issue: the oldest pending warp replaces one
            active.pop(0)
            active.append(pending[0])
            ready_active.append(pending[0])
        last, n = self.last, self.slots
        return sorted(ready_active, key=lambda w: (w.slot - last - 1) % n)

    def issued(self, warp, now):
        self.last = warp.slot

    def stalled_long(self, warp):
        if warp in self.active:
            self.active.remove(warp)

    def forget(self, warp):
        if warp in self.active:
            self.active.remove(warp)


_POLICIES: dict[str, Callable[[int], Policy]] = {
    "lrr": LooseRoundRobin, "gto": GreedyThenOldest, "oldest_first": OldestFirst, "two_level": TwoLevel,
}


# The default policy. lrr: an H200 running 32 warps of conflict-free shared loads (validation/results,
# smem_cycles_per_warp_load_by_stride) keeps warp 0 busy for the whole SM's work: 1.00 cycle per warp-load timed
# by warp 0, so every warp progressed evenly, as under round robin; under gto the oldest warps finish first and
# the rest run with too few warps to fill the pipe (1.09). Accel-Sim's tuned configurations for V100, RTX 2060,
# RTX 3070, A100 and H100 use lrr as well.
DEFAULT_POLICY = "lrr"


def register_policy(name: str, factory: Callable[[int], Policy]) -> None:
    """Make `--scheduler NAME` build `factory(warp_slots)` for every sub-partition."""
    _POLICIES[name] = factory


def policy_names() -> list[str]:
    return sorted(_POLICIES)


def make_policy(name: str, slots: int) -> Policy:
    factory: Any = _POLICIES.get(name)  # what it makes is checked below, with one clear error
    if factory is None:
        from ..errors import GpusimError

        raise GpusimError(f"unknown scheduler '{name}': expected one of {', '.join(policy_names())}")
    policy = factory(slots)
    if not isinstance(policy, Policy):
        from ..errors import GpusimError

        raise GpusimError(f"scheduler '{name}': its factory made a {type(policy).__name__}, expected a subclass of "
                          "gpusim.engine.scheduler.Policy")
    return policy
