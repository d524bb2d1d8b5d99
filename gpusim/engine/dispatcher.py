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


def cluster_members(grid: tuple[int, int, int], cluster: tuple[int, int, int]) -> list[list[int]]:
    """The grid's clusters in launch order (cluster x fastest, then y, z), each its blocks' linear indices (block
    x fastest) in rank order. A grid is made of whole clusters (the workload loader checks it)."""
    gx, gy, gz = grid
    cx, cy, cz = cluster
    out = []
    for z0 in range(0, gz, cz):
        for y0 in range(0, gy, cy):
            for x0 in range(0, gx, cx):
                out.append([x + gx * (y + gy * z) for z in range(z0, z0 + cz) for y in range(y0, y0 + cy)
                            for x in range(x0, x0 + cx)])
    return out


class Dispatcher:
    def __init__(self, nblocks: int, blocks_per_sm: int, sm_order: list, launch_cycles: int, stagger: int = 0,
                 clusters: list[list[int]] | None = None, gpcs: list[list] | None = None, retire_cycles: int = 0):
        """`launch_cycles`: from placing a block on an SM to its first issue; `retire_cycles`: from a block's exit to
        the dispatcher placing the next block (a block that replaces a retired one pays both).
        `stagger`: the blocks placed at the launch start spread over this many cycles instead of at once (a
        sampled run uses it to stand for waves that start as blocks retire, out of step; see gpusim.sampling).
        `clusters` (with `gpcs`, the SMs of each GPC): a cluster's blocks start together on distinct SMs of one
        GPC, each with a free block slot; a cluster that fits no GPC waits until retirements make room."""
        self.nblocks = nblocks
        self.blocks_per_sm = blocks_per_sm
        self.sm_order = sm_order
        self.launch_cycles = launch_cycles
        self.retire_cycles = retire_cycles
        self.stagger = stagger
        self.next_block = 0
        self.placements = [0] * len(sm_order)  # blocks each SM ran
        self.clusters = clusters
        self.gpcs = gpcs or [sm_order]
        self.next_cluster = 0
        self.next_gpc = 0  # the GPC tried first for the next cluster (clusters spread over GPCs in turn)
        self.cluster_wait_cycles = 0  # cycles a cluster was ready to start but no GPC had room for it
        self.waiting_since: int | None = None
        self.launch_last_start = -1  # the cycle the last block placed at the launch starts (its warps arrive)
        self.first_retirement: int | None = None  # the cycle the first block retired

    def launch_at_once(self) -> bool:
        """Whether every block placed at the launch was running at one moment: the last of them started before the
        first block retired (a staggered run too short for that holds its first wave at no moment: all ramp)."""
        return self.first_retirement is None or self.launch_last_start < self.first_retirement

    def start(self, now: int = 0) -> None:
        """Fill every SM, one block per SM per round, until the launch is placed or every SM is full."""
        if self.clusters is not None:
            self.place_clusters(now, at_launch=True)
            return
        placed = True
        while placed and self.next_block < self.nblocks:
            placed = False
            for sm in self.sm_order:
                if self.next_block >= self.nblocks:
                    break
                if sm.resident_blocks < self.blocks_per_sm:
                    at = now + self.delay(self.next_block)
                    self.place(sm, at)
                    self.launch_last_start = max(self.launch_last_start, at + self.launch_cycles)
                    placed = True

    def delay(self, index: int) -> int:
        """Cycles the index-th block (or cluster) placed at the launch starts late: frac(index * STEP) of the
        stagger."""
        return int((index * STAGGER_STEP) % 1.0 * self.stagger) if self.stagger else 0

    def place(self, sm, now: int) -> None:
        sm.reserve_block(self.next_block, now + self.launch_cycles)
        self.placements[sm.index] += 1
        self.next_block += 1

    def block_retired(self, sm, now: int) -> None:
        """A block left `sm`: once the retirement reaches the dispatcher (`retire_cycles` later) the next block goes
        there (every other SM is still full); with clusters, the next clusters go wherever a GPC now has room."""
        if self.first_retirement is None:
            self.first_retirement = now
        at = now + self.retire_cycles
        if self.clusters is not None:
            self.place_clusters(at)
        elif self.next_block < self.nblocks:
            self.place(sm, at)

    def place_clusters(self, now: int, at_launch: bool = False) -> None:
        """Start clusters in order while one GPC has room for the next (in-order: a later, smaller one does not
        overtake it). Only the clusters placed at the launch (`at_launch`) start late by the stagger: a cluster
        placed as blocks retire starts when it finds room, as a block does."""
        clusters = self.clusters
        assert clusters is not None
        while self.next_cluster < len(clusters):
            blocks = clusters[self.next_cluster]
            sms = self.room(len(blocks))
            if sms is None:
                if self.waiting_since is None:
                    self.waiting_since = now
                return
            if self.waiting_since is not None:
                self.cluster_wait_cycles += now - self.waiting_since
                self.waiting_since = None
            delay = self.delay(self.next_cluster) if at_launch else 0
            if at_launch:
                self.launch_last_start = max(self.launch_last_start, now + delay + self.launch_cycles)
            for sm, block in zip(sms, blocks):
                sm.reserve_block(block, now + delay + self.launch_cycles)
                self.placements[sm.index] += 1
            self.next_cluster += 1
            self.next_block += len(blocks)

    def room(self, size: int) -> list | None:
        """`size` distinct SMs of one GPC with a free block slot (the emptiest first, then by index), trying the
        GPCs in turn from the one after the last used; None when no GPC has them."""
        count = len(self.gpcs)
        for k in range(count):
            g = (self.next_gpc + k) % count
            free = [sm for sm in self.gpcs[g] if sm.resident_blocks < self.blocks_per_sm]
            if len(free) >= size:
                free.sort(key=lambda sm: (sm.resident_blocks, sm.index))
                self.next_gpc = (g + 1) % count
                return free[:size]
        return None

    @property
    def waves(self) -> float:
        return self.nblocks / (self.blocks_per_sm * len(self.sm_order))
