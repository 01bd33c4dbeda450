"""Peer-to-peer networking: the sans-IO protocol (framing, messages) and the asyncio peer manager.

Others use the modules in `__all__`; the rest is its own.
"""

__all__ = [
    "address_file", "addrman", "admission", "bans", "events", "limits", "peer", "peers", "protocol", "quorum_guard",
    "quorumnet", "relay", "zmq_guard",
]
