"""The admin RPC answers that callers poll many times a second, kept encoded until they can change.

`get_info` (monitoring, tools and wallets poll it) and the whole `get_service_nodes` list (2,000
records take milliseconds to encode) are encoded once per node revision: `Node.revision` moves
with every change either answer can show (a new tip or a reorganisation, the mempool, an accepted
uptime proof, the network's verdict on our own, the sync target), derived from those values. `get_info` also shows two
things that are not the node's: the peer count (the peer manager's) and the clock's second (the
status line's proof age), so its key holds them beside the revision.

Within the list, each record's encoding is kept until its record object, its proof time, its
payable flag, its participation or its credit changes: the state maps share unchanged records, so
after a new block or a proof only the few records that changed are encoded again.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import msgspec

from snode import __version__
from snode.api.records import service_node_state
from snode.api.types import (
    Departure,
    InfoResult,
    NextFork,
    ServiceNodesResult,
    ServiceNodeState,
    SnapshotDownload,
    UpgradeRequired,
)
from snode.core import mempool as mp
from snode.core import service_nodes as sn_rules
from snode.core.credit import credit_at
from snode.core.genesis import Consensus
from snode.core.participation import Participation
from snode.core.state import ServiceNode
from snode.core.state_root import tip_root
from snode.node.readiness import next_fork
from snode.node.views import NodeView

_json = msgspec.json.Encoder()

_ROOM = 4_096
"""Bytes of a wallet's transaction (a registration with reservations and a few inputs): a pool
without that much room takes it only in place of lower rates."""

_Stamp = tuple[int, bool, Participation, int]
"""What a record's encoding shows besides the record itself: proof time, payable, participation, credit."""


class Answers:
    """The encoded `get_info` and `get_service_nodes` answers of one node, each kept for its key."""

    def __init__(self, node: NodeView, peer_count: Callable[[], int]) -> None:
        self.node = node
        self.peer_count = peer_count
        """How many peers the daemon has now (0 without a P2P layer)."""
        self._info: tuple[tuple[int, int, int], msgspec.Raw] | None = None
        self._list: tuple[int, msgspec.Raw] | None = None
        self._records: dict[bytes, tuple[ServiceNode, _Stamp, msgspec.Raw]] = {}

    def info(self, now: int) -> msgspec.Raw:
        """`get_info` at clock second `now`."""
        key = (self.node.revision, self.peer_count(), now)
        if self._info is not None and self._info[0] == key:
            return self._info[1]
        raw = msgspec.Raw(_json.encode(self._info_result(now, key[1])))
        self._info = (key, raw)
        return raw

    def _info_result(self, now: int, peer_count: int) -> InfoResult:
        node = self.node
        return InfoResult(
            height=node.height,
            target_height=node.target_height,
            status_line=node.status_line(now),
            network=node.params.name,
            version=__version__,
            top_block_hash=node.state.tip_hash.hex(),
            genesis_hash=node.consensus.genesis_hash.hex(),
            mempool_size=len(node.pool),
            service_node=node.identity is not None,
            service_node_count=len(node.state.service_nodes),
            peer_count=peer_count,
            last_uptime_proof_rejection=node.proof_refusal,
            immutable_height=node.immutable_height,
            block_production=node.production_mode.value,
            state_root=tip_root(node.params.network_id, node.state)
            if node.params.rules_at(node.state.height).state_root else "",  # a checksum summed before v2 is no root yet
            upgrade_required=upgrade_required(node, now),
            history_start=node.history_start,
            history_backfilled=node.backfilled,
            history_percent=node.history_percent,
            history_checked=node.history_checked,
            history_verified=node.history_verified,
            snapshot_download=SnapshotDownload(**node.snapshot_download.record()) if node.snapshot_download else None,
            next_fork=_next_fork(node),
            mempool_min_fee_rate=mempool_min_fee_rate(node.pool, node.consensus, now),
            **own_standing(node),
        )

    def service_nodes(self) -> msgspec.Raw:
        """The whole `get_service_nodes` list, unfiltered."""
        node = self.node
        if self._list is not None and self._list[0] == node.revision:
            return self._list[1]
        state, height, params, proofs = node.state, node.height, node.params, node.proofs
        old, new, parts = self._records, {}, []
        for pk, sn in state.service_nodes.items():
            stamp = (proofs.last_accepted(pk), sn_rules.is_payable(sn, height, params),
                     node.participation.of(pk), credit_at(sn, height, params))
            hit = old.get(pk)
            if hit is None or hit[0] is not sn or hit[1] != stamp:
                hit = (sn, stamp, msgspec.Raw(_json.encode(self.service_node(sn))))
            new[pk] = hit
            parts.append(hit[2])
        self._records = new
        answer = ServiceNodesResult[msgspec.Raw](service_node_states=parts, height=state.height)
        self._list = (node.revision, msgspec.Raw(_json.encode(answer)))
        return self._list[1]

    def service_node(self, sn: ServiceNode) -> ServiceNodeState:
        """One element of the list, as it stands at the tip."""
        node = self.node
        return service_node_state(sn, node.height, node.params,
                                  last_uptime_proof=node.proofs.last_accepted(sn.pubkey),
                                  participation=node.participation.of(sn.pubkey))


def mempool_min_fee_rate(pool: mp.Mempool, consensus: Consensus, now: int) -> int:
    """`get_info`'s `mempool_min_fee_rate`: the fee per byte, rounded up, the pool asks of an
    arrival now: the chain's minimum; its raised floor (`mempool.floor_rate`) when above; and when
    it is full (no room for a wallet's transaction), the price of the place of one of its lowest
    rates (the top of their fee-rate step plus the increment, as `mempool.admit` asks)."""
    rate = max(float(consensus.params.fee_per_byte), mp.floor_rate(pool, consensus, now))
    limits = pool.limits
    if pool.steps and (len(pool.entries) >= limits.max_entries or pool.total_bytes + _ROOM > limits.max_bytes):
        lowest = 2.0 ** ((pool.steps[0] + 1) / mp.RATE_STEPS_PER_DOUBLING) - 1.0
        rate = max(rate, lowest + mp.incremental_rate(consensus))
    return math.ceil(rate)


def upgrade_required(node: NodeView, now: int) -> UpgradeRequired | None:
    """`get_info`'s `upgrade_required` (`node.upgrade.required`)."""
    info = node.upgrade.required(node.height, now)
    return None if info is None else UpgradeRequired(**info)


def _next_fork(node: NodeView) -> NextFork | None:
    """`get_info`'s `next_fork` (`node.readiness.next_fork`)."""
    info = next_fork(node)
    return None if info is None else NextFork(**info)
def own_standing(node: NodeView) -> dict[str, Any]:
    """`get_info`'s fields on this service node's standing (`core.standing`): its downtime
    credit and what it means, how its key left the registry, a registration in the mempool."""
    ident = node.identity
    if ident is None:
        return {}
    sn = node.state.service_nodes.get(ident.key.public)
    d = node.departure if sn is None else None
    return {
        "downtime_credit": credit_at(sn, node.height, node.params) if sn is not None else None,
        "credit_warning": node.credit_warning(),
        "departure": None if d is None else Departure(
            height=d.height, kind=d.kind, reason=d.reason, stakes_unlock_height=d.stakes_unlock_height,
            stakes_locked_blocks=max(d.stakes_unlock_height - 1 - node.height, 0)),
        "registration_pending": sn is None and node.registration_pending(),
    }
