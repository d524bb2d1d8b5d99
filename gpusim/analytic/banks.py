"""Shared-memory bank conflicts (pure functions).

Shared memory has `banks` banks of `bank_width` bytes; word w lives in bank w % banks. A warp's access is
served in phases: 4-byte (and narrower) accesses in one phase of 32 lanes, 8-byte accesses in two phases of 16
lanes (half-warps), 16-byte accesses in four phases of 8 lanes (quarter-warps). Within a phase the cost is the
largest number of *distinct* words any one bank must deliver (lanes reading the same word share it: a
broadcast, not a conflict). Each phase costs at least one wavefront; extra wavefronts are bank conflicts.
"""

from __future__ import annotations

import math

import numpy as np

from .coalesce import active_lanes


def phases_for(width: int, banks: int = 32, bank_width: int = 4, warp_size: int = 32) -> int:
    """Phases a full warp's access of `width` bytes is split into (1, 2 or 4 for 4/8/16 bytes)."""
    return max(1, math.ceil(width * warp_size / (banks * bank_width)))


def phase_degree(words: np.ndarray, banks: int) -> int:
    """Largest number of distinct words mapped to one bank (0 for an empty phase)."""
    if words.size == 0:
        return 0
    distinct = np.unique(words)
    return int(np.bincount(distinct % banks).max())


def wavefronts(addrs: np.ndarray, width: int, mask: int, banks: int = 32, bank_width: int = 4) -> int:
    """Wavefronts (shared-memory passes) one warp-level access takes."""
    lanes = len(addrs)
    phases = phases_for(width, banks, bank_width, lanes)
    per_phase = lanes // phases
    words_per_access = max(1, width // bank_width)
    active = active_lanes(mask, lanes)
    total = 0
    for p in range(phases):
        sel = active[p * per_phase:(p + 1) * per_phase]
        a = addrs[p * per_phase:(p + 1) * per_phase][sel]
        if a.size == 0:
            continue
        first = a // bank_width
        words = (first[:, None] + np.arange(words_per_access)).ravel() if words_per_access > 1 else first
        total += max(1, phase_degree(words, banks))
    return total


def atomic_wavefronts(addrs: np.ndarray, width: int, mask: int, banks: int = 32, bank_width: int = 4) -> int:
    """Wavefronts a shared-memory atomic (ATOMS) takes: as `wavefronts`, except that lanes updating the same
    word do not share it (an update is no broadcast): each is its own read-modify-write of the word, so the
    cost is the largest number of active lanes whose words fall in one bank, per phase."""
    lanes = len(addrs)
    phases = phases_for(width, banks, bank_width, lanes)
    per_phase = lanes // phases
    active = active_lanes(mask, lanes)
    total = 0
    for p in range(phases):
        a = addrs[p * per_phase:(p + 1) * per_phase][active[p * per_phase:(p + 1) * per_phase]]
        if a.size:
            total += int(np.bincount((a // bank_width) % banks).max())
    return total


def ideal_wavefronts(width: int, mask: int, banks: int = 32, bank_width: int = 4, warp_size: int = 32) -> int:
    """Wavefronts a conflict-free access with this width and mask takes (one per phase with active lanes)."""
    phases = phases_for(width, banks, bank_width, warp_size)
    per_phase = warp_size // phases
    return sum(1 for p in range(phases) if (mask >> (p * per_phase)) & ((1 << per_phase) - 1))


def conflict_degree(stride_words: int, banks: int = 32) -> int:
    """Ways of conflict for 4-byte accesses at a word stride: gcd(stride, banks)."""
    return math.gcd(stride_words, banks)
