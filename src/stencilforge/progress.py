"""Progress of a run: a bar where someone watches (a terminal, a notebook), a line every few seconds where
no one does (a batch job's log), so that a long run is never silent until its summary."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # Rich is imported when a bar is shown: `import stencilforge` stays light
    from rich.console import Console


def details(residual: float | None, note: str) -> list[str]:
    """What follows the rate: the residual, the solves' cycles per step."""
    return ([f"residual {residual:.3e}"] if residual is not None else []) + ([note] if note else [])


class LazyProgress:
    """A Rich progress bar that appears only once a run has lasted `delay_s`."""

    def __init__(self, label: str, delay_s: float = 1.0, console: Console | None = None):
        self.label = label
        self.delay_s = delay_s
        self.console = console
        self.start = time.perf_counter()
        self.bar: Any = None  # a rich.progress.Progress once it appears
        self.task: Any = None  # the bar's task

    def __call__(self, done: int, total: int, residual: float | None, note: str = "") -> None:
        if done == 0:  # the loop starts stepping: set-up and compile time are not part of the rate
            self.start = time.perf_counter()
            return
        if self.bar is None:
            if time.perf_counter() - self.start < self.delay_s:
                return
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

            self.bar = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TaskProgressColumn(),
                TextColumn("{task.completed}/{task.total} steps"),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[extra]}"),
                console=self.console or Console(stderr=True),
                transient=True,
            )
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=total, rate="", extra="")
        elapsed = time.perf_counter() - self.start
        self.bar.update(self.task, completed=done, rate=f"{done / elapsed:,.0f} steps/s", extra=", ".join(details(residual, note)))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()



class ProgressLines:
    """One line on `stream` every `every_s` seconds of stepping: the step, the share done, the rate, the time left,
    the residual and the solves' cycles per step."""

    EVERY_S = 10.0

    def __init__(self, label: str, every_s: float | None = None, stream: TextIO | None = None):
        self.label, self.stream = label, stream
        self.every_s = self.EVERY_S if every_s is None else every_s
        self.start = self.last = time.perf_counter()

    def __call__(self, done: int, total: int, residual: float | None, note: str = "") -> None:
        now = time.perf_counter()
        if done == 0:
            self.start = self.last = now
            return
        if now - self.last < self.every_s:
            return
        self.last = now
        rate = done / (now - self.start)
        left = f", {(total - done) / rate:.0f} s left" if total and rate > 0 else ""
        extra = "".join(f", {part}" for part in details(residual, note))
        share = f" ({100 * done / total:.0f}%)" if total else ""
        print(f"{self.label}: step {done}/{total}{share}, {rate:,.0f} steps/s{left}{extra}", file=self.stream or sys.stderr,
              flush=True)

    def close(self) -> None:
        pass


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel: IPython's shell there has a kernel. (A process that only imported
    ipykernel, as one that starts kernels does, is not.)"""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return getattr(shell, "kernel", None) is not None


def watching() -> bool:
    """Whether a person watches this process's progress: stderr is a terminal, or it runs in a Jupyter kernel."""
    return sys.stderr.isatty() or in_notebook()


def draws_bars() -> bool:
    """Whether a live bar can show: in a terminal, and in a notebook with ipywidgets, which Rich draws its bar in
    there (without it, Rich warns and shows nothing)."""
    if sys.stderr.isatty():
        return True
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def reporter(label: str) -> LazyProgress | ProgressLines:
    """A bar where someone watches and a bar can show, else lines."""
    return LazyProgress(label) if watching() and draws_bars() else ProgressLines(label)
