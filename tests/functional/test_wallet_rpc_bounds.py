"""The wallet RPC's connection bounds against a real `snode-wallet --rpc-bind` (issue #33): the
admin RPC's gate (`api.connections`) applies, so a local process holding half-sent requests
(slowloris) is cut at the header deadline and over the caps, and the owner's call still gets in;
a body that never comes gets 408 at the body deadline."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from snode.api.connections import HEADER_TIMEOUT, MAX_PER_CLIENT
from snode.api.server import BODY_TIMEOUT
from snode.params import REGTEST
from tests.functional.framework import narrator, next_loopback_ip, scaled, wait_until
from tests.functional.test_admin_bounds import HALF_SENT, _closed
from tests.functional.wallet_helpers import Wallet, WalletServer

log = narrator(__name__)


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
