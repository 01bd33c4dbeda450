"""ProofBook: this node's view of every service node's uptime proofs.

Written only by the node (`Node.accept_proof`, `OwnProof`); read by the
service-node duties (judging), quorumnet (where members are) and the RPC (`last_uptime_proof`).
Saved in the store when the node closes and at times while it runs (`saved`), and read back when
it opens (`restore`): a restarted node knows when the network last accepted each proof, its own
among them, instead of showing `proof: never` until the next one (the duties still wait a
decommission age before judging anyone: `sn_duties`).
"""

from __future__ import annotations

import logging
from collections.abc import Container

import msgspec

from snode.params import PROOF_CLOCK_TOLERANCE

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


class ProofBook:
    """Last accepted proof per service node, where each can be reached, and our own refusals."""

    def __init__(self) -> None:
        self._last: dict[bytes, int] = {}
        self._previous: dict[bytes, int] = {}
        self._endpoints: dict[bytes, tuple[str, int]] = {}
        self.version = 0
        """Counts accepted proofs, so answers that show proof times know when to refresh."""
        self.saved_version = 0
        """`version` when the book was last saved or restored (nothing new to save if equal)."""
        self.own_refusal = ""
        """Why a peer last refused this node's own proof ('' if none has, or a peer accepted a
        later one)."""
        self.own_refused_reason = ""
        """Why, alone, for the status line (our words, made from the peer's refusal code)."""
        self.own_refused_sent = 0
        """The timestamp of the refused proof: a peer's acceptance of it or of a later one ends
        the refusal."""
        self.own_sent = (0, 0)
        """(last, previous) timestamps of the proofs this node signed and sent."""
        self.own_accepted_by = ""
        """The peer that acknowledged our last accepted proof."""

    def last_accepted(self, pubkey: bytes) -> int:
        """Timestamp of the last proof accepted from `pubkey`, 0 if none. For this node's own
        key: the last one a peer acknowledged (what the network accepted, not what we sent)."""
        return self._last.get(pubkey, 0)

    def previous_accepted(self, pubkey: bytes) -> int:
        """Timestamp of the proof accepted before the last one (the rate rule), 0 if none."""
        return self._previous.get(pubkey, 0)

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
        """The book's proofs as the store keeps them (the node's refusal notes are not kept)."""
        self.saved_version = self.version
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
        except (msgspec.DecodeError, msgspec.ValidationError) as err:
            log.warning("the saved uptime proofs are unreadable (%s); starting without them", err)
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
        self.saved_version = self.version
        return len(kept)
