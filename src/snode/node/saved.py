"""What a node keeps across a restart besides the chain: its proof book and its mempool.

Both are soft state (peers send proofs again within an interval, wallets could send transactions
again), but losing them on every restart shows the operator the wrong thing: a restarted service
node said `proof: never` while its peers had its proof from a minute before, and an upgrade
dropped every transaction waiting for a block (Bitcoin Core keeps its mempool in `mempool.dat`
for the same reason). They live in the store's `node_meta` table:

- taken on the event loop's thread (`SavedState.changed`: only what changed since the last
  save), written on the store's (`write`), when the node closes and, for the proof book, at
  times while the daemon runs (`services.saving`, so a crash loses at most those seconds);
- read back when the node opens (`restore`, which returns what it read; the node keeps it): the
  proofs as they were, the transactions admitted again one by one against the loaded chain
  (those a block took or that no longer apply are dropped). A damaged save is logged and skipped.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from snode.core import mempool as mp
from snode.core.encoding import decode, encode
from snode.core.errors import DecodeError, SnodeError
from snode.core.genesis import Consensus
from snode.core.state import ChainState
from snode.core.transactions import Transaction
from snode.node.proofs import STORE_KEY as PROOFS_KEY
from snode.node.proofs import ProofBook
from snode.node.verifier import Verifier
from snode.store.protocol import Store

log = logging.getLogger(__name__)

MEMPOOL_KEY = "mempool"
"""The store's `node_meta` key of the saved mempool (its transactions in arrival order)."""


@dataclass(frozen=True, slots=True)
class Restored:
    """What `restore` read back: the proof book and the mempool a node starts with."""

    proofs: ProofBook
    pool: mp.Mempool
    pool_saved: bool
    """Whether the store holds a readable save of the mempool (if not, the next save writes one)."""


class SavedState:
    """Which of the node's soft state is saved as it is now (the node's `saved`)."""

    def __init__(self, restored: Restored) -> None:
        self._proofs_version = restored.proofs.version
        """The proof book's `version` when last saved or restored (nothing new to save if equal)."""
        self._pool = restored.pool if restored.pool_saved else None
        """The mempool as last saved or restored (pools are immutable: `is` tells a change)."""

    def changed(self, proofs: ProofBook, pool: mp.Mempool | None = None) -> dict[str, bytes]:
        """What changed since the last save, as the store keeps it; on the event loop's thread.
        `pool`: the mempool, to be saved too (at close; it can be megabytes)."""
        out: dict[str, bytes] = {}
        if proofs.version != self._proofs_version:
            out[PROOFS_KEY] = proofs.saved()
            self._proofs_version = proofs.version
        if pool is not None and pool is not self._pool:
            entries = sorted(pool.entries.values(), key=lambda e: e.arrival)
            out[MEMPOOL_KEY] = encode([e.tx for e in entries])
            self._pool = pool
        return out

    def not_written(self) -> None:
        """The proof book `changed` last took was not written after all: take it again next time."""
        self._proofs_version = -1


def write(store: Store, items: dict[str, bytes]) -> None:
    """Store what `SavedState.changed` took (on the store's thread)."""
    for key, value in items.items():
        store.set_meta(key, value)


def restore(store: Store, state: ChainState, consensus: Consensus, verifier: Verifier, now: int,
            limits: mp.PoolLimits = mp.DEFAULT_LIMITS) -> Restored:
    """Read back the proof book and the mempool (within `limits`), on the chain at `state` (the
    node's constructor, before anything runs)."""
    proofs = ProofBook()
    if (saved_book := store.get_meta(PROOFS_KEY)) is not None:
        proofs.restore(saved_book, now=now, registered=state.service_nodes)
    pool = mp.Mempool(limits=limits)
    if (saved_pool := store.get_meta(MEMPOOL_KEY)) is None:
        return Restored(proofs, pool, pool_saved=False)
    try:
        txs = decode(saved_pool, list[Transaction])
    except DecodeError as err:
        log.warning("the saved mempool is unreadable (%s); starting with an empty one", err)
        return Restored(proofs, pool, pool_saved=False)
    return Restored(proofs, _admitted(pool, txs, state, consensus, verifier, now), pool_saved=True)


def _admitted(pool: mp.Mempool, txs: list[Transaction], state: ChainState, consensus: Consensus,
              verifier: Verifier, now: int) -> mp.Mempool:
    """`pool` with those of `txs` that apply on the chain at `state`, admitted in their order."""
    for tx in txs:
        try:
            pool, _ = mp.admit(pool, tx, state, consensus, now=now, verifier=verifier)
        except SnodeError:
            continue
    if txs:
        log.info("mempool: %d of %d saved transactions admitted again", len(pool), len(txs))
    return pool
