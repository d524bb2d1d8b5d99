"""Accel-Sim / NVBit SASS traces as a second front end to the engine (the first is the YAML workloads)."""

from .commands import Command, is_command_list, is_trace, read_command_list
from .kernel import TraceKernel, TraceStreams, load_trace
from .reader import TraceError, TraceFile, TraceHeader

__all__ = ["Command", "TraceError", "TraceFile", "TraceHeader", "TraceKernel", "TraceStreams", "is_command_list",
           "is_trace", "load_trace", "read_command_list"]
