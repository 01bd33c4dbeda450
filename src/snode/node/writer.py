"""ChainWriter: how a daemon's event loop changes and reads the chain without waiting on disk.

The node's blocking steps (applying blocks, waiting for signature checks, writing and
committing the store, reading blocks back) run on one store thread; its memory steps (making
the new state current, updating the mempool, publishing events) run on the event loop. So a
round timer, a peer's message or an RPC call on the loop is never late by a commit, and the
store is used by one thread only, as SQLite wants.

One asyncio lock orders the changes: a relayed block, a sync batch, a reorganisation and a
block this daemon produces never interleave. Reads take no lock; they queue on the store
thread behind whatever it is doing.

A change that reached the store is adopted in memory even when its caller is cancelled (a
SIGTERM during a sync cancels the task mid-commit): the store thread finishes the commit either
way, and memory behind the disk would leave the state unwritable at the stop (`_commit`).

The pool transactions a new tip may have made invalid (`Node.recheck_pool`: those naming a node
the block changed) are checked again on the loop too, but RECHECK_PER_TURN at a time with a
turn of the loop between them, so that an RPC call or a peer's message is never late by more
than one such slice, whatever the pool holds.

A damaged database (`DatabaseDamaged`, from a read or a write) ends the writer's use of the
store: the caller that met it gets the error, `on_damaged` is told once (a daemon stops), and every
later call gets the same error without touching the file again.

Without an executor (tests, the simulation) every step runs inline on the caller's thread and
the coroutines never suspend.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any, Final, ParamSpec, TypeVar

from snode.core.blocks import Block, Checkpoint
from snode.core.crypto import SigningKey
from snode.core.errors import SnodeError
from snode.core.production import build_block
from snode.core.state import ChainState
from snode.node.batches import Reorganization, StagedBatch
from snode.node.disk_watch import DiskWatch
from snode.node.node import Node
from snode.store import DatabaseDamaged
from snode.store.errors import WriteRefused

RECHECK_PER_TURN: Final = 256
"""Pool transactions checked again per turn of the event loop after a change of tip: each is
its rules without signatures, some 20-60 microseconds, so a slice takes a few milliseconds."""

P = ParamSpec("P")
S = TypeVar("S")
log = logging.getLogger(__name__)


class NotOnTip(Exception):
    """A block that was on the tip when it arrived is not any more (`ChainWriter.accept_block`)."""

T = TypeVar("T")


def store_thread() -> ThreadPoolExecutor:
    """The one thread a daemon's store is used from."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="store")


class ChainWriter:
    """The node's chain, as the event loop uses it."""

    def __init__(
        self, node: Node, executor: Executor | None = None, *,
        on_damaged: Callable[[str], None] | None = None, disk: DiskWatch | None = None,
        recheck_per_turn: int = RECHECK_PER_TURN,
    ) -> None:
        self.node = node
        self.recheck_per_turn = recheck_per_turn
        """Pool rechecks per turn of the event loop (RECHECK_PER_TURN; tests pass a few)."""
        self.disk = disk
        """Told of each refused write and of a commit after them (a daemon's: the WARNING lines
        and /readyz's reason of a full disk)."""
        self._executor = executor
        self._lock = asyncio.Lock()
        self._on_damaged = on_damaged
        """Told the reason the first time the store finds its database damaged."""
        self.damaged: DatabaseDamaged | None = None
        """The damage found, after which the store is not used any more."""
        node.defer_rechecks = executor is not None
        self._rechecking: asyncio.Task[None] | None = None

    async def _off_loop(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        if self.damaged is not None:
            raise DatabaseDamaged(self.damaged.reason)
        try:
            if self._executor is None:
                return fn(*args, **kwargs)
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))
        except DatabaseDamaged as err:
            if self.damaged is None:
                self.damaged = err
                log.error("the chain database cannot be used any more: %s", err.reason)
                if self._on_damaged is not None:
                    self._on_damaged(err.reason)
            raise
        except WriteRefused as err:
            if self.disk is not None:
                self.disk.refused(err)
            raise

    async def _commit(self, store: Callable[[], S], adopt: Callable[[S], T]) -> T:
        """`store` on the store thread, then `adopt` its result on the loop. Cancelled in between,
        it still waits for the store step and adopts what it wrote before it lets the
        cancellation through, so that memory never falls behind the disk."""
        step = asyncio.ensure_future(self._off_loop(store))
        try:
            stored = await asyncio.shield(step)
        except asyncio.CancelledError:
            while not step.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(step)
            if not step.cancelled() and step.exception() is None:
                with contextlib.suppress(SnodeError):  # a rule broken after the stored blocks
                    adopt(step.result())
            raise
        if self.disk is not None:
            self.disk.written()
        try:
            return adopt(stored)
        finally:
            self._recheck_soon()

    def _recheck_soon(self) -> None:
        """Work through the node's queued pool rechecks in slices, one task at a time."""
        if self.node.defer_rechecks and (self._rechecking is None or self._rechecking.done()):
            self._rechecking = asyncio.get_running_loop().create_task(self._recheck_pool())

    async def _recheck_pool(self) -> None:
        while self.node.recheck_pool(self.recheck_per_turn):
            await asyncio.sleep(0)

    async def call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a node or store method that reads or writes the store outside a chain change
        (`block_at`, `transaction`, `blocks_after`, `locator`, saving peers) on the store thread."""
        return await self._off_loop(fn, *args, **kwargs)

    async def accept_block(self, block: Block) -> None:
        """Validate, store and adopt one block on the tip; InvalidBlock says why not, NotOnTip
        that the tip moved while the block waited for its turn (another copy of it came first,
        or a block of another branch: not the block's fault)."""
        node = self.node
        async with self._lock:
            if block.header.prev_hash != node.state.tip_hash:
                raise NotOnTip(f"block {block.header.height} no longer builds on the tip ({node.height})")
            now = node.now()
            await self._commit(lambda: node.store_batch(node.stage_batch([block], now)),
                               lambda stored: node.adopt_batch(stored, now))

    async def stage_batch(
        self, blocks: list[Block], *, after: StagedBatch | None = None,
        extending: StagedBatch | None = None, on_tip: bytes | None = None,
    ) -> StagedBatch:
        """`Node.stage_batch` on the store thread (it changes nothing, so it takes no lock)."""
        node = self.node
        return await self._off_loop(node.stage_batch, blocks, node.now(), after=after, extending=extending,
                                    on_tip=on_tip)

    async def finish_batch(self, batch: StagedBatch, *, defer_state: bool = False) -> int:
        """Store a staged batch on the store thread, adopt it on the loop (`Node.finish_batch`)."""
        node = self.node
        async with self._lock:
            return await self._commit(lambda: node.store_batch(batch, defer_state=defer_state),
                                      lambda stored: node.adopt_batch(stored, node.now()))

    async def reorganize(self, branch: list[Block]) -> bool:
        """Switch to `branch` if it ends higher than the tip (`Node.reorganize`)."""
        node = self.node
        async with self._lock:
            now = node.now()

            def adopt(reorg: Reorganization | None) -> bool:
                if reorg is not None:
                    node.adopt_reorganize(reorg, now)
                return reorg is not None
            return await self._commit(lambda: node.store_reorganize(branch, now), adopt)

    async def produce_block(self) -> Block:
        """Build the next block with this daemon's authority key from the mempool, store and
        adopt it."""
        node = self.node
        async with self._lock:
            now = node.now()
            block = await self.template(node.authority_key(), now)
            await self._commit(lambda: node.store_batch(node.stage_batch([block], now)),
                               lambda stored: node.adopt_batch(stored, now))
            return block

    async def template(self, key: SigningKey, timestamp: int, *, round: int = 0,
                       checkpoint: Checkpoint | None = None) -> Block:
        """The next block from the mempool signed with `key` (`core.production.build_block`),
        built on the store thread from the tip and the pool of the call: choosing from a full
        pool applies thousands of transactions, which the event loop does not wait for. The pool
        loses what the template found stale if the tip is still the one it was built on."""
        node = self.node
        state, pool = node.state, node.pool
        block, stale = await self._off_loop(build_block, state, pool, node.consensus, key, timestamp=timestamp,
                                            round=round, checkpoint=checkpoint)
        node.drop_stale(stale, state)
        return block

    async def adopt_snapshot(self, block: Block, state: ChainState,
                             rows: Callable[[], Iterable[tuple[str, Any, bytes]]] | None = None) -> None:
        """Store a checked snapshot's state with `block` as the tip and make it current
        (`Node.store_snapshot`, `Node.adopt_snapshot`; `rows`: its chunks' rows), under the
        chain-change lock; NotOnTip if the chain is past genesis by then (a relayed block came
        first: nothing is written)."""
        node = self.node
        async with self._lock:
            if node.height != 0:
                raise NotOnTip(f"this node's chain is at block {node.height}, not at genesis")
            await self._commit(lambda: node.store_snapshot(block, state, rows),
                               lambda _: node.adopt_snapshot(block, state, node.now()))

    async def flush_state(self) -> None:
        """Write the state a sync deferred (`Node.flush_state`)."""
        async with self._lock:
            await self._off_loop(self.node.flush_state)

    def close(self) -> None:
        """Stop the store thread (after the loop's last change)."""
        if isinstance(self._executor, ThreadPoolExecutor):
            self._executor.shutdown(wait=True)
