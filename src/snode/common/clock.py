"""The one clock of a daemon: wall time, which a regtest node may set by hand (Bitcoin Core's
`setmocktime`), so that tests of decommissions and time-outs move time instead of waiting for it.

Every component that needs "now" gets the daemon's clock; none calls `time.time()` itself. Timers
(how long to sleep until the next proof, the next round) keep running on the event loop's own
monotonic clock: a mock time moves what nodes write and judge, not how often they act.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Wall time in Unix seconds."""

    def time(self) -> float:
        """Now, in seconds since the epoch."""
        ...


class SystemClock:
    """The real clock."""

    def time(self) -> float:
        """`time.time()`."""
        return time.time()


class MockableClock:
    """The real clock until `set_mock` gives a fixed time; `set_mock(0)` restores the real one.

    A mock time does not advance by itself (as in Bitcoin Core): each step of a test says where
    time is.
    """

    def __init__(self) -> None:
        self._mock = 0.0

    def time(self) -> float:
        """The mock time if one is set, else `time.time()`."""
        return self._mock or time.time()

    @property
    def mocked(self) -> bool:
        """True while a mock time is set."""
        return self._mock != 0

    def set_mock(self, timestamp: float) -> None:
        """Fix the clock at `timestamp` (Unix seconds); 0 restores the real clock."""
        if timestamp < 0:
            raise ValueError("a mock time is a Unix timestamp >= 0 (0 restores the real clock)")
        self._mock = float(timestamp)
