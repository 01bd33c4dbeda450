"""What the daemon counts for its metrics, by listening to the event hub (no Prometheus import
here: the client library loads at the first /metrics request, not at start-up; rpc/scrape.py)."""

from __future__ import annotations

import bisect
from collections import Counter
from typing import Final

from snode.common.events import EventHub
from snode.net.events import PeerBanned
from snode.node.events import BlocksAdopted, ChainReorganized, OwnProofRefused, ProofAccepted, TransactionAdmitted
from snode.rpc.signatures import SIGNATURES

BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Upper bounds, in seconds, of the RPC latency histogram's buckets (a last one holds the rest)."""
METHODS: Final = frozenset(SIGNATURES) | {"rpc.discover"}
"""Methods timed under their own name; any other name a client sends is timed as `other`, so a
client cannot make the metrics grow without bound."""


class EventCounters:
    """Totals since start-up, by event kind."""

    def __init__(self, hub: EventHub) -> None:
        self.totals: Counter[str] = Counter()
        self.latency: dict[str, tuple[list[int], float]] = {}
        """Per method: the count of calls in each bucket (BUCKETS, then above), seconds in all."""
        hub.subscribe(BlocksAdopted, lambda e: self._add("blocks_adopted", len(e.blocks)))
        hub.subscribe(ChainReorganized, lambda e: self._add("reorganizations"))
        hub.subscribe(TransactionAdmitted, lambda e: self._add("transactions_admitted"))
        hub.subscribe(ProofAccepted, lambda e: self._add("uptime_proofs_accepted"))
        hub.subscribe(OwnProofRefused, lambda e: self._add("own_uptime_proofs_refused"))
        hub.subscribe(PeerBanned, lambda e: self._add("peers_banned"))

    def _add(self, name: str, count: int = 1) -> None:
        self.totals[name] += count

    def observe_rpc(self, method: str, seconds: float) -> None:
        """One admin RPC call took `seconds` to answer."""
        name = method if method in METHODS else "other"
        counts, total = self.latency.get(name) or ([0] * (len(BUCKETS) + 1), 0.0)
        counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.latency[name] = (counts, total + seconds)
