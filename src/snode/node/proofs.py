"""ProofBook: this node's view of every service node's uptime proofs.

Written only by the node (`Node.record_proof`, which `accept_proof` calls and to which `OwnProof`
and the simulation's judges hand what they record); read by the
service-node duties (judging), quorumnet (where members are) and the RPC (`last_uptime_proof`).
Saved in the store when the node closes and at times while it runs (`node.saved`,
`services.saving`), and read back when it opens (`restore`): a restarted node knows when the
network last accepted each proof, its own among them, instead of showing `proof: never` until the
next one (the duties still wait a decommission age before judging anyone: `sn_duties`).
"""

from __future__ import annotations

import logging
from collections.abc import Container

import msgspec

from snode.common import decode_reasons
from snode.core.proofs import (
    InvalidProof,
    ProofRefusal,
    UptimeProof,
    check_proof,
    check_proof_rules,
    check_proof_version,
)
from snode.core.state import ChainState
from snode.params import PROOF_CLOCK_TOLERANCE, NetworkParams

log = logging.getLogger(__name__)

ENDPOINT_CHANGES_BURST = 3
"""Changes of a node's endpoint (declared IP, quorumnet port) taken at once: a node that moves
and an operator who fixes `--service-node-public-ip` right after are never refused."""
ENDPOINT_CHANGE_EVERY = 3_600
"""Seconds that earn back one endpoint change (a token bucket per node, `EndpointChanges`). Every
member probes the endpoint a node's proof declares, and a relayed proof's IP cannot be checked
against its signer's connection: this bounds how often a registered node can turn the quorum's
probes on an address of its choice (3 at once, then one an hour, 26 a day)."""
MAX_ENDPOINT_BUCKETS = 20_000
"""Nodes whose recent endpoint changes are remembered (the one idle longest goes first)."""

STORE_KEY = "proof book"
"""The store's `node_meta` key of the saved book (`ProofBook.saved` / `restore`)."""


class _Saved(msgspec.Struct, array_like=True, frozen=True):
    """One node's entry as saved: last and previous accepted proof, where it is reached."""

    pubkey: bytes
    last: int
    previous: int
    ip: str
    port: int


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(list[_Saved])


def check_against(
    proof: UptimeProof, params: NetworkParams, state: ChainState, now: int, history: tuple[int, int], *,
    signature: bool = True, version: bool = True,
) -> None:
    """`core.proofs.check_proof` of `proof` on the chain at `state` (its key registered there),
    after `history`: the (last, previous) proofs of its key it must be newer than and rate-limited
    against. `signature` False: every rule but the signature (verified already, in a batch).
    InvalidProof names the failed rule."""
    check = check_proof if signature else check_proof_rules
    check(proof, params, registered=proof.pubkey in state.service_nodes, now=now,
          last_accepted=history[0], previous_accepted=history[1])
    if version:  # False for this node's own proof: the network says whether its snoded is outdated
        check_proof_version(proof, params.rules_at(state.height + 1))


class EndpointChanges:
    """A token bucket per node for changes of its endpoint: `ENDPOINT_CHANGES_BURST` at once,
    one more each `every` seconds (the receiver's clock). A node's first endpoint is no change."""

    def __init__(self, *, burst: int = ENDPOINT_CHANGES_BURST, every: int = ENDPOINT_CHANGE_EVERY,
                 capacity: int = MAX_ENDPOINT_BUCKETS) -> None:
        self.burst, self.every, self.capacity = burst, every, capacity
        self._buckets: dict[bytes, tuple[float, int]] = {}
        """pubkey -> (tokens, when counted), oldest use first."""

    def _tokens(self, pubkey: bytes, now: int) -> float:
        tokens, then = self._buckets.get(pubkey, (float(self.burst), now))
        return min(float(self.burst), tokens + max(0, now - then) / self.every)

    def allowed(self, pubkey: bytes, now: int) -> bool:
        return self._tokens(pubkey, now) >= 1

    def spend(self, pubkey: bytes, now: int) -> None:
        tokens = self._tokens(pubkey, now) - 1
        self._buckets.pop(pubkey, None)
        self._buckets[pubkey] = (max(0.0, tokens), now)
        while len(self._buckets) > self.capacity:
            del self._buckets[next(iter(self._buckets))]


class ProofBook:
    """Last and previous accepted proof per service node, and where each can be reached."""

    def __init__(self, changes: EndpointChanges | None = None) -> None:
        self._last: dict[bytes, int] = {}
        self._previous: dict[bytes, int] = {}
        self._endpoints: dict[bytes, tuple[str, int]] = {}
        self.changes = changes or EndpointChanges()
        self.version = 0
        """Counts accepted proofs, so answers that show proof times (and saves) know when to
        refresh."""

    def last_accepted(self, pubkey: bytes) -> int:
        """Timestamp of the last proof accepted from `pubkey`, 0 if none. For this node's own
        key: the last one a peer acknowledged (what the network accepted, not what we sent)."""
        return self._last.get(pubkey, 0)

    def history(self, pubkey: bytes) -> tuple[int, int]:
        """(last, previous) accepted proofs of `pubkey`: what its next proof must follow."""
        return self._last.get(pubkey, 0), self._previous.get(pubkey, 0)

    def endpoint(self, pubkey: bytes) -> tuple[str, int] | None:
        """(public IP, quorumnet port) from the node's last accepted proof, if any."""
        return self._endpoints.get(pubkey)

    def check_endpoint(self, proof: UptimeProof, now: int) -> None:
        """InvalidProof (RATE) if `proof` moves its node's endpoint and its node has no change
        left (`EndpointChanges`); the receiver's log says which rule, the signer hears RATE."""
        old = self._endpoints.get(proof.pubkey)
        if old is not None and old != (proof.public_ip, proof.quorumnet_port) \
                and not self.changes.allowed(proof.pubkey, now):
            raise InvalidProof(
                f"endpoint changes are rate-limited to {self.changes.burst} at once and one per "
                f"{self.changes.every} s: {old[0]}:{old[1]} to {proof.public_ip}:{proof.quorumnet_port} "
                "refused", ProofRefusal.RATE)

    def record(self, pubkey: bytes, timestamp: int, endpoint: tuple[str, int], *, now: int | None = None) -> None:
        """Note an accepted proof (the node's call); a new endpoint spends one of its node's
        changes, counted at `now` (the proof's timestamp if not given)."""
        old = self._endpoints.get(pubkey)
        if old is not None and old != endpoint:
            self.changes.spend(pubkey, timestamp if now is None else now)
        if pubkey in self._last:
            self._previous[pubkey] = self._last[pubkey]
        self._last[pubkey] = timestamp
        self._endpoints[pubkey] = endpoint
        self.version += 1

    def saved(self) -> bytes:
        """The book's proofs as the store keeps them."""
        return _encoder.encode([
            _Saved(key, last, self._previous.get(key, 0), *self._endpoints.get(key, ("", 0)))
            for key, last in self._last.items()
        ])

    def restore(self, data: bytes, *, now: int | None = None, registered: Container[bytes] | None = None) -> int:
        """Take back what `saved` wrote (before any proof is recorded); how many entries. A
        damaged record is logged and skipped: proofs come again within an interval. Left out:
        proofs stamped more than the clock tolerance after `now` (saved under a clock that was
        ahead: they would make every real proof look old) and nodes not in `registered`."""
        try:
            entries = _decoder.decode(data)
        except decode_reasons.DECODE_FAILURES as err:
            log.warning("the saved uptime proofs are unreadable (%s); starting without them",
                        decode_reasons.reason(err))
            return 0
        kept = [e for e in entries if (now is None or e.last <= now + PROOF_CLOCK_TOLERANCE)
                and (registered is None or e.pubkey in registered)]
        if len(kept) < len(entries):
            log.info("saved uptime proofs: %d of %d left out (from the clock's future, or of "
                     "nodes no longer registered)", len(entries) - len(kept), len(entries))
        for entry in kept:
            self._last[entry.pubkey] = entry.last
            if entry.previous:
                self._previous[entry.pubkey] = entry.previous
            if entry.ip:
                self._endpoints[entry.pubkey] = (entry.ip, entry.port)
        self.version += 1
        return len(kept)
