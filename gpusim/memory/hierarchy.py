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
from .l2_contents import dirty_bytes_in, warm_fill
from .l2_tags import forget_returned, line_hash, update_tags
from .levels import DRAM, L1, L2, L2_IN_FLIGHT
from .metrics import hierarchy_metrics
from .mshr import MshrTable
from .shadow_l2 import ShadowL2
from .shared_banks import SharedMemoryBanks
from .sm_network import SmToSmNetwork


class MemoryHierarchy:
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
        self.l1 = [SectoredCache(l1_bytes, mem.l1.line_bytes, self.sector, mem.l1.associativity) for _ in range(sms)]
        self.mshrs = [MshrTable(mem.l1.mshrs, self.sectors_per_line) for _ in range(sms)]
        # a share of the chip keeps that share of the slices and channels (at least one), each at its full rate,
        # and the whole L2 capacity
        slices = max(1, round(mem.l2.slices * share))
        channels = max(1, round(mem.dram.channels * share))
        slice_bytes = mem.l2.size_bytes // slices
        self.l2_spec: Any = mem.l2
        self.l2 = [SectoredCache(slice_bytes, mem.l2.line_bytes, mem.l2.sector_bytes, mem.l2.associativity)
                   for _ in range(slices)]
        # per slice: line -> the sectors in flight from DRAM, one int: cycle they are back << pending_shift | mask
        self.l2_pending: list[dict[int, int]] = [{} for _ in range(slices)]
        self.pending_shift: int = widest
        self.pending_sectors: int = (1 << widest) - 1
        self.l2_pending_limit: list[int] = [1024] * slices
        self.slice_free: list[float] = [0.0] * slices
        self.slice_rate: float = mem.l2.bandwidth_bytes_per_clock / mem.l2.slices  # bytes per core clock
        self.atomic_cycles: int = mem.l2.atomic_cycles_per_address_update
        dram_bytes_per_clock = mem.dram.bandwidth_gbs * 1e9 / (spec.clocks.core_mhz * 1e6)
        self.channel_free: list[float] = [0.0] * channels
        self.channel_rate: float = dram_bytes_per_clock / mem.dram.channels
        self.channel_read_rate: float = self.channel_rate * mem.dram.read_efficiency
        self.channel_write_rate: float = self.channel_rate * mem.dram.write_efficiency
        # the earliest cycle any later request can be made at (the GPU's clock sets it; -1: not driven by one, then
        # the request's own cycle): L2 entries in flight are forgotten only once their data is back by then
        self.horizon: float = -1.0
        self.data_free: list[int] = [0] * sms  # first free cycle of each SM's L1TEX data stage
        self.port_free: list[float] = [0.0] * sms  # each SM's port to L2: when it is next free
        self.port_rate: float = float(mem.l2.sm_bytes_per_clock)
        self.banks = SharedMemoryBanks(spec.shared_memory.banks, spec.shared_memory.bank_width_bytes)
        self.clock_hz = spec.clocks.core_mhz * 1e6
        self.coalescer = Coalescer(self.line_bytes, self.sector)
        # event counts (metrics() names them)
        self.ld_requests = 0
        self.ld_sectors = 0
        self.ld_sector_hits = 0
        self.l1_merged = 0
        self.l2_merged = 0
        self.data_wavefronts = 0
        self.port_bytes = 0
        self.atomic_updates = 0
        self.atom_sectors = 0
        self.smem_conflicts_atom = 0
        self.st_requests = 0
        self.st_sectors = 0
        self.atom_requests = 0
        self.l2_sectors = 0
        self.l2_hits = 0
        self.dram_read = 0
        self.dram_write = 0
        self.shadow: ShadowL2 | None = None  # a sampled run's (use_shadow_l2)
        # a reduced run's (count_recent_fills): L2 hits within this many cycles of their sectors' fill from DRAM
        self.recent_window: int = 0
        self.recent_spread: int = 0
        self.l2_recent_hits = 0
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

    def _data_stage(self, sm: int, wavefronts: int, now: int) -> int:
        """Queue `wavefronts` passes through the SM's L1TEX data stage (one per clock); return the first one's
        cycle. The stage is the SM's, shared by its sub-partitions: it moves at most banks x bank width bytes a
        clock, shared-memory and global data alike."""
        free = self.data_free[sm]
        start = free if free > now else now
        self.data_free[sm] = start + wavefronts
        self.data_wavefronts += wavefronts
        return start

    def shared_operands(self, sm: int, nbytes: int, now: int) -> int:
        """A warpgroup MMA's operands read from the SM's shared memory: `nbytes` through its L1TEX data stage,
        beside the warps' own accesses; the cycle the last of them has passed."""
        passes = self.banks.passes(nbytes)
        self.async_wavefronts += passes
        return self._data_stage(sm, passes, now) + passes

    def _port(self, sm: int, nbytes: int, now: int, counted: bool = True) -> int:
        """Queue `nbytes` on the SM's port to L2; return the cycle the request leaves (the queueing it met).
        `counted` False: more SMs' ports for one request to L2 (a multicast copy), its bytes counted once."""
        free = self.port_free[sm]
        start = free if free > now else float(now)  # (one type: compiled, a float stays unboxed)
        self.port_free[sm] = start + nbytes / self.port_rate
        if counted:
            self.port_bytes += nbytes
        leave = int(start)
        return leave + 1 if leave < start else leave

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
        l1, table, count = self.l1[sm], self.mshrs[sm], self.sector_count
        mshr = table.entries
        lines = len(by_line)
        passes = wavefronts if wavefronts else lines  # a load: one wavefront per line
        start = self._data_stage(sm, passes, now)
        busy = start + passes - now
        ready, level = start + passes - 1 + self.l1_hit_latency, L1
        hits = merged = 0
        # an MSHR entry's fields (see MshrTable.entries)
        ready_shift, sectors_mask = table.ready_shift, table.sectors
        missing: list[int] = []  # the lines missed, and the sectors missed in each (side by side)
        missing_sectors: list[int] = []
        for relative, mask in by_line:
            line = first + relative
            inflight = mshr.get(line)
            if inflight is not None and inflight >> ready_shift > now:
                pending = inflight & sectors_mask & mask
                if pending:  # merged with the miss in flight: done when its data arrives, not before (its
                    merged += count[pending]  # level is the miss's: the load's latency counts its own requests')
                    back = inflight >> ready_shift
                    if back > ready:
                        ready = back
                    mask &= ~pending
                    if not mask:
                        continue
            present = l1.probe(line, mask) if allocate else 0
            hits += count[present]
            if present != mask:
                missing.append(line)
                missing_sectors.append(mask & ~present)
        self.ld_sector_hits += hits
        self.l1_merged += merged
        if missing:
            busy += table.reserve(len(missing), now)
            for k in range(len(missing)):
                line, mask = missing[k], missing_sectors[k]
                leave = self._port(sm, count[mask] * self.sector, now)
                t, lvl = self._l2_access(line, mask, leave, write=False)
                table.add(line, mask, t, lvl, now)
                if allocate:
                    l1.fill(line, mask)
                if t > ready:
                    ready = t
                if lvl > level:
                    level = lvl
        if missing or not merged:  # a load served only by misses already in flight made no trip of its own
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
        start = self._data_stage(sm, lines, now)
        done = start + lines
        count = self.sector_count
        for relative, mask in by_line:
            leave = self._port(sm, count[mask] * self.sector, start)
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
        start = self._data_stage(sm, lines, now)
        done = now + self.l2_hit_latency
        addrs = inst.addrs[active_lanes(inst.mask, len(inst.addrs))]
        self.atomic_updates += int(addrs.size)
        hottest = hottest_address_per_line(addrs, self.line_bytes)
        for relative, mask in by_line:
            line = first + relative
            leave = self._port(sm, count[mask] * self.sector, start)
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
            written = self._data_stage(target, passes, now) + passes
            if written > done:
                done = written
        for row in range(rows):
            start = base + row * pitch
            first, last = start // sector, (start + row_bytes - 1) // sector
            line, mask = first // per_line, 0
            for s in range(first, last + 2):  # one past the last: flushes the final line
                if s > last or s // per_line != line:
                    nbytes = count[mask] * sector
                    leave = self._port(ports[0], nbytes, now)
                    for other in ports[1:]:
                        also = self._port(other, nbytes, now, False)
                        if also > leave:
                            leave = also
                    t, _level = self._l2_access(line, mask, leave, write=False)
                    if t > done:
                        done = t
                    if s > last:
                        break
                    line, mask = s // per_line, 0
                mask |= 1 << (s - line * per_line)
        return done

    # --- L2 and DRAM ---------------------------------------------------------------------------------------
    def use_shadow_l2(self, size_bytes: int) -> None:
        """Keep beside the L2 a shadow of it of `size_bytes` (gpusim.memory.shadow_l2): it sees every L2 access and
        counts the DRAM traffic an L2 of that size would make, with no effect on timing."""
        self.shadow = ShadowL2(self.l2_spec, len(self.l2), self.l2[0].sets, size_bytes, self.sector,
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
        warm_fill(self.l2, dirty_fraction)

    def _l2_access(self, line: int, mask: int, now: int, write: bool, atomic: int = 0) -> tuple[int, int]:
        """Serve the masked sectors of one line at its L2 slice; return (cycle the data is back, level).
        `atomic`: the updates to the line's hottest address (they serialize at the slice), 0 for no atomic."""
        h = line_hash(line)
        index = h % len(self.l2)
        cache = self.l2[index]
        count = self.sector_count[mask]
        free = self.slice_free[index]
        service: float = count * self.sector / self.slice_rate
        serialized = float(atomic * self.atomic_cycles)
        if serialized > service:
            service = serialized
        done = (free if free > now else float(now)) + service
        self.slice_free[index] = done
        self.l2_sectors += count
        pending = self.l2_pending[index]
        entry = pending.get(line)
        shift = self.pending_shift
        inflight = entry & self.pending_sectors & mask if entry is not None and entry >> shift > now else 0
        present = cache.probe(line, mask & ~inflight)
        self.l2_hits += self.sector_count[present]
        if present and self.recent_window and entry is not None and (entry >> shift) + self.recent_window > now:
            self.l2_recent_hits += self.sector_count[present & entry & self.pending_sectors]
        queueing = done - now
        level, latency = L2, self.l2_hit_latency
        missing = mask & ~present & ~inflight
        back = 0  # merged with sectors in flight from DRAM: not before they arrive
        if inflight:
            self.l2_merged += self.sector_count[inflight]
            level, back = L2_IN_FLIGHT, entry >> shift if entry is not None else 0
        if write and not atomic:  # write-back L2; a full-sector write needs no read from DRAM
            level, back = L2, 0
        elif missing:
            level, latency = DRAM, self.dram_latency
            channel = h % len(self.channel_free)
            read = self.sector_count[missing] * self.sector
            free = self.channel_free[channel]
            begin = free if free > done else done
            finish = begin + read / self.channel_read_rate
            self.channel_free[channel] = finish
            self.dram_read += read
            queueing = finish - now
        evicted = update_tags(cache, line, mask, missing, write, atomic)
        if evicted:
            self._writeback(cache.evicted_line, evicted, now)
        wait = int(queueing)  # queueing >= 0: rounded up to whole cycles
        if wait < queueing:
            wait += 1
        t = now + latency + wait
        if back > t:
            t = back
        shadow = self.shadow
        if shadow is not None:
            horizon = self.horizon
            shadow.access(index, line, mask, inflight, write, atomic, now, t, missing,
                          now if horizon < 0 or horizon > now else int(horizon))
        if missing and not (write and not atomic):
            self._pend(index, line, missing, t, now)
            if self.recent_window and t - now + self.recent_spread > self.recent_window:
                self._recent_window(t - now + self.recent_spread)
        return t, level

    def _pend(self, index: int, line: int, mask: int, back: int, now: int) -> None:
        """Note sectors in flight from DRAM to slice `index` until `back`; drop expired entries now and then."""
        pending = self.l2_pending[index]
        key: Any = line  # compiled: boxed once for the dict operations below
        entry = pending.get(key)
        shift = self.pending_shift
        if entry is not None and entry >> shift > now:
            pending[key] = max(back, entry >> shift) << shift | entry & self.pending_sectors | mask
        else:
            pending[key] = back << shift | mask
        if len(pending) > self.l2_pending_limit[index]:
            # an entry goes once no later request can come before its data is back: forgotten earlier, a request
            # made before that (another SM's, not yet stepped) would find the line's tags and take it as a hit
            horizon = self.horizon
            floor = now if horizon < 0 or horizon > now else int(horizon)
            # (kept the recent window longer where recent fills are counted)
            self.l2_pending_limit[index] = forget_returned(pending, floor - self.recent_window, shift)

    def _writeback(self, line: int, dirty_mask: int, now: int) -> None:
        """An evicted line's dirty sectors go to DRAM: they take their channel's time from `now` on."""
        channel = line_hash(line) % len(self.channel_free)
        nbytes = self.sector_count[dirty_mask] * self.sector
        free = self.channel_free[channel]
        self.channel_free[channel] = (free if free > now else float(now)) + nbytes / self.channel_write_rate
        self.dram_write += nbytes

    def dirty_bytes(self, caches: list[SectoredCache] | None = None) -> int:
        """Bytes of dirty sectors not yet written to DRAM: in the L2, or in `caches` when given."""
        return dirty_bytes_in(self.l2 if caches is None else caches, self.sector_count, self.sector)

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
        start = self._data_stage(sm, waves, now)
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
        stage = self._data_stage(target, waves, now) + waves
        send, receive = (target, sm) if op == 0 else (sm, target)  # a load's data comes back; the others' goes
        crossed = network.cross(send, receive, sectors * self.sector, now)
        ready = (crossed if crossed > stage else stage) + network.latency
        return ready, crossed - now

    # --- metrics -------------------------------------------------------------------------------------------
    def metrics(self, cycles: int) -> dict:
        """The kernel's memory metrics, by their Nsight Compute names (gpusim.memory.metrics)."""
        return hierarchy_metrics(self, cycles)
