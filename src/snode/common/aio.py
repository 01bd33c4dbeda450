"""asyncio helpers that Python 3.11's standard library gets subtly wrong."""

from __future__ import annotations

import asyncio


async def wait_set(event: asyncio.Event, timeout: float) -> bool:
    """Wait until `event` is set (True) or `timeout` seconds pass (False).

    Not `asyncio.wait_for(event.wait(), timeout)`: on Python 3.11 that returns normally when the
    task is cancelled in the same loop turn as the event is set, swallowing the cancellation
    (CPython gh-86296, fixed in 3.12), so a loop built on it may never stop; a daemon's
    producer loop kept making blocks for 20 s after SIGTERM that way. `asyncio.timeout` keeps
    the cancellation.
    """
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
    except TimeoutError:
        return False
    return True
