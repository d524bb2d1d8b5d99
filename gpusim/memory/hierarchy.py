"""The register -> L1 -> L2 -> DRAM model behind the engine's memory interface.

* Global and local loads are coalesced into 32-byte sectors. Each SM's L1 is sectored, set-associative and LRU,
  its capacity the unified L1 + shared memory minus the launch's shared-memory carveout; a miss allocates on
  fill, requests to a line already in flight merge in the MSHRs, and a full MSHR table holds the load/store
  pipe (lg_throttle). Stores are write-through and do not allocate in L1; atomics are performed at L2.
* L2 is split into slices by an address hash; each slice serves its share of the L2 bandwidth and queues
  what arrives faster. It is sectored, set-associative, LRU, write-back: dirty sectors cost DRAM writes when
  evicted.
* DRAM is a set of channels sharing the arch's bandwidth at the core clock, each with its own queue.
* Shared memory is served in wavefronts (banks.py); conflicts hold the MIO pipe and delay the data.

Latencies are the arch's load-to-use figures for each level (what pointer-chase benchmarks measure), plus any
queueing and transfer time. Requests arrive in nondecreasing time across the GPU, so queues stay causal.
"""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np

from ..analytic.banks import ideal_wavefronts, wavefronts
from ..analytic.coalesce import sector_list
from ..workload.inst import WarpInst, lane_offsets
from .cache import SectoredCache

L1, L2, DRAM = 0, 1, 2
LOCAL_BASE = 1 << 44  # where per-thread local memory is mapped (interleaved by lane, as the hardware does)
LOCAL_REGION = 1 << 24  # bytes of local memory address space per warp
_MEMO_LIMIT = 65536


def _hash(line: int) -> int:
    """Spread consecutive lines over slices and channels (an XOR-fold of the line number)."""
    return line ^ (line >> 7) ^ (line >> 13)


class MemoryHierarchy:
    def __init__(self, spec: Any, sms: int, l1_bytes: int):
        mem = spec.memory
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
        self.mshr: list[dict[int, tuple[int, int]]] = [{} for _ in range(sms)]  # line -> (data ready, level)
        self.mshr_order: list[list[tuple[int, int]]] = [[] for _ in range(sms)]  # (data ready, line), sorted
        slice_bytes = mem.l2.size_bytes // mem.l2.slices
        self.l2 = [SectoredCache(slice_bytes, mem.l2.line_bytes, mem.l2.sector_bytes, mem.l2.associativity)
                   for _ in range(mem.l2.slices)]
        self.slice_free: list[float] = [0.0] * mem.l2.slices
        self.slice_rate: float = mem.l2.bandwidth_bytes_per_clock / mem.l2.slices  # bytes per core clock
        dram_bytes_per_clock = mem.dram.bandwidth_gbs * 1e9 / (spec.clocks.core_mhz * 1e6)
        self.channel_free: list[float] = [0.0] * mem.dram.channels
        self.channel_rate: float = dram_bytes_per_clock / mem.dram.channels
        self.banks: int = spec.shared_memory.banks
        self.bank_width: int = spec.shared_memory.bank_width_bytes
        self.clock_hz = spec.clocks.core_mhz * 1e6
        self._bank_memo: dict[tuple[int, int, int, bytes], tuple[int, int]] = {}
        self._line_memo: dict[tuple[int, int, int, bytes], tuple[tuple[tuple[int, int], ...], int]] = {}
        # event counts (metrics() names them)
        self.ld_requests = 0
        self.ld_sectors = 0
        self.ld_sector_hits = 0
        self.st_requests = 0
        self.st_sectors = 0
        self.atom_requests = 0
        self.l2_sectors = 0
        self.l2_hits = 0
        self.dram_read = 0
        self.dram_write = 0
        self.smem_wavefronts = 0
        self.smem_conflicts_ld = 0
        self.smem_conflicts_st = 0
        self.smem_requests = 0
        self.mshr_stalls = 0
        self.no_address = 0
        self.latency_sum: list[int] = [0, 0, 0]
        self.latency_count: list[int] = [0, 0, 0]

    # --- the interface -------------------------------------------------------------------------------------
    def access(self, sm: int, inst: WarpInst, now: int) -> tuple[int, int]:
        info = inst.info
        space = info.space
        if inst.addrs is None:  # a traced access without lane addresses (predicated off): no data moves
            self.no_address += 1
            return now + (self.shared_latency if space == "shared" else self.l1_hit_latency), 0
        if space == "shared":
            return self._shared(inst, now)
        if space == "const":
            return now + self.l1_hit_latency, 0
        if space == "global":
            base, offsets = inst.address_key()
        else:
            base, offsets = lane_offsets(self._local(inst))
        by_line, sectors = self._lines(base, offsets, info.width, inst.mask)
        if info.is_atomic:
            return self._atomic(by_line, now)
        if info.is_store:
            return self._store(sm, by_line, sectors, now)
        return self._load(sm, by_line, sectors, now)

    # --- global / local ------------------------------------------------------------------------------------
    def _local(self, inst: WarpInst) -> Any:
        assert inst.warp is not None, "an instruction with addresses names its warp"
        lane = np.arange(len(inst.addrs), dtype=np.int64)
        a = inst.addrs
        return LOCAL_BASE + inst.warp * LOCAL_REGION + (a // 4) * 128 + lane * 4 + a % 4

    def _lines(self, base: int, offsets: bytes, width: int, mask: int) -> tuple[list[tuple[int, int]], int]:
        """([(line, mask of the sectors wanted in it)], number of sectors) for one warp-level access: lane 0 at
        `base`, the lanes' offsets from it as int64 bytes. The pattern relative to the first lane's line is
        computed once per (width, mask, offset in the line, lane offsets)."""
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
        return [(base_line + line, m) for line, m in relative], count

    def _load(self, sm: int, by_line: list[tuple[int, int]], sectors: int, now: int) -> tuple[int, int]:
        self.ld_requests += 1
        if not sectors:
            return now + self.l1_hit_latency, 0
        self.ld_sectors += sectors
        l1, mshr, count = self.l1[sm], self.mshr[sm], self.sector_count
        ready, level = now + self.l1_hit_latency, L1
        hits = 0
        missing: list[tuple[int, int]] = []
        for line, mask in by_line:
            present = l1.probe(line, mask)
            if present == mask:
                hits += count[mask]
                continue
            inflight = mshr.get(line)
            if inflight is not None and inflight[0] > now:  # merged with a request in flight
                hits += count[mask]
                if inflight[0] > ready:
                    ready = inflight[0]
                if inflight[1] > level:
                    level = inflight[1]
                continue
            hits += count[present]
            missing.append((line, mask & ~present))
        self.ld_sector_hits += hits
        extra = len(by_line) - 1  # one wavefront per line through the L1 data path
        if missing:
            extra += self._reserve_mshrs(sm, len(missing), now)
            order = self.mshr_order[sm]
            for line, mask in missing:
                t, lvl = self._l2_access(line, mask, now, write=False)
                mshr[line] = (t, lvl)
                bisect.insort(order, (t, line))
                l1.fill(line, mask)
                if t > ready:
                    ready = t
                if lvl > level:
                    level = lvl
        self.latency_sum[level] += ready - now
        self.latency_count[level] += 1
        return ready, extra

    def _reserve_mshrs(self, sm: int, needed: int, now: int) -> int:
        """Cycles the pipe must wait for `needed` MSHR entries (0 when enough are free). Entries are kept in
        completion order, so expired ones are dropped from the front."""
        mshr, order, limit = self.mshr[sm], self.mshr_order[sm], self.mshr_limit
        expired = 0
        while expired < len(order) and order[expired][0] <= now:
            t, line = order[expired]
            if mshr.get(line, (None,))[0] == t:
                del mshr[line]
            expired += 1
        if expired:
            del order[:expired]
        live = len(order)
        if live + needed <= limit:
            return 0
        self.mshr_stalls += 1
        return max(0, order[min(live - 1, live + needed - limit - 1)][0] - now)

    def _store(self, sm: int, by_line: list[tuple[int, int]], sectors: int, now: int) -> tuple[int, int]:
        self.st_requests += 1
        self.st_sectors += sectors
        if not sectors:
            return now + 1, 0
        done = now + 1
        for line, mask in by_line:
            t, _lvl = self._l2_access(line, mask, now, write=True)
            if t > done:
                done = t
        return done, len(by_line) - 1

    def _atomic(self, by_line: list[tuple[int, int]], now: int) -> tuple[int, int]:
        self.atom_requests += 1
        done = now + self.l2_hit_latency
        for line, mask in by_line:
            t, _lvl = self._l2_access(line, mask, now, write=True, atomic=True)
            if t > done:
                done = t
        return done, len(by_line) - 1

    # --- L2 and DRAM ---------------------------------------------------------------------------------------
    def _l2_access(self, line: int, mask: int, now: int, write: bool, atomic: bool = False) -> tuple[int, int]:
        """Serve the masked sectors of one line at its L2 slice; return (cycle the data is back, level)."""
        h = _hash(line)
        index = h % len(self.l2)
        cache = self.l2[index]
        count = self.sector_count[mask]
        free = self.slice_free[index]
        done = (free if free > now else now) + count * self.sector / self.slice_rate
        self.slice_free[index] = done
        self.l2_sectors += count
        present = cache.probe(line, mask)
        self.l2_hits += self.sector_count[present]
        queueing = done - now
        level, latency = L2, self.l2_hit_latency
        missing = mask & ~present
        if write and not atomic:  # write-back L2; a full-sector write needs no read from DRAM
            evicted = cache.fill(line, mask, dirty=True)
        elif missing:
            level, latency = DRAM, self.dram_latency
            channel = h % len(self.channel_free)
            read = self.sector_count[missing] * self.sector
            free = self.channel_free[channel]
            begin = free if free > done else done
            finish = begin + read / self.channel_rate
            self.channel_free[channel] = finish
            self.dram_read += read
            queueing = finish - now
            evicted = cache.fill(line, missing, dirty=write)
            if write:
                cache.fill(line, mask, dirty=True)
        else:
            evicted = cache.fill(line, mask, dirty=True) if write else 0
        if evicted:
            self._writeback(cache.evicted_line, evicted, now)
        wait = int(queueing)  # queueing >= 0: rounded up to whole cycles
        if wait < queueing:
            wait += 1
        return now + latency + wait, level

    def _writeback(self, line: int, dirty_mask: int, now: int) -> None:
        """An evicted line's dirty sectors go to DRAM: they take their channel's time from `now` on."""
        channel = _hash(line) % len(self.channel_free)
        nbytes = self.sector_count[dirty_mask] * self.sector
        free = self.channel_free[channel]
        self.channel_free[channel] = (free if free > now else now) + nbytes / self.channel_rate
        self.dram_write += nbytes

    # --- shared memory -------------------------------------------------------------------------------------
    def _shared(self, inst: WarpInst, now: int) -> tuple[int, int]:
        info, mask = inst.info, inst.mask
        base, offsets = inst.address_key()
        key = (info.width, mask, base, offsets)  # shared addresses are per-block offsets: patterns repeat
        wf = self._bank_memo.get(key)
        if wf is None:
            if len(self._bank_memo) > _MEMO_LIMIT:
                self._bank_memo.clear()
            wf = self._bank_memo[key] = (wavefronts(inst.addrs, info.width, mask, self.banks, self.bank_width),
                                         ideal_wavefronts(info.width, mask, self.banks, self.bank_width))
        waves, ideal = wf
        self.smem_requests += 1
        self.smem_wavefronts += waves
        if info.is_store:
            self.smem_conflicts_st += waves - ideal
        else:
            self.smem_conflicts_ld += waves - ideal
        return now + self.shared_latency + max(0, waves - 1), max(0, waves - ideal)

    # --- metrics -------------------------------------------------------------------------------------------
    def metrics(self, cycles: int) -> dict:
        # write-backs queued near the end can finish after the last warp: measure bandwidth over DRAM's busy window
        window = max([cycles] + self.channel_free)
        seconds = window / self.clock_hz if window else 0.0
        conflicts = self.smem_conflicts_ld + self.smem_conflicts_st
        dram = self.dram_read + self.dram_write

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
            "lts__t_sectors.sum": self.l2_sectors,
            "lts__t_sector_hit_rate.pct": pct(self.l2_hits, self.l2_sectors),
            "dram__bytes_read.sum": self.dram_read,
            "dram__bytes_write.sum": self.dram_write,
            "dram__bytes.sum": dram,
            "dram__bytes.sum.per_second": dram / seconds if seconds else 0.0,
            "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum": self.smem_wavefronts,
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum": conflicts,
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": self.smem_conflicts_ld,
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": self.smem_conflicts_st,
            "gpgpu_n_shmem_bkconflict": conflicts,
            "gpusim__l1_capacity_bytes": self.l1_bytes,
            "gpusim__mshr_full_events": self.mshr_stalls,
            "gpusim__memory_insts_without_addresses": self.no_address,
            "gpusim__load_latency_l1_hit": avg(L1),
            "gpusim__load_latency_l2_hit": avg(L2),
            "gpusim__load_latency_dram": avg(DRAM),
        }
