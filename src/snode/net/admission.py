"""Whether a new inbound connection may stay: the per-address cap, the cap on connections still
in their handshake, and the inbound slots with their eviction rule (`addrman.choose_eviction`).

Silent connections must never hold the slots: at most MAX_PENDING_PER_IP of one address's, and
MAX_PENDING in all, may be waiting for their Hello (over it the oldest is closed: an honest peer
says Hello in milliseconds), so a newcomer always finds a handshaken peer to evict or a free slot.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from snode.common.logs import LIMITED
from snode.net import limits as L
from snode.net.addrman import Candidate, choose_eviction
from snode.net.peer import Peer

log = logging.getLogger(__name__)


def limited(peer: Peer) -> dict[str, bool] | None:
    """An inbound connection's log lines go through the repeat limiter (anyone can make one,
    again and again); an outbound one's are few (MAX_OUTBOUND slots, dialled with backoff)."""
    return None if peer.outbound else LIMITED


def admit(peer: Peer, connections: Iterable[Peer]) -> bool:
    """Whether inbound `peer` (not banned) may stay among `connections` (every open one, handshake
    done or not): under MAX_PER_IP from its address, under MAX_PENDING_PER_IP of its address's
    without a handshake (over MAX_PENDING in all, the oldest of those is closed), and in an
    inbound slot. Each refusal's line goes through the repeat limiter: anyone can cause one."""
    live = [p for p in connections if not p.writer.is_closing()]
    if sum(1 for p in live if p.key == peer.key) >= L.MAX_PER_IP:
        log.info("refused peer %s: %d connections from that address already", peer.name, L.MAX_PER_IP,
                 extra=LIMITED)
        return False
    pending = sorted((p for p in live if not p.outbound and p.hello is None), key=lambda p: p.connected_at)
    if sum(1 for p in pending if p.key == peer.key) >= L.MAX_PENDING_PER_IP:
        log.info("refused peer %s: %d connections from that address still in their handshake",
                 peer.name, L.MAX_PENDING_PER_IP, extra=LIMITED)
        return False
    if len(pending) >= L.MAX_PENDING:
        log.info("closed peer %s, silent since it connected, to make room for %s", pending[0].name,
                 peer.name, extra=LIMITED)
        pending[0].close()
        live.remove(pending[0])
    return _inbound_slot(peer, [p for p in live if not p.outbound])


def _inbound_slot(peer: Peer, inbound: list[Peer]) -> bool:
    """Whether `peer` may take an inbound slot: a free one, or one made by evicting an
    unprotected peer. Connections still in their handshake count too (each may hold a buffer),
    but only handshaken ones can be evicted."""
    if len(inbound) < L.MAX_INBOUND:
        return True
    victim = choose_eviction([Candidate(p, p.ip, p.connected_at, p.last_block_at)
                              for p in inbound if p.hello is not None])
    if not isinstance(victim, Peer):
        log.info("refused peer %s: %d inbound connections already", peer.name, L.MAX_INBOUND, extra=LIMITED)
        return False
    log.info("evicted inbound peer %s to make room for %s", victim.name, peer.name, extra=LIMITED)
    victim.close()
    return True
