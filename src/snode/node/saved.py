"""What a node keeps across a restart besides the chain: its proof book and its mempool.

Both are soft state (peers send proofs again within an interval, wallets could send transactions
again), but losing them on every restart shows the operator the wrong thing: a restarted service
node said `proof: never` while its peers had its proof from a minute before, and an upgrade
dropped every transaction waiting for a block (Bitcoin Core keeps its mempool in `mempool.dat`
for the same reason). They live in the store's `node_meta` table:

- taken on the event loop's thread (`changed`: only what changed since the last save), written
  on the store's (`write`), when the node closes and, for the proof book, at times while the
  daemon runs (so a crash loses at most those seconds);
- read back when the node opens (`restore`): the proofs as they were, the transactions admitted
  again one by one against the loaded chain (those a block took or that no longer apply are
  dropped). A damaged save is logged and skipped.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from snode.core import mempool as mp
from snode.core.encoding import decode, encode
from snode.core.errors import DecodeError, SnodeError
from snode.core.transactions import Transaction
from snode.node.proofs import STORE_KEY as PROOFS_KEY
from snode.store.errors import StoreError
from snode.store.protocol import Store

if TYPE_CHECKING:
    from snode.node.node import Node
    from snode.node.writer import ChainWriter

log = logging.getLogger(__name__)

MEMPOOL_KEY = "mempool"
"""The store's `node_meta` key of the saved mempool (its transactions in arrival order)."""
MIN_SAVE_INTERVAL = 10.0
"""Seconds between the proof book's saves while the daemon runs, at least (the proof interval
otherwise: 60 s on mainnet; devnet's 2 s would be a write every other second for nothing)."""


class SavedState:
    """Which of the node's soft state is saved as it is now (the node's `saved`)."""

    def __init__(self) -> None:
        self.pool: mp.Mempool | None = None
        """The mempool as last saved or restored (pools are immutable: `is` tells a change)."""

    def changed(self, node: Node, *, mempool: bool) -> dict[str, bytes]:
        """What changed since the last save, as the store keeps it; on the event loop's thread.
        `mempool`: include the mempool (at close; it can be megabytes)."""
        out: dict[str, bytes] = {}
        if node.proofs.version != node.proofs.saved_version:
            out[PROOFS_KEY] = node.proofs.saved()
        if mempool and node.pool is not self.pool:
            entries = sorted(node.pool.entries.values(), key=lambda e: e.arrival)
            out[MEMPOOL_KEY] = encode([e.tx for e in entries])
            self.pool = node.pool
        return out


def write(store: Store, items: dict[str, bytes]) -> None:
    """Store what `SavedState.changed` took (on the store's thread)."""
    for key, value in items.items():
        store.set_meta(key, value)


def restore(node: Node, now: int) -> None:
    """Read back the proof book and the mempool (the node's constructor, before anything runs)."""
    if (proofs := node.store.get_meta(PROOFS_KEY)) is not None:
        node.proofs.restore(proofs, now=now, registered=node.state.service_nodes)
    if (saved := node.store.get_meta(MEMPOOL_KEY)) is None:
        return
    try:
        txs = decode(saved, list[Transaction])
    except DecodeError as err:
        log.warning("the saved mempool is unreadable (%s); starting with an empty one", err)
        return
    for tx in txs:
        try:
            node.pool, _ = mp.admit(node.pool, tx, node.state, node.consensus, now=now, verifier=node.verifier)
        except SnodeError:
            continue
    node.saved.pool = node.pool
    if txs:
        log.info("mempool: %d of %d saved transactions admitted again", len(node.pool), len(txs))


async def keep_saving(node: Node, writer: ChainWriter, interval: float | None = None) -> None:
    """Save the proof book while the daemon runs, when it changed (a task of the daemon's):
    after a crash a restarted node has the network's word as of at most one interval before
    (`interval`: the proof interval, at least MIN_SAVE_INTERVAL)."""
    if interval is None:
        interval = max(float(node.params.proof_interval), MIN_SAVE_INTERVAL)
    while True:
        await asyncio.sleep(interval)
        changed = node.saved.changed(node, mempool=False)
        if not changed:
            continue
        try:
            await writer.call(write, node.store, changed)
            log.debug("saved the proof book (%d bytes)", len(changed[PROOFS_KEY]))
        except StoreError as err:
            node.proofs.saved_version = -1  # not saved after all: the next turn tries again
            log.warning("could not save the uptime proofs (%s); trying again in %g s", err, interval)
