"""`--notify=<command>`: run an operator's command for this node's own events, as Bitcoin Core's
`-blocknotify` does for blocks.

The command line is split once, like a shell would split it, and run without a shell. The event
goes in environment variables: SNODE_EVENT (`state`, `proof_refused`, `reward`, `credit_low`,
`upgrade_required`), SNODE_STATE (for `state`: `decommissioned`, `left`, ...; for
`upgrade_required`: the fork this node does not know, its height in SNODE_HEIGHT), SNODE_REASON,
SNODE_HEIGHT, SNODE_PUBKEY, SNODE_AMOUNT (for `reward`: the atomic units the operator's wallet
received) and SNODE_CREDIT (for `credit_low`: the blocks of downtime credit left), each one line of
printable text (`common.text.printable`: an operator's script may echo them). At
most one runs at a time (later events wait, at most MAX_WAITING of them); one that runs longer
than TIMEOUT seconds is killed by its pid; a failure is logged and never stops the daemon.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import shutil
from collections import deque
from typing import Any, Final

from snode.common.text import printable
from snode.core.errors import SnodeError

log = logging.getLogger(__name__)

TIMEOUT: Final = 30.0
MAX_WAITING: Final = 32
STDERR_KEPT: Final = 4_096
"""Bytes of a command's stderr kept (its last ones, for the log line of a failure): the rest is
read and dropped, so a command that writes without end costs no memory."""


async def _tail(stream: asyncio.StreamReader, keep: int = STDERR_KEPT) -> bytes:
    """Read `stream` to its end, keeping its last `keep` bytes."""
    kept = b""
    while chunk := await stream.read(65_536):
        kept = (kept + chunk)[-keep:]
    return kept


class NotifyConfigError(SnodeError):
    """The --notify command cannot be run as given."""


def parse_command(text: str) -> list[str]:
    """The argument list of a `--notify` value; NotifyConfigError names what to fix."""
    try:
        argv = shlex.split(text)
    except ValueError as err:
        raise NotifyConfigError(f"--notify: cannot split the command: {err}") from None
    if not argv:
        raise NotifyConfigError("--notify: the command is empty")
    if shutil.which(argv[0]) is None:
        raise NotifyConfigError(
            f"--notify: '{argv[0]}' is not an executable file or a program on PATH")
    return argv


def event_environment(event: dict[str, Any]) -> dict[str, str]:
    """The SNODE_* variables for one event, escaped."""
    return {variable: printable(str(event.get(field, ""))) for variable, field in (
        ("SNODE_EVENT", "event"), ("SNODE_STATE", "state"), ("SNODE_REASON", "reason"),
        ("SNODE_HEIGHT", "height"), ("SNODE_PUBKEY", "pubkey"), ("SNODE_AMOUNT", "amount"),
        ("SNODE_CREDIT", "credit"),
    )}


class Notifier:
    """Runs the command for each event, one at a time."""

    def __init__(self, argv: list[str], *, timeout: float = TIMEOUT) -> None:
        self.argv = argv
        self.timeout = timeout
        """Seconds a run may take before it is killed (TIMEOUT; a test passes a short one)."""
        self._waiting: deque[dict[str, Any]] = deque()
        self._running: asyncio.Task[None] | None = None
        self._proc: asyncio.subprocess.Process | None = None

    def on_event(self, event: dict[str, Any]) -> None:
        """An event about this node (the feed's listener call)."""
        if len(self._waiting) >= MAX_WAITING:
            log.warning("notify: %d events already wait for the command; dropped a %s event",
                        MAX_WAITING, event.get("event"))
            return
        self._waiting.append(event)
        if self._running is None or self._running.done():
            self._running = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        while self._waiting:
            await self._run(self._waiting.popleft())

    async def _run(self, event: dict[str, Any]) -> None:
        env = {**os.environ, **event_environment(event)}
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.argv, env=env, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        except OSError as err:
            log.warning("notify: cannot run %s: %s", self.argv[0], err)
            return
        self._proc = proc
        try:
            async with asyncio.timeout(self.timeout):
                assert proc.stderr is not None
                err_out = await _tail(proc.stderr)
                await proc.wait()
        except TimeoutError:
            proc.kill()  # by its pid: the process we started
            await proc.wait()
            log.warning("notify: %s ran over %g s for a %s event; killed", self.argv[0], self.timeout,
                        event.get("event"))
            return
        finally:
            self._proc = None
        if proc.returncode != 0:
            log.warning("notify: %s exited with %d for a %s event: %s", self.argv[0], proc.returncode,
                        event.get("event"), printable(err_out.decode(errors="replace").strip()[-300:]))
        else:
            log.info("notify: ran %s for a %s event", self.argv[0], event.get("event"))

    async def close(self) -> None:
        """At the daemon's stop: no more commands; a running one is killed by its pid."""
        self._waiting.clear()
        if self._proc is not None and self._proc.returncode is None:
            self._proc.kill()
        if self._running is not None and not self._running.done():
            await asyncio.gather(self._running, return_exceptions=True)
