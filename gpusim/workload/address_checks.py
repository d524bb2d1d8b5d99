"""Where a warp's addresses may point, and the one-line errors for those that may not: whole byte addresses
below 2^62, inside one of the kernel's declared buffers (sorted (bases, ends, names) ranges per memory space).
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np

from ..errors import shorten
from .program import Instr
from .yamlio import WorkloadError


def bad_address(node: Instr, problem: str):
    raise WorkloadError(f"{node.addr.where}: {shorten(node.addr.text)}: {problem}")


def whole_addresses(node: Instr, addrs: np.ndarray) -> np.ndarray:
    """Addresses as int64: whole, finite numbers below 2^62 (a float or unsigned result is checked first)."""
    kind = addrs.dtype.kind
    if kind == "f":
        finite = np.isfinite(addrs)
        values = np.where(finite, addrs, 0.5)  # (a non-finite one fails as a fraction would)
        ok = (np.mod(values, 1) == 0) & (np.abs(values) < 2.0**62)
        if ok.all():
            return addrs.astype(np.int64)
        got = shorten(addrs[~ok].flat[0].item())
    elif kind in "iu":
        if kind == "i" or not addrs.size or int(addrs.max()) < 2**62:
            return addrs.astype(np.int64)
        got = shorten(int(addrs.max()))
    else:
        got = "true/false" if kind == "b" else "a number too large for 64 bits"
    bad_address(node, f"addresses must be whole byte addresses below 2^62, got {got}")


def within_ranges(ranges, lo: int, end: int) -> bool:
    """Whether bytes lo .. end-1 lie in one of the (sorted bases, ends, names) ranges."""
    bases, ends, _ = ranges
    i = bisect_right(bases, lo) - 1
    return i >= 0 and end <= ends[i]


def why_outside(ranges, address: int, width: int, space: str) -> str:
    """Why an access lies outside the declared memory, naming the nearest buffer."""
    bases, ends, names = ranges
    if space == "shared":
        return f"shared address {address} ({width}-byte access) is outside the block's {ends[0]:,} bytes of " \
               f"shared memory"
    if not bases:
        return f"global address {address:#x} ({width}-byte access): the workload declares no global buffer"
    i = max(0, bisect_right(bases, address) - 1)
    return f"global address {address:#x} ({width}-byte access) is outside every global buffer: it is " \
           f"{address - bases[i]:,} bytes from the start of '{names[i]}', which holds {ends[i] - bases[i]:,}"
