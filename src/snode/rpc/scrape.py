"""The /metrics page, made at the first scrape: prometheus_client (about 20 ms no start-up
needs) is imported then, not when the daemon starts."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from snode.node.views import NodeView
from snode.rpc.counters import EventCounters

if TYPE_CHECKING:  # loaded at the first scrape
    from prometheus_client import CollectorRegistry


def metrics_page(node: NodeView, counters: EventCounters, peer_count: Callable[[], int],
                 quorum_figures: Callable[[], dict[str, int]] | None = None) -> Callable[[str], tuple[bytes, str]]:
    """GET /metrics for a scraper's Accept header: its body and content type. The registry is
    made at the first scrape, when prometheus_client loads."""
    made: list[CollectorRegistry] = []

    def page(accept: str) -> tuple[bytes, str]:
        from snode.rpc.metrics import exposition, registry_for

        if not made:
            made.append(registry_for(node, counters, peer_count, quorum_figures))
        return exposition(made[0], accept)
    return page
