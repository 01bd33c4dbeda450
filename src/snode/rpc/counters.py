"""What the daemon counts for its metrics, by listening to the event hub (no Prometheus import
here: the client library loads at the first /metrics request, not at start-up)."""

from __future__ import annotations

from collections import Counter

from snode.common.events import EventHub
from snode.net.events import PeerBanned
from snode.node.events import BlocksAdopted, ChainReorganized, OwnProofRefused, ProofAccepted, TransactionAdmitted


class EventCounters:
    """Totals since start-up, by event kind."""

    def __init__(self, hub: EventHub) -> None:
        self.totals: Counter[str] = Counter()
        hub.subscribe(BlocksAdopted, lambda e: self._add("blocks_adopted", len(e.blocks)))
        hub.subscribe(ChainReorganized, lambda e: self._add("reorganizations"))
        hub.subscribe(TransactionAdmitted, lambda e: self._add("transactions_admitted"))
        hub.subscribe(ProofAccepted, lambda e: self._add("uptime_proofs_accepted"))
        hub.subscribe(OwnProofRefused, lambda e: self._add("own_uptime_proofs_refused"))
        hub.subscribe(PeerBanned, lambda e: self._add("peers_banned"))

    def _add(self, name: str, count: int = 1) -> None:
        self.totals[name] += count
