"""Prometheus metrics for GET /metrics on the admin port.

Read from the node at each scrape (a collector, nothing cached): the chain, the service-node
list, and this node's own state, the values an operator alerts on (contrib/prometheus/alerts.yml):
`snode_own_state{state=...}` (one labelled gauge: 1 for the node's state in the node table's words,
Active, Decomm, Await, Unregistered while its key is not on the chain, or Deregistered once a quorum
removed it), the seconds since the network last accepted its uptime proof (+Inf before the first),
its downtime credit and the credit an outage needs (below it, the next outage deregisters an active
node), whether it is payable; peers and the sync lag in blocks; `snode_build_info`; the process metrics of
prometheus_client's collectors; and the admin RPC's latency per method, in seconds. The text
format by default, OpenMetrics when the scraper's Accept header asks for it.
"""

from __future__ import annotations

import math
import platform
from collections.abc import Callable, Iterator
from typing import Final

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Metric,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, InfoMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from snode import __version__
from snode.core.credit import credit_at
from snode.core.service_nodes import Status, is_payable, status
from snode.node.readiness import next_fork
from snode.node.views import NodeView
from snode.rpc.counters import BUCKETS, EventCounters

COUNTED = {
    "blocks_adopted": "Blocks made part of the main chain",
    "reorganizations": "Switches of the main chain to another branch",
    "transactions_admitted": "Transactions the mempool took",
    "uptime_proofs_accepted": "Uptime proofs accepted (this node's own included)",
    "own_uptime_proofs_refused": "This node's uptime proofs that a peer refused",
    "peers_banned": "Peers banned for breaking the protocol",
}
UNREGISTERED: Final = "Unregistered"
DEREGISTERED: Final = "Deregistered"
OWN_STATES: Final = (*(s.value for s in Status), UNREGISTERED, DEREGISTERED)
"""The values of `snode_own_state`'s label: the node table's words, one for a key not on the chain,
and one for a key a quorum deregistered (its stakes locked for the penalty)."""


def _gauge(name: str, text: str, value: float, labels: dict[str, str] | None = None) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, text, labels=list(labels or {}))
    family.add_metric(list((labels or {}).values()), value)
    return family


class NodeCollector(Collector):
    """The node's values, read when scraped."""

    def __init__(self, node: NodeView, counters: EventCounters, peer_count: Callable[[], int],
                 quorum_figures: Callable[[], dict[str, int]] | None = None) -> None:
        self.node = node
        self.counters = counters
        self.peer_count = peer_count
        self.quorum_figures = quorum_figures
        """A service node's quorumnet counts (`services.reachability.figures`)."""

    def collect(self) -> Iterator[Metric]:
        node = self.node
        for name, text in COUNTED.items():
            yield CounterMetricFamily(f"snode_{name}", text, value=self.counters.totals[name])
        yield _gauge("snode_height", "Chain height", node.height)
        yield _gauge("snode_target_height", "Network height while syncing, 0 when synced", node.target_height)
        yield _gauge("snode_sync_lag_blocks", "Blocks this node is behind the network (0 when synced)",
                     max(0, node.target_height - node.height))
        yield _gauge("snode_peers", "Connected P2P peers", self.peer_count())
        yield _gauge("snode_mempool_transactions", "Transactions in the mempool", len(node.pool))
        yield _gauge("snode_immutable_height", "Highest final height", node.immutable_height)
        published, deliveries = node.hub_counts()
        yield CounterMetricFamily("snode_event_hub_events", "Events published on the daemon's event hub",
                                  value=published)
        yield CounterMetricFamily("snode_event_hub_deliveries", "Calls of the event hub's subscribers",
                                  value=deliveries)
        sns = GaugeMetricFamily("snode_service_nodes", "Registered service nodes by status", labels=["status"])
        counts = {s: 0 for s in Status}
        for sn in node.state.service_nodes.values():
            counts[status(sn)] += 1
        for s, n in counts.items():
            sns.add_metric([s.value], n)
        yield sns
        yield from self._own()
        yield from self._upgrade()
        yield from self._quorumnet()
        yield self._latency()

    def _upgrade(self) -> Iterator[Metric]:
        """A fork this node does not know (`node.upgrade`): 1 and its height, blocks left, kept blocks."""
        node = self.node
        info = node.upgrade.required(node.height, node.now())
        family = GaugeMetricFamily("snode_upgrade_required",
                                   "1 when this node learnt of a fork it does not know (label: the fork)",
                                   labels=["fork"])
        family.add_metric([info["fork"] if info else ""], 1 if info else 0)
        yield family
        yield _gauge("snode_upgrade_fork_height", "Height of the fork this node does not know (0: none)",
                     info["height"] if info else 0)
        yield _gauge("snode_upgrade_blocks_left", "Blocks until this node stops for that fork (0: stopped or none)",
                     info["blocks_left"] if info else 0)
        yield _gauge("snode_upgrade_stopped", "1 when this node stopped at a fork it does not know",
                     1 if info and info["stopped"] else 0)
        yield _gauge("snode_upgrade_pending_blocks", "Blocks kept as cannot-validate-yet for that fork",
                     info["pending_blocks"] if info else 0)
        fork = next_fork(node)
        yield _gauge("snode_next_fork_height", "Height of the next fork this node's schedule has (0: none)",
                     fork["height"] if fork else 0)
        yield _gauge("snode_next_fork_ready_sns", "Active service nodes whose proofs say they know the next fork",
                     fork["ready_sns"] if fork else 0)
        yield _gauge("snode_next_fork_active_sns", "Active service nodes, of which ready_sns are ready",
                     fork["active_sns"] if fork else 0)

    def _quorumnet(self) -> Iterator[Metric]:
        """A service node's CurveZMQ handshakes and reachability checks (issue #37: counts that
        do not depend on the machine's load)."""
        if self.quorum_figures is None:
            return
        figures = self.quorum_figures()
        handshakes = CounterMetricFamily(
            "snode_quorumnet_handshakes", "CurveZMQ handshakes on quorumnet: in, answered by this node's "
            "listener (ZAP asked); out, made by this node (reachability probes and its connections)",
            labels=["side"])
        for side in ("in", "out"):
            handshakes.add_metric([side], figures[f"handshakes_{side}"])
        yield handshakes
        checks = CounterMetricFamily(
            "snode_reachability_checks", "Reachability checks of other nodes: passed by a held connection, "
            "or made by a fresh handshake", labels=["by"])
        for by in ("held", "handshake"):
            checks.add_metric([by], figures[f"checks_{by}"])
        yield checks
        yield CounterMetricFamily("snode_reachability_failures", "Fresh reachability handshakes that failed",
                                  value=figures["checks_failed"])

    def _own(self) -> Iterator[Metric]:
        """This service node's own values; none when the daemon runs without --service-node."""
        node = self.node
        if node.identity is None:
            return
        pubkey = node.identity.key.public
        sn = node.state.service_nodes.get(pubkey)
        current = status(sn).value if sn is not None else (
            DEREGISTERED if node.departure is not None and node.departure.kind == "deregistered" else UNREGISTERED)
        state = GaugeMetricFamily(
            "snode_own_state", "This service node's state (1 for the current one)", labels=["state"])
        for word in OWN_STATES:
            state.add_metric([word], 1 if word == current else 0)
        yield state
        if sn is None:
            return
        last = node.proofs.last_accepted(pubkey)
        yield _gauge("snode_own_proof_age_seconds",
                     "Seconds since the network last accepted this node's uptime proof (+Inf: never)",
                     node.now() - last if last else math.inf)
        yield _gauge("snode_own_downtime_credit_blocks", "This node's downtime credit, in blocks",
                     credit_at(sn, node.height, node.params))
        yield _gauge("snode_own_downtime_credit_minimum_blocks",
                     "Downtime credit an outage needs: an active node with less is deregistered by its next "
                     "outage, not decommissioned", node.params.credit_min)
        yield _gauge("snode_own_payable", "1 when this node earns rewards",
                     1 if is_payable(sn, node.height, node.params) else 0)

    def _latency(self) -> HistogramMetricFamily:
        family = HistogramMetricFamily("snode_rpc_request_duration_seconds",
                                       "Admin JSON-RPC calls by method, seconds to answer", labels=["method"])
        for method, (counts, total) in sorted(self.counters.latency.items()):
            cumulative, buckets = 0, []
            for bound, count in zip((*BUCKETS, math.inf), counts):
                cumulative += count
                buckets.append(("+Inf" if bound == math.inf else str(bound), cumulative))
            family.add_metric([method], buckets, sum_value=total)
        return family


def registry_for(node: NodeView, counters: EventCounters, peer_count: Callable[[], int],
                 quorum_figures: Callable[[], dict[str, int]] | None = None) -> CollectorRegistry:
    """The registry /metrics exposes, made once (at the first scrape)."""
    registry = CollectorRegistry()
    for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
        registry.register(collector)
    info = InfoMetricFamily("snode_build", "The running snoded")
    info.add_metric([], {"version": __version__, "network": node.params.name,
                         "python": platform.python_version()})
    registry.register(_Fixed([info]))
    registry.register(NodeCollector(node, counters, peer_count, quorum_figures))
    return registry


class _Fixed(Collector):
    def __init__(self, metrics: list[Metric]) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        return iter(self.metrics)


def exposition(registry: CollectorRegistry, accept: str) -> tuple[bytes, str]:
    """The body and content type for a scraper's Accept header (OpenMetrics when it asks)."""
    encode, content_type = choose_encoder(accept)
    return encode(registry), content_type
