"""common.aio.wait_set: an event or a timeout, and a cancellation that is never lost."""

from __future__ import annotations

import ast
import asyncio
import sys
from pathlib import Path

import pytest

import snode
from snode.common.aio import wait_set


async def test_it_says_whether_the_event_came_or_the_time_ran_out() -> None:
    event = asyncio.Event()
    assert await wait_set(event, 0.01) is False
    event.set()
    assert await wait_set(event, 10) is True


async def test_a_cancellation_in_the_turn_the_event_is_set_is_kept() -> None:
    """asyncio.wait_for returns normally here on Python 3.11 (CPython gh-86296): a daemon's
    producer loop then never stopped."""
    event = asyncio.Event()
    task = asyncio.create_task(wait_set(event, 10))
    await asyncio.sleep(0)  # the task waits for the event
    event.set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="CPython 3.12 fixed wait_for (gh-86296)")
async def test_the_same_race_swallows_the_cancellation_in_wait_for_on_python_3_11() -> None:
    """Why wait_set exists."""
    event = asyncio.Event()
    task = asyncio.create_task(asyncio.wait_for(event.wait(), 10))
    await asyncio.sleep(0)
    event.set()
    task.cancel()
    assert await task is True


def test_no_daemon_code_waits_with_asyncio_wait_for() -> None:
    """Every wait with a timeout in src/ uses asyncio.timeout (or wait_set): see above."""
    src = Path(snode.__file__).parent
    users = []
    for path in sorted(src.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr == "wait_for":
                users.append(f"{path.relative_to(src)}:{node.lineno}")
    assert users == [], f"asyncio.wait_for can swallow a cancellation on Python 3.11: {users}"
