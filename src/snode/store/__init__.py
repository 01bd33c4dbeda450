"""The durable store: blocks, the state at the tip, undo records, transactions, peers.

One SQLite database per data dir (stdlib sqlite3, WAL, synchronous=FULL), one SQL transaction per
block or per batch of blocks, so a crash at any moment leaves the state of the last committed
block. See `chain_store.ChainStore`.

Others use the names in `__all__`: the store, its records and errors, and the `errors`, `memory`
(a store in memory, for tests and the simulator), `protocol` and `snapshot` (snapshots on disk)
modules; the rest is its own.
"""

from snode.store.chain_store import DATABASE_FILE, ChainStore, Commit, PendingWrite, Undone
from snode.store.errors import DatabaseDamaged, StoreError, damaged
from snode.store.rows import Encoded

__all__ = [
    "DATABASE_FILE", "ChainStore", "Commit", "DatabaseDamaged", "Encoded", "PendingWrite", "StoreError",
    "Undone", "damaged", "errors", "memory", "protocol", "snapshot",
]
