"""Independent thread scheduling (Volta and later, `--simt its`).

After a divergent branch both sides stay schedulable: the warp holds one path per side and, each time it
issues, takes the next instruction from whichever path's operands are ready first (ties: the taken side), so
one side can run while the other waits on memory. The sides reconverge at an explicit BSYNC once both have
ended. Nested divergence nests paths. The warp is still one scheduling entity with one state per cycle.

A warp's stream comes from its front end (a YAML kernel's `streams(its=True)`): instructions (WarpInst) and, at
each divergent branch, one item that is not an instruction (the front end's Diverge) holding the two sides as
`then_stream` and `else_stream`.
"""

from __future__ import annotations

from ..isa.inst import WarpInst
from .warp import Scoreboard, operands_ready


class _Join:
    """Where two sibling paths meet: the stream to resume once both have ended."""

    __slots__ = ("stream", "remaining", "parent")

    def __init__(self, stream, parent):
        self.stream, self.remaining, self.parent = stream, 2, parent


class _Path:
    __slots__ = ("stream", "join", "inst")

    def __init__(self, stream, join):
        self.stream, self.join, self.inst = stream, join, None


class DivergentStreams:
    """An iterator of a warp's instructions that interleaves the paths of divergent branches."""

    def __init__(self, stream):
        self.paths: list[_Path] = []
        self.current: _Path | None = None
        self.regs = Scoreboard()  # the warp's scoreboard, once bound (bind)
        self._pending = [_Path(stream, None)]

    def bind(self, regs: Scoreboard) -> None:
        """The warp's scoreboard, read to pick the path that can issue soonest."""
        self.regs = regs

    def __iter__(self):
        return self

    def _fetch(self, path: _Path, position: int) -> None:
        """Give `path` its next instruction, splitting at a Diverge and joining when it ends."""
        while True:
            item = next(path.stream, None)
            if item is None:
                join = path.join
                if join is None:
                    return
                join.remaining -= 1
                if join.remaining:
                    return
                path = _Path(join.stream, join.parent)
                continue
            if not isinstance(item, WarpInst):  # a Diverge
                join = _Join(path.stream, path.join)
                self._fetch(_Path(item.else_stream, join), position)
                path = _Path(item.then_stream, join)
                continue
            path.inst = item
            self.paths.insert(position, path)
            return

    def _ready(self, inst) -> int:
        return operands_ready(self.regs, inst, 0)[0]

    def __next__(self):
        if self._pending:
            for path in self._pending:
                self._fetch(path, len(self.paths))
            self._pending = []
        elif self.current is not None:
            position = self.paths.index(self.current)
            self.paths.pop(position)
            self._fetch(self.current, position)
        if not self.paths:
            raise StopIteration
        best = min(self.paths, key=lambda p: self._ready(p.inst)) if len(self.paths) > 1 else self.paths[0]
        self.current = best
        return best.inst


def its_stream_factory(kernel):
    """Per-warp instruction iterators for independent thread scheduling: the kernel's own divergent streams
    (`kernel.streams(its=True)`), each warp's paths interleaved."""
    streams = kernel.streams(its=True)
    return lambda block, warp: DivergentStreams(streams(block, warp))
