"""ProofBook: this node's view of every service node's uptime proofs.

Written only by the node (`Node.accept_proof`, `OwnProof`); read by the
service-node duties (judging), quorumnet (where members are) and the RPC (`last_uptime_proof`).
"""

from __future__ import annotations


class ProofBook:
    """Last accepted proof per service node, where each can be reached, and our own refusals."""

    def __init__(self) -> None:
        self._last: dict[bytes, int] = {}
        self._previous: dict[bytes, int] = {}
        self._endpoints: dict[bytes, tuple[str, int]] = {}
        self.version = 0
        """Counts accepted proofs, so answers that show proof times know when to refresh."""
        self.own_refusal = ""
        """Why a peer last refused this node's own proof ('' if none has, or a peer accepted a
        later one)."""
        self.own_refused_reason = ""
        """The peer's reason alone, for the status line."""
        self.own_refused_sent = 0
        """The newest own proof we had sent when the refusal came: a peer's acceptance of it or
        of a later one ends the refusal."""
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
