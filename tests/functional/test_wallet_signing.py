"""The wallet signs what it spends: a daemon that lies about the amount of one of the wallet's
outputs cannot make it lose coins.

The wallet runs against a small HTTP proxy (a real socket server on loopback) that forwards every
call to a real regtest daemon and rewrites one output's amount in the answers that carry it
(`get_outputs`). A transfer built on a smaller amount than held would, under version 1's
signatures, have paid the difference to the producer as a fee; a transfer on a larger amount
spends more than the output holds. Both are refused (the wallet's signature commits to the amount
it was told, the chain checks it against the amount it holds), and the wallet's coins, read from
the real daemon afterwards, are all there and still spendable.
"""

from __future__ import annotations

import copy
import json
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from snode.params import COIN
from tests.functional.framework import assert_equal, narrator, next_loopback_ip
from tests.functional.wallet_helpers import funded, mine

log = narrator(__name__)
HELD = 100 * COIN


class LyingDaemon:
    """What `Wallet` needs of a node (`ip`, `rpc_port`), served by a proxy in front of one."""

    def __init__(self, ip: str, port: int) -> None:
        self.ip = ip
        self.rpc_port = port


def _lie(body: bytes, factor: float) -> bytes:
    """A get_outputs answer with its first output's amount multiplied by factor."""
    reply = json.loads(body)
    outputs = reply.get("result", {}).get("outputs") or []
    if outputs:
        outputs[0]["amount"] = int(outputs[0]["amount"] * factor)
    return json.dumps(reply).encode()


@contextmanager
def lying_proxy(node: Any, factor: float) -> Iterator[LyingDaemon]:
    """A proxy on loopback to node's admin RPC that multiplies one output's amount by factor."""
    target = f"http://{node.ip}:{node.rpc_port}"

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802  (http.server's name)
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            request = urllib.request.Request(target + self.path, data=body, method="POST",
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=30) as answer:
                status, data = answer.status, answer.read()
            if json.loads(body).get("method") == "get_outputs":
                data = _lie(data, factor)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    ip = next_loopback_ip()
    server = ThreadingHTTPServer((ip, 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield LyingDaemon(ip, server.server_port)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.mark.parametrize(
    ("factor", "amount", "refusal"),
    [
        (0.5, 10, "bad signature"),  # told 50 of 100: the other 50 would have gone as a fee
        (1.5, 120, "hold only"),  # told 150 of 100: it would spend more than it holds
    ],
    ids=["smaller", "larger"],
)
def test_a_daemon_lying_about_an_amount_costs_the_wallet_nothing(sn, tmp_path, factor, amount, refusal):
    log.info("A wallet holds one output of 100 coins on a real daemon")
    wallets = funded(sn, tmp_path, {"victim": HELD, "payee": COIN})
    victim, payee = wallets["victim"], wallets["payee"]
    assert_equal(victim.balances()["unlocked"], HELD)
    with lying_proxy(sn, factor) as liar:
        lied_to = copy.copy(victim)  # the same wallet file, opened against the proxy
        lied_to.node = liar
        log.info(f"Through a proxy that says the output holds {factor}x its amount, the balance is a lie")
        assert_equal(lied_to.balances()["unlocked"], int(HELD * factor))
        log.info(f"A transfer of {amount} coins is built and signed on that lie; the network refuses it")
        sent = lied_to.run(f"transfer {payee.address} {amount}", yes=True)
        errors = [line for line in sent.lines if line.startswith("Error:")]
        assert sent.rc == 1 and len(errors) == 1 and refusal in errors[0], sent.out + sent.err
    log.info("On the real daemon: nothing in the mempool, every coin still the wallet's")
    assert_equal(sn.get_mempool()["transactions"], [], "mempool")
    mine(sn)
    assert_equal(victim.balances(), {"balance": HELD, "unlocked": HELD})
    assert_equal(sum(o["amount"] for o in sn.get_outputs(address=victim.address)["outputs"]), HELD)
    log.info("Told the truth, the same wallet spends the same output")
    victim.ok(f"transfer {payee.address} {amount if amount < 100 else 50}", yes=True)
