"""Synthetic kernel workloads: the YAML format, the expression evaluator, and lazy per-warp streams."""

from .kernel import Kernel, Launch, load_workload, parse_overrides
from .mix import Mix, kernel_mix
from .stream import WarpInst, warp_stream
from .yamlio import WorkloadError

__all__ = ["Kernel", "Launch", "Mix", "WarpInst", "WorkloadError", "kernel_mix", "load_workload",
           "parse_overrides", "warp_stream"]
