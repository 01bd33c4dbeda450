"""ProofBook: this node's view of every service node's uptime proofs.

Written only by the node (`Node.accept_proof`, `OwnProof`); read by the
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
from snode.core.proofs import UptimeProof, check_proof, check_proof_rules, check_proof_version
from snode.core.state import ChainState
from snode.params import PROOF_CLOCK_TOLERANCE, NetworkParams

log = logging.getLogger(__name__)

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


class ProofBook:
    """Last and previous accepted proof per service node, and where each can be reached."""

    def __init__(self) -> None:
        self._last: dict[bytes, int] = {}
        self._previous: dict[bytes, int] = {}
        self._endpoints: dict[bytes, tuple[str, int]] = {}
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

    def record(self, pubkey: bytes, timestamp: int, endpoint: tuple[str, int]) -> None:
        """Note an accepted proof (the node's call)."""
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
