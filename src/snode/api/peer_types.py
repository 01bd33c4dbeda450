"""The admin RPC's peer records (`get_peers`); named in `snode.api.types` with the others."""

from __future__ import annotations

from snode.api.base import Result


class PeerInfo(Result, frozen=True):
    """One connected peer."""

    address: str
    """`<ip>:<port>` of the connection."""
    listen_address: str | None
    """Where the peer accepts connections, when it said so."""
    direction: str
    """`inbound` or `outbound`."""
    height: int
    """The peer's chain height as it last told us."""
    agent: str
    """The peer's software and version."""
    connected_since: int
    """Unix seconds."""


class BanInfo(Result, frozen=True):
    """One banned IP address."""

    ip: str
    """The banned address."""
    seconds_left: int
    """Until the ban ends."""
    reason: str
    """What the peer did."""


class PeersResult(Result, frozen=True):
    """`get_peers`."""

    peers: list[PeerInfo]
    """Connected peers that completed the handshake, by address."""
    bans: list[BanInfo]
    """Bans in force."""
