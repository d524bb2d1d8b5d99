"""The GPU clock's calendar: SMs come off it by cycle, and those due at the same cycle in the order they were
scheduled, as a list per cycle with a heap of the cycles would give them (the rule SMs meet the shared units by),
also across the renumbering of its orders and where SMs are scheduled as the clock schedules them (at the cycle
being stepped, the next, or a few later: the calendar's lists beside its heap); a cycle beyond its range is an error, not a wrapped key."""

from __future__ import annotations

from heapq import heappop, heappush

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpusim.engine.calendar import LAST_CYCLE, Calendar


class _ListsPerCycle:
    """The plain model: a list of SM indices per cycle, in the order scheduled, and a heap of the cycles."""

    def __init__(self):
        self.due, self.cycles = {}, []

    def push(self, cycle, index):
        if cycle not in self.due:
            self.due[cycle] = []
            heappush(self.cycles, cycle)
        self.due[cycle].append(index)

    def pop(self):
        cycle = self.cycles[0]
        index = self.due[cycle].pop(0)
        if not self.due[cycle]:
            del self.due[cycle]
            heappop(self.cycles)
        return cycle, index


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["push", "pop", "renumber"]), st.integers(0, 40), st.integers(0, 131)),
                max_size=300))
def test_the_calendar_gives_sms_by_cycle_and_then_by_the_order_they_were_scheduled(steps):
    calendar, model = Calendar(), _ListsPerCycle()
    for what, cycle, index in steps:
        if what == "renumber":  # (what a run does when its order counter runs out of bits)
            calendar.renumber()
        elif what == "pop" and len(calendar):
            cycle = calendar.earliest()
            assert (cycle, calendar.pop()) == model.pop()
        else:
            calendar.push(cycle, index)
            model.push(cycle, index)
    while len(calendar):
        cycle = calendar.earliest()
        assert (cycle, calendar.pop()) == model.pop()
    assert not model.cycles


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["push", "pop", "pop", "renumber"]), st.sampled_from([0, 0, 1, 1, 1, 2, 7]),
                          st.integers(0, 131)), max_size=400))
def test_sms_stepped_again_at_the_cycle_or_the_next_come_off_as_the_plain_model_gives_them(steps):
    # the clock's own pattern: an SM is scheduled again at the cycle being stepped, the next one (a busy SM), or
    # a few later, where the calendar keeps its two lists beside the heap
    calendar, model, now = Calendar(), _ListsPerCycle(), 0
    for what, ahead, index in steps:
        if what == "renumber":
            calendar.renumber()
        elif what == "pop" and len(calendar):
            now = calendar.earliest()
            assert (now, calendar.pop()) == model.pop()
        else:
            calendar.push(now + ahead, index)
            model.push(now + ahead, index)
    while len(calendar):
        cycle = calendar.earliest()
        assert (cycle, calendar.pop()) == model.pop()


def test_a_cycle_beyond_the_calendars_range_is_an_error():
    calendar = Calendar()
    calendar.push(LAST_CYCLE, 1)
    with pytest.raises(OverflowError, match="beyond the calendar's range"):
        calendar.push(LAST_CYCLE + 1, 2)
    assert (calendar.earliest(), calendar.pop()) == (LAST_CYCLE, 1)


def test_a_sub_partitions_sleepers_wake_by_cycle_then_in_the_order_they_slept_across_a_renumbering():
    """The sleeping warps' heap (a key per warp: wake-up cycle, order slept, retire) gives them back by cycle and,
    at equal cycles, in the order they went to sleep; renumbering the orders (what a long run does when they run
    out of bits) keeps that order; a cycle beyond the keys' range is an error, not a wrapped key."""
    from gpusim import load_arch
    from gpusim.api import load_kernel
    from gpusim.engine.gpu import build_gpu
    from gpusim.engine.sm import Block
    from gpusim.engine.subpartition import LAST_WAKE
    from gpusim.engine.warp import Warp

    from tests.conftest import ROOT

    kernel = load_kernel(ROOT / "workloads" / "vecadd.yaml", {"n": 4096})
    sp = build_gpu(load_arch("h100"), kernel, sms=1, stream_factory=kernel.streams()).sms[0].sps[0]

    block = Block(0)
    warps = [Warp(slot, block, slot, sp, slot, slot, None) for slot in range(0, 64, 4)]
    wakes = [30, 10, 30, 20, 10, 30, 20, 10]
    for warp, wake in zip(warps, wakes):
        sp.push_sleeper(warp, wake, 0)
    sp.renumber_sleepers()
    for warp, wake in zip(warps[8:], wakes):
        sp.push_sleeper(warp, wake, 0)
    expected = sorted(range(16), key=lambda i: (wakes[i % 8], i))
    assert [sp.pop_sleeper() for _ in range(16)] == [warps[i] for i in expected]
    with pytest.raises(OverflowError, match="beyond a sleeping warp's range"):
        sp.push_sleeper(warps[0], LAST_WAKE + 1, 0)
