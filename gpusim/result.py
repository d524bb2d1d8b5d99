"""A run's result: its record (the metrics, the launch, the options, what was sampled, the warnings, the physical
limits it breaks) as `gpusim.run` returns it and `gpusim run --json` writes it.

Its plots are gpusim.report.run_plots's functions of a result (`run_plots.plot_timeline(result)`).
"""

from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen
class RunResult:
    kernel: str
    arch: str
    scheduler: str
    simt: str
    seed: int
    params: dict
    launch: dict
    metrics: dict
    wall_seconds: float = attrs.field(eq=False)
    warnings: list = attrs.field(factory=list)  # one line each (e.g. a trace compiled for another arch)
    notes: list = attrs.field(factory=list)  # one line each (e.g. a command list's skipped memcpy lines)
    unknown_opcodes: dict = attrs.field(factory=dict)  # opcode -> warp-instructions run with the default timing
    kernels: list = attrs.field(factory=list)  # for a command list: each kernel's own record
    sampling: dict | None = None  # what was simulated in detail and what projected (see gpusim.sampling)
    partial: bool = False  # stopped early (interrupt): the metrics are the counters at the cycle reached
    interrupted: dict | None = None  # for a partial run: {"cycle": N, "blocks_retired": k, "blocks": M}
    sync_window: int = 1  # cycles the SMs were stepped out of time order (1: exact; see gpusim.engine.gpu)
    per_instruction: list | None = None  # --per-inst: one object per static instruction (gpusim.stats.per_instruction)
    timeline: Any = attrs.field(default=None, eq=False, repr=False)  # what a recorder saw (plots; not in the record)
    # the physical limits the reported metrics break (gpusim.stats.invariants; one line each, empty: all hold)
    violations: list = attrs.field(factory=list)
    options: dict = attrs.field(factory=dict)  # the run options, every one by name (gpusim.options.RunOptions)

    def to_dict(self) -> dict:
        """The JSON record (wall time left out, so identical runs give identical records)."""
        d = attrs.asdict(self)
        d.pop("wall_seconds")
        d.pop("timeline")
        if d["per_instruction"] is None:
            d.pop("per_instruction")
        if not d["kernels"]:
            d.pop("kernels")
        if d["sampling"] is None:
            d.pop("sampling")
        if d["interrupted"] is None:  # ("partial" is always there: false for a run that finished)
            d.pop("interrupted")
        return d


def launch_record(kernel) -> dict:
    """The record's `launch` block: the launch as simulated (after any overrides)."""
    launch = kernel.launch
    return {"grid": list(launch.grid), "block": list(launch.block), "blocks": launch.nblocks,
            "threads_per_block": launch.threads_per_block, "registers_per_thread": launch.registers_per_thread,
            "shared_memory_bytes": launch.shared_memory_bytes,
            "dynamic_shared_memory_bytes": launch.dynamic_shared_memory_bytes,
            "carveout": launch.carveout}  # percent preferred for shared memory; None: chosen automatically


__all__ = ["RunResult", "launch_record"]
