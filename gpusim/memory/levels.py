"""The levels of the memory hierarchy that serve a load, as the codes its MSHR entries and latency counts use."""

from __future__ import annotations

from typing import Final

L1: Final = 0
L2: Final = 1
L2_IN_FLIGHT: Final = 2  # at the L2, merged with a DRAM read of the line already in flight: waits for its data
DRAM: Final = 3
LEVEL_BITS: Final = 2  # an MSHR entry's level field (L1, L2, L2_IN_FLIGHT, DRAM)
LEVEL_MASK: Final = (1 << LEVEL_BITS) - 1
