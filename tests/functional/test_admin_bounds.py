"""The admin port's bounds against a real daemon (issue #33, item 7): a header deadline against
slowloris, a body deadline, a cap on connections that evicts half-sent requests first so that an
honest call still gets in, event streams capped per client by displacing the oldest (sixteen
idle streams do not lock out another), and no stream for a web page's tags. The wallet RPC
(`snode-wallet --rpc-bind`) has the same gate: half-sent requests to it are cut and its owner's
call gets in."""

from __future__ import annotations

import http.client
import socket
import time
from pathlib import Path

from snode.api.connections import HEADER_TIMEOUT, MAX_PER_CLIENT
from snode.api.server import BODY_TIMEOUT
from snode.api.sse import MAX_CLIENTS
from snode.params import REGTEST
from tests.functional.framework import assert_equal, narrator, next_loopback_ip, scaled, wait_until
from tests.functional.wallet_helpers import Wallet, WalletServer

log = narrator(__name__)

HALF_SENT = 200


def _closed(sock: socket.socket) -> bool:
    """Whether the server closed `sock` (EOF or a reset; a timeout means it is still open)."""
    try:
        return sock.recv(4096) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def _stream(node, **headers: str) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    conn = http.client.HTTPConnection(node.ip, node.rpc_port, timeout=scaled(10))
    conn.request("GET", "/events", headers={"Accept": "text/event-stream", **headers})
    return conn, conn.getresponse()


def test_half_sent_requests_are_cut_and_an_honest_call_still_gets_in(nodes):
    node = nodes.add()
    log.info("%d connections that send half a request head, then a body that never ends", HALF_SENT)
    socks = []
    try:
        for _ in range(HALF_SENT):
            sock = socket.create_connection((node.ip, node.rpc_port), timeout=scaled(5))
            sock.settimeout(0.05)
            sock.sendall(b"POST /json_rpc HTTP/1.1\r\nHost: x\r\n")
            socks.append(sock)
        body = socket.create_connection((node.ip, node.rpc_port), timeout=scaled(BODY_TIMEOUT + 5))
        body.sendall(b"POST /json_rpc HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100\r\n\r\n{" % node.ip.encode())
        started = time.monotonic()
        log.info("get_info answers: the oldest half-sent connections made room")
        assert_equal(node.get_info()["height"], 0)
        still = [s for s in socks if not _closed(s)]
        log.info("%d of them still open; at most %d an address", len(still), MAX_PER_CLIENT)
        assert len(still) <= MAX_PER_CLIENT, len(still)
        wait_until(lambda: all(_closed(s) for s in still), timeout=scaled(HEADER_TIMEOUT + 5),
                   what="the header deadline closing the rest")
        log.info("Closed %.1f s after they opened (the deadline is %g s)", time.monotonic() - started,
                 HEADER_TIMEOUT)
        answer = body.recv(4096)
        log.info("The body that never came: %r after %.1f s", answer[:40], time.monotonic() - started)
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert time.monotonic() - started < scaled(BODY_TIMEOUT + 3)
        body.close()
    finally:
        for sock in socks:
            sock.close()


def test_idle_event_streams_do_not_lock_out_another_and_web_pages_get_none(nodes):
    node = nodes.add()
    log.info("A process holds %d idle event streams", MAX_CLIENTS)
    held = [_stream(node) for _ in range(MAX_CLIENTS)]
    try:
        assert all(response.status == 200 for _, response in held)
        log.info("Another client still gets one: the oldest idle one is displaced, and told")
        conn, response = _stream(node)
        assert_equal(response.status, 200)
        oldest = held[0][1]
        ending = oldest.read()  # to the end of the stream: the daemon closed it
        assert b"event: displaced" in ending, ending[-200:]
        assert_equal(held[1][1].status, 200)
        conn.close()
        log.info("A web page's tag or cross-site fetch gets no stream")
        for headers, status in (({"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Dest": "image"}, 403),
                                ({"Accept": "image/avif,image/webp,*/*"}, 406),
                                ({"Origin": "http://evil.example"}, 403)):
            conn, response = _stream(node, **headers)
            assert_equal(response.status, status, str(headers))
            conn.close()
        conn, response = _stream(node, **{"Sec-Fetch-Site": "same-origin"})
        assert_equal(response.status, 200, "the web view's own page")
        conn.close()
    finally:
        for conn, _ in held:
            conn.close()


def test_half_sent_requests_to_the_wallet_are_cut_and_its_owner_still_gets_in(nodes, tmp_path: Path) -> None:
    node = nodes.add()
    wallet = Wallet(node, tmp_path, "owner")
    ip = next_loopback_ip()
    server = WalletServer(wallet, ip, tmp_path / "wallet-rpc.log")
    socks = []
    try:
        log.info("%d connections that send half a request head, then a body that never ends", HALF_SENT)
        for _ in range(HALF_SENT):
            sock = socket.create_connection((ip, REGTEST.wallet_rpc_port), timeout=scaled(5))
            sock.settimeout(0.05)
            sock.sendall(b"POST /json_rpc HTTP/1.1\r\nHost: x\r\n")
            socks.append(sock)
        body = socket.create_connection((ip, REGTEST.wallet_rpc_port), timeout=scaled(BODY_TIMEOUT + 5))
        login = server.headers["Authorization"].encode()
        body.sendall(b"POST /json_rpc HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\nContent-Type: application/json"
                     b"\r\nContent-Length: 100\r\n\r\n{" % (ip.encode(), login))
        started = time.monotonic()
        log.info("The owner's get_address answers: the oldest half-sent connections made room")
        assert server.call("get_address")["result"] == {"address": wallet.address}
        still = [s for s in socks if not _closed(s)]
        log.info("%d of them still open; at most %d an address", len(still), MAX_PER_CLIENT)
        assert len(still) <= MAX_PER_CLIENT, len(still)
        wait_until(lambda: all(_closed(s) for s in still), timeout=scaled(HEADER_TIMEOUT + 5),
                   what="the header deadline closing the rest")
        answer = body.recv(4096)
        log.info("The body that never came: %r after %.1f s", answer[:40], time.monotonic() - started)
        assert answer.startswith(b"HTTP/1.1 408"), answer
        body.close()
    finally:
        for sock in socks:
            sock.close()
        assert server.stop() == 0
