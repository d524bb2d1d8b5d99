"""The register -> L1 -> L2 -> DRAM model behind the engine's memory interface.

* Global and local loads are coalesced into 32-byte sectors. Each SM's L1 is sectored, set-associative and LRU,
  its capacity the unified L1 + shared memory minus the launch's shared-memory carveout. A miss takes an MSHR
  entry until its data arrives; a request for a sector already in flight merges with that entry and completes
  no earlier than the data (it is counted as merged, never as a hit). A full MSHR table holds the load/store
  pipe (lg_throttle). Stores are write-through and do not allocate in L1; atomics are performed at L2, where
  updates to one address serialize.
* Each SM has one L1TEX data stage, `banks x bank_width` bytes (128 B) per clock, shared by its four
  sub-partitions: shared-memory wavefronts (banks.py) and global accesses (one wavefront per 128-byte line)
  queue for it in order. Each SM's port to L2 moves at most `l2.sm_bytes_per_clock`.
* L2 is split into slices by an address hash; each slice serves its share of the L2 bandwidth and queues
  what arrives faster. It is sectored, set-associative, LRU, write-back: dirty sectors cost DRAM writes when
  evicted, and what is still dirty when the kernel ends is reported (gpusim__l2_dirty_bytes_at_end), not
  written. A sector in flight from DRAM is pending: a second request for it merges and waits for the data.
* DRAM is a set of channels sharing the arch's bandwidth at the core clock, each with its own queue; reads and
  writes reach the arch's measured efficiency (dram.read_efficiency, dram.write_efficiency).
* Distributed shared memory (`dsmem`): a block's access to the shared memory of another block of its cluster
  moves 32-byte sectors over the GPC's SM-to-SM network: each SM sends, and separately receives, at most
  `sm_to_sm.sm_bytes_per_clock`; the other SM's banks serve it on its data stage; the data is there the
  network's latency after the last sector crossed.
* A sampled run may keep a shadow L2 (`use_shadow_l2`): the L2's tags alone at another size, no timing, updated
  by every L2 access as the L2 is; it counts the DRAM reads, write-backs and dirty bytes an L2 of that size would
  make (gpusim.sampling.reuse: DRAM traffic between waves). Of the L2's own size it counts exactly the L2's.
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

from typing import Any, Final

import numpy as np

from ..analytic.banks import atomic_wavefronts, ideal_wavefronts, wavefronts
from ..analytic.coalesce import active_lanes, sector_list
from ..errors import GpusimError
from ..isa.inst import WarpInst, lane_offsets
from .cache import SectoredCache

L1: Final = 0
L2: Final = 1
DRAM: Final = 2
LEVEL_BITS: Final = 2  # an MSHR entry's level field (L1, L2, DRAM)
LEVEL_MASK: Final = (1 << LEVEL_BITS) - 1
LOCAL_BASE: Final = 1 << 44  # where per-thread local memory is mapped (interleaved by lane, as the hardware does)
LOCAL_REGION: Final = 1 << 24  # bytes of local memory address space per warp
_MEMO_LIMIT: Final = 65536
WARM_BASE_LINE: Final = 1 << 41  # warm_l2's lines: at 256 TiB, far above every buffer (workload.kernel.GLOBAL_BASE)


def _hash(line: int) -> int:
    """Spread consecutive lines over slices and channels (an XOR-fold of the line number)."""
    return line ^ (line >> 7) ^ (line >> 13)


def _update_tags(cache: SectoredCache, line: int, mask: int, missing: int, write: bool, atomic: int) -> int:
    """An L2 access's change to the tags (the L2's or its shadow's): a plain write makes its sectors present and
    dirty with no read; a read or an atomic fills the `missing` sectors, dirty where it writes. The dirty-sector
    mask of the line it evicted (0: none)."""
    if write and not atomic:  # write-back L2; a full-sector write needs no read from DRAM
        return cache.fill(line, mask, dirty=True)
    if missing:
        evicted = cache.fill(line, missing, dirty=write)
        if write:
            cache.fill(line, mask, dirty=True)
        return evicted
    return cache.fill(line, mask, dirty=True) if write else 0


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
        self.mshr_limit: int = mem.l1.mshrs
        self.l2_hit_latency: int = mem.l2.hit_latency
        self.dram_latency: int = mem.dram.latency
        self.l1_bytes = l1_bytes
        self.l1 = [SectoredCache(l1_bytes, mem.l1.line_bytes, self.sector, mem.l1.associativity) for _ in range(sms)]
        # line -> one int: data ready << mshr_ready_shift | level << mshr_level_shift | mask of the sectors in flight
        # (a tuple an entry was an allocation the garbage collector tracks, at every L1 miss)
        self.mshr: list[dict[int, int]] = [{} for _ in range(sms)]
        self.mshr_level_shift: int = self.sectors_per_line
        self.mshr_ready_shift: int = self.sectors_per_line + LEVEL_BITS
        self.mshr_sectors: int = (1 << self.sectors_per_line) - 1
        # the MSHR entries in completion order, as two lists side by side: the cycle each one's data is ready, its line
        self.mshr_order_ready: list[list[int]] = [[] for _ in range(sms)]
        self.mshr_order_line: list[list[int]] = [[] for _ in range(sms)]
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
        self.banks: int = spec.shared_memory.banks
        self.bank_width: int = spec.shared_memory.bank_width_bytes
        self.clock_hz = spec.clocks.core_mhz * 1e6
        self._bank_memo: dict[tuple[int, int, int, bytes], tuple[int, int]] = {}
        self._line_memo: dict[tuple[int, int, int, bytes], tuple[tuple[tuple[int, int], ...], int]] = {}
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
        # a sampled run's shadow L2 (use_shadow_l2): its tags alone, smaller, and the DRAM traffic it would make
        self.shadow: list[SectoredCache] | None = None
        self.shadow_read = 0
        self.shadow_write = 0
        self.smem_wavefronts = 0
        self.async_wavefronts = 0  # data-stage passes of bulk copies' shared-memory writes and wgmma operand reads
        self.smem_conflicts_ld = 0
        self.smem_conflicts_st = 0
        self.smem_requests = 0
        self.mshr_stalls = 0
        self.no_address = 0
        self.ldgsts_requests = 0
        self.ldgsts_sectors = 0
        self.bulk_copies = 0
        self.bulk_bytes = 0
        self.bulk_multicast_bytes = 0  # delivered to more blocks than the one copy read from L2
        network = mem.sm_to_sm
        self.arch_name: str = spec.name
        self.net_latency: int = network.latency if network is not None else 0
        self.net_rate: float = float(network.sm_bytes_per_clock) if network is not None else 0.0
        self.net_out: list[float] = [0.0] * sms  # each SM's SM-to-SM port, sending: when it is next free
        self.net_in: list[float] = [0.0] * sms  # ... and receiving
        self.dsmem_requests: list[int] = [0, 0, 0]  # loads, stores, atomics on another block's shared memory
        self.dsmem_sectors: list[int] = [0, 0, 0]
        self.latency_sum: list[int] = [0, 0, 0]
        self.latency_count: list[int] = [0, 0, 0]

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
            base, offsets = lane_offsets(self._local(inst))
        first, by_line, sectors = self._lines(base, offsets, info.width, inst.mask)
        if info.is_atomic:
            return self._atomic(sm, inst, first, by_line, now)
        if info.is_store:
            return self._store(sm, first, by_line, sectors, now)
        if info.base == "LDGSTS":  # cp.async: a load whose data is written to shared memory, not registers
            self.ldgsts_requests += 1
            self.ldgsts_sectors += sectors
            # its pass through the data stage is the shared-memory write (taken as conflict-free, the layouts'
            # swizzle): its bytes over the banks' width, however many global lines they came from
            row = self.banks * self.bank_width
            writes = -(-(inst.mask.bit_count() * info.width) // row)
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
        passes = -(-nbytes // (self.banks * self.bank_width))
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
    def _local(self, inst: WarpInst) -> Any:
        assert inst.warp is not None, "an instruction with addresses names its warp"
        lane = np.arange(len(inst.addrs), dtype=np.int64)
        a = inst.addrs
        return LOCAL_BASE + inst.warp * LOCAL_REGION + (a // 4) * 128 + lane * 4 + a % 4

    def _lines(self, base: int, offsets: bytes, width: int, mask: int) -> tuple[int, tuple[tuple[int, int], ...], int]:
        """(lane 0's line, ((line relative to it, mask of the sectors wanted in it), ...), number of sectors) for
        one warp-level access: lane 0 at `base`, the lanes' offsets from it as int64 bytes. The pattern relative to
        the first lane's line is computed once per (width, mask, offset in the line, lane offsets) and shared, so
        an access allocates nothing for it."""
        line_bytes = self.line_bytes
        base_line, offset = divmod(base, line_bytes)
        key = (width, mask, offset, offsets)
        pattern = self._line_memo.get(key)
        if pattern is None:
            if len(self._line_memo) > _MEMO_LIMIT:
                self._line_memo.clear()
            sectors = sector_list(np.frombuffer(offsets, dtype=np.int64) + offset, width, mask, self.sector)
            per_line = self.sectors_per_line
            by_line: dict[int, int] = {}
            for sec in sectors:
                line = sec // per_line
                by_line[line] = by_line.get(line, 0) | (1 << (sec - line * per_line))
            pattern = self._line_memo[key] = (tuple(by_line.items()), len(sectors))
        relative, count = pattern
        return base_line, relative, count

    def _load(self, sm: int, first: int, by_line: tuple[tuple[int, int], ...], sectors: int, now: int,
              allocate: bool = True, wavefronts: int = 0) -> tuple[int, int]:
        """A global or local load (and cp.async's read: `allocate` False for LDGSTS.BYPASS, cp.async.cg, which
        neither hits in nor fills the L1). `by_line`: the lines (relative to line `first`) and their sectors;
        `wavefronts`: its passes through the data stage (0: one per line, a load's)."""
        self.ld_requests += 1
        if not sectors:
            return now + self.l1_hit_latency, 0
        self.ld_sectors += sectors
        l1, mshr, count = self.l1[sm], self.mshr[sm], self.sector_count
        lines = len(by_line)
        passes = wavefronts if wavefronts else lines  # a load: one wavefront per line
        start = self._data_stage(sm, passes, now)
        busy = start + passes - now
        ready, level = start + passes - 1 + self.l1_hit_latency, L1
        hits = merged = 0
        # an MSHR entry's fields (see self.mshr)
        ready_shift, level_shift, sectors_mask = self.mshr_ready_shift, self.mshr_level_shift, self.mshr_sectors
        missing: list[int] = []  # the lines missed, and the sectors missed in each (side by side)
        missing_sectors: list[int] = []
        for relative, mask in by_line:
            line = first + relative
            inflight = mshr.get(line)
            if inflight is not None and inflight >> ready_shift > now:
                pending = inflight & sectors_mask & mask
                if pending:  # merged with the miss in flight: done when its data arrives, not before
                    merged += count[pending]
                    back = inflight >> ready_shift
                    if back > ready:
                        ready = back
                    if inflight >> level_shift & LEVEL_MASK > level:
                        level = inflight >> level_shift & LEVEL_MASK
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
            busy += self._reserve_mshrs(sm, len(missing), now)
            order_ready, order_line = self.mshr_order_ready[sm], self.mshr_order_line[sm]
            for k in range(len(missing)):
                line, mask = missing[k], missing_sectors[k]
                leave = self._port(sm, count[mask] * self.sector, now)
                t, lvl = self._l2_access(line, mask, leave, write=False)
                key: Any = line  # compiled: boxed once for the MSHR dict, not once each operation
                inflight = mshr.get(key)
                if inflight is not None and inflight >> ready_shift > now:  # other sectors of the line are in flight
                    back = max(t, inflight >> ready_shift)
                    deepest = max(lvl, inflight >> level_shift & LEVEL_MASK)
                    mshr[key] = back << ready_shift | deepest << level_shift | inflight & sectors_mask | mask
                else:
                    mshr[key] = t << ready_shift | lvl << level_shift | mask
                # into completion order (as bisect.insort would put it): misses mostly complete after the ones
                # before them, so the place is found from the end
                at = len(order_ready)
                while at:
                    before_t = order_ready[at - 1]
                    if before_t < t or (before_t == t and order_line[at - 1] <= line):
                        break
                    at -= 1
                order_ready.insert(at, t)
                order_line.insert(at, line)
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

    def _reserve_mshrs(self, sm: int, needed: int, now: int) -> int:
        """Cycles the pipe must wait for `needed` MSHR entries (0 when enough are free). Entries are kept in
        completion order, so expired ones are dropped from the front."""
        mshr, limit = self.mshr[sm], self.mshr_limit
        order_ready, order_line = self.mshr_order_ready[sm], self.mshr_order_line[sm]
        expired = 0
        while expired < len(order_ready) and order_ready[expired] <= now:
            t, line = order_ready[expired], order_line[expired]
            entry = mshr.get(line)
            if entry is not None and entry >> self.mshr_ready_shift == t:  # (not since extended by a later miss)
                del mshr[line]
            expired += 1
        if expired:
            del order_ready[:expired]
            del order_line[:expired]
        live = len(order_ready)
        if live + needed <= limit:
            return 0
        self.mshr_stalls += 1
        return max(0, order_ready[min(live - 1, live + needed - limit - 1)] - now)

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
        hottest = self._hottest_address_per_line(inst)
        for relative, mask in by_line:
            line = first + relative
            leave = self._port(sm, count[mask] * self.sector, start)
            updates = hottest.get(line, 1)
            t, _lvl = self._l2_access(line, mask, leave, write=True, atomic=updates)
            if t > done:
                done = t
        return done, start + lines - now

    def _hottest_address_per_line(self, inst: WarpInst) -> dict[int, int]:
        """Line -> the largest number of active lanes that update one address in it."""
        addrs = inst.addrs[active_lanes(inst.mask, len(inst.addrs))]
        self.atomic_updates += int(addrs.size)
        if not addrs.size:
            return {}
        unique, lanes = np.unique(addrs, return_counts=True)
        hottest: dict[int, int] = {}
        for address, n in zip(unique.tolist(), lanes.tolist()):
            line = address // self.line_bytes
            if n > hottest.get(line, 0):
                hottest[line] = n
        return hottest

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
        passes = -(-(rows * row_bytes) // (self.banks * self.bank_width))
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
        """Keep beside the L2 a shadow of it of `size_bytes` (the same slices, lines and ways): it sees every L2
        access and counts the DRAM reads, write-backs and dirty bytes an L2 of that size would make, with no effect
        on timing (gpusim.sampling.reuse: a sampled run's DRAM traffic between waves)."""
        l2, slices = self.l2_spec, len(self.l2)
        self.shadow = [SectoredCache(size_bytes // slices, l2.line_bytes, l2.sector_bytes, l2.associativity)
                       for _ in range(slices)]

    def warm_l2(self, dirty_fraction: float) -> None:
        """Fill every set of every L2 slice with lines no kernel touches (above WARM_BASE_LINE), that share of them
        dirty (spread evenly), older than anything the kernel brings: the L2 a long streaming kernel has reached
        after its first waves, where every line it allocates evicts an old one and a dirty one is written back
        (gpusim.sampling.warm). Counted nowhere until evicted: then as the write-backs they are."""
        slices = len(self.l2)
        full = 0
        for cache in self.l2:
            full += cache.sets * cache.ways
        placed = 0
        line = WARM_BASE_LINE
        last = WARM_BASE_LINE + 64 * full  # (a bound: the hash spreads lines over every slice and set long before)
        dirty_sectors = (1 << self.l2[0].sectors_per_line) - 1  # whole lines, as a warp's full-line store
        while placed < full and line < last:
            cache = self.l2[_hash(line) % slices]
            lines = cache.lines()[line % cache.sets]
            if len(lines) < cache.ways:
                dirty = int((placed + 1) * dirty_fraction) > int(placed * dirty_fraction)
                cache.fill(line, dirty_sectors, dirty)
                placed += 1
            line += 1

    def _shadow_access(self, cache: SectoredCache, line: int, mask: int, inflight: int, write: bool,
                       atomic: int) -> None:
        """The shadow L2's share of an L2 access (see use_shadow_l2), as _l2_access updates the L2 (sectors the L2
        has in flight from DRAM, `inflight`, are read once, by the access that missed): a shadow of the L2's own
        size counts exactly the L2's DRAM traffic."""
        missing = mask & ~inflight & ~cache.probe(line, mask & ~inflight)
        if missing and not (write and not atomic):
            self.shadow_read += self.sector_count[missing] * self.sector
        evicted = _update_tags(cache, line, mask, missing, write, atomic)
        if evicted:
            self.shadow_write += self.sector_count[evicted] * self.sector

    def _l2_access(self, line: int, mask: int, now: int, write: bool, atomic: int = 0) -> tuple[int, int]:
        """Serve the masked sectors of one line at its L2 slice; return (cycle the data is back, level).
        `atomic`: the updates to the line's hottest address (they serialize at the slice), 0 for no atomic."""
        h = _hash(line)
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
        queueing = done - now
        level, latency = L2, self.l2_hit_latency
        missing = mask & ~present & ~inflight
        back = 0  # merged with sectors in flight from DRAM: not before they arrive
        if inflight:
            self.l2_merged += self.sector_count[inflight]
            level, back = DRAM, entry >> shift if entry is not None else 0
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
        evicted = _update_tags(cache, line, mask, missing, write, atomic)
        if evicted:
            self._writeback(cache.evicted_line, evicted, now)
        shadow = self.shadow
        if shadow is not None:
            self._shadow_access(shadow[index], line, mask, inflight, write, atomic)
        wait = int(queueing)  # queueing >= 0: rounded up to whole cycles
        if wait < queueing:
            wait += 1
        t = now + latency + wait
        if back > t:
            t = back
        if missing and not (write and not atomic):
            self._pend(index, line, missing, t, now)
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
            for expired in [k for k, e in pending.items() if e >> shift <= floor]:
                del pending[expired]
            self.l2_pending_limit[index] = 2 * len(pending) + 1024

    def _writeback(self, line: int, dirty_mask: int, now: int) -> None:
        """An evicted line's dirty sectors go to DRAM: they take their channel's time from `now` on."""
        channel = _hash(line) % len(self.channel_free)
        nbytes = self.sector_count[dirty_mask] * self.sector
        free = self.channel_free[channel]
        self.channel_free[channel] = (free if free > now else float(now)) + nbytes / self.channel_write_rate
        self.dram_write += nbytes

    def dirty_bytes(self, caches: list[SectoredCache] | None = None) -> int:
        """Bytes of dirty sectors not yet written to DRAM: in the L2, or in `caches` (the shadow L2's) when given."""
        total = 0
        count = self.sector_count
        for cache in self.l2 if caches is None else caches:
            shift = cache.dirty_shift
            for lines in cache.lines():
                for state in lines.values():
                    total += count[state >> shift]
        return total * self.sector

    # --- shared memory -------------------------------------------------------------------------------------
    def _bank_wavefronts(self, inst: WarpInst) -> tuple[int, int]:
        """(wavefronts a shared-memory access takes through the banks, the fewest its width and lanes allow)."""
        info, mask = inst.info, inst.mask
        atomic = info.is_atomic
        base, offsets = inst.address_key()
        key = (info.width + (1 << 16 if atomic else 0), mask, base, offsets)  # per-block offsets: patterns repeat
        wf = self._bank_memo.get(key)
        if wf is None:
            if len(self._bank_memo) > _MEMO_LIMIT:
                self._bank_memo.clear()
            count = atomic_wavefronts if atomic else wavefronts
            wf = self._bank_memo[key] = (count(inst.addrs, info.width, mask, self.banks, self.bank_width),
                                         ideal_wavefronts(info.width, mask, self.banks, self.bank_width))
        return wf

    def _shared(self, sm: int, inst: WarpInst, now: int) -> tuple[int, int]:
        info = inst.info
        atomic = info.is_atomic
        waves, ideal = self._bank_wavefronts(inst)
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
        rate = self.net_rate
        if not rate:
            raise GpusimError(f"{self.arch_name} has no SM-to-SM network (memory.sm_to_sm): distributed shared "
                              f"memory cannot be simulated on it")
        info = inst.info
        base, offsets = inst.address_key()
        _first, _by_line, sectors = self._lines(base, offsets, info.width, inst.mask)
        op = 2 if info.is_atomic else 1 if info.is_store else 0
        self.dsmem_requests[op] += 1
        self.dsmem_sectors[op] += sectors
        if not sectors:
            return now + self.net_latency, 1
        waves, _ideal = self._bank_wavefronts(inst)
        stage = self._data_stage(target, waves, now) + waves
        send, receive = (target, sm) if op == 0 else (sm, target)  # a load's data comes back; the others' goes
        out_free, in_free = self.net_out[send], self.net_in[receive]
        start = out_free if out_free > in_free else in_free
        if now > start:
            start = float(now)  # (a float: the compiled engine keeps one representation per variable)
        finish = start + sectors * self.sector / rate
        self.net_out[send] = self.net_in[receive] = finish
        crossed = int(finish)
        if crossed < finish:
            crossed += 1
        ready = (crossed if crossed > stage else stage) + self.net_latency
        return ready, crossed - now

    # --- metrics -------------------------------------------------------------------------------------------
    def _shadow_metrics(self) -> dict:
        """The shadow L2's counts (none without one): what gpusim.sampling.reuse takes for the DRAM traffic."""
        shadow = self.shadow
        if shadow is None:
            return {}
        return {"gpusim__shadow_l2_capacity_bytes": sum(cache.capacity_bytes for cache in shadow),
                "gpusim__shadow_dram_bytes_read": self.shadow_read,
                "gpusim__shadow_dram_bytes_write": self.shadow_write,
                "gpusim__shadow_l2_dirty_bytes_at_end": self.dirty_bytes(shadow)}

    def metrics(self, cycles: int) -> dict:
        # write-backs queued near the end can finish after the last warp: measure bandwidth over DRAM's busy window
        window = max([cycles] + self.channel_free)
        seconds = window / self.clock_hz if window else 0.0
        conflicts = self.smem_conflicts_ld + self.smem_conflicts_st + self.smem_conflicts_atom
        dram = self.dram_read + self.dram_write
        dsmem_bytes = sum(self.dsmem_sectors) * self.sector  # (its rate: speed_of_light's SM-to-SM bytes)

        def pct(a, b):
            return 100.0 * a / b if b else 0.0

        def avg(level):
            return self.latency_sum[level] / self.latency_count[level] if self.latency_count[level] else 0.0

        return {
            "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": self.ld_requests,
            "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": self.ld_sectors,
            "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": self.st_sectors,
            "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": self.st_requests,
            "l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum": self.atom_requests,
            "l1tex__t_sector_hit_rate.pct": pct(self.ld_sector_hits, self.ld_sectors),
            "gpusim__sectors_per_request_global_ld": self.ld_sectors / self.ld_requests if self.ld_requests else 0.0,
            "gpusim__l1_mshr_merged_sectors": self.l1_merged,
            "gpusim__l2_pending_merged_sectors": self.l2_merged,
            "gpusim__atomic_lane_updates": self.atomic_updates,
            "gpusim__atomic_sectors": self.atom_sectors,
            "l1tex__data_pipe_lsu_wavefronts.sum": self.data_wavefronts,
            "l1tex__data_pipe_lsu_wavefronts.avg.per_cycle_elapsed": (
                self.data_wavefronts / (cycles * len(self.data_free)) if cycles else 0.0),
            "gpusim__l1_to_l2_bytes": self.port_bytes,
            "lts__t_sectors.sum": self.l2_sectors,
            "lts__t_sector_hit_rate.pct": pct(self.l2_hits, self.l2_sectors),
            "dram__bytes_read.sum": self.dram_read,
            "dram__bytes_write.sum": self.dram_write,
            "dram__bytes.sum": dram,
            "dram__bytes.sum.per_second": dram / seconds if seconds else 0.0,
            "gpusim__l2_dirty_bytes_at_end": self.dirty_bytes(),
            "gpusim__l2_capacity_bytes": sum(cache.capacity_bytes for cache in self.l2),
            **self._shadow_metrics(),
            "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum": self.smem_wavefronts,
            "gpusim__l1tex_data_wavefronts_async": self.async_wavefronts,
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum": conflicts,
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": self.smem_conflicts_ld,
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": self.smem_conflicts_st,
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_atom.sum": self.smem_conflicts_atom,
            "gpgpu_n_shmem_bkconflict": conflicts,
            "gpusim__l1_capacity_bytes": self.l1_bytes,
            "gpusim__mshr_full_events": self.mshr_stalls,
            "gpusim__memory_insts_without_addresses": self.no_address,
            "l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum": self.ldgsts_requests,
            "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum": self.ldgsts_sectors,
            "gpusim__bulk_copies": self.bulk_copies,
            "gpusim__bulk_copy_bytes": self.bulk_bytes,
            "gpusim__bulk_copy_multicast_bytes": self.bulk_multicast_bytes,
            "l1tex__t_requests_pipe_lsu_mem_dshared_op_ld.sum": self.dsmem_requests[0],
            "l1tex__t_requests_pipe_lsu_mem_dshared_op_st.sum": self.dsmem_requests[1],
            "l1tex__t_requests_pipe_lsu_mem_dshared_op_atom.sum": self.dsmem_requests[2],
            "l1tex__t_sectors_pipe_lsu_mem_dshared_op_ld.sum": self.dsmem_sectors[0],
            "l1tex__t_sectors_pipe_lsu_mem_dshared_op_st.sum": self.dsmem_sectors[1],
            "l1tex__t_sectors_pipe_lsu_mem_dshared_op_atom.sum": self.dsmem_sectors[2],
            "l1tex__t_bytes_pipe_lsu_mem_dshared.sum": dsmem_bytes,
            "gpusim__load_latency_l1_hit": avg(L1),
            "gpusim__load_latency_l2_hit": avg(L2),
            "gpusim__load_latency_dram": avg(DRAM),
        }
