"""Repeated warnings of one kind are counted, not written (`common.logs.RepeatLimiter`): a
burst is written, the rest of the window becomes one summary line when the window ends; other
kinds, lower levels and later windows are untouched. A fake clock and a fake timer drive it."""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Iterator

import pytest

from snode.app.runtime import _QuietClientErrors
from snode.common.logs import LIMITED, REPEAT_BURST, EscapingFormatter, RepeatLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0
        self.timers: list[tuple[float, Callable[[], None]]] = []

    def __call__(self) -> float:
        return self.now

    def schedule(self, delay: float, callback: Callable[[], None]) -> None:
        self.timers.append((self.now + delay, callback))

    def advance(self, seconds: float) -> None:
        """Move on, firing the timers that fall due."""
        self.now += seconds
        due = [t for t in self.timers if t[0] <= self.now]
        self.timers = [t for t in self.timers if t[0] > self.now]
        for _, callback in due:
            callback()


@pytest.fixture
def logged() -> Iterator[tuple[logging.Logger, io.StringIO, io.StringIO, Clock, RepeatLimiter]]:
    """A logger with two handlers (as the daemon has: stderr and the file), one limiter on both."""
    clock = Clock()
    limiter = RepeatLimiter(clock=clock, schedule=clock.schedule)
    logger = logging.getLogger("test.log_repeats")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    streams = io.StringIO(), io.StringIO()
    handlers = [logging.StreamHandler(s) for s in streams]
    for handler in handlers:
        handler.setFormatter(EscapingFormatter("%(levelname)s %(message)s"))
        handler.addFilter(limiter)
        logger.addHandler(handler)
    yield logger, streams[0], streams[1], clock, limiter
    for handler in handlers:
        logger.removeHandler(handler)


def _refuse(logger: logging.Logger, n: int) -> None:
    for i in range(n):
        logger.warning("quorumnet: refused a client whose key %s is not a registered service node's", f"{i:016x}")


def test_a_flood_of_one_warning_is_a_burst_and_one_summary(logged) -> None:
    logger, first, second, clock, _ = logged
    _refuse(logger, 300)
    lines = first.getvalue().splitlines()
    assert len(lines) == REPEAT_BURST, lines
    assert second.getvalue() == first.getvalue(), "both handlers write the same lines"
    clock.advance(59)
    assert len(first.getvalue().splitlines()) == REPEAT_BURST, "no summary before the window ends"
    clock.advance(1)
    summary = first.getvalue().splitlines()[-1]
    assert summary == (f"WARNING quorumnet: refused a client whose key {299:016x} is not a registered "
                       f"service node's ... and {300 - REPEAT_BURST} more in the last minute"), summary
    assert second.getvalue() == first.getvalue()


def test_a_new_window_writes_a_new_burst(logged) -> None:
    logger, out, _, clock, _ = logged
    _refuse(logger, 10)
    clock.advance(61)
    _refuse(logger, 10)
    lines = out.getvalue().splitlines()
    assert sum("more in the last minute" in line for line in lines) == 1
    assert len(lines) == REPEAT_BURST + 1 + REPEAT_BURST
    clock.advance(61)
    assert out.getvalue().splitlines()[-1].endswith(f"... and {10 - REPEAT_BURST} more in the last minute")


def test_other_kinds_and_lower_levels_are_not_counted(logged) -> None:
    logger, out, _, _, _ = logged
    _refuse(logger, 50)
    for i in range(50):
        logger.warning("banned peer %s", i)  # another call site: its own burst
        logger.info("connected to peer %s", i)  # below WARNING: every line written
    lines = out.getvalue().splitlines()
    assert sum(line.startswith("WARNING banned") for line in lines) == REPEAT_BURST
    assert sum(line.startswith("INFO") for line in lines) == 50


def test_an_info_line_anyone_can_cause_is_counted_when_marked(logged) -> None:
    logger, out, _, clock, _ = logged
    for i in range(50):
        logger.info("connected to peer %s (inbound)", i, extra=LIMITED)
        logger.info("sync: height %s", i)  # unmarked: every line written
    clock.advance(61)
    lines = out.getvalue().splitlines()
    assert sum(line.startswith("INFO connected") for line in lines) == REPEAT_BURST + 1
    assert lines[-1] == f"INFO connected to peer 49 (inbound) ... and {50 - REPEAT_BURST} more in the last minute"
    assert sum(line.startswith("INFO sync") for line in lines) == 50


def test_a_client_error_from_aiohttp_is_one_counted_info_line(logged) -> None:
    logger, out, _, _, _ = logged
    logger.addFilter(_QuietClientErrors())
    try:
        for _ in range(50):
            try:
                raise ValueError("Invalid method encountered")
            except ValueError:
                logger.exception("Error handling request")  # what aiohttp.server logs for a bad request
    finally:
        logger.removeFilter(logger.filters[-1])
    lines = out.getvalue().splitlines()
    assert lines[0] == "INFO bad request from a client: ValueError: Invalid method encountered"
    assert len(lines) == REPEAT_BURST, "any client can send bad requests again and again"


def test_close_writes_what_is_counted_so_far(logged) -> None:
    logger, out, _, clock, limiter = logged
    _refuse(logger, 20)
    clock.now += 12
    limiter.close()
    assert out.getvalue().splitlines()[-1].endswith(f"... and {20 - REPEAT_BURST} more in the last 12 s")
    limiter.close()
    assert len(out.getvalue().splitlines()) == REPEAT_BURST + 1, "nothing is summed up twice"
