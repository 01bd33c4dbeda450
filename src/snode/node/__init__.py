"""The node: the one owner of the current chain state, the mempool and the event hub; the signature verifiers.

Others use the modules in `__all__`; the rest is its own.
"""

__all__ = [
    "batches", "checksum_primer", "disk_watch", "events", "node", "proofs", "readiness", "saved", "upgrade",
    "verifier", "verify_worker", "views", "writer",
]
