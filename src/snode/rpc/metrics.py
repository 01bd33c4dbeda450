"""Prometheus metrics for GET /metrics on the admin port."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge, generate_latest

from snode.core.service_nodes import Status, status
from snode.node.node import Node


def render(node: Node) -> bytes:
    """A fresh registry per scrape: the values are read from the node, nothing is cached."""
    registry = CollectorRegistry()
    Gauge("snode_height", "Chain height", registry=registry).set(node.height)
    Gauge("snode_target_height", "Network height while syncing, 0 when synced",
          registry=registry).set(node.target_height)
    Gauge("snode_mempool_transactions", "Transactions in the mempool", registry=registry).set(len(node.pool))
    sns = Gauge("snode_service_nodes", "Registered service nodes by status", ["status"], registry=registry)
    counts = {s: 0 for s in Status}
    for sn in node.state.service_nodes.values():
        counts[status(sn)] += 1
    for s, n in counts.items():
        sns.labels(status=s.value).set(n)
    return generate_latest(registry)
