"""Prometheus metrics for GET /metrics on the admin port."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from snode.core.service_nodes import Status, status
from snode.node.node import Node
from snode.rpc.counters import EventCounters

COUNTED = {
    "blocks_adopted": "Blocks made part of the main chain",
    "reorganizations": "Switches of the main chain to another branch",
    "transactions_admitted": "Transactions the mempool took",
    "uptime_proofs_accepted": "Uptime proofs accepted (this node's own included)",
    "own_uptime_proofs_refused": "This node's uptime proofs that a peer refused",
    "peers_banned": "Peers banned for breaking the protocol",
}


def render(node: Node, counters: EventCounters | None = None) -> bytes:
    """A fresh registry per scrape: the values are read from the node and the event counters,
    nothing is cached."""
    registry = CollectorRegistry()
    if counters is not None:
        for name, text in COUNTED.items():
            Counter(f"snode_{name}", text, registry=registry).inc(counters.totals[name])
    Gauge("snode_height", "Chain height", registry=registry).set(node.height)
    Gauge("snode_target_height", "Network height while syncing, 0 when synced",
          registry=registry).set(node.target_height)
    Gauge("snode_mempool_transactions", "Transactions in the mempool", registry=registry).set(len(node.pool))
    Gauge("snode_immutable_height", "Highest final height", registry=registry).set(node.immutable_height)
    sns = Gauge("snode_service_nodes", "Registered service nodes by status", ["status"], registry=registry)
    counts = {s: 0 for s in Status}
    for sn in node.state.service_nodes.values():
        counts[status(sn)] += 1
    for s, n in counts.items():
        sns.labels(status=s.value).set(n)
    return generate_latest(registry)
