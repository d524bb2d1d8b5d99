"""The GPC's SM-to-SM network, which distributed shared memory crosses between the SMs of a cluster.

Each SM has one port to it that sends and one that receives, each moving at most `sm_to_sm.sm_bytes_per_clock`;
a transfer takes both its sender's and its receiver's port, and its data is there the network's latency after its
last byte crossed. An arch without `memory.sm_to_sm` has none (rate 0).
"""

from __future__ import annotations

from typing import Any


class SmToSmNetwork:
    def __init__(self, network: Any, sms: int):
        """`network`: the arch's memory.sm_to_sm (None: no network)."""
        self.latency: int = network.latency if network is not None else 0
        self.rate: float = float(network.sm_bytes_per_clock) if network is not None else 0.0
        self.out_free: list[float] = [0.0] * sms  # each SM's port, sending: when it is next free
        self.in_free: list[float] = [0.0] * sms  # ... and receiving

    def cross(self, send: int, receive: int, nbytes: int, now: int) -> int:
        """Queue `nbytes` from SM `send` to SM `receive`, from `now` on; the cycle its last byte has crossed."""
        out_free, in_free = self.out_free[send], self.in_free[receive]
        start = out_free if out_free > in_free else in_free
        if now > start:
            start = float(now)  # (a float: the compiled engine keeps one representation per variable)
        finish = start + nbytes / self.rate
        self.out_free[send] = self.in_free[receive] = finish
        crossed = int(finish)
        if crossed < finish:
            crossed += 1
        return crossed
