"""What this daemon tells its operator as it happens (`GET /events`, `snode-cli watch`,
`--notify`): one JSON object per event.

Events: `block` (a new tip), `reorganization`, `state` (this node's own service-node record
changed: registered, funded, active, payable, decommissioned, recommissioned, unlocking, left),
`proof_accepted` / `proof_refused` (the network's word on this node's own proofs), `reward`
(a block's coinbase paid this node; `amount` is what the operator's wallet received from that
coinbase, its fee and share and the block's fees when the operator made it), `credit_low` (this
active node's downtime credit is short of an outage: its next one deregisters it; `credit`, and
`reason` in words with the stake lock and until when), `sync_started` / `sync_finished`,
`peer_banned`, `upgrade_required` (a fork this node does not know: `node.upgrade`;
at once, then daily, then hourly in its last day). A state event's `height` is the one the chain records for the change.

Each event gets a number, higher than any before it, also across restarts of the daemon (the
first is the start's wall-clock time in microseconds): a web client that reconnects with the last
number it saw (SSE's Last-Event-ID) gets the events after it again from a ring of the last RECENT,
or a `missed` event when they are no longer there (more than RECENT ago, or from an earlier run).

Each web client gets a bounded queue: a client that does not read is dropped, never waits on
the daemon. Local listeners (the notify command) get this node's own events synchronously.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Final

from snode.core import service_nodes as sn_rules
from snode.core.blocks import Block, block_hash
from snode.core.credit import credit_at
from snode.core.standing import credit_warning, departure_in
from snode.core.state import ServiceNode
from snode.core.transactions import StateChange
from snode.net.events import PeerBanned
from snode.node.events import (
    BlocksAdopted,
    ChainReorganized,
    OwnProofAccepted,
    OwnProofRefused,
    SyncProgress,
)
from snode.node.node import Node

log = logging.getLogger(__name__)

MAX_QUEUED: Final = 256
"""Events waiting for one web client; past this the client is dropped."""

RECENT: Final = 512
"""Events kept for clients that reconnect (Last-Event-ID); about 30 blocks' worth on a busy node."""

OWN_EVENTS: Final = frozenset({"state", "proof_refused", "reward", "credit_low", "upgrade_required"})
"""The events about this service node that the notify command runs for."""

UPGRADE_LOOK: Final = 5.0
"""Seconds between two looks at whether an `upgrade_required` event is due."""

Event = dict[str, Any]
Numbered = tuple[int, Event]
"""An event and its number (SSE's `id:`)."""


class Subscription:
    """One web client's queue of events."""

    def __init__(self, backlog: int = 0) -> None:
        self.queue: asyncio.Queue[Numbered] = asyncio.Queue(maxsize=MAX_QUEUED + backlog)
        self.dropped = False
        """It fell MAX_QUEUED events behind: the feed stopped filling its queue."""

    async def next(self) -> Numbered | None:
        """The next event; None once the client was dropped and has read what was queued."""
        if self.dropped and self.queue.empty():
            return None
        return await self.queue.get()


class EventFeed:
    """Turns the hub's events into the operator's events and fans them out."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self._clients: set[Subscription] = set()
        self._listeners: list[Callable[[Event], None]] = []
        self._own = self._own_record()
        self._credit_low = False
        """The last block's `credit_low` condition (False at start: a short credit is told at the first block)."""
        self._syncing = False
        self._recent: deque[Numbered] = deque(maxlen=RECENT)
        self._last = time.time_ns() // 1000  # numbers stay above an earlier run's
        hub = node.hub
        hub.subscribe(BlocksAdopted, self._on_blocks)
        hub.subscribe(ChainReorganized, lambda e: self._emit({
            "event": "reorganization", "fork_height": e.fork_height, "undone": e.undone,
            "applied": e.applied, "height": node.height}))
        hub.subscribe(OwnProofAccepted, lambda e: self._emit({
            "event": "proof_accepted", "timestamp": e.timestamp, "by": e.by}))
        hub.subscribe(OwnProofRefused, lambda e: self._emit({
            "event": "proof_refused", "reason": e.reason, "by": e.by}))
        hub.subscribe(SyncProgress, self._on_sync)
        hub.subscribe(PeerBanned, lambda e: self._emit({
            "event": "peer_banned", "ip": e.ip, "reason": e.reason, "seconds": e.seconds}))

    # --- consumers ----------------------------------------------------------------------------

    def subscribe(self, last_seen: int | None = None) -> Subscription:
        """A new web client's queue (end it with `unsubscribe`); `last_seen`: the number of the
        last event a reconnecting client had, to be given the ones after it first."""
        kept = [item for item in self._recent if item[0] > last_seen] if last_seen is not None else []
        client = Subscription(backlog=len(kept) + 1 if last_seen is not None else 0)
        if last_seen is not None and last_seen < self._last:
            oldest = kept[0][0] if kept else self._last + 1
            if oldest > last_seen + 1:  # some are gone: say so rather than pretend nothing happened
                client.queue.put_nowait((oldest - 1, {
                    "event": "missed", "after": last_seen, "time": self.node.now(),
                    "reason": f"events after {last_seen} are no longer kept (the last {RECENT} are)"}))
            for item in kept:
                client.queue.put_nowait(item)
        self._clients.add(client)
        return client

    def unsubscribe(self, client: Subscription) -> None:
        self._clients.discard(client)

    def listen(self, listener: Callable[[Event], None]) -> None:
        """Call `listener` with every event about this service node (OWN_EVENTS)."""
        self._listeners.append(listener)

    async def watch_upgrade(self) -> None:
        """`upgrade_required` (this node learnt of a fork it does not know: `node.upgrade`) at
        once, then daily, then hourly in the fork's last day; looked at every UPGRADE_LOOK seconds."""
        node = self.node
        while True:
            event = node.upgrade.notice_due(node.height, node.now())
            if event is not None:
                self._emit(event)
            await asyncio.sleep(UPGRADE_LOOK)

    def _emit(self, event: Event) -> None:
        event.setdefault("time", self.node.now())
        self._last += 1
        numbered = (self._last, event)
        self._recent.append(numbered)
        for client in list(self._clients):
            try:
                client.queue.put_nowait(numbered)
            except asyncio.QueueFull:
                client.dropped = True  # it reads what it has, then its stream ends
                self._clients.discard(client)
                log.info("events: dropped a client %d events behind", MAX_QUEUED)
        if event["event"] in OWN_EVENTS:
            for listener in self._listeners:
                listener(event)

    # --- the chain ------------------------------------------------------------------------------

    def _on_blocks(self, event: BlocksAdopted) -> None:
        for block in event.blocks[-16:]:  # a sync's batch: its last blocks, not thousands of lines
            self._emit({"event": "block", "height": block.header.height,
                        "hash": block_hash(block.header).hex(),
                        "transactions": len(block.transactions), "round": block.header.round})
        before, after = self._own, self._own_record()
        self._own = after
        for change in own_changes(before, after, event.height, self.node, event.blocks):
            self._emit(change)
        self._credit(after, event.height)

    def _credit(self, own: ServiceNode | None, height: int) -> None:
        """A `credit_low` event when this active node's downtime credit falls short of an outage
        (`standing.credit_warning`: its next one deregisters it), or is short at the first block
        after a start; once again only after it has recovered."""
        warning = credit_warning(own, height, self.node.params) if own is not None and own.active else ""
        if warning and not self._credit_low:
            assert own is not None
            self._emit({"event": "credit_low", "credit": credit_at(own, height, self.node.params),
                        "reason": warning, "height": own.credit_height, "pubkey": own.pubkey.hex()})
        self._credit_low = bool(warning)

    def _on_sync(self, event: SyncProgress) -> None:
        syncing = event.target > 0
        if syncing != self._syncing:
            self._syncing = syncing
            self._emit({"event": "sync_started" if syncing else "sync_finished",
                        "height": event.height, "target": event.target})

    def _own_record(self) -> ServiceNode | None:
        ident = self.node.identity
        return self.node.state.service_nodes.get(ident.key.public) if ident is not None else None


def own_changes(
    before: ServiceNode | None, after: ServiceNode | None, height: int, node: Node,
    blocks: tuple[Block, ...],
) -> list[Event]:
    """The `state` and `reward` events between two records of this node."""
    if before is None and after is None:
        return []
    pubkey = (after or before).pubkey.hex()  # type: ignore[union-attr]  # one is not None

    def state(name: str, reason: str = "", at: int = height) -> Event:
        # `at`: the height the chain records for the change, not the tip that brought it (a
        # node that syncs after an outage learns of its decommission blocks later).
        return {"event": "state", "state": name, "reason": reason, "height": at, "pubkey": pubkey}

    if after is None:
        assert before is not None
        removal = next((d for b in blocks if (d := departure_in(b, before.pubkey, node.params)) is not None), None)
        return [state("left", _why_left(before, blocks), removal.height if removal is not None else height)]
    events = []
    if before is None:
        events.append(state("registered", at=after.registration_height))
    if after.funded and (before is None or not before.funded):
        events.append(state("funded", at=after.funded_height))
    if after.requested_unlock_height and (before is None or not before.requested_unlock_height):
        events.append(state("unlocking", f"unlocks at height {after.requested_unlock_height}",
                            after.requested_unlock_height - node.params.unlock_duration))
    was_active = before is not None and before.active
    if was_active and after.active and before is not None and after.decommission_count > before.decommission_count:
        # Down and back within one batch (a sync after an outage): both, at the chain's heights.
        events.append(state("decommissioned", sn_rules.reason_label(after.last_decommission_reason),
                            _change_height(blocks, after.pubkey, sn_rules.StateChangeKind.DECOMMISSION, height)))
        was_active = False
    if after.active and not was_active:
        first = before is None or before.active_since == -1
        reason = sn_rules.reason_label(after.last_state_change_reason)
        events.append(state("active" if first else "recommissioned", reason, after.active_since))
    elif was_active and not after.active:
        events.append(state("decommissioned", sn_rules.reason_label(after.last_decommission_reason),
                            after.credit_height))
    payable = sn_rules.is_payable(after, height, node.params)
    if payable and not (before is not None and sn_rules.is_payable(before, height - len(blocks), node.params)):
        events.append(state("payable", at=after.active_since + node.params.payable_grace))
    paid = _paying_block(before, after, blocks)
    if paid is not None:
        received = sum(out.amount for out in paid.transactions[0].outputs if out.owner == after.operator)
        events.append({"event": "reward", "height": paid.header.height, "amount": received, "pubkey": pubkey})
    return events


def _paying_block(before: ServiceNode | None, after: ServiceNode, blocks: tuple[Block, ...]) -> Block | None:
    """The block of `blocks` whose coinbase paid this node its reward, or None.

    `last_reward_height` is the node's place in the reward queue, not a payment: a registration
    and a recommission put it at the back too. The block at that height paid it unless it is the
    one that registered or recommissioned it. Of a batch of blocks (a sync), only the last
    reward is seen."""
    height = after.last_reward_height
    if before is None or height == before.last_reward_height or height <= after.registration_height:
        return None
    block = next((b for b in blocks if b.header.height == height), None)
    if block is None or any(isinstance(tx.payload, StateChange) and tx.payload.sn_pubkey == after.pubkey
                            and tx.payload.kind == sn_rules.StateChangeKind.RECOMMISSION
                            for tx in block.transactions):
        return None
    return block


def _change_height(blocks: tuple[Block, ...], pubkey: bytes, kind: int, default: int) -> int:
    """The height of the last block of `blocks` whose state change of `kind` names `pubkey`."""
    return next((b.header.height for b in reversed(blocks) for tx in b.transactions
                 if isinstance(tx.payload, StateChange) and tx.payload.sn_pubkey == pubkey
                 and tx.payload.kind == kind), default)


def _why_left(before: ServiceNode, blocks: tuple[Block, ...]) -> str:
    """`unlock`, `pool expired`, or `deregistered: <reason>` (from the state change in the
    blocks that removed it)."""
    for block in blocks:
        for tx in block.transactions:
            payload = tx.payload
            if isinstance(payload, StateChange) and payload.sn_pubkey == before.pubkey:
                return f"deregistered: {sn_rules.Reason(payload.reason).label}"
    if before.requested_unlock_height:
        return "unlock"
    return "pool expired" if not before.funded else "deregistered"
