"""An SM's shared-memory banks: the wavefronts a warp's shared-memory access takes through them (its bank
conflicts: gpusim.analytic.banks), and the passes that bytes moved at their full width take through the SM's
L1TEX data stage, `banks x bank_width` bytes a pass."""

from __future__ import annotations

from ..analytic.banks import atomic_wavefronts, ideal_wavefronts, wavefronts
from ..isa.inst import WarpInst
from .coalescer import MEMO_LIMIT


class SharedMemoryBanks:
    def __init__(self, banks: int, bank_width: int):
        self.banks = banks
        self.bank_width = bank_width
        # by lane pattern (a shared bytes object, its hash kept), then by width, atomic, mask and first lane's row
        # offset packed into one int: no tuple made or hashed per access
        self.memo: dict[bytes, dict[int, tuple[int, int]]] = {}
        self.memo_size = 0
        # the bytes one row of the banks holds: moving every lane by a multiple of it moves no word to another bank
        # and keeps distinct words distinct, so an access's conflicts depend on its first lane's address modulo it
        self.row_bytes: int = banks * bank_width
        self.row_bits: int = self.row_bytes.bit_length()  # a memo key's low bits: the first lane's offset in its row

    def wavefronts(self, inst: WarpInst) -> tuple[int, int]:
        """(wavefronts a shared-memory access takes through the banks, the fewest its width and lanes allow)."""
        info, mask = inst.info, inst.mask
        atomic = info.is_atomic
        base, offsets = inst.address_key()
        # lane offsets are per-block patterns, shared objects: they repeat, and so do the first lane's rows
        by_pattern = self.memo.get(offsets)
        if by_pattern is None:
            by_pattern = self.memo[offsets] = {}
        key = (mask << 17 | info.width << 1 | (1 if atomic else 0)) << self.row_bits | base % self.row_bytes
        wf = by_pattern.get(key)
        if wf is None:
            if self.memo_size > MEMO_LIMIT:
                self.memo.clear()
                by_pattern = self.memo[offsets] = {}
                self.memo_size = 0
            count = atomic_wavefronts if atomic else wavefronts
            wf = by_pattern[key] = (count(inst.addrs, info.width, mask, self.banks, self.bank_width),
                                    ideal_wavefronts(info.width, mask, self.banks, self.bank_width))
            self.memo_size += 1
        return wf

    def passes(self, nbytes: int) -> int:
        """Data-stage passes `nbytes` take at the banks' full width (a conflict-free, swizzled layout)."""
        return -(-nbytes // (self.banks * self.bank_width))
