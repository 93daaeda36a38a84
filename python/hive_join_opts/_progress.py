"""Progress of long runs, on stderr (stdout keeps the results).

On a terminal a bar (the `rich` library): where the run is, the steps done, the time elapsed and
an estimate of the time left. Elsewhere (CI logs, a file) one plain line per update, with no
carriage return and no terminal code, so that a log reads top to bottom.

Two kinds of progress, which share one display:
- `steps(title, total)`: a run of `total` steps of about equal length (the rounds of the
  benchmark). The time left is estimated as the time per step so far times the steps left.
- `activity(text)`: work of unknown length (generating data): a spinner and the elapsed time
  on a terminal; elsewhere a line when it starts, one a minute while it runs, one when it ends.

`HIVE_JOIN_OPTS_PROGRESS=plain` gives the plain lines on a terminal too; `off` shows nothing.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from typing import Iterator, Protocol, TextIO

# Seconds between the plain lines that say an activity still runs.
HEARTBEAT_S = 60.0


class Progress(Protocol):
    """What a long operation reports to: where it is, and each step it finished."""

    def show(self, text: str) -> None: ...

    def advance(self, steps: int = 1) -> None: ...


class NoProgress:
    """Progress that shows nothing (a caller that reports none)."""

    def show(self, text: str) -> None:
        pass

    def advance(self, steps: int = 1) -> None:
        pass


class Scoped:
    """A Progress whose texts start with a prefix, such as 'scenario 2/13 s1_inner: '."""

    def __init__(self, progress: Progress, prefix: str):
        self._progress = progress
        self._prefix = prefix

    def show(self, text: str) -> None:
        self._progress.show(self._prefix + text)

    def advance(self, steps: int = 1) -> None:
        self._progress.advance(steps)


def format_duration(seconds: float) -> str:
    """42s, 1m05s, 1h03m."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _mode(stream: TextIO) -> str:
    """'bar' on a terminal (with rich installed), 'plain' elsewhere; or what
    HIVE_JOIN_OPTS_PROGRESS says (bar, plain, off)."""
    forced = os.environ.get("HIVE_JOIN_OPTS_PROGRESS", "").strip().lower()
    if forced in ("plain", "off"):
        return forced
    if forced != "bar" and (not _isatty(stream) or os.environ.get("TERM") == "dumb"):
        return "plain"
    try:
        import rich  # noqa: F401
    except ImportError:
        return "plain"
    return "bar"


class Steps:
    """A run of a known number of steps: `show(text)` says where it is, `advance()` counts a
    step done. Made by `steps(...)`."""

    def __init__(self, title: str, total: int, stream: TextIO, mode: str):
        self.title = title
        self.total = max(total, 0)
        self.done = 0
        self.text = ""
        self.started = time.monotonic()
        self._stream = stream
        self._mode = mode
        self._bar = None  # the rich Progress on a terminal
        self._task = None

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def time_left(self) -> float | None:
        """The time per step so far times the steps left; None before a step is done."""
        if self.done == 0 or self.total == 0:
            return None
        return self.elapsed() / self.done * max(self.total - self.done, 0)

    def show(self, text: str) -> None:
        """Where the run is, such as 'scenario 2/13 s1_inner: round 3/4 (timed 2/3)'."""
        self.text = text
        if self._mode == "bar":
            self._bar.update(self._task, description=f"{self.title}: {text}")
        elif self._mode == "plain":
            print(self.line(), file=self._stream, flush=True)

    def advance(self, steps: int = 1) -> None:
        self.done = min(self.done + steps, self.total) if self.total else self.done + steps
        if self._mode == "bar":
            self._bar.update(self._task, completed=self.done, count=self._count(),
                             estimated_total_s=self.elapsed() / self.done * self.total
                             if self.done else None)

    def line(self) -> str:
        """The plain line of the current state: where, which step, elapsed and left."""
        parts = [f"{self.title}: {self.text}" if self.text else self.title]
        if self.total:
            parts.append(f"step {min(self.done + 1, self.total)}/{self.total}")
        timing = f"{format_duration(self.elapsed())} elapsed"
        left = self.time_left()
        if left is not None:
            timing += f", ~{format_duration(left)} left"
        parts.append(timing)
        return " | ".join(parts)

    def _count(self) -> str:
        return f"{self.done}/{self.total}" if self.total else str(self.done)


@contextlib.contextmanager
def steps(title: str, total: int, stream: TextIO | None = None) -> Iterator[Steps]:
    """Progress of `total` steps on stderr (or `stream`):

        with steps("bench", total=len(scenarios) * rounds) as progress:
            progress.show("scenario 1/13 no_candidates: round 1/4 (warm-up)")
            ...
            progress.advance()
    """
    stream = stream or sys.stderr
    mode = _mode(stream)
    tracker = Steps(title, total, stream, mode)
    if mode != "bar":
        yield tracker
        if mode == "plain":
            print(f"{title}: done, {tracker.done} of {tracker.total} steps in "
                  f"{format_duration(tracker.elapsed())}", file=stream, flush=True)
        return
    with _shared_display(stream) as display:
        tracker._bar = display.bar
        tracker._task = display.bar.add_task(title, total=tracker.total or None,
                                             count=tracker._count())
        try:
            yield tracker
        finally:
            display.bar.update(tracker._task, description=f"{title}: done",
                               completed=tracker.done, count=tracker._count())


@contextlib.contextmanager
def activity(text: str, stream: TextIO | None = None) -> Iterator[None]:
    """Work of unknown length, on stderr (or `stream`): a spinner and the elapsed time on a
    terminal (a row under the bar when one is shown); elsewhere a line when it starts, one a
    minute while it runs, and one when it ends:

        with activity(f"generating tpch at scale factor {scale:g} into {folder}"):
            subprocess.run([...], check=True)
    """
    stream = stream or sys.stderr
    mode = _mode(stream)
    started = time.monotonic()
    if mode == "off":
        yield
        return
    if mode == "plain":
        with _plain_heartbeat(text, stream, started):
            yield
        return
    with _shared_display(stream) as display:
        task = display.bar.add_task(text, total=None, count="")
        ok = False
        try:
            yield
            ok = True
        finally:
            if display.users > 1:  # a row under a run's bar: it goes, the bar stays
                display.bar.remove_task(task)
            else:
                display.bar.update(task, total=1, completed=1, description=(
                    f"{text}: {'done' if ok else 'failed'} in "
                    f"{format_duration(time.monotonic() - started)}"))


@contextlib.contextmanager
def _plain_heartbeat(text: str, stream: TextIO, started: float) -> Iterator[None]:
    print(f"{text} ...", file=stream, flush=True)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            print(f"{text}: still running, {format_duration(time.monotonic() - started)} "
                  "elapsed", file=stream, flush=True)

    thread = threading.Thread(target=beat, name="progress-heartbeat", daemon=True)
    thread.start()
    ok = False
    try:
        yield
        ok = True
    finally:
        stop.set()
        thread.join()
        print(f"{text}: {'done' if ok else 'failed'} in "
              f"{format_duration(time.monotonic() - started)}", file=stream, flush=True)


# ---- the terminal display: one rich Progress shared by what runs at once ----

class _Display:
    def __init__(self, stream: TextIO):
        from rich.console import Console
        from rich.progress import (BarColumn, Progress, ProgressColumn, SpinnerColumn,
                                   TextColumn, TimeElapsedColumn)
        from rich.table import Column
        from rich.text import Text

        class TimeLeft(ProgressColumn):
            """'~3m10s left' from the estimated total time set at each step."""

            def render(self, task) -> Text:
                total_s = task.fields.get("estimated_total_s")
                if total_s is None or task.finished:
                    return Text("")
                left = max(0.0, total_s - (task.elapsed or 0.0))
                return Text(f"~{format_duration(left)} left", style="progress.remaining")

        self.bar = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}",
                       table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis")),
            BarColumn(bar_width=12),
            TextColumn("{task.fields[count]}"),
            TimeElapsedColumn(),
            TimeLeft(),
            console=Console(file=stream),
            expand=True,
            # Python's writes to stderr (warnings, a generator's message) print above the bar;
            # stdout's too when it is the same terminal, never when it goes to a file.
            redirect_stderr=True,
            redirect_stdout=_isatty(sys.stdout),
        )
        self.users = 0


_display: _Display | None = None
_lock = threading.Lock()


@contextlib.contextmanager
def _shared_display(stream: TextIO) -> Iterator[_Display]:
    global _display
    with _lock:
        if _display is None:
            _display = _Display(stream)
        display = _display
        if display.users == 0:
            display.bar.start()
        display.users += 1
    try:
        yield display
    finally:
        with _lock:
            display.users -= 1
            if display.users == 0:
                display.bar.stop()
                _display = None
