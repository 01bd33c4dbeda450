"""How a daemon's log lines are written: escaped, and repeats of one kind counted, not written.

Escaping is the formatter's work (`EscapingFormatter`), so that no call site can forget it: a
message that quotes a peer (a reason, an address, an agent string) is one line of printable text
(`common.text.printable`), whatever the peer sent. A traceback keeps its line breaks, and the
message of each exception in it is escaped whole (an exception may quote a peer too).

Counting is a filter on the handlers (`RepeatLimiter`): anyone on the internet can make the daemon
warn (an anonymous CurveZMQ client, a peer that breaks the protocol), and one line per attempt
would fill the disk and bury what matters. Warnings from one place in the code (one kind) are
written `burst` times in a window; the rest of the window is counted and written once when the
window ends: `<the last one> ... and 299 more in the last minute`. A line below WARNING that anyone
can cause (a peer connected, a connection refused) is counted the same way when it is logged
with `extra=LIMITED`; other INFO lines (sync progress) are always written.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Final

from snode.common.text import printable

LINE_LIMIT: Final = 2_000
"""Characters of one log message at most."""
REPEAT_WINDOW: Final = 60.0
"""Seconds over which repeats of one kind of warning are counted."""
REPEAT_BURST: Final = 5
"""Warnings of one kind written in a window before the rest are counted instead."""

_DECIDED: Final = "_snode_repeat_pass"
_LIMITED: Final = "_snode_repeat_limited"
LIMITED: Final = {_LIMITED: True}
"""`extra` for a log call below WARNING whose lines the limiter counts all the same."""
_SUMMARY: Final = "_snode_repeat_summary"

ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None] | tuple[None, None, None]


class EscapingFormatter(logging.Formatter):
    """A formatter whose every message is one line of printable text."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802  (logging's name)
        record.message = printable(record.message, LINE_LIMIT)
        return super().formatMessage(record)

    def formatException(self, ei: ExcInfo) -> str:  # noqa: N802
        if ei[1] is None:
            return _lines(super().formatException(ei))
        report = traceback.TracebackException.from_exception(ei[1])
        _escape_messages(report, set())
        return _lines("".join(report.format()).rstrip("\n"))

    def formatStack(self, stack_info: str) -> str:  # noqa: N802
        return _lines(super().formatStack(stack_info))


def _lines(text: str) -> str:
    return "\n".join(printable(line, LINE_LIMIT) for line in text.splitlines())


def _escape_messages(report: traceback.TracebackException, seen: set[int]) -> None:
    """Escape the message of every exception in a report, chained ones too, so that a newline in
    one cannot make a line of its own. (`_str` is where CPython keeps the message, 3.11 to 3.13;
    without it the lines are still escaped one by one.)"""
    if id(report) in seen:
        return
    seen.add(id(report))
    if isinstance(getattr(report, "_str", None), str):
        report._str = printable(report._str, LINE_LIMIT)  # type: ignore[attr-defined]
    for chained in (report.__cause__, report.__context__):
        if chained is not None:
            _escape_messages(chained, seen)


Kind = tuple[str, int]
"""Where a log call is: (source file, line)."""


@dataclass(slots=True)
class _Window:
    start: float
    written: int = 1
    counted: int = 0
    last: logging.LogRecord | None = None
    """The last record counted instead of written (the summary repeats its words)."""


def _timer(delay: float, callback: Callable[[], None]) -> None:
    timer = threading.Timer(delay, callback)
    timer.daemon = True  # a summary due after the daemon stops is written by `close`, not waited for
    timer.start()


class RepeatLimiter(logging.Filter):
    """Writes at most `burst` records of one kind (at `level` or above) per `window` seconds and
    counts the rest; when a window with counted records ends, one summary line says how many.
    Put one instance on every handler: it decides once per record."""

    def __init__(self, *, burst: int = REPEAT_BURST, window: float = REPEAT_WINDOW, level: int = logging.WARNING,
                 clock: Callable[[], float] = time.monotonic,
                 schedule: Callable[[float, Callable[[], None]], None] = _timer) -> None:
        super().__init__()
        self.burst, self.window, self.level = burst, window, level
        self.clock, self.schedule = clock, schedule
        self._windows: dict[Kind, _Window] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        decided = record.__dict__.get(_DECIDED)
        if decided is None:
            decided = record.__dict__[_DECIDED] = self._decide(record)
        return bool(decided)

    def _decide(self, record: logging.LogRecord) -> bool:
        if (record.levelno < self.level and not record.__dict__.get(_LIMITED)) or record.__dict__.get(_SUMMARY):
            return True
        kind = (record.pathname, record.lineno)
        now = self.clock()
        with self._lock:
            window = self._windows.get(kind)
            if window is not None and now - window.start >= self.window:
                del self._windows[kind]
                self._summarize(window, now)
                window = None
            if window is None:
                self._windows[kind] = _Window(now)
                return True
            if window.written < self.burst:
                window.written += 1
                return True
            window.counted += 1
            window.last = record
            if window.counted == 1:
                self.schedule(window.start + self.window - now, self.flush)
            return False

    def flush(self) -> None:
        """Write the summaries of the windows that have ended."""
        now = self.clock()
        with self._lock:
            for kind, window in list(self._windows.items()):
                if now - window.start >= self.window:
                    del self._windows[kind]
                    self._summarize(window, now)

    def close(self) -> None:
        """Write every summary now, windows not ended too (at the daemon's exit)."""
        now = self.clock()
        with self._lock:
            windows, self._windows = self._windows, {}
            for window in windows.values():
                self._summarize(window, now)

    def _summarize(self, window: _Window, now: float) -> None:
        last = window.last
        if last is None:
            return
        seconds = min(now - window.start, self.window)
        span = "the last minute" if self.window == 60 and seconds >= 59.5 else f"the last {seconds:.0f} s"
        summary = logging.makeLogRecord(dict(last.__dict__))
        summary.msg, summary.args = f"{last.getMessage()} ... and {window.counted} more in {span}", None
        summary.created = time.time()
        summary.msecs = summary.created % 1 * 1000
        summary.__dict__[_SUMMARY] = True
        summary.__dict__.pop(_DECIDED, None)
        logging.getLogger(last.name).handle(summary)
