"""Quorumnet: the SN-to-SN channel for votes, on CurveZMQ.

Each SN's X25519 identity is derived from its Ed25519 key, so the key an SN registered is the key
it is known by here. The ZAP handler lets in only clients whose key is a registered SN's; anyone
else fails the CURVE handshake and is logged. Messages are canonical msgpack `QuorumMessage`s; a
member that sends garbage is ignored and logged (it is a registered SN: the quorum, not the
transport, judges it).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final

import zmq
import zmq.asyncio
from zmq.auth.asyncio import AsyncioAuthenticator
from zmq.utils import z85

from snode.core.crypto import SigningKey, x25519_public
from snode.core.encoding import encode
from snode.core.errors import DecodeError
from snode.net.events import QuorumMessageReceived
from snode.params import MAX_BLOCK_BYTES
from snode.net.protocol import QuorumMessage, strict_decoder
from snode.node.node import Node

log = logging.getLogger(__name__)

SEND_HWM: Final = 1_000
"""Messages queued per destination before new ones are dropped (votes are re-cast each block)."""
MAX_MESSAGE: Final = MAX_BLOCK_BYTES + 64 * 1024
"""A round's block template is the largest message: up to a whole block."""


class QuorumNet:
    """This SN's quorumnet endpoint: one ROUTER to receive, one DEALER per destination."""

    def __init__(self, node: Node, key: SigningKey, *, bind_ip: str, port: int) -> None:
        self.node = node
        self.key = key
        self.bind_ip = bind_ip
        self.port = port
        self._public = x25519_public(key.public)
        self._secret = key.x25519_secret()
        self._keys_z85 = (z85.encode(self._secret), z85.encode(self._public))
        """Our (secret, public) CURVE keys as ZeroMQ takes them, encoded once, not per socket."""
        self._allowed: set[bytes] = set()
        self._allowed_from: object = None
        self._ctx = zmq.asyncio.Context()
        self._auth: AsyncioAuthenticator | None = None
        self._router: zmq.asyncio.Socket | None = None
        self._dealers: dict[bytes, tuple[str, zmq.asyncio.Socket]] = {}
        self._task: asyncio.Task[None] | None = None
        self._probes: set[zmq.asyncio.Socket] = set()
        """Sockets of reachability tests under way: closed at stop, or the context never ends."""
        self.refused = 0
        self.denied: frozenset[str] = frozenset()
        """Addresses this node is cut off from (`deny`)."""

    # --- ZAP: who may connect -----------------------------------------------------------------

    def callback(self, domain: str, z85_key: bytes) -> bool:
        """ZAP credentials provider: True for the X25519 key of a registered SN."""
        self._refresh_allowed()
        key = z85.decode(z85_key)
        if key in self._allowed:
            return True
        self.refused += 1
        log.warning("quorumnet: refused a client whose key %s is not a registered service node's",
                    key.hex()[:16])
        return False

    def deny(self, ips: frozenset[str]) -> None:
        """Cut this node off from `ips` (`PeerManager.deny`'s twin): nothing is sent to a member
        whose proof declares one of them (its queued messages are dropped), and a reachability
        test of one fails. A partition denies both ways, so nothing comes from them either."""
        self.denied = ips
        for member, (address, sock) in list(self._dealers.items()):
            if _address_ip(address) in ips:
                sock.close(linger=0)
                del self._dealers[member]

    def _refresh_allowed(self) -> None:
        registry = self.node.state.service_nodes
        if registry is self._allowed_from:
            return
        allowed = set()
        for pubkey in registry.keys():
            try:
                allowed.add(x25519_public(pubkey))
            except ValueError:
                continue
        self._allowed, self._allowed_from = allowed, registry

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Bind the ROUTER (raises zmq.ZMQError if the port is taken)."""
        self._auth = AsyncioAuthenticator(self._ctx)
        self._auth.start()
        self._auth.configure_curve_callback("*", credentials_provider=self)
        router = self._ctx.socket(zmq.ROUTER)
        router.curve_server = True
        router.curve_secretkey, router.curve_publickey = self._keys_z85
        router.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE)
        router.setsockopt(zmq.LINGER, 0)
        host = f"[{self.bind_ip}]" if ":" in self.bind_ip else self.bind_ip
        router.bind(f"tcp://{host}:{self.port}")
        self._router = router
        self._task = asyncio.create_task(self._receive(), name="quorumnet")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for sock in list(self._probes):
            sock.close(linger=0)
        self._probes.clear()
        for _, sock in self._dealers.values():
            sock.close(linger=0)
        if self._router is not None:
            self._router.close(linger=0)
        if self._auth is not None:
            self._auth.stop()
        self._ctx.term()

    async def _receive(self) -> None:
        assert self._router is not None
        while True:
            frames = await self._router.recv_multipart()
            if len(frames) != 2:
                continue
            try:
                message: QuorumMessage = _parse_quorum_message(frames[1])
            except DecodeError as err:
                log.info("quorumnet: ignored an undecodable message: %s", err.reason)
                continue
            self.node.hub.publish(QuorumMessageReceived(message))

    # --- sending ------------------------------------------------------------------------------

    def send(self, member: bytes, message: Any) -> bool:
        """Queue a message for SN `member` at the address of its last uptime proof; False when
        its address is not known yet or its queue is full."""
        endpoint = self.node.proofs.endpoint(member)
        if endpoint is None or member == self.key.public:
            return False
        ip, port = endpoint
        if ip in self.denied:
            return False
        address = f"tcp://[{ip}]:{port}" if ":" in ip else f"tcp://{ip}:{port}"
        cached = self._dealers.get(member)
        if cached is None or cached[0] != address:
            if cached is not None:
                cached[1].close(linger=0)
            sock = self._ctx.socket(zmq.DEALER)
            sock.curve_secretkey, sock.curve_publickey = self._keys_z85
            sock.curve_serverkey = z85.encode(x25519_public(member))
            sock.setsockopt(zmq.SNDHWM, SEND_HWM)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(address)
            cached = self._dealers[member] = (address, sock)
        try:
            sent = cached[1].send(encode(message), flags=zmq.NOBLOCK)
        except zmq.Again:
            return False
        if isinstance(sent, asyncio.Future):
            sent.add_done_callback(_consume)
        return True


    async def probe(self, member: bytes, timeout: float) -> bool | None:
        """Whether a CurveZMQ handshake with SN `member`, at the address and port its last
        uptime proof declares, completes within `timeout` seconds (None: no address known).
        A proof says where a node is; only this says it can be reached there.

        With ZMQ_IMMEDIATE a DEALER attaches a connection only once its handshake is complete,
        so the socket turns writable exactly then: no socket monitor (whose event sends hold a
        lock that `disable_monitor` also takes) is needed."""
        endpoint = self.node.proofs.endpoint(member)
        if endpoint is None or member == self.key.public:
            return None
        ip, port = endpoint
        if ip in self.denied:
            return False
        sock = self._ctx.socket(zmq.DEALER)
        sock.curve_secretkey, sock.curve_publickey = self._keys_z85
        sock.curve_serverkey = z85.encode(x25519_public(member))
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.IMMEDIATE, 1)
        self._probes.add(sock)
        try:
            sock.connect(f"tcp://[{ip}]:{port}" if ":" in ip else f"tcp://{ip}:{port}")
            events = await sock.poll(timeout * 1000, zmq.POLLOUT)  # type: ignore[call-arg]  # pyzmq stub lacks flags
            return bool(events)
        except zmq.ZMQError:
            return None  # closed under us: quorumnet is stopping
        finally:
            self._probes.discard(sock)
            sock.close(linger=0)


_parse_quorum_message: Final = strict_decoder(QuorumMessage)


def _address_ip(address: str) -> str:
    """The IP of a `tcp://ip:port` or `tcp://[ip]:port` endpoint."""
    host = address.removeprefix("tcp://").rpartition(":")[0]
    return host.strip("[]")


def _consume(future: asyncio.Future[Any]) -> None:
    """Read a send future's outcome so that a dropped message is not reported as unhandled."""
    if not future.cancelled():
        future.exception()
