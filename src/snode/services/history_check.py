"""The history check (issue #36 item 4; Bitcoin Core's background validation of an assumeutxo
snapshot): once a node started from a snapshot has backfilled every block below it, it replays
them from genesis, validating each in full, and compares the state root it reaches at the
snapshot's height with the one the snapshot's block carries (the root its loaded state was
checked against).

The replay runs in a child process (`python -m snode.services.history_check`), at niceness 10:
- the daemon's memory stays its own: the replay builds a second whole state, as large as a node
  synced from genesis holds (bench snapshot: 697 MiB at a million outputs against the daemon's
  372 MB), and gives it back when it ends;
- its CPU is another core's where there is one, and never the daemon's thread's (a block, a
  proof, an RPC go first);
- the daemon reads the stored blocks on its store thread, a batch at a time (100 blocks, 2 MiB
  at most), and writes them to the child's stdin (the database is the daemon's alone: SQLite's
  exclusive lock); a full pipe holds the next batch back, so the daemon reads no faster than
  the child replays and holds one batch at a time;
- the child exits when its stdin ends: when its daemon stops or dies, however it dies.

Its stdin: a pickled Request, then batches, each a 4-byte little-endian length and a msgpack
list of encoded blocks (the next heights in order). Its stdout: one line per report, `at H`
(blocks up to H replayed), then one of `done H OURS CARRIED` (the roots, hex) or `bad H REASON`
(block H is not valid on the replayed state: the reason, with both roots when it is the state
root). The daemon (`HistoryCheck`) keeps the result in the store (`history_verified`): a node
checks its history once. A replay cut off (a restart) starts again from genesis.

A root that differs at the snapshot, or a block below it that is not valid, means this node's
state (the snapshot's, which the network's headers carry) is not the one its history gives:
a consensus bug in this release or the network's. The daemon stops with one line naming both
roots: it cannot vouch for a state its own rules do not reach.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Final

import msgspec

from snode.common.text import printable
from snode.core.blocks import Block, header_state_root
from snode.core.encoding import decode_trusted
from snode.core.errors import SnodeError
from snode.core.genesis import GenesisDoc, genesis_state
from snode.core.sigchecks import verify_serially
from snode.core.state_root import current_checksum, header_root, state_checksum
from snode.core.transition import apply_block_parts
from snode.node.node import Node
from snode.node.verify_worker import HEADER as FRAME
from snode.node.verify_worker import read_frames
from snode.node.writer import ChainWriter
from snode.params import NetworkParams
from snode.store.errors import StoreError

log = logging.getLogger(__name__)

NICENESS: Final = 10
BATCH: Final = 100
"""Blocks the daemon reads and writes to the child at a time, at most."""
BATCH_BYTES: Final = 2 << 20
"""Bytes of blocks in one batch, at most (the daemon holds one batch at a time, and the pipe's)."""
REPORT_EVERY_S: Final = 1.0
"""Seconds between two `at H` lines of the child."""
LOG_EVERY_S: Final = 30.0
"""Seconds between two progress lines in the daemon's log."""
MISBEHAVE_DIFFERS: Final = "history-check-differs"
"""`SNODE_TEST_MISBEHAVE` (devnet and regtest tests): the replay's root at the snapshot has its
last bit flipped, as a consensus bug would leave it (the daemon must stop, naming both roots)."""


@dataclass(frozen=True)
class Request:
    """What the child replays: the blocks 1 to `top` (fed after it), on `params`' rules from `genesis`."""

    params: NetworkParams
    genesis: GenesisDoc
    top: int
    misbehave: str = ""


class BlockInvalid(Exception):
    """A block of the history is not valid on the replayed state."""

    def __init__(self, height: int, reason: str) -> None:
        super().__init__(f"block {height}: {reason}")
        self.height, self.reason = height, reason


class HistoryCut(Exception):
    """The blocks ended before the snapshot's height (the daemon stopped feeding them)."""


def replay(request: Request, batches: Iterable[list[bytes]], report: Callable[[int], None]) -> tuple[bytes, bytes]:
    """(the root the replay of `batches` (the encoded blocks 1 to `top`) computes for the state
    after block `top`, the root block `top`'s header carries); `report(height)` after each batch.
    BlockInvalid at the first block that is not valid; HistoryCut when the batches end before `top`."""
    state, _, consensus = genesis_state(request.genesis, request.params)
    top, carried = request.top, b""
    for batch in batches:
        for data in batch:
            height = state.height + 1
            if height > top:
                raise BlockInvalid(height, f"is above the snapshot of height {top}")
            block = decode_trusted(data, Block)
            if height == top:
                carried = header_state_root(block.header) or b""
            try:
                state = apply_block_parts(state, block, consensus, verify_serially, None, False,
                                          check_root=height != top)[0].state
            except SnodeError as err:
                raise BlockInvalid(height, str(err)) from None
        report(state.height)
        if state.height == top:
            break
    if state.height != top:
        raise HistoryCut(f"the blocks ended at {state.height}, below the snapshot of height {top}")
    checksum = current_checksum(state)
    ours = header_root(request.params.network_id, state, checksum if checksum is not None else state_checksum(state))
    if request.misbehave == MISBEHAVE_DIFFERS:
        ours = ours[:-1] + bytes([ours[-1] ^ 1])
    return ours, carried


def read_batches(stream: IO[bytes]) -> Iterator[list[bytes]]:
    """The batches on `stream` (see the module's text) until it ends."""
    decoder = msgspec.msgpack.Decoder(list[bytes])
    return (decoder.decode(body) for body in read_frames(stream))


def frame(blocks: list[bytes]) -> bytes:
    """One batch as the child reads it."""
    body = msgspec.msgpack.encode(blocks)
    return FRAME.pack(len(body)) + body


def main() -> None:
    """The child: a pickled Request then batches on stdin (its own daemon's pipe), lines on stdout."""
    with contextlib.suppress(OSError):
        os.nice(NICENESS)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with open(0, "rb", buffering=0) as requests:
        request: Request = pickle.load(requests)  # noqa: S301 -- its own daemon's pipe
        last = 0.0

        def report(height: int) -> None:
            nonlocal last
            if time.monotonic() - last >= REPORT_EVERY_S or height == request.top:
                last = time.monotonic()
                print(f"at {height}", flush=True)

        try:
            ours, carried = replay(request, read_batches(requests), report)
            print(f"done {request.top} {ours.hex()} {carried.hex()}", flush=True)
        except BlockInvalid as err:
            print(f"bad {err.height} {' '.join(err.reason.split())}", flush=True)
        except (HistoryCut, BrokenPipeError):
            pass  # the daemon stopped, or is gone: nobody waits for a result
    sys.exit(0)


class HistoryCheck:
    """The daemon's side: starts the child once the history is complete, feeds it the blocks,
    follows it, keeps the result (see the module's text). `fail` stops the daemon with one line."""

    def __init__(self, node: Node, writer: ChainWriter, request: Request, fail: Callable[[str], None]) -> None:
        self.node, self.writer, self.request, self.fail = node, writer, request, fail
        self.short = False
        """Whether the blocks could not all be fed (said in its own WARNING line)."""

    async def run(self) -> None:
        node, top = self.node, self.request.top
        if node.history_start <= 1 or node.history_verified:
            return
        log.info("history check: replaying blocks 1 to %d from genesis in a child process (niceness %d) to compare "
                 "its state root at the snapshot of height %d", top, NICENESS, top)
        started = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "snode.services.history_check",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        assert proc.stdin is not None and proc.stdout is not None
        feeder = asyncio.create_task(self._feed(proc.stdin))
        try:
            result = await self._follow(proc.stdout)
            if result is not None:
                await self._ended(*result, time.monotonic() - started)
            elif not self.short:
                log.warning("history check: the replay stopped before its result (exit status %s); it runs again at "
                            "the next start", await proc.wait())
        finally:
            feeder.cancel()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()

    async def _feed(self, stdin: asyncio.StreamWriter) -> None:
        """The request, then blocks 1 to `top` read on the store thread, a batch at a time."""
        top, height = self.request.top, 1
        try:
            stdin.write(pickle.dumps(self.request))
            while height <= top:
                blocks = await self.writer.call(self.node.block_bytes_from, height, min(height + BATCH, top + 1),
                                                BATCH_BYTES)
                if not blocks:
                    self.short = True
                    log.warning("history check: not done: block %d is not stored; it runs again at the next start",
                                height)
                    break
                height += len(blocks)
                stdin.write(frame(blocks))
                await stdin.drain()
        except StoreError as err:
            self.short = True
            log.warning("history check: not done: %s; it runs again at the next start", err.reason)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the child ended: its output says why
        finally:
            stdin.close()

    async def _follow(self, stdout: asyncio.StreamReader) -> tuple[str, str] | None:
        """Follow the child's lines; its result (`done` or `bad`, and the rest), or None."""
        node, top = self.node, self.request.top
        logged = time.monotonic()
        async for raw in stdout:
            word, _, rest = raw.decode(errors="replace").strip().partition(" ")
            if word == "at" and rest.isdigit():
                node.history_checked = int(rest)
                if time.monotonic() - logged >= LOG_EVERY_S:
                    logged = time.monotonic()
                    log.info("history check: block %d of %d (%d %%)", node.history_checked, top,
                             node.history_check_percent)
            elif word in ("done", "bad"):
                return word, rest
        return None

    async def _ended(self, word: str, rest: str, seconds: float) -> None:
        node, top = self.node, self.request.top
        if word == "bad":
            height, _, reason = printable(rest).partition(" ")
            self.fail(f"history check: block {height} below the snapshot of height {top} is not valid when the "
                      f"history is replayed from genesis ({reason}): this node's state, loaded from the snapshot, "
                      "is not the one its history gives; report it, and sync from genesis (a new data dir without "
                      "--trusted-checkpoint) meanwhile")
            return
        parts = rest.split(" ")
        if len(parts) != 3:
            log.warning("history check: not done: the replay's result is unreadable (%s); it runs again at the next "
                        "start", printable(rest, 200))
            return
        _, ours, carried = parts
        if ours != carried:
            self.fail(f"history check: the replay from genesis computes state root {ours} at the snapshot of height "
                      f"{top}, not {carried}, the root its block carries and the snapshot loaded: this node's "
                      "state is not the one its history gives; report it, and sync from genesis (a new data dir "
                      "without --trusted-checkpoint) meanwhile")
            return
        await self.writer.call(node.store_history_verified)
        log.info("history check: done in %.0f s: the replay of blocks 1 to %d from genesis reaches the snapshot's "
                 "state root %s (history verified)", seconds, top, ours[:16])


def request_for(node: Node, genesis: GenesisDoc, misbehave: str) -> Request:
    """The child's request for `node`'s history below its snapshot."""
    return Request(node.params, genesis, node.history_start, misbehave)


if __name__ == "__main__":
    main()
