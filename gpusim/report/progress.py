"""How far gpusim is, on stderr: a rich progress bar on a terminal, one plain line every few seconds otherwise.
`Progress` follows a simulation (`gpusim.run(..., progress=Progress())` drives it: start() before the simulation,
update() about 4 times a second, stop() at the end, interrupted or not; its bar from about a second into the run);
`PointsProgress` a sweep's points (advance() as each finishes); `Silent` shows nothing."""

from __future__ import annotations

import sys
import time

from ..errors import shown

DELAY = 1.0  # seconds before a bar appears (a shorter run shows none)
PLAIN_EVERY = 5.0  # seconds between plain lines when stderr is not a terminal


def duration(seconds: float) -> str:
    """'45 s', '14 min', '2.3 h', '3.1 days'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:,.1f} days"


def is_terminal(file) -> bool:
    isatty = getattr(file, "isatty", None)
    return bool(isatty()) if callable(isatty) else False


def open_bar(file, description: str, fields: tuple[str, ...], total: int, completed: int = 0):
    """(a started rich bar on `file`, its task): the description, the bar, the percentage and a text column per
    name in `fields` (the caller sets them on update). Transient, refreshed only when the caller says; standard
    output stays the program's own (`--json -`: the record)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress as Bar, TaskProgressColumn, TextColumn

    bar = Bar(TextColumn("{task.description}", markup=False), BarColumn(), TaskProgressColumn(),
              *(TextColumn(f"{{task.fields[{name}]}}", markup=False) for name in fields),
              console=Console(file=file, force_terminal=True), transient=True, auto_refresh=False,
              redirect_stdout=False, redirect_stderr=False)
    bar.start()
    task = bar.add_task(description, total=total or 1, completed=completed, **{name: "" for name in fields})
    return bar, task


class Progress:
    """Blocks retired of the total, the simulated cycle, warp-instructions per second and an ETA: from the
    counted instruction total where the run was given one, else from the blocks retired. `file` (default
    stderr) gets a bar where it is a terminal (`tty`, default: ask the file), plain lines otherwise."""

    def __init__(self, file=None, *, tty: bool | None = None, clock=time.monotonic, delay: float = DELAY,
                 plain_every: float = PLAIN_EVERY):
        self.file = sys.stderr if file is None else file
        if tty is None:
            tty = is_terminal(self.file)
        self.tty, self.clock, self.delay, self.plain_every = tty, clock, delay, plain_every
        self._bar = None
        self.kernel, self.blocks, self.total, self.estimated = "", 0, None, False
        self.started = self.next_line = 0.0

    def start(self, kernel: str, blocks: int, warp_insts: int | None = None, estimated: bool = False) -> None:
        """A kernel of `blocks` blocks (and, where counted, `warp_insts` warp-instructions) starts simulating."""
        self.stop()
        self.kernel, self.blocks, self.total, self.estimated = kernel, blocks, warp_insts, estimated
        self.started = self.clock()
        self.next_line = self.started + self.plain_every

    def eta(self, blocks: int, insts: int, elapsed: float) -> float | None:
        """Seconds left, from the instruction rate (or, without a total, the block rate); None: unknown yet."""
        if self.total and insts:
            return max(0, self.total - insts) * elapsed / insts
        if blocks:
            return max(0, self.blocks - blocks) * elapsed / blocks
        return None

    def line(self, blocks: int, cycle: int, insts: int, elapsed: float) -> str:
        """The plain line: 'gpusim: 12,345 of 61,000,000 warp-instructions (0.0%), 3 of 1,024 blocks, ...'."""
        about = "about " if self.estimated else ""
        done = (f"{insts:,} of {about}{self.total:,} warp-instructions ({100 * insts / self.total:.1f}%)"
                if self.total else f"{insts:,} warp-instructions")
        eta = self.eta(blocks, insts, elapsed)
        rate = insts / elapsed if elapsed > 0 else 0.0
        return (f"gpusim: {done}, {blocks:,} of {self.blocks:,} blocks, cycle {cycle:,}, {rate:,.0f} warp-inst/s, "
                f"ETA {'?' if eta is None else duration(eta)}")

    def update(self, blocks: int, cycle: int, insts: int) -> None:
        now = self.clock()
        elapsed = now - self.started
        if not self.tty:
            if now >= self.next_line and blocks < self.blocks:
                self.next_line = now + self.plain_every
                print(self.line(blocks, cycle, insts, elapsed), file=self.file, flush=True)
            return
        if self._bar is None:
            if elapsed < self.delay or blocks >= self.blocks:
                return
            self._open()
        bar, task = self._bar
        eta = self.eta(blocks, insts, elapsed)
        bar.update(task, completed=insts if self.total else blocks, blocks=f"{blocks:,}/{self.blocks:,} blocks",
                   cycle=f"cycle {cycle:,}", rate=f"{insts / elapsed if elapsed > 0 else 0:,.0f} warp-inst/s",
                   eta=f"ETA {'?' if eta is None else duration(eta)}")
        bar.refresh()

    def _open(self) -> None:
        self._bar = open_bar(self.file, shown(self.kernel, 30), ("blocks", "cycle", "rate", "eta"),
                             self.total or self.blocks or 1)

    def stop(self) -> None:
        """The run ended (or stopped): the bar goes."""
        if self._bar is not None:
            self._bar[0].stop()
            self._bar = None


class PointsProgress:
    """A sweep's points done of the total, those that failed and an ETA on stderr: a bar on a terminal, a plain line
    every few seconds otherwise (as Progress)."""

    def __init__(self, total: int, done: int, file=None, *, clock=time.monotonic, plain_every: float = PLAIN_EVERY):
        self.file = sys.stderr if file is None else file
        self.total, self.done, self.first, self.failed = total, done, done, 0
        self.clock = clock
        self.started = clock()
        self.next_line, self.plain_every = self.started + plain_every, plain_every
        self._bar = open_bar(self.file, "sweep", ("points", "failed", "eta"), total, done) \
            if is_terminal(self.file) else None

    def eta(self) -> float | None:
        ran = self.done - self.first
        if not ran:
            return None
        return (self.total - self.done) * (self.clock() - self.started) / ran

    def advance(self, row: dict | None) -> None:
        """A point finished (`row`: its row, whose `error` says whether it failed), or None: a tick while waiting."""
        if row is not None:
            self.done += 1
            self.failed += bool(row.get("error"))
        eta = self.eta()
        if self._bar is not None:
            bar, task = self._bar
            bar.update(task, completed=self.done, points=f"{self.done:,}/{self.total:,} points",
                       failed=f"({self.failed} failed)" if self.failed else "",
                       eta=f"ETA {'?' if eta is None else duration(eta)}")
            bar.refresh()
        elif self.clock() >= self.next_line and self.done < self.total:
            self.next_line = self.clock() + self.plain_every
            failed = f", {self.failed} failed" if self.failed else ""
            print(f"gpusim sweep: {self.done:,} of {self.total:,} points{failed}, ETA "
                  f"{'?' if eta is None else duration(eta)}", file=self.file, flush=True)

    def stop(self) -> None:
        if self._bar is not None:
            self._bar[0].stop()
            self._bar = None


class Silent:
    """No progress shown (`--quiet`)."""

    def advance(self, row) -> None:
        pass

    def stop(self) -> None:
        pass
