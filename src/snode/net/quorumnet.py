"""Quorumnet: the SN-to-SN channel for votes, on CurveZMQ.

Each SN's X25519 identity is derived from its Ed25519 key, so the key an SN registered is the key
it is known by here. The ZAP handler lets in only clients whose key is a registered SN's; anyone
else fails the CURVE handshake and is logged. Messages are canonical msgpack `QuorumMessage`s.
Each is tied to the member whose connection it came on: ZAP names the admitted key as the
connection's User-Id, which ZeroMQ stamps on every message read from it. What a member sends
is budgeted per kind and its junk scored (`net.quorum_guard`); at the threshold its connections
are cut and ZAP refuses its key for a while.

The sockets are plain `zmq` sockets whose notification FD the event loop watches, and ZAP is
answered right there, rather than through pyzmq's asyncio wrapper and its authenticator, which
make Futures, poller registrations and callbacks for each message, handshake and probe (most of
quorumnet's 5 ms of CPU a block, docs/PERFORMANCE.md "2c"). ZeroMQ's FD only says that the
socket's state may have changed, and a read of `EVENTS`, a recv or a send takes that signal: so
each wake reads `EVENTS` until the socket has nothing more, and nothing is left waiting for a
signal that was already taken.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable
from typing import Any, Final, cast

import zmq

from snode.common.descriptors import DescriptorWatch
from snode.common.logs import LIMITED
from snode.common.text import printable
from snode.core.crypto import SigningKey, x25519_public
from snode.core.encoding import encode
from snode.core.errors import DecodeError
from snode.net.events import QuorumMessageReceived
from snode.net.peer import TokenBucket
from snode.net.protocol import QuorumMessage, strict_decoder
from snode.net.quorum_guard import (
    KINDS,
    SCORE_IMPERSONATION,
    SCORE_OVER_BUDGET,
    SCORE_UNDECODABLE,
    MemberGuard,
    message_tag,
    signer_of,
)
from snode.net.quorum_links import Link, set_heartbeats
from snode.net.zmq_guard import Caps, ListenerGuard
from snode.node.node import Node
from snode.params import MAX_BLOCK_BYTES

log = logging.getLogger(__name__)

SEND_HWM: Final = 1_000
"""Messages queued per destination before new ones are dropped (votes are re-cast each block)."""
MAX_MESSAGE: Final = MAX_BLOCK_BYTES + 64 * 1024
"""A round's block template is the largest message: up to a whole block."""
MESSAGES_A_TURN: Final = 64
"""Messages taken from the ROUTER in one turn of the event loop; the rest wait for the next turn,
so that a member's burst cannot hold the loop."""
DEALER_MAX_MESSAGE: Final = 1024
"""What a DEALER of ours takes from the other end: the handshake's commands (a few hundred bytes)
and nothing else. DEALERs only send, so a message to one (from whoever holds a member's key at
the address we connect to) drops that connection, rather than filling a receive queue."""
LISTENER_CAPS: Final = Caps(pending_per_ip=8, pending=128)
"""Connections to the ROUTER still in their handshake: 8 per address (a ninth is cut) and 128
in all (over it the oldest is cut), `net.zmq_guard`. Completed ones are registered service
nodes' (ZAP admits no other key), held per key by ADMISSIONS_BURST."""
ADMISSIONS_BURST: Final = 16
"""Handshakes ZAP admits of one member at once; one more each quarter of the reachability
interval (75 s on mainnet, 2.5 s on devnet). An honest member handshakes once for its
connection to us and again for a reachability test every few intervals; an insider that opened
connection after connection and held them idle took the descriptors until the listener cut
every new one, an honest tester's too, and the quorum judged the node unreachable. (Idle
connections send nothing to be scored by, and ZeroMQ does not say whose a closed one was, so
the bound is on admissions: at mainnet's pace an insider key needs some 50 days for the
descriptors a daemon has.)"""
MAX_ADMISSION_BUCKETS: Final = 40_000
"""Members whose admissions are counted (registered keys only; the least recent out)."""
ZAP_ENDPOINT: Final = "inproc://zeromq.zap.01"
"""Where ZeroMQ asks this context's handshakes whom to admit (RFC 27, ZAP 1.0)."""

# Plain ints: pyzmq's constants are enum members, and their `&` goes through Python code.
_EVENTS: Final = int(zmq.EVENTS)
_FD: Final = int(zmq.FD)
_POLLIN: Final = int(zmq.POLLIN)
_POLLOUT: Final = int(zmq.POLLOUT)
_NOBLOCK: Final = int(zmq.NOBLOCK)
int_option: Final = cast(Callable[["zmq.Socket[bytes]", int], int], zmq.Socket.getsockopt)
"""`getsockopt` for EVENTS and FD, which are ints (the stub says int | bytes); the public OMQ port uses it too."""


class QuorumNet:
    """This SN's quorumnet endpoint: one ROUTER to receive, one DEALER per destination."""

    def __init__(self, node: Node, key: SigningKey, *, bind_ip: str, port: int,
                 descriptors: DescriptorWatch | None = None) -> None:
        self.node = node
        self.descriptors = descriptors
        """The daemon's descriptor budget: a new connection is cut while it is short."""
        self.guard: ListenerGuard | None = None
        self.key = key
        self.bind_ip = bind_ip
        self.port = port
        self._public = x25519_public(key.public)
        self._secret = key.x25519_secret()
        self._allowed: dict[bytes, bytes] = {}
        """X25519 key -> the registered Ed25519 key it is derived from (the member's name)."""
        self._allowed_from: object = None
        self._ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self._zap: zmq.Socket[bytes] | None = None
        self._router: zmq.Socket[bytes] | None = None
        self._dealers: dict[bytes, Link] = {}
        """Our connection to each member we send to, at the address its proof declared then."""
        self._probes: dict[zmq.Socket[bytes], asyncio.Future[bool | None]] = {}
        """Reachability tests under way and their outcome: closed at stop, or the context never ends."""
        self.refused = 0
        self.handshakes_in = 0
        """CurveZMQ handshakes of others with our listener that reached ZAP (admitted or not)."""
        self.probes = 0
        """Fresh handshakes started as reachability tests (`probe`)."""
        self._closed_handshakes = 0
        """Handshakes of the links closed so far (`handshakes_out`)."""
        self.denied: frozenset[str] = frozenset()
        """Addresses this node is cut off from (`deny`)."""
        self.listener_closed = False
        """A fault test closed the listener to new connections (`close_listener`)."""
        self.members = MemberGuard()
        """Each member's budgets, score and ban."""
        self._admissions: dict[bytes, TokenBucket] = {}
        """Each member's handshakes admitted (ADMISSIONS_BURST), least recent first."""
        self._admission_rate = 4 / max(node.params.reachability_interval, 1)
        self._delivering: tuple[bytes, zmq.Frame] | None = None
        """The member whose message is being handled and that message (a service that finds it
        junk and bans the member cuts that connection at once)."""

    # --- ZAP: who may connect -----------------------------------------------------------------

    def admits(self, x25519_key: bytes, address: str = "?") -> bool:
        """Whether a client with this X25519 key (from `address`, for the log) may connect: the
        key of a registered SN."""
        self._refresh_allowed()
        member = self._allowed.get(x25519_key)
        now = time.monotonic()
        if member is not None and self.members.banned(member, now):
            self.refused += 1
            log.info("quorumnet: refused banned member %s", member.hex()[:16], extra=LIMITED)
            return False
        if member is not None and not self._admission(member, now):
            self.refused += 1
            log.info("quorumnet: refused member %s: over %d handshakes at once, one each %.1f s after",
                     member.hex()[:16], ADMISSIONS_BURST, 1 / self._admission_rate, extra=LIMITED)
            return False
        if member is not None:
            return True
        self.refused += 1
        # Anyone can cause this line: the daemon's RepeatLimiter writes 5 a minute of it and counts
        # the rest, as of every WARNING (tests/functional/test_log_flood.py).
        log.warning("quorumnet: refused a client whose key %s is not a registered service node's (from %s)",
                    x25519_key.hex()[:16], address)
        return False

    def _admission(self, member: bytes, now: float) -> bool:
        """Whether `member` may have one more handshake admitted now (ADMISSIONS_BURST)."""
        buckets = self._admissions
        bucket = buckets.pop(member, None)
        if bucket is None:
            bucket = TokenBucket(self._admission_rate, ADMISSIONS_BURST, ADMISSIONS_BURST, now)
        buckets[member] = bucket
        if len(buckets) > MAX_ADMISSION_BUCKETS:
            del buckets[next(iter(buckets))]
        return bucket.take(now)

    def zap_reply(self, request: list[bytes]) -> list[bytes]:
        """ZeroMQ's question about one CURVE handshake (a ZAP request) and this node's answer.
        A REP socket must answer every request it reads, so anything malformed gets a 400."""
        self.handshakes_in += 1
        if len(request) != 7 or request[0] != b"1.0" or request[5] != b"CURVE":
            return _zap_answer(request, b"400", b"a CURVE request of ZAP 1.0 expected")
        address = request[3].decode(errors="replace")
        if not self.admits(request[6], printable(address, 64)):
            return _zap_answer(request, b"400", b"not a registered service node, banned, or over its handshakes")
        if self.guard is not None:
            self.guard.admitted(address)
        return _zap_answer(request, b"200", b"OK", self._allowed[request[6]].hex().encode())

    def deny(self, ips: frozenset[str]) -> None:
        """Cut this node off from `ips` (`PeerManager.deny`'s twin): nothing is sent to a member
        whose proof declares one of them (its queued messages are dropped), and a reachability
        test of one fails. A partition denies both ways, so nothing comes from them either."""
        self.denied = ips
        for member, link in list(self._dealers.items()):
            if _address_ip(link.address) in ips:
                self._drop_link(member)

    def close_listener(self, closed: bool) -> bool:
        """A fault test's closed listener (devnet and regtest only, `app.partition`): while
        `closed`, the ROUTER's listening socket takes no new connection and those it accepted
        before live on (`net.listen_filter`). True when this changed it."""
        if closed == self.listener_closed or self._router is None:
            return False
        from snode.net.listen_filter import set_closed  # Linux only, and only fault tests use it

        if not set_closed(self.port, closed):
            log.warning("quorumnet: no listening socket on port %d to close or open", self.port)
            return False
        self.listener_closed = closed
        return True

    def _refresh_allowed(self) -> None:
        registry = self.node.state.service_nodes
        if registry is self._allowed_from:
            return
        allowed = {}
        for pubkey in registry.keys():
            try:
                allowed[x25519_public(pubkey)] = pubkey
            except ValueError:
                continue
        self._allowed, self._allowed_from = allowed, registry

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Answer ZAP, then bind the ROUTER (raises zmq.ZMQError if the port is taken). The ZAP
        socket comes first: a CURVE server with no ZAP handler bound admits every client."""
        loop = asyncio.get_running_loop()
        zap = self._ctx.socket(zmq.REP)
        zap.setsockopt(zmq.LINGER, 0)
        zap.bind(ZAP_ENDPOINT)
        self._zap = zap
        loop.add_reader(int_option(zap, _FD), self._answer_zap)
        router = self._ctx.socket(zmq.ROUTER)
        router.setsockopt(zmq.CURVE_SERVER, 1)
        router.setsockopt(zmq.CURVE_SECRETKEY, self._secret)
        router.setsockopt(zmq.CURVE_PUBLICKEY, self._public)
        router.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE)
        router.setsockopt(zmq.LINGER, 0)
        # Before the bind: the handshake deadline and the monitor hold from the first connection.
        self.guard = ListenerGuard(self._ctx, router, name="quorumnet", caps=LISTENER_CAPS,
                                   descriptors=self.descriptors)
        host = f"[{self.bind_ip}]" if ":" in self.bind_ip else self.bind_ip
        router.bind(f"tcp://{host}:{self.port}")
        self._router = router
        loop.add_reader(int_option(router, _FD), self._receive)

    async def stop(self) -> None:
        loop = asyncio.get_running_loop()
        for sock, outcome in list(self._probes.items()):
            _close_watched(loop, sock)
            if not outcome.done():
                outcome.set_result(None)
        self._probes.clear()
        for member in list(self._dealers):
            self._drop_link(member)
        if self.guard is not None:
            self.guard.close()
            self.guard = None
        # The ROUTER before the ZAP socket: no handshake may find it without its handler.
        for watched in (self._router, self._zap):
            if watched is not None:
                _close_watched(loop, watched)
        self._router = self._zap = None
        self._ctx.term()

    def _answer_zap(self) -> None:
        """Answer every ZAP request waiting (the event loop calls this when the FD signals)."""
        zap = self._zap
        while zap is not None and int_option(zap, _EVENTS) & _POLLIN:
            request = zap.recv_multipart(_NOBLOCK)
            # The REP socket now owes this request an answer: without one it reads no other, and
            # every later handshake waits for ZAP. A bug (say a malformed registry key) costs one
            # refused handshake, which ZeroMQ retries.
            try:
                reply = self.zap_reply(request)
            except Exception:
                log.exception("quorumnet: answering a ZAP request failed; the handshake is refused")
                reply = _zap_answer(request, b"500", b"internal error")
            zap.send_multipart(reply, _NOBLOCK)

    def _receive(self) -> None:
        """Take the messages waiting at the ROUTER, MESSAGES_A_TURN at most, then come back."""
        router = self._router
        for _ in range(MESSAGES_A_TURN):
            if router is None or not int_option(router, _EVENTS) & _POLLIN:
                return
            frames = router.recv_multipart(_NOBLOCK, copy=False)
            # Caught here, not left to the loop: the messages behind this one would wait for a
            # signal that was already taken.
            try:
                self._deliver(frames)
            except Exception:
                log.exception("quorumnet: handling a message failed")
            router = self._router  # a subscriber may have stopped quorumnet
        # More may be waiting, and its signal is already taken: look again on the next turn.
        asyncio.get_running_loop().call_soon(self._receive)

    def _deliver(self, frames: list[zmq.Frame]) -> None:
        """Publish the quorum message of a ROUTER's `[routing id, message]`, tied to the member
        whose connection it came on. A banned member's message is dropped and its connection
        cut; one over its kind's budget is dropped unread; junk scores its member."""
        last = frames[-1]
        member = _member_of(last)
        if member is None:
            return  # every connection ZAP admitted has its User-Id
        now = time.monotonic()
        if self.members.banned(member, now):
            self.members.dropped += 1
            _cut(last)
            return
        tag = message_tag(bytes(last.buffer[:2])) if len(frames) == 2 else None
        if tag is None:
            self._undecodable(member, last, "not one frame of a known quorum message kind")
            return
        if not self.members.take(member, tag, now):
            self._junk(member, last, SCORE_OVER_BUDGET, f"sent more {KINDS[tag]} messages than their budget")
            return
        try:
            message: QuorumMessage = _parse_quorum_message(last.bytes)
        except DecodeError as err:
            self._undecodable(member, last, err.reason)
            return
        signer = signer_of(message)
        if signer is not None and signer != member:
            self._junk(member, last, SCORE_IMPERSONATION, "sent a quorumnet message signed in another key's name")
            return
        self._delivering = (member, last)
        try:
            self.node.publish(QuorumMessageReceived(message, member))
        finally:
            self._delivering = None

    def _undecodable(self, member: bytes, frame: zmq.Frame, why: str) -> None:
        log.info("quorumnet: ignored an undecodable message from %s: %s", member.hex()[:16], why,
                 extra=LIMITED)  # a member can send many: counted, not each written
        self._junk(member, frame, SCORE_UNDECODABLE, "sent undecodable quorumnet messages")

    def junk(self, member: bytes, points: int, reason: str) -> None:
        """A service found `member`'s message junk (`quorum_guard`'s SCORE_* say how much each
        costs): its score grows, and at the threshold it is banned."""
        delivering = self._delivering
        frame = delivering[1] if delivering is not None and delivering[0] == member else None
        self._junk(member, frame, points, reason)

    def _junk(self, member: bytes, frame: zmq.Frame | None, points: int, reason: str) -> None:
        ban = self.members.junk(member, points, reason, time.monotonic())
        if ban is None:
            return
        log.warning("quorumnet: banned member %s for %d s, its connection cut and its handshakes refused: %s",
                    member.hex()[:16], self.members.ban_seconds, reason)
        if frame is not None:
            _cut(frame)  # its other connections, if any, are cut at their next message

    # --- sending ------------------------------------------------------------------------------

    def _dealer(self, member: bytes, *, immediate: bool = False) -> zmq.Socket[bytes]:
        """A DEALER with our CURVE keys that expects `member`'s (raw 32-byte keys: ZeroMQ takes
        them as they are, no Z85). `immediate`: writable only once a handshake is complete."""
        sock = self._ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.CURVE_SECRETKEY, self._secret)
        sock.setsockopt(zmq.CURVE_PUBLICKEY, self._public)
        sock.setsockopt(zmq.CURVE_SERVERKEY, x25519_public(member))
        sock.setsockopt(zmq.MAXMSGSIZE, DEALER_MAX_MESSAGE)
        sock.setsockopt(zmq.RCVHWM, 1)
        set_heartbeats(sock, self.node.params)
        if immediate:
            sock.setsockopt(zmq.IMMEDIATE, 1)
        return sock

    def send(self, member: bytes, message: Any) -> bool:
        """Queue a message for SN `member` at the address of its last uptime proof; False when
        its address is not known yet or its queue is full."""
        address = self._declared(member)
        if address is None:
            return False
        link = self._dealers.get(member)
        if link is None or link.address != address:
            if link is not None:
                self._drop_link(member)
            sock = self._dealer(member)
            sock.setsockopt(zmq.SNDHWM, SEND_HWM)
            sock.setsockopt(zmq.LINGER, 0)
            link = self._dealers[member] = Link(self._ctx, sock, address)
            link.connect()
        try:
            link.sock.send(encode(message), _NOBLOCK)
        except zmq.Again:
            return False
        return True

    def _declared(self, member: bytes) -> str | None:
        """The `tcp://` address of `member`'s quorumnet port as its last uptime proof declares
        it; None for ourselves, a member with no proof yet, or one cut off (`deny`)."""
        endpoint = self.node.proofs.endpoint(member)
        if endpoint is None or member == self.key.public:
            return None
        ip, port = endpoint
        if ip in self.denied:
            return None
        return f"tcp://[{ip}]:{port}" if ":" in ip else f"tcp://{ip}:{port}"

    def _drop_link(self, member: bytes) -> None:
        link = self._dealers.pop(member)
        link.close()
        self._closed_handshakes += link.handshakes

    def held(self, member: bytes) -> bool:
        """Whether we hold a live connection that we opened ourselves to the address and port
        `member`'s current proof declares, its CurveZMQ handshake complete (so the other end
        holds `member`'s key): what a reachability test may count as passed. A connection the
        member opened to us never counts, nor one to an address its proof no longer declares."""
        link = self._dealers.get(member)
        return link is not None and link.address == self._declared(member) and link.is_live()

    @property
    def handshakes_out(self) -> int:
        """CurveZMQ handshakes this node started as a client: reachability probes, and its
        links' connections (completed or failed)."""
        return self.probes + self._closed_handshakes + sum(link.handshakes for link in self._dealers.values())

    async def probe(self, member: bytes, timeout: float) -> bool | None:
        """Whether a CurveZMQ handshake with SN `member`, at the address and port its last
        uptime proof declares, completes within `timeout` seconds (None: no address known).
        A proof says where a node is; only this says it can be reached there.

        With ZMQ_IMMEDIATE a DEALER attaches a connection only once its handshake is complete,
        so the socket turns writable exactly then: no socket monitor is needed."""
        if self.key.public not in self.node.state.service_nodes:
            # Every member's ZAP refuses a client that is no registered service node: its failed
            # handshakes would say nothing of the member (a regtest daemon, the authority's key
            # in hand, once deregistered two running nodes as `unreachable` this way).
            return None
        address = self._declared(member)
        if address is None:  # cut off from it (`deny`): a failed test; else no address to test
            return False if self.node.proofs.endpoint(member) is not None and member != self.key.public else None
        loop = asyncio.get_running_loop()
        sock = self._dealer(member, immediate=True)
        self.probes += 1
        outcome: asyncio.Future[bool | None] = loop.create_future()
        self._probes[sock] = outcome

        def look() -> None:
            if not outcome.done() and int_option(sock, _EVENTS) & _POLLOUT:
                outcome.set_result(True)

        loop.add_reader(int_option(sock, _FD), look)
        timer = loop.call_later(timeout, _settle, outcome, False)
        try:
            sock.connect(address)
            look()
            return await outcome
        except zmq.ZMQError:
            return None  # an address ZeroMQ will not take: no test
        finally:
            timer.cancel()
            if self._probes.pop(sock, None) is not None:  # else stop() closed it
                _close_watched(loop, sock)


_parse_quorum_message: Final = strict_decoder(QuorumMessage)


def _zap_answer(request: list[bytes], status: bytes, text: bytes, user_id: bytes = b"") -> list[bytes]:
    """A ZAP 1.0 reply to `request` (its id echoed, if it has one), with no metadata; the user id
    names the admitted member on every message its connection brings."""
    return [b"1.0", request[1] if len(request) > 1 else b"", status, text, user_id, b""]


def _member_of(frame: zmq.Frame) -> bytes | None:
    """The member a message came from: the User-Id our ZAP handler gave its connection."""
    try:
        user_id = frame.get("User-Id")
        return bytes.fromhex(user_id) if isinstance(user_id, str) else None
    except (zmq.ZMQError, ValueError):
        return None


def _cut(frame: zmq.Frame) -> None:
    """Close the TCP connection a message came on. ZeroMQ has no call for one connection of a
    ROUTER, so this shuts down its socket by its descriptor (ZMQ_SRCFD), once the descriptor's
    peer is still the message's (else ZeroMQ closed it meanwhile and the number may be a new
    connection's); ZeroMQ then sees the connection end, drops it, and ZAP answers a reconnect."""
    try:
        fd = frame.get(zmq.SRCFD)
        address = frame.get("Peer-Address")
        conn = socket.socket(fileno=os.dup(fd))
    except (zmq.ZMQError, OSError):
        return
    try:
        if conn.getpeername()[0] == address:
            conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # gone already
    finally:
        conn.close()


def _close_watched(loop: asyncio.AbstractEventLoop, sock: zmq.Socket[bytes]) -> None:
    """Stop watching a socket's FD, then close it (in that order: a closed FD's number may be
    given to the next socket opened)."""
    loop.remove_reader(int_option(sock, _FD))
    sock.close(linger=0)


def _settle(outcome: asyncio.Future[bool | None], value: bool | None) -> None:
    if not outcome.done():
        outcome.set_result(value)


def _address_ip(address: str) -> str:
    """The IP of a `tcp://ip:port` or `tcp://[ip]:port` endpoint."""
    host = address.removeprefix("tcp://").rpartition(":")[0]
    return host.strip("[]")
