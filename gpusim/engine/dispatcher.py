"""The CTA (thread block) dispatcher: spreads blocks over GPCs and SMs, refills an SM when a block retires."""

from __future__ import annotations


def interleave_by_gpc(sms_by_gpc: list[list]) -> list:
    """SMs ordered GPC-first: gpc0.sm0, gpc1.sm0, ..., gpc0.sm1, ... (how the hardware spreads a launch)."""
    order = []
    depth = max((len(g) for g in sms_by_gpc), default=0)
    for i in range(depth):
        for gpc in sms_by_gpc:
            if i < len(gpc):
                order.append(gpc[i])
    return order


STAGGER_STEP = 0.6180339887498949  # block b starts frac(b * STEP) of the stagger late: spread evenly, no pattern


class Dispatcher:
    def __init__(self, nblocks: int, blocks_per_sm: int, sm_order: list, launch_cycles: int, stagger: int = 0):
        """`stagger`: the blocks placed at the launch start spread over this many cycles instead of at once (a
        sampled run uses it to stand for waves that start as blocks retire, out of step; see gpusim.sampling)."""
        self.nblocks = nblocks
        self.blocks_per_sm = blocks_per_sm
        self.sm_order = sm_order
        self.launch_cycles = launch_cycles
        self.stagger = stagger
        self.next_block = 0
        self.placements = [0] * len(sm_order)  # blocks each SM ran

    def start(self, now: int = 0) -> None:
        """Fill every SM, one block per SM per round, until the launch is placed or every SM is full."""
        placed = True
        while placed and self.next_block < self.nblocks:
            placed = False
            for sm in self.sm_order:
                if self.next_block >= self.nblocks:
                    break
                if sm.resident_blocks < self.blocks_per_sm:
                    delay = int((self.next_block * STAGGER_STEP) % 1.0 * self.stagger) if self.stagger else 0
                    self.place(sm, now + delay)
                    placed = True

    def place(self, sm, now: int) -> None:
        sm.reserve_block(self.next_block, now + self.launch_cycles)
        self.placements[sm.index] += 1
        self.next_block += 1

    def block_retired(self, sm, now: int) -> None:
        """A block left `sm`: the next block goes there (every other SM is still full)."""
        if self.next_block < self.nblocks:
            self.place(sm, now)

    @property
    def waves(self) -> float:
        return self.nblocks / (self.blocks_per_sm * len(self.sm_order))
