"""What a person watching ``posenc lab`` sees and does: the progress bars with their ETAs, Ctrl-C
turned into a stop at the next safe point, and the run's CPU clock across sessions."""

from __future__ import annotations

import signal
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Optional

from .distributed import Dist, broadcast_flag

if TYPE_CHECKING:
    from rich.progress import TaskID


class Interrupt:
    """Turns the first Ctrl-C into a request honoured at the next safe point."""

    requested = False

    @contextmanager
    def catching(self):
        def handler(signum, frame):
            if self.requested:
                raise KeyboardInterrupt
            self.requested = True

        try:
            previous = signal.signal(signal.SIGINT, handler)
        except ValueError:  # not the main thread: leave Ctrl-C as it is
            yield
            return
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    def check(self, d: Dist = Dist()) -> None:
        """Raise KeyboardInterrupt if a stop was asked for. Under torchrun rank 0 decides, so every
        process stops at the same step instead of leaving the others waiting in a collective."""
        if broadcast_flag(d, self.requested):
            raise KeyboardInterrupt


class ProgressBars:
    """What a person watching the run sees: rich progress bars with ETAs on the main process.

    One ``overall`` bar counts estimated work (bytes a model reads; training counts three times for
    the backward pass) so its ETA covers the whole run; the other bars show the current stage
    (``scheme k of N``), evaluation and each fine-tune.
    """

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.bar = None
        self.overall: Optional[TaskID] = None
        if enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.console = Console(stderr=True, log_path=False)
            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                console=self.console,
            )

    def __enter__(self):
        if self.bar:
            self.bar.start()
        return self

    def __exit__(self, *exc):
        if self.bar:
            self.bar.stop()

    def add(self, description: str, total: int, completed: int = 0):
        return self.bar.add_task(description, total=total, completed=completed) if self.bar else None

    def update(self, task, **kw):
        if self.bar is not None and task is not None:
            self.bar.update(task, **kw)

    def remove(self, task) -> None:
        if self.bar is not None and task is not None:
            self.bar.remove_task(task)

    def start_overall(self, total: float, done: float) -> None:
        if self.bar is not None:
            # Rich shows integer counts: work is counted in thousands of bytes read.
            self.overall = self.bar.add_task(
                "overall (kB read)", total=max(1, int(total / 1e3)), completed=int(done / 1e3)
            )

    def work(self, amount: float) -> None:
        if self.bar is not None and self.overall is not None:
            self.bar.update(self.overall, advance=amount / 1e3)

    def log(self, text: str) -> None:
        if self.enabled:
            self.console.log(text)


class CpuClock:
    """The CPU time (user + system, every thread) of this process since the clock started, added to
    ``before`` (what earlier sessions of the same run recorded). Under torchrun it is the main
    process's; each rank spends about as much."""

    def __init__(self, before: float = 0.0, frozen: bool = False, start: Optional[float] = None):
        self.before, self.frozen = float(before), frozen
        self.start = time.process_time() if start is None else start

    def total(self) -> float:
        """CPU seconds of the run so far (``before`` alone when ``frozen``: a session that only
        finds the run finished adds nothing to it)."""
        return self.before if self.frozen else self.before + time.process_time() - self.start
