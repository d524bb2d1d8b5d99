"""The GPU clock's calendar: SMs come off it by cycle, and those due at the same cycle in the order they were
scheduled, as a list per cycle with a heap of the cycles would give them (the rule SMs meet the shared units by)."""

from __future__ import annotations

from heapq import heappop, heappush

from hypothesis import given, settings
from hypothesis import strategies as st

from gpusim.engine.calendar import Calendar


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
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 40), st.integers(0, 131)), max_size=300))
def test_the_calendar_gives_sms_by_cycle_and_then_by_the_order_they_were_scheduled(steps):
    calendar, model = Calendar(), _ListsPerCycle()
    for take, cycle, index in steps:
        if take and len(calendar):
            cycle = calendar.earliest()
            assert (cycle, calendar.pop()) == model.pop()
        else:
            calendar.push(cycle, index)
            model.push(cycle, index)
    while len(calendar):
        cycle = calendar.earliest()
        assert (cycle, calendar.pop()) == model.pop()
    assert not model.cycles
