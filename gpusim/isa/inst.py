"""One warp-instruction: what the engine issues (the YAML walker and the trace reader both make them).

Compiled with the engine (see gpusim/native.py), so its fields are typed: the engine reads them every issue.
"""

from __future__ import annotations

from typing import Any, Callable, Final, cast

from librt.vecs import vec
from mypy_extensions import i64

from .lanes import active_lanes
from .opinfo import OpInfo

# Every register name an instruction of this process has read or written, and its slot: a warp's scoreboard is an
# array of native ints indexed by slot (gpusim.engine.warp.Scoreboard), and an instruction carries its registers'
# slots beside their names. Names come from the programs and traces run: a few hundred for one workload; a process
# that runs many keeps every name it has seen (and each warp's scoreboard has a place for each).
REGISTER_SLOTS: Final[dict[str, int]] = {}
SLOTS_KEPT: Final = 4096  # register lists whose slots are remembered (register_slots)
_SLOTS_OF: dict[tuple[str, ...], vec[i64]] = {}


def register_slot(name: str) -> int:
    """The scoreboard slot of register `name` (a new one the first time the name is seen)."""
    slot = REGISTER_SLOTS.get(name)
    if slot is None:
        slot = len(REGISTER_SLOTS)
        REGISTER_SLOTS[name] = slot
    return slot


def register_slots(names: tuple[str, ...]) -> vec[i64]:
    """The scoreboard slots of `names`, in order (remembered per list of names)."""
    found = _SLOTS_OF.get(names)
    if found is None:
        found = vec[i64]([register_slot(name) for name in names])
        if len(_SLOTS_OF) >= SLOTS_KEPT:
            _SLOTS_OF.clear()
        _SLOTS_OF[names] = found
    return found


SOURCE_LISTS: Final[dict[tuple[str, ...], int]] = {}  # each list of source registers seen: its number


def source_list(names: tuple[str, ...]) -> int:
    """The number of the source-register list `names` (a new one the first time the list is seen): equal lists
    share it, so what depends on the list alone (its register-bank conflicts) is looked up by index."""
    number = SOURCE_LISTS.get(names)
    if number is None:
        number = len(SOURCE_LISTS)
        SOURCE_LISTS[names] = number
    return number


def lane_offsets(addrs: Any) -> tuple[int, bytes]:
    """(lane 0's address, every lane's offset from it as int64 bytes) for one warp's 32-lane int64 addresses."""
    base = int(addrs[0])
    return base, (addrs - base).tobytes()


class AsyncOperands:
    """What an asynchronous or cluster instruction of a YAML workload says besides its registers
    (gpusim.engine.asynchrony and gpusim.engine.clusters read it): `pending` for DEPBAR / WARPGROUP.DEPBAR (groups
    that may stay in flight), `barrier` (an mbarrier's name in the block), `bytes` (a bulk copy's size, or the
    transaction bytes SYNCS.ARRIVE expects), `rows` and `pitch` (a bulk copy's rows and the bytes between their
    starts), `arrivals` (SYNCS.EXCH: arrivals per phase), `peer` (the rank in the cluster of the block whose shared
    memory or mbarrier an LDS / STS / ATOMS / SYNCS.ARRIVE reaches; -1: the warp's own block) and `multicast` (a
    bulk copy's destination blocks, a bit per rank; 0: its own block only; UTCBAR: the blocks of the CTA pair whose
    mbarrier it arrives on) and `columns` (UTCATOMSWS: the tensor-memory columns it allocates or frees). One shared
    object serves every instruction whose values are the same."""

    __slots__ = ("pending", "barrier", "bytes", "rows", "pitch", "arrivals", "peer", "multicast", "columns")

    def __init__(self, pending: int = 0, barrier: str = "", nbytes: int = 0, rows: int = 1, pitch: int = 0,
                 arrivals: int = 0, peer: int = -1, multicast: int = 0, columns: int = 0):
        self.pending, self.barrier, self.bytes = pending, barrier, nbytes
        self.rows, self.pitch, self.arrivals = rows, pitch, arrivals
        self.peer, self.multicast, self.columns = peer, multicast, columns

    def __repr__(self) -> str:
        return (f"AsyncOperands(pending={self.pending}, barrier={self.barrier!r}, bytes={self.bytes}, "
                f"rows={self.rows}, pitch={self.pitch}, arrivals={self.arrivals}, peer={self.peer}, "
                f"multicast={self.multicast}, columns={self.columns})")


class WarpInst:
    """`warp` is the issuing warp's global id; it is None on an instruction without addresses that a block
    walker hands to every warp of its block as one shared object (the engine knows which warp issues it; only
    per-lane local addresses need the id). `addrs` is a 32-lane int64 array, or None; a block walker gives its
    instructions the array of a whole chunk, `rows` (one row of 32 lanes per warp and instruction), and the row
    that is theirs, so the engine, which reads the addresses through `address_key`, makes no array view per
    instruction (`addrs` makes one when something asks). `operands`: what an asynchronous instruction of a YAML
    workload says besides its registers (None elsewhere, traces included). `bank_conflicts`: extra register-file
    read cycles its sources cost, -1 until the engine first counts them (once per object: shared instructions
    are counted once)."""

    __slots__ = ("info", "warp_id", "block", "pc", "mask", "dst", "src", "dst_slots", "src_slots", "_addrs", "_rows",
                 "_row", "_base", "_pattern", "operands", "bank_conflicts", "src_list")

    def __init__(self, info: OpInfo, warp: int | None, block: int, pc: int, mask: int, dst: tuple[str, ...],
                 src: tuple[str, ...], addrs: Any, address_key: tuple[int, bytes] | None = None,
                 operands: AsyncOperands | None = None, rows: Any = None, row: int = 0,
                 slots: tuple[vec[i64], vec[i64], int] | None = None):
        """`slots`: (dst_slots, src_slots, src_list), the registers' scoreboard slots and the number of the
        source list (None: looked up from the names)."""
        self.info = info
        self.warp_id: int = -1 if warp is None else warp  # (a native int: no object per instruction)
        self.block, self.pc, self.mask = block, pc, mask
        self.dst, self.src = dst, src
        if slots is None:
            self.dst_slots: vec[i64] = register_slots(dst)
            self.src_slots: vec[i64] = register_slots(src)
            self.src_list: int = source_list(src)
        else:
            self.dst_slots, self.src_slots, self.src_list = slots
        self._addrs, self._rows, self._row = addrs, rows, row
        # the address key's two parts held apart (a native int and the shared pattern): no tuple per instruction
        # for its release to touch
        self._base: int = 0
        self._pattern: bytes | None = None
        if address_key is not None:
            self._base, self._pattern = address_key
        self.operands = operands
        self.bank_conflicts = -1

    @property
    def warp(self) -> int | None:
        """The issuing warp's global id; None on an instruction shared by a block's warps."""
        return None if self.warp_id < 0 else self.warp_id

    @property
    def addrs(self) -> Any:
        """The 32 lanes' addresses (an int64 array), None for an instruction without addresses."""
        addrs = self._addrs
        if addrs is None and self._rows is not None:
            addrs = self._addrs = self._rows[self._row]
        return addrs

    def has_addresses(self) -> bool:
        """Whether it carries lane addresses (without making their array)."""
        return self._addrs is not None or self._rows is not None

    def address_key(self) -> tuple[int, bytes]:
        """(lane 0's address, every lane's offset from it as int64 bytes): the addresses in a form the memory
        model can hash and compare without numpy (its memos key on the offsets)."""
        pattern = self._pattern
        if pattern is None:
            self._base, pattern = lane_offsets(self.addrs)
            self._pattern = pattern
        return self._base, pattern

    @property
    def op(self) -> str:
        return self.info.opcode

    @property
    def pipeline(self) -> str:
        return self.info.pipeline

    @property
    def space(self) -> str | None:
        return self.info.space

    @property
    def width(self) -> int:
        return self.info.width

    @property
    def is_store(self) -> bool:
        return self.info.is_store

    @property
    def active_lanes(self) -> int:
        return self.mask.bit_count()

    def active_addresses(self) -> Any:
        """Addresses of the active lanes, in lane order (a numpy array)."""
        return self.addrs[active_lanes(self.mask, len(self.addrs))]

    def __repr__(self) -> str:
        return f"WarpInst(warp={self.warp}, pc={self.pc:#06x}, op={self.op}, mask={self.mask:#010x})"


class InstQueue:
    """A warp's instructions waiting to be issued, first in first out: a list read from a moving head (compiled,
    every operation is native, where a deque's are Python method calls). An item read is let go at once (its
    place set to None), so an instruction is freed as soon as the engine is done with it, while the host's caches
    still hold it; the places already read are dropped once they are more than half the list, so it stays at
    most twice what waits."""

    def __init__(self) -> None:
        self.items: list[WarpInst | None] = []
        self.head = 0

    def __len__(self) -> int:
        return len(self.items) - self.head

    def append(self, inst: WarpInst) -> None:
        self.items.append(inst)

    def extend(self, insts: list[WarpInst]) -> None:
        self.items.extend(insts)

    def pop(self) -> WarpInst | None:
        """The first instruction waiting (None: none is)."""
        items = self.items
        head = self.head
        if head >= len(items):
            return None
        inst = items[head]
        items[head] = None
        head += 1
        if head == len(items):
            items.clear()
            head = 0
        elif head >= 64 and 2 * head >= len(items):
            del items[:head]
            head = 0
        self.head = head
        return inst


class QueueStream:
    """A warp's instruction stream fed from a queue that `refill` tops up (False when the program has ended):
    how a block walker hands each warp its share. An iterator class rather than a generator, so the engine's
    `next()` on it is one native call."""

    def __init__(self, queue: InstQueue, refill: Callable[[], bool]):
        self.queue = queue
        self.refill = refill

    def __iter__(self) -> QueueStream:
        return self

    def __next__(self) -> WarpInst:
        inst = self.next_or_none()
        if inst is None:
            raise StopIteration
        return inst

    def next_or_none(self) -> WarpInst | None:
        """The next instruction, None when the stream has ended (the engine's `next(stream, None)`, natively)."""
        queue = self.queue
        inst = queue.pop()
        while inst is None:
            if not self.refill():
                return None
            inst = queue.pop()
        return inst


def next_inst(stream: Any) -> WarpInst | None:
    """A warp's next instruction from its stream, None when it has ended: a block walker's QueueStream natively,
    any other iterator (a trace's, independent thread scheduling's) through next()."""
    if type(stream) is QueueStream:
        return cast(QueueStream, stream).next_or_none()
    return next(stream, None)


def deal(queues: list[InstQueue], first_warp: int, block: int, info: OpInfo,
         rows: list[tuple[int, int, tuple[str, ...], tuple[str, ...], AsyncOperands | None, Any]], addrs: Any,
         keys: list[list[Any]] | None) -> None:
    """Append one chunk of a block walker's instructions, rows of (pc, mask, dst, src, operands, slots), to each
    warp's queue (slots: the registers' scoreboard slots, (dst, src)). Without addresses, one object per row serves
    every warp; else warp w gets row w * len(rows) + j of `addrs` (the chunk's addresses, one row of 32 lanes per
    warp and instruction) and its address key keys[w][j]: (lane 0's address, all lanes' offsets from it as int64
    bytes)."""
    if addrs is None:
        shared = [WarpInst(info, None, block, pc, mask, dst, src, None, None, operands, None, 0, slots)
                  for pc, mask, dst, src, operands, slots in rows]
        for queue in queues:
            queue.extend(shared)
        return
    assert keys is not None, "addresses come with their keys"
    count = len(rows)
    warps = len(queues)
    for j in range(count):  # (row by row: each row's tuple is read once; every queue still gets its rows in order)
        pc, mask, dst, src, operands, slots = rows[j]
        for w in range(warps):
            key: Any = keys[w][j]  # (the (base, pattern) tuple as it is: typed, it would be rebuilt per warp)
            queues[w].append(WarpInst(info, first_warp + w, block, pc, mask, dst, src, None, key, operands, addrs,
                                      w * count + j, slots))
