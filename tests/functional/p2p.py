"""A scriptable fake peer for hostile-peer tests (like Bitcoin Core's test_framework/p2p.py):
framing apart from behaviour, so a test can send well-formed messages or any bytes at all.

Every timeout here is stretched by SNODE_TIMEOUT_FACTOR (`framework.scaled`), as `wait_until`'s
are, so a slow machine waits longer instead of failing.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from snode.net import protocol as P
from snode.params import NETWORKS
from tests.functional.framework import next_loopback_ip, scaled


class FakePeer:
    """A raw TCP connection to a node's P2P port that speaks the protocol when told to."""

    def __init__(self, node: Any, *, source_ip: str) -> None:
        self.node = node
        self.sock = socket.create_connection((node.ip, node.p2p_port), timeout=scaled(10),
                                             source_address=(source_ip, 0))
        self.decoder = P.FrameDecoder()
        self.inbox: list[P.Message] = []

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, message: P.Message) -> None:
        self.send_raw(P.frame(message))

    def hello(self, **overrides: Any) -> P.Hello:
        info = self.node.get_info()
        fields: dict[str, Any] = dict(
            network_id=NETWORKS[self.node.network].network_id,
            genesis_hash=bytes.fromhex(info["genesis_hash"]), version=P.PROTOCOL_VERSION,
            agent="fake/1", height=0, top_hash=bytes.fromhex(info["genesis_hash"]),
            listen_port=0, nonce=int.from_bytes(os.urandom(7), "big"),
        )
        fields.update(overrides)
        return P.Hello(**fields)

    def handshake(self) -> P.Hello:
        """Send our Hello and read the node's."""
        self.send(self.hello())
        message = self.receive()
        assert isinstance(message, P.Hello), message
        return message

    def receive(self, timeout: float = 10) -> P.Message:
        """The next message from the node, waiting at most timeout (scaled) seconds."""
        deadline = time.monotonic() + scaled(timeout)
        while not self.inbox:
            self.sock.settimeout(max(deadline - time.monotonic(), 0.01))
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("node closed the connection")
            self.inbox.extend(P.parse(p) for p in self.decoder.feed(data))
        return self.inbox.pop(0)

    def receive_until(self, wanted: Any, timeout: float = 10) -> P.Message:
        """The first message for which `wanted(message)` is true, skipping the others; waits at
        most timeout (scaled) seconds in all."""
        deadline = time.monotonic() + scaled(timeout)
        while True:
            left = (deadline - time.monotonic()) / scaled(1)
            if left <= 0:
                raise TimeoutError("the node did not send the message waited for")
            message = self.receive(timeout=left)
            if wanted(message):
                return message

    def closed_by_node(self, timeout: float = 10) -> bool:
        """True once the node has closed the connection (reads and drops anything else);
        False if it is still open after timeout (scaled) seconds."""
        deadline = time.monotonic() + scaled(timeout)
        while time.monotonic() < deadline:
            self.sock.settimeout(max(deadline - time.monotonic(), 0.01))
            try:
                if not self.sock.recv(65536):
                    return True
            except (ConnectionResetError, BrokenPipeError):
                return True
            except TimeoutError:
                return False
        return False

    def close(self) -> None:
        self.sock.close()


def cut_off_after(node: Any, data: bytes, what: str) -> str:
    """From a fresh loopback address: shake hands, send `data` (any bytes), and see the node
    hang up; the address, for the test to look up its ban."""
    source = next_loopback_ip()
    peer = FakePeer(node, source_ip=source)
    try:
        peer.handshake()
        peer.send_raw(data)
        assert peer.closed_by_node(), f"{what}: not disconnected"
    finally:
        peer.close()
    return source
