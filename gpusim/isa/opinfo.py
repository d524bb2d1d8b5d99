"""What one opcode is (the table in opcodes.py makes them): its pipeline class and, for memory, its space and width.

Compiled with the engine (see gpusim/native.py) as a native class, so the engine reads its fields without a
Python attribute lookup: the memory model reads four or five of them per access. Instances are values: equal
when every field is, and hashed by them. Nothing stops a change to a field (an attrs frozen class did, at the
cost of those lookups): the opcode table makes them and nothing changes them after.
"""

from __future__ import annotations

from typing import Final

# A number for each opcode name this process has seen (init-time only): what the engine's per-opcode tables are
# indexed by, a list read rather than a string hashed per instruction. A process keeps every name it has seen (a
# kernel has tens; a long-lived process running many kernels, a few hundred).
OPCODE_NUMBERS: Final[dict[str, int]] = {}


class OpInfo:
    opcode: str  # the full name, modifiers included
    base: str
    pipeline: str  # one of opcodes.PIPELINE_CLASSES
    space: str | None  # global / shared / local / const for memory instructions
    width: int  # bytes per lane for memory instructions, 0 otherwise
    is_store: bool
    is_atomic: bool
    mma_flops: int  # FLOP per warp-instruction for MMA opcodes with a shape, 0 otherwise
    number: int  # the opcode name's number in this process (OPCODE_NUMBERS): not a field, not compared or pickled

    def __init__(self, opcode: str, base: str, pipeline: str, space: str | None, width: int, is_store: bool,
                 is_atomic: bool, mma_flops: int) -> None:
        self.opcode = opcode
        self.base = base
        self.pipeline = pipeline
        self.space = space
        self.width = width
        self.is_store = is_store
        self.is_atomic = is_atomic
        self.mma_flops = mma_flops
        number = OPCODE_NUMBERS.get(opcode)
        if number is None:
            number = OPCODE_NUMBERS[opcode] = len(OPCODE_NUMBERS)
        self.number = number

    @property
    def is_memory(self) -> bool:
        return self.space is not None

    def fields(self) -> tuple[str, str, str, str | None, int, bool, bool, int]:
        return (self.opcode, self.base, self.pipeline, self.space, self.width, self.is_store, self.is_atomic,
                self.mma_flops)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OpInfo) and self.fields() == other.fields()

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.fields())

    def __repr__(self) -> str:
        return (f"OpInfo(opcode={self.opcode!r}, base={self.base!r}, pipeline={self.pipeline!r}, "
                f"space={self.space!r}, width={self.width!r}, is_store={self.is_store!r}, "
                f"is_atomic={self.is_atomic!r}, mma_flops={self.mma_flops!r})")

    def __reduce__(self) -> tuple[type, tuple[str, str, str, str | None, int, bool, bool, int]]:
        return OpInfo, self.fields()


__all__ = ["OpInfo"]
