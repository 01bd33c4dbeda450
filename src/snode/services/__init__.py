"""Services that run on the node and the network: chain sync and the service-node duties.

The app starts the services in `__all__`; the rest serve them.
"""

__all__ = [
    "backfill", "checkpoints", "departure", "equivocation", "event_feed", "history_check", "notify", "producer",
    "reachability",
    "saving", "sn_duties", "snapshot_sync", "snapshots", "sync",
]
