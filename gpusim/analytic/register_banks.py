"""Register-file banks and the operand collector (seed 2.3.4): the extra cycles an instruction's source reads cost.

A sub-partition's register file is split into `banks` (pipelines.register_banks); register Rn is in bank
n % banks. In one cycle a bank delivers `reads_per_bank` 32-bit registers to each thread (Jia et al. measured two
64-bit banks on Volta and Turing: two registers per bank). An instruction whose distinct source registers put n
in one bank needs ceil(n / reads_per_bank) cycles to collect them: on those parts, only three sources in one bank
(FFMA R2, R4, R6, R8) cost one extra cycle. Destinations are written later and do not count; a register read
twice by one instruction is read once.

Names: `R<n>` is physical register n. `RZ`, `PT`, `P<n>`, `UR<n>`, `URZ`, `UP<n>` are not in the banked file
(the zero register, predicates, uniform registers). Any other name (`acc`, `fa0`) is a virtual register that the
allocator places, as a bank-aware allocator (ptxas) does: the first time it is read with other registers by an
instruction that could conflict (more distinct sources than one bank delivers), it takes the bank that the fewest
of that instruction's other sources use (ties: the first such bank from crc32(name) % banks on), and keeps it for
the rest of the run. Placement depends only on the order instructions issue, so a run is reproducible.
"""

from __future__ import annotations

import re
import zlib

_NOT_BANKED = re.compile(r"(RZ|URZ|PT|UPT|U?P\d+|UR\d+)\Z")
_PHYSICAL = re.compile(r"R(\d+)\Z")
NOT_BANKED = -1


class RegisterBanks:
    """The bank of each register name in one run, and the conflict cycles of a list of sources."""

    def __init__(self, banks: int, reads_per_bank: int):
        if banks < 1 or reads_per_bank < 1:
            raise ValueError(f"register banks: expected at least one bank and one read per bank, got {banks} "
                             f"banks of {reads_per_bank}")
        self.banks = banks
        self.reads_per_bank = reads_per_bank
        self.bank_of: dict[str, int] = {}  # name -> bank, or NOT_BANKED
        # extra cycles by the source list's number (gpusim.isa.inst.source_list; -1: not yet worked out): once every
        # name of a list is placed its answer never changes, and a workload's dynamic instructions repeat a few
        # static source lists (each warp-instruction is a new object); the engine reads it by index
        self.known_lists: list[int] = []

    def conflicts(self, inst) -> int:
        """Extra operand-collector cycles of a warp-instruction's sources (one whose list is not in known_lists
        yet), cached on the instruction (shared instruction objects are counted once) and by its list's number."""
        cycles = self.extra_cycles(inst.src)
        inst.bank_conflicts = cycles
        known = self.known_lists
        number = inst.src_list
        if number >= len(known):
            known.extend([-1] * (number + 1 - len(known)))
        known[number] = cycles
        return cycles

    def extra_cycles(self, names) -> int:
        """Cycles beyond the first that reading these source registers takes."""
        reads = self.reads_per_bank
        if len(names) <= reads:
            return 0
        distinct = list(dict.fromkeys(names))
        if len(distinct) <= reads:
            return 0
        counts = [0] * self.banks
        unplaced = []
        for name in distinct:
            bank = self.bank_of.get(name)
            if bank is None:
                bank = self._fixed_bank(name)
                if bank is None:
                    unplaced.append(name)
                    continue
                self.bank_of[name] = bank
            if bank != NOT_BANKED:
                counts[bank] += 1
        for name in unplaced:
            self.bank_of[name] = bank = self._place(name, counts)
            counts[bank] += 1
        worst = max(counts)
        return -(-worst // reads) - 1 if worst > reads else 0

    def _fixed_bank(self, name: str) -> int | None:
        """A physical register's bank, NOT_BANKED for names outside the banked file, None for a virtual one."""
        if _NOT_BANKED.match(name):
            return NOT_BANKED
        physical = _PHYSICAL.match(name)
        if physical:
            return int(physical.group(1)) % self.banks
        return None

    def _place(self, name: str, counts: list[int]) -> int:
        """The bank the allocator gives a virtual register: the least used by the instruction's other sources."""
        fewest = min(counts)
        start = zlib.crc32(name.encode()) % self.banks
        for step in range(self.banks):
            bank = (start + step) % self.banks
            if counts[bank] == fewest:
                return bank
        return start  # (unreachable: some bank holds the fewest)
