"""Memory subsystem models behind one interface: `access(sm_index, inst, now) -> MemoryResult`."""

from .interface import FixedLatencyMemory, MemoryResult, MemorySystem

__all__ = ["FixedLatencyMemory", "MemoryResult", "MemorySystem"]
