"""A DRAM channel: its share of the arch's bandwidth at the core clock, reads and writes each at the arch's
measured efficiency (dram.read_efficiency, dram.write_efficiency), served in the order they reach it."""

from __future__ import annotations


class DramChannel:
    def __init__(self, bytes_per_clock: float, read_efficiency: float, write_efficiency: float):
        self.read_rate: float = bytes_per_clock * read_efficiency
        self.write_rate: float = bytes_per_clock * write_efficiency
        self.free: float = 0.0  # when it is next free
        self.read_bytes = 0
        self.write_bytes = 0

    def read(self, nbytes: int, after: float) -> float:
        """Read `nbytes` for a request that reaches the channel at `after`; when the last byte is read."""
        free = self.free
        begin = free if free > after else after
        finish = begin + nbytes / self.read_rate
        self.free = finish
        self.read_bytes += nbytes
        return finish

    def write_back(self, nbytes: int, now: int) -> None:
        """An evicted line's dirty sectors: they take the channel's time from `now` on."""
        free = self.free
        self.free = (free if free > now else float(now)) + nbytes / self.write_rate
        self.write_bytes += nbytes
