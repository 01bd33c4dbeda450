"""The public OMQ port (`--omq-public=<ip>:<port>`): the read-only RPC over ZeroMQ, for
anyone on the internet, as Oxen's public OMQ port.

CurveZMQ with the service node's X25519 key as the server key (`get_service_node_key` gives it
as `service_node_x25519_pubkey`); any client key is accepted (this context has no ZAP handler, so
quorumnet's registered-SN rule does not apply here). A request is two frames `[method, json
params]` (params may be empty) on a DEALER; the reply is `[status, json]`: `200` with the result,
or an error status with `{"error": "<one line>"}`: 400 bad request, 404 unknown or admin-only
method, 413 too large, 429 rate-limited, 500 internal error. Each client IP has a token bucket;
requests are answered one at a time, so a flood waits in ZeroMQ's bounded queues, not in memory
of ours.

The ROUTER is a plain `zmq` socket whose FD the event loop watches (as quorumnet's): the FD only
says that the socket's state may have changed, and any recv, send or read of `EVENTS` takes that
signal, so the server looks at `EVENTS` before each request and waits only when none is there.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Final

import msgspec
import zmq

from snode.api.errors import RpcError
from snode.common import decode_reasons
from snode.common.descriptors import DescriptorWatch
from snode.core.crypto import SigningKey, x25519_public
from snode.net.bans import address_key
from snode.net.quorumnet import int_option
from snode.net.zmq_guard import Caps, ListenerGuard
from snode.rpc.methods import MethodTable

log = logging.getLogger(__name__)

PUBLIC_METHODS: Final = frozenset({
    "get_info", "get_service_nodes", "get_block", "get_height", "get_transaction", "send_raw_transaction",
})
"""What the public port answers; everything else (admin, regtest) is 404 here."""
PUBLIC_INFO_FIELDS: Final = (
    "height", "target_height", "network", "version", "top_block_hash", "genesis_hash",
    "service_node_count", "block_production", "immutable_height", "mempool_min_fee_rate",
)
"""`get_info` without what only the operator should see (status line, peers, proof refusals)."""
MAX_MESSAGE: Final = 1 << 20
RATE: Final = 20.0
"""Requests a second one client IP may make, on average."""
BURST: Final = 40.0
ANSWER_BYTES_PER_TOKEN: Final = 65_536
"""An answer costs its client a request for each 64 KiB of it, charged once it is made (the
bucket may go into debt): `get_block` of a full 2 MB block is a 4.7 MB answer that takes about
70 ms of the event loop to make (13,000 transaction ids hashed, the hex, the JSON); at one
request each, one client had 94 MB/s of them and more than the loop's whole time."""
TX_BYTES_PER_TOKEN: Final = 1_024
"""`send_raw_transaction` costs a request for each KiB of its transaction (BURST at most): its
signatures are checked on the event loop before it can be refused, one an input, about 900 in a
transaction of 93 KB, and one bad signature at the end makes all of them work for nothing. At one
request each, 80 copies of such a transaction sent at once by one client held this loop for 29 s
(its blocks, votes and proofs with it); now a client has at most RATE KiB of transactions, about
200 signatures, checked a second."""
TX_TOKENS_A_SECOND: Final = 64.0
"""KiB of transactions the port takes a second from all its clients together (bursts of
TX_TOKENS_BURST; a block carries at most 2 MB each 120 s, 17 KB/s); past it a
`send_raw_transaction` is answered 429 "busy". Each address's own budget alone let 32 addresses
have 160 copies of a 93 KB transaction whose last signature is bad checked in 10 s (2.8 CPU-s of
the event loop, the admin RPC waiting 0.9 s), and the loop's whole time from about 64."""
TX_TOKENS_BURST: Final = 256.0
ANSWER_TOKENS_A_SECOND: Final = 128.0
"""Answers the port makes a second in all, in ANSWER_BYTES_PER_TOKEN units (8 MiB/s; bursts of
ANSWER_TOKENS_BURST, 32 MiB): a request that finds none left is answered 429 "busy". With
STALLED_CLIENT_MS it bounds what clients that never read can make ZeroMQ hold for them, however
many addresses they come from: at most the burst and 10 s of the rate, 112 MiB, where each
address's own bucket alone would allow 1.3 MB/s for each of 256 connections."""
ANSWER_TOKENS_BURST: Final = 512.0
BUDGET_MIB: Final = ANSWER_TOKENS_A_SECOND * ANSWER_BYTES_PER_TOKEN / 2**20
STALLED_CLIENT_MS: Final = 10_000
"""ZMQ_TCP_MAXRT (Linux's TCP_USER_TIMEOUT): a connection whose client has read nothing for this
long, its TCP window shut, is closed by the kernel, and ZeroMQ frees the answers queued for it
(up to ANSWERS_QUEUED of them). A client that reads, however slowly, is not cut."""
_ALL: Final = "*"
MAX_CLIENTS_TRACKED: Final = 10_000
QUEUE: Final = 64
"""ZeroMQ's receive high-water mark, per connection: a client's requests beyond it wait in TCP
(ZeroMQ stops reading that connection), so one connection holds at most 64 requests of
MAX_MESSAGE in the daemon's memory."""
ANSWERS_QUEUED: Final = 1_000
"""ZeroMQ's send high-water mark, per connection: answers beyond it to a client that does not read
are dropped. Not QUEUE: a client that pipelines its requests (sends many, then reads) must get
every answer even when the daemon answers faster than ZeroMQ's I/O thread writes (64 dropped
answers of a 500-request burst under load)."""
LISTENER_CAPS: Final = Caps(pending_per_ip=8, pending=None, per_ip=8, total=256)
"""Connections a client address may hold, handshake done or not: 8 (a ninth is cut), and 256 in
all (over it the newcomer is cut), `net.zmq_guard`; a handshake not done in 5 s is closed. Any
key completes the handshake here, so every connection is an anonymous one."""
REQUESTS_A_TURN: Final = 64
"""Requests answered before the server lets the event loop run (a queued request, a 429 or a
method that does not wait is answered without a suspension): one client's flood cannot hold the
loop that produces blocks and casts votes (a transaction's signatures: TX_BYTES_PER_TOKEN)."""

_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder().encode


class TokenBuckets:
    """A token bucket per client IP (bounded: the least recently seen are forgotten)."""

    def __init__(self, rate: float = RATE, burst: float = BURST) -> None:
        self.rate, self.burst = rate, burst
        self._buckets: dict[str, tuple[float, float]] = {}

    def take(self, client: str, now: float, cost: float = 1.0) -> bool:
        """Whether `client` may make a request now (a token in its bucket); if so, `cost` tokens
        are taken, which may leave the bucket in debt: its next request waits until it is paid."""
        tokens, last = self._buckets.pop(client, (self.burst, now))
        tokens = min(self.burst, tokens + (now - last) * self.rate)
        allowed = tokens >= 1.0
        self._buckets[client] = (tokens - cost if allowed else tokens, now)
        if len(self._buckets) > MAX_CLIENTS_TRACKED:
            del self._buckets[next(iter(self._buckets))]
        return allowed

    def charge(self, client: str, cost: float) -> None:
        """Take `cost` more tokens of a request already let through (its answer's size), into
        debt if need be."""
        found = self._buckets.get(client)
        if found is not None and cost > 0:
            self._buckets[client] = (found[0] - cost, found[1])


def parse_request(frames: list[bytes]) -> tuple[str, dict[str, Any]]:
    """(method, params) of a request's frames (after the routing id); RequestError says why not."""
    if len(frames) not in (1, 2):
        raise RequestError(b"400", f"a request is [method, json params]: got {len(frames)} frames")
    try:
        method = frames[0].decode()
    except UnicodeDecodeError:
        raise RequestError(b"400", "the method is not UTF-8 text") from None
    if method not in PUBLIC_METHODS:
        raise RequestError(b"404", f"method '{method[:40]}' is not served on the public port; "
                                   f"these are: {', '.join(sorted(PUBLIC_METHODS))}")
    raw = frames[1] if len(frames) == 2 else b""
    if not raw.strip():
        return method, {}
    try:
        params = _decode.decode(raw)
    except decode_reasons.DECODE_FAILURES as err:
        raise RequestError(b"400", f"params are not JSON: {decode_reasons.reason(err)}") from None
    if not isinstance(params, dict):
        raise RequestError(b"400", "params must be a JSON object")
    return method, params


def transaction_cost(method: bytes, params: bytes) -> float:
    """Requests' worth of the bucket a request takes, from its frames before they are parsed:
    for `send_raw_transaction`, its params' size in KiB of transaction (two hex digits a byte), 1
    at least and BURST at most (see TX_BYTES_PER_TOKEN); 1 for every other request."""
    if method != b"send_raw_transaction":
        return 1.0
    return float(min(BURST, max(1, -(-len(params) // (2 * TX_BYTES_PER_TOKEN)))))


class RequestError(Exception):
    def __init__(self, status: bytes, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class PublicOmq:
    """The ROUTER that serves the public methods of a daemon's MethodTable."""

    def __init__(self, methods: MethodTable, key: SigningKey, *, host: str, port: int,
                 descriptors: DescriptorWatch | None = None) -> None:
        self.methods = methods
        self.descriptors = descriptors
        self.guard: ListenerGuard | None = None
        self.host, self.port = host, port
        self.server_key = x25519_public(key.public)
        self._secret = key.x25519_secret()
        self._ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self._router: zmq.Socket[bytes] | None = None
        self._task: asyncio.Task[None] | None = None
        self._readable = asyncio.Event()
        self.buckets = TokenBuckets()
        self.answers = TokenBuckets(ANSWER_TOKENS_A_SECOND, ANSWER_TOKENS_BURST)
        """The node-wide answer budget (one bucket, `_ALL`)..."""
        self.transactions = TokenBuckets(TX_TOKENS_A_SECOND, TX_TOKENS_BURST)
        """...and transaction budget."""

    def start(self) -> None:
        """Bind (raises zmq.ZMQError when the port is taken) and serve."""
        router = self._ctx.socket(zmq.ROUTER)
        router.setsockopt(zmq.CURVE_SERVER, 1)
        router.setsockopt(zmq.CURVE_SECRETKEY, self._secret)
        router.setsockopt(zmq.CURVE_PUBLICKEY, self.server_key)
        router.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE)
        router.setsockopt(zmq.RCVHWM, QUEUE)
        router.setsockopt(zmq.SNDHWM, ANSWERS_QUEUED)
        router.setsockopt(zmq.LINGER, 0)
        router.setsockopt(zmq.ROUTER_MANDATORY, 0)
        router.setsockopt(zmq.TCP_MAXRT, STALLED_CLIENT_MS)
        self.guard = ListenerGuard(self._ctx, router, name="public OMQ", caps=LISTENER_CAPS,
                                   descriptors=self.descriptors)
        host = f"[{self.host}]" if ":" in self.host else self.host
        try:
            router.bind(f"tcp://{host}:{self.port}")
        except zmq.ZMQError:
            self.guard.close()  # its monitor socket would keep the context from ending
            self.guard = None
            router.close(linger=0)
            raise
        self._router = router
        loop = asyncio.get_running_loop()
        loop.add_reader(int_option(router, zmq.FD), self._on_signal)
        self._task = loop.create_task(self._serve(), name="public omq")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.guard is not None:
            self.guard.close()
        if self._router is not None:
            # Unwatched before it is closed: a closed FD's number goes to the next one opened.
            asyncio.get_running_loop().remove_reader(int_option(self._router, zmq.FD))
            self._router.close(linger=0)
        self._ctx.term()

    def _on_signal(self) -> None:
        """The ROUTER's FD signalled: reading EVENTS takes the signal (or the loop would call
        this again at once while the server awaits a method), and says whether a request waits."""
        if self._router is not None and int_option(self._router, zmq.EVENTS) & zmq.POLLIN:
            self._readable.set()

    async def _serve(self) -> None:
        assert self._router is not None
        router = self._router
        answered = 0  # since the loop last had a turn
        while True:
            if not int_option(router, zmq.EVENTS) & zmq.POLLIN:
                answered = 0
                self._readable.clear()
                await self._readable.wait()
                continue
            if answered == REQUESTS_A_TURN:
                answered = 0
                await asyncio.sleep(0)
                continue  # EVENTS is read again: a wait may have taken the FD's signal
            answered += 1
            frames = router.recv_multipart(zmq.NOBLOCK, copy=False)
            ident = frames[0].bytes
            peer = str(frames[0].get("Peer-Address") or "?")
            status, body = await self._answer([f.bytes for f in frames[1:]], peer)
            try:
                router.send_multipart([ident, status, body], flags=zmq.NOBLOCK)
            except zmq.ZMQError:
                continue  # the client is gone or not reading: its answer is dropped

    async def _answer(self, frames: list[bytes], address: str) -> tuple[bytes, bytes]:
        peer = address_key(address)  # an IPv6 /64 is one client, as on the P2P port
        # A transaction's cost is known once parsed, so its bucket is charged after the fact.
        cost = transaction_cost(frames[0] if frames else b"", frames[1] if len(frames) == 2 else b"")
        if not self.buckets.take(peer, time.monotonic(), cost):
            return b"429", _encode({"error": f"rate-limited: at most {RATE:g} requests a second per client, "
                                             f"a transaction a request for each {TX_BYTES_PER_TOKEN} bytes"})
        if not self.answers.take(_ALL, time.monotonic(), 0.0):
            return b"429", _encode({"error": f"busy: this port makes at most {BUDGET_MIB:g} MiB of answers a "
                                             "second for all its clients; ask again shortly"})
        if frames[:1] == [b"send_raw_transaction"] and not self.transactions.take(_ALL, time.monotonic(), cost):
            return b"429", _encode({"error": f"busy: this port takes at most {TX_TOKENS_A_SECOND:g} KiB of "
                                             "transactions a second for all its clients; send it again shortly"})
        try:
            method, params = parse_request(frames)
            result = await self.methods.call(method, params)
        except RequestError as err:
            return err.status, _encode({"error": err.message})
        except RpcError as err:
            return b"400", _encode({"error": err.message, "code": err.code})
        except Exception:  # a bug must never end the public port: log it, answer 500
            log.exception("public OMQ: %s failed", frames[0][:40] if frames else b"?")
            return b"500", _encode({"error": "internal error; the operator's log has the details"})
        if method == "get_info":
            info = msgspec.json.decode(result)
            result = {name: info[name] for name in PUBLIC_INFO_FIELDS}
        payload = result if isinstance(result, msgspec.Raw) else _encode(msgspec.to_builtins(result))
        body = bytes(payload)
        self.buckets.charge(peer, len(body) / ANSWER_BYTES_PER_TOKEN - 1)
        self.answers.charge(_ALL, len(body) / ANSWER_BYTES_PER_TOKEN)
        return b"200", body
