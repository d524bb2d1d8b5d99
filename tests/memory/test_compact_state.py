"""The engine's compact state against the plain structures it stands for: a sectored LRU cache kept as flat arrays
of native ints (scanned, or at 32 ways and more found through a line table, its sets in linked use order) against a
table per set in use order, a line table against a dict, a warp's scoreboard by register slot against a dict by
name, an MSHR table's heap of ready cycles against a sorted list. Driven with operations hypothesis draws (lines crowding few sets, so sets fill and
evict), each must answer every question exactly as the plain one does."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpusim.engine.timing import BOARD_BITS
from gpusim.engine.warp import Scoreboard, operands_ready
from gpusim.isa.inst import REGISTER_SLOTS, WarpInst, register_slot
from gpusim.isa.opcodes import lookup
from gpusim.memory.cache import SectoredCache
from gpusim.memory.levels import DRAM
from gpusim.memory.line_table import MISSING, LineTable
from gpusim.memory.mshr import MshrTable

SECTOR_COUNT = [m.bit_count() for m in range(256)]  # sectors set in a mask, by mask


class PlainLru:
    """A sectored LRU cache as a dict per set in use order (the least recently used line first)."""

    def __init__(self, sets: int, ways: int, shift: int):
        self.sets, self.ways, self.shift = sets, ways, shift
        self.table: list[dict[int, int]] = [{} for _ in range(sets)]
        self.evicted_line = -1

    def probe(self, line: int, mask: int) -> int:
        lines = self.table[line % self.sets]
        state = lines.get(line)
        if state is None:
            return 0
        present = state & mask
        if present:
            del lines[line]
            lines[line] = state
        return present

    def fill(self, line: int, mask: int, dirty: bool) -> int:
        lines = self.table[line % self.sets]
        evicted, state = 0, 0
        if line in lines:
            state = lines.pop(line)
        elif len(lines) >= self.ways:
            oldest = next(iter(lines))
            evicted = lines.pop(oldest) >> self.shift
            if evicted:
                self.evicted_line = oldest
        state |= mask | (mask << self.shift if dirty else 0)
        lines[line] = state
        return evicted

    def lines(self) -> dict[int, int]:
        return {line: state for lines in self.table for line, state in lines.items()}


_operation = st.tuples(st.sampled_from(["probe", "fill", "dirty"]), st.integers(0, 40), st.integers(1, 15))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([(4, 2), (2, 4), (1, 8), (8, 1)]), st.lists(_operation, max_size=300))
def test_a_cache_in_native_arrays_hits_and_evicts_as_lru_in_use_order(shape, operations):
    _drive(shape, operations)


_crowding = st.tuples(st.sampled_from(["probe", "fill", "dirty"]), st.integers(0, 150), st.integers(1, 15))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([(1, 32), (2, 32), (1, 64), (3, 40)]), st.lists(_crowding, max_size=600))
def test_an_indexed_cache_hits_and_evicts_as_lru_in_use_order(shape, operations):
    """Ways enough that look-ups go through the line table and evictions take the head of the set's use order."""
    assert SectoredCache(shape[0] * shape[1] * 128, 128, 32, shape[1]).indexed
    _drive(shape, operations)


def _drive(shape, operations):
    sets, ways = shape
    cache = SectoredCache(sets * ways * 128, 128, 32, ways)
    plain = PlainLru(sets, ways, cache.dirty_shift)
    for kind, line, mask in operations:
        if kind == "probe":
            assert cache.probe(line, mask) == plain.probe(line, mask)
        else:
            assert cache.fill(line, mask, kind == "dirty") == plain.fill(line, mask, kind == "dirty")
            assert cache.evicted_line == plain.evicted_line
        assert cache.held_in_set(line) == len(plain.table[line % sets])
    assert dict(cache.lines()) == plain.lines()
    assert cache.dirty_sectors(SECTOR_COUNT) == sum(SECTOR_COUNT[state >> cache.dirty_shift]
                                                    for state in plain.lines().values())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.tuples(st.just("put"), st.integers(0, 1 << 40), st.integers(0, 1 << 20)),
                          st.tuples(st.just("near"), st.integers(0, 300), st.integers(0, 1 << 20)),
                          st.tuples(st.just("keep"), st.integers(0, 1 << 12), st.just(0)),
                          st.tuples(st.just("remove"), st.integers(0, 300), st.just(0))), max_size=400))
def test_a_line_table_holds_what_a_dict_holds(operations):
    """Puts of far and of neighbouring lines (runs that probe past each other), single removals among them, bulk
    drops past a floor."""
    table, plain = LineTable(), {}
    for kind, line, value in operations:
        if kind in ("put", "near"):
            table.put(line, value)
            plain[line] = value
        elif kind == "remove":
            table.remove(line)
            plain.pop(line, None)
        else:
            table.keep_after(line, 8)  # (line: the floor here)
            plain = {k: v for k, v in plain.items() if v >> 8 > line}
        assert len(table) == len(plain)
    for line, value in plain.items():
        assert table.get(line) == value
    for line in range(0, 300):
        assert table.get(line) == plain.get(line, MISSING)


def test_a_scoreboard_by_slot_reads_as_one_by_name():
    """Entries by register slot, 0 for a register never written; a register first named after the scoreboard was
    made (a slot past its end) grows it; what a warp waits for is the latest entry of its sources and
    destinations."""
    board = Scoreboard()
    info = lookup("FFMA")
    early = WarpInst(info, 0, 0, 0, 0xFFFFFFFF, ("r_compact_a",), ("r_compact_b", "r_compact_c"), None)
    board.write(early.dst_slots, 50 << BOARD_BITS | 1)
    fresh = f"r_compact_new_{len(REGISTER_SLOTS)}"  # a name no instruction has used in this process yet
    late = WarpInst(info, 0, 0, 16, 0xFFFFFFFF, (fresh,), ("r_compact_a",), None)
    assert register_slot(fresh) >= len(board.entries) - 1
    board.write(late.dst_slots, 90 << BOARD_BITS | 2)
    assert board.entry("r_compact_a") >> BOARD_BITS == 50 and board.entry(fresh) >> BOARD_BITS == 90
    assert board.entry("r_compact_b") == 0 and board.entry("never_named_anywhere") == 0
    assert board.latest() == 90
    assert operands_ready(board, late, 10)[0] == 90  # its destination's pending write
    reader = WarpInst(info, 0, 0, 32, 0xFFFFFFFF, ("r_compact_b",), ("r_compact_a", "r_compact_c"), None)
    assert operands_ready(board, reader, 10)[0] == 50 and operands_ready(board, reader, 70)[0] == 70


def test_a_line_table_removal_moves_back_a_run_that_wrapped_past_the_end():
    """Lines whose home is the last slot probe on into slots 0, 1, ...: removing the first keeps the rest found."""
    table = LineTable()
    last = table.mask
    homed = [line for line in range(200_000) if table.home(line) == last][:3]
    others = [line for line in range(200_000) if table.home(line) == 0][:1]
    for value, line in enumerate(homed + others):
        table.put(line, value)
    table.remove(homed[0])
    assert [table.get(line) for line in homed] == [MISSING, 1, 2]
    assert table.get(others[0]) == 3 and len(table) == 3


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 24), st.lists(st.tuples(st.integers(0, 60), st.integers(1, 30), st.integers(0, 400)),
                                    max_size=120))
def test_an_mshr_tables_completion_heap_waits_as_a_sorted_list_of_ready_cycles_would(limit, operations):
    # each step: a reservation of `needed` entries at `now`, then a miss whose data is back `after` cycles later;
    # the table keeps its ready cycles in a heap, the plain one sorted: every wait must be the same
    table, plain, now = MshrTable(limit, 4), [], 0
    for step, (advance, needed, after) in enumerate(operations):
        now += advance
        plain = [ready for ready in plain if ready > now]
        live = len(plain)
        expected = 0 if live + needed <= limit or not live else \
            max(0, plain[min(live - 1, live + needed - limit - 1)] - now)
        assert table.reserve(needed, now) == expected
        assert table.ready_cycles() == plain
        table.add(step, 15, now + after, DRAM, now, now)
        plain = sorted(plain + [now + after])
