"""An SM's port to L2: it moves at most `l2.sm_bytes_per_clock`; requests queue on it in order."""

from __future__ import annotations


class SmPort:
    def __init__(self, bytes_per_clock: float):
        self.rate: float = bytes_per_clock
        self.free: float = 0.0  # when it is next free
        self.bytes = 0  # moved (counted once for a multicast copy's ports)

    def send(self, nbytes: int, now: int, counted: bool = True) -> int:
        """Queue `nbytes` from `now` on; the cycle the request leaves (the queueing it met). `counted` False: one of
        more ports carrying one request to L2 (a multicast copy), its bytes counted once."""
        free = self.free
        start = free if free > now else float(now)  # (one type: compiled, a float stays unboxed)
        self.free = start + nbytes / self.rate
        if counted:
            self.bytes += nbytes
        leave = int(start)
        return leave + 1 if leave < start else leave
