"""A daemon task that ends on an error says so at once (`app.daemon._ended`); a cancelled one,
at a stop, says nothing."""

from __future__ import annotations

import asyncio
import logging

import pytest

from snode.app.daemon import _ended


def test_a_task_that_ends_on_an_error_is_one_error_line_and_a_cancelled_one_none(
        caplog: pytest.LogCaptureFixture) -> None:
    async def broken() -> None:
        raise PermissionError(13, "Permission denied")

    async def forever() -> None:
        await asyncio.Event().wait()

    async def main() -> None:
        failed = asyncio.create_task(broken(), name="snapshots")
        stopped = asyncio.create_task(forever(), name="uptime proofs")
        for task in (failed, stopped):
            task.add_done_callback(_ended)
        await asyncio.wait([failed])  # the broken one has ended; the other is cancelled at a stop
        stopped.cancel()
        await asyncio.gather(failed, stopped, return_exceptions=True)

    with caplog.at_level(logging.ERROR, logger="snode.app.daemon"):
        asyncio.run(main())
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["the snapshots task stopped: PermissionError: [Errno 13] Permission denied; snoded goes on "
                     "without it until restarted"], lines
