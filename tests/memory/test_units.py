"""The memory hierarchy's units on their own: an SM's port to L2, a DRAM channel, an L2 slice and an SM's L1, each
driven directly with requests written here. Each test states the unit's rule (a rate it never exceeds, data never
ready before it arrives, bytes counted once); the hierarchy test at the end checks that its counters are the units'
summed."""

from __future__ import annotations

import pytest

import gpusim
from gpusim.memory.dram_channel import DramChannel
from gpusim.memory.hierarchy import MemoryHierarchy
from gpusim.memory.l1 import L1
from gpusim.memory.l2_slice import L2Slice
from gpusim.memory.l2_tags import line_hash
from gpusim.memory.levels import DRAM, L2, L2_IN_FLIGHT
from gpusim.memory.mshr import MshrTable
from gpusim.memory.sm_port import SmPort

SECTOR_COUNT = [m.bit_count() for m in range(16)]  # sectors set in a 4-sector line mask, by mask
FULL = 0b1111


def test_an_sm_port_queues_requests_at_its_rate_and_counts_a_multicast_once():
    port = SmPort(64.0)
    leaves = [port.send(128, 100) for _ in range(4)]  # four 128-byte requests at one cycle: 2 cycles apart
    assert leaves == [100, 102, 104, 106]
    assert port.bytes == 512
    assert port.send(32, 100, counted=False) == 108 and port.bytes == 512  # queued behind them, not counted again
    assert port.send(64, 500) == 500  # an idle port takes a request at once


def test_a_dram_channel_reads_and_writes_back_at_its_efficiencies_in_arrival_order():
    channel = DramChannel(32.0, read_efficiency=0.5, write_efficiency=0.25)  # 16 B a clock reading, 8 writing
    assert channel.read(160, 10.0) == pytest.approx(20.0)
    assert channel.read(160, 12.0) == pytest.approx(30.0)  # behind the first read
    channel.write_back(80, 5)  # a write-back at an earlier cycle still waits for the channel
    assert channel.free == pytest.approx(40.0)
    assert channel.read(16, 100.0) == pytest.approx(101.0)
    assert (channel.read_bytes, channel.write_bytes) == (336, 80)


def _slice(channels=None, ways=2, sets=2, rate=64.0, hit=100, dram=300) -> L2Slice:
    channels = channels if channels is not None else [DramChannel(32.0, 1.0, 1.0)]
    return L2Slice(sets * ways * 128, 128, 32, ways, rate, hit, dram, 4, SECTOR_COUNT, 4, channels)


def test_an_l2_slice_merges_a_request_for_a_line_in_flight_and_hits_once_it_is_back():
    l2 = _slice()
    back, level = l2.access(7, line_hash(7), FULL, 1000, False, 0, 0)
    assert level == DRAM and back >= 1000 + 300
    l2.pend(7, l2.missing, back, 1000, 1000)
    merged, level = l2.access(7, line_hash(7), FULL, 1050, False, 0, 0)
    assert level == L2_IN_FLIGHT and merged >= back  # never before the data it waits for
    assert l2.merged == 4 and l2.channels[0].read_bytes == 128  # read from DRAM once
    hit, level = l2.access(7, line_hash(7), FULL, back + 10, False, 0, 0)
    assert level == L2 and hit >= back + 10 + 100
    assert l2.hits == 4 and l2.sectors == 12


def test_an_l2_slice_serves_its_bandwidth_in_arrival_order():
    l2 = _slice(rate=32.0)  # one sector a clock
    for line in (1, 2, 3):
        l2.access(line, line_hash(line), FULL, 0, True, 0, 0)  # plain writes: no DRAM read
    assert l2.free == pytest.approx(12.0)  # three full lines, 4 cycles each, back to back
    assert l2.channels[0].read_bytes == 0


def test_an_l2_slice_writes_an_evicted_dirty_line_back_to_its_own_channel():
    channels = [DramChannel(32.0, 1.0, 1.0) for _ in range(2)]
    l2 = _slice(channels=channels, ways=1, sets=1)  # one line
    l2.access(10, line_hash(10), FULL, 0, True, 0, 0)  # dirty
    l2.access(11, line_hash(11), 0b0011, 50, False, 0, 0)  # a read of another line evicts it
    assert channels[line_hash(10) % 2].write_bytes == 128
    assert channels[line_hash(10) % 2 ^ 1].write_bytes == 0
    assert sum(c.read_bytes for c in channels) == 64


def test_an_l1_merges_with_its_misses_in_flight_and_reports_what_it_missed():
    l1 = L1(4 * 128, 128, 32, 4, 8, 30)
    ready = l1.look_up(100, ((0, 0b0011), (1, FULL)), now=0, ready=33, allocate=True, count=SECTOR_COUNT)
    assert ready == 33 and l1.last_misses() == [(100, 0b0011), (101, FULL)]
    l1.mshrs.add(100, 0b0011, 400, DRAM, 0, 0)  # the first line's sectors are in flight until 400
    ready = l1.look_up(100, ((0, 0b0111),), now=10, ready=43, allocate=True, count=SECTOR_COUNT)
    assert ready == 400 and l1.merged == 2  # its two sectors in flight: not before they arrive
    assert l1.last_misses() == [(100, 0b0100)]  # the third is its own miss
    l1.cache.fill(101, FULL)
    l1.look_up(101, ((0, FULL),), now=20, ready=53, allocate=True, count=SECTOR_COUNT)
    assert l1.sector_hits == 4 and l1.last_misses() == []


def test_an_mshr_entry_stays_in_flight_for_a_request_queued_behind_a_later_one():
    # sub-partitions reach the L1 with their own queues' start cycles, not in time order: one at 1,000 frees the
    # entries back by then, and a request another one queued for 900 still meets a line due back at 950
    l1 = L1(4 * 128, 128, 32, 4, 8, 30)
    l1.mshrs.add(100, FULL, 950, DRAM, 0, 0)
    assert l1.mshrs.reserve(1, 1000) == 0
    ready = l1.look_up(100, ((0, FULL),), now=900, ready=933, allocate=True, count=SECTOR_COUNT)
    assert ready == 950 and l1.last_misses() == [] and l1.merged == 4
    ready = l1.look_up(100, ((0, FULL),), now=960, ready=993, allocate=True, count=SECTOR_COUNT)
    # back by 960: no longer in flight (and not yet filled)
    assert ready == 993 and [line for line, _ in l1.last_misses()] == [100]


def test_an_mshr_table_waits_for_the_entry_that_frees_room_and_forgets_returned_entries():
    table = MshrTable(4, 4)
    for line, ready in ((1, 500), (2, 300), (3, 400), (4, 600)):
        table.add(line, FULL, ready, DRAM, 0, 0)
    assert table.ready_cycles() == [300, 400, 500, 600]  # in flight, by the cycle they are back
    assert table.reserve(1, 100) == 200  # full: the first to come back frees one at 300
    assert table.reserve(2, 100) == 300 and table.stalls == 2
    assert table.reserve(2, 450) == 0  # two are back by then
    for line in range(10, 100):  # stale entries are dropped in bulk, so the table stays bounded
        table.reserve(1, 1000 * line)
        table.add(line, FULL, 1000 * line + 10, DRAM, 1000 * line, 1000 * line)
    assert len(table.entries) <= table.forget_at + 1 and len(table.due_back) < 128


def test_an_l1_data_stage_passes_one_wavefront_a_clock():
    l1 = L1(1024, 128, 32, 4, 8, 30)
    assert [l1.data_stage(4, 10), l1.data_stage(2, 10), l1.data_stage(1, 100)] == [10, 14, 100]
    assert l1.data_wavefronts == 7


def test_the_hierarchy_reports_its_units_counters_summed():
    spec = gpusim.load_arch("h100")
    memory = MemoryHierarchy(spec, 4, 256 * 1024)
    for line in range(64):
        memory._l2_access(line, FULL, 10 * line, write=line % 3 == 0)
    m = memory.metrics(1000)
    assert m["lts__t_sectors.sum"] == sum(s.sectors for s in memory.slices) == 256
    assert m["dram__bytes_read.sum"] == sum(c.read_bytes for c in memory.channels) > 0
    assert m["lts__t_sector_hit_rate.pct"] == 0.0  # every line touched once
