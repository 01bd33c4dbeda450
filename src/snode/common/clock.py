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
    """The real clock, moved by `offset` seconds (0 but in fault tests: a machine whose clock is
    wrong, `SNODE_CLOCK_OFFSET` on devnet and regtest)."""

    def __init__(self, offset: float = 0.0) -> None:
        self.offset = offset

    def time(self) -> float:
        """`time.time()` plus the offset."""
        return time.time() + self.offset


class MockableClock:
    """The real clock until `set_mock` gives a fixed time; `set_mock(0)` restores the real one.

    A mock time does not advance by itself (as in Bitcoin Core): each step of a test says where
    time is.
    """

    def __init__(self, offset: float = 0.0) -> None:
        self._mock = 0.0
        self.offset = offset

    def time(self) -> float:
        """The mock time if one is set, else `time.time()` plus the offset."""
        return self._mock or time.time() + self.offset

    @property
    def mocked(self) -> bool:
        """True while a mock time is set."""
        return self._mock != 0

    def set_mock(self, timestamp: float) -> None:
        """Fix the clock at `timestamp` (Unix seconds); 0 restores the real clock."""
        if timestamp < 0:
            raise ValueError("a mock time is a Unix timestamp >= 0 (0 restores the real clock)")
        self._mock = float(timestamp)


CLOCK_OFFSET_VARIABLE = "SNODE_CLOCK_OFFSET"
"""Seconds to move a devnet or regtest daemon's clock by (a fault test's skewed machine)."""


def clock_offset(network: str, environ: dict[str, str]) -> float:
    """The clock offset the environment asks for; ValueError (one line) when it is not a number
    or asked of a network with value (mainnet, testnet), where a wrong clock is never wanted."""
    text = environ.get(CLOCK_OFFSET_VARIABLE, "").strip()
    if not text:
        return 0.0
    if network in ("mainnet", "testnet"):
        raise ValueError(f"{CLOCK_OFFSET_VARIABLE} is for devnet and regtest fault tests; unset it to run "
                         f"on {network}")
    try:
        offset = float(text)
    except ValueError:
        raise ValueError(f"{CLOCK_OFFSET_VARIABLE}: '{text}' is not a number of seconds") from None
    if not -86_400 <= offset <= 86_400 or offset != offset:
        raise ValueError(f"{CLOCK_OFFSET_VARIABLE}: {text} is beyond a day either way")
    return offset
