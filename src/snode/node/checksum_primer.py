"""The state checksum summed before fork v2, off the event loop (issue #36, item 1).

From fork v2 every header carries the root of the state after its block (`core.state_root`),
kept from block to block at the cost of the keys each block touches. The first block that
needs it has to sum the whole state once: about 15 us an entry, so some 15-30 s on the loop, in
that block's turn, for a chain of a million unspent outputs (a leader missing its round, every
node late with its votes at the very height the fork activates). Instead, PRIME_BLOCKS before
the fork this summer takes the tip's state (immutable: the loop goes on applying blocks to new
states), sums it in a worker thread, brings the sum up to the tip from the undo records of the
blocks adopted meanwhile (`state_root.caught_up`) and hands it to the node, which keeps it with
its state from then on (and writes it with the next block). A reorganisation below the summed
state, or a block that summed the state itself first, makes the sum moot: it is dropped and,
while the fork is still ahead, taken again at the next block.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from typing import Final

from snode.core.state import ChainState
from snode.core.state_root import EMPTY, Checksum, caught_up, current_checksum, entries, with_entries
from snode.node.events import BlocksAdopted
from snode.node.node import Node

log = logging.getLogger(__name__)

PRIME_BLOCKS: Final = 64
"""How many blocks before the first height whose rules carry a state root the sum starts: time
to sum a large state in the background (mainnet 2 hours, devnet 2 minutes) and to take it again
after a reorganisation."""


SLICE: Final = 16_384
"""Entries summed between two looks at the stop flag (about a quarter of a second)."""


def _sum(state: ChainState, stop: threading.Event, slice_: int = SLICE) -> Checksum | None:
    """`state_checksum(state)`, `slice_` entries at a time; None once `stop` is set."""
    checksum, items = EMPTY, entries(state)
    while not stop.is_set():
        part = list(itertools.islice(items, slice_))
        if not part:
            return checksum
        checksum = with_entries(checksum, part)
    return None


class ChecksumPrimer:
    """Sums the tip's state off the loop once fork v2 is near (see the module)."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self._task: asyncio.Task[bool] | None = None
        node.subscribe(BlocksAdopted, self._on_blocks)

    def due(self, state: ChainState) -> bool:
        """Whether `state` has no checksum and one of the next PRIME_BLOCKS heights needs it."""
        if current_checksum(state) is not None:
            return False
        rules_at = self.node.params.rules_at
        return rules_at(state.height + PRIME_BLOCKS).state_root and not rules_at(state.height).state_root

    def _on_blocks(self, event: BlocksAdopted) -> None:
        if self._task is None and self.due(self.node.state):
            self._task = asyncio.get_running_loop().create_task(self.prime(self.node.state))

    async def prime(self, state: ChainState) -> bool:
        """Sum `state` in a worker thread and give the node its checksum brought up to the tip;
        False when it became moot (see the module). Cancelled (the daemon stopping), the worker
        stops within a slice, so that a stop never waits for a whole sum."""
        stop = threading.Event()
        try:
            started = time.monotonic()
            checksum = await asyncio.to_thread(_sum, state, stop)
            return checksum is not None and self._attach(state, checksum, time.monotonic() - started)
        except asyncio.CancelledError:
            stop.set()
            raise
        finally:
            self._task = None

    def _attach(self, state: ChainState, checksum: Checksum, seconds: float) -> bool:
        node = self.node
        tip = node.state
        if current_checksum(tip) is not None or node.main_chain_hash(state.height) != state.tip_hash:
            return False
        undos = []
        for height in range(state.height + 1, tip.height + 1):
            stored = node.block_and_undo(height)
            assert stored is not None, "every main-chain block up to the tip is stored"
            undos.append(stored[1])
        node.keep_checksum(caught_up(checksum, state, tip, undos))
        log.info("state checksum for fork v2 summed off the loop at height %d in %.1f s, brought to the tip "
                 "(%d blocks since)", state.height, seconds, len(undos))
        return True
