"""The register -> L1 -> L2 -> DRAM model behind the engine's memory interface.

* Global and local loads are coalesced into 32-byte sectors (coalescer.py). Each SM's L1 is sectored,
  set-associative and LRU, its capacity the unified L1 + shared memory minus the launch's shared-memory carveout.
  A miss takes an MSHR entry until its data arrives (mshr.py); a request for a sector already in flight merges
  with that entry (counted as merged, never as a hit). Stores are write-through and do not allocate in L1;
  atomics are performed at L2, where updates to one address serialize.
* Each SM has one L1TEX data stage, `banks x bank_width` bytes (128 B) per clock, shared by its four
  sub-partitions: shared-memory wavefronts (shared_banks.py) and global accesses (one wavefront per 128-byte
  line) queue for it in order. Each SM's port to L2 moves at most `l2.sm_bytes_per_clock`.
* L2 is split into slices by an address hash (l2_tags.py); each slice serves its share of the L2 bandwidth and queues
  what arrives faster. It is sectored, set-associative, LRU, write-back: dirty sectors cost DRAM writes when
  evicted, and what is still dirty when the kernel ends is reported (gpusim__l2_dirty_bytes_at_end), not
  written. A sector in flight from DRAM is pending: a second request for it merges and waits for the data.
* DRAM is a set of channels sharing the arch's bandwidth at the core clock, each with its own queue; reads and
  writes reach the arch's measured efficiency (dram.read_efficiency, dram.write_efficiency).
* Distributed shared memory (`dsmem`): a block's access to the shared memory of another block of its cluster
  moves 32-byte sectors over the GPC's SM-to-SM network (sm_network.py); the other SM's banks serve it on its
  data stage.
* A sampled run may keep a shadow L2 (`use_shadow_l2`, shadow_l2.py), which counts the DRAM traffic an L2 of
  another size would make.
* With `--sms N` below the chip's SM count, the L2 and DRAM bandwidths are scaled to the SM share (the other
  SMs are taken to be as busy): N/SMs of the slices and channels (at least one each) at their full rates.
  Capacities and latencies stay those of the whole chip.

Latencies are the arch's load-to-use figures for each level (what pointer-chase benchmarks measure), plus any
queueing and transfer time. Each unit is modelled by the cycle it is next free: a request starts at the later of
its arrival and that cycle, so no unit serves a request before it arrives or exceeds its rate. Requests reach
the shared units (L2 slices, DRAM channels) nearly in time order: out of it by as long as an SM's load/store queue
holds them (and a DRAM read by its L2 slice's queue), and by up to the synchronisation window in a
lax-synchronised run (gpusim.engine.gpu); one that comes after a request made later waits behind it.
"""

from __future__ import annotations

from typing import Any

from ..analytic.coalesce import active_lanes
from ..errors import GpusimError
from ..isa.inst import WarpInst, lane_offsets
from .cache import SectoredCache
from .coalescer import Coalescer, hottest_address_per_line, local_addresses
from .dram_channel import DramChannel
from .l1 import L1
from .l2_contents import dirty_bytes_in, warm_fill
from .l2_slice import L2Slice
from .l2_tags import line_hash
from .levels import L1 as AT_L1
from .metrics import hierarchy_metrics
from .shadow_l2 import ShadowL2
from .shared_banks import SharedMemoryBanks
from .sm_network import SmToSmNetwork
from .sm_port import SmPort


class MemoryHierarchy:
    """The units, wired from the arch: per SM an L1 (l1.py) and a port to L2 (sm_port.py); the L2 slices
    (l2_slice.py), the DRAM channels (dram_channel.py) and the SM-to-SM network (sm_network.py). Each owns its state
    and counters; the hierarchy routes a warp's access through them and counts its requests."""

    def __init__(self, spec: Any, sms: int, l1_bytes: int):
        mem = spec.memory
        share = min(1.0, sms / spec.sms)  # of the chip's L2 and DRAM bandwidth (see the module docstring)
        self.sector: int = mem.l1.sector_bytes
        self.sectors_per_line: int = mem.l1.line_bytes // mem.l1.sector_bytes
        # sectors set in a line's sector mask, by mask: a table the compiled engine indexes natively
        widest = max(self.sectors_per_line, mem.l2.line_bytes // mem.l2.sector_bytes)
        self.sector_count: list[int] = [m.bit_count() for m in range(1 << widest)]
        self.line_bytes: int = mem.l1.line_bytes
        self.l1_hit_latency: int = mem.l1.hit_latency
        self.shared_latency: int = mem.l1.shared_latency
        self.l2_hit_latency: int = mem.l2.hit_latency
        self.dram_latency: int = mem.dram.latency
        self.l1_bytes = l1_bytes
        self.l1s: list[L1] = [L1(l1_bytes, mem.l1.line_bytes, self.sector, mem.l1.associativity, mem.l1.mshrs,
                                 mem.l1.hit_latency) for _ in range(sms)]
        self.ports: list[SmPort] = [SmPort(float(mem.l2.sm_bytes_per_clock)) for _ in range(sms)]
        # a share of the chip keeps that share of the slices and channels (at least one), each at its full rate,
        # and the whole L2 capacity
        slices = max(1, round(mem.l2.slices * share))
        channels = max(1, round(mem.dram.channels * share))
        dram_bytes_per_clock = mem.dram.bandwidth_gbs * 1e9 / (spec.clocks.core_mhz * 1e6)
        self.channels: list[DramChannel] = [
            DramChannel(dram_bytes_per_clock / mem.dram.channels, mem.dram.read_efficiency,
                        mem.dram.write_efficiency) for _ in range(channels)]
        self.l2_spec: Any = mem.l2
        self.slices: list[L2Slice] = [
            L2Slice(mem.l2.size_bytes // slices, mem.l2.line_bytes, mem.l2.sector_bytes, mem.l2.associativity,
                    mem.l2.bandwidth_bytes_per_clock / mem.l2.slices, mem.l2.hit_latency, mem.dram.latency,
                    mem.l2.atomic_cycles_per_address_update, self.sector_count, widest, self.channels)
            for _ in range(slices)]
        # the earliest cycle any later request can be made at (the GPU's clock sets it; -1: not driven by one, then
        # the request's own cycle): L2 entries in flight are forgotten only once their data is back by then
        self.horizon: float = -1.0
        self.banks = SharedMemoryBanks(spec.shared_memory.banks, spec.shared_memory.bank_width_bytes)
        self.clock_hz = spec.clocks.core_mhz * 1e6
        self.coalescer = Coalescer(self.line_bytes, self.sector)
        # request counts (metrics() names them; the units count their own traffic)
        self.ld_requests = 0
        self.ld_sectors = 0
        self.atomic_updates = 0
        self.atom_sectors = 0
        self.smem_conflicts_atom = 0
        self.st_requests = 0
        self.st_sectors = 0
        self.atom_requests = 0
        self.shadow: ShadowL2 | None = None  # a sampled run's (use_shadow_l2)
        # a reduced run's (count_recent_fills): L2 hits within this many cycles of their sectors' fill from DRAM
        self.recent_window: int = 0
        self.recent_spread: int = 0
        self.smem_wavefronts = 0
        self.async_wavefronts = 0  # data-stage passes of bulk copies' shared-memory writes and wgmma operand reads
        self.smem_conflicts_ld = 0
        self.smem_conflicts_st = 0
        self.smem_requests = 0
        self.no_address = 0
        self.ldgsts_requests = 0
        self.ldgsts_sectors = 0
        self.bulk_copies = 0
        self.bulk_bytes = 0
        self.bulk_multicast_bytes = 0  # delivered to more blocks than the one copy read from L2
        self.arch_name: str = spec.name
        self.network = SmToSmNetwork(mem.sm_to_sm, sms)
        self.dsmem_requests: list[int] = [0, 0, 0]  # loads, stores, atomics on another block's shared memory
        self.dsmem_sectors: list[int] = [0, 0, 0]
        self.latency_sum: list[int] = [0, 0, 0, 0]  # by the deepest level a load's own requests reached (levels.py)
        self.latency_count: list[int] = [0, 0, 0, 0]

    # --- the units' counters, over all of them ------------------------------------------------------------
    @property
    def ld_sector_hits(self) -> int:
        return sum([l1.sector_hits for l1 in self.l1s])

    @property
    def l1_merged(self) -> int:
        return sum([l1.merged for l1 in self.l1s])

    @property
    def data_wavefronts(self) -> int:
        return sum([l1.data_wavefronts for l1 in self.l1s])

    @property
    def mshr_full_events(self) -> int:
        return sum([l1.mshrs.stalls for l1 in self.l1s])

    @property
    def port_bytes(self) -> int:
        return sum([port.bytes for port in self.ports])

    @property
    def l2_sectors(self) -> int:
        return sum([s.sectors for s in self.slices])

    @property
    def l2_hits(self) -> int:
        return sum([s.hits for s in self.slices])

    @property
    def l2_merged(self) -> int:
        return sum([s.merged for s in self.slices])

    @property
    def l2_recent_hits(self) -> int:
        return sum([s.recent_hits for s in self.slices])

    @property
    def dram_read(self) -> int:
        return sum([c.read_bytes for c in self.channels])

    @property
    def dram_write(self) -> int:
        return sum([c.write_bytes for c in self.channels])

    @property
    def dram_busy_until(self) -> float:
        """The cycle the last DRAM channel is free (write-backs queued near the end can finish after the last warp)."""
        return max([c.free for c in self.channels])

    def dram_backlog_bytes(self, now: int) -> float:
        """The bytes the DRAM channels still have queued at `now`, at the read rate."""
        return sum([c.free - now for c in self.channels if c.free > now]) * self.channels[0].read_rate

    # --- the interface -------------------------------------------------------------------------------------
    def access(self, sm: int, inst: WarpInst, now: int) -> tuple[int, int]:
        """(cycle the data is ready or the write done, cycles from `now` the issuing pipe stays busy at least)."""
        info = inst.info
        space = info.space
        if not inst.has_addresses():  # a traced access without lane addresses (predicated off): no data moves
            self.no_address += 1
            return now + (self.shared_latency if space == "shared" else self.l1_hit_latency), 0
        if space == "shared":
            return self._shared(sm, inst, now)
        if space == "const":
            return now + self.l1_hit_latency, 0
        if space == "global":
            base, offsets = inst.address_key()
        else:
            base, offsets = lane_offsets(local_addresses(inst))
        first, by_line, sectors = self.coalescer.lines(base, offsets, info.width, inst.mask)
        if info.is_atomic:
            return self._atomic(sm, inst, first, by_line, now)
        if info.is_store:
            return self._store(sm, first, by_line, sectors, now)
        if info.base == "LDGSTS":  # cp.async: a load whose data is written to shared memory, not registers
            self.ldgsts_requests += 1
            self.ldgsts_sectors += sectors
            # its pass through the data stage is the shared-memory write (taken as conflict-free, the layouts'
            # swizzle): its bytes over the banks' width, however many global lines they came from
            writes = self.banks.passes(inst.mask.bit_count() * info.width)
            return self._load(sm, first, by_line, sectors, now, ".BYPASS" not in info.opcode, writes)
        return self._load(sm, first, by_line, sectors, now)

    def shared_operands(self, sm: int, nbytes: int, now: int) -> int:
        """A warpgroup MMA's operands read from the SM's shared memory: `nbytes` through its L1TEX data stage,
        beside the warps' own accesses; the cycle the last of them has passed."""
        passes = self.banks.passes(nbytes)
        self.async_wavefronts += passes
        return self.l1s[sm].data_stage(passes, now) + passes

    # --- global / local ------------------------------------------------------------------------------------
    def _load(self, sm: int, first: int, by_line: tuple[tuple[int, int], ...], sectors: int, now: int,
              allocate: bool = True, wavefronts: int = 0) -> tuple[int, int]:
        """A global or local load (and cp.async's read: `allocate` False for LDGSTS.BYPASS, cp.async.cg, which
        neither hits in nor fills the L1). `by_line`: the lines (relative to line `first`) and their sectors;
        `wavefronts`: its passes through the data stage (0: one per line, a load's)."""
        self.ld_requests += 1
        if not sectors:
            return now + self.l1_hit_latency, 0
        self.ld_sectors += sectors
        l1, count = self.l1s[sm], self.sector_count
        lines = len(by_line)
        passes = wavefronts if wavefronts else lines  # a load: one wavefront per line
        start = l1.data_stage(passes, now)
        busy = start + passes - now
        # merged with a miss in flight: done when its data arrives, not before (its level is the miss's: the
        # load's latency counts its own requests')
        ready = l1.look_up(first, by_line, now, start + passes - 1 + self.l1_hit_latency, allocate, count)
        level = AT_L1
        missing, missing_sectors, missed = l1.missing, l1.missing_sectors, l1.missing_count
        if missed:
            table, port, cache = l1.mshrs, self.ports[sm], l1.cache
            busy += table.reserve(missed, now)
            floor = self.earliest_request(now)
            for k in range(missed):
                line, mask = missing[k], missing_sectors[k]
                leave = port.send(count[mask] * self.sector, now)
                t, lvl = self._l2_access(line, mask, leave, write=False)
                table.add(line, mask, t, lvl, now, floor)
                if allocate:
                    cache.fill(line, mask)
                if t > ready:
                    ready = t
                if lvl > level:
                    level = lvl
        if missed or not l1.merged_now:  # a load served only by misses already in flight made no trip of its own
            sums, counts = self.latency_sum, self.latency_count  # (item +=: boxed and generic, compiled)
            sums[level] = sums[level] + ready - now
            counts[level] = counts[level] + 1
        return ready, busy

    def _store(self, sm: int, first: int, by_line: tuple[tuple[int, int], ...], sectors: int,
               now: int) -> tuple[int, int]:
        self.st_requests += 1
        self.st_sectors += sectors
        if not sectors:
            return now + 1, 0
        lines = len(by_line)
        start = self.l1s[sm].data_stage(lines, now)
        done = start + lines
        count = self.sector_count
        port = self.ports[sm]
        for relative, mask in by_line:
            leave = port.send(count[mask] * self.sector, start)
            t, _lvl = self._l2_access(first + relative, mask, leave, write=True)
            if t > done:
                done = t
        return done, start + lines - now

    def _atomic(self, sm: int, inst: WarpInst, first: int, by_line: tuple[tuple[int, int], ...],
                now: int) -> tuple[int, int]:
        """Atomics are performed at the line's L2 slice. Lanes updating the same address serialize there,
        one update per `atomic_cycles`; different addresses proceed at the slice's bandwidth."""
        self.atom_requests += 1
        lines = len(by_line)
        count = self.sector_count
        for _line, mask in by_line:
            self.atom_sectors += count[mask]
        if not lines:
            return now + self.l1_hit_latency, 0
        start = self.l1s[sm].data_stage(lines, now)
        done = now + self.l2_hit_latency
        port = self.ports[sm]
        addrs = inst.addrs[active_lanes(inst.mask, len(inst.addrs))]
        self.atomic_updates += int(addrs.size)
        hottest = hottest_address_per_line(addrs, self.line_bytes)
        for relative, mask in by_line:
            line = first + relative
            leave = port.send(count[mask] * self.sector, start)
            updates = hottest.get(line, 1)
            t, _lvl = self._l2_access(line, mask, leave, write=True, atomic=updates)
            if t > done:
                done = t
        return done, start + lines - now

    # --- bulk (TMA) copies ----------------------------------------------------------------------------------
    def bulk_copy(self, sm: int, base: int, rows: int, row_bytes: int, pitch: int, now: int,
                  to: list[int] | None = None) -> int:
        """A TMA / bulk copy of `rows` rows of `row_bytes` from global memory, `pitch` bytes apart, into shared
        memory; the cycle it is complete. The copy engine reads from L2 through the SM's port, neither using nor
        filling the L1 and its MSHRs; its shared-memory writes pass through each receiving SM's L1TEX data stage
        (bytes over the banks' width, queued when the copy is issued, beside the warps' own traffic). `to`: a
        multicast copy's SMs (each block of the cluster it lands in): L2 is read once, every one of their ports
        carries the bytes."""
        self.bulk_copies += 1
        self.bulk_bytes += rows * row_bytes
        ports = [sm] if to is None else to
        self.bulk_multicast_bytes += (len(ports) - 1) * rows * row_bytes
        count, sector, per_line = self.sector_count, self.sector, self.sectors_per_line
        done = now + self.l2_hit_latency
        passes = self.banks.passes(rows * row_bytes)
        for target in ports:
            self.async_wavefronts += passes
            written = self.l1s[target].data_stage(passes, now) + passes
            if written > done:
                done = written
        first_port, others = self.ports[ports[0]], len(ports)
        for row in range(rows):
            start = base + row * pitch
            first, last = start // sector, (start + row_bytes - 1) // sector
            for line in range(first // per_line, last // per_line + 1):  # each line the row touches, its sectors
                lo = line * per_line
                low = first if first > lo else lo
                high = last if last < lo + per_line - 1 else lo + per_line - 1
                mask = ((1 << (high - low + 1)) - 1) << (low - lo)
                nbytes = count[mask] * sector
                leave = first_port.send(nbytes, now)
                for k in range(1, others):
                    also = self.ports[ports[k]].send(nbytes, now, False)
                    if also > leave:
                        leave = also
                t, _level = self._l2_access(line, mask, leave, write=False)
                if t > done:
                    done = t
        return done

    # --- L2 and DRAM ---------------------------------------------------------------------------------------
    def use_shadow_l2(self, size_bytes: int) -> None:
        """Keep beside the L2 a shadow of it of `size_bytes` (gpusim.memory.shadow_l2): it sees every L2 access and
        counts the DRAM traffic an L2 of that size would make, with no effect on timing."""
        self.shadow = ShadowL2(self.l2_spec, len(self.slices), self.slices[0].cache.sets, size_bytes, self.sector,
                               self.sector_count, max(0, self.dram_latency - self.l2_hit_latency))

    def count_recent_fills(self, spread: int) -> None:
        """Count the L2 hits (the shadow L2's too) on sectors filled from DRAM less than the longest DRAM read yet
        (request to data back, queueing included; the DRAM's latency before any) plus `spread` cycles before: a
        request that close to a miss meets its line in flight where the blocks sharing it run in closer step, or
        DRAM answers as slowly as it did at its busiest (a sampled run's reduced runs, whose first blocks start
        spread over `spread` cycles: gpusim.sampling.runner states the L2 hit rate's error from them)."""
        self.recent_spread = max(0, spread)
        self._recent_window(self.dram_latency + self.recent_spread)

    def _recent_window(self, window: int) -> None:
        self.recent_window = window
        if self.shadow is not None:
            self.shadow.recent_window = window

    def warm_l2(self, dirty_fraction: float) -> None:
        """Fill every set of every L2 slice with lines no kernel touches, that share of them dirty (spread evenly),
        older than anything the kernel brings: the L2 a long streaming kernel has reached after its first waves,
        where every line it allocates evicts an old one and a dirty one is written back (gpusim.sampling.warm).
        Counted nowhere until evicted: then as the write-backs they are."""
        warm_fill(self.l2_caches(), dirty_fraction)

    def earliest_request(self, now: int) -> int:
        """The earliest cycle a request made from now on can be made at: the GPU clock's horizon, or `now` itself
        where no clock drives the hierarchy (what is back by then is stale for good)."""
        horizon = self.horizon
        return now if horizon < 0 or horizon > now else int(horizon)

    def _l2_access(self, line: int, mask: int, now: int, write: bool, atomic: int = 0) -> tuple[int, int]:
        """Serve the masked sectors of one line at its L2 slice; return (cycle the data is back, level).
        `atomic`: the updates to the line's hottest address (they serialize at the slice), 0 for no atomic."""
        h = line_hash(line)
        index = h % len(self.slices)
        l2 = self.slices[index]
        t, level = l2.access(line, h, mask, now, write, atomic, self.recent_window)
        missing = l2.missing
        shadow = self.shadow
        floor = self.earliest_request(now)
        if shadow is not None:
            shadow.access(index, line, mask, l2.inflight, write, atomic, now, t, missing, floor)
        if missing and not (write and not atomic):
            # (kept the recent window longer where recent fills are counted)
            l2.pend(line, missing, t, now, floor - self.recent_window)
            if self.recent_window and t - now + self.recent_spread > self.recent_window:
                self._recent_window(t - now + self.recent_spread)
        return t, level

    def l2_caches(self) -> list[SectoredCache]:
        """The L2 slices' tags."""
        return [l2.cache for l2 in self.slices]

    def dirty_bytes(self, caches: list[SectoredCache] | None = None) -> int:
        """Bytes of dirty sectors not yet written to DRAM: in the L2, or in `caches` when given."""
        return dirty_bytes_in(self.l2_caches() if caches is None else caches, self.sector_count, self.sector)

    # --- shared memory -------------------------------------------------------------------------------------
    def _shared(self, sm: int, inst: WarpInst, now: int) -> tuple[int, int]:
        info = inst.info
        atomic = info.is_atomic
        waves, ideal = self.banks.wavefronts(inst)
        self.smem_requests += 1
        self.smem_wavefronts += waves
        if atomic:
            self.smem_conflicts_atom += waves - ideal
        elif info.is_store:
            self.smem_conflicts_st += waves - ideal
        else:
            self.smem_conflicts_ld += waves - ideal
        start = self.l1s[sm].data_stage(waves, now)
        return start + self.shared_latency + waves - 1, start + waves - now

    def dsmem(self, sm: int, target: int, inst: WarpInst, now: int) -> tuple[int, int]:
        """A load, store or atomic from SM `sm` on the shared memory of a block on SM `target` of its cluster
        (distributed shared memory); (cycle the data is ready or the write done, cycles the issuing pipe stays
        busy: until its sectors have crossed the network). Its 32-byte sectors queue on the sending SM's and the
        receiving SM's network ports; the target's banks serve it on its data stage meanwhile."""
        network = self.network
        if not network.rate:
            raise GpusimError(f"{self.arch_name} has no SM-to-SM network (memory.sm_to_sm): distributed shared "
                              f"memory cannot be simulated on it")
        info = inst.info
        base, offsets = inst.address_key()
        _first, _by_line, sectors = self.coalescer.lines(base, offsets, info.width, inst.mask)
        op = 2 if info.is_atomic else 1 if info.is_store else 0
        self.dsmem_requests[op] += 1
        self.dsmem_sectors[op] += sectors
        if not sectors:
            return now + network.latency, 1
        waves, _ideal = self.banks.wavefronts(inst)
        stage = self.l1s[target].data_stage(waves, now) + waves
        send, receive = (target, sm) if op == 0 else (sm, target)  # a load's data comes back; the others' goes
        crossed = network.cross(send, receive, sectors * self.sector, now)
        ready = (crossed if crossed > stage else stage) + network.latency
        return ready, crossed - now

    # --- metrics -------------------------------------------------------------------------------------------
    def metrics(self, cycles: int) -> dict:
        """The kernel's memory metrics, by their Nsight Compute names (gpusim.memory.metrics)."""
        return hierarchy_metrics(self, cycles)
