"""An application's result: when each kernel, copy and all-reduce ran, on which stream, GPU, SMs and copy engine,
the total time and the critical path (`gpusim app run --json` writes `AppResult.to_dict()`).

Every activity has an `id` (k0, k1, ... kernels; c0, ... copies; a0, ... all-reduces) and `after`: the id of the
activity whose end let it start (the one before it on its stream, the one a waited event followed, or the one that
freed the SMs, copy engine or link it waited for), or null where it started as soon as it was reached. The critical
path follows `after` back from the activity that ends last.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class Activity:
    """One kernel, copy or all-reduce as it ran."""
    id: str
    kind: str  # "kernel", "copy", "allreduce"
    name: str
    stream: str
    gpu: int
    start_s: float
    end_s: float
    after: str | None
    detail: dict = attrs.field(factory=dict)  # kernel: sms, bound, ...; copy: kind, bytes, engine, ...

    def record(self) -> dict:
        return {"id": self.id, "name": self.name, "stream": self.stream, "gpu": self.gpu, **self.detail,
                "start_s": self.start_s, "end_s": self.end_s, "after": self.after}


def critical_path(activities: list[Activity]) -> list[Activity]:
    """The chain of activities that ends last, first to last: from the last to end, each one's `after`."""
    if not activities:
        return []
    by_id = {a.id: a for a in activities}
    last = max(enumerate(activities), key=lambda ia: (ia[1].end_s, -ia[0]))[1]  # the first of those ending last
    chain = [last]
    while chain[-1].after is not None:
        chain.append(by_id[chain[-1].after])
    return chain[::-1]


@attrs.frozen
class AppResult:
    """What `run_app` returns. `cache_hits` and `simulated` say how many kernel results came from the kernel cache and
    how many were simulated in this run (not part of the record: a second run of the same application gives the same
    record from the cache)."""
    name: str
    arch: str
    gpus: int
    sms_per_gpu: int
    activities: tuple
    warnings: list = attrs.field(factory=list)
    notes: list = attrs.field(factory=list)
    cache_hits: int = attrs.field(default=0, eq=False)
    simulated: int = attrs.field(default=0, eq=False)

    @property
    def time_s(self) -> float:
        """From the start to the end of the last activity."""
        return max((a.end_s for a in self.activities), default=0.0)

    def of_kind(self, kind: str) -> list[Activity]:
        return [a for a in self.activities if a.kind == kind]

    @property
    def kernels(self) -> list[Activity]:
        return self.of_kind("kernel")

    @property
    def copies(self) -> list[Activity]:
        return self.of_kind("copy")

    @property
    def allreduces(self) -> list[Activity]:
        return self.of_kind("allreduce")

    def critical_path(self) -> list[Activity]:
        return critical_path(list(self.activities))

    def to_dict(self) -> dict:
        """The JSON record: times in seconds, each activity with its id and `after`, the critical path as a list of
        {id, kind, name, stream, gpu, start_s, end_s}."""
        return {
            "name": self.name, "arch": self.arch, "gpus": self.gpus, "sms_per_gpu": self.sms_per_gpu,
            "time_s": self.time_s,
            "kernels": [a.record() for a in self.kernels],
            "copies": [a.record() for a in self.copies],
            "allreduces": [a.record() for a in self.allreduces],
            "critical_path": [{"id": a.id, "kind": a.kind, "name": a.name, "stream": a.stream, "gpu": a.gpu,
                               "start_s": a.start_s, "end_s": a.end_s} for a in self.critical_path()],
            "warnings": list(self.warnings), "notes": list(self.notes),
        }


__all__ = ["Activity", "AppResult", "critical_path"]
