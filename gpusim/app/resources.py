"""What the commands of an application share, as simpy resources: each GPU's SMs, its copy engines and the
directions of its links. Each remembers the activity that last gave it back, so a command that waited for it can
say what it started after.

The SM pool: a kernel asks for the SMs its grid fills in one wave; it is granted as many of them as are free, at
least one (it waits for one), in the order kernels asked, and keeps them until it ends: a kernel does not grow once
started, and the blocks of a later kernel take the SMs an earlier one leaves.
"""

from __future__ import annotations

from collections import deque

import simpy


class SmPool:
    """A GPU's SMs: a simpy Container of `size` SMs handed out whole to kernels in the order they asked."""

    def __init__(self, env: simpy.Environment, size: int):
        self.env, self.size = env, size
        self.free = simpy.Container(env, capacity=size, init=size)
        self.waiting: deque = deque()  # (event, SMs wanted), oldest first
        self.released_by: str | None = None

    def acquire(self, wanted: int) -> simpy.Event:
        """An event that succeeds with the SMs granted: min(wanted, free), at least 1, after the kernels ahead."""
        event = self.env.event()
        self.waiting.append((event, wanted))
        self._grant()
        return event

    def release(self, sms: int, by: str) -> None:
        self.free.put(sms)  # a Container put within its capacity takes effect at once
        self.released_by = by
        self._grant()

    def _grant(self) -> None:
        while self.waiting and self.free.level > 0:
            event, wanted = self.waiting.popleft()
            granted = min(wanted, int(self.free.level))
            self.free.get(granted)  # at once: the level holds it
            event.succeed(granted)


class CopyEngines:
    """A GPU's copy engines: a simpy Resource of `count` engines; `take` and `give_back` say which one a copy runs on
    (the lowest free one), for the timeline's tracks."""

    def __init__(self, env: simpy.Environment, count: int):
        self.resource = simpy.Resource(env, capacity=count)
        self.busy = [False] * count
        self.released_by: str | None = None

    def take(self) -> int:
        engine = self.busy.index(False)
        self.busy[engine] = True
        return engine

    def give_back(self, engine: int, by: str) -> None:
        self.busy[engine] = False
        self.released_by = by


class Links:
    """Link directions, each a simpy Resource carrying one transfer at a time (two copies the same way take the sum
    of their times, as sharing its bandwidth would; opposite directions overlap), made when first used."""

    def __init__(self, env: simpy.Environment):
        self.env = env
        self.resources: dict[tuple[str, int], simpy.Resource] = {}
        self.released_by: dict[tuple[str, int], str] = {}

    def get(self, key: tuple[str, int]) -> simpy.Resource:
        if key not in self.resources:
            self.resources[key] = simpy.Resource(self.env, capacity=1)
        return self.resources[key]

    def acquire(self, keys: list[tuple[str, int]]):
        """A process step (use with `yield from`): hold every link of `keys` (taken in sorted order, so two
        transfers never hold one each of the other's); returns (the requests, the activities it waited for)."""
        requests, waited = [], []
        for key in sorted(keys):
            asked = self.env.now
            request = self.get(key).request()
            yield request
            requests.append((key, request))
            if self.env.now > asked and key in self.released_by:
                waited.append(self.released_by[key])
        return requests, waited

    def release(self, requests: list, by: str) -> None:
        for key, request in requests:
            self.resources[key].release(request)
            self.released_by[key] = by


__all__ = ["CopyEngines", "Links", "SmPool"]
